"""Hostile programs (tests/hostile/) against the tracer and every consumer of its traces: no
traceback, and a message that says what happened."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

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


def test_the_memory_limit_holds_over_every_process_the_program_starts(interpreter):
    """Three children of 200 MiB each stay under a 300 MiB limit per process, not together."""
    import time

    from cwmtui.interpreter import Limits

    began = time.monotonic()
    trace = interpreter.trace(load_program(str(HOSTILE / "fork_memory.py")), Limits(memory=300 << 20, seconds=20))
    assert (trace.status.kind, trace.status.limit) == (Status.LIMIT, "memory")
    assert trace.status.message == "the program and the processes it started used more than 300 MiB of memory"
    assert time.monotonic() - began < 10  # stopped when it went over, not at the time limit


def test_a_fork_bomb_is_stopped_at_the_process_limit(interpreter):
    import time

    from cwmtui.interpreter import Limits

    began = time.monotonic()
    trace = interpreter.trace(load_program(str(HOSTILE / "fork_bomb.py")), Limits(seconds=20))
    assert (trace.status.kind, trace.status.limit) == (Status.LIMIT, "processes")
    assert time.monotonic() - began < 5
    assert interpreter.trace(load_program(str(HOSTILE / "locals_keys.py"))).status.kind is Status.COMPLETE


def test_a_detached_process_does_not_outlive_the_run(interpreter, tmp_path):
    """Without the sandbox (which has a pid namespace of its own: tests/test_sandbox.py), the
    fork server reaps the program's orphans and kills them with its run."""
    import os
    import time

    from cwmtui.interpreter import Limits

    note = tmp_path / "pid"
    program = load_program(str(HOSTILE / "detached.py"), call=f"leave({str(note)!r})")
    trace = interpreter.trace(program, Limits(sandbox=False))
    assert trace.status.kind is Status.COMPLETE and trace.return_value() == "'left'"
    pid = int(note.read_text())
    for _ in range(100):  # SIGKILL is asynchronous: give the kernel a moment
        if not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.01)
    else:
        raise AssertionError(f"the detached process {pid} is still running")


def test_a_redirected_stdout_can_be_closed_and_file_is_absolute(interpreter, tmp_path):
    """Real-Python fidelity: sys.stdout.close() exists, __file__ is absolute (CPython 3.11)."""
    path = tmp_path / "closing.py"
    path.write_text(
        "import sys\n\ndef f():  # << START_OF_TRACE\n    where = __file__\n    print('bye')\n"
        "    sys.stdout.close()\n    try:\n        print('after')\n    except ValueError as exc:\n"
        "        caught = str(exc)\n    return where, caught\n\nf()\n"
    )
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        trace = interpreter.trace(load_program("closing.py"))
    finally:
        os.chdir(cwd)
    assert trace.status.kind is Status.COMPLETE, trace.status
    assert trace.return_value() == repr((str(path), "I/O operation on closed file."))
    assert trace.stdout == "bye\n"


def run_in_a_terminal(argv: list[str], until, then, terminal: list | None = None) -> tuple[int, bytes]:
    """cwmtui in a pseudo-terminal: ``then(pid)`` once ``until(screen)``; the exit code and
    everything it wrote to the terminal (``terminal`` receives the terminal's file descriptor,
    to type into)."""
    import os
    import pty
    import subprocess
    import sys
    import threading
    import time

    master, slave = pty.openpty()
    if terminal is not None:
        terminal.append(master)
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", LINES="40")
    process = subprocess.Popen([sys.executable, "-m", "cwmtui", *argv], stdin=slave, stdout=slave, stderr=slave,
                               env=env, close_fds=True)
    os.close(slave)
    screen = bytearray()

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            screen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        for _ in range(400):
            time.sleep(0.05)
            if until(bytes(screen)):
                break
        then(process.pid)
        code = process.wait(timeout=20)
        reader.join(2)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)
    return code, bytes(screen)


def test_sigterm_gives_the_terminal_back(tmp_path):
    """kill PID on the debugger: the alternate screen is left and mouse reporting switched off."""
    import os
    import signal

    code, screen = run_in_a_terminal(
        ["--replay", str(_replay_of_locals_keys(tmp_path)), "--id", "a"],
        until=lambda screen: b"interpreter" in screen,
        then=lambda pid: os.kill(pid, signal.SIGTERM),
    )
    assert code == 128 + signal.SIGTERM
    tail = screen[screen.rfind(b"\x1b[?1049h"):]
    assert b"\x1b[?1049l" in tail and b"\x1b[?1000l" in tail


def _replay_of_locals_keys(tmp_path) -> Path:
    from cwmtui.interpreter import Interpreter
    from cwmtui.trace import render_frames

    program = load_program(str(HOSTILE / "locals_keys.py"))
    with Interpreter() as interpreter:
        trace = interpreter.trace(program)
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps({"id": "a", "program": program.source, "generation": render_frames(trace.frames, end=True)}) + "\n")
    return path


async def test_the_error_dialog_closes_with_q(interpreter):
    from cwmtui.ui.app import CwmApp
    from cwmtui.ui.screens import ErrorScreen

    from .ui.sessions import model_frames, offline_view

    program = load_program(str(HOSTILE / "locals_keys.py"))
    truth = interpreter.trace(program)
    app = CwmApp(offline_view(program, truth, model_frames(program, truth)))
    closed = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ErrorScreen("the program cannot be traced", "x.py: \x1b]0;t\x07 [/x]"), closed.append)
        await pilot.pause()
        assert isinstance(app.screen, ErrorScreen)
        await pilot.press("q")
        await pilot.pause()
        assert closed == [None] and not isinstance(app.screen, ErrorScreen)


def test_files_that_never_end_or_never_open_are_refused_in_one_line(tmp_path, capsys):
    import os

    fifo = tmp_path / "x.py"
    os.mkfifo(fifo)
    for path, problem in (("/dev/zero", "not a regular file"), (str(fifo), "not a regular file")):
        assert main(["trace", path]) == 2
        err = capsys.readouterr().err
        assert err == f"cwmtui: error: {path}: {problem} (a device, a pipe or a socket), not a Python file\n"


def test_a_full_disk_under_stdout_is_one_line(capfd):
    import os
    import subprocess
    import sys

    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "cwmtui", "trace", str(HOSTILE / "locals_keys.py")],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == "cwmtui: error: cannot write the output: No space left on device\n"
    assert os.path.exists("/dev/full")


@pytest.mark.parametrize("accelerated", [True, False])
def test_values_too_long_for_a_trace_are_cut_with_a_mark_and_the_status_says_so(accelerated):
    from cwmtui.interpreter import Interpreter
    from cwmtui.interpreter.child import MAX_VALUE

    with Interpreter(accelerated=accelerated) as interpreter:
        trace = interpreter.trace(load_program(str(HOSTILE / "large_values.py")))
    assert trace.status.kind is Status.COMPLETE and trace.return_value() == "20"
    longest = max(len(v) for f in trace.frames for v in (f.locals or {}).values())
    assert longest <= MAX_VALUE  # the mark included: a value is cut once, never cut again as it is sent
    last = trace.frames[-2].locals
    cut = re.compile(r"… <cut: (over )?[0-9,]+ (characters|bytes)>\)?$")  # the mark, and the length it was (or at least)
    assert last["text"].startswith("'19191919") and cut.search(last["text"])
    assert last["blob"].startswith("b'1919") and cut.search(last["blob"])
    assert last["buffer"].startswith("bytearray(b'1919") and cut.search(last["buffer"])
    assert last["values"].startswith("['0000") and cut.search(last["values"])  # the list's repr, cut
    assert "value(s) longer than 65,536 characters were cut" in trace.status.message


async def test_unfolding_a_huge_value_draws_a_few_screens_of_it(interpreter):
    """z on values of 64 Ki characters (the trace's cap): each shows a bounded number of lines
    and says how much more there is, so a key press stays quick."""
    from cwmtui.ui.app import CwmApp
    from cwmtui.ui.state_panel import UNFOLDED_LINES

    from .ui.sessions import model_frames, offline_view

    program = load_program(str(HOSTILE / "large_values.py"))
    truth = interpreter.trace(program)
    app = CwmApp(offline_view(program, truth, model_frames(program, truth)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press(":", "9", "enter", "z")
        await pilot.pause()
        lines = app.debugger.state_panel.lines
        # each side of each value is unfolded over the panel's width and says how much more there is
        assert sum(1 for line in lines if re.search(r"… [0-9,]+ more characters", line)) >= 2 * 4
        assert len(lines) < 2 * 4 * UNFOLDED_LINES + 60  # four long values on two sides, not 6,000 lines


def test_a_key_json_cannot_spell_is_its_repr_and_no_forgery(interpreter, tmp_path):
    path = tmp_path / "huge_key.py"
    path.write_text("def f():  # << START_OF_TRACE\n    locals()[10**5000] = 1\n    y = 2\n    return y\n\nf()\n")
    trace = interpreter.trace(load_program(str(path)))
    assert trace.status.kind is Status.COMPLETE, trace.status.describe()
    assert any("<int key>" in (frame.locals or {}) for frame in trace.frames)
    from cwmtui.interpreter.runner import json_keys

    assert json_keys((10**5000,)) == ("<int key>",)


def test_forked_children_that_share_their_parents_memory_are_not_counted_twice(interpreter):
    """Copy-on-write pages count once (Pss): 300 MiB forked into 7 sleeping children is 300 MiB."""
    from cwmtui.interpreter import Limits, program_from_source

    source = (
        "import os, time\n\ndef f():  # << START_OF_TRACE\n    block = bytearray(300 << 20)\n"
        "    block[::4096] = b'x' * len(block[::4096])\n    kids = []\n    for _ in range(7):\n"
        "        pid = os.fork()\n        if pid == 0:\n            time.sleep(2)\n            os._exit(0)\n"
        "        kids.append(pid)\n    for pid in kids:\n        os.waitpid(pid, 0)\n    return len(kids)\n"
    )
    trace = interpreter.trace(program_from_source(source, "<cow>", call="f()"), Limits(memory=1024 << 20, seconds=20))
    assert trace.status.kind is Status.COMPLETE, trace.status.describe()
    assert trace.return_value() == "7"


def test_the_memory_bomb_is_stopped_by_the_memory_limit_and_named_so():
    """#22: the held-out memory bomb took 17 s for a 10 s limit and was reported as a time limit,
    because the list of 64 MiB bytearrays was repr'd whole on every line."""
    import subprocess
    import sys
    import time

    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cwmtui", "trace", str(HOSTILE / "memory_bomb.py"), "--format", "json",
                           "--timeout", "10", "--memory", "1024"], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - began
    assert "trace limit (memory limit): the program ran out of memory" in done.stderr, done.stderr
    assert took < 10  # the memory limit, long before the time limit


@pytest.mark.parametrize("accelerated", [True, False])
def test_a_container_of_huge_texts_is_cut_without_building_its_repr(accelerated):
    from cwmtui.interpreter import Interpreter, Limits

    with Interpreter(accelerated=accelerated) as interpreter:
        trace = interpreter.trace(load_program(str(HOSTILE / "huge_items.py")), Limits(memory=2048 << 20, seconds=20))
    assert trace.status.kind is Status.COMPLETE, trace.status.describe()
    assert trace.return_value() == "8"
    last = trace.frames[-2].locals
    assert last["shelf"].startswith("[bytearray(b'\\x00\\x00") and last["shelf"].endswith("… <cut: over 65,536 characters>")
    assert last["index"].startswith("{'text': 'xxxx") and last["index"].endswith("… <cut: over 65,536 characters>")
    assert max(len(v) for f in trace.frames for v in (f.locals or {}).values()) <= 65_536  # cut once, mark included
    assert "value(s) longer than 65,536 characters were cut" in trace.status.message


def test_a_bounded_repr_is_repr_exactly_where_it_is_short_and_its_start_where_it_is_not():
    from cwmtui.interpreter.child import MAX_VALUE, _bounded_repr, _repr_floor

    cyclic, looped = [], {}
    cyclic.append(cyclic)
    looped["self"] = looped
    wrapped = ([],)
    wrapped[0].append(wrapped)
    nested = 0
    for depth in range(80):  # deeper than the floor looks: built carefully, still exact
        nested = [nested, (depth,)] if depth % 2 else {"k": (nested,)}
    small = [1, (2,), {3: "x", "y": b"z"}, {4}, frozenset({5}), set(), frozenset(), (), [], {}, bytearray(b"q")]
    for value in (cyclic, looped, wrapped, small, [[[[()]]]], nested):
        assert _bounded_repr(value) == repr(value)
    big = {i: ["ab'c" * 50, b"\x00" * 30] for i in range(400)}
    mark = f"… <cut: over {MAX_VALUE:,} characters>"
    assert _bounded_repr(big) == repr(big)[: MAX_VALUE - len(mark)] + mark
    assert _repr_floor([bytearray(64 << 20)] * 1000, MAX_VALUE) > MAX_VALUE  # a look, not a walk of 1000
    assert _repr_floor(small, MAX_VALUE) <= len(repr(small))  # a lower bound
