"""Rendering frames to CWM trace text, byte for byte (spec §1.2, §4).

A frame renders to *segments*: plain text pieces and :class:`Special` pieces (a special token).
A backend encodes text pieces without special-token parsing and splices the special ids in, so
a program whose source contains the literal text ``<|frame_sep|>`` cannot break a prompt.
``"".join(segments)`` is the CWM text.
"""

from __future__ import annotations

import json
from typing import Iterable

from . import tokens
from .frame import Event, Frame


class Special(str):
    """A segment that is one special token (its string form, e.g. ``<|frame_sep|>``)."""

    __slots__ = ()


BOS = Special(tokens.BEGIN_OF_TEXT)
EOS = Special(tokens.END_OF_TEXT)
FRAME_SEP = Special(tokens.FRAME_SEP)
ACTION_SEP = Special(tokens.ACTION_SEP)
ARG_SEP = Special(tokens.ARG_SEP)
TRACE_CONTEXT_START = Special(tokens.TRACE_CONTEXT_START)
EVENT_SPECIALS = {event: Special(event.token) for event in Event}

ELIDED = ".."


def dumps(value) -> str:
    """``json.dumps`` with the defaults CWM was trained on (``", "``, ``": "``, ensure_ascii)."""
    return json.dumps(value)


class Compressor:
    """The ``".."`` rule of spec §4.3, as a state machine over the frames in order.

    A LINE frame shows ``".."`` for a name whose value equals the one at the base frame: the
    last CALL or LINE frame, reached from this frame by walking back over EXCEPTION frames
    only. Anything else in between (a RETURN of a callee) means there is no base and every value
    is written in full. The parser's resolver runs the same machine in reverse.
    """

    __slots__ = ("base",)

    def __init__(self) -> None:
        self.base: dict[str, str] | None = None

    def advance(self, event: Event | None, resolved: dict[str, str] | None) -> None:
        """Move past a frame whose resolved locals are ``resolved``."""
        if event is Event.CALL or event is Event.LINE:
            self.base = resolved
        elif event is not Event.EXCEPTION:
            self.base = None

    def compress(self, event: Event, resolved: dict[str, str]) -> dict[str, str]:
        base = self.base
        if event is not Event.LINE or not base:
            return resolved
        return {k: ELIDED if base.get(k) == v else v for k, v in resolved.items()}

    def resolve(self, event: Event, shown: dict[str, str]) -> tuple[dict[str, str], list[str]]:
        """Resolve ``".."`` values; returns the locals and the names that could not be resolved."""
        base = self.base if event is Event.LINE else None
        resolved: dict[str, str] = {}
        missing: list[str] = []
        for key, value in shown.items():
            if value == ELIDED:
                if base is not None and key in base:
                    value = base[key]
                else:
                    missing.append(key)
            resolved[key] = value
        return resolved, missing

    def copy(self) -> "Compressor":
        other = Compressor()
        other.base = self.base
        return other


def frame_segments(frame: Frame, compressor: Compressor) -> list[str]:
    """Segments of one frame, ending with ``<|frame_sep|>``; advances ``compressor``."""
    event = frame.event
    if event is None:  # a malformed frame: render what the model wrote
        compressor.advance(None, None)
        return [frame.raw or "", FRAME_SEP]
    segments: list[str] = [EVENT_SPECIALS[event]]
    if event.has_locals:
        resolved = frame.locals or {}
        segments.append(dumps(compressor.compress(event, resolved)))
        compressor.advance(event, resolved)
    else:
        compressor.advance(event, None)
    segments += [ACTION_SEP, frame.action]
    if event.has_arg:
        segments += [ARG_SEP, dumps(frame.arg if frame.arg is not None else "None")]
    segments.append(FRAME_SEP)
    return segments


def prompt_segments(context: str) -> list[str]:
    """``<|begin_of_text|><|trace_context_start|>$CONTEXT<|frame_sep|>`` (spec §1.2)."""
    return [BOS, TRACE_CONTEXT_START, context, FRAME_SEP]


def frames_segments(frames: Iterable[Frame], end: bool = False) -> list[str]:
    compressor = Compressor()
    segments: list[str] = []
    for frame in frames:
        segments += frame_segments(frame, compressor)
    if end:
        segments.append(EOS)
    return segments


def render_frames(frames: Iterable[Frame], end: bool = False) -> str:
    """The CWM text of ``frames`` (and ``<|end_of_text|>`` when ``end``)."""
    return "".join(frames_segments(frames, end))


def render_trace(context: str, frames: Iterable[Frame], end: bool = True) -> str:
    """A whole trace document: prompt, frames, end of text."""
    return "".join(prompt_segments(context)) + render_frames(frames, end)
