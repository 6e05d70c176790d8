"""Ground truth: the program run by the real interpreter, recorded as a CWM trace."""

from .program import Program, ProgramError, cruxeval_program, load_program, program_from_source
from .runner import Interpreter, Limits, TraceBuilder, trace_program, version_warning

__all__ = [
    "Program",
    "ProgramError",
    "cruxeval_program",
    "load_program",
    "program_from_source",
    "Interpreter",
    "Limits",
    "TraceBuilder",
    "trace_program",
    "version_warning",
]
