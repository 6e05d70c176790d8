"""A batch run: ground truth for a whole suite, then one rollout per program.

The truth is traced first, by fork-server :class:`Interpreter`s (no interpreter start-up per
program): one per core at once (:mod:`.truth_pool`), or one, program after program, with the
same traces either way. Rollouts then run on ``concurrency`` worker threads, each with
its own backend (a server backend serves several requests at once; a local model runs one
program at a time). Every finished program becomes a results record (:mod:`.record`), handed to
``on_result`` as soon as it is ready so a long run can be written out as it goes; the conditions
run beside it (the other decoding, the teacher-forced one, samples, the interventions of
:mod:`.recovery_run`) go into the same record.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from ..interpreter import Interpreter, Limits
from ..trace import Status, Trace
from .record import condition_summary, error_record, result_record, rollout_summary
from .replayed import replayed_rollout
from .suite import Case, Suite


@dataclass
class Truth:
    case: Case
    trace: Trace
    seconds: float

    @property
    def usable(self) -> bool:
        """A trace the model can be compared with: the entry was called."""
        return bool(self.trace.frames) and self.trace.status.kind not in (Status.NOT_CALLED, Status.ERROR)

    def problem(self) -> str:
        return f"{self.case.id}: {self.trace.status.describe()}"


@dataclass
class BatchOptions:
    rollout: object = None  # model.rollout.RolloutOptions (None: its defaults)
    teacher_force: bool = False
    recovery: bool = False  # also the interventions at the first divergence (evaluation.recovery_run)
    samples: int = 1  # free-running samples per program (evaluation.samples: pass@k)
    #: the other decoding run beside the free-running condition: "constrained" (under the frame
    #: grammar) or "free" (without it), or None
    beside: str | None = None
    concurrency: int = 1
    limits: Limits = field(default_factory=Limits)


def trace_suite(
    cases: list[Case],
    limits: Limits | None = None,
    on_truth: Callable[[Truth], None] | None = None,
    interpreter: Interpreter | None = None,
    cancel: threading.Event | None = None,
    workers: int | None = None,
) -> list[Truth]:
    """The ground truth of every program, in the suite's order: through one interpreter (one
    fork server) when ``workers`` is 1, else through a pool of ``workers`` of them at once
    (default: one per core; :mod:`.truth_pool`), with the same traces. ``interpreter``: the one
    to use, left open (a pool makes its own like it); ``on_truth`` is called in this thread, in
    order."""
    from contextlib import closing

    from .truth_pool import default_workers, trace_programs

    limits = limits or Limits()
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    truths = []
    if workers > 1 and len(cases) > 1:
        with closing(trace_programs([case.program for case in cases], limits, workers, interpreter, cancel)) as traced:
            for index, trace, seconds in traced:
                truth = Truth(cases[index], trace, seconds)
                truths.append(truth)
                if on_truth is not None:
                    on_truth(truth)
        return truths
    own = interpreter is None
    interpreter = interpreter or Interpreter()
    try:
        for case in cases:
            if cancel is not None and cancel.is_set():
                break
            began = time.perf_counter()
            trace = interpreter.trace(case.program, limits)
            truth = Truth(case, trace, time.perf_counter() - began)
            truths.append(truth)
            if on_truth is not None:
                on_truth(truth)
    finally:
        if own:
            interpreter.close()
    return truths


def evaluate_case(backend, suite: str, truth: Truth, options: BatchOptions, cancel: threading.Event | None = None) -> dict:
    """Roll the model out on one program (free-running, and teacher-forced when asked) and score it.

    ``backend`` is a live backend, or :class:`RecordedGenerations` (``--replay FILE``): then the
    recorded generations are scored instead.
    """
    from ..model.rollout import RolloutOptions

    rollout_options = options.rollout or RolloutOptions()
    trace = truth.trace
    began = time.perf_counter()
    rollout = free_rollout(backend, truth, rollout_options, cancel)
    model_seconds = time.perf_counter() - began
    free = rollout_summary(trace, rollout)
    tokens = {"trace": rollout.tokens_used, "processed": rollout.tokens_processed}
    timings = {"truth_s": round(truth.seconds, 4), "model_s": round(model_seconds, 4)}
    teacher = None
    if options.teacher_force:
        began = time.perf_counter()
        teacher = teacher_forced_summary(backend, truth, rollout_options, cancel)
        timings["teacher_forced_s"] = round(time.perf_counter() - began, 4)
    if isinstance(backend, RecordedGenerations):
        model = backend.model_name(truth.case.id)
        tokens = backend.recorded(truth.case.id, "tokens") or tokens
        timings = {**(backend.recorded(truth.case.id, "timings") or {}), "truth_s": timings["truth_s"]}
    else:
        model = getattr(backend, "name", "")
    record = result_record(
        truth.case, suite, trace, free, model=model, timings=timings, tokens=tokens, teacher_forced=teacher
    )
    # how the free-running condition was decoded: under the frame grammar or not (a replay: as
    # its file recorded; a recording says nothing of it otherwise)
    if isinstance(backend, RecordedGenerations):
        record["decoding"] = backend.records.get(truth.case.id, {}).get("decoding")
    else:
        record["decoding"] = "constrained" if getattr(rollout, "constrained", False) else "free"
    if options.beside is not None:
        began = time.perf_counter()
        record[options.beside] = beside_summary(backend, truth, rollout_options, options.beside, cancel)
        record["timings"][f"{options.beside}_s"] = round(time.perf_counter() - began, 4)
    if options.samples > 1:
        from .samples import more_samples, sample_summary

        assert isinstance(rollout_options, RolloutOptions)
        began = time.perf_counter()
        recorded = backend.records.get(truth.case.id, {}).get("samples") if isinstance(backend, RecordedGenerations) else None
        first_seed = recorded[0].get("seed", rollout_options.seed) if recorded and isinstance(recorded[0], dict) else rollout_options.seed
        record["samples"] = [sample_summary(free, first_seed),
                             *more_samples(backend, truth, rollout_options, options.samples, cancel, recorded)]
        record["timings"]["samples_s"] = round(time.perf_counter() - began, 4)
    if options.recovery:
        began = time.perf_counter()
        record["recovery"] = recovery_of(backend, truth, rollout, options, cancel)
        record["timings"]["recovery_s"] = round(time.perf_counter() - began, 4)
    return record


def beside_summary(backend, truth: Truth, rollout_options, decoding: str, cancel=None) -> dict:
    """The free-running condition again with the other decoding (``decoding``: "constrained",
    under the frame grammar, or "free", without it): how many failures were only format, and
    what remains. A replay scores the generation its file recorded for that condition."""
    from dataclasses import replace

    from ..model.rollout import Rollout

    if isinstance(backend, RecordedGenerations):
        rollout = replayed_rollout(truth.case.program, backend.records[truth.case.id][decoding])
    else:
        rollout = Rollout(backend, truth.case.program, truth.trace.frames[0],
                          replace(rollout_options, constrain=decoding == "constrained"))
        rollout.run(cancel=cancel)
    summary = rollout_summary(truth.trace, rollout)
    summary["tokens"] = {"trace": rollout.tokens_used, "processed": rollout.tokens_processed}
    return summary


def recovery_of(backend, truth: Truth, rollout, options: BatchOptions, cancel=None) -> dict | None:
    """The interventions at the first divergence of ``rollout`` (see :mod:`.recovery_run`): on the
    live model, or on a replay's live model beside it (``--replay FILE --model …``), or replayed
    from the file's own recorded ones."""
    from ..model.rollout import RolloutOptions
    from .recovery_run import recover

    recorded = None
    model = backend
    if isinstance(backend, RecordedGenerations):
        model = backend.live
        recorded = backend.records.get(truth.case.id, {}).get("recovery")
    return recover(model, truth, rollout, options.rollout or RolloutOptions(), options.limits, recorded, cancel)


def free_rollout(backend, truth: Truth, rollout_options, cancel=None):
    """The free-running condition: the entry call frame forced from the truth, the rest generated."""
    from ..model.rollout import Rollout

    if isinstance(backend, RecordedGenerations):
        return backend.rollout(truth.case)
    rollout = Rollout(backend, truth.case.program, truth.trace.frames[0], rollout_options)
    rollout.run(cancel=cancel)
    return rollout


def teacher_forced_summary(backend, truth: Truth, rollout_options, cancel=None) -> dict:
    """The teacher-forced condition: every event and action forced from the truth, the model
    writes only the states. A frame the model could not write at all (the truth's whole frame
    had to be forced) is scored as a format error, not as a match."""
    from ..analysis.recovery import score_forced, scored_frames, teacher_force
    from ..model.rollout import Rollout

    trace = truth.trace
    if isinstance(backend, RecordedGenerations):
        rollout, forced = backend.teacher_forced_rollout(truth.case)
    else:
        rollout = Rollout(backend, truth.case.program, trace.frames[0], rollout_options)
        forced = teacher_force(rollout, trace.frames, cancel=cancel)
    frames = scored_frames(rollout.frames, forced)
    comparison = score_forced(trace, rollout.frames, rollout.status, forced, rollout.partial)
    summary = condition_summary(trace, frames, rollout.status.value, rollout.text(), comparison)
    summary["forced_steps"] = sorted(i for i in forced if i > 0)
    summary["tokens"] = {"trace": rollout.tokens_used, "processed": rollout.tokens_processed}
    return summary


class RecordedGenerations:
    """``--replay FILE`` in a batch: each program's recorded generation stands in for the model.

    The file is a replay file (a results file of an earlier run, or a dump from a GPU cluster);
    programs are matched by id. With ``--teacher-force`` the records need the teacher-forced
    generation that a results file keeps.
    """

    can_generate = False

    def __init__(self, path: str, live=None) -> None:
        from ..model.replay import read_replay

        self.path = path
        self.live = live  # a live model for the interventions of --recovery (None: replay them too)
        self.records = {str(data.get("id", number)): data for number, data in read_replay(path)}
        self.name = f"replay {os.path.basename(path)}"

    def model_name(self, ident: str) -> str:
        return self.records.get(ident, {}).get("model") or self.name

    def has(self, ident: str, teacher_forced: bool = False, recovery: bool = False, samples: int = 1,
            beside: str | None = None) -> bool:
        data = self.records.get(ident)
        if data is None or not isinstance(data.get("generation"), str):
            return False
        if beside is not None and not (isinstance(data.get(beside), dict) and isinstance(data[beside].get("generation"), str)):
            return False
        recorded = data.get("samples")
        if samples > 1 and not (isinstance(recorded, list) and len(recorded) >= samples):
            return False
        if recovery and self.live is None and "recovery" not in data:
            return False
        if teacher_forced:
            forced = data.get("teacher_forced")
            return isinstance(forced, dict) and isinstance(forced.get("generation"), str)
        return True

    def rollout(self, case: Case):
        return self._replay(case, self.records[case.id])

    def teacher_forced_rollout(self, case: Case):
        forced = self.records[case.id]["teacher_forced"]
        return self._replay(case, forced), list(forced.get("forced_steps", []))

    def recorded(self, ident: str, key: str) -> dict | None:
        """The ``tokens`` or ``timings`` a results file recorded for the program (the model's
        cost when it ran), if any."""
        value = self.records.get(ident, {}).get(key)
        return dict(value) if isinstance(value, dict) else None

    @staticmethod
    def _replay(case: Case, data: dict):
        return replayed_rollout(case.program, data)

    def close(self) -> None:
        if self.live is not None:
            self.live.close()


#: a run stops when this many programs in a row could not be run (the server is gone)
MAX_FAILURES_IN_A_ROW = 5


class BatchRun:
    """Runs the model over a suite's truths on worker threads; results arrive through ``on_result``."""

    def __init__(
        self,
        suite: Suite,
        open_backend: Callable[[], object],
        options: BatchOptions,
        on_result: Callable[[dict], None] | None = None,
    ) -> None:
        self.suite = suite
        self.open_backend = open_backend
        self.options = options
        self.on_result = on_result
        self.cancel = threading.Event()
        self.errors: list[str] = []  # what stopped the run (none: it went through)
        self.failed: list[str] = []  # programs whose model calls failed, recorded as such
        self._failures_in_a_row = 0
        self._lock = threading.Lock()

    def run(self, truths: list[Truth]) -> list[dict]:
        work: queue.Queue = queue.Queue()
        for index, truth in enumerate(truths):
            work.put((index, truth))
        results: dict[int, dict] = {}
        workers = max(1, min(self.options.concurrency, len(truths)))
        backends = [self.open_backend() for _ in range(workers)]
        # each worker's own "finished" (Python 3.11's Thread.join returns at once once a join was
        # interrupted by Ctrl-C: the workers would still be writing while --out is closed)
        finished = [threading.Event() for _ in backends]
        threads = [
            threading.Thread(target=self._worker, args=(backend, work, results, done), daemon=True, name=f"eval-{i}")
            for i, (backend, done) in enumerate(zip(backends, finished))
        ]
        try:
            for thread in threads:
                thread.start()
            for done in finished:
                while not done.wait(0.2):
                    pass
        except KeyboardInterrupt:
            self.cancel.set()
            for thread, done in zip(threads, finished):
                if thread.ident is not None:
                    done.wait()
            raise
        finally:
            for backend in backends:
                close = getattr(backend, "close", None)
                if close is not None:
                    close()
        return [results[i] for i in sorted(results)]

    def _worker(self, backend, work: queue.Queue, results: dict, done: threading.Event) -> None:
        try:
            self._work(backend, work, results)
        finally:
            done.set()

    def _work(self, backend, work: queue.Queue, results: dict) -> None:
        while not self.cancel.is_set():
            try:
                index, truth = work.get_nowait()
            except queue.Empty:
                return
            began = time.perf_counter()
            record: dict | None
            try:
                record = evaluate_case(backend, self.suite.name, truth, self.options, self.cancel)
            except Exception as exc:  # noqa: BLE001 - a model error: recorded as this program's result
                if self.cancel.is_set():
                    return
                record = self._failed(backend, truth, exc, time.perf_counter() - began)
                if record is None:
                    return
            else:
                if self.cancel.is_set():  # a condition of it may have been cancelled: it runs again on resume
                    return
                with self._lock:
                    self._failures_in_a_row = 0
            with self._lock:
                results[index] = record
                if self.on_result is not None:
                    self.on_result(record)

    def _failed(self, backend, truth: Truth, exc: Exception, seconds: float) -> dict | None:
        """The record of a program whose model calls failed; the run goes on, unless every one
        of the last :data:`MAX_FAILURES_IN_A_ROW` programs failed (the server is down, not one
        program bad): then it stops, and None."""
        message = str(exc).strip() or type(exc).__name__
        with self._lock:
            self.failed.append(f"{truth.case.id}: {message}")
            self._failures_in_a_row += 1
            if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
                self.errors.append(f"{MAX_FAILURES_IN_A_ROW} programs in a row failed; stopped (last: {truth.case.id}: {message})")
                self.cancel.set()
                return None
        return error_record(
            truth.case, self.suite.name, truth.trace, message, model=getattr(backend, "name", ""),
            timings={"truth_s": round(truth.seconds, 4), "model_s": round(seconds, 4)},
        )
