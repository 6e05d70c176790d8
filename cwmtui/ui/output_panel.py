"""The real program's output (stdout and stderr) up to the selected step."""

from __future__ import annotations

from rich.text import Text

from ..terminal import printable_block
from ..trace import OutputChunk
from .rendered_panel import RenderedPanel


class OutputPanel(RenderedPanel):
    COMPONENT_CLASSES = {"output--stderr", "output--empty"}

    DEFAULT_CSS = """
    OutputPanel { height: 1fr; padding: 0 1; background: $surface; }
    OutputPanel > .output--stderr { color: $cwm-diverge; }
    OutputPanel > .output--empty { color: $cwm-dim; text-style: italic; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chunks: list[OutputChunk] = []
        self.total = 0
        self.known = False  # the program's output has been given (before: it has not run yet)

    def show(self, chunks: list[OutputChunk], total: int) -> None:
        if (self.known and len(chunks) == len(self.chunks) and total == self.total and chunks[-1:] == self.chunks[-1:]
                and self._strips):
            return
        self.chunks, self.total, self.known = chunks, total, True
        self.show_renderable(self._render_output(), end=True)

    @property
    def text(self) -> str:
        return "".join(chunk.text for chunk in self.chunks)

    def rebuild(self):
        return self._render_output()

    def _render_output(self) -> Text:
        if not self.chunks:
            if not self.known:  # the program is still running under the interpreter: nothing to say yet
                message = "(running the program…)"
            else:
                message = "(no output yet)" if self.total else "(the program writes nothing)"
            return Text(message, style=self.get_component_rich_style("output--empty", partial=True))
        text = Text()
        stderr = self.get_component_rich_style("output--stderr", partial=True)
        for chunk in self.chunks[-400:]:  # the program's own characters: shown, never obeyed
            text.append(printable_block(chunk.text), stderr if chunk.stream == "stderr" else "")
        return text
