"""The trace debugger: the Textual app that ``cwmtui PROGRAM`` opens.

:class:`CwmApp` holds the session and the theme; :class:`DebuggerScreen` is the main screen:
its key bindings, its widgets, and the handlers that own the UI state (the selected step, the
branch on show, playback). Long work (the interpreter, loading a model, a rollout) runs in
workers that post messages; only the handlers change state.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer

from ..interpreter.program import display_name
from ..terminal import printable
from ..trace import RolloutStatus
from .branch_view import BranchView, SessionView
from .commands import StepCommands
from .keymap import load_keymap
from .messages import (
    Activity,
    BranchFinished,
    BranchStarted,
    BranchUpdated,
    LensReady,
    LensWanted,
    ModelState,
    Notice,
    SessionReady,
    WorkDone,
    WorkFailed,
    WorkStarted,
)
from .output_panel import OutputPanel
from .screens import (
    EditLocalsScreen,
    ErrorScreen,
    HelpScreen,
    OverrideChoice,
    OverrideScreen,
    go_to_step_screen,
    search_screen,
)
from .source_pane import SourcePane
from .state_panel import StatePanel
from .status_bar import StatusBar
from .themes import DEFAULT_THEME, VARIABLE_DEFAULTS, ThemeError, ThemeFile, load_theme, theme_names
from .timeline import Timeline

PLAY_SPEEDS = (1, 2, 4, 8, 16, 32, 64)  # steps per second
WIDE_COLUMNS = 140  # from this width on, "auto" puts the source pane in its own column
OUTPUT_COLUMNS = 100  # below this width the stacked layout has no room for the output panel

# -- the main screen ------------------------------------------------------------------------

_STEP = Binding.Group("step")
_PAGE = Binding.Group("page")
_ENDS = Binding.Group("first/last")
_DIVERGENCE = Binding.Group("divergence")
_CALL = Binding.Group("call")
_MATCH = Binding.Group("match")
_BRANCH = Binding.Group("branch")
_SPEED = Binding.Group("speed")

#: Every key of the debugger: all in the footer (grouped) and in ``?`` help, each with an id
#: a keymap can rebind. No key that terminals or tmux take for themselves (ctrl+s, ctrl+b, …).
BINDINGS = [
    Binding("question_mark", "help", "Help", id="app.help", key_display="?"),
    Binding("down,j", "step(1)", "Step", id="cursor.next", key_display="↓/j", group=_STEP),
    Binding("up,k", "step(-1)", "Back", id="cursor.previous", key_display="↑/k", group=_STEP),
    Binding("d", "divergence(1)", "Next divergence", id="divergence.next", group=_DIVERGENCE),
    Binding("D", "divergence(-1)", "Previous divergence", id="divergence.previous", group=_DIVERGENCE),
    Binding("o", "override", "Override", id="intervene.override"),
    Binding("e", "edit_locals", "Edit state", id="intervene.edit"),
    Binding("t", "teacher_forced", "Teacher-force", id="intervene.teacher-forced"),
    Binding("left_square_bracket", "branch(-1)", "Previous branch", id="branch.previous", key_display="[", group=_BRANCH),
    Binding("right_square_bracket", "branch(1)", "Next branch", id="branch.next", key_display="]", group=_BRANCH),
    Binding("colon", "go_to", "Go to", id="cursor.go-to", key_display=":"),
    Binding("slash", "search", "Search", id="search.start", key_display="/"),
    Binding("p", "play", "Play", id="play.toggle"),
    Binding("x", "export", "Export", id="session.export"),
    Binding("l", "triage", "Failure list", id="triage.list"),
    Binding("pagedown", "page(1)", "Page down", id="cursor.page-down", key_display="pgdn", group=_PAGE),
    Binding("pageup", "page(-1)", "Page up", id="cursor.page-up", key_display="pgup", group=_PAGE),
    Binding("g,home", "first", "First", id="cursor.first", key_display="g", group=_ENDS),
    Binding("G,end", "last", "Last", id="cursor.last", key_display="G", group=_ENDS),
    Binding("c", "call(1)", "Next call", id="call.next", group=_CALL),
    Binding("C", "call(-1)", "Previous call", id="call.previous", group=_CALL),
    Binding("n", "search_again(1)", "Next match", id="search.next", group=_MATCH),
    Binding("N", "search_again(-1)", "Previous match", id="search.previous", group=_MATCH),
    Binding("plus,equals_sign", "speed(1)", "Faster", id="play.faster", key_display="+", group=_SPEED),
    Binding("minus", "speed(-1)", "Slower", id="play.slower", key_display="-", group=_SPEED),
    Binding("z", "fold", "Unfold values", id="state.fold"),
    Binding("escape", "cancel", "Cancel", id="work.cancel", key_display="esc"),
    Binding("q", "app.quit", "Quit", id="app.quit"),
]
#: bindings the palette leaves out: help (the palette is help), quit (Textual's own), cancel
PALETTE_SKIPS = frozenset({"app.help", "app.quit", "work.cancel"})


class DebuggerScreen(Screen):
    """The side-by-side view of a session, its bindings and its state."""

    BINDINGS = BINDINGS

    DEFAULT_CSS = """
    DebuggerScreen { layout: vertical; }
    DebuggerScreen #body { height: 1fr; }
    DebuggerScreen .pane { border: round $panel-lighten-2; border-title-color: $foreground; }
    DebuggerScreen .pane:focus-within { border: round $primary; }
    DebuggerScreen #truth { border: round $cwm-truth 60%; border-title-color: $cwm-truth; border-title-style: bold; }
    DebuggerScreen #model { border: round $cwm-model 60%; border-title-color: $cwm-model; border-title-style: bold; }
    DebuggerScreen #timelines { height: 1fr; }
    DebuggerScreen Timeline { width: 1fr; height: 1fr; }
    DebuggerScreen.-columns #source { width: 34%; height: 1fr; }
    DebuggerScreen.-columns #right { width: 1fr; }
    DebuggerScreen.-columns #details { height: 42%; }
    DebuggerScreen.-columns #state { width: 2fr; }
    DebuggerScreen.-columns #output { width: 1fr; }
    DebuggerScreen.-stacked #details { height: 45%; }
    DebuggerScreen.-stacked #source { width: 1fr; }
    DebuggerScreen.-stacked #state { width: 1fr; }
    DebuggerScreen.-stacked #output { width: 26%; }
    DebuggerScreen.-stacked.-narrow #output { display: none; }
    DebuggerScreen.-tight .pane { border: none; border-top: solid $panel-lighten-2; }
    DebuggerScreen.-tight #truth { border: none; border-top: solid $cwm-truth; }
    DebuggerScreen.-tight #model { border: none; border-top: solid $cwm-model; border-left: vkey $panel-lighten-2; }
    DebuggerScreen.-tight SourcePane { overflow-x: hidden; }
    DebuggerScreen.-tight StatePanel { padding: 0; }
    """

    step: reactive[int] = reactive(0, init=False)
    branch_index: reactive[int] = reactive(0, init=False)

    def __init__(self, layout: str = "auto") -> None:
        super().__init__(id="debugger")
        self.layout_choice = layout  # "auto" | "columns" | "stacked"
        self.layout_mode = "stacked"
        self.activity = ""
        self.playing = False
        self.play_speed = 3  # index in PLAY_SPEEDS
        self._play_timer = None
        self.last_search = ""
        self._work_cancel: Callable[[], None] | None = None
        self._lenses_asked: set[tuple] = set()

    # -- layout -------------------------------------------------------------------------------
    @property
    def cwm(self) -> "CwmApp":
        return self.app  # type: ignore[return-value]

    @property
    def view(self) -> SessionView | None:
        return self.cwm.view

    @property
    def branch(self) -> BranchView | None:
        view = self.view
        if view is None or not view.branches:
            return None
        return view.branches[min(self.branch_index, len(view.branches) - 1)]

    def _choose_layout(self, width: int) -> str:
        if self.layout_choice in ("columns", "stacked"):
            return self.layout_choice
        return "columns" if width >= WIDE_COLUMNS else "stacked"

    def compose(self) -> ComposeResult:
        width = self.app.size.width
        self.layout_mode = self._choose_layout(width)
        self.set_class(self.layout_mode == "columns", "-columns")
        self.set_class(self.layout_mode == "stacked", "-stacked")
        self.set_class(width < OUTPUT_COLUMNS, "-narrow")
        self.set_class(self.app.size.height < 30 or width < OUTPUT_COLUMNS, "-tight")
        source = SourcePane(id="source")
        truth = Timeline("truth", id="truth")
        model = Timeline("model", id="model")
        state = StatePanel(id="state")
        output = OutputPanel(id="output")
        for widget in (source, truth, model, state, output):
            widget.add_class("pane")
        if self.layout_mode == "columns":
            with Horizontal(id="body"):
                yield source
                with Vertical(id="right"):
                    with Horizontal(id="timelines"):
                        yield truth
                        yield model
                    with Horizontal(id="details"):
                        yield state
                        yield output
        else:
            with Vertical(id="body"):
                with Horizontal(id="timelines"):
                    yield truth
                    yield model
                with Horizontal(id="details"):
                    yield source
                    yield state
                    yield output
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self._wire()

    def _wire(self) -> None:
        self.truth_timeline = self.query_one("#truth", Timeline)
        self.model_timeline = self.query_one("#model", Timeline)
        self.source_pane = self.query_one("#source", SourcePane)
        self.state_panel = self.query_one("#state", StatePanel)
        self.output_panel = self.query_one("#output", OutputPanel)
        self.status_bar = self.query_one("#status", StatusBar)
        self.truth_timeline.partner, self.model_timeline.partner = self.model_timeline, self.truth_timeline
        self.show_view()

    async def set_layout(self, choice: str) -> None:
        self.layout_choice = choice
        await self.recompose()
        self._wire()

    async def on_resize(self) -> None:
        width = self.app.size.width
        if self._choose_layout(width) != self.layout_mode or self.has_class("-narrow") != (width < OUTPUT_COLUMNS):
            await self.recompose()
            self._wire()

    # -- showing ------------------------------------------------------------------------------
    def show_view(self) -> None:
        """A new session or branch: load every widget, then draw the selected step."""
        view, branch = self.view, self.branch
        source = self.query_one("#source", SourcePane)
        truth, model = self.query_one("#truth", Timeline), self.query_one("#model", Timeline)
        state = self.query_one("#state", StatePanel)
        if view is not None:
            source.border_title = Text(printable(f"source · {display_name(view.program.path)}"))  # a file name: data
            source.show_source(view.program.source)
            state.set_view(view)
        else:
            source.border_title = "source"
        truth.show_branch(branch)
        model.show_branch(branch)
        truth.border_title = "interpreter"
        self._title_model()
        self.query_one("#output", OutputPanel).border_title = "output"
        state.border_title = "state"
        if branch is not None and self.step >= len(branch):
            self.step = max(0, len(branch) - 1)
        self.show_step()

    def _title_model(self) -> None:
        branch = self.branch
        model = self.query_one("#model", Timeline)
        if branch is None:
            model.border_title = "model"
            return
        title = f"model · {branch.name}"
        if self.view is not None and len(self.view.branches) > 1:
            title += f" ({self.branch_index + 1}/{len(self.view.branches)})"
        if branch.running:
            title += " · writing…"
        model.border_title = Text(printable(title))  # branch names and badges hold the user's lines
        model.border_subtitle = Text(printable(branch.badge or ""))

    def show_step(self) -> None:
        view, branch, row = self.view, self.branch, self.step
        truth_tl, model_tl = self.truth_timeline, self.model_timeline
        truth_tl.cursor = row
        model_tl.cursor = row
        truth_tl.scroll_to_row(row)
        model_tl.scroll_to_row(row)
        source, state, output = self.source_pane, self.state_panel, self.output_panel
        if view is not None and branch is not None and len(branch):
            truth, model = branch.truth_at(row), branch.model_at(row)
            divergence = branch.first_divergence
            divergence_line = divergence.lineno if divergence is not None else None
            source.mark(truth.lineno if truth else None, model.lineno if model else None, divergence_line)
            state.show(branch, row)
            step = branch.steps[row]
            truth_index = step.truth_index
            if truth_index is None:  # a step only the model takes: the output of the truth before it
                truth_index = next((branch.steps[r].truth_index for r in range(row, -1, -1)
                                    if branch.steps[r].truth_index is not None), -1)
            output.show(view.output_until(truth_index), len(view.truth.output))
        else:
            state.show(None, 0)
        self.update_status()

    def update_status(self) -> None:
        playing = ""
        if self.playing:
            playing = f"▶ playing {PLAY_SPEEDS[self.play_speed]} steps/s (p stops, +/- speed)"
        self.status_bar.show(self.view, self.branch, self.step, self.activity, playing)

    def watch_step(self, old: int, new: int) -> None:
        self.show_step()

    def watch_branch_index(self, old: int, new: int) -> None:
        self.show_view()

    def validate_step(self, value: int) -> int:
        branch = self.branch
        if branch is None or not len(branch):
            return 0
        return max(0, min(value, len(branch) - 1))

    # -- navigation ---------------------------------------------------------------------------
    def action_step(self, delta: int) -> None:
        self.step += delta

    def action_page(self, direction: int) -> None:
        height = self.query_one("#truth", Timeline).scrollable_content_region.height
        self.step += direction * max(1, height - 1)

    def action_first(self) -> None:
        self.step = 0

    def action_last(self) -> None:
        branch = self.branch
        self.step = len(branch) - 1 if branch is not None else 0

    def go_to_step(self, step: int) -> None:
        """Show step ``step`` (the palette's "go to step N")."""
        self.step = step

    def action_go_to(self) -> None:
        branch = self.branch
        if branch is None or not len(branch):
            return

        def go(value: str | None) -> None:
            if value:
                step = int(value)
                self.step = step if step >= 0 else len(branch) + step

        self.app.push_screen(go_to_step_screen(len(branch), self.step), go)

    def action_divergence(self, direction: int) -> None:
        branch = self.branch
        if branch is None:
            return
        row = branch.next_divergence(self.step) if direction > 0 else branch.previous_divergence(self.step)
        if row is None:
            where = "after" if direction > 0 else "before"
            self.notify(f"no divergence {where} step {self.step}", severity="information", timeout=2)
            return
        self.step = row

    def action_call(self, direction: int) -> None:
        branch = self.branch
        if branch is None:
            return
        row = branch.next_call(self.step) if direction > 0 else branch.previous_call(self.step)
        if row is None:
            self.notify("no more calls that way", timeout=2)
            return
        self.step = row

    def action_search(self) -> None:
        def found(text: str | None) -> None:
            if text:
                self.last_search = text
                self.action_search_again(1)

        self.app.push_screen(search_screen(self.last_search), found)

    def action_search_again(self, direction: int) -> None:
        branch = self.branch
        if branch is None or not self.last_search:
            self.notify("nothing to search for yet: press / first", timeout=2)
            return
        row = branch.search(self.last_search, self.step, backwards=direction < 0)
        if row is None:
            self.notify(f"no variable or value contains {self.last_search!r}", severity="warning", timeout=3)
            return
        self.step = row

    def action_branch(self, direction: int) -> None:
        view = self.view
        if view is None or len(view.branches) < 2:
            self.notify("only one branch: override (o), edit (e) or teacher-force (t) to make more", timeout=3)
            return
        self.branch_index = (self.branch_index + direction) % len(view.branches)

    def action_fold(self) -> None:
        self.query_one("#state", StatePanel).toggle_fold()

    @on(Timeline.Selected)
    def timeline_clicked(self, event: Timeline.Selected) -> None:
        self.step = event.row

    # -- playback -----------------------------------------------------------------------------
    def action_play(self) -> None:
        if self.playing:
            self.stop_playing()
            return
        branch = self.branch
        if branch is None or not len(branch):
            return
        if self.step >= len(branch) - 1:
            self.step = 0
        self.playing = True
        self._restart_timer()
        self.update_status()

    def _restart_timer(self) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
        self._play_timer = self.set_interval(1 / PLAY_SPEEDS[self.play_speed], self._play_tick)

    def _play_tick(self) -> None:
        branch = self.branch
        if branch is None or not self.playing:
            self.stop_playing()
            return
        if self.step >= len(branch) - 1:
            self.stop_playing("end of the trace")
            return
        self.step += 1
        first = branch.first_divergence
        if first is not None and self.step == first.step:
            self.stop_playing(f"stopped at the first divergence (step {self.step})")

    def stop_playing(self, why: str = "") -> None:
        self.playing = False
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if why:
            self.notify(why, timeout=3)
        self.update_status()

    def action_speed(self, direction: int) -> None:
        self.play_speed = max(0, min(len(PLAY_SPEEDS) - 1, self.play_speed + direction))
        if self.playing:
            self._restart_timer()
        else:
            self.notify(f"play speed {PLAY_SPEEDS[self.play_speed]} steps/s", timeout=2)
        self.update_status()

    # -- interventions ------------------------------------------------------------------------
    def _can_intervene(self, what: str) -> bool:
        view = self.view
        if view is None or self.branch is None:
            return False
        if not view.can_generate:
            why = self.cwm.no_model_reason or "this session has no live model"
            if self.cwm.replay:  # the reason says it all: "... overrides need a live model ..."
                self.notify(f"{what}: {why}", severity="warning", timeout=6)
            else:
                self.notify(f"{what} needs a live model: {why}", severity="warning", timeout=6)
            return False
        if self._work_cancel is not None:
            self.notify("the model is still writing: wait, or press esc to cancel it", severity="warning", timeout=4)
            return False
        return True

    def _entry_step(self, branch: BranchView, row: int) -> bool:
        if branch.model_index_at(row) == 0:
            self.notify("step 0 is the entry call, forced from the interpreter: intervene at a later step",
                        severity="warning", timeout=4)
            return True
        return False

    def action_override(self) -> None:
        if not self._can_intervene("override"):
            return
        branch, row = self.branch, self.step
        assert branch is not None and self.view is not None
        if self._entry_step(branch, row):
            return

        def chosen(choice: OverrideChoice | None) -> None:
            if choice is not None:
                self.cwm.start_override(branch, row, action=choice.action, label=choice.label)

        self.app.push_screen(
            OverrideScreen(row, self.view.program.source, branch.truth_at(row), branch.model_at(row), True),
            chosen,
        )

    def action_edit_locals(self) -> None:
        if not self._can_intervene("editing the state"):
            return
        branch, row = self.branch, self.step
        assert branch is not None
        if self._entry_step(branch, row):
            return
        frame = branch.model_at(row)
        if frame is None or frame.locals is None:
            frame = branch.truth_at(row)
        if frame is None or frame.locals is None:
            self.notify("this step has no locals to edit (a return or exception step)", timeout=3)
            return

        def edited(values: dict | None) -> None:
            if values is not None:
                self.cwm.start_override(branch, row, locals_=values, label="edited state")

        self.app.push_screen(EditLocalsScreen(row, frame.locals, True), edited)

    def action_teacher_forced(self) -> None:
        if not self._can_intervene("the teacher-forced rollout"):
            return
        self.cwm.start_teacher_forced()

    def action_cancel(self) -> None:
        if self.playing:
            self.stop_playing("stopped")
            return
        if self._work_cancel is not None:
            self._work_cancel()
            self.set_activity("cancelling…")

    # -- other --------------------------------------------------------------------------------
    def action_export(self) -> None:
        self.cwm.export_session()

    def action_help(self) -> None:
        shown = [b for b in self.cwm.bindings_as_bound() if self.check_action(b.action, ()) is not False]
        self.app.push_screen(HelpScreen(shown))

    def action_triage(self) -> None:
        self.stop_playing()
        self.app.push_screen("triage")

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "triage":
            return True if self.cwm.triage is not None else False  # only for a file of many programs
        return True

    def reset(self) -> None:
        """Another program is about to open (triage): forget the selection and the playback."""
        self.stop_playing()
        self.set_reactive(DebuggerScreen.step, 0)
        self.set_reactive(DebuggerScreen.branch_index, 0)
        self._work_cancel = None
        self.activity = ""
        self.show_view()

    def set_activity(self, text: str) -> None:
        self.activity = text
        self.update_status()

    # -- messages from workers ----------------------------------------------------------------
    def on_activity(self, message: Activity) -> None:
        self.set_activity(message.text)

    def on_session_ready(self, message: SessionReady) -> None:
        shown = self.branch.name if self.branch is not None else None
        self.cwm.view = message.view
        names = [b.name for b in message.view.branches]
        index = names.index(shown) if shown in names else 0  # a model opened for a session on screen
        if self.branch_index != index:
            self.branch_index = index  # its watcher shows the view
        else:
            self.show_view()

    def on_branch_started(self, message: BranchStarted) -> None:
        view = self.view
        if view is None:
            return
        if view.branches and view.branches[0].placeholder:
            view.branches[0] = message.branch
        elif message.branch not in view.branches:
            view.branches.append(message.branch)
        if message.select:
            self.branch_index = view.branches.index(message.branch)
            self.show_view()
        else:
            self._title_model()
            self.update_status()

    def on_branch_updated(self, message: BranchUpdated) -> None:
        """A running branch's newer state (compared in the worker; a few a second at most)."""
        branch = message.branch
        if not branch.running:
            return  # (a timer's state that crossed the branch's last one)
        branch.update(message.state)
        if branch is self.branch:
            self.query_one("#truth", Timeline).update_size()
            self.query_one("#model", Timeline).update_size()
            self._title_model()
            self.show_step()

    def on_work_started(self, message: WorkStarted) -> None:
        self._work_cancel = message.cancel

    def on_model_state(self, message: ModelState) -> None:
        self.cwm.no_model_reason = message.reason
        self.cwm.replay = message.replay

    def on_lens_wanted(self, message: LensWanted) -> None:
        """Ask a worker for a token lens (the model's tokenizer may be a server away)."""
        view = self.view
        if view is None:
            return
        key = view.lens_key(message.branch, message.row, message.name)
        if key in self._lenses_asked:
            return
        self._lenses_asked.add(key)
        branch, row, name = message.branch, message.row, message.name

        def work() -> None:
            self.post_message(LensReady(key, view.work_out_lens(branch, row, name)))

        self.run_worker(work, thread=True, group="lens", name="token lens")

    def on_lens_ready(self, message: LensReady) -> None:
        view = self.view
        if view is None:
            return
        view.keep_lens(message.key, message.lens)
        if self.branch is not None and view.lens_key(self.branch, self.step, message.key[3]) == message.key:
            self.state_panel.show(self.branch, self.step)

    def on_branch_finished(self, message: BranchFinished) -> None:
        branch = message.branch
        branch.finish(message.state)
        self._work_cancel = None
        if branch is self.branch:
            self.query_one("#truth", Timeline).show_branch(branch)
            self.query_one("#model", Timeline).show_branch(branch)
            self._title_model()
            self.show_step()
        self.set_activity("")
        if branch.parent is not None or branch.intervention or branch.status is not RolloutStatus.ENDED:
            note = f"{branch.name}: {branch.status.label}"
            if branch.badge:
                note += f" · {branch.badge}"
            self.notify(note, timeout=4)

    def on_work_done(self, message: WorkDone) -> None:
        if self._work_cancel == message.cancel:
            self._work_cancel = None

    def on_work_failed(self, message: WorkFailed) -> None:
        self._work_cancel = None
        self.set_activity("")
        if message.fatal:
            # nothing to show: say why, and leave with exit code 2 when the user closes it
            def leave(_: None) -> None:
                self.cwm.fatal_message = message.message
                self.app.exit(return_code=2)

            self.app.push_screen(ErrorScreen(message.title, message.message + "\n\nThe app closes now."), leave)
        else:
            self.notify(message.message, title=message.title, severity="error", timeout=8)

    def on_notice(self, message: Notice) -> None:
        self.notify(message.message, title=message.title, severity="warning", timeout=12)


# -- the app --------------------------------------------------------------------------------


class CwmApp(App):
    """``cwmtui``: the interpreter and a code world model, side by side."""

    TITLE = "cwmtui"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {StepCommands}

    def __init__(
        self,
        view: SessionView | None = None,
        *,
        theme: str = DEFAULT_THEME,
        layout: str = "auto",
        export_dir: str | Path = ".",
        opener: Callable[["CwmApp"], None] | None = None,
        no_model_reason: str = "",
    ) -> None:
        super().__init__()
        self.view = view
        self.layout_choice = layout
        self.export_dir = Path(export_dir)
        self.opener = opener  # starts the workers of a live session (see live.py)
        self.no_model_reason = no_model_reason
        self.replay = False  # a replay of recorded generations: no intervention is possible
        self.theme_file: ThemeFile | None = None
        self._theme_spec = theme
        self.live = None  # the live session's engine side (set by the opener)
        self.triage = None  # the failure list of a replay file with many programs
        self.fatal_message = ""  # why the app could not show anything (exit code 2)

    # -- themes -------------------------------------------------------------------------------
    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every toast of the app, whoever raises it: its text is data (a server's error body, a
        file name, a model's line), shown as text, never read as markup or obeyed."""
        super().notify(printable(str(message)), title=printable(str(title)), severity=severity,
                       timeout=timeout, markup=False)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def apply_theme(self, spec: str) -> None:
        """Switch to a theme by name or path (raises ThemeError with a one-line message)."""
        theme_file = load_theme(spec)
        previous = self.theme_file
        self.register_theme(theme_file.theme)
        if previous is not None:
            self.stylesheet.source.pop((str(previous.path), ""), None)
        self.stylesheet.add_source(theme_file.css, read_from=(str(theme_file.path), ""))
        self.theme_file = theme_file
        self.theme = theme_file.theme.name

    # -- screens ------------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return DebuggerScreen(self.layout_choice)

    @property
    def debugger(self) -> DebuggerScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.apply_theme(self._theme_spec)
        keymap, problems = load_keymap({b.id for b in BINDINGS if b.id})
        if keymap:
            self.set_keymap(keymap)
        for problem in problems:
            self.notify(problem, severity="warning", timeout=10)
        if self.opener is not None:
            self.opener(self)

    def bindings_as_bound(self) -> list[Binding]:
        """The debugger's bindings with the keys the user's keymap gave them."""
        keymap = self._keymap
        return [dataclasses.replace(b, key=keymap[b.id], key_display=None) if b.id in keymap else b for b in BINDINGS]

    def adopt_live(self, live) -> None:
        """The live session whose workers feed this app (its opener calls this, on mount)."""
        self.live = live

    def adopt_triage(self, triage) -> None:
        """The failure list of a replay file with many programs (its opener calls this)."""
        self.triage = triage

    def begin_program(self) -> None:
        """The triage list picked another program: forget the one on screen (its workers
        stopped), back to the debugger, which waits for the new one's messages."""
        if self.live is not None:
            self.live.cancel_all()
        self.view = None
        self.no_model_reason = ""
        self.replay = False
        self.pop_screen()
        self.debugger.reset()

    def on_unmount(self) -> None:
        # a rollout in a worker thread would keep the process alive until it ended
        if self.live is not None:
            self.live.cancel_all()

    # -- command palette ----------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        for command in super().get_system_commands(screen):
            if command.title != "Theme":
                yield command
        debugger = self.screen_stack[0]
        if not isinstance(debugger, DebuggerScreen):
            return
        # every key of the debugger, from the one bindings table (as the keymap bound them)
        for binding in self.bindings_as_bound():
            if binding.id in PALETTE_SKIPS or debugger.check_action(binding.action, ()) is False:
                continue
            keys = ", ".join(self.get_key_display(Binding(k.strip(), "")) for k in binding.key.split(","))
            yield SystemCommand(binding.description, f"key {keys}", partial(debugger.run_action, binding.action))
        yield SystemCommand("Jump to first divergence", "Select the step where the model first leaves the truth",
                            self.jump_to_first_divergence)
        for name in theme_names():
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme", lambda n=name: self.switch_theme(n))
        yield SystemCommand("Toggle layout", "Source pane in its own column, or below the timelines",
                            self.toggle_layout)

    def jump_to_first_divergence(self) -> None:
        debugger = self.screen_stack[0]
        branch = debugger.branch
        if branch is None or branch.first_divergence is None:
            self.notify("no divergence: the traces agree", timeout=3)
            return
        debugger.step = branch.first_divergence.step

    def switch_theme(self, name: str) -> None:
        try:
            self.apply_theme(name)
        except ThemeError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"theme: {name}", timeout=2)

    async def toggle_layout(self) -> None:
        debugger = self.screen_stack[0]
        choice = "stacked" if debugger.layout_mode == "columns" else "columns"
        await debugger.set_layout(choice)

    # -- interventions (the live session does the work) ---------------------------------------
    def start_override(self, branch: BranchView, step: int, *, action: str | None = None,
                       locals_: dict | None = None, label: str = "") -> None:
        if self.live is None:
            self.notify("this session has no live model", severity="warning")
            return
        self.live.override(branch, step, action=action, locals_=locals_, label=label)

    def start_teacher_forced(self) -> None:
        if self.live is None:
            self.notify("this session has no live model", severity="warning")
            return
        self.live.teacher_forced()

    # -- export -------------------------------------------------------------------------------
    def export_paths(self) -> tuple[Path, Path]:
        view = self.view
        stem = Path(view.program.path).stem if view is not None else "session"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        name, n = f"cwmtui-{stem}-{stamp}", 1
        # not with_suffix: for a program 'a.b.py' it would cut the name at 'a.' and loop forever
        while (self.export_dir / f"{name}.json").exists() or (self.export_dir / f"{name}.svg").exists():
            n += 1
            name = f"cwmtui-{stem}-{stamp}-{n}"
        return self.export_dir / f"{name}.json", self.export_dir / f"{name}.svg"

    def export_session(self) -> tuple[Path, Path] | None:
        view = self.view
        if view is None or view.engine is None:
            self.notify("nothing to export yet", severity="warning")
            return None
        if any(b.running for b in view.branches):
            self.notify("the model is still writing: export when it is done (or esc to cancel it)",
                        severity="warning")
            return None
        json_path, svg_path = self.export_paths()
        try:
            self.export_dir.mkdir(parents=True, exist_ok=True)
            view.engine.save(str(json_path))
            self.save_screenshot(svg_path.name, str(svg_path.parent))
        except Exception as exc:  # noqa: BLE001 - SessionError or OSError: tell the user, keep going
            self.notify(f"cannot export: {exc}", severity="error")
            return None
        self.last_export = (json_path, svg_path)
        self.notify(f"saved {json_path} and {svg_path.name}", title="export", timeout=6)
        return json_path, svg_path
