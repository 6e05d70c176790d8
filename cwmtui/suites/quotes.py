"""Double-quoted string literals for training programs.

The generators write string literals with ``repr()``, so every training program quotes with
``'``. Real code (the demos in ``samples/``, a user's file formatted by black) mostly quotes
with ``"``, and a model that has never seen ``"`` inside a source line cannot copy one: on
``cups = ["a", "b", ...]`` the session-6 model wrote ``cups = [a, a,`` and then spaces to the
frame limit. ``double_quoted(source)`` rewrites the plain single-quoted literals of a program
with double quotes; the family generator applies it to a share of programs. The program's
behaviour, and so every value in its trace (``repr()`` still writes ``'``), stays the same.
"""

from __future__ import annotations

import tokenize

from ..trace.source import source_lines


def double_quoted(source: str) -> str:
    """``source`` with each one-line ``'...'`` literal (no prefix, no ``"`` or backslash
    inside) written ``"..."``; everything else, column for column, as it was."""
    lines = source_lines(source)
    for token in tokenize.generate_tokens(iter(lines).__next__):
        text = token.string
        if token.type != tokenize.STRING or not text.startswith("'") or text.startswith("'''"):
            continue
        (row, start), (end_row, end) = token.start, token.end
        if row != end_row or '"' in text or "\\" in text:
            continue
        line = lines[row - 1]
        lines[row - 1] = line[:start] + '"' + text[1:-1] + '"' + line[end:]
    return "".join(lines)
