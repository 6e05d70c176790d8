"""``cwmtui trace``: the real interpreter's trace of a program."""

from __future__ import annotations

import json
import sys

from ..interpreter import Interpreter
from ..terminal import printable, printable_block
from ..trace import Status, Trace, render_trace
from .options import Parser, add_limit_options, add_program_options, check_called, limits_from, program_from, warn, warn_sandbox


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
        warn_sandbox(limits)
        trace = interpreter.trace(program, limits)
    check_called(trace, program)
    out = sys.stdout
    terminal = out.isatty()
    if args.format == "cwm":
        whole = trace.status.kind in (Status.COMPLETE, Status.RAISED)
        text = render_trace(program.source, trace.frames, end=whole)
        # piped, the text is exactly the document (it parses back as is); on a terminal the
        # program's own characters are shown, never obeyed
        out.write(printable_block(text) + "\n" if terminal else text)
    elif args.format == "json":
        # ASCII JSON: a C1 control or a bidi override in a value is an escape, on a terminal or not
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
        from .console import TerminalConsole

        TerminalConsole().print(trace_table(trace))
    if not trace.status.ok:
        print(printable(f"cwmtui: trace {trace.status.describe()}"), file=sys.stderr)
    return exit_code(trace)
