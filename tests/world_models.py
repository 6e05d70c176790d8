"""A world model for tests that knows the truth and makes the mistakes it is told to make.

:class:`OracleBackend` speaks the backend protocol over the byte tokenizer. Asked to continue a
prompt, it reads the frames already in it, takes the truth's frame at that index (changed by
``mistakes[index]`` when there is one), renders it with the ``".."`` rule against the frames
in the prompt, and writes whatever of it is not there yet, up to a stop id. So it responds to
forced actions, forced events and edited frames the way a model does (it continues from what
it is given), deterministically, in microseconds, with no weights.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from cwmtui.model.backend import Backend, Completion
from cwmtui.model.tokenizer import byte_tokenizer
from cwmtui.trace import Event, Frame, TraceParser, tokens
from cwmtui.trace.render import Compressor, Special, frame_segments, prompt_segments

Mistake = Callable[[Frame], Frame]


def wrong_value(name: str, value: str) -> Mistake:
    def change(frame: Frame) -> Frame:
        return replace(frame, locals={**(frame.locals or {}), name: value})

    return change


def wrong_return(value: str) -> Mistake:
    def change(frame: Frame) -> Frame:
        return replace(frame, arg=value) if frame.event is Event.RETURN else frame

    return change


def both(*mistakes: Mistake) -> Mistake:
    def change(frame: Frame) -> Frame:
        for mistake in mistakes:
            frame = mistake(frame)
        return frame

    return change


def wrong_line(action: str) -> Mistake:
    def change(frame: Frame) -> Frame:
        return replace(frame, action=action)

    return change


class OracleBackend(Backend):
    can_generate = True

    def __init__(self, program, truth: Sequence[Frame], mistakes: dict[int, Mistake] | None = None, end_at: int | None = None):
        self._tokens = byte_tokenizer()
        self.special_ids = self._tokens.special_ids
        self.program = program
        self.truth = list(truth)
        self.mistakes = dict(mistakes or {})
        self.end_at = end_at
        self.name = "oracle"
        self.description = "test oracle · byte tokens"
        self.calls = 0
        self._last: list[int] = []
        self._prompt = self.encode_segments(prompt_segments(program.source))

    def encode(self, text: str) -> list[int]:
        return self._tokens.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokens.decode(ids)

    def complete(self, prompt_ids, stop_ids, max_new_tokens, temperature=0.0, top_p=1.0, seed=None, cancel=None) -> Completion:
        self.calls += 1
        prompt_ids = list(prompt_ids)
        common = 0
        for a, b in zip(prompt_ids, self._last):
            if a != b:
                break
            common += 1
        processed = len(prompt_ids) - common
        self._last = prompt_ids
        segments = self.segments(prompt_ids[len(self._prompt) :])
        done, partial = _split_frames(segments)
        parser = TraceParser(self.program.source)
        parser.feed(prompt_segments(self.program.source))
        frames = parser.feed(done)
        index = len(frames)
        eos = self.eos_id
        if index >= len(self.truth) or index == self.end_at:
            return Completion([eos], processed, "eos")
        target = self.truth[index]
        if index in self.mistakes:
            target = self.mistakes[index](target)
        compressor = Compressor()
        for frame in frames:
            compressor.advance(frame.event if not frame.is_error else None, frame.locals)
        forced_event = Event.from_token(partial[0]) if partial and isinstance(partial[0], Special) else None
        if forced_event is not None and forced_event is not target.event:
            previous = next((f.locals for f in reversed(frames) if f.locals is not None), {})
            target = Frame(forced_event, target.action, dict(target.locals or previous) if forced_event.has_locals else None, target.arg or "None" if forced_event.has_arg else None)
        wanted = frame_segments(target, compressor)
        rest = _continuation(wanted, partial)
        ids = self.encode_segments(rest)
        stops = set(stop_ids)
        out: list[int] = []
        for token in ids[:max_new_tokens]:
            out.append(token)
            if token in stops:
                return Completion(out, processed, "stop")
        return Completion(out, processed, "length")


def _split_frames(segments: list[str]) -> tuple[list[str], list[str]]:
    """(segments of complete frames, segments of the frame being written)."""
    last = max((i for i, s in enumerate(segments) if isinstance(s, Special) and s == tokens.FRAME_SEP), default=-1)
    return segments[: last + 1], segments[last + 1 :]


def _continuation(wanted: list[str], partial: list[str]) -> list[str]:
    """What follows ``partial`` in ``wanted``: skip as many special tokens as ``partial`` has."""
    specials = sum(1 for s in partial if isinstance(s, Special))
    if specials == 0:
        return wanted
    seen = 0
    for i, segment in enumerate(wanted):
        if isinstance(segment, Special):
            seen += 1
            if seen == specials:
                return wanted[i + 1 :]
    return [Special(tokens.FRAME_SEP)]
