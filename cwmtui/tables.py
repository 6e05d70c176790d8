"""Rich tables for the headless verbs (no Textual)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from .trace import Event, Trace

_EVENT_STYLE = {Event.CALL: "bold cyan", Event.LINE: "", Event.RETURN: "bold green", Event.EXCEPTION: "bold red"}


def compact_locals(values: dict[str, str] | None, changed: set[str] = frozenset(), width: int = 60) -> Text:
    text = Text()
    if not values:
        return text
    for i, (key, value) in enumerate(values.items()):
        if i:
            text.append(", ")
        shown = value if len(value) <= width else value[: width - 1] + "…"
        style = "bold yellow" if key in changed else ""
        text.append(f"{key}=", style="dim" if not style else style)
        text.append(shown, style=style)
    return text


def trace_table(trace: Trace) -> Table:
    table = Table(title=f"trace: {len(trace.frames)} frames, {trace.status.describe()}", expand=True)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("line", justify="right", no_wrap=True)
    table.add_column("action", overflow="fold")
    table.add_column("locals / value", overflow="fold")
    previous: dict[str, str] = {}
    for step, frame in enumerate(trace.frames):
        if frame.event is None:
            table.add_row(str(step), Text("error", style="bold red"), "", frame.raw or "", frame.error or "")
            continue
        indent = "  " * frame.depth
        if frame.locals is not None:
            changed = {k for k, v in frame.locals.items() if previous.get(k) != v}
            detail = compact_locals(frame.locals, changed if frame.event is Event.LINE else set())
            previous = frame.locals
        else:
            detail = Text(("→ " if frame.event is Event.RETURN else "raises ") + (frame.arg or ""))
        table.add_row(
            str(step),
            Text(frame.event.value, style=_EVENT_STYLE[frame.event]),
            str(frame.lineno or ""),
            indent + frame.action.rstrip("\n"),
            detail,
        )
    return table
