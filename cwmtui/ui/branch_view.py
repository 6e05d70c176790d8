"""What the debugger shows, step by step: the view of a session the widgets read from.

A :class:`SessionView` holds the program, the interpreter's trace (the truth) and one
:class:`BranchView` per model rollout (the main one, then one per intervention). A branch view
wraps the comparison of its frames with the truth (rows = the comparison's alignment, each with
its status) and answers the questions navigation asks (next divergence, next call, search).
Rows are drawn on demand, so a 100,000-step session stays instant.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Sequence

from ..analysis.compare import Comparison, Divergence, StepComparison, StepKind, compare
from ..interpreter import Program
from ..trace import Event, Frame, OutputChunk, RolloutStatus, Status, Trace, TraceStatus
from ..analysis.lens import Lens
from ..session import Branch, BranchState, DebugSession
from ..session.branch import RAN_ON
from ..trace.stored import StoredFrames

#: a model frame the user or the interpreter gave: forced (teacher forcing), edited, overridden
ORIGIN_MARKS = {"forced": "F", "edited": "E", "overridden": "O"}

#: After one of these at a row, the model is on another path through the program.
PATH_KINDS = frozenset({StepKind.ACTION, StepKind.EVENT, StepKind.FORMAT})

KIND_NAMES = {
    StepKind.MATCH: "match",
    StepKind.STATE: "state differs",
    StepKind.ACTION: "action differs",
    StepKind.EVENT: "event differs",
    StepKind.VALUE: "value differs",
    StepKind.FORMAT: "format error",
    StepKind.MISSING: "model ended",
    StepKind.EXTRA: "extra step",
    StepKind.PENDING: "not written yet",
    StepKind.UNCHECKED: "past the truth",
}


def decoding_text(options) -> str:
    """How a rollout decodes, from its options (RolloutOptions, or the dict a session saves)."""
    if options is None:
        return "greedy"

    def get(name, default):
        return options.get(name, default) if isinstance(options, dict) else getattr(options, name, default)

    temperature = get("temperature", 0.0) or 0.0
    if temperature == 0:
        text = "greedy"
    else:
        text = f"T={temperature:g} top-p={get('top_p', 1.0):g} seed={get('seed', 0)}"
    budget = get("token_budget", None)
    if budget:
        text += f" · budget {budget:,}"
    return text


def constrained_by(options, backend) -> bool:
    """Whether a session's new branches decode under the frame grammar: its options say so, or
    leave it to the model (the bundled one is constrained); a replay never is."""
    if backend is None or not getattr(backend, "can_generate", False):
        return False
    chosen = getattr(options, "constrain", None)
    return bool(getattr(backend, "constrained_by_default", False) if chosen is None else chosen)


def describe_divergence(divergence: Divergence | None) -> str:
    if divergence is None:
        return "none"
    text = f"step {divergence.step} · {divergence.regime or divergence.kind}"
    if divergence.variables:
        names = divergence.variables
        text += ": " + ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    return text


_EXCEPTION = re.compile(r"^\(<class '[\w.]+'>, (?P<error>.*), <traceback object>\)$", re.DOTALL)


_CONTEXT_FULL = re.compile(r"context of (\d+) tokens is full")


def readable_exception(value: str) -> str:
    """An exception frame's value as people read it: ``ValueError("invalid literal…")`` for the
    trace's ``(<class 'ValueError'>, ValueError("invalid literal…"), <traceback object>)``; any
    other text as it is."""
    match = _EXCEPTION.match(value)
    return match.group("error") if match else value


def truth_ending(status: TraceStatus) -> str:
    """How the interpreter's run ended, in a few words for a timeline row and the status bar."""
    kind = status.kind
    if kind is Status.COMPLETE:
        return "the program returned"
    if kind is Status.RAISED:
        return "an exception left the program"
    if kind is Status.DIED and status.exit_code is not None:
        return f"the program ended itself: os._exit({status.exit_code})"
    if kind is Status.LIMIT:
        return f"stopped by the {status.limit} limit" if status.limit else "stopped by a limit"
    if kind is Status.DIED:
        return "the program died" + (f": {status.message}" if status.message else "")
    return status.describe()


@dataclass
class VariableRow:
    """One line of the state panel: a name (or the return value) on both sides."""

    name: str
    expected: str | None
    predicted: str | None
    changed: bool = False  # the value changed at this step in the truth
    type_name: str = ""
    literal_equal: bool = False
    in_locals: bool = True  # a local (False: a return or exception value)
    pending: bool = False  # the model has not written this step yet
    absent: bool = False  # one side has no frame at this row (the paths differ here)

    @property
    def differs(self) -> bool:
        return not self.pending and self.expected != self.predicted

    @property
    def status(self) -> str:
        if self.pending:
            return "…"
        if self.absent:
            return ""
        if self.expected == self.predicted:
            return "="
        if self.predicted is None:
            return "miss"
        if self.expected is None:
            return "extra"
        if self.literal_equal:
            return "≈txt"
        return "≠"

    @property
    def string_valued(self) -> bool:
        value = self.expected
        return (self.type_name == "str" or (bool(value) and value[:1] in "'\"")) and self.predicted is not None


class BranchView:
    """One rollout of the model as the screen shows it: a read-only :class:`BranchState` the
    engine made (frames, comparison, status, tokens), and what navigation asks of its rows (next
    divergence, next call, search). A running branch gets a new state from the worker that grows
    it (:meth:`update`); nothing here compares, or reads the engine's branch while it grows."""

    def __init__(self, truth: Trace, state: BranchState, *, running: bool = False) -> None:
        self.truth = truth
        self.running = running
        self.waiting = ""  # what the model side says on rows not written yet (no model, loading)
        self.placeholder = False  # stands in for the main rollout until it starts
        self.version = 0  # bumped whenever rows change: widgets drop cached lines
        self._calls: list[int] | None = None
        self._tokens_version: tuple = ()
        self._token_totals = (0, 0)
        self.state = state
        self._adopt(state)

    @classmethod
    def waiting_for(cls, truth: Trace, waiting: str) -> "BranchView":
        """The placeholder shown before the main rollout starts (no model, or one loading)."""
        branch = Branch("main")
        state = BranchState(branch, [], compare(truth, [], RolloutStatus.RUNNING), RolloutStatus.RUNNING)
        view = cls(truth, state, running=True)
        view.waiting = waiting
        view.placeholder = True
        return view

    # -- what the engine said --------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.state.name

    @property
    def parent(self) -> str | None:
        return self.state.parent

    @property
    def at_step(self) -> int | None:
        return self.state.at_step

    @property
    def status(self) -> RolloutStatus:
        return self.state.status

    @property
    def frames(self) -> Sequence[Frame]:
        return self.state.frames

    @property
    def comparison(self) -> Comparison:
        return self.state.comparison

    @property
    def tokens_used(self) -> int:
        return self.state.tokens_used

    @property
    def tokens_processed(self) -> int:
        return self.state.tokens_processed

    @property
    def source(self) -> Branch | None:
        """The engine's branch, to grow new branches from (None for the placeholder)."""
        return None if self.placeholder else self.state.branch

    @property
    def intervention(self) -> str:
        """What the user did to start this branch, for people ("" for the main rollout)."""
        intervention = self.state.intervention
        return intervention.describe() if intervention is not None else ""

    @property
    def settings(self) -> dict | None:
        """The rollout options this branch ran with (None: unknown, the session's apply)."""
        return self.state.settings

    @property
    def token_limit(self) -> int | None:
        """The tokens the rollout may write (its budget, or what the model's context leaves)."""
        return self.state.token_limit

    def ending(self, short: bool = False) -> str:
        """Why the model's trace stopped ("" while it runs): the rollout's own words, or
        (``short``) its status in a few words."""
        if self.running:
            return ""
        status = self.status
        if status is RolloutStatus.CANCELLED:
            written = len(self.frames)
            return f"cancelled after {written} step{'s' if written != 1 else ''}"
        if status is RolloutStatus.ENDED:
            if self.state.message == RAN_ON:
                return "ran on past the end" if short else RAN_ON
            return "wrote end of text" if short else "the model wrote end of text"
        message = self.state.message
        context = _CONTEXT_FULL.search(message) if status is RolloutStatus.CONTEXT else None
        if context:  # the model's context, not the budget: said first, so a narrow row keeps it
            return f"context full ({int(context.group(1)):,} tokens)"
        return message if message and not short else status.label

    def truth_ending(self) -> str:
        return truth_ending(self.truth.status)

    def step_numbers(self, row: int) -> tuple[int | None, int | None]:
        """(the interpreter's step, the model's step) at a row: the frames' own numbers, which
        part from the row number once the paths do."""
        if not 0 <= row < len(self.steps):
            return None, None
        step = self.steps[row]
        return step.truth_index, step.model_index

    # -- new states --------------------------------------------------------------------------
    def _adopt(self, state: BranchState) -> None:
        self.state = state
        self.badge = badge_for(state)  # (once per state: a teacher-forced badge counts every row)
        comparison = state.comparison
        self.steps: list[StepComparison] = comparison.steps
        self._divergence_rows = comparison.divergent_rows()
        # where a run of divergent rows starts: what d / D jump between
        self._divergence_starts = [r for i, r in enumerate(self._divergence_rows)
                                   if i == 0 or self._divergence_rows[i - 1] != r - 1]
        first = comparison.first_divergence
        self._path_break = None
        for row in self._divergence_rows:
            if first is not None and row < first.step:
                continue
            if self.steps[row].kind in PATH_KINDS:
                self._path_break = row
            break
        # the last row with an interpreter frame: rows after it come after the program's end
        self.last_truth_row = next((r for r in range(len(self.steps) - 1, -1, -1) if self.steps[r].truth is not None), -1)
        self._calls = None
        self.version += 1

    def update(self, state: BranchState) -> None:
        """The worker's newer state of this running branch."""
        self._adopt(state)

    @property
    def resumable(self) -> bool:
        """Cancelled, with its rollout still here (a live session's, not a saved file's)."""
        source = self.source
        return (not self.running and self.status is RolloutStatus.CANCELLED
                and source is not None and source.live)

    def resume(self) -> None:
        """A cancelled branch goes on (its worker sends newer states again)."""
        self.running = True
        self.version += 1

    def finish(self, state: BranchState) -> None:
        """The branch has stopped: its last state."""
        self.running = False
        self._adopt(state)

    def token_totals(self) -> tuple[int, int]:
        """(tokens in the trace, frames that carry a token count), cached per version."""
        if self._tokens_version != (self.version, len(self.frames)):
            frames = self.frames
            tokens = frames.token_counts() if isinstance(frames, StoredFrames) else [f.tokens for f in frames]
            counted = [n for n in tokens if n]
            self._token_totals = (self.tokens_used or sum(counted), len(counted))
            self._tokens_version = (self.version, len(self.frames))
        return self._token_totals

    # -- rows -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.steps)

    def truth_at(self, row: int) -> Frame | None:
        return self.steps[row].truth if 0 <= row < len(self.steps) else None

    def model_at(self, row: int) -> Frame | None:
        return self.steps[row].model if 0 <= row < len(self.steps) else None

    def kind(self, row: int) -> StepKind:
        if 0 <= row < len(self.steps):
            return self.steps[row].kind
        return StepKind.PENDING if self.running else StepKind.MISSING

    def model_here(self, row: int) -> Frame | None:
        """The model's frame at this row; where the paths part here (this row is the
        interpreter's alone, the one before it the model's too), the frame the model wrote
        instead: what it predicted here, as the divergence's explanation says."""
        frame = self.model_at(row)
        steps = self.steps
        if frame is None and 0 < row < len(steps) and steps[row].truth is not None and steps[row - 1].model is not None:
            index = self.model_index_at(row)
            frames = self.frames
            if 0 <= index < len(frames):
                frame = frames[index]
        return frame

    def model_index_at(self, row: int) -> int:
        """The model frame an intervention at this row replaces: the row's own, or (on a row only
        the interpreter has) the next frame the model would write."""
        for r in range(min(row, len(self.steps) - 1), -1, -1):
            index = self.steps[r].model_index
            if index is not None:
                return index if r == row else index + 1
        return 0

    def changed(self, row: int, side: str) -> set[str]:
        if not 0 <= row < len(self.steps):
            return set()
        step = self.steps[row]
        return step.changed if side == "truth" else step.model_changed

    def off_path(self, row: int) -> bool:
        """Is the model on another path through the program at this row?"""
        first = self._path_break
        return first is not None and row > first and self.steps[row].kind in PATH_KINDS | {StepKind.EXTRA}

    @property
    def first_divergence(self) -> Divergence | None:
        return self.comparison.first_divergence

    def next_divergence(self, row: int) -> int | None:
        """The start of the next run of divergent rows after ``row``."""
        rows = self._divergence_starts
        i = bisect.bisect_right(rows, row)
        return rows[i] if i < len(rows) else None

    def previous_divergence(self, row: int) -> int | None:
        rows = self._divergence_starts
        i = bisect.bisect_left(rows, row)
        return rows[i - 1] if i > 0 else None

    def _call_rows(self) -> list[int]:
        if self._calls is None:
            self._calls = self.comparison.rows_of_event(Event.CALL)
        return self._calls

    def next_call(self, row: int) -> int | None:
        rows = self._call_rows()
        i = bisect.bisect_right(rows, row)
        return rows[i] if i < len(rows) else None

    def previous_call(self, row: int) -> int | None:
        rows = self._call_rows()
        i = bisect.bisect_left(rows, row)
        return rows[i - 1] if i > 0 else None

    def search(self, text: str, start: int, backwards: bool = False) -> int | None:
        """The next row after ``start`` (wrapping) where a variable's name or value contains ``text``."""
        needle = text.lower()
        n = len(self.steps)
        if not n or not needle:
            return None
        frames_at = self.comparison.frames_at
        for offset in range(1, n + 1):
            row = (start - offset) % n if backwards else (start + offset) % n
            for frame in frames_at(row):
                if frame is None:
                    continue
                if frame.locals:
                    for key, value in frame.locals.items():
                        if needle in key.lower() or needle in value.lower():
                            return row
                if frame.arg is not None and needle in frame.arg.lower():
                    return row
        return None

    # -- state panel ------------------------------------------------------------------------
    def variables(self, row: int) -> list[VariableRow]:
        if not 0 <= row < len(self.steps):
            return []
        step = self.steps[row]
        truth, model = step.truth, step.model
        pending = step.kind is StepKind.PENDING
        absent = not pending and (truth is None or model is None)
        diffs = {v.name: v for v in step.variables}
        expected = truth.locals if truth is not None else None
        predicted = model.locals if model is not None else None
        rows: list[VariableRow] = []
        names = list(expected or {}) + [k for k in (predicted or {}) if k not in (expected or {})]
        for name in names:
            diff = diffs.get(name)
            rows.append(VariableRow(
                name,
                expected.get(name) if expected is not None else None,
                predicted.get(name) if predicted is not None else None,
                name in step.changed,
                diff.type_name if diff else "",
                diff.literal_equal if diff else False,
                pending=pending,
                absent=absent,
            ))
        arg_frames = [f for f in (truth, model) if f is not None and f.event in (Event.RETURN, Event.EXCEPTION)]
        if arg_frames:
            label = "raise" if arg_frames[0].event is Event.EXCEPTION else "return"
            diff = diffs.get(label)
            rows.append(VariableRow(
                f"({label})",
                truth.arg if truth is not None and truth.arg is not None else None,
                model.arg if model is not None and model.arg is not None else None,
                False,
                diff.type_name if diff else "",
                diff.literal_equal if diff else False,
                in_locals=False,
                pending=pending,
                absent=absent,
            ))
        return rows


def badge_for(branch: BranchState) -> str:
    """How a branch's intervention turned out, in a few words."""
    intervention, comparison = branch.intervention, branch.comparison
    if intervention is not None and intervention.teacher_forced and comparison is not None:
        paired = [s for s in comparison.steps if s.truth is not None and s.model is not None]
        right = sum(1 for s in paired if s.kind is StepKind.MATCH)
        what = "frames teacher-forced" if intervention.whole_frames else "teacher-forced"
        return f"{what}: {right}/{len(paired)} steps right"
    rec = branch.recovery
    if rec is None:
        return ""
    if rec.recovered_at is not None:
        return f"recovered at step {rec.recovered_at}"
    return f"not recovered within {rec.rows_after} steps"


@dataclass
class SessionView:
    """A whole debugging session as the UI shows it."""

    program: Program
    truth: Trace
    branches: list[BranchView]
    model_name: str = ""
    model_description: str = ""
    decoding: str = "greedy"
    constrained: bool = False  # new branches decode under the frame grammar
    token_budget: int = 8192
    frame_tokens: int = 512
    can_generate: bool = False
    origin: str = ""  # where the session came from: "live", "replay FILE#ID", "session FILE"
    engine: DebugSession | None = None  # the session behind this view, when there is one
    lens_label: str = "the model's tokenizer"  # whose tokens the token lens shows

    def __post_init__(self) -> None:
        self._output_steps = [chunk.step for chunk in self.truth.output]
        self._lenses: dict[tuple, Lens | None] = {}

    def decoding_of(self, branch: BranchView | None) -> str:
        """The decoding (and budget) ``branch`` ran with: a reopened session's branches keep
        their own, whatever options new branches get."""
        settings = branch.settings if branch is not None else None
        return decoding_text(settings) if settings else self.decoding

    def constrained_of(self, branch: BranchView | None) -> bool:
        """Whether ``branch`` decoded under the frame grammar (as :meth:`decoding_of`: a reopened
        branch by its own settings; one saved before the grammar existed did not)."""
        settings = branch.settings if branch is not None else None
        if not settings:
            return self.constrained
        replayed = settings.get("token_budget") is None  # a replay's branch decoded nothing
        return bool(settings.get("constrain")) and not replayed

    def budget_of(self, branch: BranchView | None) -> int:
        settings = branch.settings if branch is not None else None
        return int(settings.get("token_budget") or 0) if settings else self.token_budget

    @classmethod
    def from_session(cls, session, *, origin: str = "", waiting: str = "") -> "SessionView":
        """The view of a :class:`~cwmtui.session.DebugSession` (its truth must be recorded).

        A session without branches (no model, or one still loading) shows the truth beside a
        placeholder whose rows say ``waiting``.
        """
        truth = session.truth
        backend = session.backend
        options = session.options
        branches = [BranchView(truth, session.branch_state(b)) for b in session.branches]
        if not branches:
            branches = [BranchView.waiting_for(truth, waiting or "(no model)")]
        view = cls(
            session.program, truth, branches,
            model_name=session.model_name, model_description=session.model_description,
            decoding=decoding_text(options),
            constrained=constrained_by(options, backend),
            token_budget=getattr(options, "token_budget", 0) or 0,
            frame_tokens=getattr(options, "frame_tokens", 0) or 0,
            can_generate=backend is not None and bool(getattr(backend, "can_generate", False)),
            origin=origin, engine=session,
            lens_label=getattr(backend, "lens_label", "the model's tokenizer"),
        )
        return view

    # -- the token lens: asked of the engine in a worker (a tokenizer may be a server away) --
    def lens_key(self, branch: BranchView, row: int, name: str) -> tuple:
        return (branch.name, branch.version, row, name)

    def cached_lens(self, branch: BranchView, row: int, name: str) -> tuple[bool, Lens | None]:
        """``(known, lens)``: the engine's token lens of a differing value if it was worked out
        (None: the model's tokenizer cannot split it); ``known`` False: ask for it
        (:meth:`work_out_lens`, in a worker). A branch still running, or a view with no engine,
        has none to ask for."""
        if self.engine is None or branch.source is None or branch.running:
            return True, None
        key = self.lens_key(branch, row, name)
        if key in self._lenses:
            return True, self._lenses[key]
        return False, None

    def work_out_lens(self, branch: BranchView, row: int, name: str) -> Lens | None:
        """The engine's token lens (worker thread: it tokenizes through the backend)."""
        variable = {"(return)": "return", "(raise)": "raise"}.get(name, name)
        try:
            return self.engine.lens(branch.state.branch, row, variable, comparison=branch.comparison)
        except Exception:  # noqa: BLE001 - a tokenizer failing must not take the panel down
            return None

    def keep_lens(self, key: tuple, lens: Lens | None) -> None:
        """A lens a worker worked out (message handler)."""
        self._lenses[key] = lens

    def branch(self, name: str) -> BranchView | None:
        for branch in self.branches:
            if branch.name == name:
                return branch
        return None

    def output_until(self, truth_index: int) -> list[OutputChunk]:
        """What the program had written by the truth's frame ``truth_index``."""
        if len(self._output_steps) != len(self.truth.output):
            self._output_steps = [chunk.step for chunk in self.truth.output]
        end = bisect.bisect_right(self._output_steps, truth_index)
        return self.truth.output[:end]
