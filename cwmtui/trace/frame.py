"""The vocabulary of a trace: events, frames and whole traces."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from itertools import chain
from operator import methodcaller
from typing import Iterable, Sequence

from . import tokens


class Event(str, enum.Enum):
    CALL = "call"
    LINE = "line"
    RETURN = "return"
    EXCEPTION = "exception"

    @property
    def token(self) -> str:
        return _EVENT_TOKENS[self]

    @classmethod
    def from_token(cls, token: str) -> "Event | None":
        return _TOKEN_EVENTS.get(token)

    @property
    def has_locals(self) -> bool:
        return self in (Event.CALL, Event.LINE)

    @property
    def has_arg(self) -> bool:
        return self in (Event.RETURN, Event.EXCEPTION)


_EVENT_TOKENS = {
    Event.CALL: tokens.CALL_SEP,
    Event.LINE: tokens.LINE_SEP,
    Event.RETURN: tokens.RETURN_SEP,
    Event.EXCEPTION: tokens.EXCEPTION_SEP,
}
_TOKEN_EVENTS = {v: k for k, v in _EVENT_TOKENS.items()}


@dataclass(slots=True)
class Frame:
    """One step of a trace.

    ``locals`` are the values *before* ``action`` runs, every name resolved to its repr (no
    ``".."``); ``None`` for return and exception frames. ``arg`` is the repr of the return value
    or of the exception. ``error`` marks a frame that could not be parsed as the format demands:
    ``raw`` then keeps the text as the model wrote it.

    ``tokens`` (how many model tokens the frame took) and ``origin`` (``"generated"``,
    ``"forced"``, ``"edited"``, or ``""`` for the interpreter) describe where the frame came
    from; they take no part in equality.
    """

    event: Event | None
    action: str
    locals: dict[str, str] | None = None
    arg: str | None = None
    lineno: int | None = None
    depth: int = 0
    function: str = ""
    error: str | None = None
    raw: str | None = None
    tokens: int = field(default=0, compare=False)
    origin: str = field(default="", compare=False)

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def to_json(self) -> dict:
        data = {
            "event": self.event.value if self.event else None,
            "action": self.action,
            "lineno": self.lineno,
            "function": self.function,
            "depth": self.depth,
            "locals": self.locals,
            "arg": self.arg,
        }
        if self.error is not None:
            data["error"] = self.error
            data["raw"] = self.raw
        if self.tokens:
            data["tokens"] = self.tokens
        if self.origin:
            data["origin"] = self.origin
        return data

    @classmethod
    def from_json(cls, data: dict) -> "Frame":
        """A frame from :meth:`to_json`; a field of the wrong type (a damaged or hand-edited
        file) raises TypeError here rather than deep inside a comparison later."""
        check_frames([data])
        return _frame(data)


#: The fields of a frame's JSON and the type each holds when it is there (bool is no int).
_FIELD_TYPES = {
    "event": str, "action": str, "locals": dict, "arg": str, "lineno": int, "depth": int,
    "function": str, "error": str, "raw": str, "tokens": int, "origin": str,
}
EVENTS = {event.value: event for event in Event}


def check_types(values: Iterable, what: str, *kinds: type | None) -> None:
    """Raise TypeError unless every value is of one of ``kinds`` (None: also None)."""
    allowed = {type(None) if kind is None else kind for kind in kinds}
    for found in set(map(type, values)) - allowed:
        raise TypeError(f"a frame's {what} is {found.__name__}, not {getattr(kinds[0], '__name__', 'None')}")


def check_locals(values: Iterable) -> None:
    """Raise TypeError unless each of ``values`` (locals or None) maps names to repr strings."""
    if set(map(type, chain.from_iterable(map(dict.values, filter(None, values))))) - {str}:
        raise TypeError("a frame's locals must map names to repr strings")


def check_events(events: Iterable) -> None:
    for event in set(events) - EVENTS.keys() - {None, ""}:
        raise TypeError(f"a frame's event {event!r} is none of {', '.join(EVENTS)}")


def check_frames(items: list) -> None:
    """Raise TypeError unless every item is a frame as :meth:`Frame.to_json` writes it.

    Each test runs over all the items at once (map and set work at C speed), so checking the
    100,000 frames of a long trace costs a fraction of checking them one by one.
    """
    for found in set(map(type, items)) - {dict}:
        raise TypeError(f"a frame is {found.__name__}, not an object")
    for key in set(chain.from_iterable(map(dict.keys, items))) & _FIELD_TYPES.keys():
        check_types(map(methodcaller("get", key), items), repr(key), _FIELD_TYPES[key], None)
    check_events(map(methodcaller("get", "event"), items))
    check_locals(map(methodcaller("get", "locals"), items))
    for item in items:
        if not item.get("event") and item.get("error") is None:
            raise TypeError("a frame without an event must say its format error")


def frames_from_json(items: list) -> list[Frame]:
    """The frames of a list of :meth:`Frame.to_json` objects (TypeError where one is damaged)."""
    if not isinstance(items, list):
        raise TypeError("a trace's frames must be a list")
    check_frames(items)
    return [_frame(item) for item in items]


def _frame(data: dict) -> Frame:
    """The frame of a checked JSON object (see :func:`check_frames`)."""
    get = data.get
    event = get("event")
    return Frame(
        EVENTS[event] if event else None, get("action") or "", get("locals"), get("arg"),
        get("lineno"), get("depth") or 0, get("function") or "", get("error"), get("raw"),
        get("tokens") or 0, get("origin") or "",
    )


class Status(str, enum.Enum):
    COMPLETE = "complete"  # the entry returned (or a model trace ended with end_of_text)
    RAISED = "raised"  # an exception escaped the entry: the trace is whole, the program failed
    LIMIT = "limit"  # a limit was reached: the trace is partial (see TraceStatus.limit)
    DIED = "died"  # the process died (os._exit, signal): the trace is partial
    NOT_CALLED = "not_called"  # the program ended without calling the entry
    ERROR = "error"  # the program failed before the entry was called


@dataclass(slots=True)
class TraceStatus:
    kind: Status
    message: str = ""
    limit: str | None = None  # "frames" | "time" | "memory" | "output" | "processes" | "recursion" | "tokens"
    exit_code: int | None = None  # DIED: the program ended itself (os._exit) with this code

    @property
    def ok(self) -> bool:
        return self.kind is Status.COMPLETE

    @property
    def whole(self) -> bool:
        """Every step the program took is in the trace: it returned, raised, or ended itself
        (os._exit). False when a limit, a signal or a lost tracer cut it short."""
        return self.kind in (Status.COMPLETE, Status.RAISED) or (self.kind is Status.DIED and self.exit_code is not None)

    @property
    def ending(self) -> str:
        """How the program's run ended, for people: "the entry function returned"."""
        if self.kind is Status.COMPLETE:
            return "the entry function returned"
        if self.kind is Status.RAISED:
            return "an exception left the entry function"
        if self.kind is Status.DIED and self.exit_code is not None:
            return f"the program ended itself (os._exit, exit code {self.exit_code})"
        return self.describe()

    def describe(self) -> str:
        text = self.kind.value
        if self.limit:
            text += f" ({self.limit} limit)"
        if self.message:
            text += f": {self.message}"
        return text

    def to_json(self) -> dict:
        data: dict[str, str | int | None] = {"status": self.kind.value, "limit": self.limit, "message": self.message}
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        return data

    @classmethod
    def from_json(cls, data: dict) -> "TraceStatus":
        code = data.get("exit_code")
        if code is not None and type(code) is not int:
            raise TypeError("a trace's exit code must be a whole number")
        return cls(Status(data["status"]), data.get("message", ""), data.get("limit"), code)


@dataclass(slots=True)
class OutputChunk:
    """Text the program wrote; ``step`` is how many frames had been recorded at that moment."""

    step: int
    stream: str  # "stdout" | "stderr"
    text: str

    @classmethod
    def from_json(cls, row) -> "OutputChunk":
        """From ``[step, stream, text]``; TypeError for anything else (a damaged file)."""
        chunk = cls(*row)
        if type(chunk.step) is not int or not isinstance(chunk.stream, str) or not isinstance(chunk.text, str):
            raise TypeError("an output chunk must be [step, stream, text]")
        return chunk


@dataclass
class Trace:
    frames: Sequence[Frame]  # a list, or a StoredFrames: a trace read back from a session file
    status: TraceStatus
    output: list[OutputChunk] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frames)

    def output_until(self, step: int) -> list[OutputChunk]:
        """What the program had written when frame ``step`` was recorded."""
        return [chunk for chunk in self.output if chunk.step <= step]

    @property
    def stdout(self) -> str:
        return "".join(c.text for c in self.output if c.stream == "stdout")

    @property
    def stderr(self) -> str:
        return "".join(c.text for c in self.output if c.stream == "stderr")

    def return_value(self) -> str | None:
        """The repr the entry returned, when the trace reached the entry's return."""
        for frame in reversed(self.frames):
            if frame.event is Event.RETURN and frame.depth == 0:
                return frame.arg
        return None

    def to_json(self) -> dict:
        return {
            "frames": [f.to_json() for f in self.frames],
            "status": self.status.to_json(),
            "output": [[c.step, c.stream, c.text] for c in self.output],
        }

    @classmethod
    def from_json(cls, data: dict) -> "Trace":
        return cls(
            frames=frames_from_json(data["frames"]),
            status=TraceStatus.from_json(data["status"]),
            output=[OutputChunk.from_json(c) for c in data.get("output", [])],
        )
