"""The trace debugger: the Textual app that ``cwmtui PROGRAM`` opens.

:class:`CwmApp` holds the session, the theme, the keymap and the command palette; the main
screen is :class:`~cwmtui.ui.debugger.DebuggerScreen` (``debugger.py``), its keys the one table
in ``bindings.py``, the messages workers post ``messages.py``. Long work (the interpreter,
loading a model, a rollout) runs in workers that post messages; only the handlers change state.
"""

from __future__ import annotations

import dataclasses
import os
import time
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from ..terminal import printable
from .bindings import BINDINGS, INTERVENTIONS, PALETTE_SKIPS
from .branch_view import BranchView, SessionView
from .commands import StepCommands
from .debugger import DebuggerScreen
from .messages import BranchFinished, ExportDone
from .screens import TypeAhead
from .keymap import load_keymap
from .themes import DEFAULT_THEME, VARIABLE_DEFAULTS, ThemeError, ThemeFile, load_theme, theme_names

#: set in the environment of the debuggers ``cwmtui serve`` starts, one per browser tab
SERVED_ENV = "CWMTUI_SERVED"

__all__ = ["BINDINGS", "CwmApp", "DebuggerScreen"]


# -- the app --------------------------------------------------------------------------------


class CwmApp(App):
    """``cwmtui``: the interpreter and a code world model, side by side."""

    TITLE = "cwmtui"
    ENABLE_COMMAND_PALETTE = True
    _keys_typed = 0  # keys that came in from the terminal, numbered (see on_event, TypeAhead.hold)
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
        demo=None,
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
        self.last_export: tuple[Path, Path] | None = None  # the files the last export wrote
        self.demo = demo  # the DemoPlayer of --demo (ui/demo.py), or None
        # the user's keymap, read before the debugger is built: its bindings table is made with
        # the keys remapped in place (each stays in its footer group and its order)
        self.user_keymap, self._keymap_problems = load_keymap({b.id for b in BINDINGS if b.id})
        for binding in self.bindings_as_bound():  # an intervention key where it is hidden: say why
            if binding.action in INTERVENTIONS:
                self._bindings.bind(binding.key, f"explain_intervention({binding.action!r})", show=False)

    async def on_event(self, event: events.Event) -> None:
        # Keys typed right after a dialog's key go to the dialog (see screens.TypeAhead): those
        # that arrive before it is built wait for it; those the screen below was given while the
        # dialog's key ran (they come back up unhandled) are sent on to the dialog.
        if isinstance(event, events.Key):
            screen = self.screen
            if not event.is_forwarded:
                event._cwm_screen = screen  # type: ignore[attr-defined]  # where it was sent
                self._keys_typed += 1
                event._cwm_order = self._keys_typed  # type: ignore[attr-defined]  # when it came in
                if isinstance(screen, TypeAhead) and screen.hold(event):
                    return
            elif isinstance(screen, TypeAhead) and getattr(event, "_cwm_screen", screen) is not screen:
                if not screen.hold(event):
                    screen.pass_on(self, events.Key(event.key, event.character))
                return
        await super().on_event(event)

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
        return DebuggerScreen(self.layout_choice, bindings=self.bindings_as_bound())

    @property
    def debugger(self) -> DebuggerScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.apply_theme(self._theme_spec)
        for problem in self._keymap_problems:
            self.notify(problem, severity="warning", timeout=10)
        if self.opener is not None:
            self.opener(self)
        if self.demo is not None:
            self.demo.start(self)

    def bindings_as_bound(self) -> list[Binding]:
        """The debugger's bindings with the keys the user's keymap gave them."""
        keymap = self.user_keymap
        return [dataclasses.replace(b, key=keymap[b.id], key_display=None) if b.id in keymap else b for b in BINDINGS]

    def adopt_live(self, live) -> None:
        """The live session whose workers feed this app (its opener calls this, on mount)."""
        self.live = live

    def adopt_triage(self, triage) -> None:
        """The failure list of a replay file with many programs (its opener calls this)."""
        self.triage = triage

    def on_branch_finished(self, message: BranchFinished) -> None:
        """A branch stopped (the debugger has shown it; the message bubbles up here): the
        triage list, if any, fills the opened program's row from its main rollout."""
        if self.triage is not None:
            self.triage.branch_finished(self.view, message.branch)

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
            if command.title not in ("Theme", "Keys"):  # ours below; ? is the keys panel, esc closes it
                yield command
        for name in theme_names():
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme", lambda n=name: self.switch_theme(n))
        debugger = self.screen_stack[0]
        if not isinstance(debugger, DebuggerScreen) or screen is not debugger:
            return  # (the triage list on top: the debugger's commands would act on a screen out of sight)
        # every key of the debugger, from the one bindings table (as the keymap bound them)
        for binding in self.bindings_as_bound():
            if binding.id in PALETTE_SKIPS or debugger.check_action(binding.action, ()) is False:
                continue
            keys = ", ".join(self.get_key_display(Binding(k.strip(), "")) for k in binding.key.split(","))
            yield SystemCommand(binding.tooltip or binding.description, f"key {keys}", partial(debugger.run_action, binding.action))
        yield SystemCommand("Jump to first divergence", "Select the step where the model first leaves the truth",
                            self.jump_to_first_divergence)
        yield SystemCommand("Toggle layout", "Source pane in its own column, or below the timelines",
                            self.toggle_layout)

    def action_explain_intervention(self, action: str) -> None:
        if self.screen is self.debugger:
            self.debugger.explain_intervention(action)

    def jump_to_first_divergence(self) -> None:
        self.debugger.action_first_divergence()

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

    def start_resume(self, branch: BranchView) -> None:
        if self.live is None:
            self.notify("this session has no live model", severity="warning")
            return
        self.live.resume_branch(branch)

    def start_teacher_forced(self, whole_frames: bool = False) -> None:
        if self.live is None:
            self.notify("this session has no live model", severity="warning")
            return
        self.live.teacher_forced(whole_frames=whole_frames)

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

    @property
    def served(self) -> bool:
        """A tab of ``cwmtui serve``: its visitor must not write files on the serving machine."""
        return bool(os.environ.get(SERVED_ENV))

    def export_session(self) -> tuple[Path, Path] | None:
        if self.served:
            self.notify("export writes files on the machine that serves this page: it is off in cwmtui serve",
                        severity="warning")
            return None
        view = self.view
        if view is None or view.engine is None:
            self.notify("nothing to export yet", severity="warning")
            return None
        if any(b.running for b in view.branches):
            self.notify("the model is still writing: export when it is done (or esc to cancel it)",
                        severity="warning")
            return None
        json_path, svg_path = self.export_paths()
        try:  # the screen, here (it is the screen now); the session, in a worker (it may be large,
            # and saving works out token lenses through the model's tokenizer, perhaps a server)
            self.export_dir.mkdir(parents=True, exist_ok=True)
            self.save_screenshot(svg_path.name, str(svg_path.parent))
        except OSError as exc:
            self.notify(f"cannot export: {exc}", severity="error")
            return None
        session = view.engine

        def save() -> None:
            try:
                session.save(str(json_path))
            except Exception as exc:  # noqa: BLE001 - SessionError or OSError: told, the app goes on
                self.post_message(ExportDone(json_path, svg_path, f"cannot export: {exc}"))
                return
            self.post_message(ExportDone(json_path, svg_path))

        self.run_worker(save, thread=True, group="export", name="export")
        return json_path, svg_path

    def on_export_done(self, message: ExportDone) -> None:
        if message.error:
            self.notify(message.error, severity="error")
            return
        self.last_export = (message.json_path, message.svg_path)
        self.notify(f"saved {message.json_path} and {message.svg_path.name}", title="export", timeout=6)
