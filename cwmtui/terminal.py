"""Untrusted text on its way to a terminal: the one rule.

Program output, reprs, source lines, file names, record ids, model text and server error bodies
are data. Shown on a terminal they are shown as text: every character a terminal would act on
(C0 and C1 controls, ESC and so every CSI / OSC / DCS sequence, DEL, bidirectional overrides and
other format characters) appears as a visible escape (``\\x1b``), never sent raw. Rich markup in
them is never interpreted: the CLI's consoles and the TUI's widgets take them as plain text.

Stdlib only: the engine may name what it shows with these too.
"""

from __future__ import annotations

_KEEP_IN_BLOCKS = {"\n", "\t"}


def _escape(char: str) -> str:
    return char.encode("unicode_escape").decode("ascii")


def printable(text: str) -> str:
    """One line of untrusted text: every character that is not printable as it stands (a
    newline and a tab included) as its visible escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def printable_block(text: str) -> str:
    """Untrusted text of several lines (a program's output): newlines and tabs kept, every
    other unprintable character as its visible escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in _KEEP_IN_BLOCKS else _escape(c) for c in text)
