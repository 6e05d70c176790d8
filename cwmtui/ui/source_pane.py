"""The program's source with syntax highlighting and the marks of the selected step.

Gutter marks: ``▶`` the interpreter's line, ``◆`` the model's line (when it is elsewhere,
or on the same line as ``◈``), ``✗`` the line of the first divergence. Highlighting comes from
pygments' tokens, coloured by the theme's ``$syntax-*`` variables.
"""

from __future__ import annotations

from pygments.lexers import PythonLexer
from pygments.token import Comment, Keyword, Name, Number, Operator, String
from rich.segment import Segment
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..terminal import printable
from ..trace.source import source_lines
from ..trace.tokens import has_marker

_TOKEN_CLASSES = (
    (Comment, "source--comment"),
    (String, "source--string"),
    (Number, "source--number"),
    (Keyword, "source--keyword"),
    (Name.Function, "source--function"),
    (Name.Class, "source--function"),
    (Name.Builtin, "source--builtin"),
    (Operator, "source--operator"),
)


def highlight(source: str) -> list[list[tuple[str, str | None]]]:
    """Each source line as (text, component class) pieces."""
    lines: list[list[tuple[str, str | None]]] = [[]]
    for token, text in PythonLexer(stripnl=False, ensurenl=False).get_tokens(source):
        name = None
        for kind, component in _TOKEN_CLASSES:
            if token in kind:
                name = component
                break
        parts = text.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append([])
            if part:
                # escaped as model text is: a terminal acts on a form feed or a U+2028 in a line
                lines[-1].append((printable(part.replace("\t", "    ")), name))
    if lines and not lines[-1]:
        lines.pop()
    return lines


class SourcePane(ScrollView, can_focus=True):  # tab focuses it: the arrows scroll it
    COMPONENT_CLASSES = {
        "source--keyword", "source--string", "source--number", "source--comment",
        "source--function", "source--builtin", "source--operator",
        "source--gutter", "source--truth-mark", "source--model-mark", "source--divergence-mark",
        "source--truth-line", "source--model-line", "source--entry",
    }

    DEFAULT_CSS = """
    SourcePane { overflow-x: auto; overflow-y: auto; scrollbar-size: 1 1; background: $surface; }
    SourcePane > .source--keyword { color: $syntax-keyword; text-style: bold; }
    SourcePane > .source--string { color: $syntax-string; }
    SourcePane > .source--number { color: $syntax-number; }
    SourcePane > .source--comment { color: $syntax-comment; text-style: italic; }
    SourcePane > .source--function { color: $syntax-function; }
    SourcePane > .source--builtin { color: $syntax-builtin; }
    SourcePane > .source--operator { color: $syntax-operator; }
    SourcePane > .source--gutter { color: $cwm-dim; }
    SourcePane > .source--truth-mark { color: $cwm-truth; text-style: bold; }
    SourcePane > .source--model-mark { color: $cwm-model; text-style: bold; }
    SourcePane > .source--divergence-mark { color: $cwm-diverge; text-style: bold; }
    SourcePane > .source--truth-line { background: $cwm-truth-line; }
    SourcePane > .source--model-line { background: $cwm-model-line; }
    SourcePane > .source--entry { color: $cwm-badge; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[list[tuple[str, str | None]]] = []
        self.raw: list[str] = []
        self.truth_line: int | None = None
        self.model_line: int | None = None
        self.divergence_line: int | None = None
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)

    def show_source(self, source: str) -> None:
        self._cache.clear()
        self.raw = [line.rstrip("\r\n") for line in source_lines(source)]
        self.lines = highlight(source)
        while len(self.lines) < len(self.raw):
            self.lines.append([])
        # as shown: tabs widened, unprintable characters escaped
        width = max((sum(len(text) for text, _ in line) for line in self.lines), default=0) + self._gutter_width()
        self.virtual_size = Size(width, len(self.raw))
        self.refresh()

    def _gutter_width(self) -> int:
        return len(str(max(len(self.raw), 1))) + 4

    def mark(self, truth_line: int | None, model_line: int | None, divergence_line: int | None) -> None:
        old = (self.truth_line, self.model_line, self.divergence_line)
        new = (truth_line, model_line, divergence_line)
        if old == new:
            return
        self.truth_line, self.model_line, self.divergence_line = new
        top = int(self.scroll_y)
        width = max(self.virtual_size.width, self.size.width)
        for number in {n for n in old + new if n is not None}:  # repaint just the lines that changed
            self.refresh(Region(0, number - 1 - top, width, 1))
        target = truth_line or model_line
        if target is not None:
            height = self.scrollable_content_region.height
            top = int(self.scroll_y)
            index = target - 1
            if height > 0 and not (top <= index < top + height):
                self.scroll_to(y=max(0, index - height // 3), animate=False)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if index >= len(self.raw):
            return Strip.blank(width, self.rich_style)
        number = index + 1
        key = (index, width, int(self.scroll_x), number == self.truth_line, number == self.model_line,
               number == self.divergence_line)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._render_source_line(index, width)
        return strip

    def _render_source_line(self, index: int, width: int) -> Strip:
        base = self.rich_style
        style = self.get_component_rich_style
        number = index + 1
        line_style = base
        if number == self.truth_line:
            line_style = base + style("source--truth-line", partial=True)
        elif number == self.model_line:
            line_style = base + style("source--model-line", partial=True)
        digits = len(str(max(len(self.raw), 1)))
        if number == self.truth_line and number == self.model_line:
            mark, mark_style = "◈", style("source--truth-mark", partial=True)
        elif number == self.truth_line:
            mark, mark_style = "▶", style("source--truth-mark", partial=True)
        elif number == self.model_line:
            mark, mark_style = "◆", style("source--model-mark", partial=True)
        else:
            mark, mark_style = " ", None
        divergence = "✗" if number == self.divergence_line else " "
        segments = [
            Segment(mark, line_style + mark_style if mark_style else line_style),
            Segment(divergence, line_style + style("source--divergence-mark", partial=True)),
            Segment(f"{number:>{digits}} ", line_style + style("source--gutter", partial=True)),
            Segment("│", line_style + style("source--gutter", partial=True)),
        ]
        gutter = Strip(segments)
        entry = has_marker(self.raw[index])
        code: list[Segment] = []
        for text, component in self.lines[index]:
            piece_style = line_style + style(component, partial=True) if component else line_style
            if entry and "START_OF_TRACE" in text:
                piece_style = line_style + style("source--entry", partial=True)
            code.append(Segment(text, piece_style))
        scroll_x = int(self.scroll_x)
        room = max(0, width - gutter.cell_length)
        return Strip.join([gutter, Strip(code).crop_extend(scroll_x, scroll_x + room, line_style)])
