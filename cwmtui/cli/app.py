"""``cwmtui PROGRAM`` (and ``cwmtui --replay FILE --id ID``): open the trace debugger."""

from __future__ import annotations

import os
import tempfile
from typing import Callable

from . import UsageError
from .options import Parser, add_limit_options, limits_from, program_from


def build_parser(parser: Parser | None = None) -> Parser:
    """The debugger's options (on ``parser``, for a verb that takes them all: ``serve``)."""
    from .model_options import add_model_options

    if parser is None:
        parser = Parser(prog="cwmtui", description="Open the trace debugger: the real interpreter and a code world model side by side.")
    parser.add_argument("program", nargs="?", help="the Python file to trace (not with --replay: a replay record brings its program)")
    parser.add_argument("--entry", metavar="NAME", help="the function to trace (default: the one marked '# << START_OF_TRACE')")
    parser.add_argument("--call", metavar="EXPR", help="expression to evaluate after the module ran, e.g. \"f('r')\"")
    add_model_options(parser)
    add_ui_options(parser)
    add_demo_option(parser, "the PROGRAM's own (samples/strings.demo.toml beside samples/strings.py)")
    add_limit_options(parser)
    return parser


def add_demo_option(parser, beside: str) -> None:
    parser.add_argument_group("demo").add_argument(
        "--demo", nargs="?", const="", metavar="FILE",
        help=f"play a demo script (TOML: captioned steps; space pauses, → goes on); without FILE, {beside}")


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
    from ..ui.launch import LaunchError

    launch = prepare(args)
    try:
        return launch()
    except LaunchError as exc:
        raise UsageError(str(exc)) from None


def prepare(args) -> Callable[[], int]:
    """Check everything that can be checked before the app starts (raising UsageError in one
    line), and give what opens the debugger. ``cwmtui serve`` checks with it, then serves."""
    from ..model import ModelError
    from .model_options import backend_from_args, rollout_options_from_args
    from ..ui.launch import LaunchError, open_program, open_replay_list

    check_ui_options(args)
    limits = limits_from(args)
    options = rollout_options_from_args(args)
    display = dict(theme=args.theme, layout=args.layout, export_dir=args.export_dir)
    try:
        if args.replay:
            if args.program:
                raise UsageError("--replay brings its own program: drop PROGRAM (or drop --replay)")
            many = replay_list(args)  # a file of many programs: the list, behind --id's program
            if many is not None:
                if args.demo is not None and args.replay_id is None:
                    raise UsageError(f"--demo plays one program: add --id ID to pick one of {args.replay}")
                demo = demo_from(args, args.replay)
                objects, tokenizer = many
                return lambda: open_replay_list(args.replay, objects, options, limits, **display, tokenizer=tokenizer,
                                                open_id=args.replay_id, demo=demo)
            try:
                backend = backend_from_args(args)
            except ModelError as exc:
                raise UsageError(str(exc)) from None
            demo = demo_from(args, args.replay, backend.program)
            return lambda: open_program(backend.program, lambda progress: backend, options, limits, **display,
                                        origin=f"replay {os.path.basename(args.replay)}#{backend.record.id}", demo=demo)
        if not args.program:
            hint = ""
            if args.demo and args.demo.endswith(".py"):
                hint = f" ({args.demo} was taken as --demo's script: write PROGRAM first, cwmtui {args.demo} --demo)"
            raise UsageError(f"no program: cwmtui PROGRAM [options] (or --replay FILE.jsonl --id ID){hint}")
        program = program_from(args)
        check_model(args)
        demo = demo_from(args, args.program, program)
        return lambda: open_program(program, lambda progress: backend_from_args(args, progress), options, limits,
                                    **display, demo=demo)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None


def demo_from(args, beside: str, program=None):
    """The demo script of ``--demo`` (read and checked), or None: ``--demo FILE``, or with no
    FILE the one beside ``beside`` (the program, or the replay file). ``program``: the
    program it plays over, when known here: the lines its overrides name are checked too."""
    if args.demo is None:
        return None
    from ..demo_script import DemoScriptError, read_demo, script_beside

    path = args.demo
    if not path:
        path = script_beside(beside)
        if not os.path.exists(path):
            raise UsageError(f"--demo: no demo script beside {beside} (looked for {path}); pass --demo FILE")
    try:
        script = read_demo(path)
        if program is not None:
            check_demo_lines(script, program)
        return script
    except DemoScriptError as exc:
        raise UsageError(f"--demo {exc}") from None


def check_demo_lines(script, program) -> None:
    """The lines ``script``'s overrides name are lines of ``program`` the model can be given."""
    from ..demo_script import check_lines
    from ..interpreter.program import display_name

    check_lines(script, program.source, display_name(program.path))


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
