"""Driving the debugger with its keys on recorded sessions (no model): the cursor, the panels."""

from __future__ import annotations

import pytest

from cwmtui.analysis.compare import StepKind
from cwmtui.session import DebugSession
from cwmtui.ui.app import BINDINGS, CwmApp
from cwmtui.ui.screens import HelpScreen, OverrideScreen, PromptScreen
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


async def test_status_bar_shows_step_branch_divergence_and_token_meter(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")
        status = app.debugger.query_one("#status").plain
        step = strings.branches[0].first_divergence.step
        assert f"step {step}/{len(strings.branches[0]) - 1}" in status
        assert "branch main" in status
        assert "string-valued state: rotated" in status
        used = sum(f.tokens for f in strings.branches[0].frames)
        assert f"{used:,}/8,192" in status and "/frame" in status


async def test_state_panel_at_a_string_divergence_shows_the_token_lens(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("d")
        panel = app.debugger.query_one("#state")
        names = [name for name, _ in panel.lenses]
        assert names == ["rotated"]
        lens = panel.lenses[0][1]
        expected = "".join(p.text for p in lens.expected)
        predicted = "".join(p.text for p in lens.predicted)
        assert "ru" in expected and "rv" in predicted
        assert [p.text for p in lens.predicted if p.differs] == ["v"]
        rows = {row.name: row for row in strings.branches[0].variables(app.debugger.step)}
        assert rows["rotated"].status == "≠" and rows["text"].status == "="


async def test_long_values_fold_and_unfold(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        panel = app.debugger.query_one("#state")
        assert not panel.expanded_all
        await pilot.press("z")
        assert panel.expanded_all
        await pilot.press("z")
        assert not panel.expanded_all


async def test_output_panel_follows_the_selected_step(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        output = app.debugger.query_one("#output")
        assert output.text == ""
        await pilot.press("G")
        assert output.text == "world -> Wgour\nmodel -> Mohgr\n"
        print_step = next(i for i, f in enumerate(strings.truth.frames) if "print(" in f.action)
        await pilot.press("colon", *str(print_step + 1), "enter")
        assert output.text == "world -> Wgour\n"


async def test_go_to_step_checks_what_is_typed(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        assert isinstance(app.screen, PromptScreen)
        await pilot.press("9", "9", "9", "enter")
        assert isinstance(app.screen, PromptScreen)  # stays open and says the range
        assert "there are 42 steps" in str(app.screen.query_one("#prompt-hint").render())
        await pilot.press("backspace", "backspace", "backspace", "minus", "1", "enter")
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


async def test_help_lists_every_binding_with_its_id(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        ids = [b.id for b in BINDINGS]
        assert all(ids) and len(set(ids)) == len(ids)
        shown = {row[2]: row for row in app.screen.rows}
        for binding in BINDINGS:
            assert binding.id in shown and shown[binding.id][1] == binding.description
        assert shown["intervene.override"][0] == "o"
        assert shown["cursor.next"][0] == "↓ j"
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_play_advances_and_stops_at_the_first_divergence(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        for _ in range(4):
            await pilot.press("plus")  # 64 steps/s
        await pilot.press("p")
        assert screen.playing
        for _ in range(100):
            if not screen.playing:
                break
            await pilot.pause(0.05)
        assert not screen.playing
        assert screen.step == strings.branches[0].first_divergence.step


async def test_export_writes_a_session_that_reopens_the_same(strings, tmp_path):
    app = CwmApp(strings, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await pilot.pause()
        json_path, svg_path = app.last_export
    assert svg_path.read_text().lstrip().startswith("<svg")
    session = DebugSession.load(str(json_path))
    again = session.branches[0].comparison
    original = strings.branches[0].comparison
    assert again.first_divergence.to_json() == original.first_divergence.to_json()
    assert [s.kind for s in again.steps] == [s.kind for s in original.steps]


async def test_branch_keys_with_one_branch_say_how_to_make_more(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.debugger.branch.name == "main"
        assert any("only one branch" in n.message for n in app._notifications)


async def test_themes_switch_from_the_palette_commands(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "cwmtui-dark"
        truth, _ = timelines(app)
        dark = truth.get_component_rich_style("timeline--divergent", partial=True)
        app.switch_theme("light")
        await pilot.pause()
        assert app.theme == "cwmtui-light" and not app.current_theme.dark
        light = truth.get_component_rich_style("timeline--divergent", partial=True)
        assert light.color != dark.color and light.bold and light.underline
        app.switch_theme("no-such-theme")
        await pilot.pause()
        assert app.theme == "cwmtui-light"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for name in ("Theme: dark", "Theme: light", "Theme: high-contrast", "Go to step",
                     "Jump to first divergence", "Export session", "Toggle layout"):
            assert name in titles


async def test_layout_toggles_between_columns_and_stacked(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        assert screen.layout_mode == "stacked"  # 120 columns: the source goes below
        await pilot.press("d")
        await app.toggle_layout()
        await pilot.pause()
        screen = app.debugger
        assert screen.layout_mode == "columns"
        assert screen.query_one("#source").parent.id == "body"
        assert screen.step == strings.branches[0].first_divergence.step  # the selection survives
        assert timelines(app)[0].cursor == screen.step
