"""#27: the demo that plays itself (--demo). A sample's shipped script is played to its end by
the debugger against the tests' oracle (tests/world_models.py), which makes the mistakes the
script's story needs: each caption, and the final screen, are read off the screen."""

from __future__ import annotations

import dataclasses

import pytest

from cwmtui.demo_script import DemoScript, DemoStep, read_demo, script_beside
from cwmtui.interpreter import load_program
from cwmtui.model import RolloutOptions
from cwmtui.ui.app import CwmApp
from cwmtui.ui.demo import DemoPlayer
from cwmtui.ui.live import LiveSession
from cwmtui.ui.screens import OverrideScreen

from ..world_models import OracleBackend, wrong_line, wrong_return, wrong_value
from .sessions import SAMPLES
from .waiting import wait_for

SIZE = (140, 45)
WRONG_LINE = '        rotated = ""\n'  # what the oracle writes at step 3, where the interpreter splits the word
FOREVER = 3600.0  # a pause the test never waits out: → moves it on


@pytest.fixture
def strings(interpreter):
    program = load_program(str(SAMPLES / "strings.py"))
    return program, interpreter.trace(program)


def string_mistakes(truth, persist: bool = True) -> dict:
    """Step 3: the wrong line (an action hallucination). ``persist``: from step 4 on the model
    also loses a character of ``word``, and the return value with it, for good (what the bundled
    model does on this program): an override with the real line does not recover."""
    mistakes = {3: wrong_line(WRONG_LINE)}
    if persist:
        for index, frame in enumerate(truth.frames[4:], start=4):
            if frame.locals is not None and "word" in frame.locals:
                mistakes[index] = wrong_value("word", "'worl'")
            elif frame.arg is not None:
                mistakes[index] = wrong_return("'Wgour Mohg'")
    return mistakes


def demo_app(program, backend, script: DemoScript) -> tuple[CwmApp, DemoPlayer]:
    live = LiveSession(program, lambda progress: backend, RolloutOptions())
    player = DemoPlayer(script, choose_after=0.3)
    return CwmApp(opener=live.start, demo=player), player


def paced(script: DemoScript, pause: float) -> DemoScript:
    return dataclasses.replace(script, steps=tuple(dataclasses.replace(s, pause=pause) for s in script.steps))


async def until(pilot, condition, timeout: float = 30.0) -> None:
    await wait_for(pilot, condition, timeout, what="the demo")


def caption(app) -> str:
    return app.debugger.query_one("#demo").plain


async def test_the_strings_demo_plays_to_its_end(strings):
    program, truth = strings
    script = read_demo(script_beside(str(SAMPLES / "strings.py")))  # what `--demo` finds by itself
    assert [s.do for s in script.steps] == ["open", "wait", "first-divergence", "state", "override", "say",
                                            "first-divergence", "branch", "first-divergence"]
    backend = OracleBackend(program, truth.frames, mistakes=string_mistakes(truth))
    app, player = demo_app(program, backend, paced(script, FOREVER))
    real_line = truth.frames[3].action.strip()
    expected = [  # each step's caption, as the screen shows it once the step is done
        "scramble() edits strings a little at each step.",
        "The model (test oracle · byte tokens) writes the trace one frame at a time",
        f"Step 3: the first divergence (action hallucination). The interpreter runs `{real_line}`, "
        f"the model wrote `{WRONG_LINE.strip()}`.",
        "The state panel says what went wrong at this step, then lists each variable",
        "We override step 3 with the interpreter's line and let the model write on from there.",
        "With the interpreter's line at step 3, the model writes on in a new branch, main/3: not recovered within ",
        "In main/3 the first divergence is at step 4 · string-valued state: word: the right line alone did not keep",
        "back to the model's own rollout, main.",
        "f goes to its first divergence, step 3, where the story began.",
    ]
    async with app.run_test(size=SIZE) as pilot:
        screen = app.debugger
        for number, text in enumerate(expected, start=1):
            await until(pilot, lambda n=number: player.index == n - 1 and player.done)
            shown = caption(app)
            assert f"demo {number}/9" in shown and text in shown, (number, shown)
            assert "(the script expected" not in shown  # every claim of the script holds here
            if number == 3:
                assert screen.step == 3 and "first divergence step 3 · action hallucination" in screen.query_one("#status").plain
            if number == 4:
                assert screen.focused is screen.state_panel  # pointed at
            if number == 5:
                assert [b.name for b in app.view.branches] == ["main", "main/3"]
            if number < len(expected):
                await pilot.press("right")
        # the end: the caption says so, space and → are free again, the first divergence is on show
        await pilot.press("right")
        assert player.finished and "end of the demo" in caption(app)
        assert screen.check_action("demo_next", ()) is False
        assert screen.focused is None
        assert screen.branch.name == "main" and screen.step == 3
        status = screen.query_one("#status").plain
        assert "step 3/" in status and "first divergence step 3 · action hallucination" in status
        assert str(screen.query_one("#model").border_title).startswith("model · main (1/2)")
        child = app.view.branches[1]
        assert child.badge.startswith("not recovered")  # as the script says
        source = screen.source_pane  # ✗ on the line of the first divergence
        assert "✗" in source.render_line(truth.frames[3].lineno - 1 - int(source.scroll_y)).text


async def test_a_claim_the_run_does_not_bear_out_is_said_on_the_caption(strings):
    """The oracle that makes only the wrong line: the override recovers, and the caption says
    the script expected otherwise (a demo never claims more than the screen shows)."""
    program, truth = strings
    script = read_demo(script_beside(str(SAMPLES / "strings.py")))
    steps = [s for s in script.steps if s.do in ("open", "wait", "first-divergence", "override", "say")][:5]
    backend = OracleBackend(program, truth.frames, mistakes=string_mistakes(truth, persist=False))
    app, player = demo_app(program, backend, paced(dataclasses.replace(script, steps=tuple(steps)), 0.05))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: player.finished)
        shown = caption(app)
        assert "the model writes on in a new branch, main/3: recovered at step 4." in shown
        assert "(the script expected 'not recovered'; this run: recovered at step 4)" in shown


async def test_space_pauses_and_right_goes_on(strings):
    program, truth = strings
    steps = tuple(DemoStep("say", f"caption {n}", 2.0) for n in (1, 2, 3))
    app, player = demo_app(program, OracleBackend(program, truth.frames), DemoScript("t.demo.toml", "", steps))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: player.done)
        await pilot.press("space")
        assert "❚❚ paused" in caption(app)
        await pilot.pause(2.5)  # past the caption's pause: still on the first caption
        assert player.index == 0 and "demo 1/3  caption 1" in caption(app)
        await pilot.press("right")  # the next step, still paused
        await until(pilot, lambda: player.index == 1)
        assert "demo 2/3  caption 2" in caption(app) and "paused" in caption(app)
        await pilot.press("space")
        await until(pilot, lambda: player.finished)
        assert "demo 3/3  caption 3" in caption(app) and "end of the demo" in caption(app)


async def test_the_override_dialog_is_shown_then_the_line_picked(strings):
    """The override goes through the o dialog, as a presenter's keys would: it is on screen
    until the player picks the script's line."""
    program, truth = strings
    steps = (DemoStep("wait", "w", 0), DemoStep("first-divergence", "f", 0), DemoStep("override", "o", 0, line=13))
    backend = OracleBackend(program, truth.frames, mistakes=string_mistakes(truth, persist=False))
    live = LiveSession(program, lambda progress: backend, RolloutOptions())
    player = DemoPlayer(DemoScript("t.demo.toml", "", steps), choose_after=0.6)
    app = CwmApp(opener=live.start, demo=player)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, OverrideScreen))
        await until(pilot, lambda: player.finished)
        child = app.view.branches[-1]
        assert child.name == "main/3" and child.model_at(3).action == program.lines[12]  # line 13


class FailingAfterMain(OracleBackend):
    """The model's server goes away after the main rollout."""

    fail = False

    def complete(self, *args, **kwargs):
        if self.fail:
            from cwmtui.model import ModelError

            raise ModelError("the server went away")
        return super().complete(*args, **kwargs)


async def test_an_intervention_that_fails_ends_its_step_and_says_so(strings):
    """Review: the player waited for a branch that a failed override never made, forever."""
    program, truth = strings
    backend = FailingAfterMain(program, truth.frames, mistakes=string_mistakes(truth, persist=False))
    steps = (DemoStep("wait", "w", 0), DemoStep("first-divergence", "f", 0),
             DemoStep("override", "o", 0), DemoStep("say", "after", 0))
    app, player = demo_app(program, backend, DemoScript("t", "", steps))
    player.choose_after = FOREVER  # the dialog stays until the server has gone away (no race with the pick)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: player.index == 2 and player.acted and isinstance(app.screen, OverrideScreen))
        backend.fail = True
        player.choose_after = 0.0
        await until(pilot, lambda: player.index == 2 and player.done, timeout=30)
        assert "(the intervention failed: " in caption(app) and "the server went away" in caption(app)
        await until(pilot, lambda: player.finished, timeout=30)


async def test_a_saved_session_plays_its_demo_without_a_model(tmp_path, interpreter):
    """`cwmtui open talk.json --demo` (review of #27: --demo was for programs and replays only):
    a saved session is a demo that needs no model; steps that would need one say so."""
    from cwmtui.cli.app import demo_from
    from cwmtui.cli.open import build_parser
    from cwmtui.ui.launch import session_app

    from .sessions import strings_view

    path = tmp_path / "talk.json"
    strings_view(interpreter).engine.save(str(path))
    (tmp_path / "talk.demo.toml").write_text(
        'title = "talk"\npause = 0\n'
        '[[step]]\ndo = "open"\nsay = "A saved run of {program}."\n'
        '[[step]]\ndo = "first-divergence"\nsay = "Step {step}: {divergence}."\n'
        '[[step]]\ndo = "override"\nsay = "Override {step}."\n'
        '[[step]]\ndo = "say"\nsay = "The end."\n', encoding="utf-8")
    args = build_parser().parse_args([str(path), "--demo"])
    script = demo_from(args, args.session)  # the one beside the session
    assert script is not None and [s.do for s in script.steps] == ["open", "first-divergence", "override", "say"]
    app = session_app(str(path), demo=paced(script, FOREVER))
    player = app.demo
    captions = {}
    async with app.run_test(size=SIZE) as pilot:
        for index in range(4):
            await until(pilot, lambda i=index: player.index == i and player.done)
            captions[index] = caption(app)
            await pilot.press("right")
        assert player.finished
        step = app.view.branches[0].first_divergence.step
        assert app.debugger.step == step
    assert captions[0].startswith(" demo 1/4  A saved run of strings.py.")
    assert f"Step {step}: step {step}" in captions[1]
    assert "Override" in captions[2] and "(skipped: no override here)" in captions[2]
    assert "The end." in captions[3]


def test_open_with_a_demo_that_is_not_there_is_one_line(tmp_path, capsys, interpreter):
    from cwmtui.cli import main

    from .sessions import strings_view

    path = tmp_path / "talk.json"
    strings_view(interpreter).engine.save(str(path))
    assert main(["open", str(path), "--demo"]) == 2
    err = capsys.readouterr().err
    assert f"--demo: no demo script beside {path} (looked for {tmp_path / 'talk.demo.toml'}); pass --demo FILE" in err
    assert err.count("\n") == 1


async def test_where_the_paths_part_the_caption_and_the_dialog_name_the_line_the_model_wrote(interpreter):
    """Review of #27: at an action divergence where the model's own frame sits on another row,
    the caption said "the model wrote `—`" (and the override dialog "(no step)") while the state
    panel said which line the model predicted."""
    from .sessions import exception_view

    view = exception_view(interpreter)
    view.can_generate = True  # the override dialog as a live session shows it (nothing runs here)
    steps = (DemoStep("first-divergence", "The interpreter runs `{truth_line}`, the model wrote `{model_line}`.", 0),)
    player = DemoPlayer(DemoScript("t", "", steps))
    app = CwmApp(view, demo=player)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: player.done)
        row = view.branches[0].first_divergence.step
        assert app.debugger.step == row and view.branches[0].model_at(row) is None  # the model's frame is elsewhere
        assert "the model wrote `return value * 2`." in caption(app)
        assert "the model predicted a return event at line 10 (`return value * 2`)" in " ".join(
            " ".join(app.debugger.state_panel.lines).split())  # (what the state panel says of it)
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, OverrideScreen))
        hint = " ".join(
            str(label.render()) for label in app.screen.query("Label"))
        assert "model wrote: return value * 2" in hint


async def test_an_override_with_the_line_the_model_already_has_is_skipped_and_said(strings):
    """Review of #27: the compose demo overrode a state divergence with "the real line", the
    line the model already had: the new branch was the same trace, and the captions told a
    story of it."""
    program, truth = strings
    step = next(i for i, f in enumerate(truth.frames) if i > 2 and f.locals and "word" in f.locals)
    backend = OracleBackend(program, truth.frames, mistakes={step: wrong_value("word", "'wrld'")})
    steps = (DemoStep("wait", "w", 0), DemoStep("first-divergence", "f", 0),
             DemoStep("override", "o {step}", 0, line="real"), DemoStep("say", "after", 0))
    app, player = demo_app(program, backend, paced(DemoScript("t", "", steps), FOREVER))
    async with app.run_test(size=SIZE) as pilot:
        for index in range(2):
            await until(pilot, lambda i=index: player.index == i and player.done)
            await pilot.press("right")
        await until(pilot, lambda: player.index == 2 and player.done)
        assert app.debugger.step == step
        shown = caption(app)
        assert f"o {step} (skipped: the model's line at step {step} is the interpreter's already; what differs is its state)" in shown
        assert not isinstance(app.screen, OverrideScreen) and len(app.view.branches) == 1
        await pilot.press("right")
        await until(pilot, lambda: player.index == 3 and player.done)


async def test_notifications_do_not_cover_the_caption(strings):
    """Review of #27: a notification (the first divergence found, a branch's end) popped up at
    the bottom right, over the caption, for seconds at 80x24."""
    program, truth = strings
    backend = OracleBackend(program, truth.frames, mistakes=string_mistakes(truth))
    steps = (DemoStep("wait", "The model writes its trace and the caption says so, at length.", 0),)
    app, player = demo_app(program, backend, paced(DemoScript("t", "", steps), FOREVER))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: bool(app.debugger.query("Toast")))  # "first divergence at step 3: …"
        await pilot.pause(0.3)
        toast = app.debugger.query_one("Toast")
        banner = app.debugger.query_one("#demo")
        assert toast.region.height and banner.region.height
        assert not toast.region.overlaps(banner.region), (toast.region, banner.region)
