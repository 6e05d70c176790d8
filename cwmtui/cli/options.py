"""Options shared by several verbs."""

from __future__ import annotations

import argparse
import math
import os
import sys

from ..interpreter import Limits, Program, ProgramError, load_program
from ..terminal import printable
from ..trace import Status, Trace
from . import UsageError


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line with exit code 2 (``hint``, when set, is
    added to that line)."""

    hint = ""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}{self.hint}\n")


def add_program_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", help="the Python file to trace")
    parser.add_argument("--entry", metavar="NAME", help="the function to trace (default: the one marked '# << START_OF_TRACE')")
    parser.add_argument("--call", metavar="EXPR", help="expression to evaluate after the module ran, e.g. \"f('r')\"")


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    default = Limits()
    parser.add_argument("--max-frames", type=int, default=default.frames, metavar="N", help=f"stop after N frames (default {default.frames})")
    parser.add_argument("--timeout", type=float, default=default.seconds, metavar="S", help=f"stop after S seconds (default {default.seconds:g})")
    parser.add_argument("--memory", type=int, default=default.memory >> 20, metavar="MiB", help=f"memory limit in MiB (default {default.memory >> 20})")
    parser.add_argument("--max-output", type=int, default=default.output, metavar="CHARS", help="output limit in characters (default 1 MiB)")
    add_sandbox_option(parser)


def add_sandbox_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false", help="run programs without the sandbox (bubblewrap: read-only files but a scratch /tmp, no network, nothing left running); they then run with your permissions")


def limits_from(args: argparse.Namespace) -> Limits:
    # NaN compares false with everything and infinity never passes: either would switch the time
    # limit (and the parent's hard deadline) off, so a looping program would never stop.
    if args.max_frames < 1 or not (0 < args.timeout < math.inf) or args.memory < 16 or args.max_output < 0:
        raise UsageError("limits must be positive (--max-frames ≥ 1, --timeout > 0 and finite, --memory ≥ 16, --max-output ≥ 0)")
    return Limits(frames=args.max_frames, seconds=args.timeout, memory=args.memory << 20, output=args.max_output,
                  sandbox=getattr(args, "sandbox", True))


def program_from(args: argparse.Namespace) -> Program:
    try:
        return load_program(args.program, entry=args.entry, call=args.call)
    except ProgramError as exc:
        raise UsageError(str(exc)) from None


def check_output(path: str, option: str, inputs=()) -> None:
    """Before any work: a file the run will write (``option PATH``) must be writable there and
    must not be one of the run's ``inputs`` (paths), which writing it would destroy."""
    if not path:
        raise UsageError(f"{option}: give a file name")
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no such directory {folder}")
    for source in inputs:
        if source and os.path.exists(path) and os.path.exists(source) and os.path.samefile(path, source):
            raise UsageError(f"{option} {path}: that is an input of this run; writing it would destroy it")


def check_called(trace: Trace, program: Program) -> None:
    """The entry never ran: that is an input error, explained in one line."""
    if trace.status.kind is Status.NOT_CALLED:
        raise UsageError(
            f"{program.path}: the entry {program.entry}() was never called; "
            f"pass --call \"{program.entry}(...)\" to call it"
        )
    if trace.status.kind is Status.ERROR:
        raise UsageError(f"{program.path}: {trace.status.message}")


def warn_sandbox(limits: Limits) -> None:
    """The one line when a sandbox was asked for and cannot be had (the programs still run)."""
    from ..interpreter.runner import sandbox_warning

    warn(sandbox_warning(limits))


def warn(message: str | None) -> None:
    if message:
        print(printable(message), file=sys.stderr)
