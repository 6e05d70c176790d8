"""The paper's tables from hand-made results whose answers are known."""

import pytest

from cwmtui.analysis.compare import compare
from cwmtui.analysis.outcome import entry_outcome, same_value
from cwmtui.analysis.report import aggregate
from cwmtui.evaluation.record import condition_summary, result_record
from cwmtui.evaluation.suite import Case
from cwmtui.interpreter import program_from_source
from cwmtui.trace import Event, Frame, RolloutStatus, Status, Trace, TraceStatus

SOURCE = "def f(x):  # << START_OF_TRACE\n    y = x + 1\n    return y\n"
PROGRAM = program_from_source(SOURCE, call="f(1)")


def call(locals_):
    return Frame(Event.CALL, "def f(x):\n", locals_, None, 1, 0, "f")


def line(action, locals_, lineno):
    return Frame(Event.LINE, action, locals_, None, lineno, 0, "f")


def ret(value):
    return Frame(Event.RETURN, "    return y\n", None, value, 3, 0, "f")


def truth_trace(x=1, result="2", string=False):
    y = result
    frames = [
        call({"x": str(x)}),
        line("    y = x + 1\n", {"x": str(x)}, 2),
        line("    return y\n", {"x": str(x), "y": y}, 3),
        ret(y),
    ]
    return Trace(frames, TraceStatus(Status.COMPLETE))


def make(ident, truth, frames, status=RolloutStatus.ENDED, comparison=None, metadata=None, forced=None):
    """A results record; the comparison is the real compare() unless one is given."""
    free = condition_summary(truth, frames, status, "", comparison or compare(truth, frames, status))
    case = Case(ident, PROGRAM, metadata or {})
    teacher = None
    if forced:
        forced_frames, forced_status, text = forced
        teacher = condition_summary(truth, forced_frames, forced_status, text, compare(truth, forced_frames, forced_status))
    return result_record(case, "synthetic", truth, free, teacher_forced=teacher,
                         tokens={"trace": 40, "processed": 60}, timings={"model_s": 0.5, "truth_s": 0.01})


def exact(truth):
    return list(truth.frames)


def wrong_state(truth, value="3"):
    frames = list(truth.frames)
    frames[2] = line("    return y\n", {"x": "1", "y": value}, 3)
    frames[3] = ret(value)
    return frames


def test_outcome_compares_values_as_python_literals():
    assert same_value("(1, 2)", "(1,2)")
    assert same_value("{'a': 1, 'b': 2}", "{'b': 2, 'a': 1}")
    assert same_value("'abc'", '"abc"')
    assert not same_value("'abc'", "'abd'")
    assert not same_value("2", None)
    assert same_value("<object>", "<object>")  # not literals: the texts must be identical
    raised = [call({}), Frame(Event.EXCEPTION, "    1/0\n", None, "ZeroDivisionError", 2, 0, "f"), ret("None")]
    assert entry_outcome(raised).kind == "exception"
    assert entry_outcome(raised[:2]).kind == "none"


def test_exact_trace_counts_everywhere():
    truth = truth_trace()
    record = make("a", truth, exact(truth))
    assert record["output"]["correct"] and record["trace_exact"]
    assert record["class"] == "agree" and record["step"] is None
    assert record["frames"] == {"truth": 4, "model": 4, "format_errors": 0, "action_matches": 4, "state_matches": 4}


def test_rates_over_a_mixed_batch():
    truth = truth_trace()
    records = [
        make("exact", truth, exact(truth)),
        # right actions, a wrong value from step 2 on: 2 of 4 states right, output wrong
        make("state", truth, wrong_state(truth)),
        # the model stopped after two frames (token budget): output missing
        make("budget", truth, exact(truth)[:2], status=RolloutStatus.BUDGET),
        # a correct output although one intermediate state was wrong
        make("lucky", truth, [truth.frames[0], line("    y = x + 1\n", {"x": "7"}, 2), *truth.frames[2:]]),
    ]
    report = aggregate(records)
    assert report["suite"] == "synthetic" and report["count"] == 4
    assert report["output_accuracy"] == pytest.approx(2 / 4)
    assert report["trace_exact"] == pytest.approx(1 / 4)
    assert report["action_exact"] == pytest.approx((4 + 4 + 2 + 4) / 16)
    assert report["state_exact"] == pytest.approx((4 + 2 + 2 + 3) / 16)
    assert report["first_divergence_kinds"] == {"state": 2, "budget": 1}
    assert report["regimes"] == {"state error": 2, "token-budget exhaustion": 1}
    assert report["truncations"] == {"budget": 1, "frame_limit": 0, "max_frames": 0}
    assert report["tokens"]["processed_total"] == 240
    context_full = make("context", truth, exact(truth)[:2], status=RolloutStatus.CONTEXT)
    assert context_full["status"] == "context" and context_full["class"] == "budget"
    assert aggregate(records + [context_full])["truncations"]["budget"] == 2  # the budget regime too
    assert report["timings"]["model_s"] == pytest.approx(2.0)


def test_format_errors_are_not_matches_and_not_valid_format():
    truth = truth_trace()
    broken = Frame(None, "", error="locals are not valid JSON", raw="<|line_sep|>{oops")
    record = make("broken", truth, [truth.frames[0], broken], status=RolloutStatus.ENDED)
    assert record["frames"]["format_errors"] == 1 and record["frames"]["state_matches"] == 1
    assert aggregate([record])["valid_format"] == 0


def test_string_valued_share_among_outputs_and_among_failures():
    ints = truth_trace()
    strings = truth_trace(result="'ab'")
    records = [make(f"int{i}", ints, exact(ints)) for i in range(6)]
    records += [make("int-wrong", ints, wrong_state(ints))]
    records += [make(f"str{i}", strings, exact(strings)) for i in range(1)]
    records += [make(f"str-wrong{i}", strings, wrong_state(strings, "'abc'")) for i in range(2)]
    shares = aggregate(records)["string_valued"]
    assert shares["outputs"] == pytest.approx(3 / 10)  # 3 string outputs in 10
    assert shares["failures"] == pytest.approx(2 / 3)  # 2 of the 3 failures
    assert shares["accuracy_string"] == pytest.approx(1 / 3)
    assert shares["accuracy_other"] == pytest.approx(6 / 7)
    assert records[-1]["string_valued"] is True and records[-1]["step"] == 2 and records[-1]["class"] == "state"


def test_s5_accuracy_by_n_free_running_and_teacher_forced():
    truth = truth_trace()
    records = []
    for n, free_right, forced_right in ((8, 2, 2), (16, 1, 2), (32, 0, 1)):
        for i in range(2):
            frames = exact(truth) if i < free_right else wrong_state(truth)
            forced = (exact(truth) if i < forced_right else wrong_state(truth), RolloutStatus.ENDED, "")
            records.append(make(f"n{n}-{i}", truth, frames, metadata={"n": n}, forced=forced))
    report = aggregate(records)
    by_n = report["by_n"]
    assert list(by_n) == [8, 16, 32]
    assert [by_n[n]["output_accuracy"] for n in by_n] == [1.0, 0.5, 0.0]
    assert [by_n[n]["teacher_forced"]["output_accuracy"] for n in by_n] == [1.0, 1.0, 0.5]
    assert report["teacher_forced"]["output_accuracy"] == pytest.approx(5 / 6)
    assert "by_depth" not in report


def test_zoo_depth_breakdown_with_the_p_to_the_d_baseline():
    truth = truth_trace()
    records = []
    # String: depth 1 right 3 of 4 (p = 0.75); depth 2 right 2 of 4. List: depth 1 all right.
    plan = {("String", 1): 3, ("String", 2): 2, ("List", 1): 4, ("List", 2): 4}
    for (kind, depth), right in plan.items():
        for i in range(4):
            form = "nested" if i % 2 == 0 else "flattened"
            frames = exact(truth) if i < right else wrong_state(truth)
            records.append(make(f"{kind}{depth}-{i}", truth, frames,
                                metadata={"type": kind, "depth": depth, "form": form}))
    report = aggregate(records)
    strings = report["by_type"]["String"]
    assert strings[1]["output_accuracy"] == 0.75 and strings[1]["baseline"] == 0.75
    assert strings[2]["output_accuracy"] == 0.5 and strings[2]["baseline"] == pytest.approx(0.5625)
    assert report["by_type"]["List"][2]["baseline"] == 1.0
    assert report["by_depth"][2]["output_accuracy"] == pytest.approx(6 / 8)
    assert report["by_depth"][2]["baseline"] == pytest.approx((0.5625 + 1.0) / 2)
    # nested: i = 0, 2 ; flattened: i = 1, 3 -> String depth 1 misses i = 3 (flattened)
    assert report["by_form"]["nested"][1]["output_accuracy"] == 1.0
    assert report["by_form"]["flattened"][1]["output_accuracy"] == 0.75


def s5_records():
    truth = truth_trace()
    records = []
    for n, right in ((8, 2), (16, 1), (32, 0)):
        for i in range(2):
            frames = exact(truth) if i < right else wrong_state(truth)
            records.append(make(f"n{n}-{i}", truth, frames, metadata={"n": n}, forced=(exact(truth), RolloutStatus.ENDED, "")))
    return records


def test_terminal_tables_show_the_rates_the_published_figures_and_a_chart():
    from rich.console import Console

    from cwmtui.evaluation.tables import report_renderables

    console = Console(record=True, width=120)
    console.print(report_renderables(aggregate(s5_records())))
    text = console.export_text()
    assert "output accuracy (final value right)" in text and "50.0%" in text  # 3 of 6 right
    assert "S5: output accuracy vs N" in text
    assert "80.0%" in text  # Meta CWM, free-running at N = 16
    assert "S5 output accuracy vs N" in text and "● free-running" in text and "■ teacher-forced" in text


def test_plot_is_a_png(tmp_path):
    from cwmtui.evaluation.figures import save_figure

    path = tmp_path / "s5.png"
    save_figure(aggregate(s5_records()), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_survival_curve_is_the_share_still_agreeing_after_each_step():
    """#25: share of programs whose trace still agrees after step k (hand-computed)."""
    from cwmtui.analysis.report import survival

    views = [
        {"first_divergence": {"step": 0}, "frames": {"truth": 4}},  # wrong from the start
        {"first_divergence": {"step": 2}, "frames": {"truth": 4}},
        {"first_divergence": None, "frames": {"truth": 3}},  # agreed to its end
        {"first_divergence": {"step": 5}, "frames": {"truth": 6}},
    ]
    assert survival(views) == [[0, 0.75], [1, 0.75], [2, 0.5], [3, 0.5], [4, 0.5], [5, 0.25], [6, 0.25]]
    assert survival([]) == []


def test_the_survival_curve_keeps_every_step_where_it_moves_beside_a_long_trace():
    from cwmtui.analysis.report import survival

    views = [{"first_divergence": {"step": s}, "frames": {"truth": 10}} for s in (1, 2, 3, 6)]
    views.append({"first_divergence": None, "frames": {"truth": 630}})  # one long trace, exact
    curve = survival(views)
    assert curve[:8] == [[0, 1.0], [1, 0.8], [2, 0.6], [3, 0.4], [4, 0.4], [5, 0.4], [6, 0.2], [7, 0.2]]
    assert curve[-1] == [630, 0.2] and len(curve) <= 8 + 61
