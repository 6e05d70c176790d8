"""Opening the app: from a program (live model or replay) or from a saved session file.

Everything that can be checked before the app starts is checked here and raised as a
:class:`LaunchError` (one line, exit 2): the theme, the replay record, a model directory that
does not exist, a session file. Loading weights, reaching a server and running the program
happen inside the app, in workers.
"""

from __future__ import annotations

import os

from .app import CwmApp
from .branch_view import SessionView
from .live import LiveSession
from .themes import ThemeError, load_theme


class LaunchError(Exception):
    """Bad input found before the app starts, in one line."""


def check_theme(theme: str) -> None:
    try:
        load_theme(theme)
    except ThemeError as exc:
        raise LaunchError(str(exc)) from None


def check_model_directory(path: str) -> None:
    if not os.path.isdir(path):
        raise LaunchError(f"--model {path}: no such directory (a Hugging Face model directory, or 'bundled')")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise LaunchError(f"--model {path}: no config.json there (not a Hugging Face model directory)")


def run_app(app: CwmApp) -> int:
    """Run the app; a fatal error it met (the program cannot be traced) becomes exit code 2."""
    app.run()
    if app.fatal_message:
        raise LaunchError(app.fatal_message)
    return app.return_code or 0


def open_program(program, open_model, options, limits, *, theme: str, layout: str = "auto",
                 export_dir: str = ".", origin: str = "live") -> int:
    check_theme(theme)
    live = LiveSession(program, open_model, options, limits, origin=origin)
    app = CwmApp(theme=theme, layout=layout, export_dir=export_dir, opener=live.start)
    return run_app(app)


def open_session_file(path: str, *, theme: str, layout: str = "auto", export_dir: str = ".") -> int:
    from ..session import DebugSession, SessionError

    check_theme(theme)
    try:
        session = DebugSession.load(path)
    except SessionError as exc:
        raise LaunchError(str(exc)) from None
    view = SessionView.from_session(session, origin=f"session {path}")
    app = CwmApp(view, theme=theme, layout=layout, export_dir=export_dir,
                 no_model_reason=f"{os.path.basename(path)} was opened without a model (a saved session)")
    return run_app(app)
