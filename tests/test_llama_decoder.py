"""The lean decoder gives the same logits as transformers' LlamaForCausalLM."""

import pytest

torch = pytest.importorskip("torch")

from cwmtui.model.llama_decoder import LlamaDecoder
from cwmtui.training.model import build_model


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    m = build_model("tiny", seed=5).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim > 1:
                p.normal_(std=0.1)
    return m


def test_prefill_steps_and_rewind_match_transformers(model):
    ids = torch.randint(3, 259, (1, 120), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        reference = model(input_ids=ids).logits[0]
    decoder = LlamaDecoder(model, max_len=256)
    assert LlamaDecoder.supports(model)
    logits = torch.from_numpy(decoder.feed(ids[0, :80].tolist()))
    assert torch.allclose(logits, reference[79], atol=1e-4)
    for t in range(80, 120):
        logits = torch.from_numpy(decoder.feed([int(ids[0, t])]))
        assert torch.allclose(logits, reference[t], atol=1e-4)
    decoder.crop(100)  # rewind, then feed the same tail again
    assert decoder.length == 100
    logits = torch.from_numpy(decoder.feed(ids[0, 100:120].tolist()))
    assert torch.allclose(logits, reference[119], atol=1e-4)
    assert int(logits.argmax()) == int(reference[119].argmax())


def test_the_cache_grows_past_its_initial_room(model):
    ids = torch.randint(3, 259, (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        reference = model(input_ids=ids).logits[0]
    decoder = LlamaDecoder(model, max_len=8)
    decoder.feed(ids[0, :6].tolist())
    for t in range(6, 40):
        logits = torch.from_numpy(decoder.feed([int(ids[0, t])]))
    assert decoder.capacity >= 40
    assert torch.allclose(logits, reference[39], atol=1e-4)


def test_a_long_prefill_in_blocks_matches_transformers(model):
    # prompts longer than one attention block (256 positions) are fed block by block
    ids = torch.randint(3, 259, (1, 600), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        reference = model(input_ids=ids).logits[0]
    decoder = LlamaDecoder(model)
    assert torch.allclose(torch.from_numpy(decoder.feed(ids[0].tolist())), reference[599], atol=1e-4)


def test_the_exported_directory_decodes_the_same_without_torch(model, tmp_path):
    from cwmtui.model.llama_decoder import read_safetensors
    from cwmtui.training.model import export

    export(model, str(tmp_path))  # bf16 storage
    weights = read_safetensors(str(tmp_path / "model.safetensors"))
    assert weights["model.norm.weight"].dtype.name == "float32"
    rounded = build_model("tiny").eval()
    rounded.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()})
    ids = list(range(3, 60))
    with torch.no_grad():
        reference = rounded(input_ids=torch.tensor([ids])).logits[0, -1]
    direct = LlamaDecoder.from_directory(str(tmp_path))
    assert torch.allclose(torch.from_numpy(direct.feed(ids)), reference, atol=1e-4)
