"""Real model directories as users have them: code inside them never runs, the KV cache works
on every supported transformers version (or fails loudly), big models are placed with the KV
cache in the fit check, and ``--model ORG/NAME`` is found in the local Hugging Face cache."""

from __future__ import annotations

import json
import shutil

import pytest

from cwmtui.model import ModelError, open_backend
from cwmtui.model.opening import BUNDLED_DIR
from cwmtui.model.hf import TransformersBackend, kv_bytes_per_token, offload_warning, plan_placement
from cwmtui.model.tokenizer import load_tokenizer

from .tiny_models import build_tiny_cwm, build_tiny_model

EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n\nclass EvilModel:\n    pass\n"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden=32, layers=2)


@pytest.fixture
def spy_loads(monkeypatch):
    """Every ``from_pretrained`` call of the Auto classes, with its keyword arguments."""
    import transformers

    calls = []
    for cls in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        original = cls.from_pretrained.__func__

        def spy(klass, *args, _original=original, **kwargs):
            calls.append((klass.__name__, kwargs))
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    return calls


def with_custom_code(model_dir, tmp_path, config_file: str):
    target = tmp_path / "custom"
    shutil.copytree(model_dir, target)
    marker = tmp_path / "code-ran"
    (target / "evil.py").write_text(EVIL.format(marker=str(marker)))
    config = json.loads((target / config_file).read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "evil.EvilModel", "AutoConfig": "evil.EvilModel", "AutoTokenizer": ["evil.EvilModel", None]}
    (target / config_file).write_text(json.dumps(config))
    return target, marker


# -- code in a model directory ---------------------------------------------------------------


@pytest.mark.parametrize("config_file", ["config.json", "tokenizer_config.json"])
def test_a_model_directory_with_custom_code_is_refused_before_anything_of_it_runs(model_dir, tmp_path, spy_loads, config_file):
    target, marker = with_custom_code(model_dir, tmp_path, config_file)
    with pytest.raises(ModelError, match=r"own Python code \(auto_map\) and ships evil\.py; cwmtui never runs code from a model directory"):
        open_backend(model=str(target), device="cpu")
    assert spy_loads == []  # transformers never saw the directory
    assert not marker.exists()


def test_a_tokenizer_directory_with_custom_code_is_refused(model_dir, tmp_path, spy_loads):
    target, marker = with_custom_code(model_dir, tmp_path, "tokenizer_config.json")
    with pytest.raises(ModelError, match="never runs code"):
        load_tokenizer(str(target))
    assert spy_loads == [] and not marker.exists()


def test_every_load_passes_trust_remote_code_false(model_dir, spy_loads):
    TransformersBackend(str(model_dir), device="cpu").close()
    load_tokenizer(str(model_dir))
    assert len(spy_loads) == 3
    assert all(kwargs.get("trust_remote_code") is False for _, kwargs in spy_loads)


# -- the KV cache ----------------------------------------------------------------------------


def full_logits(backend, ids):
    import torch

    with torch.inference_mode():
        return backend.model(input_ids=torch.tensor([ids])).logits[0, -1]


@pytest.fixture(scope="module")
def cwm_dir(tmp_path_factory):
    """A tiny random CwmForCausalLM (Meta's architecture: sliding-window and full layers)."""
    return build_tiny_cwm(tmp_path_factory.mktemp("cwm") / "model")


def test_cached_decoding_gives_the_logits_of_a_full_forward_pass(cwm_dir):
    """The check that fails silently when the cache is passed under a name the installed
    transformers does not take: .ci/run repeats it under transformers 5.20 (vLLM 0.33's)."""
    import torch

    backend = TransformersBackend(str(cwm_dir), device="cpu", lean=False)
    ids = backend.encode("def f(x):\n    return x * 2\n" * 3)
    backend.complete(ids[:40], stop_ids=[], max_new_tokens=1)
    for end in (41, 47, len(ids)):  # one token, a few, the rest (past the sliding window)
        backend.complete(ids[:end], stop_ids=[], max_new_tokens=1)
        assert backend.cached_tokens == end
        assert torch.allclose(backend._logits.float(), full_logits(backend, ids[:end]).float(), atol=1e-4)


def test_a_cache_the_model_does_not_fill_fails_loudly(cwm_dir):
    backend = TransformersBackend(str(cwm_dir), device="cpu", lean=False)
    backend._cache_argument = "cache_under_another_name"  # as transformers <5.24 took cache=
    with pytest.raises(ModelError, match=r"did not keep the KV cache \(0 of \d+ tokens held.*install a supported version"):
        backend.complete(backend.encode("x = 1\n"), stop_ids=[], max_new_tokens=2)


# -- placing a big model ---------------------------------------------------------------------

GIB = 1 << 30


def test_the_kv_cache_of_cwm_is_256_kib_a_token():
    from transformers import CwmConfig

    assert kv_bytes_per_token(CwmConfig().to_dict()) == 256 * 1024
    assert kv_bytes_per_token({}) == 0


def test_a_model_that_fits_with_its_cache_loads_straight_onto_the_gpu():
    plan = plan_placement(0, [80 * GIB], weights=65 * GIB, kv_cache=3 * GIB)
    assert plan.device_map == {"": 0} and plan.max_memory is None and plan.label == "cuda:0"


def test_the_kv_cache_counts_in_the_fit_check():
    """65 GB of weights fit in 80 GB; with 12k positions of CWM's cache (3 GiB) and 10% to
    spare they no longer do on one GPU, so the layers are spread and the cache has room."""
    kv = 256 * 1024 * 12288
    assert plan_placement(0, [74 * GIB], weights=65 * GIB, kv_cache=0).device_map == {"": 0}
    plan = plan_placement(0, [74 * GIB, 74 * GIB], weights=65 * GIB, kv_cache=kv, host_free=100 * GIB)
    assert plan.device_map == "auto" and plan.label == "2 GPU(s) (device_map=auto)"
    assert plan.max_memory == {0: int(74 * GIB * 0.9) - kv // 2, 1: int(74 * GIB * 0.9) - kv // 2, "cpu": int(100 * GIB * 0.9)}


def test_layers_that_do_not_fit_the_gpus_go_to_the_cpu_before_the_disk():
    """accelerate's own map with the budget cwmtui gives it: the overflow lands in host memory."""
    import torch
    from accelerate import infer_auto_device_map, init_empty_weights
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=8, num_attention_heads=4)
    with init_empty_weights():
        model = LlamaForCausalLM(config)
    weights = sum(p.numel() * 2 for p in model.parameters())
    plan = plan_placement(0, [weights // 3], weights=weights, kv_cache=0, host_free=10 * weights)
    placed = infer_auto_device_map(model, max_memory=plan.max_memory, dtype=torch.bfloat16)
    assert set(placed.values()) == {0, "cpu"}  # none on disk while the host has room
    assert offload_warning(placed).endswith("run from cpu: decoding will be many times slower (free GPU memory, lower --token-budget, or serve the model with vLLM)")


def test_offloading_to_cpu_or_disk_is_said_in_one_line():
    assert offload_warning({"": 0}) is None and offload_warning(None) is None
    line = offload_warning({"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": "cpu", "model.layers.2": "disk"})
    assert line.startswith("2 of 4 parts of the model did not fit in GPU memory and run from cpu and disk")
    assert "\n" not in line


# -- --model ORG/NAME from the local Hugging Face cache --------------------------------------


def cache_with(tmp_path, repo_id: str, source) -> str:
    """A Hugging Face cache holding ``repo_id`` as ``hf download`` leaves it."""
    cache = tmp_path / "hub"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / ("0" * 40)
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    return str(cache)


def test_a_model_id_is_found_in_the_local_hugging_face_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", cache_with(tmp_path, "someone/tiny-cwm", BUNDLED_DIR))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    backend = open_backend(model="someone/tiny-cwm")
    assert backend.name == "someone/tiny-cwm"
    assert backend.path.endswith("0" * 40)


def test_a_model_id_not_in_the_cache_is_one_line_and_downloads_nothing(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match=r"facebook/cwm: no such model directory, and not in the local Hugging Face cache .*hf download facebook/cwm"):
        open_backend(model="facebook/cwm")
    with pytest.raises(ModelError, match=r"^nothing/here/x: no such model directory$"):
        open_backend(model="nothing/here/x")


def test_a_backend_warning_is_printed_by_diff(tmp_path, monkeypatch, capsys):
    from cwmtui.cli import main
    from cwmtui.cli import model_options
    from cwmtui.model import opening

    def offloaded(args, progress=None):
        backend = opening.open_bundled()
        backend.warning = offload_warning({"model.layers.0": 0, "model.layers.1": "cpu"})
        return backend

    monkeypatch.setattr(model_options, "backend_from_args", offloaded)
    program = tmp_path / "p.py"
    program.write_text("def f(x):  # << START_OF_TRACE\n    return x\n\nf(1)\n")
    main(["diff", str(program), "--json"])
    assert capsys.readouterr().err.startswith("1 of 2 parts of the model did not fit in GPU memory and run from cpu")
