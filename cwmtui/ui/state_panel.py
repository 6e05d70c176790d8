"""The state at the selected step: each variable as the interpreter and the model have it.

Long values are folded to one line (``z`` unfolds them all, a click on a row unfolds that
one). For a string-valued difference the token lens shows how the model's tokenizer splits
the expected and the predicted value, the pieces that differ marked.
"""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.events import Click
from textual.widgets import Static

from ..analysis.lens import Lens, byte_pieces, token_lens
from .branch_view import KIND_NAMES, BranchView, VariableRow

FOLD = 48
LENS_LIMIT = 3  # token lenses shown at once (the first differing string values)


def fold(value: str | None, expanded: bool, width: int = FOLD) -> str:
    if value is None:
        return "—"
    if expanded or len(value) <= width:
        return value
    return value[: width - 1] + f"… (+{len(value) - width + 1})"


class StatePanel(Static, can_focus=False):
    COMPONENT_CLASSES = {
        "state--header", "state--changed", "state--differs", "state--same", "state--dim",
        "state--lens-piece", "state--lens-differs", "state--title",
    }

    DEFAULT_CSS = """
    StatePanel { overflow-y: auto; height: 1fr; padding: 0 1; background: $surface; }
    StatePanel > .state--header { color: $cwm-dim; text-style: bold; }
    StatePanel > .state--changed { color: $cwm-changed; text-style: bold; }
    StatePanel > .state--differs { color: $cwm-diverge; text-style: bold; }
    StatePanel > .state--same { color: $cwm-match; }
    StatePanel > .state--dim { color: $cwm-dim; }
    StatePanel > .state--lens-piece { color: $foreground; text-style: underline; }
    StatePanel > .state--lens-differs { color: $cwm-diverge; text-style: bold reverse; }
    StatePanel > .state--title { color: $cwm-truth; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.branch: BranchView | None = None
        self.row = 0
        self.expanded_all = False
        self.expanded: set[str] = set()
        self.view = None  # the SessionView: its engine's lens uses the model's tokenizer
        self.lenses: list[tuple[str, Lens]] = []  # what the panel shows now (read by tests)
        self._names: list[str] = []
        self._table_top = 3  # title, header, rule

    def set_view(self, view) -> None:
        self.view = view

    def show(self, branch: BranchView | None, row: int) -> None:
        if branch is not self.branch or row != self.row:
            self.expanded = set()
        self.branch, self.row = branch, row
        self.update(self._render_state())

    def toggle_fold(self) -> None:
        self.expanded_all = not self.expanded_all
        self.update(self._render_state())

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = offset.y + int(self.scroll_y) - self._table_top
        if 0 <= index < len(self._names):
            name = self._names[index]
            self.expanded ^= {name}
            self.update(self._render_state())

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.branch is not None:
            self.update(self._render_state())

    def _style(self, name: str):
        return self.get_component_rich_style(name, partial=True)

    def _render_state(self) -> RenderableType:
        branch, row = self.branch, self.row
        if branch is None or not 0 <= row < len(branch):
            self.lenses = []
            self._names = []
            return Text("no step selected", style=self._style("state--dim"))
        truth, model = branch.truth_at(row), branch.model_at(row)
        kind = branch.kind(row)
        frame = truth or model
        title = Text()
        title.append(f"step {row}", self._style("state--title"))
        if frame is not None:
            where = f"line {frame.lineno}" if frame.lineno else "line ?"
            title.append(f" · {frame.function or '?'}() · {where} · ")
        else:
            title.append(" · ")
        title.append(KIND_NAMES.get(kind, kind.value),
                     self._style("state--differs" if kind.is_divergence else "state--same"))
        if model is not None and model.origin in ("forced", "edited"):
            title.append(f" · model frame {model.origin}", self._style("state--changed"))
        table = Table(box=box.SIMPLE_HEAD, expand=True, padding=(0, 1), show_edge=False,
                      header_style=self._style("state--header"), pad_edge=False)
        rows = branch.variables(row)
        name_width = min(18, max([len(v.name) + 2 for v in rows] + [8]))
        table.add_column("variable", no_wrap=True, width=name_width, overflow="ellipsis")
        narrow = 0 < self.size.width < 56
        table.add_column("interp." if narrow else "interpreter", ratio=1, overflow="fold")
        table.add_column("model", ratio=1, overflow="fold")
        table.add_column("", no_wrap=True, width=5)
        self._names = []
        for var in rows:
            expanded = self.expanded_all or var.name in self.expanded
            name = Text(var.name, style=self._style("state--changed") if var.changed else "")
            if var.changed:
                name.append(" *")
            expected = Text(fold(var.expected, expanded))
            predicted = Text(fold(var.predicted, expanded),
                             style=self._style("state--differs") if var.differs else "")
            status = Text(var.status, style=self._style("state--differs" if var.differs else "state--same"))
            table.add_row(name, expected, predicted, status)
            self._names.append(var.name)
        if not rows:
            table.add_row(Text("(no locals on a return or exception step)", style=self._style("state--dim")), "", "", "")
        parts: list[RenderableType] = [title, table]
        self.lenses = []
        for var in [v for v in rows if v.differs and v.string_valued][:LENS_LIMIT]:
            lens = self.view.lens(branch, row, var.name) if self.view is not None else None
            label = "the model's tokenizer"
            if lens is None:
                lens = token_lens(var.expected, var.predicted, byte_pieces, in_locals=var.in_locals)
                label = "characters (no tokenizer here)"
            self.lenses.append((var.name, lens))
            parts.append(self._render_lens(var.name, lens, label))
        divergence = branch.first_divergence
        if divergence is not None and divergence.step == row and divergence.explanation:
            parts.append(Text(""))
            parts.append(Text(divergence.explanation, style=self._style("state--dim")))
        return Group(*parts)

    def _render_lens(self, name: str, lens: Lens, label: str) -> RenderableType:
        text = Text()
        text.append(f"token lens · {name}", self._style("state--title"))
        text.append(f" · split by {label}\n", self._style("state--dim"))
        for label, pieces in (("interpreter", lens.expected), ("model      ", lens.predicted)):
            text.append(f"  {label} ", self._style("state--dim"))
            for i, piece in enumerate(pieces):
                if i:
                    text.append("│", self._style("state--dim"))
                shown = piece.text.replace("\n", "\\n") or "∅"
                text.append(shown, self._style("state--lens-differs" if piece.differs else "state--lens-piece"))
            differs = sum(p.differs for p in pieces)
            text.append(f"  ({len(pieces)} pieces, {differs} differ)\n", self._style("state--dim"))
        return text
