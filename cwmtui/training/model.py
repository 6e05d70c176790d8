"""Shapes of the bundled byte-level CWM, and export to a Hugging Face directory."""

from __future__ import annotations

import json
import os
import re

from .documents import EOS_ID, PAD_ID, SPECIAL_IDS, VOCAB_USED

VOCAB_SIZE = (VOCAB_USED + 7) // 8 * 8  # 272
CONTEXT = 4096

#: name -> (hidden, layers, heads, intermediate). "small" is the bundled shape: 4 layers keep
#: greedy decoding fast on 2 CPU cores (per-layer overhead dominates at this size), and ~2M
#: parameters suit the few tens of millions of tokens a shared 2-core CPU trains in a day.
SIZES = {
    "tiny": (64, 2, 2, 192),
    "small": (192, 4, 3, 576),
    "deep": (192, 6, 3, 576),  # "small" grown deeper (``--init`` a small model: see ``grow_layers``)
    "base": (256, 4, 4, 768),
    "large": (384, 4, 6, 1024),
}


def build_config(size: str = "small"):
    from transformers import LlamaConfig

    hidden, layers, heads, inter = SIZES[size]
    return LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=CONTEXT,
        tie_word_embeddings=True,
        bos_token_id=SPECIAL_IDS["<|begin_of_text|>"],
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        attn_implementation="sdpa",
    )


def build_model(size: str = "small", seed: int = 0):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(build_config(size))


def layer_count(weights: dict) -> int:
    """How many decoder layers a Llama state dict holds."""
    found = [int(m.group(1)) for name in weights if (m := re.match(r"model\.layers\.(\d+)\.", name))]
    return max(found) + 1 if found else 0


#: the weights whose output feeds the residual stream: zeroed, a new layer adds nothing
RESIDUAL_OUTPUTS = ("self_attn.o_proj.weight", "mlp.down_proj.weight")


def grow_layers(weights: dict, layers: int) -> dict:
    """``weights`` of a Llama with fewer layers, laid out for ``layers`` layers without changing
    what the model computes: the old layers keep their order, spread evenly, and each new layer
    is a copy of the layer before it whose residual outputs (attention output and MLP down
    projections) are zero, so it starts as the identity and training grows it into a layer of its own."""
    old = layer_count(weights)
    if not 0 < old <= layers:
        raise ValueError(f"cannot grow {old} layers into {layers}")
    place = {i * layers // old: i for i in range(old)}  # new position -> old layer
    out = {name: t for name, t in weights.items() if not name.startswith("model.layers.")}
    source = None
    for position in range(layers):
        fresh = position not in place
        source = source if fresh else place[position]
        prefix = f"model.layers.{source}."
        for name, tensor in weights.items():
            if name.startswith(prefix):
                part = name[len(prefix):]
                copy = tensor.clone()
                if fresh and part in RESIDUAL_OUTPUTS:
                    copy.zero_()
                out[f"model.layers.{position}.{part}"] = copy
    return out


def export(model, out_dir: str, info: dict | None = None) -> None:
    """Save ``model`` as a Hugging Face directory: bf16 safetensors, config, generation config,
    and the byte tokenizer, loadable offline by AutoModelForCausalLM / AutoTokenizer."""
    import copy

    import torch
    from transformers import GenerationConfig

    from ..model.byte_tokenizer import build_byte_tokenizer

    os.makedirs(out_dir, exist_ok=True)
    clone = copy.deepcopy(model).to(torch.bfloat16)
    clone.config.architectures = ["LlamaForCausalLM"]
    clone.generation_config = GenerationConfig(
        bos_token_id=SPECIAL_IDS["<|begin_of_text|>"], eos_token_id=EOS_ID, pad_token_id=PAD_ID,
        do_sample=False,
    )
    clone.save_pretrained(out_dir, safe_serialization=True)
    build_byte_tokenizer().save_pretrained(out_dir)
    if info is not None:
        with open(os.path.join(out_dir, "training.json"), "w") as fh:
            json.dump(info, fh, indent=1, sort_keys=True)
            fh.write("\n")
