"""A timeline: one trace (the interpreter's or the model's), one row per step.

Built on Textual's Line API (a ScrollView whose ``render_line`` draws only the rows on
screen), so a trace of 100,000 steps costs no more to show or move through than one of 100.
The two timelines share the cursor and the scroll position: the app moves both.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..analysis.compare import StepKind
from ..terminal import printable
from ..trace import Event, Frame, RolloutStatus
from .branch_view import ORIGIN_MARKS, BranchView, readable_exception

EVENT_MARKS = {Event.CALL: "→", Event.LINE: " ", Event.RETURN: "←", Event.EXCEPTION: "!"}
KIND_MARKS = {StepKind.STATE: "≠", StepKind.ACTION: "⇄", StepKind.EVENT: "⇄", StepKind.VALUE: "≠",
              StepKind.FORMAT: "✗", StepKind.MISSING: "∅", StepKind.EXTRA: "+", StepKind.PENDING: "…",
              StepKind.UNCHECKED: "?"}
VALUE_WIDTH = 28
FIRST_MARK = "●"  # the first divergence (in the interpreter's column; the model's shows its kind)


def short(value: str, width: int = VALUE_WIDTH) -> str:
    # segments go to the terminal as they are: model text must not carry an ESC or a tab there
    value = printable(value[: width * 4 + 1])
    return value if len(value) <= width else value[: width - 1] + "…"


class Timeline(ScrollView, can_focus=False):
    """The rows of one side of a branch. ``side`` is "truth" or "model"."""

    COMPONENT_CLASSES = {
        "timeline--cursor",
        "timeline--step",
        "timeline--lineno",
        "timeline--changed",
        "timeline--divergent",
        "timeline--divergent-row",
        "timeline--off-path",
        "timeline--pending",
        "timeline--dim",
        "timeline--forced",
        "timeline--end",
        "timeline--first",
    }

    DEFAULT_CSS = """
    Timeline {
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        background: $surface;
    }
    Timeline > .timeline--cursor { background: $cwm-cursor; color: $cwm-cursor-text; text-style: bold; }
    Timeline > .timeline--step { color: $cwm-dim; }
    Timeline > .timeline--lineno { color: $cwm-dim; }
    Timeline > .timeline--changed { color: $cwm-changed; text-style: bold; }
    Timeline > .timeline--divergent { color: $cwm-diverge; text-style: bold underline; }
    Timeline > .timeline--divergent-row { background: $cwm-diverge-background; }
    Timeline > .timeline--off-path { color: $cwm-off-path; text-style: italic; }
    Timeline > .timeline--pending { color: $cwm-pending; text-style: italic; }
    Timeline > .timeline--dim { color: $cwm-dim; }
    Timeline > .timeline--forced { color: $cwm-badge; text-style: bold; }
    Timeline > .timeline--end { color: $cwm-dim; text-style: bold; }
    Timeline > .timeline--first { color: $cwm-diverge; text-style: bold reverse; }
    """

    class Selected(Message):
        """The user clicked a row."""

        def __init__(self, row: int) -> None:
            self.row = row
            super().__init__()

    cursor: reactive[int] = reactive(0, always_update=False)

    def __init__(self, side: str, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.side = side
        self.branch: BranchView | None = None
        self.partner: Timeline | None = None
        self._cache: LRUCache[tuple, Strip] = LRUCache(512)

    # -- data -------------------------------------------------------------------------------
    def show_branch(self, branch: BranchView | None) -> None:
        self.branch = branch
        self._cache.clear()
        self.update_size()

    def update_size(self) -> None:
        rows = len(self.branch) + 1 if self.branch is not None else 0  # + the row that says how it ended
        self.virtual_size = Size(self.scrollable_content_region.width, rows)
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def on_resize(self) -> None:
        self._cache.clear()
        self.update_size()

    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh_line(old)
        self.refresh_line(new)

    def scroll_to_row(self, row: int) -> None:
        """Scroll as little as possible to show ``row`` (with a margin of two rows)."""
        height = self.scrollable_content_region.height
        if height <= 0:
            return
        top = int(self.scroll_y)
        margin = 2 if height > 6 else 0
        if row < top + margin:
            top = max(0, row - margin)
        elif row >= top + height - margin:
            top = row - height + margin + 1
        if top != int(self.scroll_y):
            self.scroll_to(y=top, animate=False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        partner = self.partner
        if partner is not None and round(partner.scroll_y) != round(new_value):
            partner.scroll_to(y=new_value, animate=False)

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:  # the border or the scrollbar
            return
        row = int(self.scroll_y) + offset.y
        if self.branch is not None and 0 <= row < len(self.branch):
            self.post_message(self.Selected(row))

    # -- drawing ----------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        branch = self.branch
        if branch is None or row > len(branch) or width <= 0:
            return Strip.blank(width, self.rich_style)
        key = (row, width, row == self.cursor, branch.version, id(branch), branch.running)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._render_row(row, width)
            self._cache[key] = strip
        return strip

    def _render_end(self, width: int) -> Strip:
        """The row after the last: how this side's trace ended (the model: or that it still runs)."""
        branch = self.branch
        assert branch is not None
        style = self.get_component_rich_style
        if self.side == "truth":
            text = "■ " + branch.truth_ending()
        elif branch.running:
            text = "… " + (branch.waiting or "the model is still writing")
        else:
            text = "■ " + branch.ending()
            if branch.resumable:
                text += " · r resumes"
        segments = [Segment(printable(text)[:width], self.rich_style + style("timeline--end", partial=True))]
        return Strip(segments).adjust_cell_length(width, self.rich_style)

    def _render_row(self, row: int, width: int) -> Strip:
        branch = self.branch
        assert branch is not None
        if row == len(branch):
            return self._render_end(width)
        base = self.rich_style
        style = self.get_component_rich_style
        kind = branch.kind(row)
        frame = branch.truth_at(row) if self.side == "truth" else branch.model_at(row)
        other = branch.model_at(row) if self.side == "truth" else branch.truth_at(row)
        off_path = self.side == "model" and branch.off_path(row)
        if row == self.cursor:
            base = base + style("timeline--cursor")
        elif kind.is_divergence and self.side == "model" and not off_path:
            base = base + style("timeline--divergent-row", partial=True)
        text_style = base + style("timeline--off-path", partial=True) if off_path else base

        step_width = max(3, len(str(len(branch) - 1)))
        segments: list[Segment] = []

        def add(text: str, extra: Style | None = None) -> None:
            segments.append(Segment(text, base + extra if extra is not None else base))

        mark = " "
        mark_style: Style | None = None
        if kind.is_divergence or (kind is StepKind.PENDING and self.side == "model"):
            mark = KIND_MARKS.get(kind, "✗")
            mark_style = style("timeline--pending" if kind is StepKind.PENDING else "timeline--divergent", partial=True)
        if self.side == "model" and frame is not None and frame.origin in ORIGIN_MARKS:
            mark = ORIGIN_MARKS[frame.origin]
            mark_style = style("timeline--forced", partial=True)
        first = branch.first_divergence
        is_first = first is not None and first.step == row
        if is_first and self.side == "truth":
            mark, mark_style = FIRST_MARK, style("timeline--divergent", partial=True)
        add(mark, mark_style)
        # each side's own step number (the row's, until the paths part)
        truth_index, model_index = branch.step_numbers(row)
        number = truth_index if self.side == "truth" else model_index
        add(f"{'' if number is None else number:>{step_width}} ",
            style("timeline--first" if is_first else "timeline--step", partial=True))
        rest = width - (1 + step_width + 1)
        if frame is None:
            if kind is StepKind.PENDING and not branch.running and branch.status is RolloutStatus.CANCELLED:
                label = "(cancelled before this step)"
            elif kind is StepKind.PENDING:
                label = branch.waiting or "(model still writing…)"
            elif self.side == "model" and kind is StepKind.MISSING:
                label = f"(the model had stopped: {branch.ending(short=True)})"
            elif self.side == "model":
                label = "(not on the model's path)"
            elif row > branch.last_truth_row:
                label = "(after the program's end)"
            else:
                label = "(not on the real path)"
            add(label[:rest].ljust(rest), style("timeline--pending", partial=True))
            return Strip(segments, width).adjust_cell_length(width, base)
        lineno = f"{frame.lineno:>4} " if frame.lineno is not None else "   ? "
        add(lineno, style("timeline--lineno", partial=True))
        add(EVENT_MARKS.get(frame.event, "?") if frame.event is not None else "✗")
        rest -= 6
        if rest <= 0:
            return Strip(segments).adjust_cell_length(width, base)
        action_width = max(10, rest * 2 // 5)  # the line is in the source pane too: values get more
        state_width = rest - action_width - 1
        if frame.is_error and frame.event is None:
            error = frame.error or ""
            action = error if error.startswith("format error") else "format error: " + error
        else:
            action = frame.action.strip() or frame.action.rstrip("\n")
        action = short(action, action_width).ljust(action_width)
        segments.append(Segment(action, text_style))
        if state_width > 2:
            segments.append(Segment(" ", base))
            segments.extend(self._state_segments(branch, row, frame, other, state_width, text_style, base))
        return Strip(segments).adjust_cell_length(width, base)

    def _state_segments(self, branch: BranchView, row: int, frame: Frame, other: Frame | None,
                        width: int, text_style: Style, base: Style) -> list[Segment]:
        style = self.get_component_rich_style
        changed_style = text_style + style("timeline--changed", partial=True)
        wrong_style = text_style + style("timeline--divergent", partial=True)
        dim_style = text_style + style("timeline--dim", partial=True)
        compare = self.side == "model" and other is not None and not branch.off_path(row)
        parts: list[tuple[str, Style]] = []
        if frame.event in (Event.RETURN, Event.EXCEPTION):
            wrong = compare and other.arg != frame.arg
            value = (frame.arg or "None") if frame.event is Event.RETURN else readable_exception(frame.arg or "")
            parts.append((("↩ " if frame.event is Event.RETURN else "raise ") + short(value, width),
                          wrong_style if wrong else changed_style))
        elif frame.locals is not None:
            changed = branch.changed(row, self.side)
            other_locals = other.locals or {} if compare else {}
            names = list(frame.locals)
            if frame.event is Event.CALL:
                shown = names
            else:
                wrong = [k for k in names if compare and other_locals.get(k) != frame.locals[k]]
                shown = [k for k in names if k in changed] + [k for k in wrong if k not in changed]
            for name in shown:
                value = frame.locals[name]
                is_wrong = compare and other_locals.get(name) != value
                parts.append((f"{name}={short(value)}", wrong_style if is_wrong else
                              (changed_style if name in changed else text_style)))
            if not shown:
                parts.append(("·", dim_style))
        elif frame.is_error:
            parts.append((short(frame.raw or frame.error or "", width), wrong_style))
        segments: list[Segment] = []
        used = 0
        for i, (text, part_style) in enumerate(parts):
            piece = text if i == 0 else " " + text
            if used + len(piece) > width:
                room = width - used
                if room > 1:
                    segments.append(Segment(piece[: room - 1] + "…", part_style))
                    used += room
                break
            segments.append(Segment(piece, part_style))
            used += len(piece)
        return segments
