"""Compare the interpreter's trace (the truth) with a model's rollout, step by step.

Step ``k`` pairs the truth's frame ``k`` with the model's frame ``k`` for as long as both follow
the same path (same event, same source line). The first step that differs is the *first
divergence*, classified in the failure regimes of "Debugging code world models" (arXiv
2602.07672): action hallucination (the model took another line), state error (right line,
wrong locals), string-valued state (the first wrong variable holds a string), token-budget
exhaustion, plus format errors, early ends and runaway generations. After the paths part, the
rest of the two timelines is aligned (longest common runs of (event, line) pairs) so both can be
shown side by side and steps where the model is back on the real path are compared again.
"""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from itertools import chain
from typing import Sequence

from ..trace import Event, Frame, RolloutStatus, Status, Trace
from ..trace.collector import collector_paused
from ..trace.stored import StoredFrames
from ..trace.tokens import strip_marker
from .values import exception_matches, literal_equal, shorten, type_name


class StepKind(str, enum.Enum):
    MATCH = "match"
    STATE = "state"  # same step, different locals
    ACTION = "action"  # a different source line (or a step only one path takes)
    EVENT = "event"  # a different event (line / call / return / exception)
    VALUE = "value"  # a different return or exception value
    FORMAT = "format"  # the model's frame does not follow the CWM format
    MISSING = "missing"  # the model's trace ended before the truth's (EOS or budget)
    EXTRA = "extra"  # the model's trace goes on after the truth ended
    PENDING = "pending"  # the rollout is still running (or was cancelled): not generated yet
    UNCHECKED = "unchecked"  # past the end of a partial truth (a limit stopped the interpreter)

    @property
    def is_divergence(self) -> bool:
        return self not in (StepKind.MATCH, StepKind.PENDING, StepKind.UNCHECKED)


@dataclass
class VariableDiff:
    name: str
    expected: str | None  # None: the model has a name the truth does not
    predicted: str | None  # None: the model left out a name the truth has
    type_name: str  # the type of the expected value (of the predicted one for extra names)
    literal_equal: bool  # same Python literal, different text (e.g. set order)

    @property
    def missing(self) -> bool:
        return self.predicted is None

    @property
    def extra(self) -> bool:
        return self.expected is None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "expected": self.expected,
            "predicted": self.predicted,
            "type": self.type_name,
            "literal_equal": self.literal_equal,
        }


@dataclass
class StepComparison:
    """One row of the side-by-side view: a truth frame, a model frame, or both."""

    step: int  # row number; equals both frame indexes up to the first divergence
    truth: Frame | None
    model: Frame | None
    kind: StepKind
    variables: list[VariableDiff] = field(default_factory=list)
    changed: set[str] = field(default_factory=set)  # names the truth changed at this step
    truth_index: int | None = None
    model_index: int | None = None
    model_changed: set[str] = field(default_factory=set)  # names the model changed
    order_differs: bool = False  # same locals, listed in another order (still a match)
    note: str = ""

    def to_json(self) -> dict:
        data = {
            "step": self.step,
            "truth_step": self.truth_index,
            "model_step": self.model_index,
            "kind": self.kind.value,
            "truth": _frame_json(self.truth),
            "model": _frame_json(self.model),
            "variables": [v.to_json() for v in self.variables],
            "changed": sorted(self.changed),
        }
        if self.order_differs:
            data["order_differs"] = True
        if self.note:
            data["note"] = self.note
        return data


def _frame_json(frame: Frame | None) -> dict | None:
    if frame is None:
        return None
    data = {
        "event": frame.event.value if frame.event else None,
        "action": frame.action,
        "lineno": frame.lineno,
    }
    if frame.locals is not None:
        data["locals"] = frame.locals
    if frame.arg is not None:
        data["arg"] = frame.arg
    if frame.error is not None:
        data["error"] = frame.error
        data["raw"] = frame.raw
    return data


REGIMES = {
    "action": "action hallucination",
    "event": "action hallucination",
    "state": "state error",
    "value": "state error",
    "string": "string-valued state",
    "budget": "token-budget exhaustion",
    "truncated": "early end of trace",
    "extra": "runaway generation",
    "format": "format error",
}


@dataclass
class Divergence:
    step: int
    kind: str  # format | event | action | state | value | budget | truncated | extra
    variables: list[str]
    string_valued: bool
    regime: str
    explanation: str
    truth_index: int | None = None
    model_index: int | None = None
    lineno: int | None = None

    def to_json(self) -> dict:
        return {
            "step": self.step,
            "kind": self.kind,
            "variables": self.variables,
            "string_valued": self.string_valued,
            "regime": self.regime,
            "line": self.lineno,
            "explanation": self.explanation,
        }

    @classmethod
    def from_json(cls, data: dict, truth_index: int | None = None, model_index: int | None = None) -> "Divergence":
        """A divergence from :meth:`to_json` (which leaves out the two frame indexes)."""
        divergence = cls(
            step=data["step"], kind=data["kind"], variables=list(data["variables"]),
            string_valued=data["string_valued"], regime=data["regime"], explanation=data["explanation"],
            truth_index=truth_index, model_index=model_index, lineno=data.get("line"),
        )
        fields = (divergence.step, divergence.kind, divergence.string_valued, divergence.regime, divergence.explanation)
        if [type(v) for v in fields] != [int, str, bool, str, str] or not all(isinstance(v, str) for v in divergence.variables) \
                or not (divergence.lineno is None or type(divergence.lineno) is int):
            raise TypeError("a divergence's fields have the wrong types")
        return divergence


@dataclass
class Comparison:
    steps: Sequence[StepComparison]  # a list, or SavedSteps for a comparison read back from a file
    first_divergence: Divergence | None
    alignment: list[tuple[int | None, int | None]]
    verdict: str  # "agree" | "diverge" | "pending" (a running or cancelled rollout, no divergence yet)
    status: RolloutStatus = RolloutStatus.ENDED  # why the model's trace stopped
    agreed_steps: int = 0  # steps that matched before the first divergence

    @property
    def agrees(self) -> bool:
        return self.verdict == "agree"

    def row_of_model(self, index: int) -> int | None:
        """The row that shows the model's frame ``index``."""
        for row in self.steps:
            if row.model_index == index:
                return row.step
        return None

    def divergence_at(self, row: int) -> "Divergence | None":
        """The divergence at ``row`` (any row, not only the first), classified and explained."""
        return divergence_at(self.steps, row, self.status)

    def divergent_rows(self) -> list[int]:
        """Every row where the two sides differ, in order."""
        if isinstance(self.steps, SavedSteps):
            return self.steps.divergent_rows()
        return [s.step for s in self.steps if s.kind.is_divergence]

    def rows_of_event(self, event: Event) -> list[int]:
        """Every row whose frame (the truth's, else the model's) has ``event``, in order."""
        if isinstance(self.steps, SavedSteps):
            return self.steps.rows_of_event(event)
        return [s.step for s in self.steps if (s.truth or s.model) is not None and (s.truth or s.model).event is event]

    def frames_at(self, row: int) -> tuple[Frame | None, Frame | None]:
        """The truth's and the model's frame at ``row`` (without building a saved row)."""
        if isinstance(self.steps, SavedSteps):
            return self.steps.frames_at(row)
        step = self.steps[row]
        return step.truth, step.model

    def to_saved(self) -> dict:
        """What :meth:`from_saved` needs to rebuild the comparison without comparing again.

        ``rows`` are runs ``[truth step, model step, count, kind]``: from row to row within a
        run both steps go up by one (or stay null) and the kind stays. ``truth_changed`` lists,
        frame by frame, the names whose value the frame changed; ``model_changed`` the same for
        the model's frames, by frame index (a string), only where they differ from the
        interpreter's frame on the same row.
        """
        if isinstance(self.steps, SavedSteps):
            rows, truth_changed, model_changed = self.steps.saved()
        else:
            rows, truth_changed, model_changed = _saved_rows(self.steps)
        first = self.first_divergence
        return {
            "verdict": self.verdict,
            "status": self.status.value,
            "agreed_steps": self.agreed_steps,
            "first_divergence": first.to_json() if first is not None else None,
            "rows": rows,
            "truth_changed": truth_changed,
            "model_changed": model_changed,
        }

    @classmethod
    def from_saved(cls, data: dict, truth: Sequence[Frame], frames: Sequence[Frame]) -> "Comparison":
        """The comparison :meth:`to_saved` wrote, of ``truth`` and the model's ``frames``; its
        rows are built when first asked for. Raises TypeError or ValueError where the data do
        not fit the frames (a damaged file)."""
        steps = SavedSteps(data["rows"], truth, frames, data["truth_changed"], data["model_changed"])
        # every model frame is on a row, but for a last frame the token budget cut off (compare()
        # leaves it out): a comparison saved while frames kept coming is stale
        status = RolloutStatus.read(data["status"])  # (ValueError: a damaged file)
        cut = status is RolloutStatus.BUDGET and frames and frames[-1].is_error
        if steps.model_frames != len(frames) and not (cut and steps.model_frames == len(frames) - 1):
            raise ValueError(f"the comparison covers {steps.model_frames} of the model's {len(frames)} frames")
        first = data.get("first_divergence")
        if first is not None:
            if not isinstance(first.get("step"), int) or not 0 <= first["step"] < len(steps):
                raise ValueError("the first divergence is not one of the rows")
            truth_index, model_index, _ = steps.locate(first["step"])
            first = Divergence.from_json(first, truth_index, model_index)
        verdict, agreed = data["verdict"], data["agreed_steps"]
        if verdict not in ("agree", "diverge", "pending") or type(agreed) is not int:
            raise ValueError("the comparison's verdict or agreed steps are not understood")
        return cls(steps, first, SavedAlignment(steps), verdict, status, agreed)

    def metrics(self) -> dict:
        """Table 9 style scores over the rows where both sides have a frame."""
        paired = [r for r in self.steps if r.truth is not None and r.model is not None]
        states = [r for r in paired if r.truth.event in (Event.CALL, Event.LINE) and r.kind in (StepKind.MATCH, StepKind.STATE)]
        truth_rows = [r for r in self.steps if r.truth is not None]
        actions = [r for r in paired if r.kind not in (StepKind.ACTION, StepKind.EVENT, StepKind.FORMAT)]
        return {
            "state_exact_match": _ratio(sum(r.kind is StepKind.MATCH for r in states), len(states)),
            "action_exact_match": _ratio(len(actions), len(truth_rows)),
            "valid_format": not any(r.kind is StepKind.FORMAT for r in self.steps),
        }

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "first_divergence": self.first_divergence.to_json() if self.first_divergence else None,
            "agreed_steps": self.agreed_steps,
            "status": self.status.value,
            "steps": [s.to_json() for s in self.steps],
        }


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _saved_rows(steps: Sequence[StepComparison]) -> tuple[list, list, dict]:
    """The runs and changed names of :meth:`Comparison.to_saved`."""
    runs: list[list] = []
    truth_changed: list[list[str]] = []
    model_changed: dict[str, list[str]] = {}
    for step in steps:
        ti, mi, kind = step.truth_index, step.model_index, step.kind.value
        if ti is not None:
            truth_changed.append(sorted(step.changed))
        if mi is not None and (ti is None or step.model_changed != step.changed):
            model_changed[str(mi)] = sorted(step.model_changed)
        if runs:
            t0, m0, count, last = runs[-1]
            if last == kind and (t0 is None) == (ti is None) and (m0 is None) == (mi is None) \
                    and (ti is None or ti == t0 + count) and (mi is None or mi == m0 + count):
                runs[-1][2] += 1
                continue
        runs.append([ti, mi, 1, kind])
    return runs, truth_changed, model_changed


def _check_names(lists, length: int) -> None:
    if not isinstance(lists, list) or len(lists) != length or set(map(type, lists)) - {list} \
            or set(map(type, chain.from_iterable(lists))) - {str}:
        raise TypeError(f"the names each interpreter frame changed do not fit its {length} frames")


class SavedSteps(Sequence[StepComparison]):
    """The rows of a comparison read back from a session file, each built when first asked for.

    The file has the rows as runs (see :meth:`Comparison.to_saved`): which frame of each side a
    row shows and the row's kind. The rest of a row (the variables that differ, a note) is
    worked out from its two frames when it is first shown, so reopening a 100,000-step
    session costs what the screen shows, not a comparison of every step.
    """

    def __init__(self, runs: list, truth: Sequence[Frame], frames: Sequence[Frame],
                 truth_changed: list, model_changed: list) -> None:
        if not isinstance(runs, list):
            raise TypeError("a comparison's rows must be a list")
        self._runs: list[tuple[int | None, int | None, int, StepKind]] = []
        self._starts: list[int] = []
        row = n_truth = n_model = 0
        for run in runs:
            if not isinstance(run, list) or len(run) != 4:
                raise TypeError("a run of rows is [truth step, model step, count, kind]")
            t0, m0, count, kind = run
            if type(count) is not int or count < 1 or (t0 is None and m0 is None) \
                    or (t0 is not None and (type(t0) is not int or t0 != n_truth)) \
                    or (m0 is not None and (type(m0) is not int or m0 != n_model)):
                raise ValueError("the comparison's rows skip or repeat a step")
            self._runs.append((t0, m0, count, StepKind(kind)))
            self._starts.append(row)
            row += count
            n_truth += count if t0 is not None else 0
            n_model += count if m0 is not None else 0
        if n_truth != len(truth) or n_model > len(frames):
            raise ValueError(f"the comparison's rows do not fit the frames ({n_truth} of {len(truth)}, {n_model} of {len(frames)})")
        self.model_frames = n_model  # the model's frames on rows
        _check_names(truth_changed, n_truth)
        if not isinstance(model_changed, dict):
            raise TypeError("the names the model's frames changed must be an object")
        model_changed = {int(index): names for index, names in model_changed.items()}
        _check_names(list(model_changed.values()), len(model_changed))
        if model_changed and not 0 <= min(model_changed) <= max(model_changed) < n_model:
            raise ValueError("the names the model's frames changed are for frames it does not have")
        self._length = row
        self._truth, self._frames = truth, frames
        self._truth_changed, self._model_changed = truth_changed, model_changed
        self._rows: dict[int, StepComparison] = {}

    def __len__(self) -> int:
        return self._length

    def locate(self, row: int) -> tuple[int | None, int | None, StepKind]:
        """The truth's frame, the model's frame and the kind of ``row`` (0 <= row < len)."""
        k = bisect.bisect_right(self._starts, row) - 1
        t0, m0, _, kind = self._runs[k]
        offset = row - self._starts[k]
        return (None if t0 is None else t0 + offset), (None if m0 is None else m0 + offset), kind

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[r] for r in range(*row.indices(self._length))]
        if row < 0:
            row += self._length
        if not 0 <= row < self._length:
            raise IndexError(row)
        step = self._rows.get(row)
        if step is None:
            ti, mi, kind = self.locate(row)
            truth = self._truth[ti] if ti is not None else None
            model = self._frames[mi] if mi is not None else None
            variables, order, note = _row_details(truth, model, kind)
            changed = set(self._truth_changed[ti]) if ti is not None else set()
            model_changed = set()
            if mi is not None:  # saved where it differs from the truth's frame on the row
                names = self._model_changed.get(mi)
                model_changed = set(names) if names is not None else set(changed)
            step = StepComparison(
                row, truth, model, kind, variables, changed=changed, truth_index=ti, model_index=mi,
                model_changed=model_changed, order_differs=order, note=note,
            )
            self._rows[row] = step
        return step

    def __iter__(self):
        for row in range(self._length):
            yield self[row]

    def frames_at(self, row: int) -> tuple[Frame | None, Frame | None]:
        ti, mi, _ = self.locate(row)
        return (self._truth[ti] if ti is not None else None), (self._frames[mi] if mi is not None else None)

    def rows_of_event(self, event: Event) -> list[int]:
        truth, model = _events_of(self._truth), _events_of(self._frames)
        rows: list[int] = []
        for start, (t0, m0, count, _) in zip(self._starts, self._runs):
            events, first = (truth, t0) if t0 is not None else (model, m0)
            rows.extend(start + k for k in range(count) if events[first + k] is event)
        return rows

    def divergent_rows(self) -> list[int]:
        rows: list[int] = []
        for start, (_, _, count, kind) in zip(self._starts, self._runs):
            if kind.is_divergence:
                rows.extend(range(start, start + count))
        return rows

    def saved(self) -> tuple[list, list, dict]:
        runs = [[t0, m0, count, kind.value] for t0, m0, count, kind in self._runs]
        return runs, self._truth_changed, {str(index): names for index, names in self._model_changed.items()}


def _events_of(frames: Sequence[Frame]) -> list:
    return frames.events() if isinstance(frames, StoredFrames) else [f.event for f in frames]


class SavedAlignment(Sequence[tuple]):
    """The alignment of a saved comparison: (truth step, model step) row by row."""

    def __init__(self, steps: SavedSteps) -> None:
        self._steps = steps

    def __len__(self) -> int:
        return len(self._steps)

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[r] for r in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        return self._steps.locate(row)[:2]


# -- the comparison ---------------------------------------------------------------------------


def action_key(frame: Frame | None):
    """What must agree for two frames to be the same step: the event and the source line."""
    if frame is None or frame.event is None or frame.error is not None:
        return object()  # never equal to anything
    action = frame.action
    return (frame.event, strip_marker(action) if "START_OF_TRACE" in action else action)


def changed_names(frames: Sequence[Frame]) -> list[set[str]]:
    """For each frame, the names whose value differs from the scope's previous frame."""
    stack: list[dict[str, str]] = []
    result: list[set[str]] = []
    for frame in frames:
        changed: set[str] = set()
        # frames are not changed once made: the stack holds their locals, not copies
        if frame.event is Event.CALL:
            stack.append(frame.locals or {})
        elif frame.event is Event.LINE and frame.locals is not None:
            previous = stack[-1] if stack else {}
            changed = {k for k, v in frame.locals.items() if previous.get(k) != v}
            if stack:
                stack[-1] = frame.locals
            else:
                stack.append(frame.locals)
        elif frame.event is Event.RETURN and stack:
            stack.pop()
        result.append(changed)
    return result


def _compare_pair(truth: Frame, model: Frame) -> tuple[StepKind, list[VariableDiff], bool, str]:
    """Two frames on the same step (same event and line): their state or value."""
    if truth.event in (Event.CALL, Event.LINE):
        expected = truth.locals or {}
        predicted = model.locals or {}
        if expected == predicted:  # the usual case, settled at C speed
            order = expected is not predicted and list(expected) != list(predicted)
            return StepKind.MATCH, [], order, "same locals in another order" if order else ""
        diffs: list[VariableDiff] = []
        for name, value in expected.items():
            other = predicted.get(name)
            if other != value:
                diffs.append(VariableDiff(name, value, other, type_name(value), literal_equal(value, other)))
        for name, value in predicted.items():
            if name not in expected:
                diffs.append(VariableDiff(name, None, value, type_name(value), False))
        if diffs:
            return StepKind.STATE, diffs, False, ""
        order = list(expected) != list(predicted)
        return StepKind.MATCH, [], order, "same locals in another order" if order else ""
    expected_arg, predicted_arg = truth.arg, model.arg
    if expected_arg == predicted_arg:
        return StepKind.MATCH, [], False, ""
    if truth.event is Event.EXCEPTION:
        if exception_matches(expected_arg, predicted_arg):
            return StepKind.MATCH, [], False, "exception accepted: the type names agree (spec §4.6)"
        return StepKind.VALUE, [VariableDiff("raise", expected_arg, predicted_arg, "exception", False)], False, ""
    diff = VariableDiff("return", expected_arg, predicted_arg, type_name(expected_arg), literal_equal(expected_arg, predicted_arg))
    return StepKind.VALUE, [diff], False, ""


SKIPPED_STEP = "the model's path skips this step"
MODEL_ONLY_STEP = "a step only the model's path takes"


def _row_details(truth: Frame | None, model: Frame | None, kind: StepKind) -> tuple[list[VariableDiff], bool, str]:
    """(variables that differ, locals in another order, note) of a row of a known kind."""
    if truth is not None and model is not None:
        if kind in (StepKind.MATCH, StepKind.STATE, StepKind.VALUE):  # the two are on the same step
            _, variables, order, note = _compare_pair(truth, model)
            return variables, order, note
        return [], False, ""
    if kind is StepKind.ACTION:
        return [], False, SKIPPED_STEP if model is None else MODEL_ONLY_STEP
    return [], False, ""


def _path_kind(truth: Frame, model: Frame) -> StepKind:
    if model.event is None or model.error is not None:
        return StepKind.FORMAT
    if truth.event is not model.event:
        return StepKind.EVENT
    return StepKind.ACTION


RESYNC_WINDOW = 48  # steps the two paths may drift apart and still be re-synchronised
RESYNC_CONFIRM = 3  # matching steps in a row that count as being back on the same path


def _resync(a: list, b: list, i: int, j: int, same) -> tuple[int, int] | None:
    """The nearest (skip in a, skip in b) after which the paths run together again.

    Among the nearest candidates, the one whose steps also agree in state wins: in a loop the
    same lines come round again and again, and the values say which iteration is which.
    """
    n, m = len(a), len(b)
    for total in range(1, RESYNC_WINDOW + 1):
        best = None
        best_score = -1
        for skip_a in range(total + 1):
            ii, jj = i + skip_a, j + total - skip_a
            if ii >= n or jj >= m or a[ii] != b[jj]:
                continue
            run = 1
            while run < RESYNC_CONFIRM and ii + run < n and jj + run < m and a[ii + run] == b[jj + run]:
                run += 1
            if run == RESYNC_CONFIRM or ii + run == n or jj + run == m:
                score = sum(1 for k in range(run) if same(ii + k, jj + k))
                if score > best_score:
                    best, best_score = (skip_a, total - skip_a), score
        if best is not None:
            return best
    return None


def _rest_alignment(truth_keys: list, model_keys: list, start: int, same=lambda i, j: False) -> list[tuple[int | None, int | None]]:
    """Rows for the two paths from ``start`` on, re-synchronised where (event, line) runs match.

    Greedy: where the paths differ, find the nearest pair of steps from which they run
    together again (within a window) and show the steps in between on their own side; when
    there is none, pair steps one to one. Linear in the trace length for a fixed window.
    """
    a, b = truth_keys, model_keys
    n, m = len(a), len(b)
    rows: list[tuple[int | None, int | None]] = []
    i = j = start
    while i < n and j < m:
        if a[i] == b[j]:
            rows.append((i, j))
            i += 1
            j += 1
            continue
        found = _resync(a, b, i, j, same)
        if found is None:
            # no common path in sight: pair steps one to one for half a window, then look again
            for _ in range(min(RESYNC_WINDOW // 2, n - i, m - j)):
                rows.append((i, j))
                i += 1
                j += 1
            continue
        skip_a, skip_b = found
        paired = min(skip_a, skip_b)
        rows += [(i + k, j + k) for k in range(paired)]
        rows += [(i + k, None) for k in range(paired, skip_a)]
        rows += [(None, j + k) for k in range(paired, skip_b)]
        i += skip_a
        j += skip_b
    rows += [(k, None) for k in range(i, n)]
    rows += [(None, k) for k in range(j, m)]
    return rows


_TRUTH_CACHE: list = [None]  # (frames list, its length, keys, changed names) of the last truth


def _truth_facts(frames: list[Frame]) -> tuple[list, list[set[str]]]:
    """Keys and changed names of the truth's frames; a truth compared again (a UI re-comparing
    a streaming rollout) reuses them."""
    cached = _TRUTH_CACHE[0]
    if cached is not None and cached[0] is frames and cached[1] == len(frames):
        return cached[2], cached[3]
    keys = [action_key(f) for f in frames]
    changed = changed_names(frames)
    _TRUTH_CACHE[0] = (frames, len(frames), keys, changed)
    return keys, changed


def compare(truth: Trace, frames: Sequence[Frame], status: RolloutStatus = RolloutStatus.ENDED) -> Comparison:
    """Compare the truth with a model's frames; ``status``: why the model's trace stopped."""
    if not isinstance(status, RolloutStatus):
        raise TypeError(f"compare() takes a RolloutStatus, not {status!r} (RolloutStatus.read() reads a saved one)")
    with collector_paused():  # a row, two sets and a list a step: the collector would rescan them
        return _compare(truth, frames, status)


def _compare(truth: Trace, frames: Sequence[Frame], status: RolloutStatus) -> Comparison:
    if status is RolloutStatus.BUDGET and frames and frames[-1].is_error:
        frames = frames[:-1]  # the frame the budget cut off in the middle: not a format error
    truth_frames = truth.frames
    truth_partial = truth.status.kind in (Status.LIMIT, Status.DIED)
    truth_keys, truth_changed = _truth_facts(truth_frames)
    model_keys = [action_key(f) for f in frames]
    n_truth, n_model = len(truth_frames), len(frames)
    common = 0
    limit = min(n_truth, n_model)
    while common < limit and truth_keys[common] == model_keys[common]:
        common += 1
    alignment: list[tuple[int | None, int | None]] = [(i, i) for i in range(common)]
    if common < max(n_truth, n_model):

        def same(ti: int, mi: int) -> bool:
            t, m = truth_frames[ti], frames[mi]
            return t.locals == m.locals and t.arg == m.arg

        alignment += _rest_alignment(truth_keys, model_keys, common, same)

    model_changed = changed_names(frames)
    last_model_row = max((r for r, (_, m) in enumerate(alignment) if m is not None), default=-1)
    last_truth_row = max((r for r, (t, _) in enumerate(alignment) if t is not None), default=-1)

    steps: list[StepComparison] = []
    for row, (ti, mi) in enumerate(alignment):
        t = truth_frames[ti] if ti is not None else None
        m = frames[mi] if mi is not None else None
        variables: list[VariableDiff] = []
        order = False
        note = ""
        if t is not None and m is not None:
            if truth_keys[ti] == model_keys[mi]:
                kind, variables, order, note = _compare_pair(t, m)
            else:
                kind = _path_kind(t, m)
        elif t is not None:
            if row > last_model_row:
                kind = StepKind.PENDING if status.stopped_early else StepKind.MISSING
            else:
                kind, note = StepKind.ACTION, SKIPPED_STEP
        else:
            if row > last_truth_row:
                kind = StepKind.UNCHECKED if truth_partial else StepKind.EXTRA
            elif m.event is None or m.error is not None:
                kind = StepKind.FORMAT
            else:
                kind, note = StepKind.ACTION, MODEL_ONLY_STEP
        steps.append(
            StepComparison(
                step=row,
                truth=t,
                model=m,
                kind=kind,
                variables=variables,
                changed=truth_changed[ti] if ti is not None else set(),
                truth_index=ti,
                model_index=mi,
                model_changed=model_changed[mi] if mi is not None else set(),
                order_differs=order,
                note=note,
            )
        )

    result = Comparison(steps, None, alignment, "agree", status, 0)
    first = next((row for row in steps if row.kind.is_divergence), None)
    if first is not None:
        result.first_divergence = divergence_at(steps, first.step, status)
        result.verdict = "diverge"
        result.agreed_steps = first.step
    else:
        if status.stopped_early and n_model < n_truth:
            result.verdict = "pending"
        result.agreed_steps = sum(1 for s in steps if s.kind is StepKind.MATCH)
    return result


def divergence_at(steps: list[StepComparison], row: int, status: RolloutStatus) -> Divergence | None:
    """The divergence shown at ``row``, classified and explained (None for a matching row)."""
    here = steps[row]
    kind = here.kind
    if not kind.is_divergence:
        return None
    if kind in (StepKind.STATE, StepKind.VALUE):
        return _state_divergence(here, steps)
    n_truth = sum(1 for s in steps if s.truth is not None)
    n_model = sum(1 for s in steps if s.model is not None)
    agreed = sum(1 for s in steps[:row] if s.kind is StepKind.MATCH)
    if kind is StepKind.MISSING:
        name = {RolloutStatus.BUDGET: "budget", RolloutStatus.FRAME_LIMIT: "format"}.get(status, "truncated")
        done = sum(1 for s in steps[:row] if s.model is not None)
        story = _end_story(name, status, here.truth, done, n_truth)
        return _make(here, name, [], False, story, here.truth, None)
    if kind is StepKind.EXTRA:
        done = sum(1 for s in steps[:row] if s.truth is not None)
        return _make(here, "extra", [], False, _extra_story(here.model, done, n_model), None, here.model)
    # the paths part: compare the interpreter's next step with the model's next step
    truth = here.truth or next((s.truth for s in steps[row:] if s.truth is not None), None)
    model = here.model or next((s.model for s in steps[row:] if s.model is not None), None)
    if truth is None or model is None:  # one path has nothing left: describe it as an end
        if model is None:
            return _make(here, "truncated", [], False, _end_story("truncated", status, truth, row, n_truth), truth, None)
        return _make(here, "extra", [], False, _extra_story(model, row, n_model), None, model)
    name = _path_kind(truth, model).value
    return _make(here, name, [], False, _path_story(name, truth, model, steps, row, agreed), truth, model)


def _make(row: StepComparison, kind, variables, string_valued, explanation, truth, model) -> Divergence:
    regime = REGIMES["string"] if string_valued else REGIMES[kind]
    lineno = (truth.lineno if truth is not None else None) or (model.lineno if model is not None else None)
    return Divergence(
        step=row.step,
        kind=kind,
        variables=variables,
        string_valued=string_valued,
        regime=regime,
        explanation=explanation,
        truth_index=row.truth_index,
        model_index=row.model_index,
        lineno=lineno,
    )


# -- explanations -----------------------------------------------------------------------------


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _where(frame: Frame | None) -> str:
    if frame is None:
        return ""
    line = f"line {frame.lineno}" if frame.lineno else "a line"
    return f"{line} (`{frame.action.strip()}`)"


def _agreed(step: int, matched: int | None = None) -> str:
    if step == 0:
        return "The very first step already differs."
    if matched is not None and matched != step:
        return f"{matched} of the {step} steps before it matched the interpreter."
    return f"The model agreed with the interpreter for {step} step{'s' if step != 1 else ''} before that."


def _state_divergence(row: StepComparison, steps: list[StepComparison]) -> Divergence:
    first = row.variables[0]
    string_valued = first.type_name == "str"
    names = [v.name for v in row.variables]
    kind = "value" if row.kind is StepKind.VALUE else "state"
    truth = row.truth
    if kind == "value":
        what = "exception" if truth.event is Event.EXCEPTION else "return value"
        story = (
            f"At step {row.step} the model followed the right path to {_where(truth)} but predicted the "
            f"wrong {what}: {shorten(first.predicted)} instead of {shorten(first.expected)}"
            f" ({_a(first.type_name)})."
        )
    elif first.missing:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model's locals lack `{first.name}`, "
            f"which holds {shorten(first.expected)} ({_a(first.type_name)})."
        )
    elif first.extra:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model's locals have a `{first.name}` "
            f"({shorten(first.predicted)}) that the real program does not have yet."
        )
    else:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model thinks `{first.name}` is "
            f"{shorten(first.predicted)} but it is {shorten(first.expected)} ({_a(first.type_name)})."
        )
    if len(names) > 1:
        story += f" {len(names) - 1} more variable{'s' if len(names) > 2 else ''} differ ({', '.join(names[1:4])}{', …' if len(names) > 4 else ''})."
    if first.literal_equal:
        story += " The two spell the same Python value in different text (ordering or quoting), so the value is right but the text is not."
    story += " " + _agreed(row.step, sum(1 for s in steps[: row.step] if s.kind is StepKind.MATCH))
    story += " The model stayed on the right path, so this is a state error, not an action hallucination."
    if string_valued:
        story += (
            " The wrong value is a string: string-valued state is where CWM fails most, because the tokenizer splits"
            " strings into subword pieces and the model must rebuild them piece by piece (the token lens shows the pieces)."
        )
    later = [s for s in steps[row.step + 1 :] if s.kind in (StepKind.ACTION, StepKind.EVENT)]
    if later:
        story += f" The wrong state later sends the model down another path (step {later[0].step})."
    return _make(row, kind, names, string_valued, story, row.truth, row.model)


def _path_story(kind: str, truth: Frame, model: Frame, steps: list[StepComparison], common: int, matched: int) -> str:
    if kind == "format":
        return (
            f"At step {common} the model wrote a frame that does not follow the CWM trace format "
            f"({model.error}); the interpreter's step was {_a(truth.event.value)} event at {_where(truth)}. "
            + _agreed(common, matched)
            + " A format error ends what can be compared: the model's text no longer says which line runs next or what the locals are."
        )
    if kind == "event":
        what = f"{_a(model.event.value)} event at {_where(model)}"
        story = (
            f"At step {common} the interpreter has {_a(truth.event.value)} event at {_where(truth)}, "
            f"but the model predicted {what}. "
        )
    else:
        story = (
            f"At step {common} the interpreter runs {_where(truth)} next, but the model predicted "
            f"{_where(model)}. "
        )
    story += _agreed(common, matched)
    story += " This is an action hallucination: the model lost track of the control flow"
    story += ", although the state it carried up to here was right." if matched == common else "."
    resync = next((s for s in steps[common + 1 :] if s.truth is not None and s.model is not None and s.kind in (StepKind.MATCH, StepKind.STATE)), None)
    if resync is not None:
        story += (
            f" The two paths meet again at row {resync.step} (interpreter step {resync.truth_index}, "
            f"model step {resync.model_index})."
        )
    else:
        story += " The two paths do not meet again."
    return story


def _end_story(kind: str, status: RolloutStatus, truth: Frame, step: int, n_truth: int) -> str:
    remaining = n_truth - step
    if kind == "budget":
        return (
            f"The model used up its token budget after {step} steps, with {remaining} of the interpreter's "
            f"{n_truth} steps still to go (the next would be {_where(truth)}). Every step it did write agreed with "
            "the interpreter. This is token-budget exhaustion: a long trace (many loop iterations, long values) "
            "runs out of tokens before it runs out of steps; a larger --token-budget lets it go on."
        )
    if kind == "format":
        return (
            f"After {step} agreeing steps the model's next frame ran past the per-frame token limit without "
            f"closing, a format error; the interpreter's next step is {_where(truth)}."
        )
    if status is RolloutStatus.CANCELLED:
        return f"The rollout was cancelled after {step} steps; every step it wrote agreed with the interpreter."
    if status is RolloutStatus.MAX_FRAMES:
        return (
            f"The rollout stopped at its frame cap after {step} steps; the interpreter's trace has {n_truth}. "
            "Every step it wrote agreed."
        )
    return (
        f"The model ended the trace (end of text) after {step} steps, but the interpreter goes on for "
        f"{remaining} more, starting with {_where(truth)}. Every step the model wrote agreed: it stopped too early."
    )


def _extra_story(model: Frame, step: int, n_model: int) -> str:
    return (
        f"The interpreter's trace ends after {step} steps (the entry function returned), but the model did not "
        f"write end of text: it went on with {n_model - step} more frame{'s' if n_model - step != 1 else ''}, "
        f"starting with {_a(model.event.value) + ' event' if model.event else 'a malformed frame'} at {_where(model)}. "
        "Everything up to the end agreed; this is a runaway generation (the model's trace is too long)."
    )
