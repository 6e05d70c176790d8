"""Moving through a recorded session (no model) with the keys: cursor, divergences, calls, search."""

from __future__ import annotations

import pytest

from cwmtui.analysis.compare import StepKind
from cwmtui.ui.app import CwmApp
from cwmtui.ui.screens import OverrideScreen, PromptScreen
from cwmtui.ui.timeline import Timeline

from .sessions import exception_view, strings_view

SIZE = (120, 40)


@pytest.fixture
def strings(interpreter):
    return strings_view(interpreter)


@pytest.fixture
def exception(interpreter):
    return exception_view(interpreter)


def timelines(app):
    screen = app.debugger
    return screen.query_one("#truth", Timeline), screen.query_one("#model", Timeline)


async def test_cursor_keys_move_both_timelines_together(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        truth, model = timelines(app)
        await pilot.press("j", "j", "down")
        assert screen.step == 3
        await pilot.press("k", "up")
        assert screen.step == 1
        await pilot.press("G")
        last = len(strings.branches[0]) - 1
        assert screen.step == last
        await pilot.pause()
        assert truth.cursor == model.cursor == last
        assert truth.scroll_y == model.scroll_y > 0  # scrolled to show the last row, in step
        await pilot.press("g")
        await pilot.pause()
        assert screen.step == 0 and truth.scroll_y == model.scroll_y == 0
        await pilot.press("pagedown")
        assert screen.step > 10
        await pilot.press("pageup")
        assert screen.step == 0
        await pilot.press("k")  # nothing before step 0
        assert screen.step == 0


async def test_scrolling_one_timeline_scrolls_the_other(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        truth, model = timelines(app)
        truth.scroll_to(y=7, animate=False)
        await pilot.pause()
        assert model.scroll_y == 7


async def test_clicking_a_row_selects_that_step(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        truth, _ = timelines(app)
        await pilot.click(truth, offset=(5, 6))  # border row + 5 rows down
        assert app.debugger.step == 5


async def test_divergence_keys_jump_between_runs_of_divergent_steps(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        branch = strings.branches[0]
        first = branch.first_divergence
        assert first is not None and first.regime == "string-valued state"
        await pilot.press("d")
        assert screen.step == first.step
        assert branch.kind(screen.step) is StepKind.STATE
        await pilot.press("d")  # the wrong value is carried for a few rows, then fixed: no more
        assert screen.step == first.step
        await pilot.pause()
        assert "no divergence after" in str([n.message for n in app._notifications])
        await pilot.press("G", "D")
        assert screen.step == first.step


async def test_go_to_step_checks_what_is_typed(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("9", "9", "9", "enter")
        assert isinstance(app.screen, PromptScreen)  # stays open and says the range
        assert "there are 42 steps" in str(app.screen.query_one("#prompt-hint").render())
        for typed in ("--3", "²", "x"):  # not numbers: the prompt stays open, the app does not crash
            await pilot.press("ctrl+u", *typed, "enter")
            assert isinstance(app.screen, PromptScreen)
            assert "type a step number from 0 to 41" in str(app.screen.query_one("#prompt-hint").render())
        await pilot.press("ctrl+u", "minus", "1", "enter")
        assert app.debugger.step == 41
        await pilot.press("colon", "escape")
        assert app.debugger.step == 41 and not isinstance(app.screen, PromptScreen)


async def test_search_finds_names_and_values_and_repeats(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        await pilot.press("slash", *"Wg", "enter")
        first = screen.step
        frame = strings.branches[0].truth_at(first)
        assert "Wg" in str(frame.locals) or "Wg" in (frame.arg or "")
        await pilot.press("n")
        assert screen.step == first + 1  # the value stays in `out` on the next step
        await pilot.press("N")
        assert screen.step == first
        await pilot.press("slash", *"zq", "enter")
        assert screen.step == first


async def test_call_keys_jump_between_calls(exception):
    app = CwmApp(exception)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        branch = exception.branches[0]
        await pilot.press("c")
        assert branch.truth_at(screen.step).function == "parse_number"
        assert branch.truth_at(screen.step).event.value == "call"
        second = screen.step
        await pilot.press("c", "C")
        assert screen.step == second


async def test_action_divergence_marks_the_model_off_path(exception):
    app = CwmApp(exception)
    async with app.run_test(size=SIZE) as pilot:
        branch = exception.branches[0]
        await pilot.press("d")
        first = branch.first_divergence
        assert app.debugger.step == first.step and first.regime == "action hallucination"
        # the truth raises, the model returned: the steps after it are not on the model's path
        assert any(branch.off_path(r) or branch.model_at(r) is None for r in range(first.step + 1, len(branch)))


async def test_override_on_a_recorded_session_says_it_needs_a_live_model(strings):
    app = CwmApp(strings, no_model_reason="a replay of recorded generations")
    async with app.run_test(size=SIZE) as pilot:
        for key in ("o", "e", "t"):
            await pilot.press(key)
            assert not isinstance(app.screen, OverrideScreen)
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert any("needs a live model" in m and "replay" in m for m in messages)
        assert len(strings.branches) == 1


async def test_branch_keys_with_one_branch_say_how_to_make_more(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.debugger.branch.name == "main"
        assert any("only one branch" in n.message for n in app._notifications)


async def test_control_characters_the_model_wrote_reach_the_screen_escaped(interpreter):
    from cwmtui.interpreter import load_program

    from .sessions import SAMPLES, model_frames, offline_view, replace_once

    program = load_program(str(SAMPLES / "strings.py"))
    truth = interpreter.trace(program)
    step = next(i for i, f in enumerate(truth.frames) if (f.locals or {}).get("rotated") == "'ru'")
    frames = model_frames(program, truth, replace_once(step, "\"rotated\": \"'ru'\"", "\"rotated\": \"'\\u001b[2J\\tr'\""))
    assert frames[step].locals["rotated"] == "'\x1b[2J\tr'"
    app = CwmApp(offline_view(program, truth, frames))
    async with app.run_test(size=SIZE) as pilot:
        app.debugger.step = step
        await pilot.pause()
        _, model = timelines(app)
        row = "".join(segment.text for segment in model.render_line(step - int(model.scroll_offset.y)))
        assert "rotated='\\x1b[2J\\tr'" in row
        assert "\x1b" not in row and "\t" not in row
        state = "\n".join("".join(s.text for s in strip) for strip in app.debugger.query_one("#state")._strips)
        assert "'\\x1b" in state  # the escape, shown (the narrow column may cut the rest)
        assert "\x1b" not in state and "\t" not in state


async def test_a_form_feed_or_line_separator_in_the_source_keeps_one_row_per_line(interpreter, tmp_path):
    from cwmtui.interpreter import program_from_source
    from cwmtui.ui.source_pane import SourcePane

    from .sessions import model_frames, offline_view

    source = 'def f():  # << START_OF_TRACE\n    s = "a\u2028b' + "\u2028" * 9 + '"\n\x0c\n    t = 1\n    return s\n\nf()\n'
    program = program_from_source(source, "sep.py")
    truth = interpreter.trace(program)
    app = CwmApp(offline_view(program, truth, model_frames(program, truth)))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.debugger.query_one(SourcePane)
        rows = [pane.render_line(y).text for y in range(7)]
        assert all(ch not in row for row in rows for ch in "\x0c\u2028"), rows  # a terminal acts on them
        assert '"a\\u2028b\\u2028' in rows[1] and "\\x0c" in rows[2] and "t = 1" in rows[3]
        await pilot.press("end")  # the last step: the return on line 5
        await pilot.pause()
        assert pane.truth_line == 5 and "return s" in pane.render_line(4).text
        shown = '    s = "a\\u2028b' + "\\u2028" * 9 + '"'
        assert pane.virtual_size.width >= len(shown) + 5  # the scroll width fits the line as shown
