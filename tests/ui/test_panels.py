"""The panels, the status bar, playback, export, help, themes and layout, on recorded sessions."""

from __future__ import annotations

import dataclasses
import time

import pytest

from cwmtui.session import DebugSession
from cwmtui.ui.app import BINDINGS, CwmApp
from cwmtui.ui.screens import HelpScreen
from cwmtui.ui.timeline import Timeline

from .sessions import exception_view, strings_view
from .waiting import wait_for as until

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


async def test_help_lists_every_binding_with_its_id(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        ids = [b.id for b in BINDINGS]
        assert all(ids) and len(set(ids)) == len(ids)
        shown = {row[2]: row for row in app.screen.rows}
        hidden = {"triage.list",  # only with a replay file of many programs
                  "work.resume",  # only on a cancelled rollout
                  "intervene.override", "intervene.edit", "intervene.teacher-forced",
                  "intervene.teacher-forced-frames",  # only with a live model
                  "demo.pause", "demo.next"}  # only while a demo plays (--demo)
        for binding in BINDINGS:
            if binding.id in hidden:
                assert binding.id not in shown
                continue
            assert binding.id in shown and shown[binding.id][1] == (binding.tooltip or binding.description)
        assert shown["cursor.next"][0] == "↓ j"
        # why the intervention keys are not there, and a legend of every mark on screen
        assert any("o, e, t, T (override, edit, teacher forcing) are not here" in note for note in app.screen.notes)
        marks = dict(app.screen.marks)
        for glyph in ("●", "≠", "⇄", "∅", "F", "E", "O", "✗", "·", "◈", "▶", "◆", "■"):
            assert glyph in marks, glyph
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_play_advances_and_stops_at_the_first_divergence(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        await pilot.press("p")  # 8 steps/s
        assert screen.playing and "playing 8 steps/s" in screen.query_one("#status").plain
        await pilot.press("plus", "plus", "plus")  # faster while it plays: 64 steps/s
        start = time.monotonic()
        while screen.playing and time.monotonic() - start < 30:
            await pilot.pause(0.05)
        assert not screen.playing
        assert screen.step == strings.branches[0].first_divergence.step
        await pilot.press("minus", "minus", "minus")  # back to 8 steps/s
        await pilot.press("p")  # plays on from there
        assert screen.playing
        await pilot.press("p")
        assert not screen.playing


async def test_export_writes_a_session_that_reopens_the_same(strings, tmp_path):
    app = CwmApp(strings, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await until(pilot, lambda: app.last_export is not None)  # the session is written in a worker
        json_path, svg_path = app.last_export
    assert svg_path.read_text().lstrip().startswith("<svg")
    session = DebugSession.load(str(json_path))
    again = session.branches[0].comparison
    original = strings.branches[0].comparison
    assert again.first_divergence.to_json() == original.first_divergence.to_json()
    assert [s.kind for s in again.steps] == [s.kind for s in original.steps]


async def test_exporting_twice_a_program_with_dots_in_its_name_keeps_both(strings, tmp_path):
    strings.program = dataclasses.replace(strings.program, path="/somewhere/my.strings.py")
    app = CwmApp(strings, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await until(pilot, lambda: app.last_export is not None)
        first = app.last_export
        await pilot.press("x")
        await until(pilot, lambda: app.last_export != first)
        second = app.last_export
    assert first[0].name.startswith("cwmtui-my.strings-") and first[0].suffix == ".json"
    assert first != second
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (*first, *second))


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
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        for name in ("Theme: dark", "Theme: light", "Theme: high-contrast", "Jump to first divergence", "Toggle layout"):
            assert name in commands
        # every key of the debugger is a command too, from the one bindings table
        assert commands["Go to a step"] == "key :" and commands["Next divergence"] == "key d"
        assert commands["Export the session (JSON, and an SVG of the screen)"] == "key x"
        assert not any(title.startswith("Teacher-force") for title in commands)  # no live model here
        assert "Keys" not in commands  # ? is the keys panel (Textual's own could not be closed with esc)
        assert "Help" not in commands


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


async def test_palette_goes_to_a_typed_step(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        from textual.command import CommandList, CommandPalette

        await pilot.press("ctrl+p")
        await pilot.press(*"17")

        def offered() -> bool:
            screen = app.screen
            return isinstance(screen, CommandPalette) and any(
                "Go to step 17" in str(option.prompt) for option in screen.query_one(CommandList).options)

        await until(pilot, offered)
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is app.debugger)
        assert app.debugger.step == 17


async def test_q_quits(strings):
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_the_layout_follows_the_terminal_size(strings):
    app = CwmApp(strings)
    async with app.run_test(size=(160, 50)) as pilot:
        assert app.debugger.layout_mode == "columns"  # room for the source in its own column
        await pilot.press("d")
        await pilot.resize_terminal(90, 30)
        await pilot.pause()
        screen = app.debugger
        assert screen.layout_mode == "stacked" and screen.has_class("-narrow")
        # (#24: the output was hidden here) it shares the state's column, under it
        output, state = screen.query_one("#output"), screen.query_one("#state")
        assert output.display and output.region.height >= 3 and output.region.x == state.region.x
        assert screen.truth_timeline.cursor == screen.step == strings.branches[0].first_divergence.step


async def test_a_small_state_panel_scrolls_to_the_wrong_variable(strings):
    app = CwmApp(strings)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("d")
        await pilot.pause()
        panel = app.debugger.query_one("#state")
        visible = panel.lines[int(panel.scroll_y): int(panel.scroll_y) + panel.scrollable_content_region.height]
        assert any(line.startswith("rotated") and "≠" in line for line in visible)


async def test_a_keymap_file_remaps_bindings_by_id_in_keys_help_and_palette(strings, tmp_path, monkeypatch):
    """?-help promises bindings can be remapped by id: a keymap.toml in the config folder
    ($CWMTUI_KEYMAP here) does it; an unknown id or a bad value is one line, the rest applies."""
    from cwmtui.ui.screens import HelpScreen

    keymap = tmp_path / "keymap.toml"
    keymap.write_text('"divergence.next" = "f9"\n"no.such.binding" = "x"\n"cursor.next" = 5\n')
    monkeypatch.setenv("CWMTUI_KEYMAP", str(keymap))
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first = strings.branches[0].first_divergence.step
        await pilot.press("d")  # no longer bound
        assert app.debugger.step == 0
        await pilot.press("f9")
        assert app.debugger.step == first
        notes = [n.message for n in app._notifications]
        assert any("no binding 'no.such.binding'" in n for n in notes)
        assert any("'cursor.next' needs its keys as text" in n for n in notes)
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert commands["Next divergence"] == "key f9"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert ("f9", "Next divergence", "divergence.next") in app.screen.rows


async def test_a_keymap_that_is_not_toml_is_one_line_and_the_keys_stay(strings, tmp_path, monkeypatch):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text("this is [not toml\n")
    monkeypatch.setenv("CWMTUI_KEYMAP", str(keymap))
    app = CwmApp(strings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        assert app.debugger.step == strings.branches[0].first_divergence.step
        assert any("not read (TOMLDecodeError" in n.message for n in app._notifications)


async def test_export_saves_the_session_in_a_worker_not_on_the_ui_thread(strings, tmp_path, monkeypatch):
    """Saving a session works out its token lenses (the model's tokenizer, perhaps a server) and
    writes a file that may be large: not in the key's handler."""
    import threading

    from cwmtui.session import DebugSession as Session

    threads = []
    original = Session.save

    def save(self, path):
        threads.append(threading.current_thread() is threading.main_thread())
        return original(self, path)

    monkeypatch.setattr(Session, "save", save)
    app = CwmApp(strings, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await until(pilot, lambda: app.last_export is not None)
    assert threads == [False]



def test_the_readme_lists_the_keys_and_marks_that_help_shows():
    """#24: the README's key list and ?'s legend agree (both are made from the bindings table)."""
    from cwmtui.ui.bindings import BINDINGS, LEGEND, keys_markdown

    from .sessions import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("<!-- keys:")
    listed = readme[readme.index("\n", start) + 1 : readme.index("<!-- /keys -->")]
    assert listed == keys_markdown(), "run `python -m cwmtui.ui.bindings` and paste it into the README"
    for binding in BINDINGS:
        assert f"`{binding.id}`" in listed
    for _, entries in LEGEND:
        for mark, _meaning in entries:
            assert f"`{mark}`" in listed


async def test_the_output_panel_claims_nothing_before_the_program_has_run():
    """Review: while the interpreter was still running the program, the output panel said
    "(the program writes nothing)" (strings.py prints)."""
    app = CwmApp(opener=lambda app: None)  # the program's run never comes back
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = " ".join(str(line.text) for line in (app.debugger.output_panel.render_line(y) for y in range(2)))
        assert "(running the program…)" in shown and "writes nothing" not in shown
