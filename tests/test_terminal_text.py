"""Untrusted text reaches a terminal only as text: a corpus of escape sequences (CSI, OSC 0/8/52,
DCS, C1 controls, bidi overrides) and Rich markup, in a program's output, reprs, source lines,
file names, record ids, model text and server errors, through every verb and the TUI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from cwmtui.cli import main
from cwmtui.interpreter import load_program
from cwmtui.terminal import printable, printable_block

HOSTILE = Path(__file__).resolve().parent / "hostile" / "escapes.py"
#: what a terminal would act on: C0 controls but newline and tab, DEL, C1 controls, bidi and
#: other format characters
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # Rich wraps no line in the middle of an escape


def assert_no_raw_controls(text: str, where: str) -> None:
    found = RAW.search(text)
    assert found is None, f"{where}: raw {found.group()!r} at {found.start()}: {text[max(0, found.start() - 40):found.start() + 40]!r}"


def test_the_rule():
    assert printable("a\x1b[2Jb\tc\n") == "a\\x1b[2Jb\\tc\\n"
    assert printable_block("a\x1b]0;t\x07\n\tb\x9b\u202e") == "a\\x1b]0;t\\x07\n\tb\\x9b\\u202e"
    assert printable("[/x] [link=x]y[/link] ünïcode 日本") == "[/x] [link=x]y[/link] ünïcode 日本"


@pytest.fixture
def hostile_copy(tmp_path):
    """The hostile program under a file name that is itself hostile."""
    target = tmp_path / "evil\x1b]0;name\x07[bold].py"
    shutil.copy(HOSTILE, target)
    return target


def run(capsys, *argv, tty: bool = False, monkeypatch=None):
    if tty:
        monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["cwm", "json", "table"])
def test_trace_on_a_terminal_shows_the_programs_escapes_as_text(capsys, monkeypatch, hostile_copy, fmt):
    # (only the cwm text asks whether stdout is a terminal; Rich's table would style itself)
    code, out, err = run(capsys, "trace", hostile_copy, "--format", fmt, tty=fmt == "cwm", monkeypatch=monkeypatch)
    assert code == 0, err
    assert_no_raw_controls(out, f"trace --format {fmt}")
    assert_no_raw_controls(err, "stderr")
    if fmt != "json":
        assert "[/x]" in out and "\\x1b[2J" in out  # markup shown as written, escapes visible
    if fmt == "table":
        assert "\\x1b]0;raw-title" in out  # the raw ESC of a source line


def test_trace_into_a_pipe_is_the_exact_document(capsys, hostile_copy):
    code, out, _ = run(capsys, "trace", hostile_copy)
    assert code == 0
    assert "\x1b[2J\x1b]0;raw-title\x07" in out  # the source line, byte for byte: data for a program


def test_diff_table_and_json(capsys, hostile_copy):
    code, out, err = run(capsys, "diff", hostile_copy)
    assert code in (0, 1), err
    assert_no_raw_controls(out + err, "diff")
    assert "evil\\x1b]0;name\\x07[bold].py" in out  # the file name in the header, as text
    code, out, err = run(capsys, "diff", hostile_copy, "--json")
    assert code in (0, 1)
    assert_no_raw_controls(out + err, "diff --json")
    json.loads(out)


def test_eval_tables_with_hostile_ids_and_a_hostile_model_name(capsys, tmp_path, monkeypatch):
    from cwmtui.cli import model_options as backend_module

    original = backend_module.backend_from_args

    def named(args, progress=None):
        backend = original(args, progress)
        backend.name = "model\x1b]0;x\x07[/x]"
        return backend

    monkeypatch.setattr(backend_module, "backend_from_args", named)
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "id\x1b[2J\x9b[/x]", "program": HOSTILE.read_text(), "entry": "show", "call": "show(CORPUS)"}) + "\n")
    code, out, err = run(capsys, "eval", suite, "--token-budget", "300")
    assert code == 0, err
    assert_no_raw_controls(out + err, "eval")
    assert "model\\x1b]0;x\\x07[/x]" in out


def test_error_lines_on_stderr_show_names_as_text(capsys, tmp_path):
    code, out, err = run(capsys, "trace", tmp_path / "gone\x1b[2J\x1b]0;t\x07.py")
    assert code == 2 and out == ""
    assert_no_raw_controls(err, "stderr")
    assert "gone\\x1b[2J\\x1b]0;t\\x07.py" in err


def test_a_server_error_body_is_shown_as_text(capsys, tmp_path):
    from .test_model_server import FakeServer

    server = FakeServer("vllm")
    server.actions["/v1/models"] = [("status", 404, {"detail": "no\x1b]0;pwned\x07 [/x] here"})]
    try:
        program = tmp_path / "p.py"
        program.write_text("def f():  # << START_OF_TRACE\n    return 1\n\nf()\n")
        code, out, err = run(capsys, "diff", program, "--server", server.url)
    finally:
        server.close()
    assert code == 2
    assert_no_raw_controls(err, "stderr")
    assert "no\\x1b]0;pwned\\x07 [/x] here" in err


async def test_the_tui_shows_every_escape_as_text(interpreter, tmp_path):
    from cwmtui.ui.app import CwmApp

    from .ui.sessions import model_frames, offline_view

    program = load_program(str(HOSTILE))
    truth = interpreter.trace(program)
    frames = model_frames(program, truth)
    view = offline_view(program, truth, frames, description="replay\x1b]0;model\x07 [/x] (test)")
    view.branches[0].state.branch.name = "main\x1b[5m"  # a name from a session file: text, not a sequence
    app = CwmApp(view)
    async with app.run_test(size=(120, 40)) as pilot:
        for step in range(len(truth.frames)):
            await pilot.pause()
            screen = app.export_screenshot()
            assert_no_raw_controls(screen, f"the screen at step {step}")
            await pilot.press("j")
        app.notify("server said \x1b]0;x\x07 [/x]")  # a toast of untrusted text
        await pilot.pause()
        assert_no_raw_controls(app.export_screenshot(), "a toast")
        output = app.debugger.output_panel.lines
        assert any("\\x1b[2J" in line for line in output) and any("[/x]" in line for line in output)
        assert "replay\\x1b]0;model\\x07 [/x] (test)" in app.debugger.query_one("#status").plain
