"""Tiny transformers models the model tests build themselves (random weights, the byte tokenizer
with the CWM special tokens), saved to a directory and opened through the real backend path.

:class:`ScriptedBackend` is the transformers backend with one change: at each position it emits
the token of a script instead of the argmax (the model still runs every token through its
forward pass and KV cache). With a random model that is the only way to get a trace with
structure, and it makes tests of forced actions and format errors say exactly what the "model"
wrote.
"""

from __future__ import annotations

from pathlib import Path

from cwmtui.model.hf import TransformersBackend
from cwmtui.trace.render import prompt_segments


def build_tiny_model(path: Path, seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    tokenizer = build_byte_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=8192,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|begin_of_text|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_cwm(path: Path, hidden: int = 32, layers: int = 4, heads: int = 4, kv_heads: int = 2,
                   sliding_window: int = 16, positions: int = 4096, seed: int = 0) -> Path:
    """A tiny random CwmForCausalLM (Meta's architecture: sliding-window layers between full
    ones, first and last full) with the byte tokenizer, saved to ``path``."""
    import torch
    from transformers import CwmConfig, CwmForCausalLM

    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    tokenizer = build_byte_tokenizer()
    kinds = ["full_attention"] + ["sliding_attention"] * (layers - 2) + ["full_attention"]
    config = CwmConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=hidden * 2 if hidden < 64 else hidden * 3,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=hidden // heads,
        max_position_embeddings=positions, sliding_window=sliding_window, layer_types=kinds,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|begin_of_text|>"), eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    CwmForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


class ScriptedBackend(TransformersBackend):
    """Emits ``script[position]`` (the script is a whole token sequence, prompt included) while
    running the real model; past the end of the script it emits end of text."""

    script: list[int] = []

    def _choose(self, logits, temperature, top_p, generator) -> int:
        position = len(self._cached)
        if position < len(self.script):
            return self.script[position]
        return self.eos_id


def script_for(backend, program, frames_text_segments) -> list[int]:
    """Token ids of the prompt of ``program`` followed by the given frame segments."""
    return backend.encode_segments(prompt_segments(program.source)) + backend.encode_segments(frames_text_segments)
