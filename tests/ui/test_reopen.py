"""`cwmtui open SESSION.json`: a saved session on screen as it was saved, read-only without a
model, growing new branches with one (--model, --server, --replay)."""

from __future__ import annotations

import json

import pytest

from cwmtui.cli import main
from cwmtui.interpreter import load_program
from cwmtui.session import DebugSession
from cwmtui.ui import launch
from cwmtui.ui.launch import session_app
from cwmtui.ui.screens import OverrideScreen

from ..world_models import OracleBackend, wrong_line
from .sessions import SAMPLES
from .test_interventions import WRONG_LINE
from .waiting import wait_for

SIZE = (120, 40)


@pytest.fixture
def saved(interpreter, tmp_path):
    """samples/strings.py, the oracle taking a wrong line at step 11, saved to a file."""
    program = load_program(str(SAMPLES / "strings.py"))
    truth = interpreter.trace(program)
    session = DebugSession(program, OracleBackend(program, truth.frames, mistakes={11: wrong_line(WRONG_LINE)}), truth=truth)
    session.run_main()
    path = tmp_path / "strings-session.json"
    session.save(str(path))
    return path, program, truth


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_without_a_model_the_saved_session_is_shown_read_only(saved):
    path, _, truth = saved
    app = session_app(str(path), export_dir=path.parent)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        branch = app.view.branches[0]
        assert len(branch.frames) == len(truth.frames)
        assert "test oracle" in screen.query_one("#status").plain  # the saved model's name
        await pilot.press("d")
        assert screen.step == 11 and branch.first_divergence.kind == "action"
        assert "action hallucination" in screen.query_one("#status").plain
        await pilot.press("j", "j", "G", "g", "d")
        assert screen.step == 11
        await pilot.press("o")
        await pilot.pause()
        assert not isinstance(app.screen, OverrideScreen)
        assert any("opened without a model" in m and "--model" in m for m in notifications(app))
        await pilot.press("x")
        await wait_for(pilot, lambda: app.last_export is not None)  # written in a worker
        exported, _ = app.last_export
    again = DebugSession.load(str(exported))
    assert again.branches[0].comparison.first_divergence == branch.first_divergence


async def test_with_a_model_overrides_grow_new_branches(saved):
    path, program, truth = saved
    opened = []

    def open_model(progress):
        opened.append(True)
        return OracleBackend(program, truth.frames, mistakes={11: wrong_line(WRONG_LINE)})

    app = session_app(str(path), open_model, {"token_budget": 4000})
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        assert app.view.branches[0].first_divergence.step == 11  # on screen before the model is open
        await wait_for(pilot, lambda: app.view.can_generate)
        assert opened == [True] and len(app.view.branches) == 1  # the saved rollout is not run again
        # new branches get the budget given on the command line; the saved one keeps its own
        assert app.view.token_budget == 4000
        assert "budget 8,192" in screen.query_one("#status").plain and "4,000" not in screen.query_one("#status").plain
        await pilot.press("d", "o")
        assert isinstance(app.screen, OverrideScreen)
        await pilot.press("enter")  # the real line
        await wait_for(pilot, lambda: len(app.view.branches) == 2 and not app.view.branches[1].running)
        child = app.view.branches[1]
        assert screen.branch is child and child.name == "main/11"
        assert child.badge.startswith("recovered at step")
        # the new branch ran under the budget given on the command line, not the saved 8,192
        assert child.status == "budget" and child.first_divergence.kind == "budget"
        assert "budget 4,000" in screen.query_one("#status").plain  # the child is selected
        await pilot.press("[")
        assert screen.branch is app.view.branches[0] and "budget 8,192" in screen.query_one("#status").plain


def open_cli(monkeypatch, *argv: str):
    """Run `cwmtui open ...` up to the app, which is handed back instead of run."""
    apps = []

    def run_app(app):
        apps.append(app)
        return 0

    monkeypatch.setattr(launch, "run_app", run_app)
    assert main(["open", *argv]) == 0
    return apps[0]


async def test_cwmtui_open_takes_the_model_options(saved, monkeypatch, tmp_path):
    from ..tiny_models import build_tiny_model

    path, _, _ = saved
    model = build_tiny_model(tmp_path / "tiny")
    app = open_cli(monkeypatch, str(path), "--model", str(model), "--device", "cpu", "--temperature", "0.5")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.view.can_generate, timeout=60)
        assert app.view.model_name != "oracle" and "T=0.5" in app.view.decoding
        assert app.view.branches[0].first_divergence.step == 11  # the saved branch, as saved
    app = open_cli(monkeypatch, str(path))
    assert app.live is None and app.opener is None  # no model options: read-only


def test_open_checks_its_options_and_the_file_in_one_line(saved, capsys, tmp_path):
    path, _, _ = saved
    data = json.loads(path.read_text())
    data["version"] = "two"
    damaged = tmp_path / "damaged.json"
    damaged.write_text(json.dumps(data))
    for argv, message in [
        ([str(damaged)], "damaged.json: the session file is damaged: its format version 'two' is not understood"),
        ([str(path), "--token-budget", "100"], "--token-budget is for new branches, which need a model"),
        ([str(path), "--model", "/no/such/model"], "--model /no/such/model: no such model directory"),
        ([str(path), "--model", "x", "--server", "http://localhost:1"], "cannot be used together"),
        ([str(path), "--id", "3"], "--id selects a record of --replay FILE"),
    ]:
        assert main(["open", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_building_the_app_on_a_session_leaves_the_collector_as_it_was(saved):
    """Only `cwmtui open`, which runs the app to its end, freezes the session's objects."""
    import gc

    path, _, _ = saved
    frozen, enabled = gc.get_freeze_count(), gc.isenabled()
    session_app(str(path))
    assert (gc.get_freeze_count(), gc.isenabled()) == (frozen, enabled)
