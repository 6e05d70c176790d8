"""The frame grammar as a byte-level automaton: the token mask of the bundled tokenizer.

The bundled model writes one byte per token (ids 3-258) and the CWM special tokens, so the
grammar of :mod:`cwmtui.model.frame_grammar` is walked here byte by byte: a trie of the
program's action lines, a trie of its local names (as JSON keys), and the few states of a JSON
string. :meth:`FrameAutomaton.allowed` gives the ids the model may write next (a numpy array,
cached per state), :meth:`FrameAutomaton.take` takes the one it wrote. About 15 microseconds a
token, beside a forward pass of about a millisecond. Beyond the Lark grammar it also writes each
name at most once in a frame (``json.dumps`` of a dict never repeats a key), where a program
cannot put keys of its own into its locals.

With ``close_within`` the automaton also keeps the frame short enough to close within the
call's token limit: near the limit only the ids from which the frame can still end in time
remain (a runaway value is cut short as a wrong value, not left as a format error).
"""

from __future__ import annotations

import json

import numpy as np

from ..trace import tokens
from ..trace.frame import Event
from .frame_grammar import FrameConstraint, FrameGrammar

_HEX = b"0123456789abcdef"
_PRINTABLE = bytes(b for b in range(0x20, 0x7F) if b not in b'"\\')
_ESCAPES = b'"\\bfnrtu'
# modes
(START, OBJ_OPEN, OBJ_FIRST, KEY, KEY_FREE, COLON, COLON_SPACE, VALUE_OPEN, VALUE, AFTER_VALUE,
 COMMA_SPACE, KEY_OPEN, ACTION_SEP, LINE, LINE_END, ARG_OPEN, ARG, FRAME_END, DONE) = range(19)


class _Node:
    """A trie node: the bytes that may follow, whether a whole entry ends here, and the fewest
    bytes from here to an entry's end."""

    __slots__ = ("children", "end", "rest", "ids", "entries")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.end = False
        self.rest = 0
        self.ids: np.ndarray | None = None  # the allowed ids, once asked
        self.entries: frozenset[bytes] = frozenset()  # the whole entries below this node


def _trie(entries, with_entries: bool = False) -> _Node:
    root = _Node()
    for entry in entries:
        node = root
        path = [root]
        for byte in entry:
            node = node.children.setdefault(byte, _Node())
            path.append(node)
        node.end = True
        if with_entries:
            for on_path in path:
                on_path.entries = on_path.entries | {entry}
    _measure(root)
    return root


def nodes(root: _Node) -> list[_Node]:
    """Every node of a trie, each before its children (iterative: a long line is a deep trie)."""
    order, stack = [], [root]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.children.values())
    return order


def _measure(root: _Node) -> None:
    for node in reversed(nodes(root)):
        node.rest = 0 if node.end else min((1 + c.rest for c in node.children.values()), default=1 << 20)


class ByteGrammar:
    """What the automaton needs of one program, built once per program and tokenizer:
    the tries and the id arrays of each fixed state."""

    def __init__(self, grammar: FrameGrammar, special_ids: dict[str, int], byte_offset: int) -> None:
        self.grammar = grammar
        self.offset = byte_offset
        self.special = special_ids
        self.lines = _trie(line.encode("utf-8") for line in grammar.lines)
        names = grammar.names
        # a key's JSON text after its opening quote, closing quote included
        self.keys = None if names is None else _trie((json.dumps(n)[1:].encode("ascii") for n in names), with_entries=True)
        self.shortest_key = 2 if self.keys is None else 1 + self.keys.rest  # with its quotes
        # no one byte adds more than this to the fewest bytes left (a long line or name begun):
        # the frame limit is checked only this close to it
        self.slack = self.slack_for(max([len(line.encode("utf-8")) for line in grammar.lines] + [0]))
        b = self._bytes
        self.string = b(_PRINTABLE + b'\\"')
        self.string_open = b(_PRINTABLE + b"\\")  # the closing quote refused
        self.escapes = b(_ESCAPES)
        self.hex = b(_HEX)
        self.hex_low = b(b"01789abcdef")  # \u00X: a control character, DEL or past ASCII
        self.hex_f = b(b"f")
        self.literal = {ch: b(bytes([ch])) for ch in b'{}":, '}
        self.close_or_next = b(b",}")
        self.open_or_close = b(b'"}')
        self.sp = {name: np.array([special_ids[name]], dtype=np.int64) for name in
                   (tokens.ACTION_SEP, tokens.FRAME_SEP, tokens.ARG_SEP)}
        self.event_ids = {special_ids[e.token]: e for e in Event}

    def slack_for(self, longest_line: int) -> int:
        """How close to the frame limit the mask starts checking: the most one token can add to
        the way out (beginning the longest line, ``longest_line`` long, or the longest name,
        each of whose characters may take a ``\\uXXXX`` escape), and a margin."""
        return max([longest_line] + [len(n) * 6 + 2 for n in self.grammar.names or ()]) + 16

    def _bytes(self, data: bytes) -> np.ndarray:
        return np.array(sorted(b + self.offset for b in data), dtype=np.int64)

    def node_ids(self, node: _Node) -> np.ndarray:
        ids = node.ids
        if ids is None:
            ids = node.ids = np.array(sorted(b + self.offset for b in node.children), dtype=np.int64)
        return ids


class FrameAutomaton:
    """Where one generation stands in the frame grammar (see the module docstring)."""

    __slots__ = ("g", "c", "mode", "node", "event", "key", "key_bytes", "dots", "escape", "last", "used")

    def __init__(self, grammar: ByteGrammar, constraint: FrameConstraint) -> None:
        self.g = grammar
        self.c = constraint
        self.node: _Node | None = None
        self.key = ""  # the key whose value is being written
        self.used: set[bytes] = set()  # the keys of this frame so far (as trie entries): a name is written once
        self.key_bytes = bytearray()  # the key's JSON text so far (after its opening quote)
        self.dots = 0  # the value so far is this many dots (-1: not only dots)
        self.escape = ""  # in a string: "" none, "\\" after a backslash, "u" and the hex digits typed
        self.event: Event | None = constraint.event
        self.last: np.ndarray | None = None  # what allowed() gave last
        if constraint.start == "value":
            self.mode = ARG_OPEN
        elif constraint.start == "event":
            assert constraint.event is not None
            self._after_event(constraint.event)
        else:
            self.mode = START

    def copy(self) -> "FrameAutomaton":
        other = FrameAutomaton.__new__(FrameAutomaton)
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        other.key_bytes = bytearray(self.key_bytes)
        other.used = set(self.used)
        return other

    # -- what may come next ------------------------------------------------------------------
    def allowed(self, room: int | None = None) -> np.ndarray:
        """The ids the model may write next; ``room``: the tokens the call may still write
        (with ``close_within``, ids after which the frame cannot close in time are left out)."""
        ids = self._allowed()
        if room is not None and self.c.close_within and self.mode != START and room <= self.rest() + self.g.slack:
            rests = {i: self._rest_after(i) for i in ids.tolist()}
            fitting = [i for i, rest in rests.items() if rest <= room - 1]
            if not fitting and rests:  # it cannot close in time: as soon as it can
                fitting = [i for i, rest in rests.items() if rest == min(rests.values())]
            ids = np.array(fitting, dtype=np.int64)
        self.last = ids
        return ids

    def take(self, token: int) -> bool:
        """Advance past ``token`` if the last :meth:`allowed` had it; False (and no move) if not."""
        last = self.last
        if last is None:
            last = self.allowed()
        at = int(np.searchsorted(last, token))
        if at >= len(last) or int(last[at]) != token:
            return False
        self.advance(token)
        self.last = None
        return True

    def _allowed(self) -> np.ndarray:
        g, mode = self.g, self.mode
        if mode == VALUE or mode == ARG or mode == KEY_FREE:
            escape = self.escape
            if not escape:
                if mode == VALUE and self.dots == 2 and not self._may_elide():
                    return g.string_open
                return g.string
            if escape == "\\":
                return g.escapes
            typed = escape[1:]
            if typed == "00":
                return g.hex_low
            if typed == "007":
                return g.hex_f
            return g.hex
        if mode == KEY or mode == LINE:
            assert self.node is not None
            if mode == KEY and self.used:  # only toward a name not written yet in this frame
                used = self.used
                return np.array([b + g.offset for b, child in sorted(self.node.children.items())
                                 if child.entries - used], dtype=np.int64)
            return g.node_ids(self.node)
        if mode == START:
            ids = [g.special[e.token] for e in self.c.events]
            if self.c.may_end:
                ids.append(g.special[tokens.END_OF_TEXT])
            return np.array(sorted(ids), dtype=np.int64)
        if mode == OBJ_OPEN:
            return g.literal[ord("{")]
        if mode == OBJ_FIRST:
            return g.literal[ord("}")] if g.keys is not None and not g.keys.entries else g.open_or_close
        if mode == AFTER_VALUE and g.keys is not None and not g.keys.entries - self.used:
            return g.literal[ord("}")]  # every name is written
        if mode == COLON:
            return g.literal[ord(":")]
        if mode == COLON_SPACE or mode == COMMA_SPACE:
            return g.literal[ord(" ")]
        if mode == VALUE_OPEN or mode == KEY_OPEN or mode == ARG_OPEN:
            return g.literal[ord('"')]
        if mode == AFTER_VALUE:
            return g.close_or_next
        if mode == ACTION_SEP:
            return g.sp[tokens.ACTION_SEP]
        if mode == LINE_END:
            assert self.event is not None
            return g.sp[tokens.ARG_SEP if self.event.has_arg else tokens.FRAME_SEP]
        if mode == FRAME_END:
            return g.sp[tokens.FRAME_SEP]
        return np.zeros(0, dtype=np.int64)  # DONE

    def _may_elide(self) -> bool:
        base = self.c.base
        return self.event is Event.LINE and base is not None and self.key in base

    # -- taking the model's token ------------------------------------------------------------
    def advance(self, token: int) -> None:
        """Move past ``token`` (one :meth:`allowed` gave)."""
        g, mode = self.g, self.mode
        byte = token - g.offset
        if mode == START:
            event = g.event_ids.get(token)
            if event is None:  # the end of text
                self.mode = DONE
                return
            self.event = event
            self._after_event(event)
        elif mode == VALUE or mode == ARG or mode == KEY_FREE:
            self._string_byte(byte)
        elif mode == KEY or mode == LINE:
            assert self.node is not None
            node = self.node = self.node.children[byte]
            if node.end:
                if mode == KEY:
                    entry = bytes(self.key_bytes) + bytes([byte])
                    self.key = self._key_of(entry)
                    self.used.add(entry)
                    self.mode = COLON
                else:
                    self.mode = LINE_END
            elif mode == KEY:
                self.key_bytes.append(byte)
        elif mode == OBJ_OPEN:
            self.mode = OBJ_FIRST
        elif mode == OBJ_FIRST:
            if byte == ord("}"):
                self.mode = ACTION_SEP
            else:
                self._start_key()
        elif mode == COLON:
            self.mode = COLON_SPACE
        elif mode == COLON_SPACE:
            self.mode = VALUE_OPEN
        elif mode == VALUE_OPEN:
            self.mode, self.dots, self.escape = VALUE, 0, ""
        elif mode == AFTER_VALUE:
            self.mode = COMMA_SPACE if byte == ord(",") else ACTION_SEP
        elif mode == COMMA_SPACE:
            self.mode = KEY_OPEN
        elif mode == KEY_OPEN:
            self._start_key()
        elif mode == ACTION_SEP:
            self.mode, self.node = LINE, self.g.lines
        elif mode == LINE_END:
            self.mode = ARG_OPEN if token == g.special[tokens.ARG_SEP] else DONE
        elif mode == ARG_OPEN:
            self.mode, self.escape = ARG, ""
        elif mode == FRAME_END:
            self.mode = DONE

    def _after_event(self, event: Event) -> None:
        self.mode = OBJ_OPEN if event.has_locals else ACTION_SEP

    def _start_key(self) -> None:
        self.key_bytes = bytearray()
        if self.g.keys is None:
            self.mode, self.escape = KEY_FREE, ""
        else:
            self.mode, self.node = KEY, self.g.keys

    @staticmethod
    def _key_of(text: bytes | bytearray) -> str:
        return json.loads(b'"' + text)

    def _string_byte(self, byte: int) -> None:
        escape = self.escape
        if escape:
            if escape == "\\":
                self.escape = "u" if byte == ord("u") else ""
            else:
                escape += chr(byte)
                self.escape = "" if len(escape) == 5 else escape
            if self.mode == KEY_FREE:
                self.key_bytes.append(byte)
            self.dots = -1
            return
        if byte == ord('"'):
            mode = self.mode
            if mode == VALUE:
                self.mode = AFTER_VALUE
            elif mode == ARG:
                self.mode = FRAME_END
            else:  # KEY_FREE
                self.key = self._key_of(self.key_bytes + b'"')
                self.mode = COLON
            return
        if byte == ord("\\"):
            self.escape = "\\"
        if self.mode == KEY_FREE:
            self.key_bytes.append(byte)
        elif byte == ord(".") and 0 <= self.dots < 3:
            self.dots += 1
        else:
            self.dots = -1

    # -- the frame limit ---------------------------------------------------------------------
    def rest(self) -> int:
        """The fewest tokens from here to the end of the frame."""
        g, mode = self.g, self.mode
        event = self.event
        tail = 4 if event is not None and event.has_arg else 1  # after the line: <|arg_sep|>"" or <|frame_sep|>
        after_object = 1 + g.lines.rest + tail  # <|action_sep|>, a line, the tail
        pending = 0
        if self.escape:
            pending = 1 if self.escape == "\\" else 5 - len(self.escape)
        if mode == START:
            return 1
        if mode == DONE:
            return 0
        if mode == LINE:
            assert self.node is not None
            return self.node.rest + tail
        if mode == LINE_END:
            return tail
        if mode == ACTION_SEP:
            return after_object
        if mode == ARG_OPEN:
            return 3
        if mode == ARG:
            return pending + 2
        if mode == FRAME_END:
            return 1
        if mode == OBJ_OPEN:
            return 2 + after_object
        if mode == OBJ_FIRST or mode == AFTER_VALUE:
            return 1 + after_object
        pair_end = 1 + 1 + after_object  # the value's closing quote, "}", and on
        if mode == VALUE:
            elided = self.dots == 2 and not self.escape and not self._may_elide()
            return pending + (1 if elided else 0) + pair_end
        if mode == VALUE_OPEN:
            return 1 + pair_end
        if mode == COLON_SPACE:
            return 2 + pair_end
        if mode == COLON:
            return 3 + pair_end
        if mode == KEY:
            assert self.node is not None
            return self._key_rest() + 3 + pair_end
        if mode == KEY_FREE:
            return pending + 1 + 3 + pair_end
        if mode == KEY_OPEN:
            return self._shortest_key() + 3 + pair_end
        return 1 + self._shortest_key() + 3 + pair_end  # COMMA_SPACE

    def _key_rest(self) -> int:
        """The fewest bytes that finish the key begun, toward a name not written yet in this
        frame (the automaton writes none twice; counting one would close the frame too late)."""
        node = self.node
        assert node is not None
        if not self.used:
            return node.rest
        left = node.entries - self.used
        return min(len(e) for e in left) - len(self.key_bytes) if left else node.rest

    def _shortest_key(self) -> int:
        """The fewest bytes of a key still to write, its quotes included."""
        g = self.g
        if not self.used or g.keys is None:
            return g.shortest_key
        left = g.keys.entries - self.used
        return 1 + min(len(e) for e in left) if left else g.shortest_key

    def _rest_after(self, token: int) -> int:
        other = self.copy()
        other.advance(token)
        return other.rest()
