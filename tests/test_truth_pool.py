"""Ground truth through a pool of fork servers (evaluation/truth_pool.py): the same traces, in the
suite's order, as one interpreter gives; cancel, errors and dying servers as one interpreter."""

import threading
import time

import pytest

from cwmtui.evaluation.batch import trace_suite
from cwmtui.evaluation.suite import Case
from cwmtui.evaluation.truth_pool import default_workers, trace_programs
from cwmtui.interpreter import Interpreter, Limits, program_from_source, runner
from cwmtui.trace import Status

LIMITS = Limits(frames=300, seconds=1.0, output=2000)

SOURCES = {
    "completes": "def f(n):  # << START_OF_TRACE\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n\nf(6)\n",
    "raises": "def f(x):  # << START_OF_TRACE\n    y = [1, 2]\n    return y[x]\n\nf(5)\n",
    "prints": "def f(s):  # << START_OF_TRACE\n    print('hi', s)\n    print(s * 2)\n    return len(s)\n\nf('ab')\n",
    "times out": "import time\n\ndef f():  # << START_OF_TRACE\n    x = 1\n    time.sleep(30)\n    return x\n\nf()\n",
    "frame limit": "def f():  # << START_OF_TRACE\n    i = 0\n    while True:\n        i += 1\n\nf()\n",
    "output limit": "def f():  # << START_OF_TRACE\n    s = 'x' * 100\n    for _ in range(5):\n        print(s * 10)\n    return 1\n\nf()\n",
    "not called": "def f():  # << START_OF_TRACE\n    return 1\n\nprint('never')\n",
    "fails before": "def f():  # << START_OF_TRACE\n    return 1\n\nraise ValueError('early')\n",
    "exits": "import os\n\ndef f():  # << START_OF_TRACE\n    a = 3\n    os._exit(3)\n\nf()\n",
    "recursion": "def f(n):  # << START_OF_TRACE\n    return n if n == 0 else 1 + f(n - 1)\n\nf(40)\n",
    "strings": "def f(words):  # << START_OF_TRACE\n    seen = {}\n    for w in words:\n        seen[w] = seen.get(w, 0) + 1\n    return sorted(seen.items())\n\nf(['a', 'b', 'a'])\n",
}


def mixed_cases(times: int = 2) -> list[Case]:
    return [Case(f"{name} {round_}", program_from_source(source, f"<{name}>"))
            for round_ in range(times) for name, source in SOURCES.items()]


def seen(truths) -> list[tuple]:
    """What a trace is: its frames, status and output (and the program it belongs to)."""
    return [(t.case.id, t.trace.frames, t.trace.status, t.trace.output) for t in truths]


@pytest.fixture(scope="module")
def one_interpreter():
    """The mixed suite through one interpreter (today's path), and the traces it gave."""
    cases = mixed_cases()
    return cases, trace_suite(cases, LIMITS, workers=1)


def test_the_mixed_suite_covers_what_it_claims(one_interpreter):
    _, truths = one_interpreter
    by_name = {t.case.id.rsplit(" ", 1)[0]: t.trace for t in truths}
    assert by_name["completes"].status.kind is Status.COMPLETE and by_name["completes"].return_value() == "15"
    assert by_name["raises"].status.kind is Status.RAISED
    assert by_name["prints"].output and "hi ab" in "".join(chunk.text for chunk in by_name["prints"].output)
    assert (by_name["times out"].status.kind, by_name["times out"].status.limit) == (Status.LIMIT, "time")
    assert (by_name["frame limit"].status.kind, by_name["frame limit"].status.limit) == (Status.LIMIT, "frames")
    assert by_name["output limit"].status.limit == "output"
    assert by_name["not called"].status.kind is Status.NOT_CALLED
    assert by_name["fails before"].status.kind is Status.ERROR
    assert by_name["exits"].status.kind is Status.DIED


@pytest.mark.parametrize("workers", [2, 3])
def test_a_pool_gives_the_same_traces_in_the_suites_order(one_interpreter, workers):
    cases, alone = one_interpreter
    called = []
    pooled = trace_suite(cases, LIMITS, on_truth=lambda t: called.append((t.case.id, threading.current_thread())),
                         workers=workers)
    assert seen(pooled) == seen(alone)
    assert [t.case for t in pooled] == cases
    # on_truth: once per program, in the suite's order, in the caller's thread
    assert called == [(case.id, threading.current_thread()) for case in cases]


def test_the_order_is_kept_when_the_first_program_is_the_slowest():
    slow = "import time\n\ndef f():  # << START_OF_TRACE\n    time.sleep(0.4)\n    return 'slow'\n\nf()\n"
    fast = "def f(i):  # << START_OF_TRACE\n    return i * 2\n\nf({i})\n"
    cases = [Case("slow", program_from_source(slow, "<slow>"))]
    cases += [Case(f"fast {i}", program_from_source(fast.format(i=i), f"<fast {i}>")) for i in range(12)]
    truths = trace_suite(cases, workers=2)
    assert [t.case.id for t in truths] == [c.id for c in cases]
    assert [t.trace.return_value() for t in truths] == ["'slow'"] + [str(i * 2) for i in range(12)]
    assert truths[0].seconds >= 0.4


def test_cancel_stops_handing_out_programs_and_keeps_a_prefix_in_order():
    cases = mixed_cases(4)
    cancel = threading.Event()
    called = []

    def on_truth(truth):
        called.append(truth.case.id)
        if len(called) == 3:
            cancel.set()

    truths = trace_suite(cases, LIMITS, on_truth=on_truth, cancel=cancel, workers=2)
    # the programs already started when it was set finish (the suite's next ones: the list is
    # still a prefix, in order); nothing after them starts
    assert 3 <= len(truths) < len(cases)
    assert [t.case.id for t in truths] == [c.id for c in cases[: len(truths)]] == called
    cancel.set()
    assert trace_suite(cases, LIMITS, cancel=cancel, workers=2) == []


def test_one_worker_is_todays_path_through_the_given_interpreter(monkeypatch, one_interpreter):
    cases, alone = one_interpreter

    def no_sibling(self):
        raise AssertionError("one worker must not start a second interpreter")

    monkeypatch.setattr(Interpreter, "sibling", no_sibling)
    with Interpreter() as interpreter:
        assert seen(trace_suite(cases, LIMITS, interpreter=interpreter, workers=1)) == seen(alone)
        assert interpreter._process is not None and interpreter._process.poll() is None  # left open, as before
    # a suite of one program needs no pool either, whatever the number of workers
    assert [t.trace.return_value() for t in trace_suite(cases[:1], LIMITS, workers=4)] == ["15"]
    with pytest.raises(ValueError):
        trace_suite(cases, LIMITS, workers=0)


@pytest.fixture
def made(monkeypatch):
    """The interpreters the pools of a test make (Interpreter.sibling, noted)."""
    made = []
    sibling = Interpreter.sibling

    def noted(self):
        made.append(sibling(self))
        return made[-1]

    monkeypatch.setattr(Interpreter, "sibling", noted)
    return made


def test_a_pool_has_interpreters_of_its_own_and_closes_them(made):
    cases = mixed_cases(1)
    with Interpreter() as interpreter:
        before = interpreter.trace(cases[0].program, LIMITS)
        server = interpreter._process
        truths = trace_suite(cases, LIMITS, interpreter=interpreter, workers=3)
        assert len(truths) == len(cases) and len(made) == 3
        # the caller's is left alone, its server as it was (a sandboxed server dies with the
        # thread that started it, so a pool's worker threads never start the caller's)
        assert interpreter._process is server and server.poll() is None
        assert interpreter.trace(cases[0].program, LIMITS).frames == before.frames
    assert all(other._process is None for other in made)


@pytest.mark.skipif(not runner.sandbox_available(), reason="bubblewrap cannot make a sandbox here")
def test_every_server_of_a_pool_is_sandboxed_even_when_the_sandbox_is_not_yet_known(monkeypatch, made):
    monkeypatch.setattr(runner, "_sandbox", None)  # as in a fresh process: the threads would ask at once
    sandboxed = []
    trace = Interpreter.trace

    def noting(self, program, limits=LIMITS, on_frame=None):
        result = trace(self, program, limits, on_frame)
        sandboxed.append(self._sandboxed)
        return result

    monkeypatch.setattr(Interpreter, "trace", noting)
    trace_suite(mixed_cases(1), LIMITS, workers=3)
    assert len(sandboxed) == len(mixed_cases(1)) and all(sandboxed)


@pytest.mark.skipif(not runner.sandbox_available(), reason="bubblewrap cannot make a sandbox here")
def test_threads_asking_for_the_sandbox_at_once_all_get_the_answer(monkeypatch):
    monkeypatch.setattr(runner, "_sandbox", None)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(runner.sandbox_available())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [True] * 4


def test_default_workers_is_the_cores_this_process_may_use():
    assert default_workers() >= 1
    assert trace_suite([], LIMITS) == []


KILLS_ITS_SERVER = (
    "import os, signal\n\ndef f():  # << START_OF_TRACE\n    x = 1\n    os.kill(os.getppid(), signal.SIGKILL)\n"
    "    return x\n\nf()\n"
)


def test_a_program_that_kills_its_fork_server_dies_alone_and_the_worker_goes_on(one_interpreter):
    cases, alone = one_interpreter
    killer = Case("killer", program_from_source(KILLS_ITS_SERVER, "<killer>"))
    suite = cases[:4] + [killer] + cases[4:] + [killer] + cases[:3]
    single = trace_suite(suite, LIMITS, workers=1)
    pooled = trace_suite(suite, LIMITS, workers=2)
    for truths in (single, pooled):
        dead = [t for t in truths if t.case.id == "killer"]
        assert len(dead) == 2 and all(t.trace.status.kind is Status.DIED for t in dead)
        assert "lost contact with the tracer process" in dead[0].trace.status.message
        # every other program ran on a fresh server, as it did without the killer
        assert seen([t for t in truths if t.case.id != "killer"]) == seen(alone + alone[:3])
    assert seen(pooled) == seen(single)


def test_a_server_killed_from_outside_costs_the_program_in_flight_only(made):
    sleeper = "import time\n\ndef f():  # << START_OF_TRACE\n    time.sleep(0.5)\n    return 1\n\nf()\n"
    fast = "def f(i):  # << START_OF_TRACE\n    return i\n\nf({i})\n"
    cases = [Case(f"sleep {i}", program_from_source(sleeper, f"<sleep {i}>")) for i in range(2)]
    cases += [Case(f"fast {i}", program_from_source(fast.format(i=i), f"<fast {i}>")) for i in range(6)]
    killed = threading.Event()

    def kill_soon():
        while not killed.is_set():
            started = [other._process for other in made if other._process is not None]
            if len(started) == 2:
                time.sleep(0.25)  # both sleepers are in flight, one on each server
                started[0].kill()
                killed.set()
            time.sleep(0.01)

    killer = threading.Thread(target=kill_soon)
    killer.start()
    try:
        truths = trace_suite(cases, workers=2)
    finally:
        killed.set()
        killer.join()
    statuses = [t.trace.status.kind for t in truths]
    assert [t.case.id for t in truths] == [c.id for c in cases]
    # the sleeper on the killed server (either worker may have taken either sleeper) died alone
    died = [t for t in truths if t.trace.status.kind is Status.DIED]
    assert len(died) == 1 and died[0].case.id.startswith("sleep")
    assert "lost contact with the tracer process" in died[0].trace.status.message
    # that worker's next program started a fresh server, as one interpreter's does
    assert statuses.count(Status.COMPLETE) == 7
    assert [t.trace.return_value() for t in truths[2:]] == [str(i) for i in range(6)]


class Failing(Interpreter):
    """An interpreter that fails (not the program: the interpreter) on one program."""

    made: list = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        Failing.made.append(self)

    def sibling(self):
        return Failing()

    def trace(self, program, limits=LIMITS, on_frame=None):
        if program.path == "<bad>":
            raise RuntimeError("the interpreter broke")
        return super().trace(program, limits, on_frame)


def test_an_error_of_a_worker_is_raised_and_every_server_closed():
    Failing.made = []
    cases = mixed_cases(1)
    cases.insert(5, Case("bad", program_from_source("def f():  # << START_OF_TRACE\n    return 1\n\nf()\n", "<bad>")))
    with pytest.raises(RuntimeError, match="the interpreter broke"):
        trace_suite(cases, LIMITS, interpreter=Failing(), workers=3)
    assert len(Failing.made) == 1 + 3 and all(made._process is None for made in Failing.made)
    assert not [t for t in threading.enumerate() if t.name.startswith("truth-")]


def test_leaving_early_closes_the_pool(made):
    cases = mixed_cases(2)

    def stop(truth):
        if truth.case.id.startswith("strings"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trace_suite(cases, LIMITS, on_truth=stop, workers=3)
    assert len(made) == 3 and all(other._process is None for other in made)
    assert not [t for t in threading.enumerate() if t.name.startswith("truth-")]


def test_the_generator_hands_back_index_trace_and_seconds():
    programs = [case.program for case in mixed_cases(1)]
    got = list(trace_programs(programs, LIMITS, workers=2))
    assert [index for index, _, _ in got] == list(range(len(programs)))
    assert all(seconds >= 0 for _, _, seconds in got)


def test_cwmtui_eval_truth_workers_gives_the_same_results(capsys, tmp_path):
    import json

    from cwmtui.cli import main

    from .test_eval_cli import perfect_replay

    replay = perfect_replay(tmp_path, "zoo", depth=[1, 2], count=1)
    runs = {}
    for workers in ("1", "3"):
        out = tmp_path / f"results-{workers}.jsonl"
        code = main(["eval", "zoo", "--depth", "1", "2", "--count", "1", "--replay", str(replay),
                     "--truth-workers", workers, "--out", str(out), "--json"])
        report = json.loads(capsys.readouterr().out)
        assert code == 0 and report["count"] == 32 and report["trace_exact"] == 1.0
        records = [json.loads(line) for line in out.read_text().splitlines()]
        runs[workers] = [{k: v for k, v in r.items() if k not in ("timings", "config")} for r in records]
    assert runs["1"] == runs["3"]
    assert main(["eval", "zoo", "--replay", str(replay), "--truth-workers", "0"]) == 2
    assert "--truth-workers must be at least 1" in capsys.readouterr().err
