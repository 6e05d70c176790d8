"""Triage: the list of a replay file's programs (a results file of ``cwmtui eval``, or recorded
generations), failures first, to open one after another in the debugger.

Sorted by what results records carry for it (``class``: the first divergence's kind,
``string_valued``, ``step``). A record that does not carry them (a dump of generations, an
ASSERT-KTH results file) is scored in the background as soon as the list opens, as ``cwmtui
eval --replay`` would score it (:mod:`cwmtui.evaluation.triage`); a program opened in the
debugger fills its row from its session. Below the table, the highlighted record: its expected
and predicted output, its status, the root-cause note a results file may carry, and where the
model first went wrong, and for a run with ``--recovery`` what the interventions there did.
``f`` narrows the list to one class (then to the failures that did or did not recover), ``/``
searches it (``n``, ``N``).
A few hundred rows at most, so a stock DataTable holds them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label, Static
from textual.worker import get_current_worker

from ..evaluation.recovery_run import OUTCOMES, recovery_lines, recovery_outcome
from ..terminal import printable
from ..trace import RolloutStatus

#: the order classes are listed in: the paper's regimes first, agreement last
CLASS_ORDER = ["action", "event", "state", "value", "budget", "truncated", "extra", "format",
               "unclassified", "", "agree"]
SORTS = ("class", "step", "id")

#: what a results file may say of why a program failed, beside cwmtui's own fields: a root-cause
#: category and note (failure analyses of CWM runs), the error a model call ended in (``cwmtui
#: eval``), the ground truth's own error (ASSERT-KTH's ``gt_error``)
NOTE_KEYS = (("root_cause", "root cause"), ("root_cause_note", "root cause"), ("failure_note", "note"),
             ("note", "note"), ("notes", "note"), ("error", "error"), ("gt_error", "the program raised"))

#: the fields a record carries or the scoring fills (see TriageRow.fill)
FILLED = ("kind", "string_valued", "step", "status", "correct", "expected", "predicted", "explanation", "entry")


@dataclass
class TriageRow:
    id: str
    line: int  # line of the replay file
    kind: str  # the first divergence's class ("" when not known yet)
    string_valued: bool
    step: int | None
    status: str
    correct: bool | None  # the entry's output was right
    entry: str
    expected: str | None = None  # the entry's real output
    predicted: str | None = None  # the model's
    explanation: str = ""  # where and how the model first went wrong
    notes: list[tuple[str, str]] = field(default_factory=list)  # (label, text) the record carries
    given: frozenset[str] = frozenset()  # the fields the record itself carries (never replaced)
    source: str = ""  # where kind came from: "file", "scored" (background), "session" (opened)
    problem: str = ""  # why it could not be scored
    text: str = ""  # the record's text, casefolded, for search
    recovery: str = ""  # what became of the first divergence under --recovery (recovery_run.OUTCOMES)
    recovery_notes: list[tuple[str, str]] = field(default_factory=list)  # (intervention, what followed)

    @classmethod
    def from_json(cls, line: int, data: dict) -> "TriageRow":
        output = data.get("output")
        results = output if isinstance(output, dict) else {}
        given = set()
        kind = data.get("class")
        if isinstance(kind, str) and kind:
            given.update(("kind", "string_valued", "step"))
        step = data.get("step")
        status = data.get("status")
        if isinstance(status, str) and status:
            given.add("status")
        correct = results.get("correct", data.get("correct"))
        if isinstance(correct, bool):
            given.add("correct")
        # the entry's real output: a results file's output.expected, ASSERT-KTH's "expected", or
        # CRUXEval's own "output" (a text); the model's: output.predicted or "predicted"
        expected = results.get("expected", data.get("expected", output if isinstance(output, str) else None))
        predicted = results.get("predicted", data.get("predicted"))
        if expected is not None:
            given.add("expected")
        if predicted is not None:
            given.add("predicted")
        divergence = data.get("first_divergence")
        explanation = divergence.get("explanation") if isinstance(divergence, dict) else None
        if isinstance(explanation, str) and explanation:
            given.add("explanation")
        if isinstance(data.get("entry"), str) and data["entry"]:
            given.add("entry")
        return cls(
            id=str(data.get("id", line)),
            line=line,
            kind=str(kind or ""),
            string_valued=bool(data.get("string_valued")),
            step=step if isinstance(step, int) and not isinstance(step, bool) else None,
            status=str(status or ""),
            correct=correct if isinstance(correct, bool) else None,
            entry=str(data.get("entry") or ""),
            expected=None if expected is None else str(expected),
            predicted=None if predicted is None else str(predicted),
            explanation=explanation if isinstance(explanation, str) else "",
            notes=record_notes(data),
            given=frozenset(given),
            source="file" if "kind" in given else "",
            text="\n".join(str(v) for v in data.values() if isinstance(v, (str, int, float))).casefold(),
            recovery=recovery_outcome(data),
            recovery_notes=recovery_lines(data),
        )

    def fill(self, result: dict, source: str) -> None:
        """Take a results line's fields (scored in the background, or from the opened session)
        for those the record itself does not carry."""
        divergence = result.get("first_divergence") or {}
        output = result.get("output") or {}
        values = {
            "kind": str(result.get("class") or ""),
            "string_valued": bool(result.get("string_valued")),
            "step": result.get("step"),
            "status": str(result.get("status") or ""),
            "correct": output.get("correct"),
            "expected": output.get("expected"),
            "predicted": output.get("predicted"),
            "explanation": str(divergence.get("explanation") or ""),
            "entry": str(result.get("entry") or self.entry),
        }
        for name in FILLED:
            if name not in self.given:
                setattr(self, name, values[name])
        if "kind" not in self.given:
            self.source = source
        self.problem = ""

    @property
    def failed(self) -> bool:
        return self.kind not in ("agree",)

    @property
    def truncated(self) -> bool:
        """The model's trace was cut off (the token budget, the context): a results file's
        ``budget``/``context``, a failure report's ``TRUNCATED``."""
        if self.status.strip().lower() == "truncated":
            return True
        try:
            return RolloutStatus.read(self.status).out_of_tokens
        except ValueError:
            return False

    def sort_key(self, by: str):
        rank = CLASS_ORDER.index(self.kind) if self.kind in CLASS_ORDER else len(CLASS_ORDER) - 2
        step = self.step if self.step is not None else 1 << 30
        name = natural_key(self.id)
        if by == "step":
            return (step, rank, name)
        if by == "id":
            return (name,)
        return (rank, not self.string_valued, step, name)


def record_notes(data: dict) -> list[tuple[str, str]]:
    """The notes a record carries of why it failed, as (label, text)."""
    notes = []
    for key, label in NOTE_KEYS:
        value = data.get(key)
        if isinstance(value, dict):  # {"category": ..., "note": ...}
            value = " · ".join(str(v) for v in value.values() if isinstance(v, (str, int, float)) and str(v).strip())
        elif isinstance(value, list):
            value = " · ".join(str(v) for v in value if isinstance(v, (str, int, float)))
        if isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value).strip():
            notes.append((label, str(value).strip()))
    return notes


def natural_key(text: str) -> tuple:
    """``sample_23`` before ``sample_228``: the numbers in an id compared as numbers."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


# -- messages from the scoring worker -----------------------------------------------------------


class RecordScored(Message):
    """The background scoring worked out one record (``result``: its results line), or could
    not (``problem``)."""

    def __init__(self, line: int, result: dict | None, problem: str = "") -> None:
        self.line = line
        self.result = result
        self.problem = problem
        super().__init__()


class ScoringDone(Message):
    """The background scoring ended (``problem``: why it stopped early, if it did)."""

    def __init__(self, problem: str = "") -> None:
        self.problem = problem
        super().__init__()


# -- the screen ---------------------------------------------------------------------------------


class TriageTable(DataTable):
    """The list itself: enter opens the highlighted program; j/k/g/G move as in the debugger."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open", id="triage.open"),
        Binding("j", "cursor_down", "Down", show=False, id="triage.down"),
        Binding("k", "cursor_up", "Up", show=False, id="triage.up"),
        Binding("g", "first", "First", show=False, id="triage.first"),
        Binding("G", "last", "Last", show=False, id="triage.last"),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "select_cursor" and self.row_count == 0:
            return False
        return True

    def action_first(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)


COLUMNS = (("id", "id"), ("class", "class"), ("string", "string"), ("step", "step"), ("status", "status"),
           ("output", "output"), ("entry", "entry"))


class TriageScreen(Screen):
    """The failure list. Enter opens a program; the debugger's ``l`` comes back here."""

    DEFAULT_CSS = """
    TriageScreen { layout: vertical; }
    TriageScreen #triage-title { height: 2; padding: 0 1; width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    TriageScreen #triage-table { height: 1fr; }
    TriageScreen #triage-search-bar { height: 1; display: none; }
    TriageScreen #triage-search-bar.shown { display: block; }
    TriageScreen #triage-search-bar Label { width: auto; padding: 0 0 0 1; color: $primary; text-style: bold; }
    TriageScreen #triage-search { height: 1; border: none; padding: 0 1; width: 1fr; }
    TriageScreen #triage-details { height: 7; padding: 0 1; border-top: solid $primary; }
    TriageScreen #triage-details.with-recovery { height: 9; }
    """
    BINDINGS = [
        Binding("f", "filter", "Filter", id="triage.filter",
                tooltip="Show one class at a time (then, after --recovery, the failures that did or did not recover)"),
        Binding("slash", "search", "Search", id="triage.search", key_display="/"),
        Binding("n", "next_match", "Next", id="triage.next"),
        Binding("N", "previous_match", "Previous", id="triage.previous", show=False),
        Binding("s", "sort", "Sort", id="triage.sort"),
        Binding("a", "all", "Failures/all", id="triage.all"),
        Binding("escape", "back", "Back", id="triage.back"),
        Binding("q", "app.quit", "Quit", id="triage.quit"),
    ]

    def __init__(self, path: str, rows: list[TriageRow], open_record: Callable[[TriageRow], None],
                 records: dict[int, dict] | None = None, limits=None, cursor_line: int | None = None) -> None:
        super().__init__(id="triage")
        self.path = path
        self.rows = rows
        self.by_line = {row.line: row for row in rows}
        self.open_record = open_record  # open_record(row) starts the debugger on it
        self.records = records or {}  # line -> the record's JSON object, for the scoring worker
        self.limits = limits
        self.sort_by = "class"
        self.show_all = not any(r.kind for r in rows)  # a plain replay file: everything
        self.only_class: str | None = None  # f: the class (or recovery outcome) shown, None for all
        self.with_recovery = any(r.recovery for r in rows)  # a run with --recovery: its column
        self.search = ""  # /: what the list was searched for ("" for nothing)
        self.scoring = False  # the scoring worker is at work
        self.to_score = 0  # records it was given
        self.left = 0  # records it still has to score
        self.scoring_problem = ""
        self.shown: list[TriageRow] = []
        self.cursor_line = cursor_line  # the record the cursor starts on (one opened with --id)
        self.cursor_placed = 0  # the row the list last put the cursor on itself
        self.cursor_chosen = cursor_line is not None  # the user put it somewhere

    def compose(self) -> ComposeResult:
        yield Label("", id="triage-title", markup=False)  # the title holds the file's path
        yield TriageTable(id="triage-table", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="triage-search-bar"):
            yield Label("search:")
            yield Input(placeholder="an id, an entry, any text of the record; enter finds, esc closes", id="triage-search")
        yield Static("", id="triage-details", markup=False, classes="with-recovery" if self.with_recovery else "")
        yield Footer(show_command_palette=False)  # its commands are the debugger's

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        if self.with_recovery:
            table.add_column("recovery", key="recovery")
        self.fill()
        row = self.by_line.get(self.cursor_line) if self.cursor_line is not None else None
        if row is not None and row in self.shown:
            table.move_cursor(row=self.shown.index(row), animate=False)
        table.focus()
        self.start_scoring()

    # -- the rows ---------------------------------------------------------------------------
    def cells(self, row: TriageRow) -> tuple:
        if row.kind:
            kind = Text(printable(row.kind), style="bold red" if row.failed else "green")
        elif row.problem:
            kind = Text("not scored", style="dim")
        else:
            kind = Text("…" if self.scoring else "—", style="dim")
        output = "—" if row.correct is None else ("right" if row.correct else "wrong")
        status = Text("TRUNCATED" if row.status.strip().lower() == "truncated" else printable(row.status))
        # a DataTable reads a str cell as markup: the record's id, status and entry are data
        cells = (Text(printable(row.id)), kind, "str" if row.string_valued else "",
                 "" if row.step is None else str(row.step), status,
                 Text(output, style="red" if row.correct is False else ""), Text(printable(row.entry)))
        if self.with_recovery:
            short = {OUTCOMES[0]: ("line ✓", "green"), OUTCOMES[1]: ("frame ✓", "yellow"), OUTCOMES[2]: ("✗", "red")}
            text, style = short.get(row.recovery, ("", ""))
            cells += (Text(text, style=style),)
        return cells

    def visible(self) -> list[TriageRow]:
        rows = [r for r in self.rows if self.show_all or r.failed]
        if self.only_class in OUTCOMES:
            rows = [r for r in rows if r.recovery == self.only_class]
        elif self.only_class is not None:
            rows = [r for r in rows if r.kind == self.only_class]
        return sorted(rows, key=lambda r: r.sort_key(self.sort_by))

    def classes_present(self) -> list[str]:
        present = {r.kind for r in self.rows if r.kind and (self.show_all or r.failed)}
        outcomes = {r.recovery for r in self.rows if r.recovery and (self.show_all or r.failed)}
        return sorted(present, key=lambda k: (CLASS_ORDER.index(k) if k in CLASS_ORDER else len(CLASS_ORDER), k)) \
            + [outcome for outcome in OUTCOMES if outcome in outcomes]

    def fill(self, keep_top: bool = False) -> None:
        """Lay the table out again: the cursor stays on the record it was on, if still shown
        (``keep_top``: on the first row, unless the user chose a record)."""
        table = self.query_one(DataTable)
        current = self.current()
        if keep_top and not self.cursor_chosen:
            current = None
        table.clear()
        self.shown = self.visible()
        for row in self.shown:
            table.add_row(*self.cells(row), key=f"{row.line}")
        if current is not None and current in self.shown:
            table.move_cursor(row=self.shown.index(current), animate=False)
        self.cursor_placed = table.cursor_row
        self.show_title()
        self.show_details()

    def current(self) -> TriageRow | None:
        if not self.is_mounted:
            return None
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def row_changed(self, row: TriageRow) -> None:
        """A row's fields were filled in: its cells, the title and (if it is highlighted) the
        details say so. The list is not sorted again under the user's cursor."""
        if not self.is_mounted:
            return  # laid out when the screen is first shown
        table = self.query_one(DataTable)
        if row in self.shown:
            for (_label, key), value in zip(COLUMNS, self.cells(row)):
                table.update_cell(f"{row.line}", key, value, update_width=True)
        self.show_title()
        if self.current() is row:
            self.show_details()
        self.refresh_bindings()

    def session_result(self, line: int, result: dict) -> None:
        """The program opened from this row was compared in the debugger: its row says so."""
        row = self.by_line.get(line)
        if row is None:
            return
        row.fill(result, "session")
        self.row_changed(row)

    def show_title(self) -> None:
        rows = self.rows
        known = [r for r in rows if r.kind]
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(f"{printable(self.path)}: {len(rows)} programs", style="bold")
        if known:
            title.append(f", {sum(1 for r in known if r.failed)} diverge")
            if len(known) < len(rows):
                title.append(f" ({len(known)} classified)")
        if self.scoring:
            title.append(f" · classifying {self.to_score - self.left} of {self.to_score}…", style="dim")
        elif self.scoring_problem:
            title.append(f" · {printable(self.scoring_problem)}", style="dim")
        title.append("\n")
        what = "all programs" if self.show_all else "failures"
        if self.only_class in OUTCOMES:
            what += f" that {self.only_class}"
        elif self.only_class is not None:
            what += f" of class {printable(self.only_class or '—')}"
        title.append(f"showing {what} ({len(self.shown)})", style="bold" if self.only_class is not None else "")
        if self.search:
            title.append(f" · search {printable(self.search)!r}: {len(self.matches())} found", style="bold")
        title.append(f" · sorted by {self.sort_by}")
        title.append(" · enter opens one", style="dim")
        self.query_one("#triage-title", Label).update(title)

    # -- details of the highlighted record ----------------------------------------------------
    @on(DataTable.RowHighlighted)
    def highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.cursor_row != self.cursor_placed:
            self.cursor_chosen = True
        self.show_details()

    def show_details(self) -> None:
        row = self.current()
        details = self.query_one("#triage-details", Static)
        if row is None:
            details.update(Text("no program here: a (failures/all) or f (class) shows more", style="dim"))
            return
        details.update(Group(*details_lines(row, self.scoring)))

    # -- background scoring -------------------------------------------------------------------
    def start_scoring(self) -> None:
        todo = [(row.line, self.records[row.line]) for row in self.rows
                if "kind" not in row.given and not row.kind and row.line in self.records]
        if not todo:
            return
        self.scoring = True
        self.to_score = self.left = len(todo)
        self.show_title()
        self.score(todo)

    @work(thread=True, exclusive=True, group="triage-scoring", name="classify the records")
    def score(self, todo: list[tuple[int, dict]]) -> None:
        """Each record scored as ``cwmtui eval --replay`` scores it, through one interpreter;
        one message per record. Nothing here touches the screen."""
        from ..evaluation.triage import NotScored, score_replay_record
        from ..interpreter import Interpreter

        worker = get_current_worker()
        try:
            with Interpreter() as interpreter:
                for line, data in todo:
                    if worker.is_cancelled:
                        return
                    try:
                        result = score_replay_record(data, f"{self.path}:{line}", line, interpreter, self.limits, self.path)
                    except NotScored as exc:
                        self.post_message(RecordScored(line, None, str(exc)))
                    except Exception as exc:  # noqa: BLE001 - one record that cannot be scored is told, never a crash
                        self.post_message(RecordScored(line, None, f"{exc.__class__.__name__}: {exc}"))
                    else:
                        self.post_message(RecordScored(line, result))
        except Exception as exc:  # noqa: BLE001 - no interpreter: the list stays as it is, and says why
            self.post_message(ScoringDone(f"cannot classify: {exc.__class__.__name__}: {exc}"))
            return
        self.post_message(ScoringDone())

    def on_record_scored(self, message: RecordScored) -> None:
        row = self.by_line.get(message.line)
        self.left = max(0, self.left - 1)
        if row is None or row.source == "session":  # the opened session said it first
            self.show_title()
            return
        if message.result is not None:
            row.fill(message.result, "scored")
        else:
            row.problem = message.problem
        self.row_changed(row)

    def on_scoring_done(self, message: ScoringDone) -> None:
        self.scoring = False
        self.left = 0
        self.scoring_problem = message.problem
        if self.sort_by != "id" and self.to_score:
            self.fill(keep_top=True)  # in the order the classes and steps now known give
        else:
            for row in self.shown:  # "…" becomes "—" where nothing came
                if not row.kind:
                    self.row_changed(row)
            self.show_title()
            self.show_details()
        self.refresh_bindings()

    # -- keys -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return self.searching or self.app.view is not None
        if action == "search":
            return not self.searching
        if action in ("next_match", "previous_match"):
            return bool(self.search) and not self.searching
        if action == "filter":
            return bool(self.classes_present()) or self.only_class is not None
        return True

    @property
    def searching(self) -> bool:
        return self.query_one("#triage-search-bar").has_class("shown") if self.is_mounted else False

    @on(DataTable.RowSelected)
    def selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        row = self.current()
        if row is not None:
            self.open_record(row)

    def action_sort(self) -> None:
        self.sort_by = SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)]
        self.fill()

    def action_all(self) -> None:
        self.show_all = not self.show_all
        if self.only_class is not None and self.only_class not in self.classes_present():
            self.only_class = None
        self.fill()
        self.refresh_bindings()

    def action_filter(self) -> None:
        """The next class present (in the list's order), then each outcome of ``--recovery``
        present ("did not recover" …), then all of them again."""
        choices: list[str | None] = [None, *self.classes_present()]
        index = choices.index(self.only_class) if self.only_class in choices else 0
        self.only_class = choices[(index + 1) % len(choices)]
        self.fill()
        if self.shown:
            self.query_one(DataTable).move_cursor(row=0)
        self.refresh_bindings()

    def action_search(self) -> None:
        search = self.query_one("#triage-search", Input)
        self.query_one("#triage-search-bar").add_class("shown")
        search.value = self.search
        search.focus()
        self.refresh_bindings()

    @on(Input.Submitted, "#triage-search")
    def searched(self, event: Input.Submitted) -> None:
        event.stop()
        self.close_search()
        self.search = event.value.strip()
        self.show_title()
        self.refresh_bindings()
        if self.search:
            self.jump_to_match(+1, include_current=True)

    def close_search(self) -> None:
        self.query_one("#triage-search-bar").remove_class("shown")
        self.query_one(DataTable).focus()
        self.refresh_bindings()

    def matches(self) -> list[int]:
        """The shown rows the search finds: by id, entry, or any text of the record."""
        needle = self.search.casefold()
        return [i for i, row in enumerate(self.shown)
                if needle in row.id.casefold() or needle in row.entry.casefold() or needle in row.text
                or any(needle in note.casefold() for _label, note in row.notes)]

    def jump_to_match(self, direction: int, include_current: bool = False) -> None:
        matches = self.matches()
        table = self.query_one(DataTable)
        if not matches:
            hidden = "" if self.show_all and self.only_class is None else " (a or f shows the programs hidden now)"
            self.notify(f"no program matches {self.search!r}{hidden}", severity="warning", timeout=4)
            return
        here = table.cursor_row
        if direction > 0:
            after = [i for i in matches if i > here or (include_current and i == here)]
            target = after[0] if after else matches[0]
        else:
            before = [i for i in matches if i < here]
            target = before[-1] if before else matches[-1]
        table.move_cursor(row=target)

    def action_next_match(self) -> None:
        self.jump_to_match(+1)

    def action_previous_match(self) -> None:
        self.jump_to_match(-1)

    def action_back(self) -> None:
        if self.searching:
            self.close_search()
        elif self.app.view is not None:  # a program is open: go back to it
            self.app.pop_screen()


def details_lines(row: TriageRow, scoring: bool) -> list[Text]:
    """The highlighted record below the list: what it is, its output, status and notes. All of
    it is the record's data: plain text, never markup."""

    def line(*parts: tuple[str, str]) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for part, style in parts:
            text.append(part, style=style)
        return text

    head = [(printable(row.id), "bold")]
    if row.correct is not None:  # first: it is what a narrow terminal must still show
        head.append((" · output right" if row.correct else " · output wrong", "green" if row.correct else "bold red"))
    if row.kind == "agree":
        head.append((" · the model's trace is the interpreter's, step for step", "green"))
    elif row.kind:
        where = f" at step {row.step}" if row.step is not None else ""
        head.append((f" · first divergence{where}: {printable(row.kind)}", "bold red"))
        if row.string_valued:
            head.append((", string-valued", "red"))
    elif row.problem:
        head.append((f" · not scored: {printable(row.problem)}", "dim"))
    else:
        head.append((" · classifying…" if scoring else " · not classified", "dim"))
    lines = [line(*head)]
    lines.append(line(("expected:  ", "dim"), (printable(row.expected) if row.expected is not None else "—", "")))
    lines.append(line(("predicted: ", "dim"),
                      (printable(row.predicted) if row.predicted is not None else "—", "red" if row.correct is False else "")))
    status = [("status:    ", "dim")]
    if row.status.strip().lower() == "truncated":
        status.append(("TRUNCATED", "bold"))
        status.append((": the model's trace was cut off before it ended", ""))
    elif row.status:
        status.append((printable(row.status), ""))
        if row.truncated:
            status.append((" · TRUNCATED", "bold"))
            status.append((f": {RolloutStatus.read(row.status).label}, the model's trace was cut off before it ended", ""))
    else:
        status.append(("—", ""))
    lines.append(line(*status))
    for label, note in row.notes:
        lines.append(line((f"{label}: ", "dim"), (printable(note), "")))
    for label, note in row.recovery_notes:
        lines.append(line((f"{label}: ", "dim"), (printable(note), "green" if note.startswith("recovered") else "")))
    if row.explanation:
        lines.append(Text(printable(row.explanation)))  # the last: it wraps into the room left
    return lines
