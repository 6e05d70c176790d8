"""cwmtui eval end to end: a tiny random model, recorded generations, results files that reopen."""

import json

import pytest

from cwmtui.analysis.stats import wilson
from cwmtui.cli import main
from cwmtui.evaluation.suite import load_suite
from cwmtui.interpreter import Interpreter
from cwmtui.trace import render_frames


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import torch

    from .tiny_models import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def programs(tmp_path):
    path = tmp_path / "programs.jsonl"
    lines = [
        {"id": "double", "program": "def f(x):  # << START_OF_TRACE\n    y = x * 2\n    return y\n", "call": "f(4)"},
        {"id": "shout", "code": "def f(s):\n    t = s.upper()\n    return t + '!'", "input": "'hi'"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def run_json(capsys, *argv) -> dict:
    code = main(["eval", *argv, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_tiny_model_run_writes_a_results_file_that_replays_to_the_same_report(capsys, tmp_path, tiny_model, programs):
    results = tmp_path / "results.jsonl"
    report = run_json(capsys, str(programs), "--model", str(tiny_model), "--device", "cpu",
                      "--frame-tokens", "12", "--token-budget", "80", "--out", str(results))
    assert report["suite"] == "programs" and report["count"] == 2
    for key in ("output_accuracy", "trace_exact", "action_exact", "state_exact", "first_divergence_kinds"):
        assert key in report
    assert report["output_accuracy"] == 0.0  # random weights do not trace programs
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["id"] for r in records] == ["double", "shout"]
    for record in records:
        assert record["generation"].startswith("<|call_sep|>")  # the entry call frame, forced from the truth
        assert record["class"] in report["first_divergence_kinds"] and record["step"] >= 1
        assert record["tokens"]["processed"] > 0 and record["timings"]["model_s"] > 0

    # every program reopens in the debugger's replay backend ...
    from cwmtui.model.replay import ReplayBackend
    from cwmtui.model.rollout import Rollout

    backend = ReplayBackend.open(str(results), "shout")
    rollout = Rollout(backend, backend.program, None)
    rollout.run()
    assert rollout.text() == records[1]["generation"]

    # ... and the whole file is scored again, without a model, to the same figures
    again = run_json(capsys, str(results), "--replay", str(results))
    for key in ("output_accuracy", "trace_exact", "action_exact", "state_exact", "first_divergence_kinds", "truncations", "tokens"):
        assert again[key] == report[key], key

    # --report reprints the tables of the file
    assert main(["eval", "--report", str(results)]) == 0
    shown = capsys.readouterr().out
    assert "output accuracy (final value right)" in shown and "first divergence" in shown


def perfect_replay(tmp_path, suite_name, **options):
    """A replay file whose generations are the interpreter's own traces: a perfect model."""
    suite = load_suite(suite_name, **options)
    path = tmp_path / f"{suite_name}-perfect.jsonl"
    with Interpreter() as interpreter, open(path, "w") as out:
        for case in suite.cases:
            trace = interpreter.trace(case.program)
            text = render_frames(trace.frames, end=True)
            record = {"id": case.id, "program": case.program.source, "call": case.program.call, "generation": text,
                      "teacher_forced": {"generation": text, "forced_steps": []}}
            out.write(json.dumps(record) + "\n")
    return path


def test_a_perfect_model_scores_full_marks_on_s5_in_both_conditions(capsys, tmp_path):
    replay = perfect_replay(tmp_path, "s5", n=[8, 16], count=2)
    plot = tmp_path / "s5.png"
    report = run_json(capsys, "s5", "--n", "8", "16", "--count", "2", "--replay", str(replay),
                      "--teacher-force", "--plot", str(plot))
    assert report["count"] == 4
    assert report["output_accuracy"] == report["trace_exact"] == report["state_exact"] == 1.0
    assert report["first_divergence_kinds"] == {}
    two_of_two = wilson(2, 2).to_json()["ci95"]  # every cell with its 95% interval (#25)
    cell = {"count": 2, "output_accuracy": 1.0, "output_accuracy_ci95": two_of_two, "trace_exact": 1.0, "state_exact": 1.0}
    assert report["by_n"] == {"8": {**cell, "teacher_forced": cell}, "16": {**cell, "teacher_forced": cell}}
    assert report["intervals"]["output_accuracy"] == {"value": 1.0, "successes": 4, "n": 4, "ci95": wilson(4, 4).to_json()["ci95"]}
    difference = report["differences"]["teacher_forced - free"]["output_accuracy"]
    assert difference["value"] == 0.0 and difference["ci95"][0] < 0 < difference["ci95"][1]
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_zoo_breakdowns_by_depth_type_and_form(capsys, tmp_path):
    replay = perfect_replay(tmp_path, "zoo", depth=[1, 2], count=1)
    lines = replay.read_text().splitlines()
    # spoil the result of every depth-2 string program
    spoiled = []
    for line in lines:
        record = json.loads(line)
        if record["id"].startswith("zoo-string-d2"):  # the entry's return value (the last one) is wrong
            head, sep, tail = record["generation"].rpartition('<|arg_sep|>"')
            record["generation"] = head + sep + "0" + tail
        spoiled.append(json.dumps(record))
    replay.write_text("\n".join(spoiled) + "\n")
    report = run_json(capsys, "zoo", "--depth", "1", "2", "--count", "1", "--replay", str(replay))
    assert report["count"] == 8 * 2 * 2  # 8 types x 2 depths x nested/flat
    assert report["by_type"]["string"]["2"]["output_accuracy"] == 0.0
    assert report["by_type"]["string"]["1"]["output_accuracy"] == 1.0
    assert report["by_type"]["list"]["2"] == {"count": 2, "output_accuracy": 1.0, "trace_exact": 1.0, "state_exact": 1.0,
                                              "output_accuracy_ci95": wilson(2, 2).to_json()["ci95"],
                                              "by_form": {"flat": 1.0, "nested": 1.0}, "baseline": 1.0}
    assert report["by_depth"]["2"]["output_accuracy"] == pytest.approx(14 / 16)
    assert set(report["by_form"]) == {"nested", "flat"}
    assert report["first_divergence_kinds"] == {"value": 2}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["humaneval", "--replay", "x.jsonl"], "unknown suite 'humaneval'"),
        (["s5", "--concurrency", "0"], "--concurrency must be at least 1"),
        (["s5", "--n", "8", "100000000"], "--n: at most 4096 swaps"),
        (["zoo", "--depth", "100000"], "--depth: at most 64"),
        (["s5", "--count", "100000000"], "--count: at most 10000 programs per cell"),
        (["s5", "--plot", "out.txt"], "give a .png file name"),
        (["--report", "missing.jsonl"], "missing.jsonl: no such file"),
        ([], "name a suite"),
        (["s5", "--n", "0", "--replay", "x.jsonl"], "--n: expected positive whole numbers"),
        (["zoo", "--depth", "1,x"], "--depth: expected whole numbers"),
        (["zoo", "--n", "8"], "--n (numbers of swaps) is for the s5 suite"),
        (["s5", "--depth", "2"], "--depth is for the zoo suite"),
        (["zoo", "--type", "strings", "--replay", "x.jsonl"], "unknown zoo type 'strings'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(["eval", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_concurrency_keeps_several_programs_in_flight_on_a_server(capsys, tmp_path, programs):
    """A vLLM-style server that knows the true trace of every program (a perfect model)."""
    import threading

    from .test_model_server import EOS, FakeServer, script_of

    suite = load_suite(str(programs))
    with Interpreter() as interpreter:
        scripts = [script_of(case.program, interpreter.trace(case.program).frames) for case in suite.cases]

    both_in = threading.Event()

    class Oracle(FakeServer):
        in_flight = peak = 0
        lock = threading.Lock()

        def continuation(self, prompt, stops, max_tokens):
            with self.lock:
                Oracle.in_flight += 1
                Oracle.peak = max(Oracle.peak, Oracle.in_flight)
                if Oracle.in_flight == 2:
                    both_in.set()
            # the first request waits (up to 5 s) for the other worker's: run one after the
            # other, the two never meet
            both_in.wait(5)
            try:
                script = next(s for s in scripts if s[: len(prompt)] == prompt)
                out = []
                for token in script[len(prompt) : len(prompt) + max_tokens]:
                    out.append(token)
                    if token in stops or token == EOS:
                        break
                return out
            finally:
                with self.lock:
                    Oracle.in_flight -= 1

    server = Oracle("vllm")
    try:
        results = tmp_path / "results.jsonl"
        report = run_json(capsys, str(programs), "--server", server.url, "--concurrency", "2", "--out", str(results))
    finally:
        server.close()
    assert report["count"] == 2 and report["output_accuracy"] == 1.0 and report["trace_exact"] == 1.0
    assert Oracle.peak == 2
    assert sorted(json.loads(line)["id"] for line in results.read_text().splitlines()) == ["double", "shout"]


def test_real_cwm_generations_are_scored_and_classed_for_triage(capsys, tmp_path):
    """Five greedy generations of Meta's CWM on CRUXEval (tests/fixtures/README.md)."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "cwm_cruxeval_generations.jsonl"
    results = tmp_path / "results.jsonl"
    report = run_json(capsys, str(fixture), "--replay", str(fixture), "--out", str(results))
    assert report["count"] == 5
    assert report["output_accuracy"] == pytest.approx(3 / 5)  # sample_4 and sample_23 end wrong
    assert report["trace_exact"] == pytest.approx(1 / 5)  # only sample_0 is right all the way
    assert report["first_divergence_kinds"] == {"state": 3, "value": 1}
    assert report["string_valued"]["failures"] == 1.0  # both failures return strings
    triage = {r["id"]: (r["class"], r["string_valued"], r["step"]) for r in map(json.loads, results.read_text().splitlines())}
    assert triage == {
        "sample_0": ("agree", False, None),
        "sample_4": ("state", True, 5),
        "sample_6": ("value", False, 6),
        "sample_19": ("state", True, 16),
        "sample_23": ("state", True, 5),
    }


def test_an_interrupted_run_goes_on_where_it_stopped_to_the_same_report(capsys, tmp_path):
    """#25: --out on an earlier results file of the same configuration runs only the programs
    not done yet (one whose model call failed runs again); the report equals an uninterrupted
    run's; every record and the report say what produced them; another configuration is refused."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "cwm_cruxeval_generations.jsonl"
    whole = tmp_path / "whole.jsonl"
    expected = run_json(capsys, str(fixture), "--replay", str(fixture), "--out", str(whole))
    lines = whole.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    config = records[0]["config"]
    assert all(r["config"] == config for r in records) and expected["config"] == config
    assert (config["format"], config["backend"], config["replay"], config["suite"]) == (1, "replay", str(fixture), "cwm_cruxeval_generations")
    assert {"cwmtui", "date", "decoding", "budgets", "tokenizer", "model", "teacher_force"} <= set(config)

    partial = tmp_path / "partial.jsonl"  # a run stopped after two programs, a third failed
    failed = {**records[2], "status": "error", "error": "the server went away"}
    partial.write_text("\n".join([lines[0], lines[1], json.dumps(failed)]) + "\n")
    again = run_json(capsys, str(fixture), "--replay", str(fixture), "--out", str(partial))
    for key in ("count", "output_accuracy", "trace_exact", "action_exact", "state_exact", "first_divergence_kinds",
                "intervals", "string_valued"):
        assert again[key] == expected[key], key
    done = [json.loads(line) for line in partial.read_text().splitlines()]
    assert sorted(r["id"] for r in done) == sorted(r["id"] for r in records)  # none lost, none twice
    assert all(r.get("status") != "error" for r in done)

    code = main(["eval", str(fixture), "--replay", str(fixture), "--out", str(partial), "--token-budget", "100"])
    err = capsys.readouterr().err
    assert code == 2 and "written by another configuration (budgets:" in err and "Traceback" not in err
    assert partial.read_text().count("\n") == 5  # the file is left as it was


def test_recorded_generations_that_are_empty_or_cut_wrong_are_scored_where_they_go_wrong(capsys, tmp_path):
    """An empty generation diverges at step 0 (no seeded frame is made up for it); a generation
    the budget cut off inside a value that is already wrong diverges there, as that state."""
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "cwm_cruxeval_generations.jsonl"
    sample = next(r for r in map(json.loads, fixture.read_text().splitlines()) if r["id"] == "sample_0")
    generation = sample["generation"]
    at = generation.index("<|line_sep|>", 600)  # model frame 8: output is [(4, 1), (4, 1)]
    lines = [
        {**sample, "id": "empty", "generation": ""},
        {**sample, "id": "cut_right", "generation": generation[:at] + '<|line_sep|>{"nums": "..", "output": "[(4, 1), (4'},
        {**sample, "id": "cut_wrong", "generation": generation[:at] + '<|line_sep|>{"nums": "..", "output": "[(4, 1), (3'},
    ]
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results = tmp_path / "results.jsonl"
    report = run_json(capsys, str(replay), "--replay", str(replay), "--out", str(results))
    triage = {r["id"]: (r["class"], r["step"], r["status"]) for r in map(json.loads, results.read_text().splitlines())}
    assert triage == {"empty": ("budget", 0, "budget"), "cut_right": ("budget", 8, "budget"), "cut_wrong": ("state", 8, "budget")}
    assert report["first_divergence_kinds"] == {"budget": 2, "state": 1}
    assert report["truncations"]["budget"] == 3


class FlakyBackend:
    """Ends every trace at once, except on a program holding ``boom``: there the "server" fails."""

    def __new__(cls):
        from cwmtui.model.backend import Backend, Completion, ModelError
        from cwmtui.model.tokenizer import byte_tokenizer

        class Flaky(Backend):
            name = "flaky server"
            description = "flaky"

            def __init__(self):
                self._tokens = byte_tokenizer()
                self.special_ids = self._tokens.special_ids

            def encode(self, text):
                return self._tokens.encode(text)

            def decode(self, ids):
                return self._tokens.decode(ids)

            def complete(self, prompt_ids, stop_ids, max_new_tokens, temperature=0.0, top_p=1.0, seed=None, cancel=None):
                if "boom" in self.decode(prompt_ids):
                    raise ModelError("http://gpu:8000/v1/completions: the server refused the request (HTTP 400): bad prompt")
                return Completion([self.eos_id], len(prompt_ids), "eos")

        return Flaky()


def test_a_program_the_server_fails_on_is_recorded_and_the_run_goes_on(capsys, tmp_path, monkeypatch):
    from cwmtui.cli import model_options as backend_module

    monkeypatch.setattr(backend_module, "backend_from_args", lambda args, progress=None: FlakyBackend())
    path = tmp_path / "programs.jsonl"
    lines = [
        {"id": "a", "program": "def f(x):  # << START_OF_TRACE\n    return x\n", "call": "f(1)"},
        {"id": "b", "program": "def f(x):  # << START_OF_TRACE\n    boom = x\n    return boom\n", "call": "f(2)"},
        {"id": "c", "program": "def f(x):  # << START_OF_TRACE\n    return x + 1\n", "call": "f(3)"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results = tmp_path / "results.jsonl"
    code = main(["eval", str(path), "--out", str(results), "--json"])
    captured = capsys.readouterr()
    assert code == 1  # the run finished, but not every program could be run
    assert "cwmtui eval: failed b: http://gpu:8000/v1/completions: the server refused the request (HTTP 400): bad prompt" in captured.err
    report = json.loads(captured.out)
    assert report["count"] == 2 and report["model_errors"]["count"] == 1 and report["model_errors"]["ids"] == ["b"]
    records = {r["id"]: r for r in map(json.loads, results.read_text().splitlines())}
    assert set(records) == {"a", "b", "c"}
    assert records["b"]["status"] == "error" and records["b"]["class"] == "model error"
    assert records["b"]["error"].endswith("(HTTP 400): bad prompt")
    # the results file reads back to the same report, the failed program still apart
    assert main(["eval", "--report", str(results), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_errors"]["count"] == 1


def test_a_server_that_fails_every_program_stops_the_run(capsys, tmp_path, monkeypatch):
    from cwmtui.cli import model_options as backend_module

    monkeypatch.setattr(backend_module, "backend_from_args", lambda args, progress=None: FlakyBackend())
    path = tmp_path / "programs.jsonl"
    lines = [{"id": f"p{i}", "program": f"def f(x):  # << START_OF_TRACE\n    boom = x\n    return {i}\n", "call": "f(0)"} for i in range(12)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["eval", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "5 programs in a row failed; stopped" in err


def test_a_run_goes_on_over_other_servers_of_the_same_model_but_not_another_model():
    from cwmtui.evaluation.run_config import difference

    class Replicas:
        model_name = "facebook/cwm"
        name = "vllm · 2 replicas (facebook/cwm)"

    from types import SimpleNamespace

    from cwmtui.evaluation.run_config import run_config
    from cwmtui.model import RolloutOptions

    args = SimpleNamespace(server=["http://a:8000", "http://b:8000"], server_kind="vllm", count=3)
    suite = SimpleNamespace(name="cruxeval")
    first = run_config(args, suite, RolloutOptions(), Replicas())
    assert first["model"] == "facebook/cwm"  # what is served, not how many servers or where
    fewer = run_config(SimpleNamespace(**{**vars(args), "server": ["http://a:8000"]}), suite, RolloutOptions(), Replicas())
    assert difference(first, fewer) is None  # a lost node: the run goes on without it
    other = {**first, "model": "another/model"}
    assert difference(first, other) == "model: 'facebook/cwm' in the file, 'another/model' now"


def test_recovery_runs_with_the_model_replays_from_its_file_and_goes_on_recorded_generations(capsys, tmp_path, tiny_model, programs):
    results = tmp_path / "results.jsonl"
    model = ["--model", str(tiny_model), "--device", "cpu", "--frame-tokens", "12", "--token-budget", "80"]
    report = run_json(capsys, str(programs), *model, "--recovery", "--out", str(results))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert all(r["config"]["recovery"] for r in records)
    for record in records:  # random weights diverge: each program was intervened on, both ways
        recovery = record["recovery"]
        assert recovery["step"] == record["first_divergence"]["step"]
        for condition, kind in (("action", "action"), ("frame", "frame")):
            result = recovery[condition] if "skipped" not in recovery else None
            if result is not None and "skipped" not in result:
                assert result["intervention"]["kind"] == kind and result["generation"].startswith("<|call_sep|>")
                assert isinstance(result["recovered"], bool) and result["summary"]
    assert report["recovery"]["programs"] == 2 and report["recovery"]["diverged"] == 2

    # the file's recorded interventions are scored again without a model, to the same table
    again = run_json(capsys, str(programs), "--replay", str(results), "--recovery")
    assert again["recovery"] == report["recovery"]
    assert main(["eval", "--report", str(results)]) == 0
    assert "recovery at the first divergence" in capsys.readouterr().out

    # recorded generations, interventions on a live model: the free-running figures are the file's
    live = run_json(capsys, str(programs), "--replay", str(results), "--recovery", *model)
    assert live["output_accuracy"] == report["output_accuracy"] and live["recovery"]["diverged"] == 2

    # without --recovery a replay and a model are two world models: refused in one line
    assert main(["eval", str(programs), "--replay", str(results), *model]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "cannot be used together" in error


def test_samples_give_pass_at_k_and_each_samples_first_divergence_and_replay_to_the_same(capsys, tmp_path, tiny_model, programs):
    results = tmp_path / "results.jsonl"
    model = ["--model", str(tiny_model), "--device", "cpu", "--frame-tokens", "12", "--token-budget", "60"]
    assert main(["eval", str(programs), *model, "--samples", "3"]) == 2  # greedy: the same trace 3 times
    assert "needs --temperature above 0" in capsys.readouterr().err
    report = run_json(capsys, str(programs), *model, "--samples", "3", "--temperature", "1.0", "--seed", "7",
                      "--out", str(results))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in records:
        samples = record["samples"]
        assert [s["seed"] for s in samples] == [7, 8, 9]
        assert samples[0]["generation"] == record["generation"]  # sample 0 is the record's own rollout
        assert all(s["generation"].startswith("<|call_sep|>") and "class" in s for s in samples)
        assert len({s["generation"] for s in samples}) > 1  # sampled, not greedy
    assert record["config"]["samples"] == 3 and record["config"]["decoding"]["temperature"] == 1.0
    sampled = report["samples"]
    assert (sampled["programs"], sampled["samples"], list(sampled["pass_at_k"])) == (2, 3, ["1", "2", "3"])
    assert sum(sampled["first_divergence_kinds"].values()) == 6
    # the file's samples are scored again without a model, to the same pass@k
    again = run_json(capsys, str(programs), "--replay", str(results), "--samples", "3", "--seed", "99",
                     "--out", str(tmp_path / "again.jsonl"))
    assert again["samples"] == sampled
    rescored = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text().splitlines()]
    assert [s["seed"] for s in rescored[0]["samples"]] == [7, 8, 9]  # (review: sample 0 took --seed 99)


def test_conditions_run_the_constrained_decoding_beside_the_free_one_and_name_each(capsys, tmp_path, programs, monkeypatch):
    results = tmp_path / "results.jsonl"
    report = run_json(capsys, str(programs), "--conditions", "free,constrained,teacher", "--out", str(results))
    records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in records:  # the bundled model: free-running without the grammar, constrained beside it
        assert record["decoding"] == "free" and "teacher_forced" in record
        assert record["constrained"]["frames"]["format_errors"] == 0
        assert record["constrained"]["generation"].startswith("<|call_sep|>")
        assert record["config"]["decoding"]["constrain"] is False and record["config"]["beside"] == "constrained"
    assert report["decoding"] == "free" and report["constrained"]["valid_format"] == 1.0
    assert "format" not in report["constrained"]["first_divergence_kinds"]
    assert set(report["differences"]) == {"teacher_forced - free", "constrained - free"}
    # the other way round: constrained free-running, the raw model beside it
    flipped = run_json(capsys, str(programs), "--conditions", "constrained,free")
    assert flipped["decoding"] == "constrained" and flipped["valid_format"] == 1.0
    assert flipped["free"]["count"] == 2 and flipped["differences"]["constrained - free"] == report["differences"]["constrained - free"]
    # a results file is rescored with its recorded conditions, to the same figures
    again = run_json(capsys, str(programs), "--replay", str(results), "--conditions", "free,constrained,teacher")
    assert again["constrained"] == report["constrained"] and again["decoding"] == "free"
    # the tables name each condition
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["eval", "--report", str(results)]) == 0
    shown = capsys.readouterr().out
    assert "free-running, unconstrained" in shown and "constrained − unconstrained" in shown


@pytest.mark.parametrize("argv, message", [
    (["--conditions", "free,greedy"], "give some of free, constrained, teacher"),
    (["--conditions", "constrained", "--free"], "drop --free/--constrain"),
])
def test_bad_conditions_are_one_line(capsys, programs, argv, message):
    assert main(["eval", str(programs), *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and error.count("\n") == 0


def test_interventions_on_recorded_generations_decode_as_the_file_was_run(capsys, tmp_path, programs):
    """Review: they took this command's options (the bundled model's default, constrained, and
    an 8,192-token budget) however the file was run."""
    free = tmp_path / "free.jsonl"
    direct = run_json(capsys, str(programs), "--free", "--token-budget", "600", "--recovery", "--out", str(free))
    replayed = tmp_path / "replayed.jsonl"
    assert main(["eval", str(programs), "--replay", str(free), "--recovery", "--model", "bundled", "--json",
                 "--out", str(replayed)]) == 0
    out, err = capsys.readouterr()
    assert "the interventions decode as" in err and "token budget 600" in err and "without the frame grammar" in err
    assert json.loads(out)["recovery"] == direct["recovery"]
    records = [json.loads(line) for line in replayed.read_text().splitlines()]
    assert all(r["config"]["decoding"]["constrain"] is False and r["config"]["budgets"]["token_budget"] == 600 for r in records)


def test_a_file_of_an_earlier_version_goes_on_where_an_option_it_did_not_know_is_left_off():
    from cwmtui.evaluation.run_config import difference

    earlier = {"decoding": {"temperature": 0.0, "seed": 0}, "teacher_force": False}
    assert difference(earlier, {"decoding": {"temperature": 0.0, "seed": 0, "constrain": False},
                                "teacher_force": False, "recovery": False, "samples": None}) is None
    assert "decoding" in difference(earlier, {"decoding": {"temperature": 0.0, "seed": 0, "constrain": True},
                                              "teacher_force": False})
