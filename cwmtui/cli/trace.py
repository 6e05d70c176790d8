"""``cwmtui trace``: the real interpreter's trace of a program."""

from __future__ import annotations

import json
import sys

from ..interpreter import Interpreter
from ..trace import Status, Trace, render_trace
from .options import Parser, add_limit_options, add_program_options, check_called, limits_from, program_from, warn


def build_parser() -> Parser:
    parser = Parser(prog="cwmtui trace", description="Print the real interpreter's trace of a program.")
    add_program_options(parser)
    parser.add_argument("--format", choices=("cwm", "json", "table"), default="cwm", help="cwm: the exact CWM text; json: one object per frame; table: a readable table")
    add_limit_options(parser)
    return parser


def exit_code(trace: Trace) -> int:
    if trace.status.kind is Status.COMPLETE:
        return 0
    return 1


def run(args) -> int:
    program = program_from(args)
    limits = limits_from(args)
    with Interpreter() as interpreter:
        warn(interpreter.warning)
        trace = interpreter.trace(program, limits)
    check_called(trace, program)
    out = sys.stdout
    if args.format == "cwm":
        whole = trace.status.kind in (Status.COMPLETE, Status.RAISED)
        out.write(render_trace(program.source, trace.frames, end=whole))
        if out.isatty():  # piped, the text is exactly the document (it parses back as is)
            out.write("\n")
    elif args.format == "json":
        for step, frame in enumerate(trace.frames):
            out.write(json.dumps({
                "step": step,
                "event": frame.event.value,
                "action": frame.action,
                "lineno": frame.lineno,
                "function": frame.function,
                "depth": frame.depth,
                "locals": frame.locals,
                "arg": frame.arg,
            }) + "\n")
        out.write(json.dumps({**trace.status.to_json(), "frames": len(trace.frames), "stdout": trace.stdout, "stderr": trace.stderr}) + "\n")
    else:
        from ..tables import trace_table  # rich, imported only for the table

        from rich.console import Console

        console = Console()
        console.print(trace_table(trace))
    if not trace.status.ok:
        print(f"cwmtui: trace {trace.status.describe()}", file=sys.stderr)
    return exit_code(trace)
