"""#24, the debugger tells the whole truth: why each side stopped, the token limit that applies,
each side's own step numbers, the first divergence's mark, and a footer that stays."""

from __future__ import annotations

import pytest
from textual.widgets import Footer

from cwmtui.interpreter import Limits, load_program
from cwmtui.model import RolloutOptions
from cwmtui.ui.app import CwmApp
from cwmtui.ui.live import LiveSession
from cwmtui.ui.timeline import FIRST_MARK

from ..world_models import OracleBackend
from .sessions import SAMPLES, strings_view
from .test_interventions import live_app, main_done
from .waiting import wait_for

SIZE = (120, 40)


@pytest.fixture
def strings(interpreter):
    program = load_program(str(SAMPLES / "strings.py"))
    return program, interpreter.trace(program)


def rows(timeline) -> list[str]:
    """What a timeline shows now, line by line."""
    return [timeline.render_line(y).text for y in range(timeline.scrollable_content_region.height)]


def footer_keys(app) -> dict[str, tuple[int, int]]:
    """The footer's keys on screen: description (or key) -> (first column, last column + 1)."""
    footer = app.screen.query_one(Footer)
    return {key.description or key.key_display or key.key: (key.region.x, key.region.right)
            for key in footer.query("FooterKey") if key.display and key.region.width}


async def test_a_model_stopped_by_its_context_says_so_and_the_meter_counts_to_the_context(strings):
    program, truth = strings
    oracle = OracleBackend(program, truth.frames)
    oracle.context_length = 1500  # the prompt and a few frames: far less than the 8,192 budget
    app = live_app(program, oracle)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        screen = app.debugger

        def both_ends_shown() -> bool:
            return (any("■" in row for row in rows(screen.truth_timeline))
                    and any(row.startswith("■") for row in rows(screen.model_timeline)))

        # G to the last step, until both timelines show their end rows (on a loaded machine a G
        # pressed as the rollout's last message lands can go to the step before: CI, once each)
        for _ in range(50):
            await pilot.press("G")
            await pilot.pause(0.1)
            if both_ends_shown():
                break
        branch = app.view.branches[0]
        model_rows, truth_rows = rows(screen.model_timeline), rows(screen.truth_timeline)
        # the row after the last says how each side ended, in its own words
        assert any("■ the program returned" in row for row in truth_rows)
        end = next(row for row in model_rows if row.startswith("■"))
        assert "context full (1,500 tokens)" in end
        # a row the model never wrote names why, not "(model trace ended)"
        assert any("(the model had stopped:" in row for row in model_rows)
        status = screen.status_bar.plain
        assert "ended: the program returned · model: " in status
        limit = branch.token_limit
        assert limit is not None and limit < 1500 - 100  # the context less the prompt
        assert f"/{limit:,} (the model's context)" in status and "/8,192" not in status.split("\n")[1]


async def test_a_program_that_ends_itself_says_how_and_the_model_running_on_is_a_divergence(tmp_path, interpreter):
    path = tmp_path / "hard_exit.py"
    path.write_text(
        "import os\n\n\ndef f(n):  # << START_OF_TRACE\n    total = n + 1\n    os._exit(6)\n    return total\n\n\n"
        "def main():\n    return f(2)\n"
    )
    program = load_program(str(path), call="f(2)")
    truth = interpreter.trace(program)
    assert truth.status.exit_code == 6
    # the model believes the function returns: it writes past the program's end
    from cwmtui.trace import Event, Frame

    ran_on = Frame(Event.RETURN, "    return total\n", None, "3")
    oracle = OracleBackend(program, [*truth.frames, ran_on])
    app = live_app(program, oracle)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.press("G")
        await pilot.pause()
        screen = app.debugger
        truth_rows = rows(screen.truth_timeline)
        assert any("■ the program ended itself: os._exit(6)" in row for row in truth_rows)
        assert any("(after the program's end)" in row for row in truth_rows)
        status = screen.status_bar.plain
        assert "the program ended itself: os._exit(6)" in status
        assert "the traces agree" not in status and "first divergence step" in status


async def test_the_interpreters_frame_limit_is_on_screen(strings):
    program, _ = strings
    live = LiveSession(program, None, RolloutOptions(), limits=Limits(frames=12))  # no model: the truth alone
    app = CwmApp(opener=live.start)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None)
        await pilot.press("G")
        await pilot.pause()
        screen = app.debugger
        assert any("■ stopped by the frames limit" in row for row in rows(screen.truth_timeline))
        assert "ended: stopped by the frames limit" in screen.status_bar.plain


async def test_each_side_numbers_its_own_steps_once_the_paths_part(interpreter):
    from .sessions import exception_view

    view = exception_view(interpreter)  # the model returns where the program raised
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("G")
        await pilot.pause()
        screen = app.debugger
        branch = view.branches[0]
        parted = next(r for r in range(len(branch)) if branch.step_numbers(r) != (r, r))
        screen.step = parted
        await pilot.pause()
        truth_step, model_step = branch.step_numbers(parted)
        status = screen.status_bar.plain
        shown = lambda n: "—" if n is None else str(n)  # noqa: E731
        assert f"step {parted}/" in status and f"(interpreter {shown(truth_step)}, model {shown(model_step)})" in status


async def test_the_first_divergence_has_its_own_mark_and_is_pointed_out(interpreter):
    view = strings_view(interpreter)
    first = view.branches[0].first_divergence.step
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any(f"first divergence at step {first}" in n and "f goes there" in n for n in notes)
        assert app.debugger.step == 0  # offered, not forced: the selection stays the user's
        await pilot.press("f")
        await pilot.pause()
        screen = app.debugger
        assert screen.step == first
        row = screen.truth_timeline.render_line(first - int(screen.truth_timeline.scroll_offset.y)).text
        assert row.startswith(FIRST_MARK)
        later = first + 1
        assert view.branches[0].kind(later).is_divergence  # a later red row does not carry the mark
        row = screen.truth_timeline.render_line(later - int(screen.truth_timeline.scroll_offset.y)).text
        assert not row.startswith(FIRST_MARK) and row.startswith("≠")


async def test_the_footer_survives_resizes_and_layout_toggles_and_fits_120_columns(strings):
    program, truth = strings
    app = live_app(program, OracleBackend(program, truth.frames))  # a live model: o, e, t shown too
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: main_done(app))
        await pilot.pause()
        keys = footer_keys(app)
        for wanted in ("Help", "Quit", "Override", "Edit", "Force lines", "Go to", "Find", "Play", "Export", "Unfold"):
            assert wanted in keys and keys[wanted][1] <= 120, (wanted, keys)
        # (each waits for the recomposed footer to be laid out: under load it takes more than 0.2 s;
        # a footer that lost its keys still fails, after the wait's timeout)
        await pilot.resize_terminal(100, 30)
        await wait_for(pilot, lambda: "Quit" in footer_keys(app), timeout=10)
        await app.toggle_layout()
        await wait_for(pilot, lambda: "Quit" in footer_keys(app) and "Override" in footer_keys(app), timeout=10)
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: "Quit" in footer_keys(app), timeout=10)


async def test_a_remapped_key_keeps_its_place_in_the_footer(interpreter, tmp_path, monkeypatch):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('"play.toggle" = "space"\n')
    monkeypatch.setenv("CWMTUI_KEYMAP", str(keymap))
    app = CwmApp(strings_view(interpreter))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        keys = footer_keys(app)
        assert "Play" in keys and keys["Play"][1] <= 120
        assert keys["Find"][0] < keys["Play"][0] < keys["Export"][0]  # where it was, not at the end


def burst(app, *keys: str) -> None:
    """Keys as a terminal sends them when typed fast or pasted: all at once, nothing awaited."""
    from textual import events

    names = {":": "colon", "/": "slash", "\r": "enter"}
    for char in keys:
        app.post_message(events.Key(names.get(char, char), char))


async def test_keys_typed_right_after_a_dialog_key_reach_the_dialog(interpreter):
    view = strings_view(interpreter)
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        burst(app, ":", "1", "2", "\r")
        await wait_for(pilot, lambda: app.screen is app.debugger and app.debugger.step == 12)
        burst(app, "/", "r", "u", "o", "\r")
        await wait_for(pilot, lambda: app.screen is app.debugger and app.debugger.last_search == "ruo")
        assert app.debugger.step == view.branches[0].search("ruo", 12)


def test_keys_held_for_a_dialog_keep_the_order_they_were_typed_in():
    """CI (tmux, ':12⏎' typed at once, under load) landed on step 21: the 1 went to the screen
    below while the dialog was being built and came back up after the 2 had been held."""
    from textual import events

    from cwmtui.ui.screens import PromptScreen

    dialog = PromptScreen("Go to step", "a number")
    one, two, enter = events.Key("1", "1"), events.Key("2", "2"), events.Key("enter", "\r")
    for order, key in enumerate((one, two, enter), start=1):
        key._cwm_order = order
    assert dialog.hold(two) and dialog.hold(one) and dialog.hold(enter)  # the 1 comes back up late
    assert [key.key for key in dialog.held] == ["1", "2", "enter"]


async def test_o_while_the_model_writes_cancels_it_and_esc_then_r_resumes(strings):
    from cwmtui.ui.screens import OverrideScreen

    from .test_interventions import GatedOracle

    program, truth = strings
    oracle = GatedOracle(program, truth.frames, hold=5)
    app = live_app(program, oracle)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and not app.view.branches[0].placeholder)
        main = app.view.branches[0]
        assert main.running
        await pilot.press("j", "o")  # was refused ("wait, or press esc"): the dialog opens
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        assert main.running  # the model writes on while the user chooses
        await pilot.press("enter")  # the real line: the running rollout stops, the override runs
        await wait_for(pilot, lambda: not main.running)
        oracle.gate.set()  # (the oracle holds every call after the fifth until now)
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        assert main.status == "cancelled" and app.view.branches[1].name == "main/1"
        assert any("cancelled for the override" in n.message for n in app._notifications)
        await pilot.press("[")  # back to main, cancelled: it says so, and how to go on
        await pilot.pause()
        screen = app.debugger
        assert screen.branch is main
        pending = next(r for r in range(len(main)) if main.kind(r).value == "pending")
        screen.step = pending
        await pilot.pause()
        assert "cancelled before this step (r" in rows(screen.state_panel)[0]  # not "not written yet"
        await pilot.press("G")
        await pilot.pause()
        assert "r resumes" in "\n".join(rows(screen.model_timeline))
        assert "cancelled after" in screen.status_bar.plain
        written = len(main.frames)
        await pilot.press("r")
        await wait_for(pilot, lambda: main_done(app) and main.status != "cancelled")
        assert main.status == "ended" and len(main.frames) == len(truth.frames) > written
        assert main.first_divergence is None and "none: the traces agree" in screen.status_bar.plain


async def test_tab_focuses_a_pane_whose_keys_scroll_it_and_esc_goes_back_to_the_steps(interpreter):
    view = strings_view(interpreter)
    app = CwmApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f")
        await pilot.pause()
        screen = app.debugger
        step = screen.step
        assert app.focused is None  # the arrows move through the steps
        await pilot.press("tab", "tab")
        assert app.focused is screen.state_panel
        assert "reading the state" in screen.status_bar.plain
        screen.state_panel.scroll_to(y=0, animate=False)
        await pilot.pause()
        await pilot.press("down", "down")
        await pilot.pause()
        assert screen.state_panel.scroll_y == 2 and screen.step == step  # the pane scrolled, not the step
        await pilot.press("escape")
        assert app.focused is None and "reading" not in screen.status_bar.plain
        await pilot.press("down")
        assert screen.step == step + 1


async def test_at_the_divergence_the_state_panel_opens_with_what_happened(interpreter):
    view = strings_view(interpreter)
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f")
        panel = app.debugger.state_panel
        await wait_for(pilot, lambda: "the model thinks" in " ".join(rows(panel)))
        shown = " ".join(rows(panel))
        assert "the model thinks `rotated` is 'rv' but it is 'ru'" in " ".join(shown.split())
        assert "rotated" in shown and "≠" in shown  # and the wrong variable, in the same view


async def test_the_override_dialog_fits_80x24_and_offers_only_lines_that_can_run(interpreter):
    from cwmtui.ui.screens import OverrideScreen

    view = strings_view(interpreter)
    view.can_generate = True  # the dialog as a live session shows it (nothing runs here)
    app = CwmApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("f", "o")
        await wait_for(pilot, lambda: isinstance(app.screen, OverrideScreen))
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, OverrideScreen)
        typed = dialog.query_one("#override-typed")
        assert typed.region.bottom <= 24 and typed.region.height > 0
        hint = dialog.query("Label").last()
        assert hint.region.bottom <= 24 and hint.region.height > 0
        offered = [str(option.prompt) for option in dialog.query_one("#override-options").options]
        assert not any("String operations" in o or "tokenizes text" in o or "else:" in o for o in offered)
        assert any("rotated += ch" in o for o in offered)


async def test_unfolded_values_use_the_panels_width_and_break_between_items(interpreter, tmp_path):
    from .sessions import model_frames, offline_view

    path = tmp_path / "words.py"
    path.write_text(
        "def f():  # << START_OF_TRACE\n"
        "    words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet']\n"
        "    return len(words)\n"
    )
    program = load_program(str(path), call="f()")
    truth = interpreter.trace(program)
    view = offline_view(program, truth, model_frames(program, truth))
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("j", "j", "z")
        panel = app.debugger.state_panel
        await wait_for(pilot, lambda: any(line.startswith("  ") and "'" in line for line in rows(panel)))
        lines = [line.rstrip() for line in rows(panel)]
        unfolded = [line.strip() for line in lines if line.startswith("  ") and "'" in line]
        assert unfolded and max(len(line) for line in lines) > 30  # wider than an 11-character column
        for line in unfolded:
            assert line.endswith((",", "]")), line  # after an item or at the value's end, never mid-word
        joined = " ".join(unfolded[: len(unfolded) // 2 + 1])
        assert "'alpha', 'bravo'" in joined


async def test_an_exception_reads_as_the_exception_not_as_a_tuple(interpreter):
    from .sessions import exception_view

    view = exception_view(interpreter)
    app = CwmApp(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        branch = view.branches[0]
        row = next(r for r in range(len(branch)) if branch.truth_at(r) and branch.truth_at(r).event.value == "exception")
        app.debugger.step = row
        screen = app.debugger

        def line() -> str:
            return screen.truth_timeline.render_line(row - int(screen.truth_timeline.scroll_offset.y)).text

        await wait_for(pilot, lambda: "raise ValueError(" in line())
        line = line()
        assert "raise ValueError(" in line and "<class" not in line and "traceback" not in line
        panel = " ".join(rows(screen.state_panel))
        assert "(raise)   ValueError" in panel and "<class" not in panel


async def test_keys_typed_after_a_dialogs_enter_go_back_to_the_steps(interpreter):
    app = CwmApp(strings_view(interpreter))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        burst(app, ":", "1", "2", "\r", "j", "j")  # (review: they went into the field: "12jj")
        # (a loaded machine takes longer than half a second to go through six keys)
        await wait_for(pilot, lambda: app.screen is app.debugger and app.debugger.step == 14, timeout=10)


async def test_esc_cancels_the_override_that_replaced_a_cancelled_rollout(strings):
    """Review: the finished main rollout's message dropped the new job's cancel, so esc (and
    a later o) no longer reached the override the user started."""
    from .test_interventions import GatedOracle

    program, truth = strings
    oracle = GatedOracle(program, truth.frames, hold=5)
    app = live_app(program, oracle)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and not app.view.branches[0].placeholder)
        await pilot.press("j", "o")
        await wait_for(pilot, lambda: app.screen is not app.debugger)
        await pilot.press("enter")  # main is cancelled; the override waits at the oracle's gate
        main = app.view.branches[0]
        await wait_for(pilot, lambda: not main.running)
        await wait_for(pilot, lambda: "esc cancels" in app.debugger.status_bar.plain)  # the override's job is the one running
        await pilot.press("escape")
        oracle.gate.set()
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        child = app.view.branches[1]
        assert child.status == "cancelled" and len(child.frames) < len(truth.frames)


async def test_a_resume_that_fails_does_not_leave_the_branch_writing_for_ever(strings):
    from .test_interventions import GatedOracle

    program, truth = strings

    class Failing(GatedOracle):
        fail = False

        def complete(self, *args, **kwargs):
            if self.fail:
                raise RuntimeError("the server went away")
            return super().complete(*args, **kwargs)

    oracle = Failing(program, truth.frames, hold=5)
    app = live_app(program, oracle)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and not app.view.branches[0].placeholder)
        await pilot.press("escape")
        main = app.view.branches[0]
        await wait_for(pilot, lambda: not main.running)
        oracle.fail = True
        await pilot.press("r")
        await wait_for(pilot, lambda: any("the server went away" in n.message for n in app._notifications))
        await wait_for(pilot, lambda: not main.running)
        await pilot.pause(0.3)
        assert not main.running and "still writing" not in app.debugger.status_bar.plain


async def test_r_resumes_is_said_only_where_r_can_resume(interpreter):
    from cwmtui.session import Branch, DebugSession
    from cwmtui.trace import RolloutStatus
    from cwmtui.ui.branch_view import SessionView

    from .sessions import model_frames

    program = load_program(str(SAMPLES / "strings.py"))
    truth = interpreter.trace(program)
    session = DebugSession(program, None, truth=truth)
    frames = model_frames(program, truth, cut=6, end=False)
    session.branches = [Branch("main", frames=frames, status=RolloutStatus.CANCELLED)]  # as a saved file has it
    session.compare_branch(session.branches[0])
    app = CwmApp(SessionView.from_session(session, origin="test"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("G")
        await pilot.pause()
        shown = "\n".join(rows(app.debugger.model_timeline))
        assert "■ cancelled after 6 steps" in shown and "r resumes" not in shown
        assert app.debugger.check_action("resume", ()) is False


async def test_a_step_with_nothing_in_scope_does_not_claim_to_be_a_return(interpreter, tmp_path):
    from .sessions import model_frames, offline_view

    path = tmp_path / "nothing.py"
    path.write_text("def f():  # << START_OF_TRACE\n    return 1\n")
    program = load_program(str(path), call="f()")
    truth = interpreter.trace(program)
    app = CwmApp(offline_view(program, truth, model_frames(program, truth)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = " ".join(rows(app.debugger.state_panel))  # step 0: the call of f(), no arguments
        assert "no variables in scope at this step" in shown and "return or exception" not in shown
