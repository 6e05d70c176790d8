"""The modal screens: go to step, search, override, edit locals, help, and errors."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ..analysis.values import value_problem
from ..terminal import printable, printable_block
from ..trace import Frame
from ..trace.source import SourceMap, source_lines
from ..trace.tokens import strip_marker
from .bindings import PALETTE_HELP
from .keymap import keymap_path

MODAL_CSS = """
ModalScreen { align: center middle; }
ModalScreen > Vertical {
    width: 84%; max-width: 110; height: auto; max-height: 90%;
    border: round $primary; background: $panel; padding: 0 1;
}
ModalScreen .modal-title { text-style: bold; color: $primary; width: 1fr; }
ModalScreen .modal-hint { color: $text-muted; width: 1fr; }
ModalScreen .modal-error { color: $error; width: 1fr; }
ModalScreen Input { margin: 0 0; }
ModalScreen OptionList { height: auto; max-height: 50vh; text-wrap: nowrap; text-overflow: ellipsis; }
"""


class TypeAhead:
    """A dialog that keeps the keys typed before it could take them. A terminal sends ``:12⏎``
    at once: the keys after ``:`` arrive while the dialog is still being built, when Textual
    would give them to no one. The app hands them here (:meth:`hold`), and the dialog sends
    them on, in order, once its field has focus (:meth:`release`, from its ``on_mount``)."""

    held: list[events.Key] | None = None  # None: ready, keys go where they always go
    after_close: list[events.Key] = []  # keys typed after the one that closes the dialog
    closing = False  # an enter or esc was passed on: what follows waits for the dialog to close

    def hold(self, event: events.Key) -> bool:
        """Keep a key that came before the dialog was ready (True: kept), in the order the keys
        were typed: a key the screen below was given first can come back up after the next one
        arrived (":12⏎" under load: the 1 after the 2), so each is placed by when it came in
        (the app numbers them, see ``CwmApp.on_event``)."""
        if self.held is None:
            return False
        key = events.Key(event.key, event.character)
        key._cwm_order = order = getattr(event, "_cwm_order", float("inf"))  # type: ignore[attr-defined]
        at = len(self.held)
        while at and getattr(self.held[at - 1], "_cwm_order", float("inf")) > order:
            at -= 1
        self.held.insert(at, key)
        return True

    def pass_on(self, app, key: events.Key) -> None:
        """A key typed for the dialog that did not reach it: to the app again (it goes to the
        field), up to the first enter or esc; the keys after that one wait for the dialog to
        close, and then go where they were meant to (":12⏎jj": the j's are the debugger's)."""
        if self.closing:
            self.after_close.append(key)
            return
        app.post_message(key)
        if key.key in ("enter", "escape"):
            self.closing = True

    def release(self, app) -> None:
        """Send on the held keys, after the focus change queued before them (see pass_on)."""
        held, self.held = self.held or [], None
        for key in held:
            self.pass_on(app, key)

    def on_unmount(self) -> None:
        keys, self.after_close = self.after_close, []
        for key in keys:  # ":12⏎jj": the j's are the debugger's
            self.app.post_message(key)


class PromptScreen(TypeAhead, ModalScreen[str | None]):
    """One line of input: the step to go to, or the text to search for."""

    SCOPED_CSS = False  # MODAL_CSS styles every modal alike
    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="modal.cancel")]

    def __init__(self, title: str, hint: str, value: str = "", placeholder: str = "",
                 check=None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.hint = hint
        self.value = value
        self.placeholder = placeholder
        self.check = check  # str -> error message or None
        self.held = []
        self.after_close = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, classes="modal-title")
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            yield Label(self.hint, classes="modal-hint", id="prompt-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self.release(self.app)

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        problem = self.check(value) if self.check else None
        if problem:
            hint = self.query_one("#prompt-hint", Label)
            hint.update(problem)
            hint.set_class(True, "modal-error")
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


def go_to_step_screen(rows: int, current: int) -> PromptScreen:
    def check(value: str) -> str | None:
        try:  # not str.isdigit: "--3" and "²" pass it and int() refuses them
            step = int(value)
        except ValueError:
            return f"type a step number from 0 to {rows - 1}"
        if not -rows <= step < rows:
            return f"there are {rows} steps: type 0 to {rows - 1} (or -1 for the last)"
        return None

    return PromptScreen(
        "Go to step",
        f"0 … {rows - 1}; a negative number counts from the end · enter: go · esc: cancel",
        placeholder=str(current),
        check=check,
        id="goto-screen",
    )


def search_screen(last: str) -> PromptScreen:
    return PromptScreen(
        "Search variables and values",
        "the next step where a variable's name or value contains the text · n/N: next/previous match",
        value=last,
        placeholder="a name or part of a value",
        check=lambda v: None if v else "type something to search for",
        id="search-screen",
    )


@dataclass
class OverrideChoice:
    """The action the user put in the model's place at a step."""

    action: str  # the source line, with its newline
    lineno: int | None
    label: str  # how the choice reads in the branch's description


class OverrideScreen(TypeAhead, ModalScreen[OverrideChoice | None]):
    """Choose the line the model should run at a step: the real one, any line, or a typed one."""

    SCOPED_CSS = False
    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="modal.cancel")]

    def __init__(self, step: int, source: str, truth: Frame | None, model: Frame | None) -> None:
        super().__init__(id="override-screen")
        self.step = step
        self.source = source
        self.source_lines = source_lines(source)
        self.truth = truth
        self.model = model
        self.held = []
        self.after_close = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Override the model's action at step {self.step}", classes="modal-title")
            model_line = printable(self.model.action.strip()) if self.model is not None else "(no step)"
            yield Label(Text.assemble(("model wrote: ", "dim"), model_line), classes="modal-hint")
            options: list[Option] = []
            if self.truth is not None:
                real = Text.assemble(("real action  ", "bold"), f"{self.truth.lineno or '?':>3} │ ",
                                     printable(strip_marker(self.truth.action).rstrip("\n")))
                real.no_wrap, real.overflow = True, "ellipsis"
                options.append(Option(real, id="real"))
            for number in SourceMap(self.source).action_lines():  # no docstring or comment lines
                line = self.source_lines[number - 1]
                prompt = Text(f"line {number:>3} │ {printable(strip_marker(line).rstrip())}", no_wrap=True, overflow="ellipsis")
                options.append(Option(prompt, id=f"line-{number}"))
            yield OptionList(*options, id="override-options")
            yield Input(placeholder="…or type a line (keep its indentation) and press enter", id="override-typed")
            yield Label("enter: run the model from here with this line · esc: cancel", classes="modal-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self.release(self.app)

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id == "real" and self.truth is not None:
            self.dismiss(OverrideChoice(strip_marker(self.truth.action), self.truth.lineno, "the real action"))
        elif option_id.startswith("line-"):
            number = int(option_id[5:])
            line = strip_marker(self.source_lines[number - 1])
            if not line.endswith("\n"):
                line += "\n"
            self.dismiss(OverrideChoice(line, number, f"line {number}"))

    @on(Input.Submitted, "#override-typed")
    def typed(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.rstrip("\n")
        if not text.strip():
            return
        number = next((n for n, line in enumerate(self.source_lines, start=1)
                       if strip_marker(line).rstrip("\n") == text), None)
        self.dismiss(OverrideChoice(text + "\n", number, "a typed line"))

    def action_cancel(self) -> None:
        self.dismiss(None)


class EditLocalsScreen(TypeAhead, ModalScreen[dict | None]):
    """Edit the locals (reprs) the model continues from at a step."""

    SCOPED_CSS = False
    DEFAULT_CSS = MODAL_CSS + """
    EditLocalsScreen VerticalScroll { height: auto; max-height: 20; }
    EditLocalsScreen .local-name { color: $accent; text-style: bold; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="modal.cancel"),
        Binding("ctrl+s,ctrl+enter", "apply", "Apply", id="edit.apply"),
        Binding("ctrl+r", "take_real", "Real value", id="edit.real"),
    ]

    def __init__(self, step: int, locals_: dict[str, str], real: dict[str, str] | None = None) -> None:
        super().__init__(id="edit-screen")
        self.step = step
        self.values = dict(locals_)
        self.real = dict(real or {})  # the interpreter's values at this step, to start from
        self.held = []
        self.after_close = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Edit the state at step {self.step} (Python reprs)", classes="modal-title")
            with VerticalScroll():
                for i, (name, value) in enumerate(self.values.items()):
                    label = Text(printable(name), style="bold")  # a model-written name: data
                    real = self.real.get(name)
                    if real is not None and real != value:
                        label.append(f"  interpreter: {printable(real)[:60]}", style="dim")
                    yield Label(label, classes="local-name")
                    yield Input(printable(value), id=f"local-{i}")  # a __repr__'s controls shown, not sent
            hint = "enter on the last field or ctrl+s: run the model from this state · esc: cancel"
            if self.real:
                hint = "ctrl+r: the interpreter's value · " + hint
            yield Label(hint, classes="modal-hint", id="edit-hint", markup=False)  # later lists names

    def on_mount(self) -> None:
        inputs = self.query(Input)
        if inputs:
            inputs.first().focus()
        self.release(self.app)

    def edited(self) -> dict[str, str]:
        """The values as edited; a field left as shown keeps its value exactly (a value whose
        control characters the field shows escaped is not changed by showing it)."""
        out = {}
        for i, (name, value) in enumerate(self.values.items()):
            typed = self.query_one(f"#local-{i}", Input).value
            out[name] = value if typed == printable(value) else typed
        return out

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        inputs = list(self.query(Input))
        if event.input is inputs[-1]:
            self.action_apply()
        else:
            self.focus_next()

    def action_take_real(self) -> None:
        """The focused field takes the interpreter's value at this step."""
        focused = self.focused
        if not isinstance(focused, Input) or not (focused.id or "").startswith("local-"):
            return
        name = list(self.values)[int(focused.id[6:])]
        if name in self.real:
            focused.value = printable(self.real[name])
        else:
            self.notify(f"the interpreter has no {name} at this step", timeout=3)

    def action_apply(self) -> None:
        values = self.edited()
        # a value a trace could hold, as the engine checks it (never run): say which, and why
        problems = [(k, problem) for k, v in values.items() if v != self.values[k] and (problem := value_problem(v))]
        if problems:
            hint = self.query_one("#edit-hint", Label)
            name, problem = problems[0]
            hint.update(Text(printable(f"{name}: {problem}")))
            hint.set_class(True, "modal-error")
            index = list(values).index(name)
            self.query_one(f"#local-{index}", Input).focus()
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """Every key binding: its keys, what it does, and its id (for keymaps)."""

    SCOPED_CSS = False
    DEFAULT_CSS = MODAL_CSS
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, bindings: list[Binding], legend=(), notes: list[str] | None = None) -> None:
        super().__init__(id="help-screen")
        self.bindings = bindings
        self.legend = legend  # [(where, [(mark, meaning)])]
        self.notes = notes or []

    def compose(self) -> ComposeResult:
        table = Table(box=None, expand=True, padding=(0, 1), show_header=True, header_style="bold")
        table.add_column("keys", no_wrap=True)
        table.add_column("does")
        table.add_column("id", style="dim", no_wrap=True)
        self.rows = [
            (" ".join(self.app.get_key_display(Binding(k.strip(), "")) for k in binding.key.split(",")),
             binding.tooltip or binding.description, binding.id or "")
            for binding in self.bindings
        ]
        self.rows.append(("ctrl+p", PALETTE_HELP, "app.command-palette"))
        for row in self.rows:
            table.add_row(*row)
        marks = Table(box=None, expand=True, padding=(0, 1), show_header=True, header_style="bold")
        marks.add_column("mark", no_wrap=True)
        marks.add_column("means")
        self.marks = [(mark, f"{where}: {meaning}") for where, entries in self.legend for mark, meaning in entries]
        for mark, meaning in self.marks:
            marks.add_row(mark, meaning)
        with Vertical():
            yield Label("Keys", classes="modal-title")
            with VerticalScroll():
                for note in self.notes:
                    yield Label(Text(printable(note)), classes="modal-error")
                yield Static(table)
                if self.marks:
                    yield Label("Marks", classes="modal-title")
                    yield Static(marks)
            where = printable(str(keymap_path()))
            yield Label(Text(f"esc: close · remap keys by id in {where} (\"divergence.next\" = \"d,right\")"),
                        classes="modal-hint")

    def action_close(self) -> None:
        self.dismiss(None)


class ErrorScreen(ModalScreen[None]):
    """Something went wrong: say what, and what to do; nothing the user had is lost."""

    SCOPED_CSS = False
    DEFAULT_CSS = MODAL_CSS + """
    ErrorScreen > Vertical { border: round $error; }
    ErrorScreen .modal-title { color: $error; }
    """
    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="error.close")]

    def __init__(self, title: str, message: str) -> None:
        super().__init__(id="error-screen")
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(printable(self.title_text), classes="modal-title", markup=False)
            yield Static(printable_block(self.message), id="error-message", markup=False)  # paths, exception text
            yield Label("enter, esc or q: close", classes="modal-hint")

    def action_close(self) -> None:
        self.dismiss(None)
