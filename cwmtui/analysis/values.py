"""Reading rendered values (reprs) as data: their type, literal equality, exception names.

Model output is never executed: ``ast.literal_eval`` reads only Python literals, and anything
else falls back to the shape of the text.
"""

from __future__ import annotations

import ast
import re
import warnings

from ..trace.tokens import SPECIAL_TOKENS

_MAX_LITERAL = 20_000  # longer reprs are not parsed (literal_eval is linear, but no need)
_OBJECT = re.compile(r"^<(?:([\w.]+) object|class '([\w.]+)'|(function|built-in function|bound method|generator object|module)\b)")
_CALL = re.compile(r"^([A-Za-z_][\w.]*)\(")
_EXC_CLASS = re.compile(r"<class '([\w.]+)'>")
_EXC_NAME = re.compile(r"^\s*\(?\s*([A-Za-z_][\w.]*)\s*(?:\(|:|,|\)|$)")

_UNSET = object()
# Model text is compiled under this name, and the warnings that draws ("invalid escape
# sequence", "'is' with a literal" in what the model wrote) are data, not messages for the
# terminal (a TUI's stderr). One filter for that name, set once: catch_warnings() per value
# would double the cost and is not thread-safe.
_SOURCE = "<cwmtui: model value>"
warnings.filterwarnings("ignore", category=Warning, module=re.escape(_SOURCE))


def literal(text: str | None):
    """The Python literal ``text`` spells, or a sentinel when it is not one."""
    if text is None or len(text) > _MAX_LITERAL:
        return _UNSET
    try:
        return ast.literal_eval(compile(text, _SOURCE, "eval", ast.PyCF_ONLY_AST))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError):
        return _UNSET


def type_name(text: str | None) -> str:
    """The type of the value a repr shows: ``str``, ``int``, ``list``, ... (``object`` when unknown)."""
    if text is None:
        return ""
    value = literal(text)
    if value is not _UNSET:
        return type(value).__name__
    match = _OBJECT.match(text)
    if match:
        if match.group(1):
            return match.group(1).rsplit(".", 1)[-1]
        if match.group(2):
            return "type"
        return match.group(3).split()[-1] if match.group(3) != "generator object" else "generator"
    match = _CALL.match(text)
    if match:
        return match.group(1).rsplit(".", 1)[-1]
    return "object"


def _same(a, b) -> bool:
    """Equal as values and of the same types all the way down (``1`` is not ``1.0`` or ``True``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - comparing odd literals must never fail the comparison
        return False


def literal_equal(expected: str | None, predicted: str | None) -> bool:
    """The two reprs differ as text but spell the same Python literal (``{1, 2}`` / ``{2, 1}``)."""
    if expected is None or predicted is None or expected == predicted:
        return False
    a, b = literal(expected), literal(predicted)
    if a is _UNSET or b is _UNSET:
        return False
    return _same(a, b)


def exception_type(arg: str | None) -> str | None:
    """The exception class name in an exception frame's value, whatever its rendering.

    The spec (§4.6) leaves the format open: a ``(type, value, traceback)`` tuple repr, the
    value's repr (``ValueError('x')``), or the bare type name all give ``ValueError``.
    """
    if not arg:
        return None
    match = _EXC_CLASS.search(arg)
    if match is None:
        match = _EXC_NAME.match(arg)
    if match is None:
        return None
    return match.group(1).rsplit(".", 1)[-1]


def exception_matches(expected: str | None, predicted: str | None) -> bool:
    """Lenient scoring of exception values: the exception type names agree."""
    if expected == predicted:
        return True
    name = exception_type(expected)
    if name is None or predicted is None:
        return False
    other = exception_type(predicted)
    if other is not None:
        return other == name
    return re.search(r"\b" + re.escape(name) + r"\b", predicted) is not None


def shorten(text: str | None, width: int = 60) -> str:
    if text is None:
        return "(absent)"
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


_ANGLED = re.compile(r"<[^<>]*>")  # an innermost <...> repr


def value_problem(text: str) -> str | None:
    """Why ``text`` is not a value a trace frame could hold (None: it could): a repr the
    interpreter could have written. That is a Python expression (``['a', 'b']``,
    ``Counter({'a': 1})``, ``[[...]]``) or an object's ``<...>`` repr; not empty, not the
    compression marker ``..``, and with no special token in it (the tokenizer would read that
    as the format's own). Parsed only, never run."""
    stripped = text.strip()
    if not stripped:
        return "a value cannot be empty"
    if stripped == "..":
        return "'..' means 'unchanged' in a trace: write the value itself"
    token = next((t for t in SPECIAL_TOKENS if t in text), None)
    if token is not None:
        return f"a value cannot hold the format's own token {token}"
    if len(stripped) > _MAX_LITERAL:
        return None  # not parsed (the trace cuts such values anyway)
    # an object's <...> repr, alone or inside another (defaultdict(<class 'int'>, {}),
    # [<Node object at 0x…>]), stands for one value: a name, for the parse
    shape, count = _ANGLED.subn("_", stripped)
    while count:
        shape, count = _ANGLED.subn("_", shape)
    try:
        ast.parse(shape, _SOURCE, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        what = exc.msg if isinstance(exc, SyntaxError) and exc.msg else "it does not parse"
        return f"{shorten(stripped, 30)} is not a repr the interpreter could write ({what})"
    return None
