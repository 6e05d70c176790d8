"""DebugSession: the main rollout, interventions as branches, recovery, teacher forcing, save/load.

The world model is tests/world_models.OracleBackend: it continues any prompt with the truth's
next frame, except where it is told to make a mistake, so every outcome here is known exactly.
"""

import json
import threading
from dataclasses import replace

import pytest

from cwmtui.analysis.compare import StepKind, compare
from cwmtui.interpreter import load_program, program_from_source
from cwmtui.model.replay import ReplayBackend, load_replay
from cwmtui.session import FORMAT_VERSION, Branch, DebugSession, SessionError
from cwmtui.trace import Event, Frame, RolloutStatus

from .conftest import GOLDEN, ROOT
from .world_models import OracleBackend, both, wrong_line, wrong_return, wrong_value

LOOP = """\
def total(xs):  # << START_OF_TRACE
    acc = 0
    for x in xs:
        acc += x
    return acc

total([4, 7, 10])
"""


@pytest.fixture(scope="module")
def strawberry(interpreter):
    program = load_program(str(GOLDEN / "strawberry.py"), call="f('r')")
    return program, interpreter.trace(program)


@pytest.fixture(scope="module")
def loop(interpreter):
    program = program_from_source(LOOP, "loop.py")
    return program, interpreter.trace(program)


def session_with(case, **mistakes):
    program, truth = case
    return DebugSession(program, OracleBackend(program, truth.frames, **mistakes), truth=truth)


LOOP_AGAIN = "        n += int(c == letter)\n"  # instead of `return n` after the last letter


def test_main_rollout_streams_frames_and_is_compared(strawberry):
    session = session_with(strawberry, mistakes={26: wrong_line(LOOP_AGAIN)})
    seen = []
    main = session.run_main(on_frame=lambda branch, index, frame: seen.append((branch.name, index)))
    assert [i for _, i in seen] == list(range(len(main.frames)))
    assert {name for name, _ in seen} == {"main"}
    assert main.status == "ended"
    assert main.frames[0].origin == "forced" and main.frames[1].origin == "generated"
    first = main.comparison.first_divergence
    assert (first.kind, first.step, first.regime) == ("action", 26, "action hallucination")
    assert main.tokens["trace"] > 0 and main.tokens["processed"] > 0


def test_override_with_the_real_line_recovers_and_holds(strawberry):
    session = session_with(strawberry, mistakes={26: wrong_line(LOOP_AGAIN)})
    main = session.run_main()
    branch = session.override_with_truth(main, 26)
    assert branch.parent == "main" and branch.at_step == 26
    assert branch.intervention.source == "truth"
    assert branch.frames[26].action == "    return n\n"
    assert branch.comparison.verdict == "agree"
    recovery = branch.recovery
    assert (recovery.recovered_at, recovery.held_to_end, recovery.first_divergence) == (27, True, None)
    assert recovery.held_for == len(session.truth.frames) - 27
    assert session.children("main") == [branch]


def test_override_with_another_source_line_diverges_as_asked(strawberry):
    session = session_with(strawberry)
    main = session.run_main()
    assert main.comparison.verdict == "agree"
    branch = session.override(main, 5, action="    return n")  # skip the loop
    assert branch.intervention.source == "line"
    assert branch.comparison.steps[5].kind is StepKind.ACTION
    assert branch.comparison.first_divergence.step == 5


def test_editing_the_locals_fixes_a_sticky_state_error(strawberry):
    program, truth = strawberry
    # the model believes n is 9 from step 11 to the end of the loop
    session = session_with(strawberry, mistakes={i: wrong_value("n", "9") for i in range(11, 27)})
    main = session.run_main()
    assert (main.comparison.first_divergence.kind, main.comparison.first_divergence.variables) == ("state", ["n"])
    branch = session.override(main, 11, locals=dict(truth.frames[11].locals))
    assert branch.intervention.kind == "locals"
    assert branch.frames[11].origin == "edited" and branch.frames[11].locals["n"] == "1"
    # #24: the edited step keeps its line (and function), as the model's frame had them
    assert (branch.frames[11].lineno, branch.frames[11].function) == (truth.frames[11].lineno, truth.frames[11].function)
    assert branch.comparison.steps[11].kind is StepKind.MATCH
    # the model keeps its belief on the following steps; state matches again after the loop returns
    assert branch.recovery.recovered_at == 27
    assert branch.recovery.held_to_end


def test_no_recovery_when_the_model_never_gets_it_right(loop):
    program, truth = loop
    every = {i: both(wrong_value("acc", "99"), wrong_return("99")) for i in range(3, len(truth.frames))}
    session = session_with(loop, mistakes=every)
    main = session.run_main()
    branch = session.override(main, 3, locals=dict(truth.frames[3].locals))
    assert branch.recovery.recovered_at is None
    assert branch.recovery.first_divergence.kind == "state"
    assert "never matches" in branch.recovery.describe()


def test_teacher_forcing_removes_action_errors_and_keeps_state_errors(strawberry):
    session = session_with(strawberry, mistakes={26: wrong_line(LOOP_AGAIN), 30: wrong_value("count", "4")})
    main = session.run_main()
    assert main.comparison.first_divergence.kind == "action"
    forced = session.teacher_forced()
    assert forced.name == "teacher-forced" and forced.status == "ended"
    assert forced.forced_steps == []
    first = forced.comparison.first_divergence
    assert (first.kind, first.step, first.variables) == ("state", 30, ["count"])
    assert all(s.truth_index == s.model_index for s in forced.comparison.steps)


def test_whole_frame_teacher_forcing_predicts_each_step_from_the_true_trace(strawberry):
    """#24: the condition where the model sees the interpreter's trace so far at every step and
    writes only the next frame: a mistake never carries over to the next step."""
    mistakes = {26: wrong_line(LOOP_AGAIN), 30: wrong_value("count", "4")}
    session = session_with(strawberry, mistakes=mistakes)
    program, truth = strawberry
    branch = session.teacher_forced(whole_frames=True)
    assert branch.name == "teacher-forced-frames" and branch.intervention.whole_frames
    assert branch.status == "ended" and len(branch.frames) == len(truth.frames)
    # the model's own predictions are what the branch shows and scores ...
    assert branch.frames[26].action == LOOP_AGAIN and branch.frames[30].locals["count"] == "4"
    assert all(f.origin == "generated" for f in branch.frames[1:])
    # ... each from the true prefix: every other step right, both mistakes scored where they are
    wrong = [s.step for s in branch.comparison.steps if s.kind.is_divergence]
    assert wrong == [26, 30]
    assert branch.comparison.first_divergence.kind == "action"
    # the rollout behind it holds the interpreter's frames
    assert [f.action for f in branch.rollout.frames] == [f.action for f in truth.frames]


def test_whole_frame_teacher_forcing_keeps_an_early_end_as_the_models_error(loop):
    session = session_with(loop, end_at=4)
    branch = session.teacher_forced(whole_frames=True)
    program, truth = loop
    assert len(branch.frames) == len(truth.frames)  # it goes on after the early end
    assert branch.frames[4].is_error and "end of text" in branch.frames[4].error
    first = branch.comparison.first_divergence
    assert (first.step, first.kind) == (4, "format")
    assert [s.step for s in branch.comparison.steps if s.kind.is_divergence] == [4]


def test_teacher_forcing_forces_the_whole_frame_where_the_model_would_end(loop):
    program, truth = loop
    session = session_with(loop, end_at=4)
    forced = session.teacher_forced()
    assert forced.forced_steps == [4]
    assert forced.frames[4].origin == "forced"  # shown as forced: the frame is the truth's
    # ... but scored as the format error it is: the model could not write it (#23: one scoring)
    first = forced.comparison.first_divergence
    assert forced.comparison.verdict != "agree" and (first.step, first.kind) == (4, "format")


def test_cancelled_rollout_is_pending_not_divergent(strawberry):
    session = session_with(strawberry)
    stop = threading.Event()

    def on_frame(branch, index, frame):
        if index == 5:
            stop.set()

    main = session.run_main(on_frame=on_frame, cancel=stop)
    assert main.status == "cancelled"
    assert main.comparison.verdict == "pending"
    assert main.comparison.first_divergence is None


@pytest.mark.parametrize("teacher", [False, True, "frames"], ids=["main", "teacher-forced", "teacher-forced-frames"])
def test_a_cancelled_rollout_resumes_where_it_stopped_and_ends_as_an_uncancelled_one(strawberry, teacher):
    mistakes = {26: wrong_line(LOOP_AGAIN), 30: wrong_value("count", "4")}
    whole = session_with(strawberry, mistakes=mistakes)
    frames = teacher == "frames"
    expected = whole.teacher_forced(whole_frames=frames) if teacher else whole.run_main()
    session = session_with(strawberry, mistakes=mistakes)
    stop = threading.Event()

    def on_frame(branch, index, frame):
        if index == 7:
            stop.set()

    branch = (session.teacher_forced(on_frame=on_frame, cancel=stop, whole_frames=frames) if teacher
              else session.run_main(on_frame=on_frame, cancel=stop))
    assert branch.status == "cancelled" and len(branch.frames) < len(expected.frames)
    resumed = session.resume(branch.name)
    assert resumed is branch and (branch.status, branch.message) == (expected.status, expected.message)
    assert [f.action for f in branch.frames] == [f.action for f in expected.frames]
    assert [f.locals for f in branch.frames] == [f.locals for f in expected.frames]
    assert branch.comparison.first_divergence.to_json() == expected.comparison.first_divergence.to_json()
    with pytest.raises(SessionError, match="was not cancelled"):
        session.resume(branch)


def test_a_rollout_stopped_by_its_budget_says_why_and_what_it_could_write(strawberry, tmp_path):
    program, truth = strawberry
    backend = OracleBackend(program, truth.frames)
    backend.context_length = 900
    session = DebugSession(program, backend, truth=truth)
    main = session.run_main()
    assert main.token_limit == 900 - session.main.rollout.prompt_tokens  # the context, not the 8,192 budget
    assert "context of 900 tokens" in main.message
    path = tmp_path / "s.json"
    session.save(path)
    again = DebugSession.load(path).main
    assert (again.message, again.token_limit) == (main.message, main.token_limit)


def test_the_lens_splits_a_differing_value_with_the_tokenizer_on_a_row_where_the_paths_part(strawberry):
    """#24: the lens said "no tokenizer here" on a row the comparison does not compare by name
    (an action divergence), and "the model's tokenizer" on another branch at the same step."""
    session = session_with(strawberry, mistakes={26: both(wrong_line(LOOP_AGAIN), wrong_value("s", "'strawbery'"))})
    main = session.run_main()
    row = main.comparison.steps[26]
    assert row.kind is StepKind.ACTION and row.variables == []
    lens = session.lens(main, 26, "s")
    assert lens is not None and lens.changed_pieces == (1, 0)
    assert [p.text for p in lens.expected][0] == "'"  # the JSON string's quote is not a piece
    assert session.lens(main, 26, "letter") is None  # the same value on both sides: nothing to split


@pytest.mark.parametrize("value, said", [("['a', 'b'", "was never closed"), ("..", "means 'unchanged'"),
                                         ("'x<|frame_sep|>'", "the format's own token"), ("  ", "cannot be empty")])
def test_an_edited_state_must_be_a_value_a_trace_could_hold(strawberry, value, said):
    session = session_with(strawberry)
    main = session.run_main()
    with pytest.raises(SessionError, match=said):
        session.override(main, 5, locals={**main.frames[5].locals, "n": value})
    assert len(session.branches) == 1  # nothing was started


def test_editing_one_value_beside_reprs_of_objects_is_allowed(interpreter):
    """Review of #24: the check refused every local, so a frame holding a defaultdict or a list
    of objects (reprs Python itself writes) could not be edited at all."""
    source = (
        "from collections import defaultdict\n\n\nclass Node:\n    pass\n\n\n"
        "def f(n):  # << START_OF_TRACE\n    counts = defaultdict(int)\n    nodes = [Node()]\n"
        "    n = n + 1\n    return n\n\n\nf(1)\n"
    )
    program = program_from_source(source, "objects.py")
    truth = interpreter.trace(program)
    session = DebugSession(program, OracleBackend(program, truth.frames), truth=truth)
    main = session.run_main()
    step = next(i for i, f in enumerate(main.frames) if f.locals and "nodes" in f.locals)
    assert "<" in main.frames[step].locals["nodes"] and "<class 'int'>" in main.frames[step].locals["counts"]
    child = session.override(main, step, locals={**main.frames[step].locals, "n": "5"})
    assert child.frames[step].locals["n"] == "5"
    edited = {**main.frames[step].locals, "nodes": "[<__main__.Node object at 0x7f>, <__main__.Node object at 0x80>]",
              "counts": "defaultdict(<class 'int'>, {'a': 1})"}
    assert session.override(main, step, locals=edited).frames[step].locals["counts"] == edited["counts"]


@pytest.mark.parametrize("whole_frames", [False, True], ids=["actions", "frames"])
def test_a_teacher_forced_model_that_runs_on_past_the_end_says_so(loop, whole_frames):
    """Review of #24: the branch ended 'running' (actions) or said 'the model wrote end of text'
    (frames) when the model wrote a frame after the program's last."""
    from cwmtui.session.branch import RAN_ON

    program, truth = loop
    ran_on = Frame(Event.LINE, "    acc = 0\n", {"xs": "[4, 7, 10]"})
    session = DebugSession(program, OracleBackend(program, [*truth.frames, ran_on]), truth=truth)
    branch = session.teacher_forced(whole_frames=whole_frames)
    assert (branch.status, branch.message) == ("ended", RAN_ON)
    assert branch.comparison.steps[-1].kind is StepKind.EXTRA


def test_a_teacher_forced_rollout_cancelled_after_the_last_step_resumes_to_its_end(loop):
    program, truth = loop
    session = session_with(loop)
    stop = threading.Event()

    def on_frame(branch, index, frame):
        if index == len(truth.frames) - 1:
            stop.set()

    branch = session.teacher_forced(on_frame=on_frame, cancel=stop)
    assert branch.status == "cancelled" and len(branch.frames) == len(truth.frames)
    session.resume(branch)
    assert branch.status == "ended" and branch.comparison.verdict == "agree"


def test_a_branch_of_whole_frames_cannot_be_grown_from(strawberry):
    session = session_with(strawberry)
    frames = session.teacher_forced(whole_frames=True)
    with pytest.raises(SessionError, match="one-step predictions"):
        session.override(frames, 5, action=frames.frames[5].action)
    assert len(session.branches) == 1


def test_saved_session_reopens_offline_with_identical_comparisons(strawberry, tmp_path):
    program, truth = strawberry
    session = session_with(strawberry, mistakes={2: wrong_value("word", "'strawbery'"), 26: wrong_line(LOOP_AGAIN)})
    main = session.run_main()
    session.override_with_truth(main, 26)
    session.override(main, 2, locals=dict(truth.frames[2].locals))
    session.teacher_forced()
    lens = session.lens(main)
    assert lens is not None and any(p.differs for p in lens.expected)
    path = tmp_path / "session.json"
    session.save(str(path))

    again = DebugSession.load(str(path))
    assert again.backend is None
    assert again.program == program
    assert again.truth.frames == truth.frames
    assert again.model_name == "oracle"
    assert [b.name for b in again.branches] == [b.name for b in session.branches]
    for before, after in zip(session.branches, again.branches):
        assert after.comparison.to_json() == before.comparison.to_json(), before.name
        assert (after.recovery.to_json() if after.recovery else None) == (before.recovery.to_json() if before.recovery else None)
        assert after.intervention == before.intervention and after.tokens == before.tokens
        assert [f.origin for f in after.frames] == [f.origin for f in before.frames]
    assert again.lens("main") == lens  # the token lens comes back without the tokenizer
    with pytest.raises(SessionError, match="without a model"):
        again.override("main", 26, action="    return n\n")


def rows(comparison) -> list:
    """Everything a row of the side-by-side view shows."""
    return [(s.to_json(), sorted(s.model_changed), s.note, s.order_differs) for s in comparison.steps]


def test_a_reopened_session_shows_every_row_as_it_was_saved(strawberry, tmp_path):
    """Rows of every kind (a malformed frame, a skipped step, an early end by the token budget,
    locals in another order) come back from the saved comparison exactly, and saving the
    reopened session writes the same file."""
    program, truth = strawberry
    frames = [replace(f, tokens=5, origin="generated") for f in truth.frames[:30]]
    frames[4] = replace(frames[4], locals=dict(reversed(list(frames[4].locals.items()))))
    frames[9] = Frame(None, "", error="no action separator", raw="<|line_sep|>{\"word\": ", tokens=7, origin="generated")
    del frames[15]
    session = DebugSession(program, None, truth=truth)
    session.model_name = "test"
    session.branches = [Branch("main", frames=frames, status=RolloutStatus.BUDGET, tokens={"trace": 150, "processed": 150},
                               settings={"token_budget": 150, "temperature": 0.0})]
    before = session.compare_branch(session.branches[0])
    kinds = {s.kind for s in before.steps}
    assert {StepKind.MATCH, StepKind.FORMAT, StepKind.ACTION, StepKind.MISSING} <= kinds
    assert any(s.order_differs for s in before.steps)
    path, again_path = tmp_path / "session.json", tmp_path / "again.json"
    session.save(str(path))

    again = DebugSession.load(str(path))
    after = again.branches[0].comparison
    assert rows(after) == rows(before)
    assert (after.verdict, after.first_divergence, after.agreed_steps) == (before.verdict, before.first_divergence, before.agreed_steps)
    assert after.divergent_rows() == before.divergent_rows()
    for event in Event:  # what c / C jump between
        assert after.rows_of_event(event) == before.rows_of_event(event)
    assert after.rows_of_event(Event.CALL) and after.rows_of_event(Event.RETURN)
    assert [after.frames_at(r) for r in range(len(after.steps))] == [before.frames_at(r) for r in range(len(before.steps))]
    assert list(after.alignment) == list(before.alignment)
    assert list(again.branches[0].frames) == frames and [f.tokens for f in again.branches[0].frames] == [f.tokens for f in frames]
    again.save(str(again_path))
    assert again_path.read_bytes() == path.read_bytes()


def test_a_version_1_file_still_opens_with_the_same_comparisons(tmp_path):
    session = DebugSession.load(str(ROOT / "tests" / "fixtures" / "session_v1.json"))
    main, child = session.branches
    first = main.comparison.first_divergence
    assert (main.comparison.verdict, first.step, first.kind, first.variables) == ("diverge", 2, "state", ["word"])
    assert child.name == "main/26" and child.recovery.describe().startswith("recovered at step 27")
    path = tmp_path / "v2.json"
    session.save(str(path))
    assert json.loads(path.read_text())["version"] == FORMAT_VERSION == 2
    again = DebugSession.load(str(path))
    for before, after in zip(session.branches, again.branches):
        assert rows(after.comparison) == rows(before.comparison)
        assert after.recovery == before.recovery


@pytest.mark.parametrize("version", ["2", "two", None, 1.5, 0, True, [2]])
def test_a_format_version_that_is_no_version_number_is_a_damaged_file(tmp_path, version):
    path = tmp_path / "session.json"
    path.write_text(json.dumps({"format": "cwmtui-session", "version": version}))
    with pytest.raises(SessionError, match=r"the session file is damaged: its format version .* is not understood"):
        DebugSession.load(str(path))
    path.write_text(json.dumps({"format": "cwmtui-session", "version": 99}))
    with pytest.raises(SessionError, match="version 99 is newer than this cwmtui reads"):
        DebugSession.load(str(path))


def test_loading_bad_files_says_what_is_wrong(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(SessionError, match="no such file"):
        DebugSession.load(str(missing))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SessionError, match="not JSON"):
        DebugSession.load(str(bad))
    other = tmp_path / "other.json"
    other.write_text('{"format": "something-else"}')
    with pytest.raises(SessionError, match="not a cwmtui session"):
        DebugSession.load(str(other))
    with pytest.raises(SessionError, match=f"{tmp_path}: is a directory, not a session file"):
        DebugSession.load(str(tmp_path))


def test_a_session_file_an_editor_saved_with_a_byte_order_mark_opens(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (ROOT / "tests" / "fixtures" / "session_v1.json").read_bytes())
    main, _ = DebugSession.load(str(path)).branches
    assert main.comparison.first_divergence.step == 2


def saved_then_damaged(case, tmp_path, damage):
    """The oracle's session saved, then its JSON changed by ``damage``; the file's path."""
    path = tmp_path / "session.json"
    session = session_with(case)
    session.run_main()
    session.save(str(path))
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("damage", [
    lambda d: d["truth"].__setitem__("frames", "x"),
    lambda d: d["truth"]["frames"].__setitem__(0, {"same_as": 0}),  # the truth refers to nothing
    lambda d: d["truth"]["frames"].__setitem__(0, [None, "", None, 0, "", None, None]),  # no event, no format error
    lambda d: d["truth"]["frames"][0].__setitem__(1, ["def f(x):"]),  # the action
    lambda d: d["truth"]["frames"][0].__setitem__(0, "jump"),  # the event
    lambda d: d["truth"]["frames"][0].__setitem__(5, {"word": 1}),  # a local that is no repr
    lambda d: d["truth"]["frames"][1].__setitem__(5, 5),  # the locals
    lambda d: d["truth"]["frames"][1].append(7),  # the rest must be an object
    lambda d: d["truth"]["frames"][1].pop(),  # a field short
    # the oracle's frames are the truth's: stored as one run {"same_as": 0, "count": n, "tokens": [...]}
    lambda d: d["branches"][0]["frames"][0].__setitem__("same_as", 10**6),
    lambda d: d["branches"][0]["frames"][0].__setitem__("count", 10**6),
    lambda d: d["branches"][0]["frames"][0].__setitem__("lineno", 7),
    lambda d: d["branches"][0]["frames"][0]["tokens"].pop(),
    lambda d: d["branches"][0]["frames"].insert(1, [None, "x", "7", 0, "f", None, None, {"error": "e"}]),
    lambda d: d.__setitem__("settings", 5),
    lambda d: d.__setitem__("model", 5),
    lambda d: d.__setitem__("branches", "x"),
])
def test_a_damaged_session_file_is_refused_in_one_line(strawberry, tmp_path, damage):
    path = saved_then_damaged(strawberry, tmp_path, damage)
    with pytest.raises(SessionError, match="the session file is damaged"):
        DebugSession.load(str(path))


def test_replayed_generation_runs_as_main_and_refuses_overrides(interpreter):
    path = ROOT / "tests" / "fixtures" / "cwm_cruxeval_generations.jsonl"
    (record,) = [r for r in load_replay(str(path)) if r.id == "sample_4"]
    backend = ReplayBackend(record)
    session = DebugSession(record.program, backend, interpreter=interpreter)
    main = session.run_main()
    first = main.comparison.first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("state", ["s"], True)
    with pytest.raises(SessionError, match="replay"):
        session.override(main, 5, locals={"array": "[]", "s": "''"})


@pytest.mark.parametrize("damage", [
    lambda d: d["branches"][0]["comparison"]["rows"][0].__setitem__(2, 10**6),  # rows that do not fit the frames
    lambda d: d["branches"][0]["comparison"]["rows"][0].__setitem__(3, "so-so"),
    lambda d: d["branches"][0]["comparison"]["model_changed"].__setitem__("9999", ["word"]),
    lambda d: d["branches"][0]["comparison"]["model_changed"].__setitem__("x", ["word"]),
    lambda d: d["branches"][0]["comparison"].__setitem__("model_changed", [["word"]]),
    lambda d: d.__setitem__("truth_changed", [[1]] * len(d["truth"]["frames"])),
    lambda d: d["branches"][0].__setitem__("first_divergence", {"step": 10**6}),
    lambda d: d["branches"][0]["first_divergence"].__setitem__("line", "seven"),  # once a crash in the source pane
    lambda d: d["branches"][0]["frames"].append([None, "x", 7, 0, "f", None, None, {"error": "e"}]),  # a frame no row shows
])
def test_a_saved_comparison_that_does_not_fit_is_compared_again(strawberry, tmp_path, damage):
    # the comparison is derived data: the frames (the user's data) decide, so a stale or damaged
    # comparison is recomputed rather than shown wrong or refusing the file
    def with_a_divergence(data):  # the oracle agrees: give the damage a divergence to work on
        data["branches"][0]["first_divergence"] = data["branches"][0]["first_divergence"] or {
            "step": 0, "kind": "action", "variables": [], "string_valued": False, "regime": "x", "explanation": "x", "line": 1}
        damage(data)

    path = saved_then_damaged(strawberry, tmp_path, with_a_divergence)
    reopened = DebugSession.load(str(path))
    branch = reopened.branches[0]
    fresh = compare(reopened.truth, list(branch.frames), branch.status)
    assert branch.comparison.verdict == fresh.verdict
    assert [(r.kind, r.truth_index, r.model_index) for r in branch.comparison.steps] == \
        [(r.kind, r.truth_index, r.model_index) for r in fresh.steps]


def test_branches_keep_the_rollout_settings_they_ran_with_when_reopened_with_others(strawberry, tmp_path):
    """``cwmtui open S.json --model M --token-budget 4000``: new branches run with 4000, the saved
    ones still say (and the status bar still meters against) the budget they ran with."""
    from cwmtui.ui.branch_view import BranchView, SessionView

    program, truth = strawberry
    session = session_with(strawberry, mistakes={26: wrong_line(LOOP_AGAIN)})
    session.options = replace(session.options, token_budget=9000)
    session.run_main()
    path = tmp_path / "session.json"
    session.save(str(path))

    again = DebugSession.load(str(path), backend=OracleBackend(program, truth.frames))
    again.options = replace(again.options, token_budget=4000, temperature=0.5)  # what open's flags do
    child = again.override_with_truth("main", 26)
    assert again.branches[0].settings["token_budget"] == 9000
    assert child.settings["token_budget"] == 4000 and child.settings["temperature"] == 0.5
    again.save(str(path))

    reopened = DebugSession.load(str(path))
    assert [b.settings["token_budget"] for b in reopened.branches] == [9000, 4000]
    view = SessionView.from_session(reopened)
    main_view, child_view = (BranchView(reopened.truth, reopened.branch_state(b)) for b in reopened.branches)
    assert view.budget_of(main_view) == 9000 and view.decoding_of(main_view) == "greedy · budget 9,000"
    assert view.budget_of(child_view) == 4000 and view.decoding_of(child_view).startswith("T=0.5 ")


def test_branches_of_a_file_without_their_own_settings_take_the_sessions(tmp_path):
    session = DebugSession.load(str(ROOT / "tests" / "fixtures" / "session_v1.json"))
    saved = json.loads((ROOT / "tests" / "fixtures" / "session_v1.json").read_text())["settings"]["rollout"]
    assert saved and all(b.settings == saved for b in session.branches)


@pytest.mark.parametrize("where", ["branch", "session"])
@pytest.mark.parametrize("bad", [{"token_budget": "abc"}, {"token_budget": [1]}, {"temperature": "hot"},
                                 {"top_p": None}, {"seed": True}, {"token_budget": None}])
def test_rollout_settings_that_are_not_numbers_are_a_damaged_file(strawberry, tmp_path, where, bad):
    if where == "branch" and bad == {"token_budget": None}:
        pytest.skip("a branch's limits may be null: a replay has none")
    session = session_with(strawberry)
    session.run_main()
    path = tmp_path / "session.json"
    session.save(str(path))
    data = json.loads(path.read_text())
    target = data["branches"][0]["settings"] if where == "branch" else data["settings"]["rollout"]
    target.update(bad)
    path.write_text(json.dumps(data))
    with pytest.raises(SessionError, match="damaged.*rollout setting"):
        DebugSession.load(str(path))


def test_a_replayed_branch_saves_no_limits_it_never_ran_under(interpreter):
    from cwmtui.model import RolloutOptions
    from cwmtui.ui.branch_view import BranchView, SessionView

    path = ROOT / "tests" / "fixtures" / "cwm_cruxeval_generations.jsonl"
    record = load_replay(str(path))[0]
    backend = ReplayBackend(record)
    session = DebugSession(record.program, backend, RolloutOptions(token_budget=50), interpreter=interpreter)
    main = session.run_main()
    assert main.tokens["trace"] > 50 and main.settings["token_budget"] is None
    view = SessionView.from_session(session)
    assert view.budget_of(BranchView(session.truth, session.branch_state(main))) == 0  # no meter against a budget it never had


def test_one_scoring_of_teacher_forcing_in_the_debugger_diff_and_eval(loop, tmp_path, monkeypatch, capsys):
    """#23: the same teacher-forced rollout (the model cannot write step 4, so the truth's whole
    frame is forced there) gets the same verdict, first divergence and counts from the debugger's
    session, ``cwmtui diff --teacher-force`` and ``cwmtui eval --teacher-force``. Before, the
    session and diff counted the forced frame as a match and said "agree"."""
    import json

    from cwmtui.cli import main
    from cwmtui.interpreter import load_program
    from cwmtui.cli import model_options as backends

    program, _ = loop
    folder = tmp_path / "suite"
    folder.mkdir()
    path = folder / "loop.py"
    path.write_text(program.source)
    program = load_program(str(path))
    from cwmtui.interpreter import Interpreter

    with Interpreter() as interpreter:
        truth = interpreter.trace(program)
    monkeypatch.setattr(backends, "backend_from_args", lambda args: OracleBackend(program, truth.frames, end_at=4))

    session = DebugSession(program, OracleBackend(program, truth.frames, end_at=4), truth=truth)
    debugger = session.teacher_forced().comparison
    first = debugger.first_divergence

    assert main(["diff", str(path), "--teacher-force", "--json"]) == 1
    diffed = json.loads(capsys.readouterr().out)

    results = tmp_path / "results.jsonl"
    main(["eval", str(folder), "--teacher-force", "--out", str(results)])
    capsys.readouterr()
    evaluated = json.loads(results.read_text().splitlines()[0])["teacher_forced"]

    assert (first.step, first.kind) == (4, "format")
    assert (diffed["first_divergence"]["step"], diffed["first_divergence"]["kind"]) == (4, "format")
    assert (evaluated["first_divergence"]["step"], evaluated["first_divergence"]["kind"]) == (4, "format")
    assert diffed["verdict"] == debugger.verdict != "agree"
    assert diffed["agreed_steps"] == debugger.agreed_steps == 4
    assert diffed["forced_steps"] == evaluated["forced_steps"] == [4]


def test_a_line_the_user_typed_is_never_blamed_on_the_model(strawberry):
    """#24: an override with a typed line was reported as the model's own "action
    hallucination". The overridden frame is marked, and the divergence there is the user's."""
    session = session_with(strawberry)
    main = session.run_main()
    branch = session.override(main, 5, action="    pass\n")
    assert branch.intervention.source == "typed" and branch.frames[5].origin == "overridden"
    first = branch.comparison.first_divergence
    assert first.step == 5 and first.kind == "override" and first.regime == "the user's override"
    assert "hallucination" not in first.explanation and "the line is yours" in first.explanation


def test_the_real_frame_forced_at_a_step_grows_a_branch_that_goes_on_from_the_true_state(loop):
    program, truth = loop
    lost = both(wrong_value("acc", "99"), wrong_return("99"))
    session = session_with(loop, mistakes={k: lost for k in range(3, len(truth.frames))})
    main = session.run_main()
    assert main.comparison.first_divergence.step == 3
    branch = session.override_with_frame(main, 3)
    assert branch.name == "main/3" and branch.parent == "main"
    assert branch.intervention.kind == "frame" and branch.intervention.describe() == "the interpreter's whole frame forced at step 3"
    assert branch.frames[3] == replace(truth.frames[3], origin="forced", tokens=branch.frames[3].tokens)
    assert branch.recovery is not None and branch.recovery.recovered_at is None  # the model loses it again
    with pytest.raises(SessionError, match="no step"):
        session.override_with_frame(main, len(truth.frames))


def test_a_rollout_run_elsewhere_is_adopted_as_main_and_compared(loop):
    program, truth = loop
    session = session_with(loop)
    elsewhere = session_with(loop).run_main()
    main = session.adopt(elsewhere.rollout)
    assert session.main is main and main.status == "ended" and main.comparison.agrees
    again = session.adopt(elsewhere.rollout)
    assert [b.name for b in session.branches] == ["main"] and session.main is again
