"""A lean greedy decoder for small Llama checkpoints on CPU (the bundled byte-level CWM), in numpy.

At a few million parameters, decoding one token through transformers' modules costs mostly
Python and dispatch overhead (cache objects, masks, hooks: about a millisecond per layer on
these CPUs), not arithmetic. This decoder runs the same weights with the fewest array operations
per token: one matmul for q, k, v and their rotated halves (RMSNorm weights and the attention
scale folded in), one for gate and up, a preallocated KV cache, rotary tables computed once. Its
logits match ``LlamaForCausalLM``'s to float rounding (a test checks).

It is numpy, not torch: numpy's per-operation overhead is lower at these sizes, and numpy imports
in a tenth of a second where torch takes two or more on these CPUs, so ``cwmtui`` shows the
bundled model's first frame soon after start-up (:mod:`cwmtui.model.lean` opens it from the
safetensors file, with no torch or transformers import at all).

It supports what the bundled model uses: Llama with RMSNorm, SiLU MLP, default RoPE, grouped or
full multi-head attention, no biases. ``LlamaDecoder.supports(model)`` says whether a model fits.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Sequence

import numpy as np

_PREFILL_CHUNK = 256  # query rows per attention block while prefilling (bounds the score matrix)


class LlamaDecoder:
    """Incremental decoding with a KV cache: ``feed(ids)`` returns the logits after the last id
    (a float32 numpy array); ``crop(n)`` keeps the first n cached positions (a rewind)."""

    def __init__(self, model, max_len: int | None = None) -> None:
        """From a loaded ``LlamaForCausalLM`` (torch)."""
        weights = {name: p.detach().float().cpu().numpy() for name, p in model.named_parameters()}
        if "lm_head.weight" not in weights:  # tied embeddings
            weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
        rotary = model.model.rotary_emb
        inv_freq = rotary.inv_freq.detach().float().cpu().numpy()
        self._build(_Config(model.config), weights, inv_freq, getattr(rotary, "attention_scaling", 1.0), max_len)

    @classmethod
    def from_directory(cls, path: str, max_len: int | None = None) -> "LlamaDecoder":
        """From a Hugging Face directory (``config.json`` + ``model.safetensors``) with neither
        torch nor transformers. ``supports_config`` must hold."""
        with open(os.path.join(path, "config.json"), encoding="utf-8") as handle:
            cfg = _Config(json.load(handle))
        weights = read_safetensors(os.path.join(path, "model.safetensors"))
        if "lm_head.weight" not in weights:
            weights["lm_head.weight"] = weights["model.embed_tokens.weight"]
        hd = cfg.head_dim
        inv_freq = (1.0 / (cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.int64).astype(np.float32) / hd))).astype(np.float32)
        self = cls.__new__(cls)
        self._build(cfg, weights, inv_freq, 1.0, max_len)
        return self

    def _build(self, cfg: "_Config", weights: dict, inv_freq, attention_scaling, max_len: int | None) -> None:
        _one_blas_thread()
        self.parameters = sum(t.size for t in {id(t): t for t in weights.values()}.values())  # tied counted once
        self.hidden = cfg.hidden_size
        self.heads = cfg.num_attention_heads
        self.kv_heads = cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.max_len = max_len or cfg.max_position_embeddings  # initial room; it grows on demand

        def w(name):
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.embed = w("model.embed_tokens.weight")
        self.final_norm = w("model.norm.weight")
        self.head = np.ascontiguousarray(w("lm_head.weight").T)  # [d, V]
        self.layers = []
        hd = self.head_dim
        half = hd // 2

        def rotated_rows(weight, heads):
            # rows of rotate_half(W x): per head, [-second half, first half]
            wh = weight.reshape(heads, hd, -1)
            return np.concatenate([-wh[:, half:], wh[:, :half]], axis=1).reshape(heads * hd, -1)

        scale = hd ** -0.5
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            # one matmul gives q, rotate_half(q), k, rotate_half(k), v; the RMSNorm weight and the
            # attention scale are folded into it (both are linear)
            q, k, v = w(p + "self_attn.q_proj.weight") * scale, w(p + "self_attn.k_proj.weight"), w(p + "self_attn.v_proj.weight")
            fused = np.concatenate([q, rotated_rows(q, self.heads), k, rotated_rows(k, self.kv_heads), v])
            qkv = np.ascontiguousarray((fused * w(p + "input_layernorm.weight")).T)
            gate_up = np.concatenate([w(p + "mlp.gate_proj.weight"), w(p + "mlp.up_proj.weight")])
            gate_up = np.ascontiguousarray((gate_up * w(p + "post_attention_layernorm.weight")).T)
            self.layers.append((qkv, np.ascontiguousarray(w(p + "self_attn.o_proj.weight").T), gate_up,
                                np.ascontiguousarray(w(p + "mlp.down_proj.weight").T)))
        self.inter = weights["model.layers.0.mlp.gate_proj.weight"].shape[0]
        self.inv_freq = np.asarray(inv_freq, dtype=np.float32)
        self.rope_scaling = float(attention_scaling or 1.0)
        self.capacity = 0
        empty = np.zeros((0,), np.float32)  # (until _grow sizes them, just below)
        self.k: np.ndarray = empty
        self.v: np.ndarray = empty
        self.cos: np.ndarray = empty
        self.sin: np.ndarray = empty
        self._grow(self.max_len)
        self.length = 0

    def _grow(self, need: int) -> None:
        """Room for ``need`` positions: the cache and rotary tables grow like transformers' (no
        hard context limit; past the trained context the model is on its own)."""
        if need <= self.capacity:
            return
        size = max(need, 2 * self.capacity)
        freqs = np.outer(np.arange(size, dtype=np.float32), self.inv_freq)
        emb = np.concatenate([freqs, freqs], axis=-1)
        self.cos = np.ascontiguousarray(np.cos(emb) * self.rope_scaling, dtype=np.float32)  # [size, head_dim]
        self.sin = np.ascontiguousarray(np.sin(emb) * self.rope_scaling, dtype=np.float32)
        shape = (len(self.layers), self.kv_heads, size, self.head_dim)
        k, v = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        if self.capacity:
            k[:, :, : self.capacity] = self.k
            v[:, :, : self.capacity] = self.v
        self.k, self.v = k, v
        self.capacity = size

    @staticmethod
    def supports(model) -> bool:
        cfg = getattr(model, "config", None)
        return cfg is not None and LlamaDecoder.supports_config(cfg)

    @staticmethod
    def supports_config(cfg) -> bool:
        """Does a Llama config (a transformers config or the dict of config.json) fit?"""
        cfg = _Config(cfg)
        if cfg.get("model_type", "") != "llama":
            return False
        if cfg.get("attention_bias", False) or cfg.get("mlp_bias", False):
            return False
        if cfg.get("hidden_act", "silu") != "silu":
            return False
        rope = cfg.get("rope_parameters", None) or cfg.get("rope_scaling", None) or {}
        kind = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        return kind == "default"

    def crop(self, length: int) -> None:
        self.length = max(0, min(length, self.length))

    def _norm(self, x):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)

    def feed(self, ids: Sequence[int]):
        """Run ``ids`` after the cached positions; returns the logits after the last one [V]."""
        ids = list(ids)
        if not ids:
            raise ValueError("feed() needs at least one id")
        for at in range(0, len(ids), _PREFILL_CHUNK):
            x = self._run(ids[at : at + _PREFILL_CHUNK])  # (at least one chunk: ids is not empty)
        return (self._norm(x[-1]) * self.final_norm) @ self.head

    def _run(self, ids: list[int]):
        """One block of positions through every layer; returns their hidden states [n, d]."""
        n = len(ids)
        start = self.length
        end = start + n
        self._grow(end)
        x = self.embed[np.asarray(ids, dtype=np.int64)]  # [n, d]
        cos, sin = self.cos[start:end, None, :], self.sin[start:end, None, :]  # [n, 1, hd]
        H, KV, hd = self.heads, self.kv_heads, self.head_dim
        q_size, kv_size = H * hd, KV * hd
        a, b = 2 * q_size, 2 * q_size + 2 * kv_size
        blocked = None
        if n > 1:  # query i (position start + i) sees keys up to start + i
            blocked = np.arange(end)[None, :] > (start + np.arange(n))[:, None]
        for li, (qkv_w, o_w, gu_w, down_w) in enumerate(self.layers):
            qkv = self._norm(x) @ qkv_w
            q2 = qkv[:, :a].reshape(n, 2, H, hd)
            k2 = qkv[:, a:b].reshape(n, 2, KV, hd)
            q = (q2[:, 0] * cos + q2[:, 1] * sin).transpose(1, 0, 2)  # [H, n, hd], rotary applied, pre-scaled
            self.k[li, :, start:end] = (k2[:, 0] * cos + k2[:, 1] * sin).transpose(1, 0, 2)
            self.v[li, :, start:end] = qkv[:, b:].reshape(n, KV, hd).transpose(1, 0, 2)
            keys, values = self.k[li, :, :end], self.v[li, :, :end]
            if KV != H:
                keys, values = np.repeat(keys, H // KV, axis=0), np.repeat(values, H // KV, axis=0)
            scores = q @ keys.transpose(0, 2, 1)  # [H, n, end]
            if blocked is not None:
                scores[:, blocked] = -np.inf
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            out = scores @ values  # [H, n, hd]
            x = x + out.transpose(1, 0, 2).reshape(n, q_size) @ o_w
            gu = self._norm(x) @ gu_w
            gate = gu[:, : self.inter]
            x = x + (gate / (1.0 + np.exp(-gate)) * gu[:, self.inter :]) @ down_w
        self.length = end
        return x


def _one_blas_thread() -> None:
    """numpy's BLAS on one thread, for the whole process. At this model's sizes a second thread
    gains nothing on an idle machine and, beside any other work, waits for the busy core at
    every matmul: a 858-token prefill took 1.5-1.8 s with OpenBLAS's default threads and 0.15 s
    with one, on 2 cores beside a training run. cwmtui uses BLAS for nothing else."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: str) -> dict:
    """The tensors of a .safetensors file as float32/int numpy arrays (bf16 widened), without
    torch: an 8-byte header length, a JSON header (dtype, shape, byte offsets), the raw data."""
    with open(path, "rb") as handle:
        data = handle.read()
    if len(data) < 8:
        raise ValueError("not a safetensors file (too short)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > len(data) - 8:
        raise ValueError("not a safetensors file (bad header length)")
    header = json.loads(data[8 : 8 + size])
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = data[base + lo : base + hi]
        shape = tuple(info["shape"])
        if info["dtype"] == "BF16":  # the high half of a float32
            array = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in _DTYPES:
            array = np.frombuffer(raw, dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"tensor {name}: dtype {info['dtype']} is not supported")
        out[name] = array.reshape(shape)
    return out


class _Config:
    """The fields the decoder reads, from a transformers config or a config.json dict."""

    def __init__(self, cfg) -> None:
        self._cfg: object = cfg._cfg if isinstance(cfg, _Config) else cfg

    def get(self, name: str, default=None):
        cfg = self._cfg
        value = cfg.get(name, default) if isinstance(cfg, dict) else getattr(cfg, name, default)
        return default if value is None else value

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "num_key_value_heads":
            return self.get(name) or self.num_attention_heads
        if name == "head_dim":
            return self.get(name) or self.hidden_size // self.num_attention_heads
        if name == "rope_theta":
            rope = self.get("rope_parameters") or {}
            return float(rope.get("rope_theta", self.get("rope_theta", 10000.0)))
        value = self.get(name)
        if value is None:
            raise AttributeError(f"the model config has no {name}")
        return value
