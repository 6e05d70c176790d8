"""The program generators: deterministic per seed, ground truth from the tracer."""

import ast
import re

import pytest

from cwmtui.suites import SuiteProgram, families, s5, zoo
from cwmtui.suites.quotes import double_quoted
from cwmtui.trace import Event, Status


def final_value(interpreter, program):
    trace = interpreter.trace(program)
    assert trace.status.kind is Status.COMPLETE, trace.status
    last = trace.frames[-1]
    assert last.event is Event.RETURN and last.depth == 0
    return last.arg


def test_s5_is_deterministic_per_seed():
    assert s5.program(8, seed=3, index=1).source == s5.program(8, seed=3, index=1).source
    assert s5.program(8, seed=3, index=1).source != s5.program(8, seed=4, index=1).source
    assert [p.id for p in s5.generate([8, 16], count=2, seed=1)] == [p.id for p in s5.generate([8, 16], count=2, seed=1)]


def test_s5_programs_are_permutations_and_the_tracer_gives_their_result(interpreter):
    for n in (8, 16):
        program = s5.program(n, seed=5)
        body = program.source.splitlines()
        assert body[0].startswith("def f():") and "START_OF_TRACE" in body[0]
        init = re.fullmatch(r"    a, b, c, d, e = (\d+), (\d+), (\d+), (\d+), (\d+)", body[1])
        values = dict(zip("abcde", map(int, init.groups())))
        swaps = body[2 : 2 + n]
        assert len(swaps) == n
        for line in swaps:
            left, right = line.strip().split(" = ")
            assert left == "a, b, c, d, e"
            perm = right.split(", ")
            assert sorted(perm) == list("abcde")
            values = {name: values[src] for name, src in zip("abcde", perm)}
        assert program.meta == {"suite": "s5", "family": "s5", "n": n, "seed": 5, "index": 0}
        assert final_value(interpreter, program) == repr(tuple(values[k] for k in "abcde"))


def test_zoo_is_deterministic_and_typed():
    a = zoo.program("string", 3, "nested", seed=2, index=4)
    assert a.source == zoo.program("string", 3, "nested", seed=2, index=4).source
    assert a.meta["type"] == "string" and a.meta["depth"] == 3 and a.meta["form"] == "nested"
    programs = zoo.generate(depths=[1, 2], count=1, seed=0)
    assert {p.meta["type"] for p in programs} == set(zoo.TYPES) and len(zoo.TYPES) == 8
    assert all(isinstance(p, SuiteProgram) and p.call.startswith("f(") for p in programs)


@pytest.mark.parametrize("kind", zoo.TYPES)
def test_zoo_nested_and_flattened_forms_compute_the_same_value(interpreter, kind):
    for depth in (1, 3, 5):
        nested = zoo.program(kind, depth, "nested", seed=11, index=depth)
        flat = zoo.program(kind, depth, "flat", seed=11, index=depth)
        assert nested.meta["functions"] == flat.meta["functions"]
        value = final_value(interpreter, nested)
        assert value == final_value(interpreter, flat)
        # and the tracer's value is the program's value, computed here independently
        space: dict = {}
        exec(compile(nested.source, "<zoo>", "exec"), space)
        assert value == repr(eval(nested.call, space))
        # the functions are type-preserving: the result has the input's type
        arg = ast.literal_eval(nested.call[2:-1])
        assert type(eval(nested.call, space)) is type(arg)


def test_training_families_are_deterministic_and_traceable(interpreter):
    for family in families.FAMILIES:
        first = [families.program(family, seed=1, index=i, size=2) for i in range(6)]
        again = [families.program(family, seed=1, index=i, size=2) for i in range(6)]
        assert [p.source for p in first] == [p.source for p in again]
        assert len({p.source for p in first}) > 1, family
        # the programs run to their end; only the exception family may let one escape (a raise
        # outside its try), never a NameError, which is a generator bug (a function left out)
        ends = (Status.COMPLETE, Status.RAISED) if family == "exception" else (Status.COMPLETE,)
        for p in first:
            assert p.meta["family"] == family and p.meta["suite"] == "train"
            trace = interpreter.trace(p)
            assert len(trace.frames) >= 2
            assert trace.status.kind in ends, (family, trace.status.message)
            assert "NameError" not in (trace.status.message or ""), family


def test_exception_family_catches_exceptions(interpreter):
    caught = 0
    for i in range(10):
        trace = interpreter.trace(families.program("exception", seed=0, index=i))
        events = [f.event for f in trace.frames]
        if Event.EXCEPTION in events and trace.status.kind is Status.COMPLETE:
            caught += 1
    assert caught >= 5


def styled_programs(interpreter, flag: str, seed: int):
    """The training programs (12 a family) that ``program()`` wrote as real files are (meta
    ``flag``), each with its bare form; the two traces' events and values must be the same."""
    for family in families.FAMILIES:
        for i in range(12):
            p = families.program(family, seed=seed, index=i, size=2)
            if not p.meta.get(flag):
                continue
            bare = families._bare(family, seed, i, 2)
            ours, theirs = interpreter.trace(p), interpreter.trace(bare)
            assert ours.status.kind == theirs.status.kind and ours.output == theirs.output, p.id
            assert [(f.event, f.locals, f.arg) for f in ours.frames] == \
                [(f.event, f.locals, f.arg) for f in theirs.frames], p.id
            yield p, bare, ours


def test_some_training_programs_open_with_a_module_header_that_leaves_the_trace_alone(interpreter):
    """Real files start with a docstring, comments or imports: a share of training programs do
    too, so the model learns to copy the line after the marked def, not the second line."""
    headed = 0
    for p, bare, _ in styled_programs(interpreter, "preamble", seed=2):
        headed += 1
        body = double_quoted(bare.source) if p.meta.get("double_quoted") else bare.source
        assert p.source.endswith(body) and p.entry_line > bare.entry_line
        ast.parse(p.source)
    assert 0.2 * 12 * len(families.FAMILIES) < headed < 0.6 * 12 * len(families.FAMILIES)


def test_some_training_programs_quote_their_strings_with_double_quotes_and_trace_the_same(interpreter):
    """Real code quotes strings with ", the generators with repr()'s ': a share of training
    programs are rewritten with ", so the model learns to copy such lines; every value in the
    trace stays what it was (repr still writes ')."""
    styled = shown = 0
    for _, _, trace in styled_programs(interpreter, "double_quoted", seed=4):
        styled += 1
        shown += any('"' in f.action for f in trace.frames)  # a line with " runs: the model copies it
    assert 0.15 * 12 * len(families.FAMILIES) < styled < 0.6 * 12 * len(families.FAMILIES)
    assert shown > 0.8 * styled


def test_double_quoting_rewrites_plain_literals_and_leaves_the_others_alone():
    source = "def f(x):\n    s = 'ab' + f'{x}' + '\"' + '\\n'\n    return '''t''' + b'y' + 'c'\n"
    assert double_quoted(source) == (
        "def f(x):\n    s = \"ab\" + f'{x}' + '\"' + '\\n'\n    return '''t''' + b'y' + \"c\"\n")


def test_s5_training_programs_reach_past_n_20_and_their_traces_fit_the_context(interpreter):
    # the model copied the wrong line from an N = 32 source when training stopped at N = 20:
    # the longest training programs have sources of about 1,100 bytes, and still fit 4096 tokens
    from cwmtui.training.documents import document

    programs = [families.program("s5", seed=11, index=i, size=5) for i in range(40)]
    ns = [p.meta["n"] for p in programs]
    assert max(ns) > 20 and max(ns) <= 5 * families.S5_N_PER_SIZE
    longest = max(programs, key=lambda p: (p.meta["n"], -len(p.source)))
    trace = interpreter.trace(longest)
    assert trace.status.kind is Status.COMPLETE
    assert len(document(longest.source, trace.frames, end=True)) <= 4096
