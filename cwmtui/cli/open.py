"""``cwmtui open SESSION.json [--model ...]``: reopen a saved session in the debugger.

Without a model it is read-only: the session as it was saved, with the saved model's name.
With the model options of ``cwmtui PROGRAM`` (``--model``, ``--server``, ``--replay``) the model
loads while the session is on screen, and overrides and teacher forcing grow new branches;
the rollout options (``--token-budget``, ``--temperature``, ...) change the saved ones for them.
``--demo [FILE]`` plays a demo script over it (without FILE, ``SESSION.demo.toml``): a saved
session is a demo that needs no model and runs the same every time.
"""

from __future__ import annotations

from . import UsageError
from .app import add_demo_option, add_ui_options, check_model, check_ui_options, demo_from
from .options import Parser

#: rollout options that, when given, change the session's saved ones
ROLLOUT_OPTIONS = ("token_budget", "frame_tokens", "temperature", "top_p", "seed")


def build_parser() -> Parser:
    from .model_options import add_model_options

    parser = Parser(prog="cwmtui open", description="Reopen a session saved with x (or cwmtui diff --save) in the debugger; "
                    "with --model or --server, go on overriding with that model (read-only without one).")
    parser.add_argument("session", help="a session file (.json)")
    add_model_options(parser, bundled_by_default=False)
    parser.set_defaults(model=None, **{name: None for name in ROLLOUT_OPTIONS})  # None: the session's own
    add_ui_options(parser)
    add_demo_option(parser, "the SESSION's own (talk.demo.toml beside talk.json)")
    return parser


def run(args) -> int:
    from ..model import ModelError
    from .model_options import backend_from_args
    from ..ui.launch import LaunchError, open_session_file

    changes = {name: getattr(args, name) for name in ROLLOUT_OPTIONS if getattr(args, name) is not None}
    chosen = [name for name, value in (("--model", args.model), ("--server", args.server), ("--replay", args.replay)) if value]
    check_ui_options(args)
    try:
        open_model = None
        if args.replay_id is not None and not args.replay:
            raise UsageError("--id selects a record of --replay FILE; there is no --replay")
        if chosen:
            if len(chosen) > 1:
                raise UsageError(f"{' and '.join(chosen)} cannot be used together: pick one world model")
            if args.replay:  # a replay file is read now (no weights to load): a bad one stops here
                try:
                    backend = backend_from_args(args)
                except ModelError as exc:
                    raise UsageError(str(exc)) from None
                open_model = lambda progress: backend  # noqa: E731
            else:
                check_model(args)
                open_model = lambda progress: backend_from_args(args, progress)  # noqa: E731 - loads in the app
        elif changes:
            given = "--" + next(iter(changes)).replace("_", "-")
            raise UsageError(f"{given} is for new branches, which need a model: add --model PATH|bundled or --server URL")
        demo = demo_from(args, args.session)
        return open_session_file(args.session, open_model, changes, theme=args.theme, layout=args.layout,
                                 export_dir=args.export_dir, demo=demo)
    except LaunchError as exc:
        raise UsageError(str(exc)) from None
