"""Code S5: five variables tracked through N random permutations of S5.

``a..e`` start at small random ints (repeats allowed); each of the N lines is a full tuple
assignment applying a uniformly random permutation, e.g. ``a, b, c, d, e = c, e, b, a, d``,
all inside one function that returns the final tuple.
"""

from __future__ import annotations

import random

from . import SuiteProgram, make_program, rng_for

NAMES = ("a", "b", "c", "d", "e")
EVAL_NS = (8, 16, 32, 64, 128)


def source_for(n: int, rng: random.Random, low: int = 0, high: int = 9) -> str:
    values = [rng.randint(low, high) for _ in NAMES]
    lines = ["def f():  # << START_OF_TRACE\n"]
    lines.append(f"    {', '.join(NAMES)} = {', '.join(map(str, values))}\n")
    for _ in range(n):
        perm = list(NAMES)
        rng.shuffle(perm)
        lines.append(f"    {', '.join(NAMES)} = {', '.join(perm)}\n")
    lines.append(f"    return {', '.join(NAMES)}\n")
    return "".join(lines)


def program(n: int, seed: int, index: int = 0) -> SuiteProgram:
    """The ``index``-th S5 program with N = ``n`` for ``seed``."""
    rng = rng_for("s5", seed, n, index)
    source = source_for(n, rng)
    meta = {"suite": "s5", "family": "s5", "n": n, "seed": seed, "index": index}
    return make_program(source, "f()", f"s5-n{n}-s{seed}-{index}", meta)


def generate(ns=EVAL_NS, count: int = 10, seed: int = 0) -> list[SuiteProgram]:
    """``count`` programs for every N in ``ns``."""
    return [program(n, seed, i) for n in ns for i in range(count)]
