"""A comparison of two traces, as data: its rows (``StepComparison``), what differs on a row
(``VariableDiff``), the first divergence (``Divergence``, classified in the failure regimes), the
whole (``Comparison``), and the compact saved form a session file keeps (``SavedSteps``,
``SavedAlignment``). Making one is :func:`cwmtui.analysis.compare.compare`."""

from __future__ import annotations

import bisect
import enum
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Sequence

from ..trace import Event, Frame, RolloutStatus
from ..trace.stored import StoredFrames
from .values import exception_matches, literal_equal, type_name


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

    @property
    def cut(self) -> bool:
        """The model's frame here is the text of a frame the budget cut off (not one of its
        frames: ``model_index`` is None); it counts as no frame in the scores."""
        return self.model is not None and self.model.error == CUT_FRAME

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
    data: dict[str, Any] = {
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
    "override": "the user's override",  # the paths part at a line the user gave the model
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
    alignment: Sequence[tuple[int | None, int | None]]
    verdict: str  # "agree" | "diverge" | "pending" (a running or cancelled rollout, no divergence yet)
    status: RolloutStatus = RolloutStatus.ENDED  # why the model's trace stopped
    agreed_steps: int = 0  # steps that matched before the first divergence
    truth_ending: str = "the entry function returned"  # how the program's run ended (TraceStatus.ending)

    @property
    def agrees(self) -> bool:
        return self.verdict == "agree"

    def row_of_model(self, index: int) -> int | None:
        """The row that shows the model's frame ``index``."""
        for row in self.steps:
            if row.model_index == index:
                return row.step
        return None

    def divergent_rows(self) -> list[int]:
        """Every row where the two sides differ, in order."""
        if isinstance(self.steps, SavedSteps):
            return self.steps.divergent_rows()
        return [s.step for s in self.steps if s.kind.is_divergence]

    def rows_of_event(self, event: Event) -> list[int]:
        """Every row whose frame (the truth's, else the model's) has ``event``, in order."""
        if isinstance(self.steps, SavedSteps):
            return self.steps.rows_of_event(event)
        return [s.step for s in self.steps if (frame := s.truth or s.model) is not None and frame.event is event]

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
        cut = status.out_of_tokens and frames and frames[-1].is_error
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
        paired = [r for r in self.steps if r.truth is not None and r.model is not None and not r.cut]
        states = [r for r in paired if r.truth is not None and r.truth.event in (Event.CALL, Event.LINE)
                  and r.kind in (StepKind.MATCH, StepKind.STATE)]
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
        self._length: int = row
        self._truth: Sequence[Frame] = truth
        self._frames: Sequence[Frame] = frames
        self._truth_changed: list = truth_changed
        self._model_changed: dict[int, list] = model_changed
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
            events, first = (truth, t0) if t0 is not None else (model, m0 or 0)
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


# -- one row: what differs, and the notes of a row only one side has -------------------------


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

#: the error of a model frame the token budget (or the model's context) cut off in the middle:
#: on its row when what it had written already differs from the interpreter's frame
CUT_FRAME = "frame cut off: the model ran out of tokens"
CUT_NOTE = "the model ran out of tokens in the middle of this frame"

#: a step whose whole frame had to be forced from the truth (the model could not write its state)
#: is scored as this format error, in the debugger, ``diff`` and ``eval`` alike
FORCED_WHOLE = "the model could not write this frame; the truth's was forced"


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
