"""The rollout engine on a tiny random transformers model the tests build (CPU, a few seconds).

A random model writes garbage, which is what the format-error tests want. Tests that need a
model with structure use ScriptedBackend: the same backend, but each token comes from a script
(the real model still runs every token through its cache).
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")

from cwmtui.interpreter import program_from_source  # noqa: E402
from cwmtui.model import Rollout, RolloutOptions, RolloutStatus  # noqa: E402
from cwmtui.model.hf import TransformersBackend  # noqa: E402
from cwmtui.trace import Event, render_frames, split_text, tokens  # noqa: E402
from cwmtui.trace.render import frames_segments, prompt_segments  # noqa: E402

from .tiny_models import ScriptedBackend, build_tiny_model, script_for  # noqa: E402

SOURCE = '''def f(n):  # << START_OF_TRACE
    s = 0
    for i in range(n):
        s += i
    return s
'''


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="module")
def backend(model_dir):
    """transformers' forward and DynamicCache (the path of CWM and of any model on a GPU)."""
    with TransformersBackend(str(model_dir), lean=False) as opened:
        yield opened


@pytest.fixture(scope="module")
def lean(model_dir):
    """The lean decoder a small Llama on CPU gets by default (the bundled model)."""
    with TransformersBackend(str(model_dir)) as opened:
        assert opened.description.endswith("lean decoder")
        yield opened


@pytest.fixture(params=["transformers", "lean"])
def either(request, backend, lean):
    return backend if request.param == "transformers" else lean


@pytest.fixture(scope="module")
def scripted(model_dir):
    with ScriptedBackend(str(model_dir), lean=False) as opened:
        yield opened


@pytest.fixture(scope="module")
def program():
    return program_from_source(SOURCE, "<f>", call="f(2)")


@pytest.fixture(scope="module")
def truth(interpreter, program):
    trace = interpreter.trace(program)
    assert trace.status.ok
    return trace


def use_script(scripted, program, frames, end=True):
    scripted.script = script_for(scripted, program, frames_segments(frames, end=end))
    scripted.reset()
    return scripted


# -- loading and tokens ----------------------------------------------------------------------


def test_model_loads_offline_with_progress_and_cwm_special_ids(model_dir):
    stages = []
    with TransformersBackend(str(model_dir), device="cpu", progress=lambda stage, f: stages.append((stage, f))) as b:
        assert b.special_ids[tokens.FRAME_SEP] == 260
        assert b.special_ids[tokens.BEGIN_OF_TEXT] == 259
        assert b.special_ids[tokens.END_OF_TEXT] == 1
        assert "cpu" in b.description and "fp32" in b.description
        assert b.can_generate
    names = [s for s, _ in stages]
    assert names[0] == "loading tokenizer" and names[-1] == "ready"
    assert any(s == "loading weights" and f == 1.0 for s, f in stages)


def test_a_literal_special_token_in_text_stays_text(backend):
    ids = backend.encode("x = '<|frame_sep|>'")
    assert backend.special_ids[tokens.FRAME_SEP] not in ids
    assert backend.segments(ids) == ["x = '<|frame_sep|>'"]
    assert backend.token_pieces("é<|") == ["é", "<", "|"]


# -- prefix reuse ----------------------------------------------------------------------------


def test_a_prompt_extending_the_last_one_processes_only_its_new_tokens(either):
    backend = either
    backend.reset()
    prompt = backend.encode("def f(x):\n    return x\n")
    first = backend.complete(prompt, [], 5)
    assert (first.processed, len(first.ids), first.stopped, first.fed_back) == (len(prompt), 5, "length", 4)
    longer = prompt + first.ids + backend.encode("abc")
    second = backend.complete(longer, [], 3)
    assert second.processed == 1 + 3  # the last generated token (never fed yet) and "abc"
    again = backend.complete(longer, [], 3)
    assert again.processed == 1 and again.ids == second.ids


def test_a_shorter_prompt_crops_the_cache_to_the_common_prefix(either, model_dir):
    backend = either
    backend.reset()
    prompt = backend.encode("for i in range(10):\n    print(i)\n")
    backend.complete(prompt, [], 8)
    rewound = prompt[:-10] + backend.encode("pass\n")
    reused = backend.complete(rewound, [], 6)
    assert reused.processed == len(backend.encode("pass\n"))
    assert backend.cached_tokens == len(rewound) + 5
    same_path = None if backend.description.endswith("lean decoder") else False
    with TransformersBackend(str(model_dir), lean=same_path) as fresh:
        assert fresh.complete(rewound, [], 6).ids == reused.ids


def test_whole_rollout_runs_each_token_through_the_model_once(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    assert rollout.run() is RolloutStatus.ENDED
    assert rollout.frames == truth.frames
    assert rollout.tokens_processed == len(rollout.ids)  # prompt + frames, no token twice
    assert rollout.calls == len(truth.frames)  # one call per generated frame, one for the end


def test_rewind_regenerates_from_the_cache_without_running_the_prefix_again(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    rollout.run()
    text, frames = rollout.text(), list(rollout.frames)
    k = 4
    suffix = sum(f.tokens for f in frames[k:])
    before = rollout.tokens_processed
    rollout.rewind(k)
    assert rollout.frames == frames[:k] and rollout.status is RolloutStatus.RUNNING
    assert rollout.tokens_used == sum(f.tokens for f in frames[:k])
    rollout.run()
    assert rollout.frames == frames and rollout.text() == text
    assert rollout.tokens_processed - before <= suffix + 1  # the suffix, not the prefix


def test_the_lean_decoder_path_rolls_out_and_rewinds_the_same(model_dir, program, truth):
    with ScriptedBackend(str(model_dir)) as scripted_lean:
        assert scripted_lean.description.endswith("lean decoder")
        use_script(scripted_lean, program, truth.frames)
        rollout = Rollout(scripted_lean, program, truth.frames[0])
        assert rollout.run() is RolloutStatus.ENDED and rollout.frames == truth.frames
        assert rollout.tokens_processed == len(rollout.ids)
        before = rollout.tokens_processed
        rollout.rewind(3)
        rollout.run()
        assert rollout.frames == truth.frames
        assert rollout.tokens_processed - before <= sum(f.tokens for f in rollout.frames[3:]) + 1


# -- what the rollout records ----------------------------------------------------------------


def test_frames_record_tokens_and_origin_and_the_text_is_the_trace(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    seen = []
    rollout.run(on_frame=seen.append)
    assert [f.origin for f in rollout.frames] == ["forced"] + ["generated"] * (len(truth.frames) - 1)
    assert seen == rollout.frames[1:]
    assert rollout.text() == render_frames(truth.frames, end=True)
    assert rollout.document().startswith(tokens.BEGIN_OF_TEXT + tokens.TRACE_CONTEXT_START + SOURCE)
    assert sum(f.tokens for f in rollout.frames) == rollout.tokens_used == len(rollout.ids) - rollout.prompt_tokens
    two = scripted.encode_segments(split_text(render_frames(truth.frames[:2])))
    assert rollout.frames[0].tokens + rollout.frames[1].tokens == len(two)
    assert rollout.message == "the model ended the trace"


def test_forced_action_replaces_the_line_the_model_would_write(scripted, program, truth):
    k = 3  # a LINE frame: "        s += i\n"
    assert truth.frames[k].event is Event.LINE
    wrong = truth.frames[k].action.replace("range", "RANGE")
    believed = list(truth.frames)
    believed[k] = replace(truth.frames[k], action=wrong, lineno=None)
    use_script(scripted, program, believed)
    free = Rollout(scripted, program, truth.frames[0])
    free.run(until=k + 1)
    assert free.frames[k].action == wrong
    scripted.reset()
    forced = Rollout(scripted, program, truth.frames[0])
    forced.run(until=k)
    frame = forced.step(force_action=truth.frames[k].action)
    assert frame == truth.frames[k] and frame.origin == "overridden"  # the line given, the event and state the model's
    forced.run()
    assert forced.frames == truth.frames and forced.status is RolloutStatus.ENDED


def test_forced_action_on_a_return_frame_lets_the_model_write_the_value(scripted, program, truth):
    k = next(i for i, f in enumerate(truth.frames) if f.event is Event.RETURN)
    believed = list(truth.frames)
    believed[k] = replace(truth.frames[k], action=truth.frames[k].action.upper(), lineno=None)
    use_script(scripted, program, believed)
    rollout = Rollout(scripted, program, truth.frames[0])
    rollout.run(until=k)
    frame = rollout.step(force_action=truth.frames[k].action)
    assert frame.event is Event.RETURN and frame.arg == truth.frames[k].arg
    assert frame == truth.frames[k]


def test_forced_event_then_the_model_continues(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    frame = rollout.step(force_event=Event.LINE)
    assert frame == truth.frames[1]


def test_a_forced_frame_keeps_its_origin_and_the_model_continues_after_it(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    rollout.run(until=3)
    rollout.force(truth.frames[3], origin="edited")
    assert rollout.frames[3].origin == "edited" and rollout.frames[3].tokens > 0
    rollout.run()
    assert rollout.frames == truth.frames


def test_entry_frame_none_lets_the_model_write_the_entry_call(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, None)
    rollout.run()
    assert rollout.frames == truth.frames and rollout.frames[0].origin == "generated"


# -- limits and format errors ----------------------------------------------------------------


def test_token_budget_exhaustion_stops_between_frames(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0], RolloutOptions(token_budget=120))
    assert rollout.run() is RolloutStatus.BUDGET
    assert rollout.status.label == "budget exhausted" and "budget exhausted" in rollout.message
    assert rollout.tokens_used <= 120
    assert rollout.frames == truth.frames[: len(rollout.frames)] and not any(f.is_error for f in rollout.frames)
    assert rollout.partial and len(rollout.frames) < len(truth.frames)
    assert rollout.step() is None


def test_a_random_model_writes_garbage_that_becomes_a_format_error_frame(backend, program, truth):
    backend.reset()
    rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(frame_tokens=40))
    assert rollout.run() is RolloutStatus.FRAME_LIMIT
    frame = rollout.frames[-1]
    assert frame.is_error and "format error" in frame.error and frame.tokens == 40
    assert frame.raw and frame.origin == "generated"
    assert len(rollout.frames) == 2


def test_malformed_frames_are_format_errors_and_the_rollout_goes_on(scripted, program, truth):
    good = render_frames(truth.frames[:2])
    bad = tokens.LINE_SEP + '{"n": oops' + tokens.ACTION_SEP + "    s = 0\n" + tokens.FRAME_SEP
    bad += "no event" + tokens.FRAME_SEP
    bad += tokens.TRACE_CONTEXT_START + "again" + tokens.FRAME_SEP
    rest = render_frames(truth.frames[2:], end=True)
    scripted.script = script_for(scripted, program, split_text(good + bad + rest))
    scripted.reset()
    rollout = Rollout(scripted, program, truth.frames[0])
    assert rollout.run() is RolloutStatus.ENDED
    errors = [f for f in rollout.frames if f.is_error]
    assert [f.error for f in errors] == [
        "locals are not valid JSON",
        "frame does not start with an event token",
        "frame does not start with an event token",
    ]
    assert errors[2].raw == tokens.TRACE_CONTEXT_START + "again"
    assert len(rollout.frames) == len(truth.frames) + 3


def test_a_literal_special_token_in_a_value_is_data(interpreter, scripted):
    program = program_from_source("def f(s):  # << START_OF_TRACE\n    t = s + '<|frame_sep|>'\n    return t\n", call="f('<|arg_sep|>')")
    truth = interpreter.trace(program)
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    rollout.run()
    assert rollout.frames == truth.frames
    assert rollout.frames[-1].arg == "'<|arg_sep|><|frame_sep|>'"


def test_end_of_text_inside_a_frame_ends_with_a_cut_off_frame(scripted, program, truth):
    text = render_frames(truth.frames[:3]) + tokens.LINE_SEP + '{"n": "2"' + tokens.END_OF_TEXT
    scripted.script = script_for(scripted, program, split_text(text))
    scripted.reset()
    rollout = Rollout(scripted, program, truth.frames[0])
    assert rollout.run() is RolloutStatus.ENDED
    assert rollout.frames[-1].error == "frame cut off by end of text"
    assert rollout.text().endswith(tokens.END_OF_TEXT)


def test_max_frames(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0], RolloutOptions(max_frames=5))
    assert rollout.run() is RolloutStatus.MAX_FRAMES and len(rollout.frames) == 5


def test_cancel_stops_inside_a_frame_and_run_resumes(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    cancel = threading.Event()
    cancel.set()
    assert rollout.run(cancel=cancel) is RolloutStatus.CANCELLED
    assert rollout.step(cancel=cancel.is_set) is None and len(rollout.frames) == 1
    assert rollout.run() is RolloutStatus.ENDED and rollout.frames == truth.frames


def test_until_a_predicate(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    status = rollout.run(until=lambda frame: frame.event is Event.RETURN)
    assert status is RolloutStatus.RUNNING and rollout.frames[-1].event is Event.RETURN


# -- determinism -----------------------------------------------------------------------------


def test_greedy_rollouts_are_the_same_every_time(backend, model_dir, program, truth):
    options = RolloutOptions(frame_tokens=30, token_budget=200)

    def run(b):
        b.reset()
        rollout = Rollout(b, program, truth.frames[0], options)
        rollout.run()
        return rollout.text(), rollout.status

    first = run(backend)
    assert run(backend) == first
    with TransformersBackend(str(model_dir), lean=False) as fresh:
        assert run(fresh) == first


def test_sampling_is_seeded(backend, program, truth):
    def run(seed):
        backend.reset()
        rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(frame_tokens=30, temperature=1.0, top_p=0.9, seed=seed))
        rollout.run()
        return rollout.text()

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_rewind_past_the_end_is_refused(scripted, program, truth):
    use_script(scripted, program, truth.frames)
    rollout = Rollout(scripted, program, truth.frames[0])
    with pytest.raises(ValueError):
        rollout.rewind(5)


def test_the_models_context_ends_the_rollout_as_context_full(model_dir, interpreter):
    """A model sees only its context: the rollout stops there (context full, not the budget),
    whatever --token-budget says, and never feeds the model more positions than it has."""
    source = "def f(n):  # << START_OF_TRACE\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
    program = program_from_source(source, "loop.py", call="f(50)")
    truth = interpreter.trace(program)
    with ScriptedBackend(str(model_dir), lean=False) as scripted:
        scripted.script = script_for(scripted, program, frames_segments(truth.frames, end=True))
        scripted.context_length = len(scripted.encode_segments(prompt_segments(program.source))) + 300
        rollout = Rollout(scripted, program, truth.frames[0], RolloutOptions(token_budget=100_000))
        rollout.run()
        assert rollout.status is RolloutStatus.CONTEXT
        assert f"context of {scripted.context_length} tokens is full" in rollout.message
        assert len(rollout.ids) <= scripted.context_length
        assert 0 < len(rollout.frames) < len(truth.frames)
        assert [f.action for f in rollout.frames] == [f.action for f in truth.frames[: len(rollout.frames)]]


# -- the model's context vs the token budget (an oracle model: no weights) -------------------


@pytest.fixture(scope="module")
def oracle_case(interpreter):
    from cwmtui.interpreter import load_program

    from .conftest import GOLDEN

    program = load_program(str(GOLDEN / "strawberry.py"), call="f('r')")
    return program, interpreter.trace(program)


@pytest.mark.parametrize("room", [0, 200])
def test_a_small_context_ends_as_context_full_naming_its_size(oracle_case, room):
    """Where the model's context, not the token budget, runs out, the status says so (between
    frames, or in the middle of one) and the message names the context's size; it is scored
    as token-budget exhaustion all the same."""
    from cwmtui.analysis.compare import compare

    from .world_models import OracleBackend

    program, truth = oracle_case
    backend = OracleBackend(program, truth.frames)
    prompt = len(backend.encode_segments(prompt_segments(program.source)))
    entry = len(backend.encode_segments(frames_segments(truth.frames[:1])))
    backend.context_length = prompt + entry + room
    rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(token_budget=100_000))
    assert rollout.run() is RolloutStatus.CONTEXT
    assert rollout.status.label == "context full" and rollout.status.out_of_tokens
    assert f"context of {backend.context_length} tokens is full" in rollout.message
    assert len(rollout.ids) <= backend.context_length
    assert 0 < len(rollout.frames) < len(truth.frames) and rollout.frames == truth.frames[: len(rollout.frames)]
    assert bool(rollout.partial) == bool(room)  # room for some frames: the last one is cut off
    first = compare(truth, rollout.frames, rollout.status, rollout.partial).first_divergence
    assert (first.kind, first.regime, first.step) == ("budget", "token-budget exhaustion", len(rollout.frames))
    assert rollout.step() is None


def test_a_large_context_and_a_small_budget_end_as_budget_exhausted(oracle_case):
    from .world_models import OracleBackend

    program, truth = oracle_case
    backend = OracleBackend(program, truth.frames)
    backend.context_length = 131_072
    rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(token_budget=300))
    assert rollout.run() is RolloutStatus.BUDGET
    assert rollout.status.label == "budget exhausted" and rollout.status.out_of_tokens
    assert "of 300 tokens used" in rollout.message and "context" not in rollout.message
