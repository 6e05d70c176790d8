"""The debugger's main screen: its widgets, and the handlers that own the UI state (the selected
step, the branch on show, playback). Long work runs in workers that post messages
(``ui/messages.py``); only the handlers here change state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingsMap
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer

from ..interpreter.program import display_name
from ..terminal import printable
from ..trace import RolloutStatus
from .branch_view import BranchView, SessionView
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
from .timeline import Timeline

from .bindings import BINDINGS, INTERVENTIONS, LEGEND
from .demo import DemoCaption

if TYPE_CHECKING:
    from .app import CwmApp

PLAY_SPEEDS = (1, 2, 4, 8, 16, 32, 64)  # steps per second
WIDE_COLUMNS = 140  # from this width on, "auto" puts the source pane in its own column
OUTPUT_COLUMNS = 100  # below this width the stacked layout has no room for the output panel
FULL_FOOTER_COLUMNS = 132  # below this width the footer leaves out the palette's key (ctrl+p, in ?)

class DebuggerScreen(Screen):
    """The side-by-side view of a session, its bindings and its state."""

    BINDINGS = BINDINGS
    AUTO_FOCUS = ""  # nothing: the keys move through the steps until tab focuses a pane
    wired = False  # its panes are mounted and known (a demo's step acts on them only then)

    DEFAULT_CSS = """
    DebuggerScreen { layout: vertical; }
    /* a demo's caption is at the bottom, where notifications pop up: they go to the top instead */
    DebuggerScreen.-demo #textual-toastrack { dock: top; align: right top; }
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
    DebuggerScreen.-stacked.-narrow #details { layout: grid; grid-size: 2 2; grid-columns: 1fr 1fr; grid-rows: 2fr 1fr; }
    DebuggerScreen.-stacked.-narrow #source { row-span: 2; }
    DebuggerScreen.-stacked.-narrow #state { height: 1fr; }
    DebuggerScreen.-stacked.-narrow #output { width: 1fr; height: 1fr; }
    DebuggerScreen.-tight .pane { border: none; border-top: solid $panel-lighten-2; }
    DebuggerScreen.-tight #truth { border: none; border-top: solid $cwm-truth; }
    DebuggerScreen.-tight #model { border: none; border-top: solid $cwm-model; border-left: vkey $panel-lighten-2; }
    DebuggerScreen.-tight SourcePane { overflow-x: hidden; }
    DebuggerScreen.-tight StatePanel { padding: 0; }
    DebuggerScreen ToastRack { margin-bottom: 3; }  /* toasts above the status bar, never over it */
    DebuggerScreen Toast { padding: 0 1; }
    DebuggerScreen Footer.-compact FooterLabel { margin: 0 1 0 0; }  /* "diverge o Override", not "divergeo" */
    DebuggerScreen.-short-footer FooterKey.-command-palette { display: none; }
    DebuggerScreen.-narrow FooterLabel { display: none; }
    """

    step: reactive[int] = reactive(0, init=False)
    branch_index: reactive[int] = reactive(0, init=False)

    def __init__(self, layout: str = "auto", bindings: list[Binding] | None = None) -> None:
        super().__init__(id="debugger")
        if bindings is not None:  # the table with the user's keymap applied (and Screen's own, e.g. copy)
            ours = {key.strip() for binding in bindings for key in binding.key.split(",")}
            inherited = [b for b in Screen.BINDINGS if isinstance(b, Binding)
                         and not ours & {key.strip() for key in b.key.split(",")}]
            self._bindings = BindingsMap([*inherited, *bindings])
        self.layout_choice = layout  # "auto" | "columns" | "stacked"
        self.layout_mode = "stacked"
        self.activity = ""
        self.playing = False
        self.play_speed = 3  # index in PLAY_SPEEDS
        self._play_timer = None
        self.last_search = ""
        self._work_cancel: Callable[[], None] | None = None
        self._lenses_asked: set[tuple] = set()
        self._offered: set[tuple] = set()  # (branch, step) of first divergences already pointed out

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
        self._size_classes()
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
        if self.cwm.demo is not None:
            yield DemoCaption(id="demo")
        yield StatusBar(id="status")
        yield Footer(compact=True)

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
        self.refresh_bindings()  # a recomposed footer hears of the bindings only when told
        self.set_class(self.cwm.demo is not None, "-demo")
        self.wired = True
        self.show_view()

    async def set_layout(self, choice: str) -> None:
        self.layout_choice = choice
        await self._rewire()

    async def _rewire(self) -> None:
        """Compose the panes again (a new layout) and know them again; while that happens a
        demo does not act on them."""
        self.wired = False
        await self.recompose()
        self._wire()

    def _size_classes(self) -> None:
        width, height = self.app.size
        self.set_class(width < OUTPUT_COLUMNS, "-narrow")
        self.set_class(height < 30 or width < OUTPUT_COLUMNS, "-tight")
        self.set_class(width < FULL_FOOTER_COLUMNS, "-short-footer")

    async def on_resize(self) -> None:
        self._size_classes()
        if self._choose_layout(self.app.size.width) != self.layout_mode:
            await self._rewire()

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
        self.refresh_bindings()  # what the footer offers depends on the session (a live model?)
        self.show_step()
        self._offer_divergence()

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
        focused = self.focused
        if focused is not None and focused in self._panes():
            name = {"source": "the source", "state": "the state", "output": "the output"}.get(focused.id or "", "a pane")
            playing = " · ".join(t for t in (playing, f"reading {name}: ↑↓ pgup pgdn scroll · tab next · esc back to the steps") if t)
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

    def action_first_divergence(self) -> None:
        branch = self.branch
        if branch is None or branch.first_divergence is None:
            said = "none so far" if branch is not None and branch.running else "the traces agree"
            self.notify(f"no divergence: {said}", timeout=3)
            return
        self.step = branch.first_divergence.step

    def _offer_divergence(self) -> None:
        """Once per branch: say where its first divergence is, as soon as the model has written
        it, with the key that goes there (the selection stays where the user put it)."""
        branch = self.branch
        if branch is None or branch.placeholder or branch.first_divergence is None:
            return
        divergence = branch.first_divergence
        key = (id(branch), divergence.step)
        if key in self._offered:
            return
        self._offered.add(key)
        if self.step != divergence.step:
            self.notify(f"first divergence at step {divergence.step}: {divergence.regime or divergence.kind} · f goes there",
                        title=branch.name, timeout=6)

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
        return True

    def _make_room(self, what: str) -> None:
        """The model is writing and the user asked for more: stop it (r resumes it later); the
        new job waits for it to stop (the live session runs one at a time)."""
        if self._work_cancel is not None:
            self._work_cancel()
            self._work_cancel = None
            self.set_activity("cancelling the rollout that was running…")
            self.notify(f"the rollout that was running is cancelled for {what} (r resumes it)", timeout=4)

    def _entry_step(self, branch: BranchView, row: int) -> bool:
        if branch.model_index_at(row) == 0:
            self.notify("step 0 is the entry call, forced from the interpreter: intervene at a later step",
                        severity="warning", timeout=4)
            return True
        return False

    def explain_intervention(self, action: str) -> None:
        """A hidden intervention key was pressed (no live model): say why it does nothing."""
        self._can_intervene(INTERVENTIONS[action])

    def action_override(self) -> None:
        if not self._can_intervene(INTERVENTIONS["override"]):
            return
        branch, row = self.branch, self.step
        assert branch is not None and self.view is not None
        if self._entry_step(branch, row):
            return

        def chosen(choice: OverrideChoice | None) -> None:
            if choice is not None:
                self._make_room("the override")
                self.cwm.start_override(branch, row, action=choice.action, label=choice.label)

        self.app.push_screen(
            OverrideScreen(row, self.view.program.source, branch.truth_at(row), branch.model_here(row)),
            chosen,
        )

    def action_edit_locals(self) -> None:
        if not self._can_intervene(INTERVENTIONS["edit_locals"]):
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
                self._make_room("the edited state")
                self.cwm.start_override(branch, row, locals_=values, label="edited state")

        truth = branch.truth_at(row)
        real = truth.locals if truth is not None and truth.locals is not None else None
        self.app.push_screen(EditLocalsScreen(row, frame.locals, real), edited)

    def action_teacher_forced(self) -> None:
        if not self._can_intervene(INTERVENTIONS["teacher_forced"]):
            return
        self._make_room("the teacher-forced rollout")
        self.cwm.start_teacher_forced()

    def action_teacher_forced_frames(self) -> None:
        if not self._can_intervene(INTERVENTIONS["teacher_forced_frames"]):
            return
        self._make_room("the teacher-forced rollout of whole frames")
        self.cwm.start_teacher_forced(whole_frames=True)

    def action_resume(self) -> None:
        branch = self.branch
        if branch is None or not self._can_intervene("resuming"):
            return
        self._make_room(f"resuming {branch.name}")
        self.cwm.start_resume(branch)

    def _panes(self) -> list:
        return [pane for pane in (self.source_pane, self.state_panel, self.output_panel) if pane.display]

    def action_focus_pane(self, direction: int) -> None:
        """Tab: the next pane (then back to the steps), to read or scroll it from the keyboard."""
        panes = self._panes()
        stops = [None, *panes]
        at = stops.index(self.focused) if self.focused in stops else 0
        target = stops[(at + direction) % len(stops)]
        self.set_focus(target)

    def on_descendant_focus(self) -> None:
        self.update_status()

    def on_descendant_blur(self) -> None:
        self.call_after_refresh(self.update_status)

    def action_cancel(self) -> None:
        if self.focused in self._panes():  # reading a pane: back to the steps
            self.set_focus(None)
            return
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
        notes = []
        hidden = [b for b in self.cwm.bindings_as_bound() if b.action in INTERVENTIONS and b not in shown]
        if hidden:
            keys = ", ".join(b.key for b in hidden)
            why = self.cwm.no_model_reason or "this session has no live model"
            notes.append(f"{keys} (override, edit, teacher forcing) are not here: {why}")
        self.app.push_screen(HelpScreen(shown, LEGEND, notes))

    def action_triage(self) -> None:
        self.stop_playing()
        self.app.push_screen("triage")

    def action_demo_pause(self) -> None:
        self.cwm.demo.toggle_pause()

    def action_demo_next(self) -> None:
        self.cwm.demo.next_now()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action in ("demo_pause", "demo_next"):  # only while a demo plays (else space and → are free)
            demo = self.cwm.demo
            return demo is not None and not demo.finished
        if action == "triage":
            return True if self.cwm.triage is not None else False  # only for a file of many programs
        if action == "export" and self.cwm.served:  # a visitor must not write files on the serving machine
            return False
        if action == "resume":  # a cancelled rollout this session can go on with
            branch = self.branch
            return bool(branch is not None and branch.resumable and self.view is not None and self.view.can_generate)
        if action in INTERVENTIONS:  # hidden (footer, ?, palette) where nothing can run them
            view = self.view
            return view is not None and view.can_generate
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
        elif not message.branch.running:  # a cancelled branch resumed
            message.branch.resume()
            self.refresh_bindings()
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
            self._offer_divergence()

    def on_work_started(self, message: WorkStarted) -> None:
        self._work_cancel = message.cancel

    def on_model_state(self, message: ModelState) -> None:
        self.cwm.no_model_reason = message.reason
        self.cwm.replay = message.replay
        self.refresh_bindings()

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
        branch.finish(message.state)  # (its job's WorkDone forgets its cancel: another may run now)
        self.refresh_bindings()  # r (resume) where it was cancelled
        if branch is self.branch:
            self.query_one("#truth", Timeline).show_branch(branch)
            self.query_one("#model", Timeline).show_branch(branch)
            self._title_model()
            self.show_step()
            self._offer_divergence()
        self.set_activity("")
        if branch.parent is not None or branch.intervention or branch.status is not RolloutStatus.ENDED:
            note = f"{branch.name}: {branch.status.label}"
            if branch.badge:
                note += f" · {branch.badge}"
            self.notify(note, timeout=4)

    @property
    def job_running(self) -> bool:
        """A job of the model (a rollout, an override, teacher forcing) runs now."""
        return self._work_cancel is not None

    def on_work_done(self, message: WorkDone) -> None:
        if self._work_cancel == message.cancel:
            self._work_cancel = None
        if self.cwm.demo is not None:  # a demo waiting for the branch of a job that made none goes on
            self.cwm.demo.job_over()

    def on_work_failed(self, message: WorkFailed) -> None:
        self.set_activity("")  # (its WorkDone follows, and forgets its cancel if it is still the one)
        if self.cwm.demo is not None:
            self.cwm.demo.job_over(message.message)
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
