"""`cwmtui trace`: the formats, the exit codes, --entry and --call."""

import json

import pytest

from cwmtui.cli import main
from cwmtui.interpreter import load_program, trace_program
from cwmtui.trace import parse_trace, render_trace, tokens

from . import goldens

FRAME_KEYS = ["step", "event", "action", "lineno", "function", "depth", "locals", "arg"]

UNMARKED = """\
def f(x):
    y = x * 2
    return y
"""


def cli(capsys, *argv):
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def unmarked(tmp_path):
    path = tmp_path / "unmarked.py"
    path.write_text(UNMARKED)
    return str(path)


def test_cwm_format_is_the_exact_document_and_parses_back(capsys):
    path = str(goldens.GOLDEN / "strawberry.py")
    code, out, err = cli(capsys, path, "--call", "f('r')")
    assert (code, err) == (0, "")
    source = (goldens.GOLDEN / "strawberry.py").read_text()
    prompt = tokens.BEGIN_OF_TEXT + tokens.TRACE_CONTEXT_START + source + tokens.FRAME_SEP
    assert out == prompt + goldens.expected_text("strawberry")  # the spec §6 trace, byte for byte
    parsed = parse_trace(out)
    assert parsed.context == source and parsed.ended and parsed.trailing == ""
    assert parsed.frames == trace_program(load_program(path, call="f('r')")).frames


def test_cwm_format_of_a_partial_trace_parses_back_without_errors(capsys):
    path = str(goldens.GOLDEN / "while_loop.py")
    code, out, err = cli(capsys, path, "--max-frames", "5")
    assert code == 1
    assert not out.endswith(tokens.END_OF_TEXT)
    parsed = parse_trace(out)
    assert len(parsed.frames) == 5 and not parsed.ended
    assert not any(f.error for f in parsed.frames)


def test_json_format_has_one_object_per_frame_then_the_status(capsys):
    path = str(goldens.GOLDEN / "generator_function.py")
    code, out, err = cli(capsys, path, "--format", "json")
    assert (code, err) == (0, "")
    lines = [json.loads(line) for line in out.splitlines()]
    frames, status = lines[:-1], lines[-1]
    expected = trace_program(load_program(path)).frames
    assert len(frames) == len(expected) == 24
    for step, (obj, frame) in enumerate(zip(frames, expected)):
        assert list(obj) == FRAME_KEYS
        assert obj == {
            "step": step, "event": frame.event.value, "action": frame.action, "lineno": frame.lineno,
            "function": frame.function, "depth": frame.depth, "locals": frame.locals, "arg": frame.arg,
        }
    assert all(".." not in (obj["locals"] or {}).values() for obj in frames)  # all resolved
    assert frames[9]["locals"] == {"n": "2"}  # a generator resumption, at its yield
    assert status["status"] == "complete" and status["frames"] == 24 and status["limit"] is None


def test_json_status_object_reports_a_limit(capsys):
    path = str(goldens.GOLDEN / "while_loop.py")
    code, out, err = cli(capsys, path, "--format", "json", "--max-frames", "3")
    assert code == 1
    status = json.loads(out.splitlines()[-1])
    assert (status["status"], status["limit"], status["frames"]) == ("limit", "frames", 3)
    assert err == "cwmtui: trace limit (frames limit): stopped after 3 frames\n"


def test_json_status_object_carries_the_output(capsys, tmp_path):
    path = tmp_path / "talk.py"
    path.write_text("def f():  # << START_OF_TRACE\n    print('hi')\n    return 1\n\nf()\n")
    code, out, _ = cli(capsys, str(path), "--format", "json")
    assert code == 0
    assert json.loads(out.splitlines()[-1])["stdout"] == "hi\n"


def test_table_format_renders(capsys):
    path = str(goldens.GOLDEN / "nested_calls.py")
    code, out, err = cli(capsys, path, "--format", "table")
    assert (code, err) == (0, "")
    assert "trace: 16 frames, complete" in out
    for text in ("def hypot2(a, b):", "return sa + sb", "sa=9", "→ 25"):
        assert text in out


def test_exit_code_1_when_the_program_raises_the_trace_still_printed(capsys):
    code, out, err = cli(capsys, str(goldens.GOLDEN / "escaping_exception.py"))
    assert code == 1
    assert out.endswith(goldens.expected_text("escaping_exception"))
    assert err == "cwmtui: trace raised: ValueError: too big: 5\n"


def test_exit_code_2_on_bad_options(capsys, unmarked):
    with pytest.raises(SystemExit) as stop:
        main(["trace", unmarked, "--format", "xml"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice" in err
    code, out, err = cli(capsys, unmarked, "--call", "f(")
    assert (code, out) == (2, "")
    assert "--call 'f(' is not a Python expression" in err


def test_entry_names_the_function_and_adds_the_marker(capsys, unmarked):
    code, out, err = cli(capsys, unmarked, "--entry", "f", "--call", "f(4)")
    assert (code, err) == (0, "")
    parsed = parse_trace(out)
    assert parsed.context == UNMARKED.replace("def f(x):", "def f(x):  # << START_OF_TRACE")
    assert parsed.frames[0].action == "def f(x):\n"  # the marker is not part of the action
    assert parsed.frames[-1].arg == "8"


def test_entry_moves_an_existing_marker(capsys, tmp_path):
    path = tmp_path / "two.py"
    path.write_text("def g(x):  # << START_OF_TRACE\n    return x\n\ndef f(x):\n    return g(x) + 1\n\nf(1)\n")
    code, out, _ = cli(capsys, str(path), "--entry", "f")
    assert code == 0
    parsed = parse_trace(out)
    assert parsed.context.count("START_OF_TRACE") == 1
    assert "def f(x):  # << START_OF_TRACE\n" in parsed.context
    assert [f.function for f in parsed.frames][:1] == ["f"] and parsed.frames[-1].arg == "2"


def test_entry_that_does_not_exist(capsys, unmarked):
    code, out, err = cli(capsys, unmarked, "--entry", "nope", "--call", "f(1)")
    assert (code, out) == (2, "")
    assert err == f"cwmtui: error: {unmarked}: no function named 'nope' (functions: f)\n"


def test_call_with_a_marked_entry_runs_after_the_module(capsys):
    path = goldens.GOLDEN / "strawberry.py"
    code, out, _ = cli(capsys, str(path), "--call", "f('s')")
    assert code == 0
    parsed = parse_trace(out)
    assert parsed.context == path.read_text()  # the source is not changed
    assert parsed.frames[0].locals == {"c": "'s'"}


def test_call_without_a_marked_entry_wraps_it_in_main(capsys, unmarked):
    code, out, err = cli(capsys, unmarked, "--call", "f(21)")
    assert (code, err) == (0, "")
    parsed = parse_trace(out)
    assert parsed.context == UNMARKED + "\ndef main():  # << START_OF_TRACE\n    return f(21)\n"
    assert [(f.event.value, f.function, f.depth) for f in parsed.frames] == [
        ("call", "main", 0), ("line", "main", 0),
        ("call", "f", 1), ("line", "f", 1), ("line", "f", 1), ("return", "f", 1),
        ("return", "main", 0),
    ]
    assert parsed.frames[0].action == "def main():\n" and parsed.frames[0].locals == {}
    assert parsed.frames[-1].arg == "42"
    assert out == render_trace(parsed.context, parsed.frames)


def test_call_wrapper_avoids_a_name_the_program_uses(capsys, tmp_path):
    path = tmp_path / "has_main.py"
    path.write_text("def main(x):\n    return -x\n")
    code, out, _ = cli(capsys, str(path), "--call", "main(3)")
    assert code == 0
    parsed = parse_trace(out)
    assert "\ndef _cwmtui_main():  # << START_OF_TRACE\n    return main(3)\n" in parsed.context
    assert parsed.frames[-1].arg == "-3"


def test_entry_prefers_the_qualified_name_over_a_method_of_the_same_name(capsys, tmp_path):
    path = tmp_path / "same_name.py"
    path.write_text("class A:\n    def f(self):\n        return 0\n\ndef f(x):\n    return x + 1\n")
    code, out, err = cli(capsys, str(path), "--entry", "f", "--call", "f(1)")
    assert (code, err) == (0, "")
    assert parse_trace(out).frames[-1].arg == "2"
    code, out, _ = cli(capsys, str(path), "--entry", "A.f", "--call", "A().f()")
    assert code == 0 and parse_trace(out).frames[-1].arg == "0"


def test_an_ambiguous_entry_name_asks_for_the_qualified_one(capsys, tmp_path):
    path = tmp_path / "inner.py"
    path.write_text("def a():\n    def h():\n        return 1\n    return h()\n\n"
                    "def b():\n    def h():\n        return 2\n    return h()\n")
    code, out, err = cli(capsys, str(path), "--entry", "h", "--call", "b()")
    assert (code, out) == (2, "")
    assert err == f"cwmtui: error: {path}: --entry h is ambiguous: a.h (line 2), b.h (line 7); pass the qualified name\n"
    code, out, _ = cli(capsys, str(path), "--entry", "b.h", "--call", "b()")
    assert code == 0 and parse_trace(out).frames[-1].arg == "2"
