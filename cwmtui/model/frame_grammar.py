"""The grammar of one CWM frame for one program: what a format-constrained rollout allows.

A frame is (spec §1.2) an event token; for call and line frames a JSON object of the names in
scope to JSON strings (``json.dumps`` defaults: ``", "``, ``": "``, ASCII with lowercase
``\\uXXXX`` escapes); ``<|action_sep|>``; one of the program's own source lines, byte for byte
as the trace writes it (the START_OF_TRACE marker left out, the newline kept); for return and
exception frames ``<|arg_sep|>`` and a JSON string; ``<|frame_sep|>``. The trace ends with
``<|end_of_text|>`` once the entry function has returned.

:class:`FrameGrammar` holds what is fixed per program (its action lines and local names);
:class:`FrameConstraint` is one generation's request: where in a frame it starts and what the
rollout knows there (which events may come, whether the trace may end, which names ``".."`` may
stand for). Backends turn it into a token mask: the byte-level automaton of
:mod:`cwmtui.model.byte_constraint` for the bundled tokenizer, a Lark grammar (:meth:`lark`)
for llguidance (transformers models) and for a vLLM server's structured output.

The constraint never refuses what the interpreter writes (a test feeds every sample's and
CRUXEval program's true trace through it); it refuses only what the parser would call a format
error, and names that no scope of the program has.
"""

from __future__ import annotations

import ast
import json
import re
import types
from dataclasses import dataclass

from ..trace import tokens
from ..trace.frame import Event
from ..trace.source import SourceMap

#: a program that names one of these can put any key into its own locals (``locals()[k] = v``,
#: ``exec``, a frame's ``f_locals``): its keys are then any JSON string
_WRITES_LOCALS = re.compile(r"\b(?:locals|vars|exec|f_locals|_getframe|currentframe)\b")
#: names a class body's namespace holds besides the ones it assigns
_CLASS_NAMES = ("__module__", "__qualname__", "__doc__", "__annotations__", "__classcell__", "__orig_bases__")
_CO_NEWLOCALS = 0x02  # a function's code; a class body's lacks it


@dataclass(frozen=True)
class FrameGrammar:
    """What a frame of ``program`` may hold. ``lines``: the action lines (sorted, unique);
    ``names``: the local names any scope can show, or None when the program may write any key
    into its locals."""

    lines: tuple[str, ...]
    names: tuple[str, ...] | None

    @classmethod
    def of_source(cls, source: str) -> "FrameGrammar":
        source_map = SourceMap(source)
        lines = sorted({tokens.strip_marker(source_map.line(n)) for n in source_map.action_lines()})
        names = None if _WRITES_LOCALS.search(source) or _prepares_namespace(source) else tuple(sorted(_local_names(source)))
        return cls(tuple(line for line in lines if line.endswith("\n")), names)

    # -- Lark, for llguidance (local transformers models) and vLLM's structured output -------
    def lark(self, constraint: "FrameConstraint") -> str:
        """The rest of the frame from where ``constraint`` starts, as a Lark grammar (llguidance's
        dialect; special tokens by name, ``<|action_sep|>``)."""
        rules = [f"start: {self._start_rule(constraint)}"]
        rules.append("LINE: " + _alternatives(self.lines))
        rules.append("STRING: /" + _STRING + "/")
        base = sorted(constraint.base or ())
        keys = None if self.names is None else [json.dumps(n) for n in self.names]
        rules.append("CALL_LOCALS: /" + _object(_pairs(keys, [])) + "/")
        rules.append("LINE_LOCALS: /" + _object(_pairs(keys, [json.dumps(n) for n in base])) + "/")
        return "\n".join(rules) + "\n"

    def _start_rule(self, c: "FrameConstraint") -> str:
        if c.start == "value":
            return f"STRING {tokens.FRAME_SEP}"
        if c.start == "event":
            assert c.event is not None
            return _frame_rest(c.event)
        alternatives = [f"{event.token} {_frame_rest(event)}" for event in c.events]
        if c.may_end:
            alternatives.append('""')  # the trace may end here: the end of text comes next
        return " | ".join(alternatives) if alternatives else '""'


@dataclass(frozen=True)
class FrameConstraint:
    """One generation under the frame grammar.

    ``start``: ``"frame"`` (nothing of the frame written yet), ``"event"`` (its event token,
    ``event``, was spliced in) or ``"value"`` (the return or exception value comes next, after a
    spliced action and ``<|arg_sep|>``). At a frame's start ``events`` may come, and
    ``<|end_of_text|>`` when ``may_end``. ``base``: the names a line frame may write ``".."``
    for (the last call or line frame's, spec §4.3), None where there is none.
    ``close_within``: the frame must close within the call's token limit (the frame limit,
    not the trace's budget), so a runaway value is cut short as a value, not as a format error.
    """

    grammar: FrameGrammar
    start: str = "frame"
    event: Event | None = None
    events: tuple[Event, ...] = tuple(Event)
    may_end: bool = False
    base: frozenset[str] | None = None
    close_within: bool = False


def _prepares_namespace(source: str) -> bool:
    """A class statement whose namespace its metaclass may fill before the body runs (``Enum``
    puts ``_generate_next_value_`` there): one with a base other than ``object``, or a keyword
    (``metaclass=``). Its keys are then any JSON string, as for a program writing its locals."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.ClassDef) and (node.keywords or any(
        not (isinstance(base, ast.Name) and base.id == "object") for base in node.bases))
        for node in ast.walk(tree))


def _local_names(source: str) -> set[str]:
    try:
        code = compile(source, "<cwmtui>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    stack = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    while stack:
        code = stack.pop()
        names.update(code.co_varnames, code.co_cellvars, code.co_freevars)
        if not code.co_flags & _CO_NEWLOCALS:  # a class body: its namespace
            names.update(code.co_names, _CLASS_NAMES)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _frame_rest(event: Event) -> str:
    """The rule of a frame after its event token."""
    if event.has_locals:
        local = "CALL_LOCALS" if event is Event.CALL else "LINE_LOCALS"
        return f"{local} {tokens.ACTION_SEP} LINE {tokens.FRAME_SEP}"
    return f"{tokens.ACTION_SEP} LINE {tokens.ARG_SEP} STRING {tokens.FRAME_SEP}"


# -- regular expressions of the JSON pieces (json.dumps with ensure_ascii) -------------------
#: ``\uXXXX`` as json.dumps writes it: lowercase, for a control character, DEL or non-ASCII only
#: (never ``\u002e``: a dot spelled so would make ``".."`` out of something else)
_ESC_U = r"\\u(?:00[01][0-9a-f]|007f|00[89a-f][0-9a-f]|0[1-9a-f][0-9a-f]{2}|[1-9a-f][0-9a-f]{3})"
_CHAR = r'(?:[ !#-\[\]-~]|\\["\\bfnrt]|' + _ESC_U + ")"
_NOT_DOT = r'(?:[ !#-\-\/-\[\]-~]|\\["\\bfnrt]|' + _ESC_U + ")"
_STRING = f'"{_CHAR}*"'
#: a JSON string other than ``".."``: empty, or not starting with a dot, or a dot and not a dot,
#: or two dots and more
_NOT_ELIDED = rf'"(?:{_NOT_DOT}{_CHAR}*|\.(?:{_NOT_DOT}{_CHAR}*)?|\.\.{_CHAR}+)?"'


def _pairs(keys: list[str] | None, base: list[str]) -> str:
    """One ``"name": "value"`` pair: any name's value but ``".."``, or a base name's any value."""
    key = _STRING if keys is None else _alternatives_regex(keys)
    pair = f"{key}: {_NOT_ELIDED}"
    if base:
        pair = f"(?:{_alternatives_regex(base)}: {_STRING}|{pair})"
    return pair


def _object(pair: str) -> str:
    return r"\{(?:" + pair + "(?:, " + pair + r")*)?\}"


def _alternatives_regex(texts: list[str]) -> str:
    if not texts:
        return "[^\\s\\S]"  # matches nothing
    return "(?:" + "|".join(_regex_literal(t) for t in texts) + ")"


def _alternatives(texts) -> str:
    """A Lark terminal body that is one of ``texts`` exactly."""
    return "/" + _alternatives_regex(list(texts)) + "/"


def _regex_literal(text: str) -> str:
    """``text`` as a regex (inside a Lark ``/.../``) that matches it and nothing else."""
    out = []
    for ch in text:
        if ch in _META:
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


#: what a regex inside Lark's ``/.../`` must escape (llguidance's Rust syntax, xgrammar's too);
#: other punctuation must not be (``\<`` is a word boundary in Rust's)
_META = frozenset("\\.+*?()|[]{}^$/")
