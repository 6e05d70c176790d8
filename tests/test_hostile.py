"""Hostile programs: each ends within its limit with a clear status or message, never a hang or
a traceback, both through Interpreter.trace and through `cwmtui trace` (exit 1 with the partial
trace printed, or exit 2 with one line on stderr). Limits are small to keep this file fast."""

import json
import os
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


# -- hostile input files and options of the other verbs: exit 2, one line, nothing lost ---------


def verb(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


ONE = "def f():  # << START_OF_TRACE\n    return 1\n\nf()\n"


@pytest.mark.parametrize("call", ["(yield 1)", "(yield from f(1))", "await f(1)", "[x async for x in f(1)]"])
def test_a_call_that_would_yield_or_await_is_refused(tmp_path, capsys, call):
    # it runs as ``return CALL`` in a function of its own: a generator or coroutine, never the entry
    for source in ("def f(x):\n    return x\n", "def f(x):  # << START_OF_TRACE\n    return x\n"):
        code, out, err = cli(capsys, write(tmp_path, source), f"--call={call}")
        assert (code, out) == (2, "")
        assert one_line(err) == f"cwmtui: error: --call {call!r}: a call cannot yield or await; call the entry directly"
    code, out, err = cli(capsys, write(tmp_path, "def f(x):\n    return x\n"), f"--call=f(lambda y={call}: y)")
    assert code == 2 and "a call cannot yield or await" in err  # a default runs in the call's function
    for own in ("f(lambda: (yield))", "f((await x for x in [1]))"):  # a lambda's or a generator's own
        code, out, err = cli(capsys, write(tmp_path, "def f(x):\n    return x\n"), f"--call={own}")
        assert code == 0 and out, err


def test_absurd_nesting_in_the_program_or_the_call_is_an_input_error(tmp_path, capsys):
    deep = write(tmp_path, "x = " + "-" * 100_000 + "1\n", "deep.py")  # the parser runs out of stack
    code, out, err = cli(capsys, deep)
    assert (code, out) == (2, "")
    assert one_line(err) == f"cwmtui: error: {deep}: cannot parse it (nested too deeply)"
    plain = write(tmp_path, "def f(x):\n    return x\n")
    code, _, err = cli(capsys, plain, f"--call=f({'-' * 100_000}1)")
    assert code == 2 and one_line(err).endswith("...': cannot parse it (nested too deeply)")  # shortened
    nulls = tmp_path / "nul.py"
    nulls.write_bytes(b"def f():  # << START_OF_TRACE\n    return '\0'\n")
    code, _, err = cli(capsys, str(nulls))
    assert one_line(err) == f"cwmtui: error: {nulls}: syntax error: source code string cannot contain null bytes"
    # a nesting the parser takes: finding the entry must not exhaust the stack either
    nested = write(tmp_path, "def f():  # << START_OF_TRACE\n    return " + "-" * 1000 + "1\n\nf()\n", "nested.py")
    code, _, err = cli(capsys, nested, *FAST_ARGS)
    assert (code, err) == (0, "")


def test_a_memory_limit_beyond_what_the_os_can_hold_means_no_limit(tmp_path, capsys):
    path = write(tmp_path, ONE)
    code, _, err = cli(capsys, path, "--memory", str(10**20))
    assert (code, err) == (0, "")


@pytest.mark.parametrize("line, message", [
    ('{"id": ' + "9" * 5000 + ', "generation": ""}', ":1: not valid JSON (Exceeds the limit (4300 digits) for integer string conversion"),
    ("[" * 100_000 + "]" * 100_000, ":1: not valid JSON (nested too deeply)"),
    ('{"id": "a", "program": "def f(:", "generation": "", "x": [1, 2', ":1: not valid JSON (Expecting ',' delimiter at column"),
    ('{"id": "a", "program": %s, "generation": "<|call_sep|>{}\\ud800"}' % json.dumps(ONE),
     ":1: the generation is not valid Unicode (character 14 is a lone surrogate)"),
    ('{"id": "a", "program": "x = ' + "-" * 100_000 + '1", "generation": ""}', ":1: <replay a>: cannot parse it (nested too deeply)"),
    ('{"id": {"a": 1}, "program": %s, "generation": ""}' % json.dumps(ONE), ":1: 'id' must be text or a number"),
    ('{"id": "a", "program": %s, "call": 5, "generation": ""}' % json.dumps(ONE), ":1: 'call' must be text (the Python expression"),
])
def test_a_damaged_replay_file_is_one_line(tmp_path, capsys, line, message):
    path = tmp_path / "r.jsonl"
    path.write_text(line + "\n")
    code, out, err = verb(capsys, "diff", "--replay", str(path))
    assert (code, out) == (2, "")
    assert one_line(err).startswith(f"cwmtui: error: {path}{message}")
    code, _, err = verb(capsys, "open", write(tmp_path, "{}", "s.json"), "--replay", str(path))  # before any app
    assert code == 2 and one_line(err).startswith(f"cwmtui: error: {path}{message}")


def test_damaged_suite_and_results_files_are_one_line(tmp_path, capsys):
    undecodable, deep, damaged = tmp_path / "latin.jsonl", tmp_path / "deep.jsonl", tmp_path / "damaged.jsonl"
    undecodable.write_bytes(b'{"id": "caf\xe9", "program": "x"}\n')
    deep.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    damaged.write_text('{"output": 1, "frames": 2}\n')
    for argv, message in [
        ((str(undecodable),), f"{undecodable}: not UTF-8 text (bad byte on line 1)"),
        (("--report", str(undecodable)), f"{undecodable}: not UTF-8 text (bad byte on line 1)"),
        ((str(deep),), f"{deep}:1: not valid JSON (nested too deeply)"),
        (("--report", str(deep)), f"{deep}:1: not valid JSON (nested too deeply)"),
        (("--report", str(damaged)), f"{damaged}: the results file is damaged (TypeError: 'int' object is not subscriptable)"),
    ]:
        code, out, err = verb(capsys, "eval", *argv)
        assert (code, out) == (2, ""), argv
        assert one_line(err) == f"cwmtui: error: {message}"


@pytest.mark.parametrize("content, problem", [
    ('\n{"id": "a",\n', ":2: not valid JSON (Expecting property name enclosed in double quotes at column 12)"),
    ("[1, 2]\n", ":1: not a JSON object"),
    (None, ": is a directory, not a {what}"),
    ("missing", ": no such file"),
])
def test_suite_results_and_replay_files_report_the_same_damage_alike(tmp_path, capsys, content, problem):
    path = tmp_path / "file.jsonl"
    if content is None:
        path.mkdir()
    elif content != "missing":
        path.write_text(content)
    readers = [(("eval", "--report", str(path)), "results file"), (("diff", "--replay", str(path)), "replay file")]
    if content not in (None, "missing"):  # a suite is a file or a directory (of .py files)
        readers.append((("eval", str(path)), "suite file"))
    for argv, what in readers:
        code, out, err = verb(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert one_line(err) == f"cwmtui: error: {path}{problem.format(what=what)}", argv


def test_an_output_file_never_overwrites_an_input_and_bad_paths_fail_first(tmp_path, capsys):
    program = write(tmp_path, ONE)
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "a", "program": ONE}) + "\n")
    kept = suite.read_text()
    for argv, message in [
        (("eval", str(suite), "--out", str(suite)), f"--out {suite}: that is an input of this run; writing it would destroy it"),
        (("eval", str(tmp_path), "--out", program), f"--out {program}: that is an input of this run; writing it would destroy it"),
        (("eval", str(suite), "--out", str(tmp_path / "no" / "r.jsonl")), f"--out {tmp_path / 'no' / 'r.jsonl'}: no such directory {tmp_path / 'no'}"),
        (("eval", str(suite), "--out", str(tmp_path)), f"--out {tmp_path}: is a directory; give a file name"),
        (("eval", str(suite), "--out", ""), "--out: give a file name"),
        (("eval", "--report", str(suite), "--plot", str(tmp_path / "no" / "p.png")), f"--plot {tmp_path / 'no' / 'p.png'}: no such directory {tmp_path / 'no'}"),
        (("diff", program, "--save", program), f"--save {program}: that is an input of this run; writing it would destroy it"),
        (("diff", program, "--save", ""), "--save: give a file name"),
    ]:
        code, out, err = verb(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert one_line(err) == f"cwmtui: error: {message}"
    assert suite.read_text() == kept and open(program).read() == ONE


def test_train_refuses_numbers_that_never_stop_and_a_run_over_a_checkpoint(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"weights")
    for argv, message in [
        (("--minutes", "nan"), "--minutes must be positive"),
        (("--checkpoint-minutes", "nan"), "--checkpoint-minutes must be positive (and finite)"),
        (("--batch-tokens", "0"), "--batch-tokens must be positive (and finite)"),
        (("--decay-tokens", "nan"), "--decay-tokens must be 0 or more (and finite)"),
        (("--decay-start", "inf"), "--decay-start must be a number of tokens, or -1 (now)"),
        ((), f"{run} already holds a checkpoint: --resume {run} continues it, or pick another --out"),
        (("--init", "bundled"), f"{run} already holds a checkpoint: --resume {run} continues it, or pick another --out"),
    ]:
        code, out, err = verb(capsys, "train", "--out", str(run), *argv)
        assert (code, out) == (2, ""), argv
        assert one_line(err) == f"cwmtui: error: {message}"
    assert (run / "checkpoint.pt").read_bytes() == b"weights"


@pytest.mark.parametrize("css, message", [
    ("$primary: notacolor;\n", "failed to parse 'notacolor' as a color"),
    ("$primary: #fff;\n$cwm-truth: zzz;\n", "failed to parse 'zzz' as a color"),
    ("$primary: #fff;\nScreen {\n    color: nothing;\n}\n", "line 3: Invalid value ('nothing') for the color property"),
    ("$primary: #fff;\nScreen {\n    color: $nope;\n}\n", "line 3: reference to undefined variable '$nope'"),
])
def test_a_theme_the_app_would_reject_is_refused_before_it_starts(tmp_path, capsys, css, message):
    theme = tmp_path / "t.tcss"
    theme.write_text(css)
    code, out, err = verb(capsys, write(tmp_path, ONE), "--theme", str(theme))
    assert (code, out) == (2, "")
    assert one_line(err).startswith(f"cwmtui: error: theme '{theme}'") and message in err


def test_an_export_dir_x_could_not_save_into_is_refused_before_the_app_starts(tmp_path, capsys):
    program, session = write(tmp_path, ONE), write(tmp_path, "{}", "s.json")
    blocker = write(tmp_path, "not a folder", "blocker")
    for path, message in [(blocker, "is a file, not a directory"), (f"{blocker}/sub", f"({blocker} is not a directory)"),
                          ("", "give a directory")]:
        for argv in ((program,), ("open", session)):
            code, out, err = verb(capsys, *argv, "--export-dir", path)
            assert (code, out) == (2, ""), (argv, path)
            assert message in one_line(err), (argv, path)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_an_export_dir_under_proc_is_refused_even_for_root(tmp_path, capsys):
    # os.access says root may write anywhere; the check makes a file to find out
    code, out, err = verb(capsys, write(tmp_path, ONE), "--export-dir", "/proc/cwmtui-exports")
    assert (code, out) == (2, "")
    assert "(/proc is not a writable directory: " in one_line(err)


@pytest.mark.parametrize("damage, message", [
    (lambda s: s["program"].__setitem__("source", 5), "the program's source is int"),
    (lambda s: s["model"].__setitem__("name", 5), "the model's name and description must be text"),
    (lambda s: s["branches"][0].__setitem__("intervention", "x"), "a branch's intervention must be an object"),
    (lambda s: s["branches"][0].__setitem__("name", 5), "a branch's name and parent must be text"),
    (lambda s: s["truth"].__setitem__("output", [[0, 5, 7]]), "an output chunk must be [step, stream, text]"),
    (lambda s: s["branches"][0].__setitem__("intervention", {"kind": "action", "source": []}), "unknown intervention source []"),
])
def test_a_damaged_session_is_refused_before_the_app_starts(tmp_path, capsys, damage, message):
    # a saved session of a perfect recorded generation (the interpreter's own trace)
    code, trace_text, _ = cli(capsys, write(tmp_path, ONE))
    replay, saved = tmp_path / "r.jsonl", tmp_path / "s.json"
    replay.write_text(json.dumps({"id": "a", "program": ONE, "generation": trace_text}) + "\n")
    assert verb(capsys, "diff", "--replay", str(replay), "--save", str(saved))[0] == 0
    session = json.loads(saved.read_text())
    damage(session)
    saved.write_text(json.dumps(session))
    code, out, err = verb(capsys, "open", str(saved))
    assert (code, out) == (2, "")
    assert one_line(err).startswith(f"cwmtui: error: {saved}: the session file is damaged (") and message in err


def test_a_server_url_that_does_not_parse_is_one_line(tmp_path, capsys):
    program = write(tmp_path, ONE)
    for argv in (("diff", program), (program,)):  # the debugger checks it before it starts
        code, out, err = verb(capsys, *argv, "--server", "http://[::1")
        assert (code, out) == (2, "")
        assert one_line(err) == "cwmtui: error: --server 'http://[::1': not an http(s) URL, e.g. http://localhost:8000"


@pytest.mark.skipif(shutil.which("cwmtui") is None, reason="console script not installed")
def test_a_reader_that_stops_early_is_no_traceback(tmp_path):
    loop = write(tmp_path, "def f():  # << START_OF_TRACE\n    t = 0\n    for i in range(3000):\n        t += i\n    return t\n\nf()\n")
    with subprocess.Popen(["cwmtui", "trace", loop, "--format", "json"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as run:  # ~1 MB of lines: more than a pipe holds
        assert run.stdout.readline().startswith('{"step": 0')
        run.stdout.close()  # as `| head -1` does
        err = run.stderr.read()
        run.wait(timeout=30)
    assert "Traceback" not in err and "BrokenPipe" not in err
    assert run.returncode == 141


@pytest.mark.parametrize("argv, message", [
    (("diff",), "give a PROGRAM to compare"),
    (("trace",), "the following arguments are required: program"),
])
def test_a_program_file_named_like_a_verb_is_pointed_out_when_the_verb_fails(tmp_path, capsys, monkeypatch, argv, message):
    def run():  # argparse's refusals exit; the verbs' own return 2
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        assert (code, out) == (2, "")
        return one_line(err)

    monkeypatch.chdir(tmp_path)
    write(tmp_path, ONE, argv[0])
    line = run()
    assert message in line and line.endswith(f"to open the file '{argv[0]}', write ./{argv[0]})")
    (tmp_path / argv[0]).unlink()  # without the file, no hint
    assert "./" not in run()
