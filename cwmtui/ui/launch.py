"""Opening the app: from a program (live model or replay) or from a saved session file.

Everything that can be checked before the app starts is checked here and raised as a
:class:`LaunchError` (one line, exit 2): the theme, the replay record, a model directory that
does not exist, a session file. Loading weights, reaching a server and running the program
happen inside the app, in workers.
"""

from __future__ import annotations

import dataclasses
import gc
import os

from ..json_lines import DAMAGED_DATA
from ..trace.collector import collector_paused
from .app import CwmApp
from .branch_view import SessionView
from .live import LiveSession, ModelOpener
from .themes import ThemeError, load_theme


class LaunchError(Exception):
    """Bad input found before the app starts, in one line."""


def check_theme(theme: str) -> None:
    try:
        load_theme(theme)
    except ThemeError as exc:
        raise LaunchError(str(exc)) from None


def check_model_directory(path: str) -> None:
    """The transformers backend's own check of a model directory (missing, not a directory, no
    config.json, weights missing), made before the app starts."""
    from ..model import ModelError
    from ..model.hf import check_model_dir
    from ..model.hub import model_directory

    try:
        check_model_dir(model_directory(path))
    except ModelError as exc:
        raise LaunchError(f"--model {exc}") from None


def run_app(app: CwmApp) -> int:
    """Run the app; a fatal error it met (the program cannot be traced) becomes exit code 2.
    The model is closed once the app has ended (its thread workers are joined by then).

    SIGTERM and SIGHUP (a closed terminal, ``kill``) end the app as ``q`` does, so the terminal
    is given back as it was (the alternate screen left, mouse reporting off): exit 128 + N."""
    import signal

    def end(number, _frame) -> None:
        app.exit(return_code=128 + number)

    previous = {}
    for number in (signal.SIGTERM, signal.SIGHUP):
        try:
            previous[number] = signal.signal(number, end)
        except (ValueError, OSError):  # not the main thread (a test), or no such signal
            pass
    try:
        app.run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if app.live is not None:
            app.live.close()
    if app.fatal_message:
        raise LaunchError(app.fatal_message)
    return app.return_code or 0


def open_program(program, open_model, options, limits, *, theme: str, layout: str = "auto",
                 export_dir: str = ".", origin: str = "live", demo=None) -> int:
    """The debugger on a program; ``demo``: a DemoScript it plays (``--demo``)."""
    check_theme(theme)
    live = LiveSession(program, open_model, options, limits, origin=origin)
    app = CwmApp(theme=theme, layout=layout, export_dir=export_dir, opener=live.start, demo=demo_player(demo))
    return run_app(app)


def demo_player(script):
    """The player of a demo script (None: no demo)."""
    if script is None:
        return None
    from .demo import DemoPlayer

    return DemoPlayer(script)


class ReplayTriage:
    """A replay file of many programs: the failure list first, then the debugger on the one picked.

    ``open_id``: a record to open in the debugger at once (``--replay FILE --id ID``); the list
    is still there behind it (``l``)."""

    def __init__(self, path: str, objects: list[tuple[int, dict]], options, limits, tokenizer=None,
                 open_id: str | None = None) -> None:
        from .triage import TriageRow

        self.path = path
        self.objects = dict(objects)
        self.rows = [TriageRow.from_json(line, data) for line, data in objects]
        self.options = options
        self.limits = limits
        self.tokenizer = tokenizer  # an HFTokenizer for token counts, or None (bytes)
        self.open_id = open_id
        self.opened = None  # the TriageRow of the program on screen
        self.app: CwmApp | None = None
        self.list_screen = None  # the TriageScreen

    def row_of(self, ident: str):
        """The row of the record with this id (as ``--id`` names it), or None."""
        return next((row for row in self.rows if row.id == str(ident)), None)

    def start(self, app: CwmApp) -> None:
        from .triage import TriageScreen

        self.app = app
        app.adopt_triage(self)
        row = self.row_of(self.open_id) if self.open_id is not None else None
        self.list_screen = TriageScreen(self.path, self.rows, self.open_row, self.objects, self.limits,
                                        cursor_line=row.line if row is not None else None)
        app.install_screen(self.list_screen, name="triage")
        backend = self.backend_for(row) if row is not None else None
        if backend is None:
            app.push_screen("triage")
        else:
            self.open_in_debugger(row, backend)

    def open_row(self, row) -> None:
        """The list picked a program: the debugger forgets the one it showed and opens this one."""
        backend = self.backend_for(row)
        if backend is None:
            return
        self.app.begin_program()
        self.open_in_debugger(row, backend)

    def backend_for(self, row):
        """The replay backend of the row's record; None (and the user told why) if it has none."""
        from ..model import ModelError
        from ..model.replay import ReplayBackend, record_from

        try:
            record = record_from(self.objects[row.line], f"{self.path}:{row.line}", row.line)
            return ReplayBackend(record, self.tokenizer, source=self.path)
        except ModelError as exc:
            self.app.notify(str(exc), title="cannot open this program", severity="error")
            return None

    def open_in_debugger(self, row, backend) -> None:
        self.opened = row
        record = backend.record
        live = LiveSession(record.program, lambda progress: backend, self.options, self.limits,
                           origin=f"replay {os.path.basename(self.path)}#{record.id}",
                           recorded=self.objects[row.line].get("recovery"))  # (its interventions, --recovery)
        live.start(self.app)

    def branch_finished(self, view, branch) -> None:
        """The app's handler of a branch that stopped: when it is the main rollout of the program
        opened from the list, that program's row takes its class, step and output."""
        from ..evaluation.triage import session_summary

        row = self.opened
        if row is None or self.list_screen is None or view is None or not view.branches or branch is not view.branches[0]:
            return
        if branch.placeholder or branch.running or branch.status.stopped_early or branch.intervention:
            return  # cancelled, or not the model's own rollout: not the record's result
        self.list_screen.session_result(row.line, session_summary(view.truth, branch.frames, branch.status, branch.comparison))


def open_replay_list(path: str, objects, options, limits, *, theme: str, layout: str = "auto",
                     export_dir: str = ".", tokenizer=None, open_id: str | None = None, demo=None) -> int:
    """The failure list of a replay file of many programs; with ``open_id`` (``--id``) that
    program open in the debugger at once, the list behind it (``l``)."""
    check_theme(theme)
    triage = ReplayTriage(path, objects, options, limits, tokenizer, open_id=open_id)
    if open_id is not None:
        from ..model import ModelError
        from ..model.replay import record_from

        row = triage.row_of(open_id)
        if row is None:
            ids = ", ".join(row.id for row in triage.rows[:5]) + (", ..." if len(triage.rows) > 5 else "")
            raise LaunchError(f"{path}: no generation with id {open_id!r} (ids: {ids})")
        try:
            record_from(triage.objects[row.line], f"{path}:{row.line}", row.line)
        except ModelError as exc:
            raise LaunchError(str(exc)) from None
    app = CwmApp(theme=theme, layout=layout, export_dir=export_dir, opener=triage.start, demo=demo_player(demo))
    return run_app(app)


def session_app(path: str, open_model: ModelOpener | None = None, rollout_changes: dict | None = None, *,
                theme: str = "dark", layout: str = "auto", export_dir: str = ".", demo=None) -> CwmApp:
    """The app on a saved session. Without ``open_model`` it is read-only (the saved model's name
    shown); with it the model loads in a worker while the session is on screen, and then
    overrides and teacher forcing grow new branches. ``rollout_changes``: rollout options
    (token budget, temperature, ...) to change from the saved ones for those new branches.
    ``demo``: a DemoScript it plays (``--demo``)."""
    from ..session import DebugSession, SessionError

    check_theme(theme)
    with collector_paused():  # see open_session_file
        try:
            session = DebugSession.load(path)
        except SessionError as exc:
            raise LaunchError(str(exc)) from None
        if rollout_changes and session.options is not None:
            session.options = dataclasses.replace(session.options, **rollout_changes)
        try:
            view = SessionView.from_session(session, origin=f"session {path}")
        except DAMAGED_DATA as exc:
            raise LaunchError(f"{path}: the session file is damaged ({exc.__class__.__name__}: {exc})") from None
    if demo is not None:
        from ..demo_script import DemoScriptError, check_lines
        from ..interpreter.program import display_name

        try:
            check_lines(demo, view.program.source, display_name(view.program.path))
        except DemoScriptError as exc:
            raise LaunchError(f"--demo {exc}") from None
    name = os.path.basename(path)
    if open_model is None:
        return CwmApp(view, theme=theme, layout=layout, export_dir=export_dir, demo=demo_player(demo),
                      no_model_reason=f"{name} was opened without a model (a saved session; cwmtui open {name} --model ... goes on with one)")
    live = LiveSession.resume(session, open_model, origin=f"session {path}")
    return CwmApp(view, theme=theme, layout=layout, export_dir=export_dir, opener=live.start, demo=demo_player(demo),
                  no_model_reason="the model is still loading")


def open_session_file(path: str, open_model: ModelOpener | None = None, rollout_changes: dict | None = None, *,
                      theme: str, layout: str = "auto", export_dir: str = ".", demo=None) -> int:
    app = session_app(path, open_model, rollout_changes, theme=theme, layout=layout, export_dir=export_dir, demo=demo)
    # The session is kept as long as the app runs. Its few hundred thousand containers hold no
    # reference cycles (reference counting frees them); the cyclic collector, scanning them
    # again and again while the app runs, would cost more than reading them did.
    gc.freeze()
    try:
        return run_app(app)
    finally:
        gc.unfreeze()
