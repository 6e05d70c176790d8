"""A lean greedy decoder for small Llama checkpoints on CPU (the bundled byte-level CWM).

At a few million parameters, decoding one token through transformers' modules costs mostly
Python and dispatch overhead (cache objects, masks, hooks: about a millisecond per layer on
these CPUs), not arithmetic. This decoder runs the same weights with the fewest tensor
operations per token: one matmul for q, k, v and their rotated halves (RMSNorm weights and the
attention scale folded in), one for gate and up, a preallocated KV cache, rotary tables computed
once. Its logits match ``LlamaForCausalLM``'s to float rounding (a test checks).

It supports what the bundled model uses: Llama with RMSNorm, SiLU MLP, default RoPE, grouped or
full multi-head attention, no biases. ``LlamaDecoder.supports(model)`` says whether a model fits.
"""

from __future__ import annotations

from typing import Sequence


class LlamaDecoder:
    """Incremental decoding with a KV cache: ``feed(ids)`` returns the logits after the last id;
    ``crop(n)`` keeps the first n cached positions (a rewind)."""

    def __init__(self, model, max_len: int | None = None) -> None:
        import torch

        self.torch = torch
        cfg = model.config
        self.hidden = cfg.hidden_size
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(cfg, "head_dim", None) or self.hidden // self.heads
        self.eps = cfg.rms_norm_eps
        self.max_len = max_len or cfg.max_position_embeddings  # initial room; it grows on demand
        f32 = torch.float32

        def w(t):
            return t.detach().to(f32).contiguous()

        inner = model.model
        self.embed = w(inner.embed_tokens.weight)
        self.final_norm = w(inner.norm.weight)
        self.head = w(model.lm_head.weight).t().contiguous()  # [d, V]
        self.layers = []
        hd = self.head_dim
        half = hd // 2

        def rotated_rows(weight, heads):
            # rows of rotate_half(W x): per head, [-second half, first half]
            wh = weight.view(heads, hd, -1)
            return torch.cat([-wh[:, half:], wh[:, :half]], dim=1).reshape(heads * hd, -1)

        scale = hd ** -0.5
        for layer in inner.layers:
            att, mlp = layer.self_attn, layer.mlp
            # one matmul gives q, rotate_half(q), k, rotate_half(k), v; the RMSNorm weight and the
            # attention scale are folded into it (both are linear)
            q, k, v = w(att.q_proj.weight) * scale, w(att.k_proj.weight), w(att.v_proj.weight)
            fused = torch.cat([q, rotated_rows(q, self.heads), k, rotated_rows(k, self.kv_heads), v])
            qkv = (fused * w(layer.input_layernorm.weight)).t().contiguous()
            gate_up = torch.cat([w(mlp.gate_proj.weight), w(mlp.up_proj.weight)])
            gate_up = (gate_up * w(layer.post_attention_layernorm.weight)).t().contiguous()
            self.layers.append((qkv, w(att.o_proj.weight).t().contiguous(), gate_up, w(mlp.down_proj.weight).t().contiguous()))
        self.inter = inner.layers[0].mlp.gate_proj.weight.shape[0]
        rotary = inner.rotary_emb
        self.inv_freq = rotary.inv_freq.detach().to(f32)
        self.rope_scaling = float(getattr(rotary, "attention_scaling", 1.0) or 1.0)
        self.capacity = 0
        self.k = self.v = self.cos = self.sin = None
        self._grow(self.max_len)
        self.length = 0

    def _grow(self, need: int) -> None:
        """Room for ``need`` positions: the cache and rotary tables grow like transformers' (no
        hard context limit; past the trained context the model is on its own)."""
        torch = self.torch
        if need <= self.capacity:
            return
        size = max(need, 2 * self.capacity)
        freqs = torch.outer(torch.arange(size, dtype=torch.float32), self.inv_freq)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos = (emb.cos() * self.rope_scaling).contiguous()  # [size, head_dim]
        self.sin = (emb.sin() * self.rope_scaling).contiguous()
        shape = (len(self.layers), self.kv_heads, size, self.head_dim)
        k, v = torch.zeros(shape), torch.zeros(shape)
        if self.k is not None:
            k[:, :, : self.capacity] = self.k
            v[:, :, : self.capacity] = self.v
        self.k, self.v = k, v
        self.capacity = size

    @staticmethod
    def supports(model) -> bool:
        cfg = getattr(model, "config", None)
        if cfg is None or getattr(cfg, "model_type", "") != "llama":
            return False
        if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
            return False
        if getattr(cfg, "hidden_act", "silu") != "silu":
            return False
        rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
        kind = rope.get("rope_type", rope.get("type", "default")) if isinstance(rope, dict) else "default"
        return kind == "default"

    def crop(self, length: int) -> None:
        self.length = max(0, min(length, self.length))

    def _norm(self, x):
        return self.torch.nn.functional.rms_norm(x, (self.hidden,), eps=self.eps)

    def feed(self, ids: Sequence[int]):
        """Run ``ids`` after the cached positions; returns the logits after the last one [V]."""
        torch = self.torch
        n = len(ids)
        if n == 0:
            raise ValueError("feed() needs at least one id")
        start = self.length
        end = start + n
        self._grow(end)
        with torch.inference_mode():
            x = self.embed[torch.as_tensor(list(ids), dtype=torch.long)]  # [n, d]
            cos, sin = self.cos[start:end], self.sin[start:end]  # [n, hd]
            H, KV, hd = self.heads, self.kv_heads, self.head_dim
            q_size, kv_size = H * hd, KV * hd
            cos, sin = cos[:, None, :], sin[:, None, :]  # [n, 1, hd]
            for li, (qkv_w, o_w, gu_w, down_w) in enumerate(self.layers):
                qkv = self._norm(x) @ qkv_w
                a = 2 * q_size
                b = a + 2 * kv_size
                q2 = qkv[:, :a].view(n, 2, H, hd)
                k2 = qkv[:, a:b].view(n, 2, KV, hd)
                q = (q2[:, 0] * cos + q2[:, 1] * sin).transpose(0, 1)  # [H, n, hd], rotary applied
                k = (k2[:, 0] * cos + k2[:, 1] * sin).transpose(0, 1)
                v = qkv[:, b:].view(n, KV, hd).transpose(0, 1)
                self.k[li, :, start:end] = k
                self.v[li, :, start:end] = v
                keys = self.k[li, :, :end]
                values = self.v[li, :, :end]
                if KV != H:
                    keys = keys.repeat_interleave(H // KV, dim=0)
                    values = values.repeat_interleave(H // KV, dim=0)
                if n == 1:
                    out = torch.softmax(q @ keys.transpose(1, 2), dim=-1) @ values  # q is pre-scaled
                else:
                    mask = torch.ones(n, end, dtype=torch.bool).tril(diagonal=start)
                    out = torch.nn.functional.scaled_dot_product_attention(
                        q.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask=mask, scale=1.0
                    )[0]
                x = x + out.transpose(0, 1).reshape(n, q_size) @ o_w
                gu = self._norm(x) @ gu_w
                x = x + (torch.nn.functional.silu(gu[:, : self.inter]) * gu[:, self.inter :]) @ down_w
            self.length = end
            return (self._norm(x[-1]) * self.final_norm) @ self.head
