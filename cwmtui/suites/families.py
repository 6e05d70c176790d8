"""Training families: small generated programs in the styles the bundled CWM must trace.

Written by our own generator (never CRUXEval itself, which is evaluation data):

- ``crux``: CRUXEval-style ``def f(...)`` over str / list / dict methods, in the CRUXEval wrapper
  (``main`` calls ``f``), so the trace starts like the CRUXEval-O harness;
- ``loop``: loops with counters and accumulators, conditions, early ``break``;
- ``helper``: a helper function called from a loop or a chain of calls;
- ``exception``: caught exceptions (in the function or raised by a callee), and the odd uncaught;
- ``grow``: samples/-style programs whose state grows (lists, strings, dicts built in loops);
- ``story``: programs shaped like the demos in ``samples/`` (a sequence that grows in a
  ``while`` loop, a pipeline of multi-line helpers, parsing with a caught exception in a callee,
  nested digit functions, a letter cipher, swaps in a list), with random names and inputs;
- ``copy``: straight-line code binding random names to random literals (and copies of them):
  nothing in the trace can be guessed, only copied from the source or from earlier frames, which
  is the skill a small model is slowest to find;
- ``s5`` and ``zoo``: the evaluation generators with any N / depth (training seeds).

``program(family, seed, index, size)`` draws one; ``size`` (1..5) scales loop lengths and
statement counts for the length curriculum.
"""

from __future__ import annotations

import random

from ..interpreter import cruxeval_program
from . import SuiteProgram, make_program, rng_for, s5, zoo
from .preamble import preamble
from .quotes import double_quoted

FAMILIES = ("crux", "loop", "helper", "exception", "grow", "story", "copy", "s5", "zoo")
WORDS = ("apple", "sky", "banana", "rose", "hello", "mouse", "grass", "moon", "code", "lemon",
         "stars", "ocean", "tree", "bob", "kiwi", "abc", "xyz", "data", "level", "noon", "river")
LETTERS = "abcdeilmnorstxyz"
KEYS = ("a", "b", "c", "x", "y", "k", "n", "key", "one", "two")
PREAMBLE_SHARE = 0.4  # of programs that begin with a module header (see preamble.py)
DOUBLE_QUOTE_SHARE = 0.5  # of programs whose string literals are written "..." (see quotes.py)
#: S5 training programs have N up to this many swaps per size step (size 1..5); 6 reaches N = 30,
#: sources of about 1,100 bytes, whose documents still fit the 4096-token context
S5_N_PER_SIZE = 6


class Env:
    """Variables in scope by type, and fresh names."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.vars: dict[str, str] = {}
        self.counter = 0

    def of(self, kind: str) -> list[str]:
        return [n for n, k in self.vars.items() if k == kind]

    def pick(self, kind: str) -> str | None:
        names = self.of(kind)
        return self.rng.choice(names) if names else None

    def fresh(self, kind: str) -> str:
        stems = {"int": ("n", "count", "total", "i", "k", "m", "acc", "x"),
                 "str": ("s", "text", "out", "word", "res", "t"),
                 "list": ("nums", "items", "lst", "vals", "arr", "res"),
                 "slist": ("words", "parts", "chars", "names"),
                 "dict": ("d", "counts", "table", "seen"),
                 "bool": ("flag", "ok", "found")}[kind]
        for stem in self.rng.sample(stems, len(stems)):
            if stem not in self.vars:
                return stem
        self.counter += 1
        return f"{stems[0]}{self.counter}"


def lit(kind: str, rng: random.Random) -> str:
    if kind == "int":
        return str(rng.randint(0, 12))
    if kind == "str":
        return repr(rng.choice(WORDS) if rng.random() < 0.8 else "".join(rng.choices(LETTERS, k=rng.randint(1, 6))))
    if kind == "list":
        return repr([rng.randint(0, 9) for _ in range(rng.randint(0, 5))])
    if kind == "slist":
        return repr(rng.sample(WORDS, rng.randint(1, 4)))
    if kind == "dict":
        return repr({k: rng.randint(0, 9) for k in rng.sample(KEYS, rng.randint(0, 3))})
    if kind == "bool":
        return rng.choice(("True", "False"))
    raise ValueError(kind)


def char(rng: random.Random) -> str:
    return repr(rng.choice(LETTERS))


def expr(kind: str, env: Env, depth: int = 0) -> str:
    """A random expression of ``kind`` over the variables in ``env``."""
    rng = env.rng
    i, s, l, sl, d = (env.pick(k) for k in ("int", "str", "list", "slist", "dict"))
    options: list[str] = [lit(kind, rng)]
    if kind == "int":
        if i:
            options += [f"{i} + {rng.randint(1, 5)}", f"{i} * {rng.randint(2, 3)}", f"{i} - {rng.randint(1, 4)}",
                        f"{i} // 2", f"{i} % {rng.randint(2, 7)}"]
        if s:
            options += [f"len({s})", f"{s}.count({char(rng)})", f"{s}.find({char(rng)})"]
        if l:
            options += [f"len({l})", f"sum({l})", f"{l}.count({rng.randint(0, 9)})"]
        if d:
            options += [f"len({d})", f"{d}.get({rng.choice(KEYS)!r}, 0)", f"sum({d}.values())"]
    elif kind == "str":
        if s:
            options += [f"{s}.upper()", f"{s}.lower()", f"{s}[::-1]", f"{s}[1:]", f"{s}[:{rng.randint(1, 4)}]",
                        f"{s}.replace({char(rng)}, {char(rng)})", f"{s} + {char(rng)}", f"{s}.capitalize()",
                        f"{s}.strip({char(rng)})", f"{s}.title()", f"{s}.swapcase()", f"{s} * 2",
                        f"{s}.zfill({rng.randint(3, 8)})", f"{s}.center({rng.randint(4, 9)}, '*')"]
        if i:
            options += [f"str({i})"]
        if sl:
            options += [f"' '.join({sl})", f"''.join({sl})", f"'-'.join({sl})"]
    elif kind == "list":
        if l:
            options += [f"sorted({l})", f"{l}[::-1]", f"{l} + [{rng.randint(0, 9)}]", f"{l}[1:]",
                        f"[v * 2 for v in {l}]", f"{l}[:{rng.randint(1, 3)}]", f"sorted({l}, reverse=True)"]
        if i:
            options += [f"list(range({i} % 6))"]
        if d:
            options += [f"list({d}.values())"]
    elif kind == "slist":
        if s:
            options += [f"{s}.split({char(rng)})", f"list({s})", f"{s}.split()"]
        if sl:
            options += [f"sorted({sl})", f"{sl}[::-1]", f"{sl} + [{lit('str', rng)}]"]
        if d:
            options += [f"list({d})", f"sorted({d}.keys())"]
    elif kind == "dict":
        if d:
            options += [f"{d}.copy()", f"dict(sorted({d}.items()))", f"{{k: v + 1 for k, v in {d}.items()}}"]
        if sl:
            options += [f"dict.fromkeys({sl}, 0)", f"{{w: len(w) for w in {sl}}}"]
        if s:
            options += [f"{{c: {s}.count(c) for c in {s}}}"]
    elif kind == "bool":
        if s:
            options += [f"{s}.isalpha()", f"{s}.startswith({char(rng)})", f"{char(rng)} in {s}", f"{s}.islower()",
                        f"{s} == {s}[::-1]"]
        if i:
            options += [f"{i} > {rng.randint(0, 9)}", f"{i} % 2 == 0"]
        if l:
            options += [f"{rng.randint(0, 9)} in {l}", f"len({l}) > {rng.randint(1, 4)}"]
        if d:
            options += [f"{rng.choice(KEYS)!r} in {d}"]
    return rng.choice(options)


def cond(env: Env) -> str:
    """A condition over the variables (a literal True / False only when nothing else fits)."""
    for _ in range(4):
        text = expr("bool", env)
        if text not in ("True", "False"):
            return text
    return text


def mutation(env: Env) -> str | None:
    rng = env.rng
    options = []
    l, sl, d, i, s = (env.pick(k) for k in ("list", "slist", "dict", "int", "str"))
    if l:
        options += [f"{l}.append({expr('int', env)})", f"{l}.insert(0, {rng.randint(0, 9)})", f"{l}.sort()",
                    f"{l}.reverse()", f"{l}.extend([{rng.randint(0, 9)}, {rng.randint(0, 9)}])"]
        options += [f"if {l}:\n{{ind}}    {l}.pop()"]
    if sl:
        options += [f"{sl}.append({lit('str', rng)})", f"{sl}.sort()"]
    if d:
        options += [f"{d}[{rng.choice(KEYS)!r}] = {expr('int', env)}", f"{d}.pop({rng.choice(KEYS)!r}, None)",
                    f"{d}.update({{{rng.choice(KEYS)!r}: {rng.randint(0, 9)}}})",
                    f"{d}.setdefault({rng.choice(KEYS)!r}, {rng.randint(0, 9)})"]
    if i:
        options += [f"{i} += {expr('int', env)}", f"{i} -= 1", f"{i} *= 2"]
    if s:
        options += [f"{s} += {char(rng)}", f"{s} = {expr('str', env)}"]
    return rng.choice(options) if options else None


def simple(env: Env) -> str:
    """An assignment or a mutation (one line, maybe an ``if`` with a suite marked by {ind})."""
    rng = env.rng
    if env.vars and rng.random() < 0.5:
        m = mutation(env)
        if m:
            return m
    kind = rng.choice(("int", "str", "list", "slist", "dict", "bool", "int", "str"))
    existing = env.pick(kind)
    if existing and rng.random() < 0.4:
        return f"{existing} = {expr(kind, env)}"
    value = expr(kind, env)
    name = env.fresh(kind)
    env.vars[name] = kind
    return f"{name} = {value}"


def emit(lines: list[str], stmt: str, ind: str) -> None:
    for part in stmt.replace("{ind}", ind).split("\n"):
        lines.append(part if part.startswith(ind) else ind + part)


def block(env: Env, ind: str, count: int, size: int, allow_loop: bool = True) -> list[str]:
    rng = env.rng
    lines: list[str] = []
    for _ in range(count):
        r = rng.random()
        if allow_loop and r < 0.2:
            lines += loop(env, ind, size)
        elif r < 0.32 and env.vars:
            # names first bound inside a branch may be unbound after it: they leave scope
            before = dict(env.vars)
            lines.append(f"{ind}if {cond(env)}:")
            emit(lines, simple(env), ind + "    ")
            env.vars = dict(before)
            if rng.random() < 0.5:
                lines.append(f"{ind}else:")
                emit(lines, simple(env), ind + "    ")
                env.vars = dict(before)
        else:
            emit(lines, simple(env), ind)
    return lines


def loop(env: Env, ind: str, size: int) -> list[str]:
    rng = env.rng
    lines: list[str] = []
    acc = env.pick("int")
    if acc is None:
        acc = env.fresh("int")
        env.vars[acc] = "int"
        lines.append(f"{ind}{acc} = 0")
    r = rng.random()
    s, l, d = env.pick("str"), env.pick("list"), env.pick("dict")
    iterated = None
    if r < 0.25 and s:
        var, iterated = "ch", s
        lines.append(f"{ind}for {var} in {s}:")
        body = rng.choice([f"if {var} in {LETTERS[rng.randint(0, 6):][:5]!r}:\n{{ind}}    {acc} += 1",
                           f"{acc} += 1", f"if {var}.isalpha():\n{{ind}}    {acc} += ord({var}) % 7"])
    elif r < 0.45 and l:
        var, iterated = "v", l
        lines.append(f"{ind}for {var} in {l}:")
        body = rng.choice([f"{acc} += {var}", f"if {var} % 2 == 0:\n{{ind}}    {acc} += {var}",
                           f"{acc} = max({acc}, {var})", f"if {var} > {rng.randint(2, 7)}:\n{{ind}}    break"])
    elif r < 0.55 and d:
        iterated = d
        lines.append(f"{ind}for key, val in {d}.items():")
        body = rng.choice([f"{acc} += val", f"if val > {rng.randint(1, 6)}:\n{{ind}}    {acc} += 1"])
    elif r < 0.75:
        bound = rng.randint(1, 2 + 2 * size)
        lines.append(f"{ind}for i in range({bound}):")
        body = rng.choice([f"{acc} += i", f"{acc} = {acc} * 2 % 97", f"if i % {rng.randint(2, 3)} == 0:\n{{ind}}    {acc} += i",
                           f"{acc} += {rng.randint(1, 5)}"])
    else:
        bound = rng.randint(2, 3 + 3 * size)
        lines.append(f"{ind}while {acc} < {bound}:")
        body = f"{acc} += {rng.randint(1, 3)}"
        iterated = acc  # the loop's condition: the body must not touch it again
    emit(lines, body, ind + "    ")
    if rng.random() < 0.5:
        # one more statement in the body, touching neither the counter nor what is iterated
        saved = dict(env.vars)
        env.vars = {k: v for k, v in saved.items() if k not in (acc, iterated)}
        extra = simple(env)
        fresh = {k: v for k, v in env.vars.items() if k not in saved}
        env.vars = saved
        if "{ind}" not in extra and all(name not in extra.replace("(", " ").replace(".", " ").split() for name in (acc, iterated) if name):
            emit(lines, extra, ind + "    ")
            env.vars.update(fresh)
    return lines


def _params(env: Env, count: int) -> tuple[list[str], list[str]]:
    rng = env.rng
    names, args = [], []
    for _ in range(count):
        kind = rng.choice(("str", "list", "dict", "int", "str", "slist"))
        name = env.fresh(kind)
        env.vars[name] = kind
        names.append(name)
        args.append(lit(kind, rng))
    return names, args


def _ret(env: Env) -> str:
    return env.rng.choice(list(env.vars)) if env.vars else "None"


def crux(rng: random.Random, size: int) -> tuple[str, str]:
    env = Env(rng)
    names, args = _params(env, rng.randint(1, 2))
    body = block(env, "    ", rng.randint(1, 2 + size), size)
    code = f"def f({', '.join(names)}):\n" + "\n".join(body) + f"\n    return {_ret(env)}"
    return code, ", ".join(args)


def looped(rng: random.Random, size: int) -> str:
    env = Env(rng)
    names, args = _params(env, rng.randint(0, 2))
    body = []
    for _ in range(rng.randint(1, 1 + size // 2)):
        body += block(env, "    ", rng.randint(0, 2), size, allow_loop=False)
        body += loop(env, "    ", size)
    return _entry("f", names, body, env) + _call("f", args)


def _entry(name: str, params: list[str], body: list[str], env: Env, marker: bool = True) -> str:
    mark = "  # << START_OF_TRACE" if marker else ""
    return f"def {name}({', '.join(params)}):{mark}\n" + "\n".join(body or ["    pass"]) + f"\n    return {_ret(env)}\n"


def _call(name: str, args: list[str]) -> str:
    return f"\n{name}({', '.join(args)})\n"


def helper(rng: random.Random, size: int) -> str:
    henv = Env(rng)
    kind = rng.choice(("int", "str", "list"))
    hp = henv.fresh(kind)
    henv.vars[hp] = kind
    hbody = block(henv, "    ", rng.randint(1, 3), size, allow_loop=rng.random() < 0.3)
    hname = rng.choice(("step", "update", "clean", "score", "transform", "bump"))
    out = henv.pick(kind) or hp
    helper_src = f"def {hname}({hp}):\n" + "\n".join(hbody) + f"\n    return {out}\n\n"
    env = Env(rng)
    name = env.fresh(kind)
    env.vars[name] = kind
    body = [f"    {name} = {lit(kind, rng)}"]
    style = rng.random()
    if style < 0.5:
        body.append(f"    for _ in range({rng.randint(1, 1 + size)}):")
        body.append(f"        {name} = {hname}({name})")
    else:
        for _ in range(rng.randint(1, 1 + size)):
            body.append(f"    {name} = {hname}({name})")
    body += block(env, "    ", rng.randint(0, 2), size, allow_loop=False)
    env.vars = {name: kind, **env.vars}
    return helper_src + _entry("f", [], body, env) + _call("f", [])


RAISERS = (
    ("int({s})", "ValueError"),
    ("{d}[{k!r}]", "KeyError"),
    ("{l}[{n}]", "IndexError"),
    ("10 // ({i} - {i})", "ZeroDivisionError"),
    ("{s} + {i}", "TypeError"),
)


def excepting(rng: random.Random, size: int) -> str:
    env = Env(rng)
    env.vars.update({"s": "str", "d": "dict", "l": "list", "i": "int"})
    pre = [f"    s = {lit('str', rng)}", f"    d = {lit('dict', rng)}", f"    l = {lit('list', rng)}", f"    i = {rng.randint(0, 9)}"]
    rng.shuffle(pre)
    pre = pre[: rng.randint(1, 4)]
    have = {p.split("=")[0].strip() for p in pre}
    for name in list(env.vars):
        if name not in have:
            del env.vars[name]
    usable = [(e, x) for e, x in RAISERS if all("{" + v not in e for v in ("s", "d", "l", "i") if v not in have)]
    raiser, exc = rng.choice(usable or [("1 // 0", "ZeroDivisionError")])
    text = raiser.format(s="s", d="d", l="l", i="i", k=rng.choice(KEYS), n=rng.randint(0, 8))
    body = list(pre) + block(env, "    ", rng.randint(0, 1 + size // 2), size, allow_loop=False)
    env.vars.setdefault("res", "int")
    handler = rng.choice((exc, "Exception", f"({exc}, ValueError)"))
    as_e = rng.random() < 0.4
    body += ["    try:", f"        res = {text}", f"    except {handler}{' as e' if as_e else ''}:",
             "        res = " + (rng.choice(("-1", "0", "None", "str(e)", "type(e).__name__")) if as_e else rng.choice(("-1", "0", "None")))]
    if rng.random() < 0.3:
        body += ["    else:", "        res = 1"]
    body += block(env, "    ", rng.randint(0, 1), size, allow_loop=False)
    return _entry("f", [], body, env) + _call("f", [])


def callee_raises(rng: random.Random, size: int) -> str:
    limit = rng.randint(1, 3 + size)
    src = (f"def check(n):\n    if n > {limit}:\n        raise ValueError('too big: ' + str(n))\n    return n * 2\n\n")
    env = Env(rng)
    env.vars.update({"total": "int", "i": "int"})
    body = ["    total = 0", f"    for i in range({rng.randint(1, limit + 3)}):", "        try:",
            "            total += check(i)", "        except ValueError:", "            total -= 1"]
    return src + _entry("f", [], body, env) + _call("f", [])


def grow(rng: random.Random, size: int) -> str:
    env = Env(rng)
    n = rng.randint(2, 2 + 2 * size)
    style = rng.randrange(4)
    if style == 0:
        word = rng.choice(WORDS)
        env.vars.update({"out": "str", "ch": "str"})
        body = ["    out = ''", f"    for ch in {word!r}:", rng.choice(["        out = ch + out", "        out += ch.upper()",
                "        if ch not in out:\n            out += ch", "        out = out + ch * 2"])]
    elif style == 1:
        env.vars.update({"nums": "list", "i": "int"})
        body = ["    nums = []", f"    for i in range({n}):", rng.choice(["        nums.append(i * i)", "        nums.insert(0, i)",
                "        if i % 2:\n            nums.append(i)", "        nums = nums + [len(nums)]"])]
    elif style == 2:
        word = rng.choice(WORDS) + rng.choice(WORDS)
        env.vars.update({"counts": "dict", "ch": "str"})
        body = ["    counts = {}", f"    for ch in {word!r}:", "        counts[ch] = counts.get(ch, 0) + 1"]
    else:
        env.vars.update({"a": "int", "b": "int", "i": "int"})
        body = [f"    a, b = {rng.randint(0, 3)}, {rng.randint(1, 3)}", f"    for i in range({n}):",
                rng.choice(["        a, b = b, a + b", "        a, b = b, a", "        a, b = a + i, b * 2 % 11"])]
    body += block(env, "    ", rng.randint(0, 2), size, allow_loop=False)
    return _entry("f", [], body, env) + _call("f", [])


_HELPERS = {
    "double": ("xs", ["return [2 * x for x in xs]"]),
    "keep_odd_positions": ("xs", ["return xs[1::2]"]),
    "running_total": ("xs", ["totals = []", "acc = 0", "for x in xs:", "    acc += x", "    totals.append(acc)", "return totals"]),
    "drop_small": ("xs", ["out = []", "for x in xs:", "    if x > {k}:", "        out.append(x)", "return out"]),
    "shift": ("xs", ["return xs[1:] + xs[:1]"]),
    "square_each": ("xs", ["result = []", "for x in xs:", "    result.append(x * x % {m})", "return result"]),
    "reverse": ("xs", ["return xs[::-1]"]),
}


def story(rng: random.Random, size: int) -> str:
    style = rng.randrange(6)
    name = rng.choice(("run", "solve", "process", "main_loop", "compute"))
    if style == 0:  # a sequence that grows in a while loop
        n = rng.randint(2, 6 + 4 * size)
        odd = rng.choice(("3 * n + 1", "n + 1", "n * 3 - 1" if False else "n + 3"))
        return (f"def {name}(n):  # << START_OF_TRACE\n    path = [n]\n    while n != 1 and len(path) < {4 + 3 * size}:\n"
                f"        if n % 2 == 0:\n            n = n // 2\n        else:\n            n = {odd}\n"
                f"        path.append(n)\n    return len(path), max(path)\n\n{name}({n})\n")
    if style == 1:  # a pipeline of helpers
        chosen = rng.sample(sorted(_HELPERS), rng.randint(2, min(4, 1 + size)))
        k, m = rng.randint(1, 6), rng.choice((7, 10, 13))
        src = ""
        for h in chosen:
            param, body = _HELPERS[h]
            src += f"def {h}({param}):\n" + "".join(f"    {line.format(k=k, m=m)}\n" for line in body) + "\n\n"
        src += f"def {name}(xs):  # << START_OF_TRACE\n"
        prev = "xs"
        for i, h in enumerate(chosen, 1):
            src += f"    stage{i} = {h}({prev})\n"
            prev = f"stage{i}"
        src += f"    return {prev}\n\n"
        xs = [rng.randint(0, 9) for _ in range(rng.randint(2, 3 + size))]
        return src + f"{name}({xs!r})\n"
    if style == 2:  # parsing, an exception raised in the callee and caught by the caller
        items = [rng.choice((str(rng.randint(0, 99)), rng.choice(("x7", "2.5", "ten", "", "4a")))) for _ in range(rng.randint(2, 2 + size))]
        factor = rng.randint(2, 5)
        return (f"def parse_number(text):\n    value = int(text)\n    return value * {factor}\n\n\n"
                f"def {name}(items):  # << START_OF_TRACE\n    good = []\n    bad = []\n    for item in items:\n"
                f"        try:\n            good.append(parse_number(item))\n        except ValueError:\n"
                f"            bad.append(item)\n    return good, bad\n\n{name}({items!r})\n")
    if style == 3:  # nested digit functions
        n = rng.randint(10, 10 ** min(6, 1 + size))
        return ("def digits(n):\n    return [int(d) for d in str(n)]\n\n\n"
                "def digit_sum(n):\n    total = 0\n    for d in digits(n):\n        total += d\n    return total\n\n\n"
                f"def {name}(n):  # << START_OF_TRACE\n    steps = 0\n    while n >= 10:\n        n = digit_sum(n)\n"
                f"        steps += 1\n    return n, steps\n\n{name}({n})\n")
    if style == 4:  # a letter cipher over words
        text = " ".join(rng.sample(WORDS, rng.randint(1, 1 + size // 2)))
        shift = rng.randint(1, 5)
        return (f"def {name}(text, shift):  # << START_OF_TRACE\n    out = []\n    for word in text.split():\n"
                f"        rotated = ''\n        for ch in word:\n            rotated += chr((ord(ch) - 97 + shift) % 26 + 97)\n"
                f"        out.append(rotated{rng.choice(('', '[::-1]', '.upper()'))})\n    return '-'.join(out)\n\n{name}({text!r}, {shift})\n")
    cups = list("abcde")[: rng.randint(3, 5)]
    swaps = [tuple(rng.sample(range(len(cups)), 2)) for _ in range(rng.randint(1, 2 + 2 * size))]
    return (f"def {name}(swaps):  # << START_OF_TRACE\n    cups = {cups!r}\n    for i, j in swaps:\n"
            f"        cups[i], cups[j] = cups[j], cups[i]\n    return ''.join(cups)\n\n{name}({swaps!r})\n")


_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _random_name(rng: random.Random, taken: set) -> str:
    import builtins
    import keyword

    while True:
        name = rng.choice("abcdefghijklmnopqrstuvwxyz_") + "".join(rng.choices(_ALNUM + "_", k=rng.randint(0, 7)))
        if name not in taken and not keyword.iskeyword(name) and not hasattr(builtins, name):
            taken.add(name)
            return name


def copy_lines(rng: random.Random, size: int) -> str:
    taken: set = {"f"}
    bound: list[tuple[str, str]] = []
    lines = []
    for _ in range(rng.randint(2, 4 + 3 * size)):
        name = _random_name(rng, taken) if not bound or rng.random() < 0.8 else rng.choice(bound)[0]
        r = rng.random()
        strs = [b for b in bound if b[1] == "str"]
        if r < 0.35:
            text = "".join(rng.choices(_ALNUM + "  -.", k=rng.randint(1, 14)))
            lines.append(f"    {name} = {text!r}")
            kind = "str"
        elif r < 0.55:
            lines.append(f"    {name} = {rng.randint(-999, 99999)}")
            kind = "int"
        elif r < 0.65:
            lines.append(f"    {name} = {[rng.randint(0, 99) for _ in range(rng.randint(0, 4))]!r}")
            kind = "list"
        elif r < 0.85 and bound:
            other, kind = rng.choice(bound)
            lines.append(f"    {name} = {other}")
        elif strs:
            other, kind = rng.choice(strs)
            lines.append(f"    {name} = {other} + {''.join(rng.choices(_ALNUM, k=rng.randint(1, 5)))!r}")
        else:
            lines.append(f"    {name} = {rng.random() < 0.5}")
            kind = "bool"
        bound = [b for b in bound if b[0] != name] + [(name, kind)]
    ret = rng.choice(bound)[0]
    return "def f():  # << START_OF_TRACE\n" + "\n".join(lines) + f"\n    return {ret}\n\nf()\n"


def program(family: str, seed: int, index: int, size: int = 2) -> SuiteProgram:
    """One training program of ``family``; ``size`` in 1..5 scales its length. Written as real
    files are: a share (``DOUBLE_QUOTE_SHARE``) quotes its strings with ``"``, and a share
    (``PREAMBLE_SHARE``) begins with a module header (docstring, comments, imports)."""
    p = _bare(family, seed, index, size)
    source, meta = p.source, p.meta
    if rng_for("quotes", family, seed, index).random() < DOUBLE_QUOTE_SHARE:
        source = double_quoted(source)
        if source != p.source:
            meta = meta | {"double_quoted": True}
    head = rng_for("preamble", family, seed, index)
    if head.random() < PREAMBLE_SHARE:
        source, meta = preamble(head) + source, meta | {"preamble": True}
    if source == p.source:
        return p
    return make_program(source, p.call, p.id, meta, path=p.path)


def _bare(family: str, seed: int, index: int, size: int) -> SuiteProgram:
    rng = rng_for("train", family, seed, index)
    meta = {"suite": "train", "family": family, "seed": seed, "index": index, "size": size}
    pid = f"{family}-s{seed}-{index}"
    if family == "s5":
        n = rng.randint(1, S5_N_PER_SIZE * size)
        p = s5.program(n, seed=rng.randrange(1 << 30) + 1_000_000, index=index)
        return _with(p, meta | {"n": n}, pid)
    if family == "zoo":
        kind, depth, form = rng.choice(zoo.TYPES), rng.randint(1, min(5, size + 1)), rng.choice(zoo.FORMS)
        p = zoo.program(kind, depth, form, seed=rng.randrange(1 << 30) + 1_000_000, index=index)
        return _with(p, meta | {"type": kind, "depth": depth, "form": form}, pid)
    if family == "crux":
        code, args = crux(rng, size)
        p = cruxeval_program(code, args, path=f"<{pid}>")
        return SuiteProgram(p.path, p.source, p.entry, p.entry_line, p.entry_firstlineno, p.call, id=pid, meta=meta)
    source = {"loop": looped, "helper": helper, "grow": grow, "story": story, "copy": copy_lines,
              "exception": lambda r, s: (excepting if r.random() < 0.7 else callee_raises)(r, s)}[family](rng, size)
    source, call = _split_call(source)
    return make_program(source, call, pid, meta)


def _split_call(source: str) -> tuple[str, str]:
    """Programs end with a module-level call line; the tracer gets it as ``call``."""
    body, _, call = source.rstrip("\n").rpartition("\n")
    return body.rstrip("\n") + "\n", call.strip()


def _with(p: SuiteProgram, meta: dict, pid: str) -> SuiteProgram:
    return SuiteProgram(p.path, p.source, p.entry, p.entry_line, p.entry_firstlineno, p.call, id=pid, meta=meta)
