"""The outcome of a run: what the entry returned (or raised), and whether two outcomes agree.

Values are reprs. Two reprs agree when both read as Python literals and the literals are equal
(the CRUXEval scorer's ``assert expected == predicted``), else when the texts are identical.
Model text is read with :func:`ast.literal_eval` only: it is data, never executed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable

from ..trace import Event, Frame
from .values import exception_matches

NOT_LITERAL = object()
_LITERAL_LIMIT = 100_000  # characters; longer texts are compared as text


@dataclass(frozen=True)
class Outcome:
    kind: str  # "return" | "exception" | "none" (the trace never finished the entry)
    value: str | None  # the repr returned, or the exception text

    def to_json(self) -> dict:
        return {"kind": self.kind, "value": self.value}


def literal(text: str):
    """The Python literal ``text`` denotes, or :data:`NOT_LITERAL`."""
    if len(text) > _LITERAL_LIMIT:
        return NOT_LITERAL
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        return NOT_LITERAL


def same_value(expected: str | None, predicted: str | None) -> bool:
    if expected is None or predicted is None:
        return False
    if expected == predicted:
        return True
    left, right = literal(expected), literal(predicted)
    if left is NOT_LITERAL or right is NOT_LITERAL:
        return False
    try:
        return bool(left == right)
    except Exception:  # exotic comparisons (deep recursion)
        return False


def is_string_value(text: str | None) -> bool:
    """The repr is of a ``str`` (the paper's string-valued outputs)."""
    return text is not None and isinstance(literal(text), str)


def entry_outcome(frames: Iterable[Frame]) -> Outcome:
    """How the entry (depth 0) finished: its first RETURN, or the exception that unwound it.

    An exception that escapes the entry shows as an EXCEPTION frame at depth 0 right before
    the entry's RETURN (whose value is then ``"None"``).
    """
    previous: Frame | None = None
    for frame in frames:
        if frame.event is Event.RETURN and frame.depth == 0:
            if previous is not None and previous.event is Event.EXCEPTION and previous.depth == 0:
                return Outcome("exception", previous.arg)
            return Outcome("return", frame.arg)
        previous = frame
    return Outcome("none", None)


def outcomes_agree(truth: Outcome, model: Outcome) -> bool:
    if truth.kind == "none" or truth.kind != model.kind:
        return False
    if truth.kind == "exception":  # scored leniently, as compare() does (spec §4.6)
        return exception_matches(truth.value, model.value)
    return same_value(truth.value, model.value)
