"""A frame the model ran out of tokens in the middle of, checked as far as it was written.

The budget (or the model's context) can stop a frame mid-way; its text is not a frame, but it
is not nothing either: written in the trace format, it is compared with the true frame at that
row (with the ``..`` base of the model's own last frame) as a prefix. Text that is a prefix of
the truth is no divergence (the trace ends there for want of tokens); text that already differs
is the first divergence at that row, as the state, value, action, event or format it gets wrong.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from ..trace import Event, Frame
from ..trace.render import Compressor, frame_segments
from ..trace.tokens import ACTION_SEP, ARG_SEP, START_MARKER, strip_marker
from .comparison import CUT_FRAME, FORCED_WHOLE, StepKind, VariableDiff
from .values import exception_matches, literal_equal, type_name


def model_base(frames: Sequence[Frame], truth_frames: Sequence[Frame], alignment) -> dict[str, str] | None:
    """The ``".."`` base after the model's last frame: what its next frame's ``".."`` stand for
    (the rollout's own compressor state). A frame forced whole from the truth (teacher forcing)
    was the truth's frame when the model went on, so the truth's frame on its row counts."""
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        if frame.error == FORCED_WHOLE:
            truth_index = next((t for t, m in alignment if m == index), None)
            if truth_index is None:
                return None
            frame = truth_frames[truth_index]
        if frame.error is not None and frame.locals is None:
            return None
        if frame.event is Event.EXCEPTION:
            continue  # an exception keeps its scope's base (spec §4.3 rule 4)
        return frame.locals if frame.event in (Event.CALL, Event.LINE) else None
    return None


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)(")?')  # a JSON string, perhaps cut before its closing quote
_UNSURE = object()  # a difference in the text that names no variable


def judge_cut(truth: Frame, text: str, base: dict[str, str] | None):
    """``(kind, model frame, variables)`` for a row whose truth frame is ``truth`` and whose model
    frame is the cut-off ``text``, when that text is not the start of the truth's frame as the
    trace format writes it (``".."`` against the model's ``base``) and the difference says how
    the model went wrong; None while the two can still be the same frame."""
    text = text.rstrip("\ufffd")  # a character the cut split in two
    compressor = Compressor()
    compressor.base = base
    segments = frame_segments(truth, compressor)
    expected = "".join(segments)
    if expected.startswith(text):
        return None
    at = next((i for i, (a, b) in enumerate(zip(expected, text)) if a != b), None)
    if at is None:  # it runs on past the whole frame: not a frame cut off
        return None
    roles = ["event", "state", "state", "action", "action"] if truth.event is not None and truth.event.has_locals \
        else ["event", "format", "action", "action", "value", "value"]
    end = 0
    role = "format"
    for segment, segment_role in zip(segments, roles):
        end += len(segment)
        if at < end:
            role = segment_role
            break
    event = next((e for e in Event if text.startswith(e.token)), None)
    after = text[len(event.token):] if event is not None else text
    head, action_sep, rest = after.partition(ACTION_SEP)
    action, arg_sep, arg = rest.partition(ARG_SEP)

    frame = Frame(event, strip_marker(action), None, None, None, truth.depth, truth.function,
                  error=CUT_FRAME, raw=text, origin="generated")
    if event is None:
        return StepKind.FORMAT, frame, []
    if role == "event" or event is not truth.event:
        return StepKind.EVENT, frame, []
    if role == "state":
        found = _state_difference(truth.locals or {}, base, head)
        if found is None:
            return None
        if found is StepKind.FORMAT:
            return StepKind.FORMAT, frame, []
        return StepKind.STATE, frame, [found] if isinstance(found, VariableDiff) else []
    if role == "action":
        if arg_sep and not truth.event.has_arg:
            return StepKind.FORMAT, frame, []
        if arg_sep:
            return None if strip_marker(action) == truth.action else (StepKind.ACTION, frame, [])
        lines = [truth.action]
        if truth.event is Event.CALL:  # the model may write the entry's marker (spec §2)
            lines += [truth.action.rstrip("\n") + START_MARKER + "\n", truth.action.rstrip("\n") + " " + START_MARKER.lstrip() + "\n"]
        return None if any(line.startswith(action) for line in lines) else (StepKind.ACTION, frame, [])
    if role == "value":
        value = _STRING.match(arg)
        if value is None or value.group(2) and value.end() != len(arg):
            return StepKind.FORMAT, frame, []
        predicted, whole = _unescape(value.group(1)), bool(value.group(2))
        wanted = truth.arg if truth.arg is not None else "None"
        if truth.event is Event.EXCEPTION:  # scored leniently (spec §4.6): only a whole value can be judged
            if not whole or exception_matches(wanted, predicted):
                return None
            return StepKind.VALUE, frame, [VariableDiff("raise", wanted, predicted, "exception", False)]
        if not whole and wanted.startswith(predicted):
            return None
        shown = predicted if whole else predicted + "…"
        same = whole and literal_equal(wanted, predicted)
        return StepKind.VALUE, frame, [VariableDiff("return", wanted, shown, type_name(wanted), same)]
    return StepKind.FORMAT, frame, []


def _unescape(body: str) -> str:
    """The text of a JSON string's body that may be cut inside an escape."""
    for end in (len(body), body.rfind("\\")):
        if end >= 0:
            try:
                return json.loads('"' + body[:end] + '"')
            except ValueError:
                pass
    return body


def _read_locals(text: str) -> tuple[list[tuple[str, bool, str | None, bool]], bool, bool]:
    """The items of a locals object the model began to write: ``([(name, whole name, shown
    value or None, whole value)], closed, readable)``. It may stop anywhere; ``readable`` is
    False where it is not the JSON object of strings the format asks for."""
    items: list[tuple[str, bool, str | None, bool]] = []
    if not text:
        return items, False, True
    if not text.startswith("{"):
        return items, False, False
    i, n = 1, len(text)

    def literal(word: str) -> str:  # "ok", "cut" (the text ends inside it) or "bad"
        nonlocal i
        if text.startswith(word, i):
            i += len(word)
            return "ok"
        return "cut" if word.startswith(text[i:]) else "bad"

    while True:
        if i == n:
            return items, False, True
        if text[i] == "}":
            return items, True, i + 1 == n
        if items:
            state = literal(", ")
            if state != "ok":
                return items, False, state == "cut"
        name = _STRING.match(text, i)
        if name is None:
            return items, False, i == n
        i = name.end()
        if not name.group(2):
            items.append((_unescape(name.group(1)), False, None, False))
            return items, False, True
        key = _unescape(name.group(1))
        state = literal(": ")
        if state != "ok":
            items.append((key, True, None, False))
            return items, False, state == "cut"
        value = _STRING.match(text, i)
        if value is None:
            items.append((key, True, None, False))
            return items, False, i == n
        i = value.end()
        items.append((key, True, _unescape(value.group(1)), bool(value.group(2))))
        if not value.group(2):
            return items, False, True


def _state_difference(expected: dict[str, str], base: dict[str, str] | None, text: str):
    """The first variable the cut-off locals ``text`` already get wrong (a VariableDiff),
    ``_UNSURE`` where they differ without naming one, StepKind.FORMAT where they are not
    readable, None while they can still be the truth's."""
    items, closed, readable = _read_locals(text)
    written: set[str] = set()
    for name, whole_name, shown, whole in items:
        if not whole_name:
            if any(key.startswith(name) for key in expected if key not in written):
                return None
            return _UNSURE
        written.add(name)
        if shown is not None and whole and shown == ".." and base is not None and name in base:
            predicted: str | None = base[name]
        else:
            predicted = shown
        if name not in expected:
            value = predicted if whole else (predicted or "") + "…"
            return VariableDiff(name, None, value, type_name(value), False)
        wanted = expected[name]
        if predicted is None:
            continue
        if whole and predicted != wanted:
            return VariableDiff(name, wanted, predicted, type_name(wanted), literal_equal(wanted, predicted))
        if not whole and not (wanted.startswith(predicted) or "..".startswith(predicted)):
            return VariableDiff(name, wanted, predicted + "…", type_name(wanted), False)
    if closed:
        missing = next((name for name in expected if name not in written), None)
        if missing is not None:
            return VariableDiff(missing, expected[missing], None, type_name(expected[missing]), False)
    if not readable:
        return StepKind.FORMAT
    return None
