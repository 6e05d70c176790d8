"""A live session: the engine's long work run in worker threads, reported to the app as messages.

The worker records the truth, opens the world model, runs the main rollout, and later the
overrides and the teacher-forced rollout the user asks for. It never touches a widget, the app
or the screen: it posts :mod:`messages <cwmtui.ui.messages>` to the debugger screen, whose
handlers own the state. While a branch grows, the worker compares it with the truth itself and
posts its newer :class:`~cwmtui.session.BranchState` a few times a second (more rarely when
comparing takes longer), never once per frame. Each job has a cancel event that ``esc`` sets.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..interpreter import Limits, Program
from ..trace import Frame, Status
from .app import CwmApp
from .branch_view import BranchView, SessionView
from .messages import (
    Activity,
    BranchFinished,
    BranchStarted,
    BranchUpdated,
    ModelState,
    Notice,
    SessionReady,
    WorkDone,
    WorkFailed,
    WorkStarted,
)

#: seconds between a running branch's states on screen (at least; more when comparing is slow)
UPDATE_EVERY = 0.1

#: open_model(progress) -> Backend; progress(stage, fraction or None)
ModelOpener = Callable[[Callable[[str, "float | None"], None]], object]


class LiveSession:
    """Drives a :class:`~cwmtui.session.DebugSession` for the app (see the module docstring)."""

    def __init__(self, program: Program, open_model: ModelOpener | None, options=None,
                 limits: Limits | None = None, origin: str = "live", recorded: dict | None = None) -> None:
        self.program = program
        self.recorded = recorded  # a results record's recorded interventions (--recovery): shown as branches
        self.open_model = open_model
        self.options = options
        self.limits = limits or Limits()
        self.origin = origin
        self.app: CwmApp | None = None
        self.session = None  # the DebugSession, once the truth is recorded
        self.view: SessionView | None = None
        self._views: dict[int, BranchView] = {}  # id(engine branch) -> its view (worker side)
        self._next_update: dict[int, float] = {}  # id(running engine branch) -> when its next state is due
        self._deferred: dict[int, threading.Timer] = {}  # a state that was not due yet, posted when it is
        self._lock = threading.Lock()
        self._cancel: threading.Event | None = None
        self._jobs: list[threading.Event] = []  # every job's cancel event (quitting sets them all)
        self._one_at_a_time = threading.Lock()  # a job waits for the one it cancelled to stop

    @classmethod
    def resume(cls, session, open_model: ModelOpener, origin: str = "") -> "LiveSession":
        """A session read back from a file, to go on with a model (overrides, teacher forcing)."""
        live = cls(session.program, open_model, session.options, session.limits, origin=origin)
        live.session = session
        return live

    # -- plumbing -----------------------------------------------------------------------------
    def start(self, app: CwmApp) -> None:
        """The app's opener: called once the app is mounted."""
        self.app = app
        app.adopt_live(self)
        if self.session is not None:
            self._job(self._resume, "open the model")
        else:
            self._job(self._open, "open")

    def _post(self, message) -> None:
        app = self.app
        if app is not None and app.is_running and app.live is self:  # not a program closed since
            app.screen_stack[0].post_message(message)

    def _job(self, work: Callable[[threading.Event], None], name: str) -> None:
        cancel = threading.Event()
        self._cancel = cancel
        self._jobs.append(cancel)
        self._post(WorkStarted(cancel.set))

        def run() -> None:
            try:
                with self._one_at_a_time:  # the model runs one rollout at a time
                    work(cancel)
            except Exception as exc:  # noqa: BLE001 - a worker failing is shown, never a crash
                self._post(WorkFailed(f"{name} failed", _one_line(exc), fatal=self.view is None))
            finally:
                self._post(WorkDone(cancel.set))

        self.app.run_worker(run, thread=True, exclusive=False, group="model", name=name)

    def cancel_all(self) -> None:
        """Stop every running job (the app is closing: a worker thread must not keep it open)."""
        for cancel in self._jobs:
            cancel.set()
        backend = getattr(self.session, "backend", None)
        if backend is not None:
            backend.interrupt()  # a call blocked on the network returns now

    def close(self) -> None:
        """The app has ended and its workers with it: free the model (a server connection, the
        weights' memory). Called by :func:`~cwmtui.ui.launch.run_app` once ``app.run()`` returns,
        never while a worker may still be generating."""
        self.cancel_all()
        backend = getattr(self.session, "backend", None)
        if backend is not None:
            self.session.backend = None
            backend.close()

    def _on_frame(self, branch, index: int, frame: Frame) -> None:
        """The engine's frame callback (worker thread): a new branch is announced; a running
        one's state is compared and posted when it is due (see UPDATE_EVERY)."""
        key = id(branch)
        view = self._views.get(key)
        if view is None:
            view = BranchView(self.session.truth, self.session.branch_state(branch), running=True)
            self._views[key] = view
            self._post(BranchStarted(view))
            self._post(Activity(self._writing(branch.name, index + 1)))
            self._next_update[key] = time.monotonic() + UPDATE_EVERY
            return
        wait = self._next_update.get(key, 0.0) - time.monotonic()
        if wait > 0:  # not due: the newest state goes out when it is (the model may stall here)
            with self._lock:
                if key not in self._deferred:
                    timer = threading.Timer(wait, self._post_state, (branch, view))
                    timer.daemon = True
                    self._deferred[key] = timer
                    timer.start()
            return
        self._post_state(branch, view)

    def _post_state(self, branch, view: BranchView) -> None:
        """Compare a running branch (in this worker or timer thread) and post its state."""
        key = id(branch)
        with self._lock:
            timer = self._deferred.pop(key, None)
            if timer is not None and timer is not threading.current_thread():
                timer.cancel()
            if key not in self._next_update:  # finished meanwhile: its last state is on its way
                return
            began = time.monotonic()
        state = self.session.branch_state(branch)  # a copy, compared here: never on the UI thread
        took = time.monotonic() - began
        with self._lock:
            if key not in self._next_update:
                return
            self._next_update[key] = time.monotonic() + max(UPDATE_EVERY, 4 * took)
        self._post(BranchUpdated(view, state))
        self._post(Activity(self._writing(branch.name, len(state.frames))))

    def _writing(self, name: str, written: int) -> str:
        """The status bar's line while a branch grows."""
        total = len(self.session.truth.frames)
        return (f"{name}: model writing step {written - 1} ({_bar(written, total)} of the "
                f"interpreter's {total}) · esc cancels")

    def _finished(self, branch, select: bool = True) -> None:
        key = id(branch)
        with self._lock:
            self._next_update.pop(key, None)
            timer = self._deferred.pop(key, None)
            if timer is not None:
                timer.cancel()
        state = self.session.branch_state(branch)
        view = self._views.get(key)
        if view is None:
            view = BranchView(self.session.truth, state, running=True)
            self._views[key] = view
            self._post(BranchStarted(view, select=select))
        self._post(BranchFinished(view, state))

    # -- jobs ---------------------------------------------------------------------------------
    def _open(self, cancel: threading.Event) -> None:
        from ..session import DebugSession

        opening = self._start_opening()  # the model loads while the truth is recorded
        self._post(Activity("recording the program under the interpreter…"))
        session = DebugSession(self.program, None, self.options, self.limits)
        from ..interpreter.runner import sandbox_warning

        unsafe = sandbox_warning(self.limits)
        if unsafe:
            self._post(Notice("sandbox", unsafe))
        truth = session.run_truth()
        if truth.status.kind in (Status.NOT_CALLED, Status.ERROR) or not truth.frames:
            message = truth.status.message or truth.status.describe()
            if truth.status.kind is Status.NOT_CALLED:
                message = (f"the entry {self.program.entry}() was never called; "
                           f"pass --call \"{self.program.entry}(...)\" to call it")
            self._post(WorkFailed("the program cannot be traced", f"{self.program.path}: {message}", fatal=True))
            return
        self.session = session
        if self.open_model is not None:
            self._post(SessionReady(self._view(session, "loading the model…")))
        if not self._attach_model(session, opening):
            return
        self._post(SessionReady(self._view(session, "the model is starting…")))
        if cancel.is_set():
            return
        self._post(Activity("model writing… · esc cancels"))
        branch = session.run_main(on_frame=self._on_frame, cancel=cancel)
        self._finished(branch)
        if self.recorded and not cancel.is_set():
            from ..evaluation.recovery_run import recorded_branches

            for grown in recorded_branches(session, self.recorded):
                self._finished(grown, select=False)  # main stays on screen; [ and ] show them

    def _resume(self, cancel: threading.Event) -> None:
        """A session read back from a file, on screen already: open the model to grow it."""
        session = self.session
        if not self._attach_model(session):
            return
        self._post(SessionReady(self._view(session, "" if session.branches else "the model is starting…")))
        if session.branches or cancel.is_set():
            return
        self._post(Activity("model writing… · esc cancels"))  # saved without a model: the main rollout first
        branch = session.run_main(on_frame=self._on_frame, cancel=cancel)
        self._finished(branch)

    def _start_opening(self):
        """Start opening the model in a thread of its own; (thread, result) or None."""
        if self.open_model is None:
            return None
        result: dict = {}

        def run() -> None:
            try:
                result["backend"] = self.open_model(self._progress)
            except Exception as exc:  # noqa: BLE001 - handed to _attach_model
                result["error"] = exc

        thread = threading.Thread(target=run, name="cwmtui-open-model", daemon=True)
        thread.start()
        return thread, result

    def _attach_model(self, session, opening=None) -> bool:
        """Open the model (or take the one ``opening`` started) and give it to the session;
        False (the reason shown) when there is none."""
        reason = "no model was given"
        backend = None
        if self.open_model is not None:
            self._post(Activity("loading the model…"))
            try:
                if opening is None:
                    backend = self.open_model(self._progress)
                else:
                    thread, result = opening
                    thread.join()
                    if "error" in result:
                        raise result["error"]
                    backend = result["backend"]
            except Exception as exc:  # noqa: BLE001 - ModelError and anything a loader raises
                reason = _one_line(exc)
                self._post(WorkFailed("no model", reason))
        if backend is None:
            self._post(ModelState(reason))
            self._post(SessionReady(self._view(session, f"no model: {reason}")))
            self._post(Activity(""))
            return False
        session.backend = backend
        if getattr(backend, "warning", None):
            self._post(Notice("the model", backend.warning))
        if not getattr(backend, "can_generate", True):
            from ..model.backend import REPLAY_OVERRIDE

            self._post(ModelState(REPLAY_OVERRIDE, replay=True))
        else:
            self._post(ModelState())
        session.model_name = getattr(backend, "name", "")
        session.model_description = getattr(backend, "description", "")
        return True

    def _view(self, session, waiting: str) -> SessionView:
        view = SessionView.from_session(session, origin=self.origin, waiting=f"({waiting})" if waiting else "")
        if waiting and not view.model_description:
            view.model_description = waiting
        self.view = view
        return view

    def _progress(self, stage: str, fraction: float | None) -> None:
        text = f"loading the model: {stage}"
        if fraction is not None:
            text += f" {_bar(fraction * 100, 100)}"
        self._post(Activity(text))

    def override(self, branch: BranchView, step: int, *, action: str | None = None,
                 locals_: dict | None = None, label: str = "") -> None:
        source = branch.source
        if self.session is None or source is None:
            return

        index = branch.model_index_at(step)  # the row on screen -> the model's frame

        def work(cancel: threading.Event) -> None:
            if cancel.is_set():  # cancelled (or the app closed) while it waited for its turn
                return
            self._post(Activity(f"override at step {step} ({label}): model writing… · esc cancels"))
            child = self.session.override(source, index, action=action, locals=locals_,
                                          on_frame=self._on_frame, cancel=cancel)
            self._finished(child)

        self._job(work, "override")

    def resume_branch(self, branch: BranchView) -> None:
        """Go on with a cancelled branch (the same view: it runs again)."""
        source = branch.source
        if self.session is None or source is None:
            return

        def work(cancel: threading.Event) -> None:
            if cancel.is_set():  # cancelled (or the app closed) while it waited for its turn
                return
            self._post(BranchStarted(branch, select=True))  # (its handler marks the view running again)
            self._post(Activity(f"{branch.name}: resuming… · esc cancels"))
            with self._lock:
                self._next_update[id(source)] = time.monotonic() + UPDATE_EVERY
            try:
                self.session.resume(source, on_frame=self._on_frame, cancel=cancel)
            finally:  # failed or not, the view gets the branch's state: never "still writing" for ever
                self._finished(source)

        self._job(work, "resume")

    def teacher_forced(self, whole_frames: bool = False) -> None:
        if self.session is None:
            return
        what = "teacher-forced rollout of whole frames" if whole_frames else "teacher-forced rollout"

        def work(cancel: threading.Event) -> None:
            if cancel.is_set():  # cancelled (or the app closed) while it waited for its turn
                return
            self._post(Activity(f"{what}: model writing… · esc cancels"))
            branch = self.session.teacher_forced(on_frame=self._on_frame, cancel=cancel, whole_frames=whole_frames)
            self._finished(branch)

        self._job(work, what)


def _bar(done: float, total: float, width: int = 8) -> str:
    if total <= 0:
        return ""
    filled = max(0, min(width, round(width * done / total)))
    return "▮" * filled + "▯" * (width - filled)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
