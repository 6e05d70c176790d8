"""Hostile programs: each ends within its limit with a clear status or message, never a hang or
a traceback, both through Interpreter.trace and through `cwmtui trace` (exit 1 with the partial
trace printed, or exit 2 with one line on stderr). Limits are small to keep this file fast."""

import shutil
import subprocess
import textwrap
import time

import pytest

from cwmtui.cli import main
from cwmtui.interpreter import Interpreter, Limits, ProgramError, load_program, program_from_source
from cwmtui.trace import Event, Status

# Small limits, but time enough that on a loaded machine the limit under test comes first;
# the time-limit tests pass their own 1 s.
FAST = Limits(frames=10_000, seconds=10.0, memory=256 << 20, output=100_000)
FAST_ARGS = ["--timeout", "10", "--memory", "256", "--max-output", "100000"]
ONE_SECOND = Limits(seconds=1.0)
GRACE = 4  # seconds: a 1 s limit, plus room for a loaded machine


def write(tmp_path, source: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def trace(interpreter, path: str, limits: Limits = FAST, **kw):
    started = time.monotonic()
    result = interpreter.trace(load_program(path, **kw), limits)
    return result, time.monotonic() - started


def cli(capsys, *argv):
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- limits: the partial trace is kept and the status names the limit ------------------------

INFINITE_LOOP = """\
def f():  # << START_OF_TRACE
    n = 0
    while True:
        n += 1

f()
"""


def test_infinite_loop_stops_at_the_frame_limit(interpreter, tmp_path, capsys):
    path = write(tmp_path, INFINITE_LOOP)
    result, _ = trace(interpreter, path, Limits(frames=500, seconds=5))
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "frames")
    assert len(result.frames) == 500
    assert result.frames[0].event is Event.CALL and result.frames[-1].locals["n"].isdigit()
    code, out, err = cli(capsys, path, "--max-frames", "500", "--format", "json")
    assert code == 1
    assert one_line(err) == "cwmtui: trace limit (frames limit): stopped after 500 frames"
    assert len(out.splitlines()) == 501  # the frames, then the status object


def test_waiting_forever_stops_at_the_time_limit(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        import time
        def f():  # << START_OF_TRACE
            x = 1
            time.sleep(60)

        f()
        """)
    result, took = trace(interpreter, path, ONE_SECOND)
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "time")
    assert took < GRACE
    assert [f.action.strip() for f in result.frames] == ["def f():", "x = 1", "time.sleep(60)"]
    code, out, err = cli(capsys, path, "--timeout", "1")
    assert code == 1
    assert one_line(err) == "cwmtui: trace limit (time limit): stopped after 1 s"
    assert out.rstrip("\n").endswith("<|frame_sep|>")  # partial: no end of text
    assert "<|end_of_text|>" not in out


def test_a_loop_inside_c_code_that_holds_the_gil_is_killed(interpreter, tmp_path):
    path = write(tmp_path, """\
        import itertools, time
        def f():  # << START_OF_TRACE
            time.sleep(0.2)
            return sum(itertools.count())

        f()
        """)
    result, took = trace(interpreter, path, ONE_SECOND)
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "time")
    assert took < GRACE + 1  # the parent kills it after the limit plus 2 s
    assert [f.event for f in result.frames[:2]] == [Event.CALL, Event.LINE]  # flushed before


def test_infinite_recursion_stops_at_the_recursion_limit(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        def f(n):  # << START_OF_TRACE
            return f(n + 1)

        f(0)
        """)
    result, _ = trace(interpreter, path)
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "recursion")
    assert "recursion limit" in result.status.message
    assert max(f.depth for f in result.frames) > 900
    code, _, err = cli(capsys, path, *FAST_ARGS)
    assert code == 1
    assert one_line(err).startswith("cwmtui: trace limit (recursion limit): ")


def test_recursion_error_caught_inside_the_entry_is_not_a_complete_trace(interpreter, tmp_path):
    path = write(tmp_path, """\
        def deep(n):
            return deep(n + 1)

        def f():  # << START_OF_TRACE
            try:
                deep(0)
            except RecursionError:
                return "caught"

        f()
        """)
    result, _ = trace(interpreter, path)
    # the tracer cannot run at the limit: the trace would silently miss the rest
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "recursion")


def test_allocation_loop_stops_at_the_memory_limit(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        kept = []  # a global: the blocks stay out of the locals (their reprs would be huge)

        def f():  # << START_OF_TRACE
            n = 0
            while True:
                kept.append(bytearray(8 << 20))
                n += 1

        f()
        """)
    result, _ = trace(interpreter, path)
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "memory")
    assert len(result.frames) > 3
    code, _, err = cli(capsys, path, *FAST_ARGS)
    assert code == 1
    assert one_line(err).startswith("cwmtui: trace limit (memory limit): ")


def test_megabytes_of_output_stop_at_the_output_limit(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        def f():  # << START_OF_TRACE
            for i in range(50000):
                print("x" * 100)

        f()
        """)
    result, _ = trace(interpreter, path)
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "output")
    assert len(result.stdout) <= FAST.output
    assert result.stdout.startswith("x" * 100 + "\n")
    assert result.frames and result.output[-1].step <= len(result.frames)
    code, out, err = cli(capsys, path, *FAST_ARGS)
    assert code == 1
    assert one_line(err).startswith("cwmtui: trace limit (output limit): ")


def test_output_written_around_sys_stdout_is_limited_too(interpreter, tmp_path):
    path = write(tmp_path, """\
        import os
        def f():  # << START_OF_TRACE
            while True:
                os.write(1, b"y" * 65536)

        f()
        """)
    result, _ = trace(interpreter, path, Limits(frames=1_000_000, seconds=10, output=100_000))
    assert (result.status.kind, result.status.limit) == (Status.LIMIT, "output")


def test_frame_limit_keeps_exactly_that_many_frames(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        def f():  # << START_OF_TRACE
            total = 0
            for i in range(100):
                total += i
            return total

        f()
        """)
    result, _ = trace(interpreter, path, Limits(frames=7))
    assert (result.status.kind, result.status.limit, len(result.frames)) == (Status.LIMIT, "frames", 7)
    code, out, err = cli(capsys, path, "--max-frames", "7")
    assert code == 1
    assert out.count("<|frame_sep|>") == 1 + 7  # the prompt's, then one per frame
    assert one_line(err) == "cwmtui: trace limit (frames limit): stopped after 7 frames"


# -- the process dies: what was recorded is kept ---------------------------------------------


def test_os_exit_keeps_the_frames_before_it(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        import os
        def f():  # << START_OF_TRACE
            x = 1
            os._exit(3)

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.DIED
    assert result.status.message == "the program exited abruptly (exit code 3)"
    assert [f.action.strip() for f in result.frames] == ["def f():", "x = 1", "os._exit(3)"]
    code, out, err = cli(capsys, path)
    assert code == 1
    assert "    os._exit(3)\n<|frame_sep|>" in out
    assert one_line(err) == "cwmtui: trace died: the program exited abruptly (exit code 3)"


def test_segfault_is_reported_and_earlier_frames_survive(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        import ctypes, time
        def f():  # << START_OF_TRACE
            x = 1
            time.sleep(0.2)
            ctypes.string_at(0)

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.DIED
    assert result.status.message == "the program was killed by SIGSEGV"
    # frames recorded more than the flush period (50 ms) before the crash are never lost
    assert [f.action.strip() for f in result.frames[:3]] == ["def f():", "x = 1", "time.sleep(0.2)"]
    code, _, err = cli(capsys, path)
    assert code == 1
    assert one_line(err) == "cwmtui: trace died: the program was killed by SIGSEGV"


def test_a_segfault_keeps_the_frames_just_before_it(interpreter, tmp_path):
    from cwmtui.interpreter import child

    if child._linetrace is None:
        pytest.skip("the C helpers are not built: frames of the last 50 ms before a crash are lost")
    path = write(tmp_path, """\
        import ctypes
        def f():  # << START_OF_TRACE
            x = 1
            y = x + 1
            ctypes.string_at(0)

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.message == "the program was killed by SIGSEGV"
    assert [(f.action.strip(), f.locals) for f in result.frames[1:]] == [
        ("x = 1", {}), ("y = x + 1", {"x": "1"}), ("ctypes.string_at(0)", {"x": "1", "y": "2"})]


def test_the_program_switching_the_tracer_off_is_not_complete(interpreter, tmp_path):
    path = write(tmp_path, """\
        import sys
        def f():  # << START_OF_TRACE
            sys.settrace(None)
            return 1

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.DIED
    assert "sys.settrace" in result.status.message


# -- the program's own behaviour ---------------------------------------------------------------


def test_input_raises_eof_error_shown_as_an_exception_frame(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        def f():  # << START_OF_TRACE
            line = input()
            return line

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.RAISED
    assert result.status.message == "EOFError: EOF when reading a line"
    raised = [f for f in result.frames if f.event is Event.EXCEPTION]
    assert raised[0].arg == "(<class 'EOFError'>, EOFError('EOF when reading a line'), <traceback object>)"
    code, out, err = cli(capsys, path)
    assert code == 1
    assert out.rstrip("\n").endswith("<|end_of_text|>")  # the trace is whole: the entry ended
    assert one_line(err) == "cwmtui: trace raised: EOFError: EOF when reading a line"


def test_exception_escaping_the_entry_prints_the_trace_and_exits_1(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        def f():  # << START_OF_TRACE
            x = 1
            return x / 0

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.RAISED
    assert [f.event for f in result.frames[-2:]] == [Event.EXCEPTION, Event.RETURN]
    code, out, err = cli(capsys, path)
    assert code == 1
    assert '<|return_sep|><|action_sep|>    return x / 0\n<|arg_sep|>"None"<|frame_sep|><|end_of_text|>' in out
    assert one_line(err) == "cwmtui: trace raised: ZeroDivisionError: division by zero"


def test_repr_that_raises_gives_a_placeholder(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        class Bad:
            def __repr__(self):
                raise ValueError("nope")

        def f():  # << START_OF_TRACE
            b = Bad()
            return b

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.COMPLETE
    assert result.frames[-1].arg == "<Bad object: repr raised ValueError>"
    code, out, err = cli(capsys, path)
    assert (code, err) == (0, "")


def test_repr_that_loops_forever_gives_a_placeholder_not_a_hang(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        class Slow:
            def __repr__(self):
                while True:
                    pass

        def f():  # << START_OF_TRACE
            ys = [1, 2]
            xs = [Slow()]
            s = xs[0]
            zs = [3]
            return zs

        f()
        """)
    result, _ = trace(interpreter, path, Limits(seconds=3))  # a repr may run 0.75 s of it
    assert result.status.kind is Status.COMPLETE
    last = result.frames[-2].locals  # before `return zs`
    assert last == {
        "ys": "[1, 2]",  # other lists keep their reprs
        "xs": "<list object: repr timed out>",
        "s": "<Slow object: repr timed out>",
        "zs": "[3]",
    }
    code, _, err = cli(capsys, path, "--timeout", "3")
    assert (code, err) == (0, "")


def test_os_fork_traces_only_the_original_process(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        import os
        def f():  # << START_OF_TRACE
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            return "parent"

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.COMPLETE
    assert result.return_value() == "'parent'"
    assert not any("os._exit(0)" in f.action for f in result.frames)
    code, _, err = cli(capsys, path)
    assert (code, err) == (0, "")


def test_threads_run_but_only_the_main_thread_is_traced(interpreter, tmp_path, capsys):
    path = write(tmp_path, """\
        import threading
        def work(out):
            out.append(1)

        def f():  # << START_OF_TRACE
            out = []
            t = threading.Thread(target=work, args=(out,))
            t.start()
            t.join()
            return out

        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.COMPLETE
    assert result.return_value() == "[1]"
    assert {f.function for f in result.frames} == {"f"}
    code, _, err = cli(capsys, path)
    assert (code, err) == (0, "")


# -- bad input: exit 2, one line on stderr ------------------------------------------------------


def test_syntax_error_says_the_line(tmp_path, capsys):
    path = write(tmp_path, "def f():  # << START_OF_TRACE\n    x = (1,\n    return x\n")
    with pytest.raises(ProgramError, match="line 2"):
        load_program(path)
    code, out, err = cli(capsys, path)
    assert (code, out) == (2, "")
    assert "syntax error on line 2" in one_line(err)


def test_no_entry_says_how_to_mark_one(tmp_path, capsys):
    path = write(tmp_path, "def f():\n    return 1\n\nf()\n")
    with pytest.raises(ProgramError, match="START_OF_TRACE"):
        load_program(path)
    code, out, err = cli(capsys, path)
    assert (code, out) == (2, "")
    line = one_line(err)
    assert "# << START_OF_TRACE" in line and "--entry" in line


def test_entry_never_called(interpreter, tmp_path, capsys):
    path = write(tmp_path, "def f():  # << START_OF_TRACE\n    return 1\n")
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.NOT_CALLED
    assert result.frames == []
    code, out, err = cli(capsys, path)
    assert (code, out) == (2, "")
    assert "never called" in one_line(err) and "--call" in err


def test_program_failing_before_the_entry_is_an_input_error(interpreter, tmp_path, capsys):
    path = write(tmp_path, "import no_such_module_here\n\ndef f():  # << START_OF_TRACE\n    return 1\n\nf()\n")
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.ERROR
    code, out, err = cli(capsys, path)
    assert (code, out) == (2, "")
    assert "ModuleNotFoundError" in one_line(err)


def test_non_utf8_file(tmp_path, capsys):
    path = tmp_path / "latin1.py"
    path.write_bytes(b'def f():  # << START_OF_TRACE\n    s = "caf\xe9"\n    return s\n\nf()\n')
    code, out, err = cli(capsys, str(path))
    assert (code, out) == (2, "")
    assert one_line(err) == f"cwmtui: error: {path}: not UTF-8 text (bad byte on line 2)"


def test_missing_file_and_bad_limits(tmp_path, capsys):
    code, _, err = cli(capsys, str(tmp_path / "nope.py"))
    assert code == 2 and "no such file" in one_line(err)
    path = write(tmp_path, "def f():  # << START_OF_TRACE\n    return 1\n\nf()\n")
    code, _, err = cli(capsys, path, "--max-frames", "0")
    assert code == 2 and "limits must be positive" in one_line(err)


@pytest.mark.parametrize("timeout", ["nan", "inf"])
def test_a_timeout_that_never_fires_is_refused(tmp_path, capsys, timeout):
    path = write(tmp_path, "def f():  # << START_OF_TRACE\n    while True:\n        pass\n\nf()\n")
    code, out, err = cli(capsys, path, "--timeout", timeout)
    assert (code, out) == (2, "")
    assert "limits must be positive" in one_line(err) and "finite" in one_line(err)


def test_an_argparse_error_names_the_command_once(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--replay"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "cwmtui: error: argument --replay: expected one argument\n"
    with pytest.raises(SystemExit):
        main(["trace", "--format", "xml", "p.py"])
    assert capsys.readouterr().err.startswith("cwmtui trace: error: argument --format")


@pytest.mark.skipif(shutil.which("cwmtui") is None, reason="console script not installed")
def test_the_console_script_survives_a_segfault_and_a_syntax_error(tmp_path):
    crash = write(tmp_path, "import ctypes\ndef f():  # << START_OF_TRACE\n    ctypes.string_at(0)\n\nf()\n", "crash.py")
    run = subprocess.run(["cwmtui", "trace", crash], capture_output=True, text=True, timeout=30)
    assert run.returncode == 1
    assert run.stderr == "cwmtui: trace died: the program was killed by SIGSEGV\n"
    broken = write(tmp_path, "def f(:\n", "broken.py")
    run = subprocess.run(["cwmtui", "trace", broken], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "syntax error on line 1" in run.stderr


def test_a_frame_callback_that_raises_does_not_leak_frames_into_the_next_trace():
    loop = program_from_source(
        "def f():  # << START_OF_TRACE\n    t = 0\n    for i in range(300):\n        t += i\n    return t\n\nf()\n", "loop.py")
    small = program_from_source("def g():  # << START_OF_TRACE\n    return 7\n\ng()\n", "small.py")

    def fails(frame):
        if frame.lineno == 4:
            raise RuntimeError("the callback failed")

    with Interpreter() as interpreter:
        with pytest.raises(RuntimeError, match="the callback failed"):
            interpreter.trace(loop, on_frame=fails)
        trace = interpreter.trace(small)
    assert trace.status.kind is Status.COMPLETE
    assert [f.function for f in trace.frames] == ["g", "g", "g"]
    assert trace.return_value() == "7"


def test_finalizers_that_grow_the_locals_while_a_line_is_recorded(interpreter, tmp_path):
    # a garbage collection inside the tracer may run a __del__ that adds locals to the traced
    # frame: the trace must stay whole (the C line tracer once wrote past its tuple here)
    names = ", ".join(f"v{i}" for i in range(25))
    path = write(tmp_path, f"""\
        import gc, sys
        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                frame = sys._getframe(1)
                for i in range(40):
                    frame.f_locals[f"extra{{i}}"] = i
        def f():  # << START_OF_TRACE
            {names} = range(25)
            for k in range(300):
                Cycle()
            return v24
        gc.set_threshold(1)
        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.COMPLETE, result.status.describe()
    assert result.frames[-1].arg == "24"


def test_bytes_and_complex_survive_a_batch_that_needed_plain_data(interpreter, tmp_path):
    # a str subclass written to stdout makes the batch fall back to plain data: values stay values
    path = write(tmp_path, """\
        import sys
        class S(str):
            pass
        def f():  # << START_OF_TRACE
            b, c = b'hi', 2j
            sys.stdout.write(S('x'))
            return 1
        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.COMPLETE
    assert result.frames[-1].locals == {"b": "b'hi'", "c": "2j"} or result.frames[-2].locals == {"b": "b'hi'", "c": "2j"}


def test_a_segfault_in_a_thread_while_the_main_thread_computes_is_still_a_segfault(interpreter, tmp_path):
    path = write(tmp_path, """\
        import ctypes, threading
        def crash():
            ctypes.memset(0, 1, 1)
        def f():  # << START_OF_TRACE
            x = 1
            threading.Thread(target=crash).start()
            total = sum(range(10 ** 9))
            return total
        f()
        """)
    result, _ = trace(interpreter, path)
    assert result.status.kind is Status.DIED
    # sum() holds the GIL in C for seconds, so the flush may not get to run: the frames not yet
    # sent can be lost, but the process still dies of its own signal, at once
    assert result.status.message == "the program was killed by SIGSEGV"
    assert [f.action.strip() for f in result.frames[:2]] in (["def f():", "x = 1"], ["def f():"], [])
