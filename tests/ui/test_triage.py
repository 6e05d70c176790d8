"""`cwmtui --replay RESULTS.jsonl`: the failure list of a batch run, each program opened in turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cwmtui.interpreter import load_program, trace_program
from cwmtui.model import RolloutOptions
from cwmtui.ui.app import CwmApp
from cwmtui.ui.launch import ReplayTriage
from cwmtui.ui.triage import TriageScreen

from .sessions import SAMPLES, frame_texts
from .waiting import wait_for

SIZE = (120, 40)


def results_file(tmp_path):
    """Three programs as `cwmtui eval --out` writes them: one exact, two that diverge."""
    records = []
    for sample, kind, edit in (
        ("strings", "state", ("\"rotated\": \"'ru'\"", "\"rotated\": \"'rv'\"")),
        ("swaps", "agree", None),
        ("nested", "action", None),
    ):
        program = load_program(str(SAMPLES / f"{sample}.py"))
        texts = frame_texts(trace_program(program).frames)
        step = None
        if kind == "state":
            step = next(i for i, t in enumerate(texts) if edit[0] in t)
            texts[step] = texts[step].replace(*edit)
        if kind == "action":
            step = 3
            texts = texts[:3] + ["<|return_sep|><|action_sep|>    return n, steps\n<|arg_sep|>\"(9, 0)\"<|frame_sep|>"]
        records.append({
            "id": sample, "program": program.source, "entry": program.entry, "call": program.call,
            "generation": "".join(texts) + "<|end_of_text|>", "status": "ended", "class": kind,
            "string_valued": kind == "state", "step": step,
            "output": {"correct": kind == "agree"},
        })
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, records




def opened(app, program_id: str) -> bool:
    view = app.view
    return (view is not None and view.origin.endswith(f"#{program_id}") and not view.branches[0].placeholder
            and not view.branches[0].running)


async def test_the_failure_list_opens_each_program_in_the_debugger(tmp_path):
    path, records = results_file(tmp_path)
    objects = [(i + 1, r) for i, r in enumerate(records)]
    triage = ReplayTriage(str(path), objects, RolloutOptions(), None)
    app = CwmApp(opener=triage.start)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        assert [r.id for r in screen.shown] == ["nested", "strings"]  # failures only, actions first
        await pilot.press("down", "enter")  # strings: the string-valued state error
        await wait_for(pilot, lambda: opened(app, "strings"))
        debugger = app.debugger
        assert app.screen is debugger
        assert debugger.branch.first_divergence.regime == "string-valued state"
        await pilot.press("d")
        assert debugger.step == records[0]["step"]
        await pilot.press("l")  # back to the list
        assert isinstance(app.screen, TriageScreen)
        await pilot.press("a")  # all programs, the exact one too
        assert len(app.screen.shown) == 3
        await pilot.press("s")  # sorted by step now
        assert app.screen.sort_by == "step"
        index = next(i for i, r in enumerate(app.screen.shown) if r.id == "swaps")
        app.screen.query_one("DataTable").move_cursor(row=index)
        await pilot.press("enter")
        await wait_for(pilot, lambda: opened(app, "swaps"))
        assert app.debugger.step == 0  # a fresh start on the new program
        assert app.debugger.branch.first_divergence is None
        assert "swaps" in app.debugger.query_one("#source").border_title


async def test_the_list_key_is_only_there_for_a_list(interpreter):
    from .sessions import strings_view

    app = CwmApp(strings_view(interpreter))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("l")
        assert app.screen is app.debugger
        assert app.debugger.check_action("triage", ()) is False


async def test_ids_and_paths_are_shown_as_written_not_as_markup(tmp_path):
    path, records = results_file(tmp_path)
    records[0]["id"] = "[/b]odd"
    records[2]["id"] = "[bold]x"
    where = tmp_path / "[/red]"
    where.mkdir(parents=True)  # a folder "[" holding "red]"
    odd = where / "results.jsonl"
    odd.write_text("".join(json.dumps(r) + "\n" for r in records))
    triage = ReplayTriage(str(odd), [(i + 1, r) for i, r in enumerate(records)], RolloutOptions(), None)
    app = CwmApp(opener=triage.start)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        table = screen.query_one("DataTable")
        assert sorted(str(table.get_row_at(i)[0]) for i in range(table.row_count)) == ["[/b]odd", "[bold]x"]
        assert str(screen.query_one("#triage-title").render()).startswith(f"{odd}: 3 programs")


def test_ids_sort_as_people_count_them():
    """#24: sample_228 came before sample_23 (ids sorted as text)."""
    from cwmtui.ui.triage import TriageRow

    rows = [TriageRow.from_json(i, {"id": name, "class": "state", "step": 3})
            for i, name in enumerate(["sample_228", "sample_23", "sample_3", "a10b2", "a10b10", "a9"])]
    assert [r.id for r in sorted(rows, key=lambda r: r.sort_key("id"))] == \
        ["a9", "a10b2", "a10b10", "sample_3", "sample_23", "sample_228"]
    assert [r.id for r in sorted(rows, key=lambda r: r.sort_key("class"))][:3] == ["a9", "a10b2", "a10b10"]


# -- 120 real CWM failures did not triage (#26) --------------------------------------------------

FIXTURE = SAMPLES.parent / "tests" / "fixtures" / "cwm_cruxeval_generations.jsonl"

#: what `cwmtui eval --replay` says of the five real generations (tests/test_eval_cli.py)
REAL = {
    "sample_0": ("agree", None, True),
    "sample_4": ("state", 5, False),
    "sample_6": ("value", 6, True),
    "sample_19": ("state", 16, True),
    "sample_23": ("state", 5, False),
}


def real_records() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def real_results(tmp_path) -> Path:
    """The five real generations with the fields `cwmtui eval --out` adds (nothing to score)."""
    records = real_records()
    for record in records:
        kind, step, correct = REAL[record["id"]]
        record.update({"class": kind, "step": step, "string_valued": kind == "state", "status": "ended",
                       "output": {"expected": record["output"], "correct": correct}})
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def triage_app(path, records=None, **kwargs):
    from cwmtui.model.replay import read_replay

    objects = [(i + 1, r) for i, r in enumerate(records)] if records is not None else read_replay(str(path))
    triage = ReplayTriage(str(path), objects, RolloutOptions(), None, **kwargs)
    return CwmApp(opener=triage.start), triage


def by_id(screen) -> dict:
    return {row.id: row for row in screen.rows}


def classified(screen) -> bool:
    return isinstance(screen, TriageScreen) and all(row.kind for row in screen.rows) \
        and not getattr(screen, "scoring", 0)


def cells(screen, ident: str) -> list[str]:
    table = screen.query_one("DataTable")
    line = by_id(screen)[ident].line
    return [str(cell) for cell in table.get_row(f"{line}")]


def shown_lines(widget) -> list[str]:
    """What a widget shows now, line by line."""
    return [widget.render_line(y).text.rstrip() for y in range(widget.size.height)]


def footer_keys(app) -> dict[str, tuple[int, int]]:
    from textual.widgets import Footer

    footer = app.screen.query_one(Footer)
    return {key.description or key.key: (key.region.x, key.region.right)
            for key in footer.query("FooterKey") if key.display and key.region.width}


async def test_records_without_results_are_classified_in_the_background(monkeypatch):
    """Every row showed class '—', no step and no output: records that are not a results file's
    are scored as `cwmtui eval --replay` scores them, in a worker, while the list is usable."""
    import threading

    from cwmtui.evaluation import triage as scoring

    release = threading.Event()
    real_score = scoring.score_replay_record

    def held(*args, **kwargs):
        release.wait(20)
        return real_score(*args, **kwargs)

    monkeypatch.setattr(scoring, "score_replay_record", held)
    app, _ = triage_app(FIXTURE)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen))
        screen = app.screen
        await wait_for(pilot, lambda: "classifying 0 of 5" in str(screen.query_one("#triage-title").render()))
        assert screen.scoring and screen.left == 5  # still working: the list is on screen and answers keys
        table = screen.query_one("DataTable")
        await pilot.press("down")
        assert table.cursor_row == 1
        release.set()
        await wait_for(pilot, lambda: classified(screen))
        for ident, (kind, step, correct) in REAL.items():
            row = by_id(screen)[ident]
            assert (row.kind, row.step, row.correct, row.source) == (kind, step, correct, "scored"), ident
            shown = cells(screen, ident)
            assert shown[1] == kind and shown[3] == ("" if step is None else str(step))
            assert shown[5] == ("right" if correct else "wrong")
        assert by_id(screen)["sample_4"].string_valued and not by_id(screen)["sample_6"].string_valued
        assert "5 programs, 4 diverge" in str(screen.query_one("#triage-title").render())


async def test_a_results_file_is_shown_as_it_is_nothing_is_scored_again(tmp_path, monkeypatch):
    from cwmtui.evaluation import triage as scoring

    calls = []
    monkeypatch.setattr(scoring, "score_replay_record", lambda *a, **k: calls.append(a))
    path, records = results_file(tmp_path)
    app, _ = triage_app(path, records)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen) and app.screen.rows)
        await pilot.pause(0.3)
        screen = app.screen
        assert calls == [] and not screen.scoring
        assert {r.id: (r.kind, r.source) for r in screen.rows} == \
            {"strings": ("state", "file"), "swaps": ("agree", "file"), "nested": ("action", "file")}


async def test_opening_a_record_fills_its_row_from_the_session(monkeypatch):
    from cwmtui.evaluation import triage as scoring

    def not_now(*args, **kwargs):
        raise scoring.NotScored("held back by the test")

    monkeypatch.setattr(scoring, "score_replay_record", not_now)
    app, _ = triage_app(FIXTURE)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen) and not app.screen.scoring)
        screen = app.screen
        assert not by_id(screen)["sample_23"].kind and cells(screen, "sample_23")[1] == "not scored"
        index = next(i for i, r in enumerate(screen.shown) if r.id == "sample_23")
        screen.query_one("DataTable").move_cursor(row=index)
        await pilot.press("enter")
        await wait_for(pilot, lambda: opened(app, "sample_23"))
        await wait_for(pilot, lambda: by_id(screen)["sample_23"].kind != "")
        row = by_id(screen)["sample_23"]
        assert (row.kind, row.step, row.correct, row.string_valued, row.source) == ("state", 5, False, True, "session")
        await pilot.press("l")
        assert app.screen is screen
        assert cells(screen, "sample_23")[1:6] == ["state", "str", "5", "ended", "wrong"]


async def test_the_details_panel_follows_the_cursor_with_outputs_notes_and_status(tmp_path):
    """Expected and predicted output, the record's root-cause note and its status, below the
    list, for the highlighted record; all of it the record's text, never markup."""
    records = real_records()[:2]  # sample_0 (right), sample_4 (wrong)
    for record in records:  # an ASSERT-KTH results line: expected, predicted, correct
        record["expected"], record["predicted"] = record["output"], record["output"]
        record["correct"] = record["id"] == "sample_0"
    records[1]["predicted"] = "'          '"
    records[1]["root_cause"] = {"category": "String Operation Error", "note": "[red]one space short[/red]"}
    cut = dict(records[0], id="sample_150", status="TRUNCATED", correct=False, predicted=None,
               root_cause="Truncated", generation=records[0]["generation"][:700])
    path = tmp_path / "assert_kth.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records, cut]))
    app, _ = triage_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        screen = app.screen
        details = screen.query_one("#triage-details")
        table = screen.query_one("DataTable")

        def show(ident: str) -> list[str]:
            table.move_cursor(row=next(i for i, r in enumerate(screen.shown) if r.id == ident))
            return shown_lines(details)

        await pilot.pause()
        lines = show("sample_4")
        await pilot.pause()
        lines = shown_lines(details)
        assert lines[0].startswith("sample_4 · output wrong · first divergence at step 5: state, string-valued")
        assert "expected:  '           '" in lines and "predicted: '          '" in lines
        assert "status:    ended" in lines
        assert "root cause: String Operation Error · [red]one space short[/red]" in lines
        assert any(line.startswith("At step 5, before line 5") for line in lines)
        show("sample_150")
        await pilot.pause()
        lines = shown_lines(details)
        assert lines[0].startswith("sample_150 · output wrong")
        assert "status:    TRUNCATED: the model's trace was cut off before it ended" in lines
        assert "root cause: Truncated" in lines and "predicted: —" in lines
        assert cells(screen, "sample_150")[4] == "TRUNCATED"
        show("sample_0")
        await pilot.pause()
        lines = shown_lines(details)
        assert lines[0].startswith("sample_0 · output right · the model's trace is the interpreter's")
        assert not any("root cause" in line for line in lines)


async def test_j_k_g_and_G_move_in_the_list(tmp_path):
    app, _ = triage_app(real_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        table = app.screen.query_one("DataTable")
        assert table.row_count == 4  # the failures
        await pilot.press("G")
        assert table.cursor_row == 3
        await pilot.press("k", "k")
        assert table.cursor_row == 1
        await pilot.press("g")
        assert table.cursor_row == 0
        await pilot.press("j")
        assert table.cursor_row == 1


async def test_f_shows_one_class_at_a_time_and_the_title_says_which(tmp_path):
    app, _ = triage_app(real_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        screen = app.screen
        title = screen.query_one("#triage-title")
        seen = []
        for _ in range(2):
            await pilot.press("f")
            seen.append((screen.only_class, sorted(r.id for r in screen.shown)))
            assert f"showing failures of class {screen.only_class} ({len(screen.shown)})" in str(title.render())
        assert seen == [("state", ["sample_19", "sample_23", "sample_4"]), ("value", ["sample_6"])]
        await pilot.press("f")  # and all of them again
        assert screen.only_class is None and len(screen.shown) == 4
        assert "of class" not in str(title.render())
        await pilot.press("a", "f", "f", "f")  # all programs: the exact one's class is offered too
        assert screen.only_class == "agree" and [r.id for r in screen.shown] == ["sample_0"]
        assert "showing all programs of class agree (1)" in str(title.render())


async def test_slash_searches_ids_entries_and_the_records_text_and_n_goes_to_the_next(tmp_path):
    app, _ = triage_app(real_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        screen = app.screen
        table = screen.query_one("DataTable")

        def current() -> str:
            return screen.shown[table.cursor_row].id

        await pilot.press("slash", *"rstrip", "enter")  # text of sample_23's code
        assert current() == "sample_23"
        assert "search 'rstrip': 1 found" in str(screen.query_one("#triage-title").render())
        await pilot.press("slash", *"sample_19", "enter")  # an id
        assert current() == "sample_19"
        await pilot.press("g", "slash", *"join", "enter")  # sample_4 and sample_19 join strings
        found = [current()]
        await pilot.press("n")
        found.append(current())
        await pilot.press("n")
        found.append(current())
        assert sorted(found[:2]) == ["sample_19", "sample_4"] and found[2] == found[0]
        await pilot.press("N")
        assert current() == found[1]
        await pilot.press("slash", *"quit", "escape")  # q is typed, not obeyed; esc closes the search
        assert app.is_running and app.screen is screen and screen.search == "join"
        assert not screen.searching and table.has_focus


async def test_the_list_key_works_after_opening_one_program_of_many_with_an_id():
    """`cwmtui --replay FILE --id X`: l did nothing, the list was never built."""
    app, triage = triage_app(FIXTURE, open_id="sample_23")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: opened(app, "sample_23"))
        assert app.screen is app.debugger and app.triage is triage
        assert app.debugger.check_action("triage", ()) is True
        await pilot.press("l")
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        assert screen.shown[screen.query_one("DataTable").cursor_row].id == "sample_23"
        await wait_for(pilot, lambda: by_id(screen)["sample_23"].kind == "state")
        await pilot.press("escape")  # back to the program
        assert app.screen is app.debugger and opened(app, "sample_23")


def test_an_id_the_replay_file_does_not_hold_is_told_before_the_app_starts(monkeypatch):
    from cwmtui.model.replay import read_replay
    from cwmtui.ui import launch

    def never(app):
        raise AssertionError("the app must not start")

    monkeypatch.setattr(launch, "run_app", never)
    objects = read_replay(str(FIXTURE))
    with pytest.raises(launch.LaunchError, match="no generation with id 'sample_999'"):
        launch.open_replay_list(str(FIXTURE), objects, RolloutOptions(), None, theme="dark", open_id="sample_999")
    broken = [*objects, (99, {"id": "a", "code": "def f(:\n    pass", "input": "1", "generation": ""})]
    with pytest.raises(launch.LaunchError, match="syntax error"):
        launch.open_replay_list(str(FIXTURE), broken, RolloutOptions(), None, theme="dark", open_id="a")


async def test_a_record_that_cannot_be_scored_says_why_in_its_row_and_details(tmp_path):
    records = [*real_records()[:2],
               {"id": "broken", "code": "def f(:\n    pass", "input": "1", "generation": ""},
               {"id": "silent", "code": "def f(x):\n    return x", "input": "1"}]  # no generation
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    app, _ = triage_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen) and not app.screen.scoring)
        screen = app.screen
        assert {r.id: r.kind for r in screen.rows} == {"sample_0": "agree", "sample_4": "state", "broken": "", "silent": ""}
        assert cells(screen, "broken")[1] == "not scored"
        screen.query_one("DataTable").move_cursor(row=next(i for i, r in enumerate(screen.shown) if r.id == "broken"))
        await pilot.pause()
        first = shown_lines(screen.query_one("#triage-details"))[0]
        assert first.startswith("broken · not scored: ") and "syntax error" in first
        assert "Traceback" not in first


async def test_the_footer_shows_only_the_keys_that_do_something_here(tmp_path):
    app, _ = triage_app(real_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        await pilot.pause()
        keys = footer_keys(app)
        assert {"Open", "Filter", "Search", "Sort", "Failures/all", "Quit"} <= set(keys)
        assert "Back" not in keys  # no program open to go back to
        assert "Next" not in keys  # nothing searched for
        await pilot.press("escape")
        assert isinstance(app.screen, TriageScreen)
        await pilot.press("slash", *"sample", "enter")
        await pilot.pause()
        assert "Next" in footer_keys(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.view is not None and opened(app, app.view.origin.rsplit("#", 1)[1]))
        await pilot.press("l")
        await pilot.pause()
        assert "Back" in footer_keys(app)


@pytest.mark.parametrize("width, height", [(80, 24), (120, 40)])
async def test_the_list_fits_80x24_and_120x40(tmp_path, monkeypatch, width, height):
    """The title, the list, the details and every footer key, at both sizes."""
    monkeypatch.chdir(tmp_path)
    path = real_results(Path("."))
    app, _ = triage_app(path)
    async with app.run_test(size=(width, height)) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        screen = app.screen
        await pilot.press("slash", *"xquery", "enter")  # sample_23
        await pilot.press("enter")
        await wait_for(pilot, lambda: opened(app, "sample_23"))
        await pilot.press("l")
        await pilot.pause()
        keys = footer_keys(app)
        assert {"Open", "Filter", "Search", "Next", "Sort", "Failures/all", "Back", "Quit"} <= set(keys)
        assert all(right <= width for _left, right in keys.values()), (width, keys)
        title = shown_lines(screen.query_one("#triage-title"))
        assert title[0].startswith(f"{path}: 5 programs, 4 diverge")
        assert title[1].startswith("showing failures (4) · search 'xquery': 1 found")
        table = screen.query_one("DataTable")
        assert table.size.height >= 6  # the header and all five programs
        lines = shown_lines(screen.query_one("#triage-details"))
        assert lines[0].startswith("sample_23 · output wrong · first divergence at step 5")
        assert lines[1].startswith("expected:  'new-medium-performing-application - XQuery 2.'")
        assert lines[2].startswith("predicted: 'new-medium-performing-application - XQuery 2.2'")
        assert lines[3] == "status:    ended"
        assert lines[4].startswith("At step 5, before line 7")
        shot = app.save_screenshot(f"triage-{width}x{height}.svg", str(tmp_path))
        assert "XQuery" in Path(shot).read_text()


async def test_the_palette_over_the_list_offers_no_command_of_the_debugger_out_of_sight(tmp_path):
    """The debugger's step and key commands acted on the hidden debugger while the list was on
    top; over the list the palette offers the app's own (themes) only."""
    from cwmtui.ui.commands import StepCommands

    app, _ = triage_app(real_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: classified(app.screen))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert any(t.startswith("Theme:") for t in titles)
        assert not any(t in titles for t in ("Next divergence", "Jump to first divergence", "Go to a step", "Toggle layout"))
        provider = StepCommands(app.screen)
        assert [hit async for hit in provider.search("3")] == []
        debugger_titles = [c.title for c in app.get_system_commands(app.debugger)]
        assert "Next divergence" in debugger_titles


def recovery_results(tmp_path):
    """The results file of a run with --recovery: one failure the real line puts right, one that
    needs the real frame, one that no intervention brings back, and an exact trace."""
    path, records = results_file(tmp_path)
    outcome = {"swaps": None, "strings": (True, True), "nested": (False, False)}
    for record in records:
        pair = outcome[record["id"]]
        if pair is None:
            record["recovery"] = None
            continue
        record["recovery"] = {"step": record["step"], "row": record["step"], "kind": record["class"], "string_valued": False}
        for condition, recovered in zip(("action", "frame"), pair):
            record["recovery"][condition] = {
                "recovered": recovered,
                "summary": f"recovered at step {record['step'] + 1}, 1 after the intervention" if recovered
                else f"the state never matches the interpreter again after step {record['step']}",
            }
    records[2]["first_divergence"] = {"step": 3, "kind": "action", "explanation": "At step 3 the interpreter runs the loop again."}
    extra = dict(records[2], id="nested-2")
    extra["recovery"] = dict(extra["recovery"], frame={"recovered": True, "summary": "recovered at step 5, 2 after the intervention"})
    records.append(extra)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def test_after_a_recovery_run_f_shows_the_failures_that_did_not_recover(tmp_path):
    app, _ = triage_app(recovery_results(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TriageScreen))
        screen = app.screen
        title = screen.query_one("#triage-title")
        assert cells(screen, "strings")[-1] == "line ✓" and cells(screen, "nested")[-1] == "✗"
        assert cells(screen, "nested-2")[-1] == "frame ✓"
        seen = []
        for _ in range(len(screen.classes_present())):
            await pilot.press("f")
            seen.append((screen.only_class, sorted(r.id for r in screen.shown)))
        assert seen[-3:] == [("recover with the real line", ["strings"]),
                             ("recover only with the real frame", ["nested-2"]),
                             ("did not recover", ["nested"])]
        assert "showing failures that did not recover (1)" in str(title.render())
        details = "\n".join(shown_lines(screen.query_one("#triage-details")))
        assert "real line: the state never matches the interpreter again after step 3" in details
        assert "real frame: the state never matches" in details
        assert "At step 3 the interpreter runs the loop again." in details  # (review: it was cut off)
        await pilot.press("f")
        assert screen.only_class is None and len(screen.shown) == 3


async def test_a_program_of_a_recovery_run_opens_with_its_recorded_interventions_as_branches(tmp_path):
    """#25: a results record keeps what the interventions at its first divergence did; opening
    it from the list shows them as branches of the debugger, replayed and scored again."""
    from cwmtui.evaluation.batch import BatchOptions, evaluate_case, trace_suite
    from cwmtui.evaluation.suite import Case
    from cwmtui.interpreter import program_from_source

    from ..world_models import OracleBackend, wrong_line

    source = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
    case = Case("loop", program_from_source(source, "loop.py", call="f(3)"))
    [truth] = trace_suite([case], workers=1)
    frames = truth.trace.frames
    oracle = OracleBackend(case.program, frames, {3: wrong_line(frames[-1].action)})
    record = evaluate_case(oracle, "test", truth, BatchOptions(recovery=True))
    path = tmp_path / "recovery.jsonl"
    path.write_text(json.dumps(record) + "\n")
    app, _ = triage_app(path, open_id="loop")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view is not None and len(app.view.branches) == 3
                       and not any(b.running for b in app.view.branches))
        main, line, frame = app.view.branches
        assert app.screen.branch is main  # the record's own rollout on screen; [ and ] show the others
        assert (line.name, line.parent, line.at_step) == ("main/3", "main", 3)
        assert line.intervention == "action overridden at step 3 with the real line"
        assert frame.intervention == "the interpreter's whole frame forced at step 3"
        assert [b.comparison.agrees for b in (line, frame)] == [True, True]  # the slip recovers
        assert main.comparison.first_divergence.step == 3
        await pilot.press("]")
        assert app.screen.branch is line
        status = app.screen.status_bar.plain
        assert "branch main/3" in status and "/8,192" not in status  # a replay has no token budget to fill
