"""The token lens: a wrong value as the model's tokenizer splits it.

A CWM reads and writes values as subword tokens, not characters. When the model gets a string
wrong by one character, the lens shows the expected and the predicted value as token pieces,
with the pieces that differ marked: the paper's string-valued-state failure made visible (one
BPE piece ``'straw`` where a character-level edit was needed, a piece dropped or merged).

Values are tokenized as they stand in the trace: a local's value is the JSON string literal
after ``"name": `` in the locals object (so the pieces at its edges are the real ones), a
return or exception value the JSON string literal right after ``<|arg_sep|>``.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Callable

Pieces = Callable[[str], list[str]]

_PREFIX = '{"x": '
_SUFFIX = "}"


@dataclass
class Piece:
    text: str  # the token's text (as the tokenizer decodes it)
    differs: bool  # not part of a run the other side shares

    def to_json(self) -> list:
        return [self.text, self.differs]


@dataclass
class Lens:
    expected_text: str  # the value as written in the trace (a JSON string literal)
    predicted_text: str
    expected: list[Piece] = field(default_factory=list)
    predicted: list[Piece] = field(default_factory=list)
    first_difference: int | None = None  # index of the first differing piece of ``expected``

    @property
    def changed_pieces(self) -> tuple[int, int]:
        """How many pieces differ on each side (expected, predicted)."""
        return sum(p.differs for p in self.expected), sum(p.differs for p in self.predicted)

    def to_json(self) -> dict:
        return {
            "expected_text": self.expected_text,
            "predicted_text": self.predicted_text,
            "expected": [p.to_json() for p in self.expected],
            "predicted": [p.to_json() for p in self.predicted],
            "first_difference": self.first_difference,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Lens":
        return cls(
            data["expected_text"],
            data["predicted_text"],
            [Piece(t, d) for t, d in data["expected"]],
            [Piece(t, d) for t, d in data["predicted"]],
            data.get("first_difference"),
        )


def value_pieces(value: str, pieces: Pieces, in_locals: bool = True) -> tuple[str, list[str]]:
    """The trace text of a value and its token pieces: those that overlap the value itself, inside
    the JSON string's quotes (a piece that is only a quote is the format's, not the value's)."""
    encoded = json.dumps(value)
    whole, start = (_PREFIX + encoded + _SUFFIX, len(_PREFIX)) if in_locals else (encoded, 0)
    split = list(pieces(whole))
    if "".join(split) != whole:  # a tokenizer whose pieces do not concatenate back: no context
        whole, start, split = encoded, 0, list(pieces(encoded))
        if "".join(split) != whole:
            return encoded, split
    start, end = start + 1, start + len(encoded) - 1
    kept: list[str] = []
    offset = 0
    for piece in split:
        piece_end = offset + len(piece)
        if piece_end > start and offset < end:
            kept.append(piece)
        offset = piece_end
    return encoded, kept


def token_lens(expected: str | None, predicted: str | None, pieces: Pieces, in_locals: bool = True) -> Lens:
    """Split both values with ``pieces`` (``Backend.token_pieces``) and mark what differs."""
    expected_text, left = value_pieces(expected, pieces, in_locals) if expected is not None else ("", [])
    predicted_text, right = value_pieces(predicted, pieces, in_locals) if predicted is not None else ("", [])
    left_marks = [True] * len(left)
    right_marks = [True] * len(right)
    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for block in matcher.get_matching_blocks():
        for n in range(block.size):
            left_marks[block.a + n] = False
            right_marks[block.b + n] = False
    first = next((i for i, mark in enumerate(left_marks) if mark), None)
    if first is None and any(right_marks):
        first = next(i for i, mark in enumerate(right_marks) if mark)
    return Lens(
        expected_text,
        predicted_text,
        [Piece(t, m) for t, m in zip(left, left_marks)],
        [Piece(t, m) for t, m in zip(right, right_marks)],
        first,
    )


def byte_pieces(text: str) -> list[str]:
    """One piece per character (the bundled byte model splits ASCII text this way)."""
    return list(text)
