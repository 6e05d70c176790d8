"""The training pipeline (not the model's accuracy): documents, tokenizer ids, a step that
lowers the loss, checkpoints and resume, export and offline reload, the bundled model."""

import json
import os

import pytest

torch = pytest.importorskip("torch")

from cwmtui.interpreter import program_from_source
from cwmtui.suites import s5
from cwmtui.trace import frames_segments, parse_trace, prompt_segments, tokens
from cwmtui.training.data import Curriculum, make_batch
from cwmtui.training.documents import SPECIAL_IDS, decode_ids, document, encode_segments

SOURCE = '''def f(s):  # << START_OF_TRACE
    t = s + "<|frame_sep|>"
    return t.upper()
'''
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(__file__)), "cwmtui", "model", "bundled")


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def traced():
    from cwmtui.interpreter import Interpreter

    program = program_from_source(SOURCE, call="f('é<|end_of_text|>')")
    with Interpreter() as it:
        trace = it.trace(program)
    return program, trace


def test_byte_ids_match_the_tokenizer_and_literal_specials_stay_bytes(traced):
    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    program, trace = traced
    tok = build_byte_tokenizer()
    segments = prompt_segments(program.source) + frames_segments(trace.frames, end=True)
    ours = encode_segments(segments)
    theirs = []
    for seg in segments:
        if type(seg) is str:
            theirs += tok.encode(seg, add_special_tokens=False, split_special_tokens=True)
        else:
            theirs.append(tok.convert_tokens_to_ids(str(seg)))
    assert ours == theirs
    assert {k: tok.convert_tokens_to_ids(k) for k in SPECIAL_IDS} == SPECIAL_IDS
    # the literal <|frame_sep|> in the source is bytes, not the special id
    frame_sep = SPECIAL_IDS[tokens.FRAME_SEP]
    assert ours.count(frame_sep) == len(trace.frames) + 1
    assert decode_ids(ours) == "".join(segments)
    assert tok.decode(ours) == "".join(segments)


def test_document_loss_starts_after_the_entry_frame(traced):
    program, trace = traced
    doc = document(program.source, trace.frames)
    prompt = encode_segments(prompt_segments(program.source) + frames_segments(trace.frames[:1]))
    assert doc.ids[: len(prompt)] == prompt
    assert doc.loss_start == len(prompt)
    assert doc.ids[doc.loss_start] == SPECIAL_IDS[tokens.LINE_SEP]
    assert doc.ids[-1] == SPECIAL_IDS[tokens.END_OF_TEXT]
    assert len(doc.frame_starts) == len(trace.frames)  # frames after the entry + end of text


def test_batches_are_a_function_of_seed_and_step_and_padding_is_masked(interpreter):
    a = make_batch(interpreter, 3, 5, 3000, 3000, Curriculum())
    b = make_batch(interpreter, 3, 5, 3000, 3000, Curriculum())
    c = make_batch(interpreter, 3, 6, 3000, 3000, Curriculum())
    assert a.rows == b.rows and a.rows != c.rows
    assert a.tokens >= 3000
    for ids, mask in a.rows:
        longest = len(ids[0])
        for row, m in zip(ids, mask):
            assert len(row) == len(m) == longest
            real = len(row) - next((i for i, t in enumerate(reversed(row)) if t != 0), 0)
            assert real * 4 >= longest * 3  # little padding
            assert not any(m[real:])  # no loss on pads
            assert sum(m) > 0


def test_one_training_step_lowers_the_loss_on_a_fixed_batch(interpreter):
    from cwmtui.training.loop import masked_loss
    from cwmtui.training.model import build_model

    model = build_model("tiny", seed=0)
    batch = make_batch(interpreter, 0, 0, 1500, 1500, Curriculum())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def loss():
        total, count = 0.0, 0
        for ids, mask in batch.rows:
            s, n = masked_loss(model, torch.tensor(ids), torch.tensor(mask))
            total, count = total + s, count + n
        return total / count

    before = loss()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss()
    assert after.item() < before.item()


def test_export_then_offline_load_gives_identical_logits(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cwmtui.training.model import CONTEXT, build_model, export

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = build_model("tiny", seed=1).eval()
    export(model, str(tmp_path), {"step": 0})
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "generation_config.json").exists()
    loaded = AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    assert loaded.config.max_position_embeddings >= CONTEXT >= 4096
    assert loaded.config.vocab_size % 8 == 0 and loaded.config.vocab_size >= len(tok)
    assert tok.convert_tokens_to_ids(tokens.FRAME_SEP) == SPECIAL_IDS[tokens.FRAME_SEP]
    # stored in bf16: compare against the bf16-rounded original
    reference = model
    with torch.no_grad():
        for param in reference.parameters():
            param.copy_(param.to(torch.bfloat16).float())
    ids = torch.tensor([encode_segments(prompt_segments(SOURCE))])
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_train_checkpoint_resume_and_export(tmp_path):
    from cwmtui.cli import main
    from cwmtui.training.loop import data_label, load_checkpoint

    out = str(tmp_path / "run")
    common = ["--size", "tiny", "--batch-tokens", "1024", "--threads", "1", "--eval-minutes", "0"]
    schedule = ["--lr", "0.001", "--min-lr", "0.0001", "--decay-tokens", "4096"]
    assert main(["train", "--out", out, "--steps", "2", *schedule, *common]) == 0
    first = load_checkpoint(out)
    assert first["state"]["step"] == 2 and first["state"]["tokens"] >= 2048
    assert main(["train", "--resume", out, "--steps", "3", *common]) == 0  # no schedule flags: the run keeps its own
    second = load_checkpoint(out)
    assert second["state"]["step"] == 3 and second["state"]["runs"] == 2
    assert (second["options"]["lr"], second["options"]["min_lr"], second["options"]["decay_tokens"]) == (0.001, 0.0001, 4096)
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [m["step"] for m in lines] == [1, 2, 3]
    assert lines[-1]["lr"] <= 0.001  # still on the run's schedule, not back at the default peak
    target = str(tmp_path / "export")
    assert main(["train", "--resume", out, "--export", target]) == 0
    info = json.load(open(os.path.join(target, "training.json")))
    assert info["step"] == 3 and info["size"] == "tiny"
    # a run from scratch records its data and precision from the first token (the card reads them)
    assert info["data"] == [[0, data_label()]] and info["precision"] == [[0, "fp32"]]


def test_init_warm_starts_from_exported_weights_and_continues_the_count(tmp_path):
    import torch

    from cwmtui.cli import main
    from cwmtui.training.loop import NO_HEADERS, data_label, load_checkpoint, warm_start
    from cwmtui.training.model import build_model, export

    source = build_model("tiny", seed=3)
    exported = str(tmp_path / "exported")
    export(source, exported, {"step": 40, "tokens": 50_000, "loss_tokens": 30_000, "train_seconds": 12, "runs": 2,
                              "loss_curve": [[0.02, 2.5], [0.05, 1.9]]})
    fresh = build_model("tiny", seed=4)
    assert warm_start(fresh, exported)["tokens"] == 50_000
    ids = torch.tensor([[259, 260, 72, 105]])
    with torch.no_grad():  # bf16 storage: the warm start reproduces the exported (rounded) weights
        expected = build_model("tiny", seed=3).to(torch.bfloat16).to(torch.float32)(input_ids=ids).logits
        assert torch.allclose(fresh(input_ids=ids).logits, expected, atol=1e-5)
    out = str(tmp_path / "run")
    assert main(["train", "--init", exported, "--out", out, "--steps", "41", "--size", "tiny",
                 "--batch-tokens", "1024", "--threads", "1", "--eval-minutes", "0"]) == 0
    state = load_checkpoint(out)["state"]
    assert state["step"] == 41 and state["tokens"] > 50_000 and state["runs"] == 3
    # weights exported before the record began: their tokens saw the old data, then today's
    assert state["data"] == [[0, NO_HEADERS], [50_000, data_label()]]
    lines = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    assert [m["tokens"] for m in lines[:2]] == [20_000, 50_000]  # the exported history, then the new step


def test_a_deeper_shape_grows_from_exported_weights_computing_the_same_function(tmp_path):
    import torch
    from transformers import LlamaForCausalLM

    from cwmtui.training.loop import masked_loss, warm_start
    from cwmtui.training.model import RESIDUAL_OUTPUTS, build_config, build_model, export

    source = build_model("tiny", seed=3)
    exported = str(tmp_path / "exported")
    export(source, exported)
    config = build_config("tiny")
    config.num_hidden_layers = 3
    deeper = LlamaForCausalLM(config)
    info = warm_start(deeper, exported)
    assert info["shape"] == [[0, "2 layers"]]  # what the source was, for the card's record
    ids = torch.tensor([[259, 260, 72, 105, 80, 33]])
    with torch.no_grad():
        expected = build_model("tiny", seed=3).to(torch.bfloat16).to(torch.float32)(input_ids=ids).logits
        assert torch.allclose(deeper(input_ids=ids).logits, expected, atol=1e-5)
    # the new layer (the last, a copy of old layer 1) starts as the identity but is not stuck there
    new = deeper.model.layers[2]
    assert all(not dict(new.named_parameters())[name].any() for name in RESIDUAL_OUTPUTS)
    masked_loss(deeper, ids, torch.ones_like(ids, dtype=torch.bool))[0].backward()
    assert new.mlp.down_proj.weight.grad.abs().sum() > 0 and new.self_attn.o_proj.weight.grad.abs().sum() > 0


def test_a_shallower_shape_than_the_weights_is_refused(tmp_path):
    from transformers import LlamaForCausalLM

    from cwmtui.training.loop import warm_start
    from cwmtui.training.model import build_config, build_model, export

    exported = str(tmp_path / "exported")
    export(build_model("tiny"), exported)
    config = build_config("tiny")
    config.num_hidden_layers = 1
    with pytest.raises(ValueError, match="does not fit"):
        warm_start(LlamaForCausalLM(config), exported)


def test_train_init_rejects_a_directory_without_weights(tmp_path, capsys):
    from cwmtui.cli import main

    assert main(["train", "--init", str(tmp_path)]) == 2
    assert "no model.safetensors" in capsys.readouterr().err


def test_cpu_training_stays_fp32_unless_asked():
    from cwmtui.training.loop import TrainOptions, use_bf16

    assert not use_bf16(TrainOptions(device="cpu"))
    assert use_bf16(TrainOptions(device="cuda"))
    assert use_bf16(TrainOptions(device="cpu", precision="bf16"))


def test_train_rejects_a_missing_checkpoint(tmp_path, capsys):
    from cwmtui.cli import main

    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists(os.path.join(BUNDLED, "model.safetensors")), reason="no bundled model yet")
def test_bundled_model_writes_a_well_formed_frame():
    from cwmtui.interpreter import Interpreter
    from cwmtui.training.measure import load_model

    model = load_model(BUNDLED, threads=1)
    assert os.path.getsize(os.path.join(BUNDLED, "model.safetensors")) <= 16_000_000
    program = s5.program(3, seed=1)
    with Interpreter() as it:
        trace = it.trace(program)
    prompt = encode_segments(prompt_segments(program.source) + frames_segments(trace.frames[:1]))
    ids = torch.tensor([prompt])
    frame_sep = SPECIAL_IDS[tokens.FRAME_SEP]
    new = []
    with torch.no_grad():
        for _ in range(200):
            nxt = int(model(input_ids=ids).logits[0, -1].argmax())
            new.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
            if nxt == frame_sep:
                break
    assert new[-1] == frame_sep
    text = decode_ids(prompt + new)
    parsed = parse_trace(text, program.source)
    frame = parsed.frames[1]
    assert frame.error is None and frame.event is not None


def test_thread_choice_keeps_the_faster_count():
    from cwmtui.training.loop import ThreadChoice

    choice = ThreadChoice(2, period=10, probe=2)
    rates = {1: 900.0, 2: 300.0}  # a loaded machine: one thread is faster
    for step in range(10):
        count = choice.choose(step)
        choice.record(step, rates[count])
    assert [choice.choose(s) for s in range(4)] == [1, 1, 2, 2]  # probing
    assert choice.choose(5) == 1
    rates = {1: 900.0, 2: 1000.0}  # barely faster: not worth the risk
    for step in range(10, 14):
        choice.record(step, rates[choice.choose(step)])
    assert choice.choose(15) == 1
    rates = {1: 900.0, 2: 1600.0}  # the machine is idle again
    for step in range(20, 24):
        choice.record(step, rates[choice.choose(step)])
    assert choice.choose(25) == 2


def test_thread_choice_survives_a_resume_in_the_middle_of_a_probe():
    from cwmtui.training.loop import ThreadChoice

    choice = ThreadChoice(2, period=30, probe=2)
    for step in range(32, 64):  # a resumed run starts at step 32: phase 2, only 2 threads probed
        count = choice.choose(step)
        choice.record(step, {1: 900.0, 2: 2000.0}[count])
    assert choice.choose(65) == 2  # the first whole probe window decided


def test_curriculum_lengthens_documents():
    curriculum = Curriculum()
    lengths = [curriculum.at(t)[0] for t in (0, 5_000_000, 20_000_000, 10**9)]
    assert lengths == sorted(lengths) and lengths[0] < 1024 and lengths[-1] == 4096


def test_learning_rate_anneals_from_the_decay_start():
    from cwmtui.training.loop import TrainOptions, learning_rate

    opts = TrainOptions(lr=3e-3, min_lr=3e-4, warmup=10, decay_tokens=10_000_000, decay_start=20_000_000)
    assert learning_rate(opts, 0, 0) < learning_rate(opts, 9, 0) == 3e-3  # warm-up
    assert learning_rate(opts, 500, 15_000_000) == 3e-3  # constant before the decay
    assert 3e-4 < learning_rate(opts, 500, 25_000_000) < 3e-3
    assert learning_rate(opts, 500, 40_000_000) == pytest.approx(3e-4)


def test_mix_option_changes_the_families_drawn(interpreter):
    from cwmtui.training.data import MIX, parse_mix

    mix = parse_mix("s5=1,zoo=0,crux=0,loop=0,helper=0,exception=0,grow=0,story=0,copy=0")
    batch = make_batch(interpreter, 0, 0, 2000, 2000, Curriculum(mix=tuple(mix.items())))
    assert set(batch.families) == {"s5"}
    assert parse_mix("zoo=0.5") == {**MIX, "zoo": 0.5} and parse_mix("default") == MIX


@pytest.mark.parametrize("bad, says", [("zoo", "FAMILY=WEIGHT"), ("bogus=1", "FAMILY=WEIGHT"), ("zoo=-1", "0 or more"),
                                       ("zoo=x", "0 or more"), ("s5=0,zoo=0,crux=0,loop=0,helper=0,exception=0,grow=0,story=0,copy=0", "nothing to train on")])
def test_train_refuses_a_bad_mix_in_one_line(bad, says, capsys):
    from cwmtui.cli import main

    assert main(["train", "--mix", bad, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_resumed_run_keeps_its_mix_and_the_card_records_it(tmp_path):
    from cwmtui.cli import main
    from cwmtui.training.loop import data_label, load_checkpoint

    out = str(tmp_path / "run")
    common = ["--size", "tiny", "--batch-tokens", "1024", "--threads", "1", "--eval-minutes", "0"]
    assert main(["train", "--out", out, "--steps", "1", *common]) == 0
    assert main(["train", "--resume", out, "--steps", "2", "--mix", "zoo=0.5", *common]) == 0
    assert main(["train", "--resume", out, "--steps", "3", *common]) == 0  # no --mix: keeps zoo=0.5
    ckpt = load_checkpoint(out)
    assert ckpt["options"]["mix"]["zoo"] == 0.5
    data = ckpt["state"]["data"]
    assert [phase[1] for phase in data] == [data_label(), data_label(ckpt["options"]["mix"])]
    assert "mix zoo 37%," in data[1][1]


COPIES = '''def f():  # << START_OF_TRACE
    a = 1
    b = 2
    c = a
    return a + b + c
'''


@pytest.fixture(scope="module")
def copies():
    from cwmtui.interpreter import Interpreter

    program = program_from_source(COPIES, call="f()")
    with Interpreter() as it:
        trace = it.trace(program)
    assert '".."' in decode_ids(document(program.source, trace.frames).ids)  # the case this is about
    return program, trace


def full_values(monkeypatch):
    """The oracle writes every value in full, never '..': other bytes, the same states."""
    from cwmtui.trace.render import Compressor

    from . import world_models

    class Full(Compressor):
        def compress(self, event, resolved):
            return resolved

    monkeypatch.setattr(world_models, "Compressor", Full)


def wrong_by_bytes(program, trace):
    from cwmtui.training.measure import Score

    frames = len(trace.frames) - 1
    return Score(program, frames=frames, frames_scored=frames, wrong_frames=list(range(frames)), first_wrong_frame=0)


def test_the_card_scores_states_as_eval_does_not_bytes(copies, monkeypatch):
    # a model that writes "1" where the trace writes ".." is right: cwmtui eval and the
    # debugger resolve ".." before they compare, and the card's figures must agree with them
    from cwmtui.training.measure import rescore, rollout_divergence

    from .world_models import OracleBackend

    program, trace = copies
    full_values(monkeypatch)
    backend = OracleBackend(program, trace.frames)
    result = wrong_by_bytes(program, trace)
    rescore(result, backend, trace)
    assert (result.frames_exact, result.trace_exact) == (len(trace.frames) - 1, True)
    assert rollout_divergence(backend, program, trace) is None


def test_the_card_still_counts_a_wrong_state_and_finds_its_step(copies, monkeypatch):
    from cwmtui.training.measure import rescore, rollout_divergence

    from .world_models import OracleBackend, wrong_value

    program, trace = copies
    full_values(monkeypatch)
    backend = OracleBackend(program, trace.frames, mistakes={3: wrong_value("a", "7")})
    result = wrong_by_bytes(program, trace)
    rescore(result, backend, trace)
    assert (result.frames_exact, result.trace_exact) == (len(trace.frames) - 2, False)  # only step 3 is wrong
    assert rollout_divergence(backend, program, trace) == 3
    ends_early = OracleBackend(program, trace.frames, end_at=4)  # writes <|end_of_text|> at step 4
    assert rollout_divergence(ends_early, program, trace) == 4
    # steps the byte pass found right are forced, not generated again: the rollout starts after them
    assert rollout_divergence(backend, program, trace, start=4) is None


def test_the_card_shows_where_the_debugger_sees_each_sample_diverge(tmp_path, monkeypatch):
    # the samples table is the debugger's story: the step and kind the comparison reports
    from cwmtui.interpreter import Interpreter, load_program
    from cwmtui.training import card

    from .world_models import OracleBackend, wrong_value

    (tmp_path / "copies.py").write_text(COPIES + "\nf()\n")
    monkeypatch.setattr(card, "SAMPLES", str(tmp_path))
    program = load_program(str(tmp_path / "copies.py"))
    with Interpreter() as it:
        trace = it.trace(program)
        right = card.sample_divergences(OracleBackend(program, trace.frames), it)
        wrong = card.sample_divergences(OracleBackend(program, trace.frames, mistakes={3: wrong_value("a", "7")}), it)
    assert right["copies.py"]["first_divergence"] is None
    assert (wrong["copies.py"]["first_divergence"], wrong["copies.py"]["kind"]) == (3, "state")
    assert wrong["copies.py"]["frames"] == len(trace.frames)


def test_the_card_shows_state_and_byte_figures_intervals_and_each_samples_story():
    from cwmtui.cli.train import BUNDLED
    from cwmtui.training.card import render

    row = {"programs": 40, "frame_exact": 0.98, "frame_exact_bytes": 0.88, "trace_exact": 0.85, "trace_exact_bytes": 0.425}
    m = {"families": {"copy": row | {"programs": 20, "token_accuracy": 0.99}}, "s5": {"8": row | {"fits": 40}},
         "zoo": {"1": row | {"programs": 32, "nested": 0.75, "flat": 0.75}}, "zoo_string": {"1": {"programs": 6, "trace_exact": 0.5}},
         "samples": {"a.py": {"frames": 40, "tokens": 900, "first_divergence": 5, "kind": "value"},
                     "b.py": {"frames": 449, "tokens": 54612, "first_divergence": 30, "kind": "budget"},
                     "c.py": {"frames": 12, "tokens": 300, "first_divergence": None, "kind": None}},
         "decode_tokens_per_s": 500.0, "lean_decode_tokens_per_s": 1500.0}
    text = render(BUNDLED, m)  # reads the model's files, writes nothing
    assert "| 8 | 40 | 85% (71-93) | 42% | 98% | 88% | 100% |" in text  # state-level, its interval, then bytes
    assert "| copy | 20 | 98% | 88% | 85% (64-95) | 42% | 99% |" in text
    assert "| a.py | 40 | 900 | 5 (value) |" in text
    assert "| b.py | 449 | 54612 | none before the token budget ran out (step 30) |" in text
    assert "| c.py | 12 | 300 | none: whole trace right |" in text


def test_the_card_says_when_the_model_was_grown_deeper(tmp_path):
    from cwmtui.training.card import render
    from cwmtui.training.model import build_model, export

    m = {"families": {}, "s5": {}, "zoo": {}, "zoo_string": {}, "decode_tokens_per_s": 500.0}
    grown, plain = str(tmp_path / "grown"), str(tmp_path / "plain")
    export(build_model("tiny"), grown, {"shape": [[0, "4 layers"], [224_000_000, "6 layers"]]})
    export(build_model("tiny"), plain, {})
    assert "- depth over training: 4 layers to 224.0M tokens, then 6 layers (each new layer" in render(grown, m)
    assert "depth over training" not in render(plain, m)


def test_the_loss_curve_keeps_a_warm_starts_history(tmp_path):
    # one row per ~10M tokens from the exported history, then one row per step of the new run:
    # the card's curve must still start where the history starts
    from cwmtui.training.loop import loss_curve

    with open(tmp_path / "metrics.jsonl", "w") as fh:
        for tokens, loss in [(10e6, 0.9), (20e6, 0.5), (30e6, 0.3)]:
            fh.write(json.dumps({"tokens": int(tokens), "loss": loss, "from": "bundled"}) + "\n")
        for step in range(1, 2001):
            fh.write(json.dumps({"step": step, "tokens": int(30e6 + step * 8192), "loss": 0.1}) + "\n")
    curve = loss_curve(str(tmp_path), points=8)
    assert curve[0] == [10.0, 0.9] and [20.0, 0.5] in curve
    assert curve[-1] == [46.38, 0.1] and len(curve) <= 8


class _RunsCode:
    """Unpickling this calls os.system: what a crafted checkpoint.pt would do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_checkpoint_cannot_run_code_and_is_one_line(tmp_path, capsys):
    import torch

    from cwmtui.cli import main

    marker = tmp_path / "code-ran"
    run = tmp_path / "run"
    run.mkdir()
    torch.save({"model": {}, "state": {}, "size": "small", "evil": _RunsCode(str(marker))}, run / "checkpoint.pt")
    for argv in (["train", "--resume", str(run), "--export", str(tmp_path / "out")], ["train", "--resume", str(run), "--steps", "1"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "refused: it holds objects other than tensors and plain data" in err
    assert not marker.exists()


def test_a_damaged_checkpoint_is_one_line(tmp_path, capsys):
    from cwmtui.cli import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["train", "--resume", str(run), "--export", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cwmtui: error: {run / 'checkpoint.pt'}: damaged, not a checkpoint") and err.count("\n") == 1
