"""A tolerant, incremental parser of CWM trace text (any model's output).

It never raises on bad input: a frame that does not follow the grammar of spec §1.2 becomes a
frame with ``error`` set and the model's text kept in ``raw``. ``".."`` values are resolved by
the rule of spec §4.3 (the same state machine the renderer uses), line numbers come from the
position in the program (the current scope and the line before), and the START_OF_TRACE marker
is removed from actions as a suffix.
"""

from __future__ import annotations

import json
import re
from typing import Iterable

from . import tokens
from .frame import Event, Frame
from .render import Compressor, Special
from .source import Scope, SourceMap

_SPLIT = re.compile("(" + "|".join(re.escape(t) for t in tokens.SPECIAL_TOKENS) + ")")
_SPECIALS = frozenset(tokens.SPECIAL_TOKENS)


def split_text(text: str) -> list[str]:
    """Split CWM text into text pieces and :class:`Special` pieces."""
    pieces: list[str] = []
    for part in _SPLIT.split(text):
        if not part:
            continue
        pieces.append(Special(part) if part in _SPECIALS else part)
    return pieces


class _ScopeState:
    __slots__ = ("scope", "function", "lineno")

    def __init__(self, scope: Scope | None, function: str, lineno: int | None) -> None:
        self.scope = scope
        self.function = function
        self.lineno = lineno


class TraceParser:
    """Feed it text or segments as they arrive; it returns frames as they complete."""

    def __init__(self, source: str | None = None) -> None:
        self.map = SourceMap(source or "")
        self._have_source = source is not None
        self.frames: list[Frame] = []
        self.context: str | None = None
        self.ended = False  # <|end_of_text|> seen
        self.trailing = ""  # text after <|end_of_text|>
        self._pending: list[str] = []
        self._carry = ""  # text that may be the first part of a special token
        self._in_context = False
        self._context_parts: list[str] = []
        self._compressor = Compressor()
        self._stack: list[_ScopeState] = []

    # -- input ---------------------------------------------------------------------------
    def feed(self, data: str | Iterable[str]) -> list[Frame]:
        """Text may arrive in any chunks: a special token split across two is held back until
        it is whole. Segments (a list of text and :class:`Special` pieces) are taken as given."""
        if isinstance(data, str) and not isinstance(data, Special):
            text = self._carry + data
            cut = _held_back(text)
            self._carry = text[cut:]
            pieces: Iterable[str] = split_text(text[:cut])
        else:
            pieces = data
            if self._carry:
                pieces = [self._carry, *pieces]
                self._carry = ""
        done = self._feed(pieces)
        self.frames.extend(done)
        return done

    def _feed(self, pieces: Iterable[str]) -> list[Frame]:
        done: list[Frame] = []
        for piece in pieces:
            if self.ended:
                self.trailing += piece
                continue
            if self._in_context:
                if piece == tokens.FRAME_SEP and isinstance(piece, Special):
                    self._end_context()
                else:
                    self._context_parts.append(piece)
                continue
            if isinstance(piece, Special):
                if piece == tokens.TRACE_CONTEXT_START and not self._pending:
                    self._in_context = True
                    continue
                if piece == tokens.BEGIN_OF_TEXT and not self._pending:
                    continue
                if piece == tokens.END_OF_TEXT:
                    if self._pending:
                        done.append(self._error_frame(self._pending, "frame cut off by end of text"))
                        self._pending = []
                    self.ended = True
                    continue
                if piece == tokens.FRAME_SEP:
                    done.append(self._build(self._pending))
                    self._pending = []
                    continue
            self._pending.append(piece)
        return done

    def finish(self) -> list[Frame]:
        """End of input: a frame still open becomes a format error (the output was cut)."""
        done: list[Frame] = []
        if self._carry:  # the start of a token that never came: it was text after all
            carry, self._carry = self._carry, ""
            done += self._feed([carry])
        if self._in_context:
            self._end_context()
        if self._pending and any(p for p in self._pending):
            done.append(self._error_frame(self._pending, "unterminated frame (generation cut off)"))
        self._pending = []
        self.frames.extend(done)
        return done

    @property
    def pending_text(self) -> str:
        return "".join(self._pending) + self._carry

    def _end_context(self) -> None:
        self._in_context = False
        self.context = "".join(self._context_parts)
        if not self._have_source:
            self.map = SourceMap(self.context)
            self._have_source = True

    # -- frames --------------------------------------------------------------------------
    def _error_frame(self, pieces: list[str], message: str, event: Event | None = None) -> Frame:
        self._compressor.advance(None, None)
        action = ""
        if tokens.ACTION_SEP in pieces:
            after = pieces[pieces.index(tokens.ACTION_SEP) + 1 :]
            if after and not isinstance(after[0], Special):
                action = after[0]
        depth = max(len(self._stack) - 1, 0)
        function = self._stack[-1].function if self._stack else ""
        return Frame(
            event=event,
            action=tokens.strip_marker(action),
            depth=depth,
            function=function,
            error=message,
            raw="".join(pieces),
        )

    def _build(self, pieces: list[str]) -> Frame:
        merged = _merge_text(pieces)
        if not merged:
            return self._error_frame(pieces, "empty frame")
        head = merged[0]
        event = Event.from_token(head) if isinstance(head, Special) else None
        if event is None:
            return self._error_frame(pieces, "frame does not start with an event token")
        rest = merged[1:]
        shown: dict[str, str] | None = None
        if event.has_locals:
            if not rest or isinstance(rest[0], Special):
                return self._error_frame(pieces, "missing locals", event)
            try:
                shown = json.loads(rest[0])
            except (ValueError, RecursionError):
                return self._error_frame(pieces, "locals are not valid JSON", event)
            if not isinstance(shown, dict) or not all(isinstance(v, str) for v in shown.values()):
                return self._error_frame(pieces, "locals are not a JSON object of strings", event)
            rest = rest[1:]
        if not rest or rest[0] != tokens.ACTION_SEP:
            return self._error_frame(pieces, "missing <|action_sep|>", event)
        rest = rest[1:]
        action = ""
        if rest and not isinstance(rest[0], Special):
            action, rest = rest[0], rest[1:]
        arg: str | None = None
        if event.has_arg:
            if len(rest) != 2 or rest[0] != tokens.ARG_SEP or isinstance(rest[1], Special):
                return self._error_frame(pieces, "missing <|arg_sep|> value", event)
            try:
                arg = json.loads(rest[1])
            except (ValueError, RecursionError):
                return self._error_frame(pieces, "value is not valid JSON", event)
            if not isinstance(arg, str):
                return self._error_frame(pieces, "value is not a JSON string", event)
        elif rest:
            return self._error_frame(pieces, "unexpected text after the source line", event)
        if not action.endswith("\n"):
            return self._error_frame(pieces, "source line does not end with a newline", event)
        action = tokens.strip_marker(action)
        return self._frame(event, action, shown, arg, pieces)

    def _frame(self, event: Event, action: str, shown, arg, pieces) -> Frame:
        error = None
        resolved = None
        if shown is not None:
            resolved, missing = self._compressor.resolve(event, shown)
            if missing:
                error = "'..' with no earlier value for " + ", ".join(missing)
        self._compressor.advance(event, resolved)
        top = self._stack[-1] if self._stack else None
        if event is Event.CALL:
            lineno, scope = self.map.enter(action, list(shown or {}))
            state = _ScopeState(scope, self.map.function_name(scope, action), lineno)
            depth = len(self._stack)
            self._stack.append(state)
        else:
            state = top or _ScopeState(None, "?", None)
            lineno = self.map.locate(
                action, state.scope, state.lineno, call=False, same=event is not Event.LINE
            )
            depth = max(len(self._stack) - 1, 0)
            if lineno is not None:
                state.lineno = lineno
            if event is Event.RETURN and self._stack:
                self._stack.pop()
        return Frame(
            event=event,
            action=action,
            locals=resolved,
            arg=arg,
            lineno=lineno,
            depth=depth,
            function=state.function,
            error=error,
            raw="".join(pieces) if error else None,
        )


_LONGEST = max(map(len, tokens.SPECIAL_TOKENS))


def _held_back(text: str) -> int:
    """Where the unfinished special token at the end of ``text`` starts (``len(text)``: none)."""
    start = text.rfind("<", max(0, len(text) - _LONGEST + 1))
    while start != -1:
        tail = text[start:]
        if any(t.startswith(tail) and t != tail for t in tokens.SPECIAL_TOKENS):
            return start
        start = text.rfind("<", max(0, len(text) - _LONGEST + 1), start)
    return len(text)


def _merge_text(pieces: list[str]) -> list[str]:
    merged: list[str] = []
    for piece in pieces:
        if not isinstance(piece, Special) and merged and not isinstance(merged[-1], Special):
            merged[-1] = merged[-1] + piece
        else:
            merged.append(piece)
    return merged


def parse_trace(text: str | Iterable[str], source: str | None = None) -> TraceParser:
    """Parse a whole piece of trace text (with or without the prompt in front)."""
    parser = TraceParser(source)
    parser.feed(text)
    parser.finish()
    return parser
