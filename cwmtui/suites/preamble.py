"""Module headers for training programs: docstrings, comments, imports, blank lines.

Real programs (the demos in ``samples/``, a user's own file) seldom begin with the traced
``def``: a module docstring, comments and imports come first, so the entry's body is not on
line 2 and prose full of words and code fragments sits between the source's start and the
marked ``def``. A model trained only on bare programs learns "copy the second line" instead of
"copy the line after the marker" and goes wrong at the first step of every real file.
``preamble(rng)`` draws such a header; the family generator prepends it to a share of programs.
"""

from __future__ import annotations

import random

PROSE = (
    "the", "a", "of", "and", "to", "in", "is", "each", "every", "step", "state", "model", "trace",
    "loop", "list", "value", "values", "string", "letters", "counter", "total", "small", "long",
    "horizon", "world", "program", "function", "returns", "keeps", "tracks", "grows", "after",
    "before", "line", "errors", "never", "wash", "out", "depends", "on", "all", "it", "has",
    "words", "numbers", "input", "result", "demo", "example", "shows", "where", "goes", "wrong",
    "x", "i", "n", "items", "text", "out", "cups", "swaps", "digits", "sum", "while", "for",
)
CODE_BITS = (
    "x = x + 1", "for i in range(n):", "return total", "out.append(c)", "if n > 3:",
    "total += v", "s[::-1]", "d.get(k, 0)", "a, b = b, a", "def f(x):", "`cwmtui demo.py`",
    "f(3) == 9", "xs.sort()", "while n:", "raise ValueError", "except KeyError:",
)
MODULES = ("math", "string", "itertools", "functools", "collections", "re", "operator")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(PROSE) for _ in range(rng.randint(3, 11))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words) + 1), rng.choice(CODE_BITS))
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice((".", ".", ",", ":", ""))


def _docstring(rng: random.Random) -> list[str]:
    quote = rng.choice(('"""', '"""', "'''"))
    first = _sentence(rng)
    if rng.random() < 0.3:
        return [quote + first + quote]
    lines = [quote + first, ""]
    for _ in range(rng.randint(1, 5)):
        lines.append(_sentence(rng) if rng.random() < 0.85 else "    " + rng.choice(CODE_BITS))
    return lines + [quote]


def preamble(rng: random.Random) -> str:
    """A module header ending in blank lines, ready to prepend to a program's source."""
    parts: list[list[str]] = []
    if rng.random() < 0.7:
        parts.append(_docstring(rng))
    if rng.random() < 0.4:
        parts.append(["# " + _sentence(rng) for _ in range(rng.randint(1, 3))])
    if rng.random() < 0.35:
        names = rng.sample(MODULES, rng.randint(1, 3))
        parts.append([f"import {m}" for m in names])
    if not parts:
        parts.append(["# " + _sentence(rng)])
    rng.shuffle(parts)
    lines: list[str] = []
    for part in parts:
        lines += part + [""] * rng.randint(0, 1)
    return "\n".join(lines).rstrip("\n") + "\n" * rng.randint(2, 4)
