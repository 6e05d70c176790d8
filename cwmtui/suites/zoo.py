"""The composition zoo: unary, type-preserving, deterministic functions composed to depth 1..5.

Eight types (Boolean, Bitwise, Math, Character, List, Set of ints, Dictionary, String), several
functions each, every one a small user function in the program's source. A composition of depth
d applies d of them, drawn with repetition, either nested (``return f(g(h(x)))``) or flattened
(``t1 = h(x)``, ``t2 = g(t1)``, ... ``return t3``); both forms compute the same value.
"""

from __future__ import annotations

import random

from . import SuiteProgram, make_program, rng_for

#: type -> {function name: body expression of the parameter ``x``}
FUNCTIONS: dict[str, dict[str, str]] = {
    "boolean": {
        "negate": "not x",
        "keep": "x and True",
        "either_false": "x or False",
        "differs_true": "x != True",
        "same_false": "x == False",
    },
    "bitwise": {
        "xor_five": "x ^ 5",
        "shift_left": "(x << 1) & 255",
        "shift_right": "x >> 1",
        "invert": "~x & 255",
        "set_bit_two": "x | 4",
        "mask_low": "x & 13",
    },
    "math": {
        "add_three": "x + 3",
        "double": "x * 2",
        "minus_seven": "x - 7",
        "halve": "x // 2",
        "last_digit": "x % 10",
        "absolute": "abs(x)",
        "square_mod": "x * x % 97",
    },
    "character": {
        "next_letter": "chr((ord(x) - 97 + 1) % 26 + 97)",
        "prev_letter": "chr((ord(x) - 97 - 1) % 26 + 97)",
        "mirror": "chr(219 - ord(x))",
        "shift_three": "chr((ord(x) - 97 + 3) % 26 + 97)",
        "flip_low_bit": "chr((ord(x) - 97 ^ 1) % 26 + 97)",
    },
    "list": {
        "reverse": "x[::-1]",
        "sort": "sorted(x)",
        "append_len": "x + [len(x)]",
        "rotate": "x[1:] + x[:1]",
        "drop_first": "x[1:]",
        "double_each": "[v * 2 for v in x]",
        "add_index": "[v + i for i, v in enumerate(x)]",
    },
    "set": {
        "add_size": "x | {len(x)}",
        "evens": "{v for v in x if v % 2 == 0}",
        "drop_min": "x - {min(x)} if x else x",
        "toggle_one_two": "x ^ {1, 2}",
        "increment": "{v + 1 for v in x}",
        "cap_ten": "{v % 10 for v in x}",
    },
    "dictionary": {
        "increment_values": "{k: v + 1 for k, v in x.items()}",
        "sort_keys": "dict(sorted(x.items()))",
        "add_size": "{**x, 'n': len(x)}",
        "drop_first": "dict(list(x.items())[1:])",
        "double_values": "{k: v * 2 for k, v in x.items()}",
        "upper_keys": "{k.upper(): v for k, v in x.items()}",
    },
    "string": {
        "reverse": "x[::-1]",
        "upper": "x.upper()",
        "lower": "x.lower()",
        "swapcase": "x.swapcase()",
        "rotate": "x[1:] + x[:1]",
        "strip_vowels": "x.replace('a', '').replace('e', '').replace('o', '')",
        "double_last": "x + x[-1:]",
        "replace_s": "x.replace('s', 'z')",
    },
}
TYPES = tuple(FUNCTIONS)
FORMS = ("nested", "flat")
EVAL_DEPTHS = (1, 2, 3, 4, 5)
_WORDS = ("apple", "sky", "banana", "rose", "tesla", "hello", "mouse", "grass", "moon", "code",
          "sweets", "lemon", "stars", "ocean", "paris", "seed")


def random_input(kind: str, rng: random.Random) -> str:
    """The repr of a random input of ``kind``."""
    if kind == "boolean":
        return repr(rng.random() < 0.5)
    if kind == "bitwise":
        return repr(rng.randint(0, 255))
    if kind == "math":
        return repr(rng.randint(-50, 99))
    if kind == "character":
        return repr(chr(rng.randint(97, 122)))
    if kind == "list":
        return repr([rng.randint(0, 9) for _ in range(rng.randint(2, 5))])
    if kind == "set":
        return repr(set(rng.sample(range(12), rng.randint(2, 5))))
    if kind == "dictionary":
        keys = rng.sample("abcdefgh", rng.randint(2, 4))
        return repr({k: rng.randint(0, 9) for k in keys})
    if kind == "string":
        word = rng.choice(_WORDS)
        return repr(word if rng.random() < 0.5 else word.capitalize())
    raise ValueError(f"unknown type {kind!r}")


def source_for(kind: str, names: list[str], form: str, arg: str) -> str:
    """``names[0]`` is applied first."""
    lines = []
    for name in dict.fromkeys(names):
        lines.append(f"def {name}(x):\n    return {FUNCTIONS[kind][name]}\n\n")
    lines.append("def f(x):  # << START_OF_TRACE\n")
    if form == "nested":
        expr = "x"
        for name in names:
            expr = f"{name}({expr})"
        lines.append(f"    return {expr}\n")
    elif form == "flat":
        prev = "x"
        for i, name in enumerate(names, 1):
            lines.append(f"    t{i} = {name}({prev})\n")
            prev = f"t{i}"
        lines.append(f"    return {prev}\n")
    else:
        raise ValueError(f"unknown form {form!r}")
    return "".join(lines)


def program(kind: str, depth: int, form: str, seed: int, index: int = 0) -> SuiteProgram:
    """One composition; the nested and flat forms of the same (kind, depth, seed, index) apply
    the same functions to the same input."""
    rng = rng_for("zoo", seed, kind, depth, index)
    names = [rng.choice(sorted(FUNCTIONS[kind])) for _ in range(depth)]
    arg = random_input(kind, rng)
    source = source_for(kind, names, form, arg)
    meta = {"suite": "zoo", "family": f"zoo-{kind}", "type": kind, "depth": depth, "form": form,
            "functions": names, "seed": seed, "index": index}
    return make_program(source, f"f({arg})", f"zoo-{kind}-d{depth}-{form}-s{seed}-{index}", meta)


def generate(types=TYPES, depths=EVAL_DEPTHS, forms=FORMS, count: int = 5, seed: int = 0) -> list[SuiteProgram]:
    return [program(kind, depth, form, seed, i)
            for kind in types for depth in depths for form in forms for i in range(count)]
