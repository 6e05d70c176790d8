"""A batch run: ground truth for a whole suite through one interpreter, then one rollout per program.

The truth is traced first, program after program, by ONE fork-server :class:`Interpreter` (no
interpreter start-up per program). Rollouts then run on ``concurrency`` worker threads, each with
its own backend (a server backend serves several requests at once; a local model runs one
program at a time). Every finished program becomes a results record (:mod:`.record`), handed to
``on_result`` as soon as it is ready so a long run can be written out as it goes.
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
from .record import condition_summary, error_record, result_record
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
    concurrency: int = 1
    limits: Limits = field(default_factory=Limits)


def trace_suite(
    cases: list[Case],
    limits: Limits | None = None,
    on_truth: Callable[[Truth], None] | None = None,
    interpreter: Interpreter | None = None,
    cancel: threading.Event | None = None,
) -> list[Truth]:
    """The ground truth of every program, through one interpreter (one fork server)."""
    own = interpreter is None
    interpreter = interpreter or Interpreter()
    limits = limits or Limits()
    truths = []
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
    from ..analysis.compare import compare
    from ..model.rollout import RolloutOptions

    rollout_options = options.rollout or RolloutOptions()
    trace = truth.trace
    began = time.perf_counter()
    rollout = free_rollout(backend, truth, rollout_options, cancel)
    model_seconds = time.perf_counter() - began
    comparison = compare(trace, rollout.frames, rollout.status, rollout.partial)
    free = condition_summary(trace, rollout.frames, rollout.status.value, rollout.text(), comparison)
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
    return result_record(
        truth.case, suite, trace, free, model=model, timings=timings, tokens=tokens, teacher_forced=teacher
    )


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

    def __init__(self, path: str) -> None:
        from ..model.replay import read_replay

        self.path = path
        self.records = {str(data.get("id", number)): data for number, data in read_replay(path)}
        self.name = f"replay {os.path.basename(path)}"

    def model_name(self, ident: str) -> str:
        return self.records.get(ident, {}).get("model") or self.name

    def has(self, ident: str, teacher_forced: bool = False) -> bool:
        data = self.records.get(ident)
        if data is None or not isinstance(data.get("generation"), str):
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
        from ..model.replay import replay_rollout
        from ..trace import RolloutStatus

        rollout = replay_rollout(case.program, data["generation"])
        recorded = data.get("status")
        if rollout.status.out_of_tokens and isinstance(recorded, str):
            # the recording just stops; a results file says why (a frame limit, the frame cap)
            try:
                rollout.status = RolloutStatus.read(recorded)
            except ValueError:  # a status this version does not know: the recording just stops
                pass
        return rollout

    def close(self) -> None:
        pass


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
        threads = [
            threading.Thread(target=self._work, args=(backend, work, results), daemon=True, name=f"eval-{i}")
            for i, backend in enumerate(backends)
        ]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            self.cancel.set()
            for thread in threads:
                thread.join()
            raise
        finally:
            for backend in backends:
                close = getattr(backend, "close", None)
                if close is not None:
                    close()
        return [results[i] for i in sorted(results)]

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
                if self.cancel.is_set() and record.get("status") == "cancelled":
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
