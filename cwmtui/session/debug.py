"""The session itself: the truth, the model's branches, running and growing them."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable, Sequence

from ..analysis.compare import Comparison
from ..analysis.values import value_problem
from ..analysis.lens import Lens, byte_pieces, token_lens
from ..analysis.recovery import recovery, score_forced, teacher_force
from ..interpreter import Interpreter, Limits, Program
from ..model.backend import is_cancelled
from ..trace import Event, Frame, RolloutStatus, Status, Trace, tokens
from ..trace.stored import StoredFrames
from .branch import RAN_ON, Branch, BranchState
from .errors import SessionError
from .intervention import Intervention
from .saved import load_session, options_json, save_session, session_from_json, session_to_json

#: on_frame(branch, index, frame): a frame the model wrote (or that was forced) on ``branch``
FrameCallback = Callable[[Branch, int, Frame], None]

#: a whole-frame teacher-forced prediction of end of text where the program goes on
ENDED_EARLY = "the model wrote end of text here; the program goes on"


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
        settings = options_json(self.options) or None
        if settings is not None and not getattr(self.backend, "can_generate", True):
            settings.update(token_budget=None, frame_tokens=None, max_frames=None)
        return settings

    def _new_rollout(self):
        from ..model.rollout import Rollout

        return Rollout(self.backend, self.program, self._entry_frame(), self.options)

    @staticmethod
    def _token_limit(rollout) -> int | None:
        """The tokens a rollout may write: its budget, or what the model's context leaves after
        the prompt where that is less (None: a replay, which has no limit)."""
        if not getattr(rollout.backend, "can_generate", True):
            return None
        limit = int(rollout.options.token_budget)
        context = getattr(rollout.backend, "context_length", None)
        if context:
            limit = min(limit, int(context) - int(rollout.prompt_tokens))
        return max(limit, 0)

    def _run(self, branch: Branch, rollout, on_frame, cancel) -> Branch:
        def forward(frame: Frame) -> None:
            frames = rollout.frames
            if isinstance(branch.frames, list) and len(branch.frames) == len(frames) - 1 and branch.frames is not frames:
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
            branch.message = str(getattr(rollout, "message", "") or "")
            branch.partial = str(getattr(rollout, "partial", "") or "")
            branch.tokens = {
                "trace": int(getattr(rollout, "tokens_used", 0)),
                "processed": int(getattr(rollout, "tokens_processed", 0)),
            }
        self.compare_branch(branch)

    def compare_branch(self, branch: Branch) -> Comparison:
        """(Re)compare a branch with the truth; cheap enough to call while it streams."""
        partial = branch.partial if branch.status.out_of_tokens else ""
        comparison = score_forced(self.truth, branch.frames, branch.status, branch.forced_steps, partial)
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
        kept: Sequence[Frame] = branch.frames if isinstance(branch.frames, StoredFrames) else list(branch.frames)
        used, processed = int(branch.tokens.get("trace", 0)), int(branch.tokens.get("processed", 0))
        return BranchState(branch, kept, comparison, branch.status, used, processed)

    def run_main(self, on_frame: FrameCallback | None = None, cancel=None) -> Branch:
        """The model's own rollout from the entry call (branch ``main``)."""
        self._need_model_for_run()
        rollout = self._new_rollout()
        with self._lock:
            if self.branches and self.branches[0].name == "main":
                self.branches.pop(0)
            branch = Branch("main", rollout=rollout, frames=list(rollout.frames), settings=self._settings_now(),
                            token_limit=self._token_limit(rollout))
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
        parent = self._parent(branch, step)
        if action is None and locals is None:
            raise SessionError("an override needs a new action or new locals")
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
        if locals is not None:  # what the user changed must be a value a trace could hold
            shown = parent.frames[step] if step < len(parent.frames) else None
            before = (shown.locals if shown is not None and shown.locals is not None
                      else truth[step].locals if step < len(truth) else None) or {}
            for name, value in locals.items():
                if before.get(name) == value:
                    continue  # as the frame has it (a repr the interpreter or the model wrote)
                problem = value_problem(value) if isinstance(value, str) else "a value must be text (a repr)"
                if problem:
                    raise SessionError(f"{name}: {problem}")

        rollout = self._rollout_up_to(parent, step)
        child = self._child(parent, step, intervention, rollout)
        model_frame = parent.frames[step] if step < len(parent.frames) else None
        if locals is not None:
            base = model_frame if model_frame is not None and model_frame.event is not None else (truth[step] if step < len(truth) else None)
            if base is None:
                raise SessionError(f"there is no frame at step {step} to edit")

            line = base.lineno
            if action is not None:  # the line the action is, where the program has it
                stripped = [tokens.strip_marker(text) for text in self.program.lines]
                line = stripped.index(tokens.strip_marker(action)) + 1 if tokens.strip_marker(action) in stripped else None
            edited = Frame(
                base.event if base.event in (Event.CALL, Event.LINE) else Event.LINE,
                action if action is not None else base.action,
                dict(locals),
                None,
                line,
                base.depth,
                base.function,
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

    def _parent(self, branch: Branch | str, step: int) -> Branch:
        """The branch a new one grows from at ``step`` (SessionError where it cannot)."""
        self._need_model()
        parent = self.branch(branch) if isinstance(branch, str) else branch
        if parent.intervention is not None and parent.intervention.whole_frames:
            raise SessionError("a branch of whole frames teacher-forced holds one-step predictions, not a rollout "
                               "to go on from: override a step of main (or of another branch) instead")
        if not 0 <= step <= len(parent.frames):
            raise SessionError(f"step {step} is outside branch {parent.name!r} (0..{len(parent.frames)})")
        return parent

    def _rollout_up_to(self, parent: Branch, step: int):
        """A new rollout holding ``parent``'s frames before ``step``."""
        rollout = self._new_rollout()
        for frame in parent.frames[1:step]:
            rollout.force(frame, origin=frame.origin or "forced")
        return rollout

    def _child(self, parent: Branch, step: int, intervention: Intervention, rollout) -> Branch:
        child = Branch(self._unique(f"{parent.name}/{step}"), parent=parent.name, at_step=step,
                       intervention=intervention, rollout=rollout, settings=self._settings_now(),
                       token_limit=self._token_limit(rollout))
        with self._lock:
            self.branches.append(child)
        return child

    def override_with_frame(self, branch: Branch | str, step: int, on_frame: FrameCallback | None = None,
                            cancel=None) -> Branch:
        """A new branch: ``branch``'s frames up to ``step``, the interpreter's whole frame at
        ``step`` (its event, state and line), then the model: does it go on right from the true
        state? (Where an override of the action alone asks whether it was a slip of control.)"""
        parent = self._parent(branch, step)
        truth = self.truth.frames
        if not 0 < step < len(truth):
            raise SessionError(f"the interpreter's trace has no step {step} to force (1..{len(truth) - 1})")
        rollout = self._rollout_up_to(parent, step)
        rollout.force(truth[step], origin="forced")
        child = self._child(parent, step, Intervention("frame", step, "truth", truth[step].action), rollout)
        child.frames = list(rollout.frames)
        if on_frame is not None:
            on_frame(child, step, rollout.frames[step])
        return self._run(child, rollout, on_frame, cancel)

    def adopt(self, rollout, name: str = "main", parent: str | None = None, at_step: int | None = None,
              intervention: Intervention | None = None) -> Branch:
        """A finished rollout run elsewhere (a batch run's, or a recorded generation replayed) as a
        branch of this session, compared with the truth; ``main`` takes the place of the main one."""
        settings = self._settings_now()
        if settings is not None and not getattr(getattr(rollout, "backend", None), "can_generate", True):
            settings.update(token_budget=None, frame_tokens=None, max_frames=None)  # a replay: no limits
        branch = Branch(self._unique(name) if name != "main" else name, parent=parent, at_step=at_step,
                        intervention=intervention, rollout=rollout, settings=settings,
                        token_limit=self._token_limit(rollout))
        with self._lock:
            if name == "main":
                self.branches = [b for b in self.branches if b.name != "main"]
                self.branches.insert(0, branch)
            else:
                self.branches.append(branch)
        self._refresh(branch)
        return branch

    def override_with_truth(self, branch: Branch | str, step: int, **kwargs) -> Branch:
        """Override step ``step`` with the interpreter's real next line."""
        truth = self.truth.frames
        if step >= len(truth):
            raise SessionError(f"the interpreter's trace has no step {step}")
        return self.override(branch, step, action=truth[step].action, source="truth", **kwargs)

    def teacher_forced(self, on_frame: FrameCallback | None = None, cancel=None, whole_frames: bool = False) -> Branch:
        """A teacher-forced condition: every action forced from the truth (the model writes each
        step's state from its own earlier states); or, ``whole_frames``, every frame: at each step
        the model sees the interpreter's trace so far and predicts the next frame alone."""
        self._need_model()
        rollout = self._new_rollout()
        name = self._unique("teacher-forced-frames" if whole_frames else "teacher-forced")
        kind = "teacher_force_frames" if whole_frames else "teacher_force"
        branch = Branch(name, parent=None, at_step=0, intervention=Intervention(kind, 0), rollout=rollout,
                        settings=self._settings_now(), token_limit=self._token_limit(rollout))
        with self._lock:
            self.branches.append(branch)
        return self._teach(branch, rollout, on_frame, cancel)

    def _teach(self, branch: Branch, rollout, on_frame, cancel) -> Branch:
        """Run (or go on with) a teacher-forced branch."""
        if branch.intervention is not None and branch.intervention.whole_frames:
            return self._teach_frames(branch, rollout, on_frame, cancel)

        def forward(index: int, frame: Frame) -> None:
            frames = rollout.frames
            if isinstance(branch.frames, list) and len(branch.frames) >= index and branch.frames is not frames:
                branch.frames[index:] = frames[index:]  # O(1): a forced step replaced the model's frame
            else:
                branch.frames = list(frames)
            if on_frame is not None:
                on_frame(branch, index, frame)

        teacher_force(rollout, self.truth.frames, forward, cancel, forced=branch.forced_steps)
        if rollout.status is RolloutStatus.RUNNING and is_cancelled(cancel):
            rollout.run(cancel=cancel)  # (writes nothing: it marks the rollout cancelled, to resume)
        self._refresh(branch)
        if branch.status is RolloutStatus.RUNNING:  # the truth ended and the model wrote on: it stops here
            branch.status, branch.message = RolloutStatus.ENDED, RAN_ON
            self.compare_branch(branch)
        return branch

    def _teach_frames(self, branch: Branch, rollout, on_frame, cancel) -> Branch:
        """Whole frames forced: the branch's frames are the model's one-step predictions; its
        rollout holds the interpreter's frames they were predicted from (rewound and forced after
        each step, so no mistake carries over). A prediction of end of text where the program
        goes on is kept as a frame the format cannot hold (scored, like a frame teacher forcing
        of actions had to force, as the model's error)."""
        truth = self.truth.frames
        if not branch.frames or not isinstance(branch.frames, list) or branch.frames is rollout.frames:
            branch.frames = list(rollout.frames)  # the entry frame, forced
        status = RolloutStatus.ENDED
        ran_on = False
        while True:
            index = len(branch.frames)
            if is_cancelled(cancel):
                status = RolloutStatus.CANCELLED
                break
            frame = rollout.step(cancel=cancel)
            if frame is None:
                if rollout.status is not RolloutStatus.ENDED:  # budget, context, cancelled, …
                    status = rollout.status
                    break
                if index >= len(truth):  # the model ends where the program did
                    break
                frame = Frame(None, "", error=ENDED_EARLY, raw=tokens.END_OF_TEXT, origin="generated")
            branch.frames.append(frame)
            if on_frame is not None:
                on_frame(branch, index, frame)
            if index >= len(truth):  # it ran on past the program's end: that frame says so
                ran_on = True
                break
            rollout.rewind(index)
            rollout.force(truth[index], origin="forced")
        branch.status = status
        branch.message = (RAN_ON if ran_on else "") if status is RolloutStatus.ENDED else str(rollout.message or status.label)
        branch.tokens = {"trace": int(rollout.tokens_used), "processed": int(rollout.tokens_processed)}
        self.compare_branch(branch)
        return branch

    def resume(self, branch: Branch | str, on_frame: FrameCallback | None = None, cancel=None) -> Branch:
        """Go on with a cancelled branch from where it stopped: the same rollout, its frames kept."""
        self._need_model()
        branch = self.branch(branch) if isinstance(branch, str) else branch
        rollout = branch.rollout
        if branch.status is not RolloutStatus.CANCELLED:
            raise SessionError(f"branch {branch.name!r} was not cancelled: there is nothing to resume")
        if rollout is None:
            raise SessionError(f"branch {branch.name!r} was read from a file: its rollout cannot go on "
                               "(override a step of it to grow a new one)")
        branch.status = RolloutStatus.RUNNING
        branch.message = ""
        if branch.intervention is not None and branch.intervention.teacher_forced:
            if rollout.status is RolloutStatus.CANCELLED:
                rollout.rewind(len(rollout.frames))  # (keeps every frame: the rollout runs again)
            return self._teach(branch, rollout, on_frame, cancel)
        return self._run(branch, rollout, on_frame, cancel)

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
        candidates = [(v.name, v.expected, v.predicted) for v in step.variables if variable is None or v.name == variable]
        if not candidates and variable is not None:
            # a row the comparison does not compare by name (the paths part there): the values
            # as each side has them, so every branch's lens at a step is the same kind of lens
            values = [_value_of(frame, variable) for frame in (step.truth, step.model)]
            if None not in values and values[0] != values[1]:
                candidates = [(variable, values[0], values[1])]
        if not candidates:
            return None
        name, expected, predicted = candidates[0]
        stored = branch.lens
        if stored is not None and stored.get("step") == row and stored.get("variable") == name:
            return stored["lens"]
        pieces = self._pieces()
        if pieces is None:
            return None
        in_locals = name not in ("return", "raise")
        return token_lens(expected, predicted, pieces, in_locals=in_locals)

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

    # -- save and load (the file format: saved.py) ------------------------------------------
    def to_json(self) -> dict:
        self._remember_lenses()
        return session_to_json(self)

    def save(self, path: str) -> None:
        """Write the session to ``path`` atomically (see :func:`saved.save_session`)."""
        self._remember_lenses()
        save_session(self, path)

    @classmethod
    def from_json(cls, data: dict, backend=None) -> "DebugSession":
        return session_from_json(cls, data, backend)

    @classmethod
    def load(cls, path: str, backend=None) -> "DebugSession":
        """Reopen a saved session; without ``backend`` it is read-only (no new branches)."""
        return load_session(cls, path, backend)


def _default_options():
    from ..model.rollout import RolloutOptions

    return RolloutOptions()


def _value_of(frame: Frame | None, name: str) -> str | None:
    """A variable's value in a frame (``return``/``raise``: its value), or None."""
    if frame is None:
        return None
    if name in ("return", "raise"):
        return frame.arg
    return (frame.locals or {}).get(name)
