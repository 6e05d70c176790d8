"""A panel that shows a Rich renderable through the Line API.

Updating a plain Static re-lays-out the whole screen (its height might change); this panel
renders the renderable to lines itself, so an update repaints only the panel, and only a
change in its number of lines (its virtual size) costs a layout.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.segment import Segment
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..terminal import printable_block


def _terminal_safe(line: list[Segment], width: int) -> Strip:
    """A rendered line whose text carries no raw control character (the panels show program and
    model text: :mod:`cwmtui.terminal`'s rule, as a last guard behind the panels' own)."""
    if all(segment.control or segment.text.isprintable() for segment in line):
        return Strip(line, width)
    safe = [s if s.control else Segment(printable_block(s.text), s.style) for s in line]
    return Strip(safe).crop(0, width)


class RenderedPanel(ScrollView, can_focus=True):  # tab focuses it: ↑↓ pgup pgdn scroll it
    DEFAULT_CSS = """
    RenderedPanel { overflow-x: hidden; overflow-y: auto; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._renderable: RenderableType = ""
        self._strips: list[Strip] = []
        self._width = 0

    def show_renderable(self, renderable: RenderableType, end: bool = False) -> None:
        """Show ``renderable``; ``end`` scrolls to its last line (program output)."""
        self._renderable = renderable
        self._lay_out()
        if end:
            self.scroll_to(y=max(0, len(self._strips) - self.scrollable_content_region.height), animate=False)

    def _lay_out(self) -> None:
        width = self.scrollable_content_region.width
        if width <= 0:
            self._strips = []
            return
        console = self.app.console
        options = console.options.update(width=width, height=None, highlight=False)
        lines = console.render_lines(self._renderable, options, style=self.rich_style, pad=True, new_lines=False)
        self._strips = [_terminal_safe(line, width) for line in lines]
        self._width = width
        size = Size(width, len(self._strips))
        if size != self.virtual_size:
            self.virtual_size = size
        self.refresh()

    def on_resize(self) -> None:
        if self.scrollable_content_region.width != self._width:
            self._lay_out()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self.call_later(self._restyle)

    def rebuild(self) -> RenderableType | None:
        """The renderable again, with the new theme's styles (None: keep the old one)."""
        return None

    def _restyle(self) -> None:
        renderable = self.rebuild()
        if renderable is not None:
            self._renderable = renderable
        self._lay_out()

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if 0 <= index < len(self._strips):
            return self._strips[index].adjust_cell_length(width, self.rich_style)
        return Strip([Segment(" " * width, self.rich_style)], width)

    @property
    def lines(self) -> list[str]:
        """The panel's text, line by line (what a test or a screen reader would read)."""
        return [strip.text.rstrip() for strip in self._strips]
