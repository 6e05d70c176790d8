"""The command line: ``cwmtui PROGRAM`` opens the debugger; verbs run the same engine headless."""

from __future__ import annotations

import os
import sys
from importlib import import_module

#: verb -> module under cwmtui.cli that defines ``build_parser()`` and ``run(args)``
VERBS = {
    "diff": "diff",
    "app": "app",
    "eval": "eval",
    "open": "open",
    "serve": "serve",
    "trace": "trace",
    "train": "train",
}

USAGE = """usage: cwmtui PROGRAM [options]      open the trace debugger on PROGRAM
       cwmtui --replay FILE.jsonl --id ID   open a recorded generation in the debugger
       cwmtui VERB [options]         run a headless verb
       cwmtui --version              print the version

verbs:
  diff      compare the interpreter's trace with a world model's, step by step (table or --json)
  eval      run a model over a benchmark suite and print the paper's tables (--out RESULTS.jsonl for triage)
  open      reopen a saved session (SESSION.json) in the debugger
  serve     serve the debugger to a browser: cwmtui serve PROGRAM [options] (the serve extra)
  trace     print the real interpreter's trace of a program (CWM text, JSON or a table)
  train     train the bundled byte-level CWM (checkpoints, --resume, --export)

Run 'cwmtui PROGRAM --help' for the debugger's options, 'cwmtui VERB --help' for a verb's."""


class UsageError(Exception):
    """Bad input; printed as one line, exit code 2."""


def fail(message: str, code: int = 2) -> int:
    from ..terminal import printable  # a file name, a server's error body: data, never obeyed

    print(f"cwmtui: error: {printable(message)}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        from .. import __version__

        print(f"cwmtui {__version__}")
        return 0
    verb = argv[0] if argv[0] in VERBS else None
    module_name = VERBS[verb] if verb else VERBS.get("app")
    if module_name is None:
        return fail(f"unknown verb or program {argv[0]!r}; see 'cwmtui --help'")
    module = import_module(f"cwmtui.cli.{module_name}")
    parser = module.build_parser()
    if verb and os.path.isfile(verb):  # `cwmtui diff` with a program file named diff here
        parser.hint = f" (the verb {verb!r} was run; to open the file {verb!r}, write ./{verb})"
    args = parser.parse_args(argv[1:] if verb else argv)
    try:
        return module.run(args)
    except KeyboardInterrupt:
        print("cwmtui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `cwmtui trace p.py | head`: the reader has gone, stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141  # as a shell reports a process killed by SIGPIPE
    except UsageError as exc:
        return fail(f"{exc}{parser.hint}")
    except OSError as exc:  # the output cannot be written (a full disk, a closed terminal)
        try:
            sys.stdout.flush()
        except OSError:
            pass
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        if exc.filename:
            return fail(f"{exc.filename}: {exc.strerror or exc}")
        return fail(f"cannot write the output: {exc.strerror or exc}")


def entry() -> None:
    sys.exit(main())
