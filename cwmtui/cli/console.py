"""The CLI's Rich consoles: untrusted text printed as text (the rule of :mod:`cwmtui.terminal`).

Every string a verb prints through Rich is data (a source line, a value, a model's line, a file
name, a record id): markup in it is never read (``markup=False``: ``"[/x]"`` is four characters,
not an error; ``"[link=...]"`` no link), and every segment's text goes out with its control
characters escaped, whatever renderable (a table, a title, a progress bar) carries it. Text
objects a verb builds itself are built from :func:`~cwmtui.terminal.printable` text.
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment

from ..terminal import printable_block


class TerminalConsole(Console):
    """A Console whose rendered text never carries a raw control character."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    def render_str(self, text: str, **kwargs):
        """Every string a renderable carries (a table's cells and title) becomes Text here: its
        controls escaped first, since Rich would drop a BEL or a CR without a trace."""
        return super().render_str(printable_block(text), **kwargs)

    def render(self, renderable, options=None):
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control or text.isprintable():
                yield segment
            else:
                yield Segment(printable_block(text), segment.style, segment.control)
