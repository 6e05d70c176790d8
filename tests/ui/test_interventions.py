"""Live sessions: the model runs in a worker, frames stream in, interventions make branches.

The world model is the tests' oracle (tests/world_models.py): it knows the truth and makes the
one mistake it is told to, so what each branch should show is known exactly. No weights.
"""

from __future__ import annotations

import threading
import time

import pytest

from cwmtui.interpreter import load_program
from cwmtui.model import RolloutOptions
from cwmtui.model.backend import is_cancelled
from cwmtui.ui.app import CwmApp
from cwmtui.ui.live import LiveSession
from cwmtui.ui.screens import EditLocalsScreen, ErrorScreen, OverrideScreen

from ..world_models import OracleBackend, wrong_line, wrong_value
from .sessions import SAMPLES
from .waiting import wait_for

SIZE = (120, 40)
WRONG_LINE = '    joined = "-".join(out)\n'


@pytest.fixture
def strings(interpreter):
    program = load_program(str(SAMPLES / "strings.py"))
    return program, interpreter.trace(program)




def main_done(app) -> bool:
    view = app.view
    return view is not None and not view.branches[0].placeholder and not view.branches[0].running


def live_app(program, backend, interpreter=None, **options) -> CwmApp:
    live = LiveSession(program, lambda progress: backend, RolloutOptions(**options))
    return CwmApp(opener=live.start)


class GatedOracle(OracleBackend):
    """The oracle that stops after ``hold`` completions until the test opens ``gate``: the
    rollout is caught mid-stream whatever the machine's load."""

    def __init__(self, *args, hold: int = 8, **kwargs):
        super().__init__(*args, **kwargs)
        self.hold = hold
        self.completions = 0
        self.gate = threading.Event()

    def complete(self, *args, **kwargs):
        self.completions += 1
        cancel = args[6] if len(args) > 6 else kwargs.get("cancel")
        waited = time.monotonic()
        while self.completions > self.hold and not self.gate.wait(0.02) and time.monotonic() - waited < 30:
            if is_cancelled(cancel):  # Esc or quit: the rollout stops at this call
                break
        return super().complete(*args, **kwargs)


async def test_the_main_rollout_streams_into_the_model_timeline(strings):
    program, truth = strings
    backend = GatedOracle(program, truth.frames, mistakes={11: wrong_line(WRONG_LINE)})
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        await wait_for(pilot, lambda: app.view is not None and len(app.view.branches[0].frames) >= 5)
        branch = app.view.branches[0]
        # the UI compares what arrived a few times a second (later on a loaded machine), then draws it
        await wait_for(pilot, lambda: branch.kind(1).value != "pending")
        model = screen.query_one("#model")
        await wait_for(pilot, lambda: "(model still writing" in model.render_line(
            next(r for r in range(len(branch)) if branch.kind(r).value == "pending")).text)
        assert branch.running and len(branch.frames) < len(truth.frames)  # part of it is on screen
        pending = next(r for r in range(len(branch)) if branch.kind(r).value == "pending")
        assert 0 < pending < 19  # on screen
        assert "(model still writing" in model.render_line(pending).text
        assert "(model still writing" not in model.render_line(pending - 1).text
        assert "writing" in model.border_title
        assert "model writing step" in screen.query_one("#status").plain
        backend.gate.set()
        await wait_for(pilot, lambda: main_done(app))
        assert branch.status == "ended"
        assert branch.first_divergence.step == 11 and branch.first_divergence.kind == "action"
        assert "test oracle" in screen.query_one("#status").plain
        assert "writing" not in model.border_title


async def test_override_with_the_real_line_makes_a_branch_that_recovers(strings):
    program, truth = strings
    backend = OracleBackend(program, truth.frames, mistakes={11: wrong_line(WRONG_LINE)})
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("d", "o")
        assert isinstance(app.screen, OverrideScreen)
        options = app.screen.query_one("#override-options")
        assert options.get_option_at_index(0).id == "real"
        await pilot.press("enter")  # the real action
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        child = app.view.branches[1]
        assert screen.branch is child  # the new branch is shown
        assert child.name == "main/11" and child.parent == "main" and child.at_step == 11
        assert child.badge.startswith("recovered at step")
        assert child.first_divergence is None
        assert "[recovered at step" in screen.query_one("#status").plain
        await pilot.press("left_square_bracket")
        assert screen.branch.name == "main"
        await pilot.press("right_square_bracket")
        assert screen.branch is child


async def test_override_with_another_source_line_or_a_typed_one(strings):
    program, truth = strings
    backend = OracleBackend(program, truth.frames)
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("colon", "5", "enter", "o")
        assert isinstance(app.screen, OverrideScreen)
        await pilot.press("down", "down", "enter")  # a line of the program other than the real one
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        child = app.view.branches[1]
        assert child.intervention == "action overridden at step 5 with another line"
        assert child.first_divergence is not None and child.first_divergence.step == 5
        assert child.badge  # recovered or not, the branch says which
        await pilot.press("left_square_bracket", "o")
        app.screen.query_one("#override-typed").focus()
        await pilot.press(*"    pass", "enter")
        await wait_for(pilot, lambda: len(app.view.branches) == 3 and not app.view.branches[2].running)
        assert app.view.branches[2].intervention == "action overridden at step 5 with a typed line"


async def test_editing_the_state_at_a_step_puts_an_edited_frame_in_a_new_branch(strings):
    program, truth = strings
    step = next(i for i, f in enumerate(truth.frames) if (f.locals or {}).get("rotated") == "'ru'")
    backend = OracleBackend(program, truth.frames, mistakes={step: wrong_value("rotated", "'rv'")})
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("d")
        assert app.debugger.step == step
        await pilot.press("e")
        assert isinstance(app.screen, EditLocalsScreen)
        names = list(app.screen.values)
        field = app.screen.query_one(f"#local-{names.index('rotated')}")
        assert field.value == "'rv'"
        # #24: a value no trace could hold is refused, naming the variable (it used to start a
        # branch whose story said "the model thinks rotated is ['a', 'b'")
        field.value = "['a', 'b'"
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, EditLocalsScreen)
        hint = str(app.screen.query_one("#edit-hint").render())
        assert hint.startswith("rotated: ['a', 'b' is not a repr the interpreter could write")
        assert app.focused is field and len(app.view.branches) == 1
        # ... and the real value is offered: beside the name, and ctrl+r takes it
        labels = " ".join(str(label.render()) for label in app.screen.query(".local-name"))
        assert "interpreter: 'ru'" in labels
        await pilot.press("ctrl+r")
        assert field.value == "'ru'"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        child = app.view.branches[1]
        assert child.model_at(step).origin == "edited"
        assert child.model_at(step).locals["rotated"] == "'ru'"
        assert child.intervention == "state overridden at step 5".replace("5", str(step))
        assert child.badge.startswith("recovered at step")


async def test_teacher_forced_rollout_is_a_branch_of_its_own(strings):
    program, truth = strings
    backend = OracleBackend(program, truth.frames, mistakes={11: wrong_line(WRONG_LINE)})
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("t")
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        branch = app.view.branches[1]
        assert branch.name == "teacher-forced"
        # the oracle's only mistake is an action, which teacher forcing replaces
        assert branch.badge == f"teacher-forced: {len(truth.frames)}/{len(truth.frames)} steps right"
        # T: whole frames, each step from the interpreter's trace so far: the wrong line is the
        # model's own prediction there, and the one step it gets wrong
        await pilot.press("T")
        await wait_for(pilot, lambda: len(app.view.branches) == 3 and not app.view.branches[2].running)
        frames = app.view.branches[2]
        assert frames.name == "teacher-forced-frames"
        assert frames.badge == f"frames teacher-forced: {len(truth.frames) - 1}/{len(truth.frames)} steps right"
        assert frames.first_divergence.step == 11 and app.debugger.branch is frames
        assert "every frame from the interpreter" in frames.intervention


async def test_escape_cancels_a_running_rollout(strings):
    program, truth = strings

    app = live_app(program, GatedOracle(program, truth.frames, hold=5))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and not app.view.branches[0].placeholder)
        assert app.view.branches[0].running
        assert "esc cancels" in app.debugger.query_one("#status").plain
        await pilot.press("escape")
        await wait_for(pilot, lambda: not app.view.branches[0].running)
        branch = app.view.branches[0]
        assert branch.status == "cancelled"
        assert 0 < len(branch.frames) < len(truth.frames)
        await pilot.pause()
        # #24: cancelled is a state on screen, not "still writing" forever, and never "agree"
        model = app.debugger.query_one("#model")
        pending = next(r for r in range(len(branch)) if branch.kind(r).value == "pending")
        app.debugger.step = pending
        await pilot.pause()
        shown = model.render_line(model.cursor - int(model.scroll_offset.y)).text
        assert "(cancelled before this step)" in shown and "still writing" not in shown
        status = app.debugger.query_one("#status").plain
        assert f"none before the rollout was cancelled ({len(branch.frames)} steps written)" in status
        assert "the traces agree" not in status


async def test_a_model_that_fails_to_load_leaves_the_truth_on_screen(strings):
    program, _ = strings

    def broken(progress):
        from cwmtui.model import ModelError

        progress("reading weights", 0.5)
        raise ModelError("/models/x: no model.safetensors there")

    live = LiveSession(program, broken, RolloutOptions())
    app = CwmApp(opener=live.start)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and "no model" in app.view.model_description)
        await pilot.pause()
        assert any("no model.safetensors" in n.message for n in app._notifications)
        branch = app.view.branches[0]
        assert branch.placeholder and len(branch) == len(branch.truth.frames)
        await pilot.press("G")
        assert app.debugger.step == len(branch) - 1  # the truth can still be browsed
        await pilot.press("o")
        assert not isinstance(app.screen, OverrideScreen)


async def test_a_program_whose_entry_never_runs_gets_an_error_screen_and_exit_code_2(tmp_path):
    path = tmp_path / "never.py"
    path.write_text("def f(x):  # << START_OF_TRACE\n    return x\n")
    program = load_program(str(path))
    live = LiveSession(program, None)
    app = CwmApp(opener=live.start)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ErrorScreen))
        assert "never called" in app.screen.message
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_code == 2 and "never called" in app.fatal_message


async def test_on_a_replay_override_says_it_needs_a_live_model(tmp_path):
    from cwmtui.model.replay import ReplayBackend

    from .test_tmux import write_replay

    backend = ReplayBackend.open(str(write_replay(tmp_path)), "strings-1")
    live = LiveSession(backend.program, lambda progress: backend, RolloutOptions())
    app = CwmApp(opener=live.start)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        branch = app.view.branches[0]
        assert branch.first_divergence.regime == "string-valued state"
        await pilot.press("d", "o")
        assert not isinstance(app.screen, OverrideScreen)
        await pilot.press("t")
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("override: this is a replay") and "live model" in m for m in messages)
        assert len(app.view.branches) == 1


async def test_quitting_while_the_model_writes_stops_the_rollout(strings):
    program, truth = strings

    class VerySlowOracle(OracleBackend):
        def complete(self, *args, **kwargs):
            time.sleep(0.3)
            return super().complete(*args, **kwargs)

    backend = VerySlowOracle(program, truth.frames)
    live = LiveSession(program, lambda progress: backend, RolloutOptions())
    app = CwmApp(opener=live.start)
    start = time.monotonic()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and len(app.view.branches[0].frames) >= 2)
        await pilot.press("q")
    assert time.monotonic() - start < 8  # 42 frames at 0.3 s would take 12 s more
    waited = time.monotonic()
    while live.session.main.status == "running" and time.monotonic() - waited < 5:
        time.sleep(0.05)  # the worker thread notices the cancel at its next model call
    assert live.session.main.status == "cancelled"
    assert len(live.session.main.frames) < len(truth.frames)


async def test_the_model_is_closed_once_the_app_has_ended(strings):
    from cwmtui.ui.launch import run_app

    program, truth = strings

    class ClosingOracle(OracleBackend):
        closed = 0

        def close(self):
            self.closed += 1

    class RanUnderThePilot(CwmApp):
        def run(self, *args, **kwargs):  # run_app's app.run(): the pilot below ran it already
            return None

    backend = ClosingOracle(program, truth.frames)
    live = LiveSession(program, lambda progress: backend, RolloutOptions())
    app = RanUnderThePilot(opener=live.start)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        assert backend.closed == 0  # open while the app runs
        await pilot.press("q")
    assert run_app(app) == 0
    assert backend.closed == 1 and live.session.backend is None


async def test_the_entry_call_cannot_be_overridden(strings):
    program, truth = strings
    app = live_app(program, OracleBackend(program, truth.frames))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("o")
        assert not isinstance(app.screen, OverrideScreen)
        await pilot.pause()
        assert any("step 0 is the entry call" in n.message for n in app._notifications)


def test_an_intervention_after_the_paths_part_goes_to_the_models_own_frame(interpreter):
    from .sessions import exception_view

    branch = exception_view(interpreter).branches[0]
    for row in range(len(branch)):
        index = branch.model_index_at(row)
        own = branch.steps[row].model_index
        assert index == own if own is not None else index >= 0
    # rows only the interpreter has map to the next frame the model would write
    row = next(r for r in range(len(branch)) if branch.steps[r].model_index is None)
    before = max(s.model_index for s in branch.steps[:row] if s.model_index is not None)
    assert branch.model_index_at(row) == before + 1


async def test_model_written_names_and_error_text_are_shown_as_written_not_as_markup(interpreter):
    from .sessions import strings_view

    app = CwmApp(strings_view(interpreter))
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(EditLocalsScreen(3, {"[/b]": "1", "[bold]y": "2"}))
        await pilot.pause()
        names = [str(label.render()) for label in app.screen.query(".local-name")]
        assert names == ["[/b]", "[bold]y"]
        await pilot.press("ctrl+u", "tab", "ctrl+u", "ctrl+s")
        hint = str(app.screen.query_one("#edit-hint").render())
        assert hint == "[/b]: a value cannot be empty"
        await pilot.press("escape")
        app.push_screen(ErrorScreen("no model", "/tmp/[/red]/model: config.json [bold"))
        await pilot.pause()
        assert str(app.screen.query_one("#error-message").render()) == "/tmp/[/red]/model: config.json [bold"


class UIThreadWatch(OracleBackend):
    """The oracle, noting every call made on the UI thread (the test's main thread, where
    Textual's loop runs): drawing must never tokenize or generate there (#23: the state panel
    tokenized values through the backend, an HTTP call per draw with --server)."""

    def __init__(self, *args, **kwargs):
        self.on_ui_thread: list[str] = []
        super().__init__(*args, **kwargs)
        self.on_ui_thread.clear()  # (made in the test's thread, before any app runs)

    def _watch(self, name: str) -> None:
        if threading.current_thread() is threading.main_thread():
            self.on_ui_thread.append(name)

    def complete(self, *args, **kwargs):
        self._watch("complete")
        return super().complete(*args, **kwargs)

    def encode(self, text):
        self._watch("encode")
        return super().encode(text)

    def decode(self, ids):
        self._watch("decode")
        return super().decode(ids)

    def token_pieces(self, text):
        self._watch("token_pieces")
        return super().token_pieces(text)


async def test_no_backend_call_runs_on_the_ui_thread_and_the_lens_comes_from_a_worker(strings):
    program, truth = strings
    step = next(i for i, f in enumerate(truth.frames) if (f.locals or {}).get("rotated") == "'ru'")
    backend = UIThreadWatch(program, truth.frames, mistakes={step: wrong_value("rotated", "'rv'")})
    app = live_app(program, backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        branch = app.view.branches[0]
        assert branch.first_divergence.step == step and branch.first_divergence.string_valued
        await pilot.press("d")  # to the first divergence: a string-valued difference
        state = app.debugger.state_panel
        shown = lambda: " ".join(state.lines)  # noqa: E731 (the panel wraps its lines)
        await wait_for(pilot, lambda: "split by the model's tokenizer" in shown())
        await pilot.press("j", "k", "z", "z")  # draw it again, and again
        await pilot.pause(0.2)
        assert "split by the model's tokenizer" in shown() and "until the model's tokenizer" not in shown()
    assert backend.on_ui_thread == []
