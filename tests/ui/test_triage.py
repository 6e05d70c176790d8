"""`cwmtui --replay RESULTS.jsonl`: the failure list of a batch run, each program opened in turn."""

from __future__ import annotations

import json
import time

from cwmtui.interpreter import load_program, trace_program
from cwmtui.model import RolloutOptions
from cwmtui.ui.app import CwmApp
from cwmtui.ui.launch import ReplayTriage
from cwmtui.ui.triage import TriageScreen

from .sessions import SAMPLES, frame_texts

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


async def wait_for(pilot, condition, timeout: float = 20.0) -> None:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "timed out waiting for the app"
        await pilot.pause(0.05)


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
