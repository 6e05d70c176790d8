"""``cwmtui diff`` on replayed generations: exit codes, the table, the --json shape, --save."""

import json

import pytest

from cwmtui.cli import main
from cwmtui.session import DebugSession

from .conftest import ROOT

REAL = str(ROOT / "tests" / "fixtures" / "cwm_cruxeval_generations.jsonl")
SAMPLE_0 = next(json.loads(line) for line in open(REAL) if '"sample_0"' in line)


def run(capsys, *argv):
    code = main(["diff", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def replay_file(tmp_path, generation, name="case"):
    path = tmp_path / f"{name}.jsonl"
    record = {key: SAMPLE_0[key] for key in ("code", "input")}
    path.write_text(json.dumps({"id": name, **record, "generation": generation}) + "\n")
    return str(path)


def test_agreeing_trace_exits_0_with_the_documented_json(capsys):
    code, out, err = run(capsys, "--replay", REAL, "--id", "sample_0", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"] == "agree" and data["first_divergence"] is None
    assert set(data["tokens"]) == {"trace", "processed"} and data["tokens"]["trace"] > 0
    assert len(data["steps"]) == 21
    step = data["steps"][3]
    assert {"step", "kind", "truth", "model", "variables", "changed"} <= set(step)
    assert step["kind"] == "match"
    assert "recovery" not in data


def test_diverging_trace_exits_1_and_names_the_regime(capsys):
    code, out, err = run(capsys, "--replay", REAL, "--id", "sample_4", "--json")
    assert code == 1
    first = json.loads(out)["first_divergence"]
    assert {k: first[k] for k in ("step", "kind", "variables", "string_valued")} == {
        "step": 5,
        "kind": "state",
        "variables": ["s"],
        "string_valued": True,
    }
    assert first["regime"] == "string-valued state"


def test_table_shows_both_timelines_and_the_explanation(capsys):
    code, out, err = run(capsys, "--replay", REAL, "--id", "sample_23")
    assert code == 1
    assert "interpreter" in out and "model" in out
    assert "first divergence: step 5" in out
    assert "string-valued state" in out
    assert "XQuery 2.2" in out and "XQuery 2." in out


def test_model_writing_the_marker_into_the_entry_frame_still_agrees(capsys, tmp_path):
    entry = "<|call_sep|>{}<|action_sep|>def main():  # << START_OF_TRACE\n<|frame_sep|>"
    path = replay_file(tmp_path, entry + SAMPLE_0["generation"])
    code, out, err = run(capsys, "--replay", path, "--json")
    assert code == 0, err
    assert json.loads(out)["verdict"] == "agree"


@pytest.mark.parametrize(
    "cut, kind",
    [
        (lambda g: g[: g.index("<|line_sep|>", 600)], "budget"),  # the recording stops mid-trace
        (lambda g: g[: g.index("<|return_sep|>")] + "<|end_of_text|>", "truncated"),  # EOS too early
        (lambda g: g.replace("<|end_of_text|>", "<|line_sep|>{}<|action_sep|>    return f([1])\n<|frame_sep|>"), "extra"),
        (lambda g: g.replace('{"nums": "..", "output": "[]"}', '{"nums": "..", "output": []}', 1), "format"),
        (lambda g: g.replace('"n": "3"', '"n": "1"', 1), "state"),
    ],
)
def test_each_kind_of_failure_from_a_replay(capsys, tmp_path, cut, kind):
    path = replay_file(tmp_path, cut(SAMPLE_0["generation"]))
    code, out, err = run(capsys, "--replay", path, "--json")
    assert code == 1, err
    assert json.loads(out)["first_divergence"]["kind"] == kind


def test_an_empty_generation_diverges_at_step_0(capsys, tmp_path):
    """The model wrote nothing (real CWM failures on CRUXEval samples 248, 325, 756): no step
    agrees, not the one the harness seeded."""
    path = replay_file(tmp_path, "")
    code, out, err = run(capsys, "--replay", path, "--json")
    assert code == 1, err
    data = json.loads(out)
    assert data["verdict"] == "diverge" and data["agreed_steps"] == 0 and data["tokens"]["trace"] == 0
    assert (data["first_divergence"]["step"], data["first_divergence"]["kind"]) == (0, "budget")
    assert all(step["model"] is None for step in data["steps"])
    code, out, err = run(capsys, "--replay", path)
    assert code == 1 and "Traceback" not in out + err
    assert "first divergence: step 0" in out and "no frame" in " ".join(out.split())


def test_a_cut_frame_already_wrong_is_the_divergence_in_diff_and_in_the_saved_session(capsys, tmp_path):
    """#24: the frame a recording stops in (the budget cut it) is checked as far as it was
    written, in the session diff and the debugger share: a value already wrong there is the
    divergence, not 'every step it did write agreed'; a saved session keeps the cut text."""
    tracer = ROOT / "tests" / "fixtures" / "tracer_generations.jsonl"
    record = next(r for r in map(json.loads, tracer.read_text().splitlines()) if r["id"] == "classify_cut")
    generation = record["generation"]
    cut_at = generation.rindex("<|frame_sep|>") + len("<|frame_sep|>")
    wrong = generation[:cut_at] + '<|line_sep|>{"values": "..", "seen": "{3'
    path = tmp_path / "wrong.jsonl"
    path.write_text(json.dumps({**record, "generation": wrong}) + "\n")
    saved = tmp_path / "s.json"
    code, out, err = run(capsys, "--replay", str(path), "--json", "--save", str(saved))
    assert code == 1, err
    first = json.loads(out)["first_divergence"]
    assert (first["kind"], first["variables"]) == ("state", ["seen"])
    again = DebugSession.load(str(saved))
    again.main.comparison = None
    assert again.compare_branch(again.main).first_divergence.to_json()["kind"] == "state"  # recompared: the same


def test_save_writes_a_session_that_reopens_with_the_same_comparison(capsys, tmp_path):
    saved = tmp_path / "s.json"
    code, out, err = run(capsys, "--replay", REAL, "--id", "sample_19", "--json", "--save", str(saved))
    assert code == 1
    printed = json.loads(out)
    session = DebugSession.load(str(saved))
    assert session.main.comparison.to_json()["steps"] == printed["steps"]
    assert session.main.comparison.first_divergence.to_json() == printed["first_divergence"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--replay", REAL], "pass --id"),
        (["--replay", REAL, "--id", "nope"], "no generation with id 'nope'"),
        (["--replay", REAL, "--id", "sample_4", "--override", "3"], "needs a live model"),
        (["--replay", REAL, "--id", "sample_4", "--teacher-force"], "needs a live model"),
        (["--replay", REAL, "--id", "sample_4", "--override", "x"], "STEP or STEP:LINE"),
        ([], "give a PROGRAM"),
        (["missing.py", "--replay", REAL, "--id", "sample_4"], "no such file"),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_without_a_model_option_it_uses_the_bundled_model_or_says_it_is_missing(capsys, tmp_path):
    from cwmtui.model.opening import bundled_problem

    if bundled_problem() is None:
        pytest.skip("the bundled model is installed here")
    program = tmp_path / "p.py"
    program.write_text("def f(x):  # << START_OF_TRACE\n    return x + 1\n\nf(1)\n")
    code, out, err = run(capsys, str(program))
    assert code == 2
    assert "bundled model is not installed" in err


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from .tiny_models import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden=32, layers=1)


def test_a_live_model_runs_an_override_and_reports_the_recovery(capsys, tmp_path, tiny_model):
    program = tmp_path / "p.py"
    program.write_text("def f(x):  # << START_OF_TRACE\n    y = x + 1\n    return y\n\nf(1)\n")
    common = ["--model", str(tiny_model), "--device", "cpu", "--token-budget", "200", "--frame-tokens", "40"]
    code, out, err = run(capsys, str(program), *common, "--json", "--override", "1")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["model"]["name"] and data["tokens"]["processed"] > 0
    assert data["branch"]["intervention"]["source"] == "truth"
    assert set(data["recovery"]) >= {"at_step", "recovered", "recovered_at", "held_for", "first_divergence"}
    code, out, err = run(capsys, str(program), *common, "--json", "--teacher-force")
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["condition"] == "teacher-forced"
    assert all(s["truth_step"] == s["model_step"] for s in data["steps"] if s["model"] and s["truth"])


EXITS = """import os


def f():  # << START_OF_TRACE
    a = 1
    b = 2
    os._exit(6)
    return a + b


f()
"""


def test_a_model_that_runs_on_past_a_program_that_ended_itself_diverges(capsys, tmp_path, interpreter):
    """#24: a program that calls os._exit after a few lines ended there; the model writing more
    steps past its end is a divergence (it ran on past the end), not "the traces agree", and the
    explanation says how the program ended. A truth cut short by a limit still leaves such steps
    unchecked (not scored)."""
    from cwmtui.interpreter import Limits, program_from_source
    from cwmtui.trace import Event, Frame, render_frames

    program = program_from_source(EXITS, "exits.py")
    truth = interpreter.trace(program)
    assert truth.status.exit_code == 6 and truth.status.whole
    ran_on = [*truth.frames, Frame(Event.LINE, "    return a + b\n", {"a": "1", "b": "2"}, None, 8, 0, "f"),
              Frame(Event.RETURN, "    return a + b\n", None, "3", 8, 0, "f")]
    path = tmp_path / "exits.jsonl"
    path.write_text(json.dumps({"id": "x", "program": EXITS, "generation": render_frames(ran_on, end=True)}) + "\n")
    code, out, err = run(capsys, "--replay", str(path), "--json")
    data = json.loads(out)
    assert code == 1 and data["verdict"] == "diverge", (code, data["verdict"], err)
    first = data["first_divergence"]
    assert first["kind"] == "extra" and first["step"] == len(truth.frames)
    assert "os._exit, exit code 6" in first["explanation"] and "ran on past the end" in first["explanation"]
    # the same model frames against a truth the frame limit cut: past it is unchecked, not wrong
    cut = interpreter.trace(program, Limits(frames=2))
    assert not cut.status.whole
    from cwmtui.analysis.compare import compare
    from cwmtui.trace import RolloutStatus

    assert compare(cut, ran_on, RolloutStatus.ENDED).verdict == "agree"
