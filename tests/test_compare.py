"""Comparison of a rollout with the truth: every way a model can go wrong, classified.

Truths come from the interpreter; model frames come from the truth's CWM text, perturbed the
way a model errs, and parsed back (exactly what a replayed generation is).
"""

import pytest

from cwmtui.analysis.compare import StepKind, compare
from cwmtui.interpreter import load_program, program_from_source
from cwmtui.trace import RolloutStatus, parse_trace, render_frames
from cwmtui.trace.frame import Status, Trace, TraceStatus

from .conftest import GOLDEN

LOOP = """\
def total(xs):  # << START_OF_TRACE
    acc = 0
    for x in xs:
        acc += x
    return acc

total([4, 7, 10])
"""

RAISES = """\
def f(a):  # << START_OF_TRACE
    try:
        a = 1 // a
    except ZeroDivisionError:
        a = -1
    return a

f(0)
"""


@pytest.fixture(scope="module")
def strawberry(interpreter):
    program = load_program(str(GOLDEN / "strawberry.py"), call="f('r')")
    return program, interpreter.trace(program)


@pytest.fixture(scope="module")
def loop(interpreter):
    program = program_from_source(LOOP, "loop.py")
    return program, interpreter.trace(program)


def model_frames(program, text):
    return parse_trace(text, source=program.source).frames


def perturbed(program, truth, old, new, count=1):
    text = render_frames(truth.frames, end=True)
    assert text.count(old) >= count, old
    return model_frames(program, text.replace(old, new, count))


def test_identical_trace_agrees(strawberry):
    program, truth = strawberry
    frames = model_frames(program, render_frames(truth.frames, end=True))
    result = compare(truth, frames, RolloutStatus.ENDED)
    assert result.verdict == "agree"
    assert result.first_divergence is None
    assert all(step.kind is StepKind.MATCH for step in result.steps)
    assert result.alignment == [(i, i) for i in range(len(truth.frames))]


def test_one_wrong_character_in_a_string_is_string_valued_state(strawberry):
    program, truth = strawberry
    frames = perturbed(program, truth, '"word": "\'strawberry\'"}', '"word": "\'strawbery\'"}')
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert result.verdict == "diverge"
    assert first.step == 2  # the state before `num = count_letters(word, c)`
    assert first.kind == "state"
    assert first.variables == ["word"]
    assert first.string_valued
    assert first.regime == "string-valued state"
    row = result.steps[2]
    assert row.kind is StepKind.STATE
    (diff,) = row.variables
    assert (diff.expected, diff.predicted, diff.type_name) == ("'strawberry'", "'strawbery'", "str")
    assert not diff.literal_equal
    assert "word" in first.explanation and "'strawbery'" in first.explanation
    assert "string" in first.explanation
    assert result.agreed_steps == 2


def test_one_wrong_int_is_a_state_error(loop):
    program, truth = loop
    frames = perturbed(program, truth, '"acc": "4"', '"acc": "5"')
    first = compare(truth, frames, RolloutStatus.ENDED).first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("state", ["acc"], False)
    assert first.regime == "state error"
    assert "a state error, not an action hallucination" in first.explanation


def test_wrong_next_line_is_an_action_hallucination_and_paths_resynchronise(strawberry):
    program, truth = strawberry
    # The loop's last test: the model steps into the body again instead of returning.
    frames = perturbed(
        program,
        truth,
        '<|action_sep|>    return n\n<|frame_sep|><|return_sep|>',
        '<|action_sep|>        n += int(c == letter)\n<|frame_sep|><|return_sep|>',
    )
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.regime) == ("action", "action hallucination")
    assert first.step == 26 and first.lineno == 5
    assert result.steps[26].kind is StepKind.ACTION
    assert result.steps[27].kind is StepKind.MATCH  # back on the real path
    assert "meet again" in first.explanation


def test_a_streaming_trace_is_not_re_laid_out_on_its_last_frame(strawberry):
    """#24: while the model streams, a path that parted could 'meet again' on the model's last
    frame alone: the rows were laid out with model-only steps (the truth column said "not on
    the real path") and more rows than the truth has, then laid out again with the next frame.
    A trace still being written confirms a meeting only with RESYNC_CONFIRM steps."""
    program, truth = strawberry
    frames = list(truth.frames)
    extra = frames[4]  # one step of the loop too many, then the real path again
    model = frames[:6] + [extra] + frames[6:]
    for written in range(7, 9):  # the model's last frame is the first real one after the extra step
        streaming = compare(truth, model[:written], RolloutStatus.RUNNING)
        assert len(streaming.steps) == len(truth.frames), written
        assert all(row.truth is not None for row in streaming.steps), written
    final = compare(truth, model, RolloutStatus.ENDED)  # once confirmed, the extra step stands alone
    assert sum(1 for row in final.steps if row.truth is None) == 1


def test_missing_return_is_an_event_divergence_and_the_truth_row_stands_alone(strawberry):
    program, truth = strawberry
    frames = perturbed(program, truth, '<|return_sep|><|action_sep|>    return n\n<|arg_sep|>"3"<|frame_sep|>', "")
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.step, first.regime) == ("event", 27, "action hallucination")
    row = result.steps[27]
    assert (row.truth_index, row.model_index, row.kind) == (27, None, StepKind.ACTION)
    # the caller's next line lines up again, one model step behind
    assert (result.steps[28].truth_index, result.steps[28].model_index) == (28, 27)
    assert result.steps[28].kind is StepKind.MATCH
    assert result.alignment[27:29] == [(27, None), (28, 27)]


def test_wrong_return_value(loop):
    program, truth = loop
    frames = perturbed(program, truth, '<|arg_sep|>"21"', '<|arg_sep|>"20"')
    first = compare(truth, frames, RolloutStatus.ENDED).first_divergence
    assert (first.kind, first.variables, first.string_valued) == ("value", ["return"], False)


def test_malformed_json_is_a_format_error(loop):
    program, truth = loop
    frames = perturbed(program, truth, '{"xs": "..", "acc": "0"}', '{"xs": "..", "acc": "0"')
    result = compare(truth, frames, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.regime, first.step) == ("format", "format error", 2)
    assert result.steps[2].kind is StepKind.FORMAT
    assert "not valid JSON" in first.explanation


def test_end_of_text_too_early(loop):
    program, truth = loop
    text = render_frames(truth.frames[:5], end=True)
    result = compare(truth, model_frames(program, text), RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.step, first.regime) == ("truncated", 5, "early end of trace")
    assert [s.kind for s in result.steps[5:]] == [StepKind.MISSING] * (len(truth.frames) - 5)


def test_budget_exhaustion(loop):
    program, truth = loop
    text = render_frames(truth.frames[:6])
    text += '<|line_sep|>{"xs": "..", "ac'  # cut inside a frame: the budget ran out
    frames = model_frames(program, text)
    assert frames[-1].is_error and len(frames) == 7
    for given in (frames, frames[:6]):  # with or without the frame the budget cut in half
        result = compare(truth, given, RolloutStatus.BUDGET)
        first = result.first_divergence
        assert (first.kind, first.regime, first.step) == ("budget", "token-budget exhaustion", 6)
        assert "budget" in first.explanation
        assert result.steps[6].kind is StepKind.MISSING


@pytest.mark.parametrize(
    "cut, kind, variables",
    [
        ('<|line_sep|>{"xs": "..", "acc": "1', "budget", []),  # the truth's frame so far: acc is 11
        ('<|line_sep|>{"xs": "..", "acc": "12', "state", ["acc"]),  # wrong from the value's second character
        ('<|line_sep|>{"xs": "..", "acc": ".."', "state", ["acc"]),  # "unchanged" (4), but it is 11
        ('<|line_sep|>{"xs": "..", "acc": "11"}<|action_sep|>', "state", ["x"]),  # the locals close without x
        ('<|line_sep|>{"xs": "..", "acc": "11", "x": "..", "y', "state", []),  # a name the truth has not: cut
        ('<|line_sep|>{"xs": "..", "acc": "11", "x": ".."}<|action_sep|>    ret', "action", []),
        ('<|line_sep|>{"xs": "..", "acc": "11", "x": ".."}<|action_sep|>    for', "budget", []),
        ('<|return_sep|><|action_sep|>    return acc\n', "event", []),
        ('<|line_sep|>{"xs": "..", "acc": 11', "format", []),  # not a JSON string
    ],
)
def test_a_frame_the_budget_cut_off_is_checked_as_far_as_it_was_written(loop, cut, kind, variables):
    """A frame cut off by the budget (or the context) is no format error, but the text it got to
    is compared with the truth's frame as the format writes it (".." against the model's own
    last frame): where it already differs, that row is the divergence, not "every step it did
    write agreed"; where it does not, it is budget exhaustion as before."""
    program, truth = loop
    frames = model_frames(program, render_frames(truth.frames[:6]) + cut)
    assert len(frames) == 7 and frames[-1].is_error
    for given, partial in ((frames, ""), (frames[:6], cut)):  # among the frames, or a rollout's partial
        for status in (RolloutStatus.BUDGET, RolloutStatus.CONTEXT):
            result = compare(truth, given, status, partial)
            first = result.first_divergence
            assert (first.step, first.kind, first.variables) == (6, kind, variables)
            assert result.agreed_steps == 6 and result.verdict == "diverge"
            row = result.steps[6]
            if kind == "budget":
                assert row.kind is StepKind.MISSING and row.model is None
                assert "Every step it did write agreed" in first.explanation
            else:
                assert row.kind.value == kind and row.cut and row.model.raw == cut and row.model_index is None
                assert "Every step it did write agreed" not in first.explanation
                assert ("context" if status is RolloutStatus.CONTEXT else "token budget") in first.explanation
            assert [s.kind for s in result.steps[7:]] == [StepKind.MISSING] * (len(truth.frames) - 7)
    assert compare(truth, frames[:6], RolloutStatus.ENDED, cut).first_divergence.kind == "truncated"  # no cut: EOS


def test_a_cut_return_value_that_is_already_wrong_is_a_value_divergence(loop):
    program, truth = loop
    head = render_frames(truth.frames[:10])
    for cut, kind in (('<|return_sep|><|action_sep|>    return acc\n<|arg_sep|>"2', "budget"),
                      ('<|return_sep|><|action_sep|>    return acc\n<|arg_sep|>"22', "value")):
        first = compare(truth, model_frames(program, head)[:10], RolloutStatus.BUDGET, cut).first_divergence
        assert (first.step, first.kind) == (10, kind)
        if kind == "value":
            assert first.variables == ["return"] and "22…" in first.explanation and "21" in first.explanation


def test_a_cut_frame_after_a_frame_forced_whole_reads_its_dots_against_the_forced_frame(loop):
    """Teacher forcing scores a frame forced whole as a format error, but the model went on from
    the truth's frame there: the ".." of the frame the budget then cut off stand for its values."""
    from cwmtui.analysis.recovery import score_forced

    program, truth = loop
    cut = render_frames(truth.frames[:7])[len(render_frames(truth.frames[:6])) :][:40]
    assert cut.endswith('"acc": "11", "x')
    result = score_forced(truth, truth.frames[:6], RolloutStatus.BUDGET, [5], cut)
    assert [s.kind for s in result.steps[5:8]] == [StepKind.FORMAT, StepKind.MISSING, StepKind.MISSING]
    wrong = score_forced(truth, truth.frames[:6], RolloutStatus.BUDGET, [4], cut.replace('"11"', '"12"'))
    assert [s.kind for s in wrong.steps[4:7]] == [StepKind.FORMAT, StepKind.MATCH, StepKind.STATE]
    assert wrong.steps[6].variables[0].name == "acc"


def test_runaway_generation_is_extra(loop):
    program, truth = loop
    text = render_frames(truth.frames + truth.frames[1:4], end=False)
    result = compare(truth, model_frames(program, text), RolloutStatus.MAX_FRAMES)
    first = result.first_divergence
    assert (first.kind, first.regime, first.step) == ("extra", "runaway generation", len(truth.frames))
    assert [s.kind for s in result.steps[len(truth.frames) :]] == [StepKind.EXTRA] * 3


def test_start_of_trace_marker_in_the_entry_action_is_ignored(strawberry):
    program, truth = strawberry
    frames = perturbed(program, truth, "<|action_sep|>def f(c):\n", "<|action_sep|>def f(c): # << START_OF_TRACE\n")
    frames[0].action = "def f(c):  # << START_OF_TRACE\n"  # as a backend might hand it over, unstripped
    assert compare(truth, frames, RolloutStatus.ENDED).verdict == "agree"


def test_same_literal_in_other_text_is_still_a_state_difference_but_marked(interpreter):
    program = program_from_source("def f():  # << START_OF_TRACE\n    s = {'b': 1, 'a': 2}\n    return s\n\nf()\n")
    truth = interpreter.trace(program)
    frames = perturbed(program, truth, "\"s\": \"{'b': 1, 'a': 2}\"", "\"s\": \"{'a': 2, 'b': 1}\"")
    result = compare(truth, frames, RolloutStatus.ENDED)
    (diff,) = result.steps[2].variables
    assert diff.literal_equal and diff.type_name == "dict"
    assert "same Python value" in result.first_divergence.explanation


def test_order_of_locals_alone_is_a_match_but_recorded(loop):
    program, truth = loop
    frames = perturbed(program, truth, '{"xs": "..", "acc": "0"}', '{"acc": "0", "xs": "[4, 7, 10]"}')
    result = compare(truth, frames, RolloutStatus.ENDED)
    assert result.verdict == "agree"
    assert result.steps[2].order_differs


def test_missing_and_extra_names(loop):
    program, truth = loop
    frames = perturbed(program, truth, '{"xs": "..", "acc": "0"}', '{"xs": "..", "total": "0"}')
    row = compare(truth, frames, RolloutStatus.ENDED).steps[2]
    missing, extra = row.variables
    assert (missing.name, missing.predicted, missing.missing) == ("acc", None, True)
    assert (extra.name, extra.expected, extra.extra) == ("total", None, True)


def test_exception_values_score_by_type_name(interpreter):
    program = program_from_source(RAISES, "raises.py")
    truth = interpreter.trace(program)
    text = render_frames(truth.frames, end=True)
    arg = next(f.arg for f in truth.frames if f.arg and "ZeroDivisionError" in f.arg)
    import json

    lenient = text.replace(json.dumps(arg), json.dumps("ZeroDivisionError('integer division or modulo by zero')"))
    assert compare(truth, model_frames(program, lenient), RolloutStatus.ENDED).verdict == "agree"
    wrong = text.replace(json.dumps(arg), json.dumps("ValueError()"))
    first = compare(truth, model_frames(program, wrong), RolloutStatus.ENDED).first_divergence
    assert (first.kind, first.variables) == ("value", ["raise"])


def test_a_running_rollout_is_pending_not_divergent(loop):
    program, truth = loop
    frames = model_frames(program, render_frames(truth.frames[:4]))
    result = compare(truth, frames, RolloutStatus.RUNNING)
    assert result.verdict == "pending" and result.first_divergence is None
    assert result.steps[-1].kind is StepKind.PENDING


def test_steps_past_a_partial_truth_are_unchecked(loop):
    program, truth = loop
    partial = Trace(truth.frames[:5], TraceStatus(Status.LIMIT, "stopped", "frames"))
    result = compare(partial, model_frames(program, render_frames(truth.frames, end=True)), RolloutStatus.ENDED)
    assert result.verdict == "agree"
    assert result.steps[-1].kind is StepKind.UNCHECKED


def test_changed_names_are_the_truths_new_values(loop):
    program, truth = loop
    frames = model_frames(program, render_frames(truth.frames, end=True))
    steps = compare(truth, frames, RolloutStatus.ENDED).steps
    assert steps[2].changed == {"acc"}
    assert steps[3].changed == {"x"}
    assert steps[0].changed == set()


def test_json_has_the_documented_shape(strawberry):
    program, truth = strawberry
    frames = perturbed(program, truth, '"word": "\'strawberry\'"}', '"word": "\'strawbery\'"}')
    data = compare(truth, frames, RolloutStatus.ENDED).to_json()
    assert data["verdict"] == "diverge"
    assert set(data["first_divergence"]) >= {"step", "kind", "variables", "string_valued"}
    step = data["steps"][2]
    assert step["kind"] == "state" and step["variables"][0]["type"] == "str"
    assert step["truth"]["locals"]["word"] == "'strawberry'"


def test_an_extra_loop_iteration_shows_on_the_model_side_then_lines_up(loop):
    program, truth = loop
    frames = model_frames(program, render_frames(truth.frames, end=True))
    # the model runs the loop body once more: `acc += x` and `for x in xs:` again before returning
    assert truth.frames[9].action == "    return acc\n"
    extra = frames[:9] + frames[7:9] + frames[9:]
    result = compare(truth, extra, RolloutStatus.ENDED)
    first = result.first_divergence
    assert (first.kind, first.step) == ("action", 9)
    assert result.alignment[9:12] == [(None, 9), (None, 10), (9, 11)]
    shown_truth = [t for t, _ in result.alignment if t is not None]
    shown_model = [m for _, m in result.alignment if m is not None]
    assert shown_truth == list(range(len(truth.frames)))  # every step of each path, once, in order
    assert shown_model == list(range(len(extra)))
    assert result.steps[-1].kind is StepKind.MATCH and result.steps[-1].model_index == len(extra) - 1


def test_a_drifting_path_keeps_both_timelines_in_order(loop, interpreter):
    program = program_from_source(LOOP.replace("[4, 7, 10]", "list(range(40))"), "long.py")
    truth = interpreter.trace(program)
    frames = model_frames(program, render_frames(truth.frames, end=True))
    drifting = frames[:5] + [f for i, f in enumerate(frames[5:]) if i % 5 != 0]
    result = compare(truth, drifting, RolloutStatus.ENDED)
    assert [t for t, _ in result.alignment if t is not None] == list(range(len(truth.frames)))
    assert [m for _, m in result.alignment if m is not None] == list(range(len(drifting)))
    # each dropped frame is a truth-only row; everything else pairs up again
    assert len(result.alignment) == len(truth.frames)


def test_model_values_with_bad_escapes_print_no_warning():
    # a TUI's stderr is the screen: model text like '\d' is data, not a warning printed there
    import subprocess
    import sys

    code = ("from cwmtui.analysis.values import literal\n"
            "assert literal(r\"'\\d+'\") == '\\\\d+'\n"
            "assert literal('x is 1') is literal(\"'a'('b')\")\n")
    run = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""


def test_the_collector_pause_is_thread_safe():
    # the UI thread and worker threads compare at once: overlapping pauses must not leave the
    # cyclic garbage collector off for good
    import gc
    import sys
    import threading

    from cwmtui.trace.collector import collector_paused

    def work():
        for _ in range(100_000):
            with collector_paused():
                _ = [1]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert gc.isenabled()


def test_a_rollout_status_has_one_name_and_compare_takes_only_it():
    """#23: the end status is one enum in trace/ (compare took fifteen string spellings); the
    spellings of earlier files are read in one place, anything else is refused."""
    from cwmtui.analysis.compare import compare
    from cwmtui.model import RolloutStatus as FromModel
    from cwmtui.trace import Trace, TraceStatus, Status

    assert FromModel is RolloutStatus  # one type, wherever it is imported from
    truth = Trace([], TraceStatus(Status.COMPLETE))
    with pytest.raises(TypeError, match="RolloutStatus"):
        compare(truth, [], "budget exhausted")
    assert compare(truth, [], RolloutStatus.BUDGET).status is RolloutStatus.BUDGET
    for saved, status in (("budget", RolloutStatus.BUDGET), ("budget exhausted", RolloutStatus.BUDGET),
                          ("BUDGET", RolloutStatus.BUDGET), ("frame too long", RolloutStatus.FRAME_LIMIT),
                          ("too long", RolloutStatus.MAX_FRAMES), (None, RolloutStatus.ENDED)):
        assert RolloutStatus.read(saved) is status
    with pytest.raises(ValueError):
        RolloutStatus.read("exploded")
    assert RolloutStatus.BUDGET == "budget" and RolloutStatus.BUDGET.label == "budget exhausted"


def test_a_full_context_is_its_own_status_and_scored_as_budget_exhaustion(loop):
    """The model's context being full is not the token budget running out (a larger
    --token-budget does not help), but it ends the trace the same way: one property says so."""
    program, truth = loop
    assert RolloutStatus.read("context") is RolloutStatus.CONTEXT  # a saved file reads back
    assert RolloutStatus.read("context full") is RolloutStatus.CONTEXT
    assert RolloutStatus.CONTEXT == "context" and RolloutStatus.CONTEXT.label == "context full"
    assert [s for s in RolloutStatus if s.out_of_tokens] == [RolloutStatus.BUDGET, RolloutStatus.CONTEXT]
    frames = model_frames(program, render_frames(truth.frames[:6]) + '<|line_sep|>{"xs": "..", "ac')
    result = compare(truth, frames, RolloutStatus.CONTEXT)
    first = result.first_divergence
    assert (first.kind, first.regime, first.step) == ("budget", "token-budget exhaustion", 6)
    assert result.status is RolloutStatus.CONTEXT and result.steps[6].kind is StepKind.MISSING
    assert "context" in first.explanation and "--token-budget" not in first.explanation
