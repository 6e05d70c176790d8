"""Frames as a session file stores them: compact rows, built into frames only when asked for.

A session of 100,000 steps holds 200,000 frames. As JSON objects they take seconds to read
and check, and building every :class:`Frame` more again, while the debugger draws a
screenful. So a session file (format version 2) stores a frame as a row

    [event, action, lineno, depth, function, locals, arg]

followed, where there are any, by an object of the rest (``tokens``, ``origin``, ``error``,
``raw``). Model frames equal to the interpreter's frames on their rows (same locals in the same
order), one after the other, are one run ``{"same_as": i, "count": n, "tokens": [n counts],
"origin": o}``: frames ``i`` to ``i + n - 1`` of the truth, with their own token counts and
origin (a model that agrees with the interpreter costs a few bytes, not a copy of the truth).
:class:`StoredFrames` checks every row when it is made, column by column at C speed (a damaged
file is refused at once, not when its frame scrolls into view), and builds each frame the
first time it is asked for.
"""

from __future__ import annotations

import bisect
from itertools import accumulate, chain
from operator import itemgetter, methodcaller
from typing import Iterator, Sequence

from .frame import EVENTS, Frame, check_events, check_locals, check_types

_EXTRA_TYPES = {"tokens": int, "origin": str, "error": str, "raw": str}
_RUN_KEYS = frozenset({"same_as", "count", "tokens", "origin"})
_NONE: dict = {}


def frame_row(frame: Frame) -> list:
    """The row of a frame (see the module docstring)."""
    row: list = [frame.event.value if frame.event else None, frame.action, frame.lineno, frame.depth,
                 frame.function, frame.locals, frame.arg]
    extra: dict = {}
    if frame.tokens:
        extra["tokens"] = frame.tokens
    if frame.origin:
        extra["origin"] = frame.origin
    if frame.error is not None:
        extra["error"], extra["raw"] = frame.error, frame.raw
    if extra:
        row.append(extra)
    return row


def stored_frames(frames: Sequence[Frame], truth: Sequence[Frame], partner: dict[int, int]) -> list:
    """The stored form of a model's ``frames``: ``partner`` maps a frame's index to the truth's
    frame on its row; where the two are equal, runs of them are stored as runs."""
    items: list = []
    run: dict | None = None
    for index, frame in enumerate(frames):
        ti = partner.get(index)
        same = truth[ti] if ti is not None and ti < len(truth) else None
        if same is None or frame != same or (frame.locals is not None and list(frame.locals) != list(same.locals or ())):
            items.append(frame_row(frame))
            run = None
            continue
        if run is not None and run["same_as"] + run["count"] == ti and run.get("origin", "") == frame.origin:
            run["count"] += 1
            run["tokens"].append(frame.tokens)
            continue
        run = {"same_as": ti, "count": 1, "tokens": [frame.tokens]}
        if frame.origin:
            run["origin"] = frame.origin
        items.append(run)
    for item in items:
        if type(item) is dict and not any(item["tokens"]):
            del item["tokens"]  # no token counts (a trace read from text): none to keep
    return items


def _check_objects(objects: list, types: dict[str, type], what: str) -> None:
    for key in set(chain.from_iterable(map(dict.keys, objects))) - types.keys():
        raise TypeError(f"{what} has an unknown field {key!r}")
    for key, kind in types.items():
        check_types(map(methodcaller("get", key), objects), repr(key), kind, None)


#: The columns of a frame row and the types each holds (None: may be null).
_COLUMNS = (("action", (str,)), ("lineno", (int, None)), ("depth", (int,)), ("function", (str,)),
            ("locals", (dict, None)), ("arg", (str, None)))


def check_rows(items: list, base_length: int | None = None) -> None:
    """Raise TypeError unless every item is a frame row (or, with ``base_length``, a
    ``{"same_as": i}`` with ``i < base_length``)."""
    if not isinstance(items, list):
        raise TypeError(f"frames must be a list, not {type(items).__name__}")
    kinds = set(map(type, items))
    for kind in kinds - {list, dict}:
        raise TypeError(f"a frame is {kind.__name__}, not a row")
    rows = items if dict not in kinds else [item for item in items if type(item) is list]
    references = [] if dict not in kinds else [item for item in items if type(item) is dict]
    if rows:
        lengths = set(map(len, rows))
        for length in lengths - {7, 8}:
            raise TypeError(f"a frame row has {length} fields, not 7 (and perhaps an object of the rest)")
        events = set(map(itemgetter(0), rows))  # a handful of values: checked one by one
        check_types(events, "event", str, None)
        check_events(events)
        for column, (what, kinds_here) in enumerate(_COLUMNS, start=1):
            check_types(map(itemgetter(column), rows), what, *kinds_here)
        check_locals(map(itemgetter(5), rows))
        extras = [row[7] for row in rows if len(row) == 8] if 8 in lengths else []
        check_types(extras, "field after the row", dict)
        _check_objects(extras, _EXTRA_TYPES, "a frame row")
        if None in events or "" in events:
            for row in rows:
                if not row[0] and (len(row) == 7 or row[7].get("error") is None):
                    raise TypeError("a frame without an event must say its format error")
    if references:
        if base_length is None:
            raise TypeError("a frame refers to another ('same_as') where there is none to refer to")
        for run in references:
            for key in run.keys() - _RUN_KEYS:
                raise TypeError(f"a run of frames stored as the truth's ('same_as') has an unknown field {key!r}")
            first, count, tokens = run.get("same_as"), run.get("count", 1), run.get("tokens")
            if type(first) is not int or type(count) is not int or count < 1 or not 0 <= first <= base_length - count:
                raise TypeError(f"a run of frames refers ('same_as') to frames that are not among the {base_length}")
            if tokens is not None and (type(tokens) is not list or len(tokens) != count or set(map(type, tokens)) - {int}):
                raise TypeError("a run of frames must have one token count for each")
            if type(run.get("origin", "")) is not str:
                raise TypeError("a run of frames has an origin that is not text")


class StoredFrames(Sequence[Frame]):
    """The frames of checked rows and runs (see the module docstring), each built when first
    asked for; ``base``: the frames a run refers to."""

    def __init__(self, items: list, base: Sequence[Frame] | None = None) -> None:
        check_rows(items, None if base is None else len(base))
        self._items = items
        self._base: Sequence[Frame] = () if base is None else base  # (runs only where there is one)
        self._starts: list[int] | None = None  # where each item starts, when some are runs
        length = len(items)
        if base is not None and any(type(item) is dict for item in items):
            counts = [item.get("count", 1) if type(item) is dict else 1 for item in items]
            self._starts = [0, *accumulate(counts)][:-1]
            length = sum(counts)
        self._frames: list[Frame | None] = [None] * length
        self._events: list | None = None

    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._frames)))]
        frame = self._frames[index]
        if frame is None:
            if index < 0:
                index += len(self._frames)
            frame = self._frames[index] = self._build(index)
        return frame

    def _build(self, index: int) -> Frame:
        if self._starts is None:
            item, offset = self._items[index], 0
        else:
            k = bisect.bisect_right(self._starts, index) - 1
            item, offset = self._items[k], index - self._starts[k]
        if type(item) is dict:
            same = self._base[item["same_as"] + offset]
            tokens = item.get("tokens")
            return Frame(same.event, same.action, same.locals, same.arg, same.lineno, same.depth, same.function,
                         same.error, same.raw, tokens[offset] if tokens else 0, item.get("origin", ""))
        event, action, lineno, depth, function, local_values, arg = item[:7]
        extra = item[7] if len(item) == 8 else _NONE
        return Frame(EVENTS[event] if event else None, action, local_values, arg, lineno, depth, function,
                     extra.get("error"), extra.get("raw"), extra.get("tokens", 0), extra.get("origin", ""))

    def __iter__(self) -> Iterator[Frame]:
        for index in range(len(self._frames)):
            yield self[index]

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple, StoredFrames)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<StoredFrames: {len(self)} frames>"

    def events(self) -> list:
        """Each frame's event (None for a malformed frame), without building the frames."""
        if self._events is None:
            if self._starts is None:
                self._events = [EVENTS[row[0]] if row[0] else None for row in self._items]
            else:
                base = self._base.events() if isinstance(self._base, StoredFrames) else [f.event for f in self._base]
                events: list = []
                for item in self._items:
                    if type(item) is dict:
                        first = item["same_as"]
                        events.extend(base[first:first + item.get("count", 1)])
                    else:
                        events.append(EVENTS[item[0]] if item[0] else None)
                self._events = events
        return self._events

    def token_counts(self) -> list[int]:
        """Each frame's token count, without building the frames."""
        counts: list[int] = []
        for item in self._items:
            if type(item) is dict:
                counts.extend(item.get("tokens") or [0] * item.get("count", 1))
            else:
                counts.append(item[7].get("tokens", 0) if len(item) == 8 else 0)
        return counts
