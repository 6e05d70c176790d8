"""Triage: the list of a replay file's programs (a results file of ``cwmtui eval``), failures
first, to open one after another in the debugger.

Sorted by what results records carry for it (``class``: the first divergence's kind,
``string_valued``, ``step``); a plain replay file (no results fields) lists its records by id.
A few hundred rows at most, so a stock DataTable holds them.
"""

from __future__ import annotations

import re

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from ..terminal import printable

#: the order classes are listed in: the paper's regimes first, agreement last
CLASS_ORDER = ["action", "event", "state", "value", "budget", "truncated", "extra", "format",
               "unclassified", "", "agree"]
SORTS = ("class", "step", "id")


@dataclass
class TriageRow:
    id: str
    line: int  # line of the replay file
    kind: str  # the first divergence's class ("" when the file does not say)
    string_valued: bool
    step: int | None
    status: str
    correct: bool | None  # the entry's output was right
    entry: str

    @classmethod
    def from_json(cls, line: int, data: dict) -> "TriageRow":
        output = data.get("output") if isinstance(data.get("output"), dict) else {}
        step = data.get("step")
        return cls(
            id=str(data.get("id", line)),
            line=line,
            kind=str(data.get("class") or ""),
            string_valued=bool(data.get("string_valued")),
            step=step if isinstance(step, int) else None,
            status=str(data.get("status") or ""),
            correct=output.get("correct") if isinstance(output.get("correct"), bool) else None,
            entry=str(data.get("entry") or ""),
        )

    @property
    def failed(self) -> bool:
        return self.kind not in ("agree",)

    def sort_key(self, by: str):
        rank = CLASS_ORDER.index(self.kind) if self.kind in CLASS_ORDER else len(CLASS_ORDER) - 2
        step = self.step if self.step is not None else 1 << 30
        name = natural_key(self.id)
        if by == "step":
            return (step, rank, name)
        if by == "id":
            return (name,)
        return (rank, not self.string_valued, step, name)


def natural_key(text: str) -> tuple:
    """``sample_23`` before ``sample_228``: the numbers in an id compared as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


class TriageScreen(Screen):
    """The failure list. Enter opens a program; the debugger's ``l`` comes back here."""

    DEFAULT_CSS = """
    TriageScreen { layout: vertical; }
    TriageScreen #triage-title { height: 1; padding: 0 1; color: $primary; text-style: bold; width: 1fr; }
    TriageScreen #triage-table { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open", "Open", id="triage.open", show=True),
        Binding("s", "sort", "Sort", id="triage.sort"),
        Binding("a", "all", "Failures/all", id="triage.all"),
        Binding("escape", "back", "Back", id="triage.back"),
        Binding("q", "app.quit", "Quit", id="triage.quit"),
    ]

    def __init__(self, path: str, rows: list[TriageRow], open_record) -> None:
        super().__init__(id="triage")
        self.path = path
        self.rows = rows
        self.open_record = open_record  # open_record(row) starts the debugger on it
        self.sort_by = "class"
        self.show_all = not any(r.kind for r in rows)  # a plain replay file: everything
        self.shown: list[TriageRow] = []

    def compose(self) -> ComposeResult:
        yield Label("", id="triage-title", markup=False)  # the title holds the file's path
        yield DataTable(id="triage-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("id", "class", "string", "step", "status", "output", "entry")
        self.fill()
        table.focus()

    def fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        rows = [r for r in self.rows if self.show_all or r.failed]
        rows.sort(key=lambda r: r.sort_key(self.sort_by))
        self.shown = rows
        for row in rows:
            kind = Text(printable(row.kind or "—"), style="bold red" if row.failed and row.kind else "green")
            output = "—" if row.correct is None else ("right" if row.correct else "wrong")
            # a DataTable reads a str cell as markup: the record's id, status and entry are data
            table.add_row(Text(printable(row.id)), kind, "str" if row.string_valued else "",
                          "" if row.step is None else str(row.step), Text(printable(row.status)), output, Text(printable(row.entry)),
                          key=f"{row.line}")
        failures = sum(1 for r in self.rows if r.failed and r.kind)
        what = "all programs" if self.show_all else "failures"
        title = f"{printable(self.path)}: {len(self.rows)} programs"
        if any(r.kind for r in self.rows):
            title += f", {failures} diverge"
        self.query_one("#triage-title", Label).update(
            f"{title} · showing {what} ({len(rows)}), sorted by {self.sort_by} · enter opens one")

    @on(DataTable.RowSelected)
    def selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return
        self.open_record(self.shown[table.cursor_row])

    def action_sort(self) -> None:
        self.sort_by = SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)]
        self.fill()

    def action_all(self) -> None:
        self.show_all = not self.show_all
        self.fill()

    def action_back(self) -> None:
        if self.app.view is not None:  # a program is open: go back to it
            self.app.pop_screen()
