"""``cwmtui PROGRAM`` (and ``cwmtui --replay FILE --id ID``): open the trace debugger."""

from __future__ import annotations

import os
import tempfile

from . import UsageError
from .options import Parser, add_limit_options, limits_from, program_from


def build_parser() -> Parser:
    from .model_options import add_model_options

    parser = Parser(prog="cwmtui", description="Open the trace debugger: the real interpreter and a code world model side by side.")
    parser.add_argument("program", nargs="?", help="the Python file to trace (not with --replay: a replay record brings its program)")
    parser.add_argument("--entry", metavar="NAME", help="the function to trace (default: the one marked '# << START_OF_TRACE')")
    parser.add_argument("--call", metavar="EXPR", help="expression to evaluate after the module ran, e.g. \"f('r')\"")
    add_model_options(parser)
    add_ui_options(parser)
    add_limit_options(parser)
    return parser


def add_ui_options(parser) -> None:
    group = parser.add_argument_group("display")
    group.add_argument("--theme", default="dark", metavar="NAME|PATH", help="dark (default), light, high-contrast, or a .tcss file")
    group.add_argument("--layout", choices=("auto", "columns", "stacked"), default="auto", help="source pane in its own column, or below the timelines (default: by terminal width)")
    group.add_argument("--export-dir", metavar="DIR", help="where x saves the session JSON and SVG (default: the current directory)")


def check_ui_options(args) -> None:
    """Before the app starts: the theme loads, and x will be able to save into a given --export-dir
    (a missing folder is made then, so the nearest folder that exists must be a writable one).
    Without it, x saves into the current directory, and says so if it cannot."""
    from ..ui.launch import LaunchError, check_theme

    try:
        check_theme(args.theme)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None
    path = args.export_dir
    if path is None:
        args.export_dir = "."
        return
    if not path:
        raise UsageError("--export-dir: give a directory")
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UsageError(f"--export-dir {path}: is a file, not a directory")
    existing = os.path.abspath(path)
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UsageError(f"--export-dir {path}: cannot make it ({existing} is not a directory)")
    why = _why_not_writable(existing)
    if why:
        raise UsageError(f"--export-dir {path}: cannot make or write it ({existing} is not a writable directory: {why})")


def _why_not_writable(directory: str) -> str | None:
    """Why no file can be made in ``directory`` (None: one can). Tried, not asked of
    ``os.access``, which says yes to root for folders no one can write (``/proc``) and does not
    know read-only mounts or a full disk."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()


def run(args) -> int:
    from ..model import ModelError
    from .model_options import backend_from_args, rollout_options_from_args
    from ..ui.launch import LaunchError, open_program, open_replay_list

    check_ui_options(args)
    limits = limits_from(args)
    options = rollout_options_from_args(args)
    try:
        if args.replay:
            if args.program:
                raise UsageError("--replay brings its own program: drop PROGRAM (or drop --replay)")
            many = replay_list(args)  # a file of many programs: the list, behind --id's program
            if many is not None:
                objects, tokenizer = many
                return open_replay_list(args.replay, objects, options, limits, theme=args.theme,
                                        layout=args.layout, export_dir=args.export_dir, tokenizer=tokenizer,
                                        open_id=args.replay_id)
            try:
                backend = backend_from_args(args)
            except ModelError as exc:
                raise UsageError(str(exc)) from None
            program = backend.program
            return open_program(program, lambda progress: backend, options, limits, theme=args.theme,
                                layout=args.layout, export_dir=args.export_dir,
                                origin=f"replay {os.path.basename(args.replay)}#{backend.record.id}")
        if not args.program:
            raise UsageError("no program: cwmtui PROGRAM [options] (or --replay FILE.jsonl --id ID)")
        program = program_from(args)
        check_model(args)
        return open_program(program, lambda progress: backend_from_args(args, progress), options, limits,
                            theme=args.theme, layout=args.layout, export_dir=args.export_dir)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None


def check_model(args) -> None:
    """What can be known about --model / --server before the app starts (the model itself loads
    in the app); raises LaunchError or UsageError in one line."""
    from ..model import bundled_problem
    from ..ui.launch import check_model_directory

    for option, value in (("--api-key", args.api_key), ("--served-model", args.served_model)):
        if value is not None and not args.server:
            raise UsageError(f"{option} is for --server URL; there is no --server")
    if args.model not in (None, "bundled"):
        check_model_directory(args.model)
    elif args.server:
        from ..model import ModelError
        from ..model.replicas import check_servers

        try:
            check_servers([args.server] if isinstance(args.server, str) else args.server, getattr(args, "server_kind", "vllm"))
        except ModelError as exc:
            raise UsageError(str(exc)) from None
    else:
        problem = bundled_problem()
        if problem:
            raise UsageError(f"the bundled model is not installed ({problem}); pass --model PATH, --server URL or --replay FILE")


def replay_list(args):
    """A replay file of several programs (and no --id): its records for the failure list, and the
    tokenizer for token counts; None when it holds one program (opened directly)."""
    from ..model import ModelError
    from ..model.replay import read_replay
    from ..model.tokenizer import load_any_tokenizer

    chosen = [name for name, value in (("--model", args.model), ("--server", args.server)) if value]
    if chosen:
        raise UsageError(f"--replay and {chosen[0]} cannot be used together: pick one world model")
    try:
        objects = read_replay(args.replay)
        if len(objects) < 2:
            return None
        tokenizer = load_any_tokenizer(args.tokenizer) if args.tokenizer else None
    except ModelError as exc:
        raise UsageError(str(exc)) from None
    return objects, tokenizer
