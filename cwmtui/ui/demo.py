"""The demo that plays itself (``--demo``): a script's steps (``cwmtui/demo_script.py``) played
by the debugger, with a caption line that says what is happening and why.

The player drives the debugger only through its own actions, as their keys would (f, d, :,
tab, p, o and the override dialog's choice, t, [ and ]), from a timer on the UI thread; the
model's work runs in the live session's workers as it does for a key, and the player reads
the screen's state (the model stopped writing, a new branch finished) to know when a step is
done. Then the caption stays for the step's pause, and the next step begins. ``space`` pauses
and goes on; ``→`` goes to the next step at once (skipping a wait).

The script is data: its captions are shown as text (never markup), with the screen's values
in their braces, and a claim the script makes (``expect``) that this run does not bear out is
said on the caption, not hidden.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import OptionList, Static

from ..demo_script import DemoScript, DemoStep
from ..interpreter.program import display_name
from ..terminal import printable
from ..trace.tokens import strip_marker
from .branch_view import describe_divergence
from .screens import OverrideScreen

if TYPE_CHECKING:
    from .app import CwmApp
    from .debugger import DebuggerScreen

TICK = 0.1  # seconds between two looks at the screen
CHOOSE_AFTER = 1.5  # seconds the override dialog stays up before the player picks its line
#: the steps that wait for the model (their caption says so while they do)
MODEL_WORK = frozenset({"wait", "override", "teacher-force"})


class DemoPlayer:
    """Plays a :class:`DemoScript` in a :class:`~cwmtui.ui.app.CwmApp` (which holds it, so the
    play goes on when the debugger recomposes for a new size)."""

    def __init__(self, script: DemoScript, *, choose_after: float = CHOOSE_AFTER) -> None:
        self.script = script
        self.choose_after = choose_after
        self.app: CwmApp | None = None
        self.index = -1  # the step being played
        self.acted = False  # its action has been done
        self.done = False  # ... and what it waits for has happened
        self.held = 0.0  # seconds its caption has stayed since it was done (not counting pauses)
        self.paused = False
        self.finished = False
        self.note = ""  # what the player adds to the caption (a claim not borne out, a step skipped)
        self._phase = ""  # override: "dialog" (up, to be chosen from), "branch" (the new branch runs)
        self._job_over = False  # a job ended since the step began (see job_over)
        self._since = 0.0  # when the phase began
        self._branches = 0  # how many branches there were before the step's action
        self._focused_state = False
        self._last = 0.0
        self._shown: Text | None = None
        self._timer = None

    # -- plumbing -----------------------------------------------------------------------------
    def start(self, app: CwmApp) -> None:
        """Called by the app once it is mounted."""
        self.app = app
        self._last = time.monotonic()
        self._timer = app.set_interval(TICK, self.tick, name="demo")
        self.tick()

    @property
    def debugger(self) -> DebuggerScreen:
        assert self.app is not None
        return self.app.debugger

    @property
    def step(self) -> DemoStep | None:
        steps = self.script.steps
        return steps[self.index] if 0 <= self.index < len(steps) else None

    # -- the keys -----------------------------------------------------------------------------
    def toggle_pause(self) -> None:
        """space: pause (the model's work goes on; the next step waits), or go on."""
        self.paused = not self.paused
        self.show()

    def next_now(self) -> None:
        """→: the next step at once (the caption's pause, or a wait, cut short)."""
        if not self.finished and self._phase != "dialog":
            self._begin(self.index + 1)
            self._play(time.monotonic())
            self.show()

    # -- playing ------------------------------------------------------------------------------
    def tick(self) -> None:
        now = time.monotonic()
        elapsed, self._last = now - self._last, now
        if self.finished or self.app is None:
            return
        on_top = self.app.screen is self.debugger  # (the user's ? or / on top: the demo waits for them)
        if self.index < 0:
            self._begin(0)
        elif self.done and not self.paused and on_top:
            self.held += elapsed
            if self.held >= self.script.steps[self.index].pause:
                self._begin(self.index + 1)
        self._play(now)
        self.show()

    def _play(self, now: float) -> None:
        """Act the current step when it can be, and see whether it is done."""
        step = self.step
        if self.finished or step is None or not self.debugger.wired:
            return
        if not self.acted:
            # every step but open and say acts on a program on screen, with the debugger on top
            if self.app.screen is self.debugger and (self.app.view is not None or step.do in ("open", "say")):
                self.acted = True
                self._act(step, now)
        if self.acted and not self.done and self._is_done(step, now):
            self.done = True
            self._expectation(step)

    def _begin(self, index: int) -> None:
        if self._focused_state:  # the state panel was pointed at: the keys go back to the steps
            self._focused_state = False
            if self.debugger.focused is self.debugger.state_panel:
                self.debugger.set_focus(None)
        if index >= len(self.script.steps):  # the end: the last caption stays (with its note)
            self.finished = True
            if self._timer is not None:
                self._timer.stop()
            self.debugger.refresh_bindings()  # space and → are the debugger's again
            return
        self.index = index
        self.acted = self.done = False
        self.held = 0.0
        self.note = ""
        self._phase = ""
        self._job_over = False  # the job the step started is over (whether or not it made a branch)

    def _act(self, step: DemoStep, now: float) -> None:
        """The step's action, as its key would do it."""
        debugger, view = self.debugger, self.app.view if self.app is not None else None
        self._branches = len(view.branches) if view is not None else 0
        do = step.do
        if do == "first-divergence":
            debugger.action_first_divergence()
        elif do == "next-divergence":
            debugger.action_divergence(1)
        elif do == "go-to":
            branch = debugger.branch
            size = len(branch) if branch is not None else 0
            debugger.go_to_step(step.step if step.step >= 0 else size + step.step)
        elif do == "state":
            debugger.set_focus(debugger.state_panel)
            self._focused_state = True
        elif do == "play":
            if not debugger.playing:
                debugger.action_play()
        elif do == "branch":
            self._show_branch(step.to)
        elif do == "teacher-force":
            if view is None or not view.can_generate:
                self.note = "(skipped: no live model to run it)"
            elif step.frames:
                debugger.action_teacher_forced_frames()
            else:
                debugger.action_teacher_forced()
            self._phase = "branch"
        elif do == "override":
            if step.line == "real" and self._line_already_right():
                return
            debugger.action_override()
            if isinstance(self.app.screen, OverrideScreen):
                self._phase, self._since = "dialog", now
            else:  # the debugger said why in a toast (no live model, the entry step)
                self.note = "(skipped: no override here)"

    def _line_already_right(self) -> bool:
        """The model's line at the step on show is the interpreter's already (a state or value
        divergence): overriding it with the real line would run the same trace again. Said in
        the note (the step is skipped)."""
        branch, row, view = self.debugger.branch, self.debugger.step, self.app.view
        if branch is None or view is None or not view.can_generate:  # (no model: the debugger says so)
            return False
        truth, model = branch.truth_at(row), branch.model_here(row)
        if truth is None or model is None or not truth.action or strip_marker(model.action) != strip_marker(truth.action):
            return False
        self.note = (f"(skipped: the model's line at step {row} is the interpreter's already; "
                     "what differs is its state)")
        return True

    def job_over(self, failure: str = "") -> None:
        """The debugger's word that a job ended (``failure``: why it failed): an override or
        teacher forcing that made no branch ends its step, saying so, instead of waiting on."""
        if self._phase != "branch" or self.done:
            return
        self._job_over = True
        if failure:
            self.note = f"(the intervention failed: {failure})"

    def _show_branch(self, to: str) -> None:
        debugger, view = self.debugger, self.app.view
        names = [b.name for b in view.branches]
        at = debugger.branch_index
        if to == "next":
            target = at + 1
        elif to == "previous":
            target = at - 1
        elif to == "main":
            target = 0
        elif to in names:
            target = names.index(to)
        else:
            self.note = f"(no branch named {to!r})"
            return
        if len(names) > 1 and target % len(names) != at:
            debugger.action_branch(target - at)

    def _is_done(self, step: DemoStep, now: float) -> bool:
        app = self.app
        view = app.view
        if self.note.startswith("(skipped") or self.note.startswith("(no branch"):
            return True
        if step.do == "open":
            return view is not None
        if step.do == "play":
            return not self.debugger.playing
        if step.do == "wait":
            if view is None:
                return False
            if view.branches and view.branches[0].placeholder:
                if app.no_model_reason and not app.replay and not view.can_generate:  # no model came: nothing to wait for
                    self.note = f"(no model: {app.no_model_reason})"
                    return True
                return False
            return not any(b.running for b in view.branches)
        if step.do == "override" and self._phase == "dialog":
            dialog = app.screen
            if not isinstance(dialog, OverrideScreen):  # closed by the user (esc)
                self.note = "(the override was cancelled)"
                return True
            if now - self._since >= self.choose_after:
                self._choose(dialog, step)
            return False
        if self._phase == "branch":
            grown = view is not None and len(view.branches) > self._branches
            if self._job_over and not grown and not self.debugger.job_running:  # it failed, or was cancelled first
                self.note = self.note or "(the intervention made no branch)"
                return True
            return grown and not any(b.running for b in view.branches)
        return True

    def _choose(self, dialog: OverrideScreen, step: DemoStep) -> None:
        """Pick the script's line in the override dialog, as enter on it would."""
        options = dialog.query_one("#override-options", OptionList)
        wanted = "real" if step.line == "real" else f"line-{step.line}"
        index = next((i for i in range(options.option_count) if options.get_option_at_index(i).id == wanted), None)
        if index is None:
            self.note = ("(skipped: no real line at this step)" if step.line == "real"
                         else f"(skipped: line {step.line} is not a line the model can be given)")
            dialog.action_cancel()
            return
        options.highlighted = index
        options.action_select()
        self._phase = "branch"

    def _expectation(self, step: DemoStep) -> None:
        """The script's claim about the branch on show, checked: said when this run differs."""
        if step.expect is None or self.note:
            return
        branch = self.debugger.branch
        if branch is None:
            return
        recovery = branch.state.recovery
        if step.expect in ("recovered", "not recovered"):
            if recovery is None:
                actual = "no intervention on this branch"
            elif recovery.recovered_at is not None:
                actual = f"recovered at step {recovery.recovered_at}"
            else:
                actual = "not recovered"
            holds = actual.startswith("recovered") == (step.expect == "recovered") and recovery is not None
        else:
            divergence = branch.first_divergence
            actual = f"first divergence at {describe_divergence(divergence)}" if divergence is not None else "the traces agree"
            holds = (divergence is not None) == (step.expect == "diverges")
        if not holds:
            self.note = f"(the script expected {step.expect!r}; this run: {actual})"

    # -- the caption --------------------------------------------------------------------------
    def values(self) -> dict[str, str]:
        """What a caption's braces name, read from the screen ("—" where there is nothing)."""
        app = self.app
        view = app.view if app is not None else None
        values = dict.fromkeys(("program", "model", "step", "branch", "divergence", "regime", "variables",
                                "truth_line", "model_line", "badge", "ending"), "—")
        if view is None:
            return values
        debugger = self.debugger
        branch, row = debugger.branch, debugger.step
        values["program"] = display_name(view.program.path)
        values["model"] = view.model_description or view.model_name or "—"
        values["step"] = str(row)
        if branch is None:
            return values
        values["branch"] = branch.name
        divergence = branch.first_divergence
        if divergence is not None:
            values["divergence"] = describe_divergence(divergence)
            values["regime"] = divergence.regime or divergence.kind
            values["variables"] = ", ".join(divergence.variables) or "—"
        truth, model = branch.truth_at(row), branch.model_here(row)
        if truth is not None and truth.action:
            values["truth_line"] = truth.action.strip()
        if model is not None and model.action:
            values["model_line"] = model.action.strip()
        values["badge"] = branch.badge or "—"
        values["ending"] = branch.ending(short=True) or "—"
        return values

    def caption(self) -> Text:
        """The caption line: where the demo is, what it says, and the keys."""
        step = self.step
        if step is None:
            return Text("demo: starting…")
        total = len(self.script.steps)
        line = Text(no_wrap=False)
        line.append(f" demo {self.index + 1}/{total} ", "reverse bold")
        line.append(" ")
        line.append(printable(step.caption(self.values())), "bold")  # the script's text and the screen's: data
        if self.note:
            line.append(" " + printable(self.note), "italic")
        if self.finished:
            hint = "end of the demo · the keys are yours (? lists them)"
        elif self.paused:
            hint = "❚❚ paused · space goes on · → next step"
        elif self.acted and not self.done and step.do in MODEL_WORK:
            hint = "waiting for the model… · → skips · space pauses"
        else:
            hint = "space pauses · → next step"
        line.append(f"   [{hint}]", "dim")
        return line

    def show(self) -> None:
        """Put the caption on the debugger's caption line (when it changed)."""
        if self.app is None:
            return
        text = self.caption()
        if self._shown is not None and text == self._shown:
            return
        self._shown = text
        for widget in self.debugger.query(DemoCaption):
            widget.update(text)


class DemoCaption(Static, can_focus=False):
    """The caption line of a demo (the debugger shows it above its status bar)."""

    DEFAULT_CSS = """
    DemoCaption { height: auto; max-height: 4; background: $primary 25%; color: $foreground; padding: 0 1; }
    """

    def on_mount(self) -> None:
        player = getattr(self.app, "demo", None)
        if player is not None:
            self.update(player.caption())

    @property
    def plain(self) -> str:
        """The text shown (read by tests)."""
        content = self.content
        return content.plain if isinstance(content, Text) else str(content)
