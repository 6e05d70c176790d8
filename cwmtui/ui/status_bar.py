"""The status bar: model and device, decoding, step i/N, first divergence, token meter, branch."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ..terminal import printable
from ..analysis.compare import StepKind
from ..trace import RolloutStatus
from .branch_view import BranchView, SessionView, describe_divergence

METER = 10


def token_meter(used: int, budget: int) -> str:
    if budget <= 0:
        return ""
    filled = min(METER, round(METER * used / budget))
    return "▮" * filled + "▯" * (METER - filled)


class StatusBar(Static, can_focus=False):
    COMPONENT_CLASSES = {"status--label", "status--diverge", "status--match", "status--busy",
                         "status--badge", "status--over", "status--end"}

    DEFAULT_CSS = """
    StatusBar { height: 2; background: $panel; color: $foreground; padding: 0 1; }
    StatusBar > .status--label { color: $cwm-dim; }
    StatusBar > .status--diverge { color: $cwm-diverge; text-style: bold; }
    StatusBar > .status--match { color: $cwm-match; text-style: bold; }
    StatusBar > .status--busy { color: $cwm-badge; text-style: bold; }
    StatusBar > .status--badge { color: $cwm-badge; text-style: bold; }
    StatusBar > .status--over { color: $cwm-diverge; text-style: bold reverse; }
    StatusBar > .status--end { text-style: bold; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.activity = ""  # what a worker is doing now ("" when idle)
        self.plain = ""  # the last text shown (read by tests and the tmux check)

    def show(self, view: SessionView | None, branch: BranchView | None, row: int,
             activity: str = "", playing: str = "") -> None:
        s = lambda name: self.get_component_rich_style(name, partial=True)  # noqa: E731
        first, second = Text(no_wrap=True, overflow="ellipsis"), Text(no_wrap=True, overflow="ellipsis")
        sep = (" │ ", s("status--label"))
        if view is None:
            first.append(printable(activity or "starting…"), s("status--busy"))
            self._set(first)
            return
        if branch is not None:
            first.append("step ", s("status--label"))
            first.append(f"{row}/{max(len(branch) - 1, 0)}", "bold")
            truth_step, model_step = branch.step_numbers(row)
            if (truth_step, model_step) != (row, row) and len(branch) and branch.kind(row) is not StepKind.PENDING:
                first.append(" (interpreter " + ("—" if truth_step is None else str(truth_step))
                             + ", model " + ("—" if model_step is None else str(model_step)) + ")", s("status--label"))
            first.append(*sep)
            first.append("branch ", s("status--label"))
            first.append(printable(branch.name))
            if branch.badge:
                first.append(printable(f" [{branch.badge}]"), s("status--badge"))
            first.append(*sep)
            # how each side ended, before the model's name: the ellipsis cuts the end of the line
            first.append("ended: ", s("status--label"))
            first.append(printable(branch.truth_ending()), s("status--end"))
            first.append(" · ", s("status--label"))
            model_end = branch.ending(short=True)
            first.append(printable(f"model: {model_end}") if model_end else "model still writing",
                         s("status--end") if model_end else s("status--busy"))
            first.append(*sep)
        first.append("model ", s("status--label"))
        if view.constrained_of(branch):  # beside the model: its frames follow the frame grammar
            first.append("constrained ", s("status--badge"))
        first.append(printable(view.model_description or view.model_name or "none"))
        first.append(*sep)
        first.append(view.decoding_of(branch))
        if branch is not None:
            divergence = branch.first_divergence
            second.append("first divergence ", s("status--label"))
            if divergence is None:
                if branch.running:
                    said = "none so far"
                elif branch.status is RolloutStatus.CANCELLED:
                    written = len(branch.frames)
                    said = f"none before the rollout was cancelled ({written} step{'s' if written != 1 else ''} written)"
                else:
                    said = "none: the traces agree"
                second.append(said, s("status--match"))
            else:
                second.append(describe_divergence(divergence), s("status--diverge"))
            second.append(*sep)
            used, framed = branch.token_totals()
            budget = view.budget_of(branch)
            limit = branch.token_limit if branch.token_limit is not None else budget
            second.append("tokens ", s("status--label"))
            over = bool(limit) and used >= limit
            second.append(token_meter(used, limit), s("status--over") if over else "")
            second.append(f" {used:,}/{limit:,}" if limit else f" {used:,}")
            if limit and budget and limit < budget:  # the model's context, not the budget, is the limit
                second.append(" (the model's context)", s("status--label"))
            if framed:
                second.append(f" · {used / framed:.0f}/frame", s("status--label"))
            model = branch.model_at(row)
            if model is not None and model.tokens:
                second.append(f" · this step {model.tokens}", s("status--label"))
        busy = [text for text in (playing, activity) if text]
        if busy:  # what is happening now comes first: the ellipsis cuts the end of a line
            said = Text(printable(" · ".join(busy)), s("status--busy"))
            if second:
                said.append(*sep)
                second = Text.assemble(said, second, no_wrap=True, overflow="ellipsis")
            else:
                first.append(*sep)
                first.append_text(said)
        self._set(first, second)

    def _set(self, *lines: Text) -> None:
        lines = tuple(line for line in lines if line)
        self.plain = "\n".join(line.plain for line in lines)
        self.update(Group(*lines), layout=False)  # always two lines: no layout needed
