"""One debugging session: a program, its truth, the model's rollouts as a tree of branches.

``DebugSession(program, backend, options)`` records the program under the real interpreter
(the truth), runs the model's main rollout, and grows branches from interventions: at step
``k`` the model's action is replaced (by the real next line, another source line, or a typed
one) or its locals are edited, and the model goes on from there. Each branch is compared with
the truth and, for an intervention, scored for recovery. The teacher-forced branch forces every
action from the truth.

A session saves to one JSON file (program, truth, branches with their frames, interventions and
comparisons, settings, model identity) and reopens offline, without a model, with the same
comparisons. Format version 2 keeps what reopening would otherwise work out again: each
branch's comparison in compact form (``Comparison.to_saved``: rows as runs, the names each
frame changed, the first divergence; the recovery), frames as rows, and a model's frames equal
to the interpreter's as runs referring to them (``cwmtui/trace/stored.py``). It is read with
orjson, checked whole, and frames and rows are built only as they are shown, so a
100,000-step session opens in well under a second. Version 1 files (frames as objects, no
saved comparisons) still open: their branches are compared again. Reopened with a backend, a
session grows new branches like a live one. Long operations take ``on_frame`` and ``cancel``
(a callable or an Event) so a UI can run them in a worker thread and stream frames. Pure
Python: no UI here.
"""

from __future__ import annotations

import codecs
import math
import os
import threading
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Callable, Sequence

import orjson

from ..analysis.compare import Comparison
from ..analysis.lens import Lens, byte_pieces, token_lens
from ..analysis.recovery import Recovery, recovery, score_forced, teacher_force
from ..interpreter import Interpreter, Limits, Program
from ..files import read_bytes
from ..json_lines import DAMAGED_DATA
from ..trace import Event, Frame, OutputChunk, RolloutStatus, Status, Trace, TraceStatus, tokens
from ..trace.collector import collector_paused
from ..trace.frame import frames_from_json
from ..trace.stored import StoredFrames, frame_row, stored_frames
from .intervention import Intervention

if TYPE_CHECKING:
    from ..model.rollout import Rollout

FORMAT = "cwmtui-session"
FORMAT_VERSION = 2  # 2: frames as rows (trace/stored.py), comparisons saved; version 1 files still open

#: on_frame(branch, index, frame): a frame the model wrote (or that was forced) on ``branch``
FrameCallback = Callable[["Branch", int, Frame], None]


class SessionError(Exception):
    """A session problem, explained to the user in one line."""


@dataclass
class Branch:
    name: str
    parent: str | None = None
    at_step: int | None = None  # the model frame the branch departs from its parent at
    intervention: Intervention | None = None
    frames: list[Frame] = field(default_factory=list)
    status: RolloutStatus = RolloutStatus.RUNNING  # why the rollout stopped (or that it runs)
    comparison: Comparison | None = None
    recovery: Recovery | None = None
    tokens: dict = field(default_factory=lambda: {"trace": 0, "processed": 0})
    forced_steps: list[int] = field(default_factory=list)  # teacher forcing: frames forced whole
    lens: dict | None = None  # {"step", "variable", "lens"} of a string-valued divergence
    settings: dict | None = None  # the rollout options it ran with (token budget, decoding)
    rollout: Rollout | None = field(default=None, repr=False, compare=False)  # live only

    @property
    def live(self) -> bool:
        return self.rollout is not None

    def to_json(self, truth: Sequence[Frame]) -> dict:
        """The branch as JSON; its comparison's ``truth_changed`` is left in for the session
        to keep once (every branch is compared with the same truth)."""
        comparison = self.comparison
        data = {
            "name": self.name,
            "parent": self.parent,
            "at_step": self.at_step,
            "intervention": self.intervention.to_json() if self.intervention is not None else None,
            "status": self.status.value,
            "tokens": self.tokens,
            "forced_steps": self.forced_steps,
            "frames": _frames_json(self.frames, truth, comparison),
            "verdict": comparison.verdict if comparison else None,
            "first_divergence": comparison.first_divergence.to_json()
            if comparison and comparison.first_divergence
            else None,
        }
        if comparison is not None and self.status is not RolloutStatus.RUNNING:  # a running branch is compared again on load
            saved = comparison.to_saved()
            data["comparison"] = {key: saved[key] for key in ("status", "agreed_steps", "rows", "truth_changed", "model_changed")}
        if self.recovery is not None:
            data["recovery"] = self.recovery.to_json()
        if self.lens is not None:
            data["lens"] = {**self.lens, "lens": self.lens["lens"].to_json()}
        if self.settings is not None:
            data["settings"] = self.settings
        return data

    @classmethod
    def from_json(cls, data: dict, truth: Sequence[Frame], truth_changed: list | None = None, version: int = FORMAT_VERSION) -> "Branch":
        """A branch from :meth:`to_json`, with its saved comparison when the file has one (and
        the truth's changed names, kept once per session, are given)."""
        frames = data.get("frames", [])
        if not isinstance(data["name"], str) or not isinstance(data.get("parent"), (str, type(None))):
            raise TypeError("a branch's name and parent must be text")
        lens = data.get("lens")
        if lens is not None:
            lens = {**lens, "lens": Lens.from_json(lens["lens"])}
        branch = cls(
            name=data["name"],
            parent=data.get("parent"),
            at_step=data.get("at_step"),
            intervention=Intervention.from_json(data["intervention"]) if data.get("intervention") is not None else None,
            frames=StoredFrames(frames, base=truth) if version >= 2 else frames_from_json(frames),
            status=RolloutStatus.read(data.get("status", "ended")),
            tokens=dict(data.get("tokens") or {"trace": 0, "processed": 0}),
            forced_steps=list(data.get("forced_steps") or []),
            lens=lens,
            settings=_settings(data.get("settings")),
        )
        saved = data.get("comparison")
        if saved is not None and truth_changed is not None and version >= 2:
            # the saved comparison spares recomputing it; one that does not fit the frames (a
            # stale or edited file) is dropped, and the session compares the branch again
            try:
                saved = {**saved, "verdict": data["verdict"], "first_divergence": data["first_divergence"],
                         "truth_changed": truth_changed}
                branch.comparison = Comparison.from_saved(saved, truth, branch.frames)
                if data.get("recovery") is not None:
                    branch.recovery = Recovery.from_json(data["recovery"], branch.comparison)
            except DAMAGED_DATA:
                branch.comparison = branch.recovery = None
        return branch


@dataclass(frozen=True)
class BranchState:
    """A branch as it stands at one moment, read-only: what a screen shows of it. The engine
    makes one (:meth:`DebugSession.branch_state`, in the thread that runs the branch) and hands
    it over whole, so the screen never copies a branch field by field, nor compares, nor reads a
    branch that a worker is growing. ``branch`` is the engine's branch, to grow new branches from."""

    branch: Branch
    frames: Sequence[Frame]  # its frames then (a list of its own, or a saved session's rows)
    comparison: Comparison
    status: RolloutStatus
    tokens_used: int = 0
    tokens_processed: int = 0

    @property
    def name(self) -> str:
        return self.branch.name

    @property
    def parent(self) -> str | None:
        return self.branch.parent

    @property
    def at_step(self) -> int | None:
        return self.branch.at_step

    @property
    def intervention(self) -> Intervention | None:
        return self.branch.intervention

    @property
    def recovery(self) -> Recovery | None:
        return self.branch.recovery

    @property
    def settings(self) -> dict | None:
        return self.branch.settings


def _frames_json(frames: Sequence[Frame], truth: Sequence[Frame], comparison: Comparison | None) -> list:
    """A branch's frames as rows; those equal to the interpreter's frames on their rows as runs
    (see cwmtui/trace/stored.py)."""
    partner: dict[int, int] = {}
    if comparison is not None:
        partner = {mi: ti for ti, mi in comparison.alignment if ti is not None and mi is not None}
    return stored_frames(frames, truth, partner)


def _truth_json(truth: Trace) -> dict:
    return {
        "frames": [frame_row(f) for f in truth.frames],
        "status": truth.status.to_json(),
        "output": [[c.step, c.stream, c.text] for c in truth.output],
    }


def _truth_from_json(data: dict, version: int) -> Trace:
    if version < 2:
        return Trace.from_json(data)
    return Trace(
        frames=StoredFrames(data["frames"]),
        status=TraceStatus.from_json(data["status"]),
        output=[OutputChunk.from_json(c) for c in data.get("output", [])],
    )


class DebugSession:
    """The truth, the model's branches, their comparisons; save and load."""

    def __init__(
        self,
        program: Program,
        backend=None,
        options=None,
        limits: Limits | None = None,
        truth: Trace | None = None,
        interpreter: Interpreter | None = None,
    ) -> None:
        self.program = program
        self.backend = backend
        self.options = options if options is not None else _default_options()
        self.limits = limits or Limits()
        self.branches: list[Branch] = []
        self.model_name = getattr(backend, "name", "") if backend is not None else ""
        self.model_description = getattr(backend, "description", "") if backend is not None else ""
        self._truth = truth
        self._interpreter = interpreter
        self._lock = threading.RLock()

    # -- the truth -------------------------------------------------------------------------
    @property
    def truth(self) -> Trace:
        return self._truth if self._truth is not None else self.run_truth()

    def run_truth(self, on_frame: Callable[[Frame], None] | None = None) -> Trace:
        """Run the program under the real interpreter (once; later calls return the same trace)."""
        with self._lock:
            if self._truth is not None:
                return self._truth
            if self._interpreter is not None:
                trace = self._interpreter.trace(self.program, self.limits, on_frame)
            else:
                with Interpreter() as interpreter:
                    trace = interpreter.trace(self.program, self.limits, on_frame)
            self._truth = trace
            return trace

    def _entry_frame(self) -> Frame:
        truth = self.truth
        if not truth.frames or truth.frames[0].event is not Event.CALL:
            if truth.status.kind is Status.NOT_CALLED:
                what = f"the entry {self.program.entry}() never ran"
            else:  # it ran, and stopped (or was stopped) before the tracer's first record
                what = f"the interpreter recorded no step of {self.program.entry}()"
            raise SessionError(
                f"{self.program.path}: {what} ({truth.status.describe()}), so there is nothing for the model to predict"
            )
        return truth.frames[0]

    # -- branches --------------------------------------------------------------------------
    @property
    def main(self) -> Branch | None:
        return self.branches[0] if self.branches else None

    def branch(self, name: str) -> Branch:
        for branch in self.branches:
            if branch.name == name:
                return branch
        raise SessionError(f"no branch named {name!r}")

    def children(self, name: str) -> list[Branch]:
        return [b for b in self.branches if b.parent == name]

    def _unique(self, name: str) -> str:
        taken = {b.name for b in self.branches}
        if name not in taken:
            return name
        n = 2
        while f"{name}.{n}" in taken:
            n += 1
        return f"{name}.{n}"

    def _need_model(self) -> None:
        if self.backend is None:
            raise SessionError("this session was opened without a model: rerun it with a model to branch")
        if not getattr(self.backend, "can_generate", True):
            raise SessionError(
                "this is a replay of recorded generations: overrides need a live model (--model or --server)"
            )

    def _settings_now(self) -> dict | None:
        """The rollout options a new branch runs with, as it saves them. A replay reproduces a
        recorded generation whatever the limits, so its branch has none."""
        settings = _options_json(self.options) or None
        if settings is not None and not getattr(self.backend, "can_generate", True):
            settings.update(token_budget=None, frame_tokens=None, max_frames=None)
        return settings

    def _new_rollout(self):
        from ..model.rollout import Rollout

        return Rollout(self.backend, self.program, self._entry_frame(), self.options)

    def _run(self, branch: Branch, rollout, on_frame, cancel) -> Branch:
        def forward(frame: Frame) -> None:
            frames = rollout.frames
            if len(branch.frames) == len(frames) - 1 and branch.frames is not frames:
                branch.frames.append(frame)  # O(1): a long replay streams in linear time
            else:
                branch.frames = list(frames)
            if on_frame is not None:
                on_frame(branch, len(rollout.frames) - 1, frame)

        rollout.run(on_frame=forward, cancel=cancel)
        self._refresh(branch)
        return branch

    def _refresh(self, branch: Branch) -> None:
        """Take the rollout's frames and status, and compare them with the truth."""
        rollout = branch.rollout
        if rollout is not None:
            branch.frames = list(rollout.frames)
            branch.status = rollout.status
            branch.tokens = {
                "trace": int(getattr(rollout, "tokens_used", 0)),
                "processed": int(getattr(rollout, "tokens_processed", 0)),
            }
        self.compare_branch(branch)

    def compare_branch(self, branch: Branch) -> Comparison:
        """(Re)compare a branch with the truth; cheap enough to call while it streams."""
        comparison = score_forced(self.truth, branch.frames, branch.status, branch.forced_steps)
        branch.comparison = comparison
        if branch.at_step is not None and branch.intervention is not None and not branch.intervention.teacher_forced:
            row = comparison.row_of_model(branch.at_step)
            branch.recovery = recovery(comparison, row if row is not None else branch.at_step)
        return comparison

    def branch_state(self, branch: Branch) -> BranchState:
        """``branch`` as it stands now, for a screen: see :class:`BranchState`. A running branch
        is copied and compared without being touched (so any thread may ask while the worker
        grows it); a stopped one gives its own comparison."""
        if branch.status is RolloutStatus.RUNNING:
            rollout = branch.rollout
            frames = list(branch.frames)  # (one step under the GIL: a consistent copy)
            forced = list(branch.forced_steps)
            used = rollout.tokens_used if rollout is not None else 0
            processed = rollout.tokens_processed if rollout is not None else 0
            comparison = score_forced(self.truth, frames, RolloutStatus.RUNNING, forced)
            return BranchState(branch, frames, comparison, RolloutStatus.RUNNING, used, processed)
        comparison = branch.comparison or self.compare_branch(branch)
        frames = branch.frames if isinstance(branch.frames, StoredFrames) else list(branch.frames)
        used, processed = int(branch.tokens.get("trace", 0)), int(branch.tokens.get("processed", 0))
        return BranchState(branch, frames, comparison, branch.status, used, processed)

    def run_main(self, on_frame: FrameCallback | None = None, cancel=None) -> Branch:
        """The model's own rollout from the entry call (branch ``main``)."""
        self._need_model_for_run()
        rollout = self._new_rollout()
        with self._lock:
            if self.branches and self.branches[0].name == "main":
                self.branches.pop(0)
            branch = Branch("main", rollout=rollout, frames=list(rollout.frames), settings=self._settings_now())
            self.branches.insert(0, branch)
        if on_frame is not None and rollout.frames:
            on_frame(branch, 0, rollout.frames[0])
        return self._run(branch, rollout, on_frame, cancel)

    def _need_model_for_run(self) -> None:
        if self.backend is None:
            raise SessionError("this session was opened without a model: there is nothing to run")

    def override(
        self,
        branch: Branch | str,
        step: int,
        action: str | None = None,
        locals: dict[str, str] | None = None,
        on_frame: FrameCallback | None = None,
        cancel=None,
        source: str | None = None,
    ) -> Branch:
        """A new branch: ``branch``'s frames up to ``step``, then the intervention, then the model.

        ``action`` replaces the model's source line at ``step`` (the real next line, another line
        of the program, or typed text); ``locals`` replaces the state before that line. With only
        an action, the model writes the event and state of step ``step`` itself and the action
        is forced; where the real line is forced onto a step whose event the model got wrong,
        the truth's whole frame is forced so the paths line up.
        """
        self._need_model()
        parent = self.branch(branch) if isinstance(branch, str) else branch
        if action is None and locals is None:
            raise SessionError("an override needs a new action or new locals")
        if not 0 <= step <= len(parent.frames):
            raise SessionError(f"step {step} is outside branch {parent.name!r} (0..{len(parent.frames)})")
        if step == 0 and action is not None:
            raise SessionError("step 0 is the entry call, forced from the truth: override a later step")
        if action is not None and not action.endswith("\n"):
            action += "\n"
        truth = self.truth.frames
        kind = "action" if locals is None else ("locals" if action is None else "action+locals")
        if source is None and action is not None:
            real = truth[step].action if step < len(truth) else None
            if real is not None and tokens.strip_marker(action) == tokens.strip_marker(real):
                source = "truth"
            elif action in self.program.lines or tokens.strip_marker(action) in [tokens.strip_marker(l) for l in self.program.lines]:
                source = "line"
            else:
                source = "typed"
        intervention = Intervention(kind, step, source, action, dict(locals) if locals is not None else None)

        rollout = self._new_rollout()
        for frame in parent.frames[1:step]:
            rollout.force(frame, origin=frame.origin or "forced")
        name = self._unique(f"{parent.name}/{step}")
        child = Branch(name, parent=parent.name, at_step=step, intervention=intervention, rollout=rollout,
                       settings=self._settings_now())
        with self._lock:
            self.branches.append(child)
        model_frame = parent.frames[step] if step < len(parent.frames) else None
        if locals is not None:
            base = model_frame if model_frame is not None and model_frame.event is not None else (truth[step] if step < len(truth) else None)
            if base is None:
                raise SessionError(f"there is no frame at step {step} to edit")
            edited = Frame(
                base.event if base.event in (Event.CALL, Event.LINE) else Event.LINE,
                action if action is not None else base.action,
                dict(locals),
            )
            rollout.force(edited, origin="edited")
        else:
            expected = truth[step] if step < len(truth) and source == "truth" else None
            # The real line comes with its real event (a loop test, not a return): forced too.
            frame = rollout.step(force_action=action, force_event=expected.event if expected else None, cancel=cancel)
            if expected is not None and (frame is None or frame.is_error or frame.event is not expected.event):
                rollout.rewind(step)
                rollout.force(expected, origin="forced")
                child.intervention = replace(intervention, forced_frame=True)
        child.frames = list(rollout.frames)
        if on_frame is not None and len(rollout.frames) > step:
            on_frame(child, step, rollout.frames[step])
        return self._run(child, rollout, on_frame, cancel)

    def override_with_truth(self, branch: Branch | str, step: int, **kwargs) -> Branch:
        """Override step ``step`` with the interpreter's real next line."""
        truth = self.truth.frames
        if step >= len(truth):
            raise SessionError(f"the interpreter's trace has no step {step}")
        return self.override(branch, step, action=truth[step].action, source="truth", **kwargs)

    def teacher_forced(self, on_frame: FrameCallback | None = None, cancel=None) -> Branch:
        """The paper's teacher-forced condition: every action forced from the truth."""
        self._need_model()
        rollout = self._new_rollout()
        name = self._unique("teacher-forced")
        branch = Branch(name, parent=None, at_step=0, intervention=Intervention("teacher_force", 0), rollout=rollout,
                        settings=self._settings_now())
        with self._lock:
            self.branches.append(branch)

        def forward(index: int, frame: Frame) -> None:
            frames = rollout.frames
            if len(branch.frames) >= index and branch.frames is not frames:
                branch.frames[index:] = frames[index:]  # O(1): a forced step replaced the model's frame
            else:
                branch.frames = list(frames)
            if on_frame is not None:
                on_frame(branch, index, frame)

        teacher_force(rollout, self.truth.frames, forward, cancel, forced=branch.forced_steps)
        self._refresh(branch)
        return branch

    def remove(self, name: str) -> None:
        """Drop a branch and everything grown from it (not ``main``)."""
        if self.main is not None and name == self.main.name:
            raise SessionError("the main rollout cannot be removed")
        doomed = {name}
        changed = True
        while changed:
            changed = False
            for b in self.branches:
                if b.parent in doomed and b.name not in doomed:
                    doomed.add(b.name)
                    changed = True
        with self._lock:
            self.branches = [b for b in self.branches if b.name not in doomed]

    # -- the token lens --------------------------------------------------------------------
    def lens(self, branch: Branch | str, row: int | None = None, variable: str | None = None,
             comparison: Comparison | None = None) -> Lens | None:
        """The token lens of a differing value at ``row`` (default: the first divergence) of
        ``comparison`` (default: the branch's)."""
        branch = self.branch(branch) if isinstance(branch, str) else branch
        comparison = comparison or branch.comparison or self.compare_branch(branch)
        if row is None:
            if comparison.first_divergence is None:
                return None
            row = comparison.first_divergence.step
        if not 0 <= row < len(comparison.steps):
            return None
        step = comparison.steps[row]
        candidates = [v for v in step.variables if variable is None or v.name == variable]
        if not candidates:
            return None
        diff = candidates[0]
        stored = branch.lens
        if stored is not None and stored.get("step") == row and stored.get("variable") == diff.name:
            return stored["lens"]
        pieces = self._pieces()
        if pieces is None:
            return None
        in_locals = diff.name not in ("return", "raise")
        return token_lens(diff.expected, diff.predicted, pieces, in_locals=in_locals)

    def _pieces(self):
        if self.backend is not None and hasattr(self.backend, "token_pieces"):
            try:
                self.backend.token_pieces("x")
            except Exception:  # noqa: BLE001 - a replay without a tokenizer cannot split text
                return None
            return self.backend.token_pieces
        if self.model_name == "bundled":
            return byte_pieces  # the bundled model is byte-level: no tokenizer needed
        return None

    def _remember_lenses(self) -> None:
        for branch in self.branches:
            comparison = branch.comparison
            first = comparison.first_divergence if comparison else None
            if first is None or not first.string_valued or not first.variables:
                continue
            if branch.lens is not None and branch.lens.get("step") == first.step:
                continue
            lens = self.lens(branch, first.step, first.variables[0])
            if lens is not None:
                branch.lens = {"step": first.step, "variable": first.variables[0], "lens": lens}

    # -- save and load ---------------------------------------------------------------------
    def to_json(self) -> dict:
        self._remember_lenses()
        truth = self.truth
        branches = [b.to_json(truth.frames) for b in self.branches]
        truth_changed = None
        for data in branches:
            saved = data.get("comparison")
            if saved is not None:
                changed = saved.pop("truth_changed")
                truth_changed = changed if truth_changed is None else truth_changed
        data = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "program": self.program.to_json(),
            "truth": _truth_json(truth),
            "settings": {"rollout": _options_json(self.options), "limits": asdict(self.limits)},
            "model": {"name": self.model_name, "description": self.model_description},
            "branches": branches,
        }
        if truth_changed is not None:
            data["truth_changed"] = truth_changed  # the names each truth frame changed (saved comparisons)
        return data

    def save(self, path: str) -> None:
        """Write the session to ``path`` atomically: a file that was there stays whole until the
        new one is complete."""
        try:
            payload = orjson.dumps(self.to_json(), option=orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError as exc:
            raise SessionError(f"{path}: cannot write the session ({exc})") from None
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            with open(tmp, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise SessionError(f"{path}: cannot write the session ({exc.strerror or exc})") from None

    @classmethod
    def from_json(cls, data: dict, backend=None) -> "DebugSession":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise SessionError("not a cwmtui session file")
        version = data.get("version")
        if type(version) is not int or version < 1:
            raise SessionError(f"the session file is damaged: its format version {version!r} is not understood")
        if version > FORMAT_VERSION:
            raise SessionError(f"session format version {version} is newer than this cwmtui reads ({FORMAT_VERSION})")
        try:
            program = Program.from_json(data["program"])
            truth = _truth_from_json(data["truth"], version)
            settings = data.get("settings") or {}
            saved_rollout = settings.get("rollout") or {}
            options = _options_from_json(saved_rollout)
            # the numbers only: whether programs run in the sandbox is the user's choice now,
            # never a file's
            saved = settings.get("limits") or {}
            # (a limit of 0 or less, or not a number, would switch it off: the default stands)
            limits = Limits(**{k: saved[k] for k in ("frames", "seconds", "memory", "output", "processes")
                               if type(saved.get(k)) in (int, float) and saved[k] > 0})
            branches = data.get("branches", [])
            if not isinstance(branches, list):
                raise TypeError("the branches must be a list")
            truth_changed = data.get("truth_changed")
            branches = [Branch.from_json(b, truth.frames, truth_changed, version) for b in branches]
            for branch in branches:  # a file from before branches kept their own: the session's
                if branch.settings is None and saved_rollout:
                    branch.settings = dict(saved_rollout)
            model = data.get("model") or {}
            model_name, model_description = model.get("name", ""), model.get("description", "")
            if not isinstance(model_name, str) or not isinstance(model_description, str):
                raise TypeError("the model's name and description must be text")
        except DAMAGED_DATA as exc:
            raise SessionError(f"the session file is damaged ({exc.__class__.__name__}: {exc})") from None
        session = cls(program, backend, options, limits, truth=truth)
        if backend is None:
            session.model_name, session.model_description = model_name, model_description
        session.branches = branches
        for branch in branches:
            if branch.comparison is None:  # a version 1 file, or a branch saved while it ran
                session.compare_branch(branch)
        return session

    @classmethod
    def load(cls, path: str, backend=None) -> "DebugSession":
        """Reopen a saved session; without ``backend`` it is read-only (no new branches)."""
        raw = read_bytes(path, "session file (.json)", SessionError).removeprefix(codecs.BOM_UTF8)
        with collector_paused():
            try:
                data = orjson.loads(raw)
            except ValueError:
                raise SessionError(f"{path}: not a cwmtui session file (not JSON)") from None
            try:
                return cls.from_json(data, backend)
            except SessionError as exc:
                raise SessionError(f"{path}: {exc}") from None


def _default_options():
    from ..model.rollout import RolloutOptions

    return RolloutOptions()


def _options_json(options) -> dict:
    if options is None:
        return {}
    try:
        return asdict(options)
    except TypeError:
        return dict(vars(options))


def _settings(data) -> dict | None:
    """A branch's saved rollout settings, checked: a damaged value is refused at load, not
    when the status bar draws it. Its limits may be null (a replay has none)."""
    if data is not None:
        _check_rollout_values(data, limits_may_be_null=True)
    return data


def _check_rollout_values(data, limits_may_be_null: bool = False) -> None:
    if not isinstance(data, dict):
        raise TypeError("rollout settings must be an object")
    from ..model.rollout import RolloutOptions

    for f in fields(RolloutOptions):
        if f.name not in data:
            continue
        value, kind = data[f.name], type(f.default)
        if value is None and limits_may_be_null and f.name in ("token_budget", "frame_tokens", "max_frames"):
            continue
        number = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not number or (kind is float and not math.isfinite(value)):
            raise ValueError(f"the rollout setting {f.name} is {value!r}, not a number")


def _options_from_json(data: dict):
    from ..model.rollout import RolloutOptions

    _check_rollout_values(data)
    known = {f.name for f in fields(RolloutOptions)}
    return RolloutOptions(**{k: v for k, v in data.items() if k in known})
