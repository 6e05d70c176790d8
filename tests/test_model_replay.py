"""Replay: recorded generations open as rollouts whose frames are exactly the recorded ones, in
both start conventions, with or without the prompt in front; overrides say they need a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cwmtui.interpreter import cruxeval_program
from cwmtui.model import (
    REPLAY_OVERRIDE,
    ModelError,
    ReplayBackend,
    Rollout,
    RolloutOptions,
    RolloutStatus,
    load_replay,
    open_backend,
    replay_rollout,
)
from cwmtui.trace import parse_trace, render_frames, tokens

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TRACER = str(FIXTURES / "tracer_generations.jsonl")
REAL = str(FIXTURES / "cwm_cruxeval_generations.jsonl")
SEED = tokens.CALL_SEP + "{}" + tokens.ACTION_SEP + "def main():\n" + tokens.FRAME_SEP


def replay(path: str, record_id: str, options: RolloutOptions | None = None) -> Rollout:
    backend = ReplayBackend.open(path, record_id)
    rollout = Rollout(backend, backend.program, None, options)
    rollout.run()
    return rollout


def records(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as handle:
        return {r["id"]: r for r in map(json.loads, handle)}


def test_a_dump_that_starts_after_the_seeded_entry_frame(interpreter):
    record = records(TRACER)["banana_seeded"]
    assert not record["generation"].startswith(tokens.CALL_SEP)
    rollout = replay(TRACER, "banana_seeded")
    truth = interpreter.trace(cruxeval_program(record["code"], record["input"]))
    assert rollout.frames == truth.frames and rollout.status is RolloutStatus.ENDED
    assert [f.origin for f in rollout.frames[:2]] == ["forced", "generated"]
    assert rollout.text() == SEED + record["generation"]


def test_a_dump_that_starts_with_the_entry_frame(interpreter):
    record = records(TRACER)["banana_entry"]
    rollout = replay(TRACER, "banana_entry")
    truth = interpreter.trace(cruxeval_program(record["code"], record["input"]))
    assert rollout.frames == truth.frames
    assert {f.origin for f in rollout.frames} == {"generated"}
    assert rollout.text() == record["generation"]


def test_a_program_record_and_a_record_with_the_prompt_in_front(interpreter):
    by_program = replay(TRACER, "classify_entry")
    by_prompt = replay(TRACER, "classify_prompt")
    truth = interpreter.trace(by_program.program)
    assert by_program.frames == truth.frames == by_prompt.frames
    assert by_prompt.program.source == by_program.program.source
    assert any(f.event.value == "exception" for f in truth.frames)


def test_a_cut_generation_is_budget_exhaustion_with_the_partial_frame_kept():
    rollout = replay(TRACER, "classify_cut")
    full = replay(TRACER, "classify_entry")
    assert rollout.status is RolloutStatus.BUDGET and "budget exhausted" in rollout.message
    assert rollout.frames == full.frames[:7]
    assert len(rollout.partial) == 25 and rollout.partial.startswith(tokens.LINE_SEP)


def test_a_cut_generation_already_wrong_in_its_cut_frame_diverges_there(interpreter, tmp_path):
    """The frame the recording stops in is compared as far as it goes (the comparison ``diff``,
    ``eval`` and the debugger share): cut inside a value that is already wrong, the divergence is
    that state, at that step, not budget exhaustion after agreeing steps."""
    from cwmtui.analysis.compare import compare

    cut = replay(TRACER, "classify_cut")
    truth = interpreter.trace(cut.program)
    first = compare(truth, cut.frames, cut.status, cut.partial).first_divergence
    assert (first.step, first.kind) == (7, "budget")  # the cut text is the truth's so far
    record = records(TRACER)["classify_cut"]
    path = tmp_path / "wrong.jsonl"
    wrong = record["generation"][: -len(cut.partial)] + '<|line_sep|>{"values": "..", "seen": "{3'
    path.write_text(json.dumps({**record, "generation": wrong}) + "\n")
    rollout = replay(str(path), "classify_cut")
    assert rollout.status is RolloutStatus.BUDGET and rollout.frames == cut.frames
    first = compare(truth, rollout.frames, rollout.status, rollout.partial).first_divergence
    assert (first.step, first.kind, first.variables, first.regime) == (7, "state", ["seen"], "state error")
    assert "{3…" in first.explanation and "{2}" in first.explanation


def test_an_empty_generation_is_no_frame_not_a_seeded_entry_that_agrees(interpreter, tmp_path):
    """An empty generation (real CWM failures: CRUXEval samples 248, 325, 756) is the model
    writing nothing: no seeded entry frame is made up for it, so it diverges at step 0."""
    from cwmtui.analysis.compare import compare

    record = records(REAL)["sample_0"]
    path = tmp_path / "empty.jsonl"
    path.write_text(json.dumps({**record, "id": "empty", "generation": ""}) + "\n")
    assert not load_replay(str(path))[0].seeded
    rollout = replay(str(path), "empty")
    assert rollout.frames == [] and rollout.status is RolloutStatus.BUDGET and rollout.text() == ""
    assert "empty" in rollout.message
    program = cruxeval_program(record["code"], record["input"])
    prompt_only = "".join([tokens.BEGIN_OF_TEXT, tokens.TRACE_CONTEXT_START, program.source, tokens.FRAME_SEP])
    truth = interpreter.trace(program)
    for model in (rollout, replay_rollout(program, ""), replay_rollout(program, prompt_only)):
        assert model.frames == []
        result = compare(truth, model.frames, model.status, model.partial)
        assert result.verdict == "diverge" and result.agreed_steps == 0
        first = result.first_divergence
        assert (first.step, first.kind) == (0, "budget")
        assert "no frame" in first.explanation and "agreed" not in first.explanation


@pytest.mark.parametrize("record_id", list(records(REAL)))
def test_real_cwm_generations_replay_frame_for_frame(record_id):
    record = records(REAL)[record_id]
    program = cruxeval_program(record["code"], record["input"])
    rollout = replay(REAL, record_id)
    expected = parse_trace(SEED + record["generation"], program.source)
    assert rollout.frames == expected.frames and rollout.status is RolloutStatus.ENDED
    assert rollout.text() == SEED + record["generation"]
    assert rollout.frames[-1].arg == json.loads(json.dumps(rollout.frames[-1].arg))


def test_the_real_generation_that_is_right_matches_the_interpreter(interpreter):
    record = records(REAL)["sample_0"]
    truth = interpreter.trace(cruxeval_program(record["code"], record["input"]))
    assert replay(REAL, "sample_0").frames == truth.frames


def test_replay_ignores_live_limits():
    rollout = replay(TRACER, "banana_entry", RolloutOptions(token_budget=10, frame_tokens=5, max_frames=2))
    assert rollout.status is RolloutStatus.ENDED and len(rollout.frames) > 2


def test_frame_tokens_count_bytes_without_a_tokenizer():
    rollout = replay(TRACER, "banana_entry")
    first = rollout.frames[0]
    text = render_frames([first])
    assert first.tokens == len(text.encode()) - sum(len(t) - 1 for t in tokens.SPECIAL_TOKENS for _ in range(text.count(t)))
    assert "byte counts" in rollout.backend.description


def test_overrides_on_a_replay_say_they_need_a_live_model():
    rollout = replay(TRACER, "banana_entry")
    frames = list(rollout.frames)
    rollout.rewind(3)
    with pytest.raises(ModelError) as caught:
        rollout.step(force_action="    count = 1\n")
    assert str(caught.value) == REPLAY_OVERRIDE
    with pytest.raises(ModelError, match="overrides need a live model"):
        rollout.force(frames[3])
    assert rollout.run() is RolloutStatus.ENDED and rollout.frames == frames  # navigation still works


def test_replay_rollout_takes_text_in_either_convention(interpreter):
    record = records(TRACER)["banana_seeded"]
    program = cruxeval_program(record["code"], record["input"])
    truth = interpreter.trace(program)
    assert replay_rollout(program, record["generation"]).frames == truth.frames
    whole = "".join([tokens.BEGIN_OF_TEXT, tokens.TRACE_CONTEXT_START, program.source, tokens.FRAME_SEP])
    assert replay_rollout(program, whole + render_frames(truth.frames, end=True)).frames == truth.frames


def test_replay_of_another_program_is_refused():
    backend = ReplayBackend.open(TRACER, "banana_entry")
    other = cruxeval_program("def f(x):\n    return x", "1")
    with pytest.raises(ModelError, match="recorded for another program"):
        Rollout(backend, other, None).run()


# -- the file and the options ----------------------------------------------------------------


def test_open_backend_picks_a_record_by_id():
    backend = open_backend(replay=TRACER, replay_id="classify_entry")
    assert not backend.can_generate and backend.record.id == "classify_entry"
    assert backend.name.endswith("#classify_entry")
    assert len(load_replay(TRACER)) == 5


def test_several_records_need_an_id():
    with pytest.raises(ModelError, match=r"holds 5 generations: pass --id ID \(e\.g\. banana_seeded, banana_entry, classify_entry, \.\.\.\)"):
        open_backend(replay=TRACER)


def test_an_unknown_id_lists_some():
    with pytest.raises(ModelError, match=r"no generation with id 'nope' \(ids: banana_seeded, .*\)"):
        open_backend(replay=TRACER, replay_id="nope")


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"id": 1, "code": "def f(x):\\n    return x", "input": "1"}\n', r":1: no 'generation' text"),
        ('{"id": 1, "generation": "<|call_sep|>"}\n', r":1: no program: needs 'program', or 'code' and 'input'"),
        ('{"id": 1, "program": "def f(:\\n", "generation": ""}\n', r":1: <replay 1>: syntax error on line 1"),
        ('\n{"id": 1,\n', r":2: not valid JSON"),
        ("[1, 2]\n", r":1: not a JSON object"),
        ("\n\n", r"holds no generations"),
    ],
)
def test_bad_replay_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "dump.jsonl"
    path.write_text(content)
    with pytest.raises(ModelError, match=message) as caught:
        open_backend(replay=str(path), replay_id="1")
    assert "\n" not in str(caught.value)


def test_a_missing_replay_file(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        open_backend(replay=str(tmp_path / "none.jsonl"))


def test_a_tokenizer_gives_token_counts(tmp_path):
    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    build_byte_tokenizer().save_pretrained(tmp_path)
    backend = open_backend(replay=TRACER, replay_id="banana_entry", tokenizer=str(tmp_path))
    assert f"tokens of {tmp_path}" in backend.description
    rollout = Rollout(backend, backend.program, None)
    rollout.run()
    assert rollout.frames == replay(TRACER, "banana_entry").frames


def test_an_override_on_a_finished_replay_also_says_so():
    rollout = replay(TRACER, "banana_entry")
    with pytest.raises(ModelError, match="overrides need a live model"):
        rollout.step(force_event="line")


class _CountingIds(list):
    """The recording's ids, counting how many of them a replay reads (a slice counts its length)."""

    read = 0

    def __getitem__(self, key):
        got = super().__getitem__(key)
        _CountingIds.read += len(got) if isinstance(key, slice) else 1
        return got


def test_a_long_replay_reads_each_recorded_token_a_few_times_not_once_per_frame(interpreter):
    """Parsing a replay is linear: a rollout lends its prompt without copying it, and the replay
    checks and serves only what is new (#22: 5k / 10k / 20k frames took 12.6 / 49.8 / 234 s)."""
    from cwmtui.interpreter import program_from_source
    from cwmtui.session import DebugSession

    source = "def f(n):  # << START_OF_TRACE\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
    program = program_from_source(source, "<loop>", call="f(1500)")
    truth = interpreter.trace(program)
    generation = render_frames(truth.frames, end=True)
    backend = ReplayBackend(load_replay_text(program, generation))
    backend._ids = _CountingIds(backend._ids)
    lent = set()
    complete = backend.complete

    def watched(prompt_ids, *args, **kwargs):
        lent.add(id(prompt_ids))
        return complete(prompt_ids, *args, **kwargs)

    backend.complete = watched
    _CountingIds.read = 0
    streamed = []
    session = DebugSession(program, backend, truth=truth)
    branch = session.run_main(on_frame=lambda branch, index, frame: streamed.append(id(branch.frames)))
    assert branch.frames == truth.frames and len(truth.frames) > 3000
    assert _CountingIds.read < 4 * len(backend._ids)  # before: the rest of the recording, every frame
    assert len(lent) == 1  # one list, lent each call (before: a copy of the whole prompt per frame)
    assert len(set(streamed[1:])) == 1  # the branch's frames grow in place (before: copied per frame)


def load_replay_text(program, generation):
    from cwmtui.model.replay import ReplayRecord

    return ReplayRecord("long", program, generation, not generation.startswith(tokens.CALL_SEP))
