"""Opening a world model: the shared options, the bundled model, and one clear line for every
way a model directory can be wrong."""

from __future__ import annotations

import json
import shutil

import pytest

from cwmtui.cli.options import Parser
from cwmtui.cli.model_options import add_model_options, backend_from_args, rollout_options_from_args
from cwmtui.model import ModelError, RolloutOptions
from cwmtui.model import opening as backend_module
from cwmtui.model.hf import TransformersBackend, check_model_dir, resolve_device

from .tiny_models import build_tiny_model


def parse(*argv):
    parser = Parser(prog="cwmtui test")
    add_model_options(parser)
    return parser.parse_args(list(argv))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", hidden=32, layers=1)


def copy_model(model_dir, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(model_dir, target)
    return target


# -- options ---------------------------------------------------------------------------------


def test_defaults_are_the_bundled_model_greedy_with_the_contract_budget():
    args = parse()
    assert (args.model, args.device, args.server, args.server_kind, args.replay) == (None, "auto", None, "vllm", None)
    assert rollout_options_from_args(args) == RolloutOptions()
    args = parse("--temperature", "0.6", "--top-p", "0.95", "--seed", "7", "--token-budget", "100", "--frame-tokens", "50")
    options = rollout_options_from_args(args)
    assert (options.temperature, options.top_p, options.seed, options.token_budget, options.frame_tokens) == (0.6, 0.95, 7, 100, 50)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device", "gpu"], "invalid device 'gpu' (choose auto, cpu, cuda or cuda:N)"),
        (["--top-p", "0"], "must be in (0, 1]"),
        (["--temperature", "-1"], "must be 0 (greedy) or more"),
        (["--token-budget", "0"], "must be at least 1"),
        (["--server-kind", "tgi"], "invalid choice: 'tgi'"),
    ],
)
def test_bad_option_values_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "m", "--server", "http://x"], "--model and --server cannot be used together: pick one world model"),
        (["--server", "http://x", "--replay", "r.jsonl"], "--server and --replay cannot be used together"),
        (["--id", "3"], "--id selects a record of --replay FILE; there is no --replay"),
        (["--model", "m", "--tokenizer", "t"], "--tokenizer is for --server or --replay"),
    ],
)
def test_options_that_do_not_go_together(argv, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(").replace(")", r"\)")):
        backend_from_args(parse(*argv))


# -- the bundled model -----------------------------------------------------------------------


def test_the_bundled_model_missing_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.setattr(backend_module, "BUNDLED_DIR", str(tmp_path / "bundled"))
    with pytest.raises(ModelError) as caught:
        backend_from_args(parse())
    message = str(caught.value)
    assert message.startswith("the bundled model is not installed: ") and "\n" not in message
    assert "--model PATH" in message
    (tmp_path / "bundled").mkdir()
    with pytest.raises(ModelError, match="has no config.json"):
        backend_from_args(parse("--model", "bundled"))


def test_the_bundled_model_opens_by_name(model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(backend_module, "BUNDLED_DIR", str(copy_model(model_dir, tmp_path)))
    with backend_from_args(parse("--device", "cpu")) as backend:
        assert backend.name == "bundled"
        assert backend.description.startswith("bundled byte CWM · ") and "cpu · fp32" in backend.description


def test_a_model_directory_opens_with_its_path_as_name(model_dir):
    with backend_from_args(parse("--model", str(model_dir))) as backend:
        assert isinstance(backend, TransformersBackend) and backend.name == str(model_dir)


# -- broken model directories ----------------------------------------------------------------


def test_missing_or_not_a_directory(tmp_path):
    with pytest.raises(ModelError, match="no such model directory"):
        check_model_dir(str(tmp_path / "none"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ModelError, match="not a directory"):
        check_model_dir(str(tmp_path / "file"))
    with pytest.raises(ModelError, match="no config.json, so not a Hugging Face model directory"):
        check_model_dir(str(tmp_path))


def test_no_weights(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    (path / "model.safetensors").unlink()
    with pytest.raises(ModelError, match=r"no weights \(model.safetensors or model.safetensors.index.json\)"):
        check_model_dir(str(path))


def test_a_missing_shard(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    (path / "model.safetensors").rename(path / "model-00001-of-00002.safetensors")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ModelError, match=r"incomplete download: 1 of 2 weight shards missing \(first: model-00002-of-00002.safetensors\)"):
        check_model_dir(str(path))


def test_truncated_weights(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match=r"truncated \(\d+ of \d+ bytes\): download it again"):
        TransformersBackend(str(path))


def test_a_git_lfs_pointer_instead_of_weights(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    (path / "model.safetensors").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    with pytest.raises(ModelError, match=r"a Git LFS pointer, not the weights \(run 'git lfs pull'\)"):
        check_model_dir(str(path))


def test_no_tokenizer_files(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    for name in ("tokenizer_config.json", "added_tokens.json", "special_tokens_map.json", "tokenizer.json"):
        if (path / name).exists():
            (path / name).unlink()
    with pytest.raises(ModelError, match=r"no tokenizer files"):
        check_model_dir(str(path))


def test_a_tokenizer_without_the_cwm_tokens(model_dir, tmp_path):
    from transformers import ByT5Tokenizer

    path = copy_model(model_dir, tmp_path)
    for name in ("tokenizer_config.json", "added_tokens.json", "special_tokens_map.json"):
        if (path / name).exists():
            (path / name).unlink()
    ByT5Tokenizer().save_pretrained(path)
    with pytest.raises(ModelError, match=r"the tokenizer has no single token for <\|begin_of_text\|>, .*<\|trace_context_start\|> \(not a CWM tokenizer\)"):
        TransformersBackend(str(path))


def test_a_config_transformers_cannot_read(model_dir, tmp_path):
    path = copy_model(model_dir, tmp_path)
    config = json.loads((path / "config.json").read_text())
    config["model_type"] = "no_such_architecture"
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError) as caught:
        TransformersBackend(str(path))
    assert str(caught.value).startswith(f"{path}: cannot load the model: ") and "\n" not in str(caught.value)


def test_asking_for_a_gpu_that_is_not_there():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ModelError, match=r"--device cuda:1: no CUDA GPU is available here; use --device cpu"):
        resolve_device("cuda:1")
    assert str(resolve_device("auto")) == "cpu"


# -- the lean path: the bundled model without transformers -----------------------------------


def test_the_byte_tokenizer_without_transformers_gives_the_same_ids_and_text():
    import random

    from cwmtui.model.byte_tokenizer import ByteTokenizer, build_byte_tokenizer
    from cwmtui.model.tokenizer import HFTokenizer

    native, reference = ByteTokenizer(), HFTokenizer(build_byte_tokenizer(), "byte tokenizer")
    assert native.special_ids == reference.special_ids
    texts = ["", "x = 1\n", "naïve → ✓ 🐍", "literal <|frame_sep|> in a program", "\x00\x7f\n\t"]
    for text in texts:
        assert native.encode(text) == reference.encode(text)
    rng = random.Random(0)
    ids = [*range(0, 268)]
    for _ in range(200):  # bytes that split characters, specials between them
        sample = [rng.choice(ids) for _ in range(rng.randint(1, 12))]
        assert native.decode(sample) == reference.decode(sample), sample


def test_a_small_byte_llama_opens_without_torch_or_transformers_with_the_same_logits(model_dir):
    import subprocess
    import sys

    import torch

    from cwmtui.model.opening import open_model_dir
    from cwmtui.model.lean import LeanBackend

    lean = open_model_dir(str(model_dir), device="cpu")
    assert isinstance(lean, LeanBackend) and lean.description.endswith("cpu · fp32 · lean decoder")
    full = TransformersBackend(str(model_dir), device="cpu")
    ids = [259] + lean.encode("def f(x):  # << START_OF_TRACE\n    return x\n")
    assert torch.allclose(torch.from_numpy(lean._feed(ids)), full._feed(ids), atol=1e-5)
    assert lean.special_ids == full.special_ids and lean.context_length == full.context_length
    prompt = ids[:10]
    assert lean.complete(prompt, [], 8).ids == full.complete(prompt, [], 8).ids
    code = ("import sys\nfrom cwmtui.model import open_backend\nb = open_backend(model=sys.argv[1], device='cpu')\n"
            "b.complete([259, 70], [], 4)\nprint('transformers' in sys.modules, 'torch' in sys.modules, type(b).__name__)\n")
    run = subprocess.run([sys.executable, "-c", code, str(model_dir)], capture_output=True, text=True)
    assert run.stdout.split() == ["False", "False", "LeanBackend"], run.stderr


def test_server_options_without_a_server_are_refused_before_the_app_starts(tmp_path, capsys):
    from cwmtui.cli import main

    program = tmp_path / "p.py"
    program.write_text("def f(x):  # << START_OF_TRACE\n    return x\n\nf(1)\n")
    assert main([str(program), "--api-key", "k"]) == 2
    assert capsys.readouterr().err.strip() == "cwmtui: error: --api-key is for --server URL; there is no --server"
