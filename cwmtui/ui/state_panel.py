"""The state at the selected step: each variable as the interpreter and the model have it.

Long values are folded to one line (``z`` unfolds them all, a click on a row unfolds that
one). For a string-valued difference the token lens shows how the model's tokenizer splits
the expected and the predicted value, the pieces that differ marked.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.events import Click

from ..analysis.compare import StepKind
from ..analysis.lens import Lens, byte_pieces, token_lens
from ..terminal import printable
from ..trace import RolloutStatus
from .branch_view import KIND_NAMES, ORIGIN_MARKS, BranchView, VariableRow, readable_exception
from .messages import LensWanted
from .rendered_panel import RenderedPanel

LENS_LIMIT = 3  # token lenses shown at once (the first differing string values)


#: lines an unfolded value takes at most (the panel scrolls; the export keeps the whole value)
UNFOLDED_LINES = 120


def _cell(value: str | None, width: int) -> str:
    """A value in a column ``width`` wide, on one line (cut with "…")."""
    if value is None:
        return "—"
    value = printable(value)  # an ESC or tab the model wrote is shown, not sent to the terminal
    return value if len(value) <= width else value[: width - 1] + "…"


def headline(story: str) -> tuple[str, str]:
    """A story's first sentence, and the rest: split at the first ". " outside `code` and
    quotes (a line of code or a value may hold one)."""
    quote = ""
    for i, ch in enumerate(story):
        if quote:
            if ch == quote:
                quote = ""
        elif ch == "`":
            quote = ch
        elif ch == "." and story[i + 1 : i + 2] == " ":
            return story[: i + 1], story[i + 2 :]
    return story, ""


def wrap_value(value: str, width: int) -> list[str]:
    """A long value unfolded over lines ``width`` wide, broken after a comma or a space where
    one is near the end of a line (a repr's items stay whole), else where the line is full; at
    most UNFOLDED_LINES lines (a key press never draws all of a huge value)."""
    value = printable(value)
    width = max(width, 8)
    lines: list[str] = []
    start = 0
    while start < len(value) and len(lines) < UNFOLDED_LINES:
        end = min(start + width, len(value))
        if end < len(value):
            cut = max(value.rfind(", ", start, end - 1) + 2, value.rfind(" ", start, end) + 1)
            if cut > start + width // 2:
                end = cut
        lines.append(value[start:end])
        start = end
    if start < len(value):
        more = len(value) - start + len(lines[-1])  # the last line gives way to the note
        lines[-1] = f"… {more:,} more characters"[:width]
    return lines


class StatePanel(RenderedPanel):
    COMPONENT_CLASSES = {
        "state--header", "state--changed", "state--differs", "state--same", "state--dim",
        "state--lens-piece", "state--lens-differs", "state--title",
    }

    DEFAULT_CSS = """
    StatePanel { height: 1fr; padding: 0 1; background: $surface; }
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
        super().__init__(id=id)
        self.branch: BranchView | None = None
        self.row = 0
        self.expanded_all = False
        self.expanded: set[str] = set()
        self.view = None  # the SessionView: its engine's lens uses the model's tokenizer
        self.lenses: list[tuple[str, Lens]] = []  # what the panel shows now (read by tests)
        self._names: list[str] = []
        self._table_top = 3  # the title, the header and the rule come first
        self._row_lines: list[tuple[int, int, str]] = []  # (first line, last line, variable)

    def set_view(self, view) -> None:
        self.view = view

    def show(self, branch: BranchView | None, row: int) -> None:
        if branch is not self.branch or row != self.row:
            self.expanded = set()
        self.branch, self.row = branch, row
        self.show_renderable(self._render_state())
        self.call_after_refresh(self._show_first_difference)  # once the new size is laid out

    def _show_first_difference(self) -> None:
        """Scroll (as little as needed) so the first differing variable is in view."""
        if self.branch is None:
            return
        differing = {v.name for v in self.branch.variables(self.row) if v.differs and not v.absent}
        lines = next(((first, last) for first, last, name in self._row_lines if name in differing), None)
        height = self.scrollable_content_region.height
        if lines is None or height <= 0:
            return
        top = int(self.scroll_y)
        first, last = lines
        if last >= top + height:
            self.scroll_to(y=min(first, last - height + 1), animate=False)
        elif first < top:
            self.scroll_to(y=first, animate=False)

    def toggle_fold(self) -> None:
        self.expanded_all = not self.expanded_all
        self.show_renderable(self._render_state())

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        line = offset.y + int(self.scroll_y)
        for first, last, name in self._row_lines:
            if first <= line <= last:
                self.expanded ^= {name}
                self.show_renderable(self._render_state())
                return

    def _table(self, rows: list[VariableRow], empty: str = "(no locals on a return or exception step)") -> Text:
        """variable | interpreter | model | status, laid out by hand (a rich Table costs more,
        and this runs on every key press). Folded values end in "…"; unfolded ones wrap."""
        width = max(20, self.scrollable_content_region.width or 60)
        name_width = min(18, max([len(v.name) + 2 for v in rows] + [9]))
        status_width = 5
        value_width = max(4, (width - name_width - status_width - 3) // 2)
        style = self._style
        text = Text(no_wrap=True, overflow="crop")
        header = style("state--header")
        narrow = value_width < 24
        text.append("variable".ljust(name_width) + " ", header)
        text.append(("interp." if narrow else "interpreter").ljust(value_width) + " ", header)
        text.append("model".ljust(value_width), header)
        text.append("\n" + "─" * (name_width + 2 * value_width + status_width + 3) + "\n", style("state--dim"))
        self._names = []
        self._row_lines = []
        line = self._table_top
        for var in rows:
            expanded = self.expanded_all or var.name in self.expanded
            shown_expected, shown_predicted = var.expected, var.predicted
            if var.name == "(raise)":  # the exception, not the (type, value, traceback) tuple
                shown_expected = readable_exception(var.expected) if var.expected is not None else None
                shown_predicted = readable_exception(var.predicted) if var.predicted is not None else None
            expected = _cell(shown_expected, value_width)
            predicted = "…" if var.pending else _cell(shown_predicted, value_width)
            name = printable(var.name) + (" *" if var.changed else "")
            if len(name) > name_width:
                name = name[: name_width - 1] + "…"
            differs = var.differs and not var.absent
            text.append(name.ljust(name_width) + " ", style("state--changed") if var.changed else "")
            text.append(expected.ljust(value_width) + " ")
            text.append(predicted.ljust(value_width) + " ", style("state--differs") if differs else "")
            text.append(var.status, style("state--differs" if differs else "state--same"))
            text.append("\n")
            height = 1
            if expanded:  # a long value unfolded: each side whole, over the panel's full width
                for label, value, side_style in (("interpreter", shown_expected, ""),
                                                 ("model", None if var.pending else shown_predicted,
                                                  style("state--differs") if differs else "")):
                    if value is None or len(printable(value)) <= value_width:
                        continue
                    for i, piece in enumerate(wrap_value(value, width - 2)):
                        if i == 0:
                            text.append(f"  {label}\n", style("state--dim"))
                            height += 1
                        text.append("  " + piece + "\n", side_style)
                        height += 1
            self._names.append(var.name)
            self._row_lines.append((line, line + height - 1, var.name))
            line += height
        if not rows:
            text.append(empty + "\n", style("state--dim"))
        text.rstrip()
        return text

    def rebuild(self):
        return self._render_state() if self.branch is not None else None

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
        title.append(" · ")
        kind_name = KIND_NAMES.get(kind, kind.value)
        if kind is StepKind.PENDING and not branch.running and branch.status is RolloutStatus.CANCELLED:
            kind_name = "cancelled before this step" + (" (r resumes)" if branch.resumable else "")
        title.append(kind_name,
                     self._style("state--differs" if kind.is_divergence else "state--same"))
        if frame is not None:
            where = f"line {frame.lineno}" if frame.lineno else "line ?"
            title.append(f" · {printable(frame.function or '?')}() {where}")
        if model is not None and model.origin in ORIGIN_MARKS:
            title.append(f" · model frame {model.origin}", self._style("state--changed"))
        rows = branch.variables(row)
        title.no_wrap, title.overflow = True, "ellipsis"
        parts: list[RenderableType] = [title]
        divergence = branch.first_divergence
        rest = ""
        if divergence is not None and divergence.step == row and divergence.explanation:
            # what happened, first (its first sentence); the rest of the story under the table
            head, rest = headline(printable(divergence.explanation))
            parts.append(Text(head))
        self._table_top = sum(len(p.wrap(self.app.console, max(1, self.scrollable_content_region.width or 60)))
                              for p in parts if isinstance(p, Text)) + 2  # the header and its rule
        no_names = frame is not None and frame.locals is not None  # a call or line with nothing in scope
        table = self._table(rows, "(no variables in scope at this step)" if no_names else
                            "(no locals on a return or exception step)")
        parts.append(table)
        self.lenses = []
        for var in [v for v in rows if v.differs and v.string_valued][:LENS_LIMIT]:
            known, lens = self.view.cached_lens(branch, row, var.name) if self.view is not None else (True, None)
            label = self.view.lens_label if self.view is not None else "the model's tokenizer"
            if not known:  # the engine works it out in a worker; characters until it answers
                self.post_message(LensWanted(branch, row, var.name))
            if lens is None:
                lens = token_lens(var.expected, var.predicted, byte_pieces, in_locals=var.in_locals)
                if branch.running:
                    label = "characters, until the rollout stops (then the model's tokenizer)"
                elif known:
                    label = "characters (no tokenizer here)"
                else:
                    label = "characters, until the model's tokenizer answers"
            self.lenses.append((var.name, lens))
            parts.append(self._render_lens(var.name, lens, label))
        if rest:
            parts.append(Text(rest, style=self._style("state--dim")))
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
                shown = printable(piece.text) or "∅"
                text.append(shown, self._style("state--lens-differs" if piece.differs else "state--lens-piece"))
            differs = sum(p.differs for p in pieces)
            text.append(f"  ({len(pieces)} pieces, {differs} differ)\n", self._style("state--dim"))
        return text
