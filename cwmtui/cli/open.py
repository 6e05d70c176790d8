"""``cwmtui open SESSION.json``: reopen a saved session in the debugger (offline, no model)."""

from __future__ import annotations

from . import UsageError
from .app import add_ui_options
from .options import Parser


def build_parser() -> Parser:
    parser = Parser(prog="cwmtui open", description="Reopen a session saved with x (or cwmtui diff --save) in the debugger.")
    parser.add_argument("session", help="a session file (.json)")
    add_ui_options(parser)
    return parser


def run(args) -> int:
    from ..ui.launch import LaunchError, open_session_file

    try:
        return open_session_file(args.session, theme=args.theme, layout=args.layout, export_dir=args.export_dir)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None
