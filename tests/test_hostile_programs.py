"""Hostile programs (tests/hostile/) against the tracer and every consumer of its traces: no
traceback, and a message that says what happened."""

from __future__ import annotations

import json
from pathlib import Path

from cwmtui.cli import main
from cwmtui.interpreter import load_program
from cwmtui.trace import Status

HOSTILE = Path(__file__).resolve().parent / "hostile"


def test_keys_in_locals_that_are_not_names_become_json_text(interpreter, capsys):
    program = load_program(str(HOSTILE / "locals_keys.py"))
    trace = interpreter.trace(program)
    assert trace.status.kind is Status.COMPLETE
    last = trace.frames[-2].locals
    assert last == {"42": "'x'", "(1, 2)": "'tuple key'", "null": "0", "y": "1"}
    assert all(isinstance(key, str) for frame in trace.frames for key in (frame.locals or {}))
    for argv in (["diff", program.path], ["diff", program.path, "--json"], ["trace", program.path, "--format", "table"]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code in (0, 1), err
        assert "Traceback" not in err


async def test_the_debugger_shows_keys_that_are_not_names(interpreter):
    from cwmtui.ui.app import CwmApp

    from .ui.sessions import model_frames, offline_view

    program = load_program(str(HOSTILE / "locals_keys.py"))
    truth = interpreter.trace(program)
    app = CwmApp(offline_view(program, truth, model_frames(program, truth)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(":", "4", "enter")
        await pilot.pause()
        assert any("(1, 2)" in line for line in app.debugger.state_panel.lines)


def test_forged_records_in_the_tracers_channel_end_the_trace_with_a_reason(interpreter, capsys):
    program = load_program(str(HOSTILE / "forged_records.py"))
    trace = interpreter.trace(program)
    assert trace.status.kind is Status.DIED
    assert "wrote into the tracer's own channel" in trace.status.message
    # the fork server goes on: the next program traces as usual
    assert interpreter.trace(load_program(str(HOSTILE / "locals_keys.py"))).status.kind is Status.COMPLETE
    code = main(["diff", program.path])
    err = capsys.readouterr().err
    assert code == 1  # the run stopped itself: not bad input (2)
    assert "the interpreter recorded no step of forge()" in err and "never ran" not in err
    assert err.count("\n") == 1


def test_a_run_that_recorded_no_step_is_not_called_bad_input_by_diff_json(capsys):
    code = main(["diff", str(HOSTILE / "forged_records.py"), "--json"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == ""
    assert "nothing to compare" in captured.err
    json.dumps(captured.err)
