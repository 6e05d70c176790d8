"""The bundled model opened without transformers, so its first frame is on screen quickly.

Importing transformers' Llama costs seconds on these CPUs (it pulls in torch._dynamo, the
generation utilities, the tokenizer machinery) before a 2M-parameter model can decode a token.
A small Llama in safetensors with the project's byte tokenizer (the bundled model, or any
``cwmtui train --export`` directory) needs none of it: :class:`LlamaDecoder` runs its weights
from the file and :class:`ByteTokenizer` maps bytes to ids. The directory stays a regular
Hugging Face one — ``AutoModelForCausalLM`` / ``AutoTokenizer`` load it with the same logits and
ids (tests check), and ``--model DIR`` with anything else goes through transformers.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from .backend import ModelError, Progress
from .byte_tokenizer import ByteTokenizer
from .hf import TransformersBackend, _size, check_model_dir, eos_ids, model_label, read_json
from .tokenizer import first_line

_MAX_PARAMS = 50_000_000  # beyond this, transformers' batched kernels are worth their import


def lean_fits(path: str, device: str = "auto") -> bool:
    """Can ``path`` be opened by :class:`LeanBackend` on ``device``? A single safetensors file,
    a supported Llama config of at most 50M parameters, the byte tokenizer, and the CPU (``auto``
    means the CPU only where there is no CUDA GPU)."""
    from .llama_decoder import LlamaDecoder

    if device not in ("auto", "cpu"):
        return False
    config = read_json(os.path.join(path, "config.json"))
    if not config or not os.path.isfile(os.path.join(path, "model.safetensors")):
        return False
    if not LlamaDecoder.supports_config(config) or not ByteTokenizer.fits(path):
        return False
    try:
        hidden, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
        params = config["vocab_size"] * hidden + layers * (4 * hidden * hidden + 3 * hidden * inter)
    except (KeyError, TypeError):
        return False
    if params > _MAX_PARAMS:
        return False
    if device == "auto":  # a GPU, if there is one, is for transformers
        return not _gpu_present()
    return True


def _gpu_present() -> bool:
    """Is there a GPU torch could use? Asked of torch only where the system shows a GPU device
    (NVIDIA or ROCm), since importing torch costs seconds."""
    import glob

    if not (glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")):
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


class LeanBackend(TransformersBackend):
    """:class:`TransformersBackend`'s decoding (its cache bookkeeping and sampling) on the numpy
    :class:`LlamaDecoder` alone, with the byte tokenizer: neither torch nor transformers is
    imported."""

    def __init__(self, path: str, progress: Progress | None = None, name: str | None = None) -> None:
        report = progress or (lambda stage, fraction: None)
        path = os.path.abspath(os.path.expanduser(path))
        check_model_dir(path)
        report("loading weights", 0.0)
        from .llama_decoder import LlamaDecoder

        self.path = path
        self.name = name or path
        self._torch = None
        self._tokens = ByteTokenizer(path)
        self.tokenizer = None
        self.special_ids = self._tokens.special_ids
        self._byte_level = True  # decodes under the frame grammar with the byte automaton
        self._byte_grammar = None
        self._guided = None
        self.constrained_by_default = name == "bundled"
        try:
            self._lean = LlamaDecoder.from_directory(path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelError(f"{path}: cannot load the model: {first_line(exc)}") from None
        config = read_json(os.path.join(path, "config.json"))
        generation = read_json(os.path.join(path, "generation_config.json"))
        self.model = None
        self.device = "cpu"
        self.dtype = "float32"
        self._eos_ids = eos_ids(self.special_ids, (config.get("eos_token_id"), generation.get("eos_token_id")))
        self.context_length = config.get("max_position_embeddings")
        self._cache = None
        self._cached: list[int] = []
        self._logits = None
        params = self._lean.parameters
        label = model_label(path, name)
        self.description = f"{label} · {_size(params)} params · cpu · fp32 · lean decoder"
        report("ready", 1.0)

    # numpy in place of torch
    def _from_lean(self, logits):
        return logits

    def _generator(self, seed: int):
        return np.random.default_rng(seed)

    def _inference(self):
        return contextlib.nullcontext()

    _out_of_memory = MemoryError

    @staticmethod
    def _masked(logits, allowed):
        masked = np.full(logits.shape, -np.inf, dtype=logits.dtype)
        masked[allowed] = logits[allowed]
        return masked

    def _choose(self, logits, temperature: float, top_p: float, generator) -> int:
        """The next id: argmax when greedy, else a seeded nucleus sample."""
        if temperature <= 0.0:
            return int(np.argmax(logits))
        scaled = logits.astype(np.float64) / temperature
        probs = np.exp(scaled - scaled.max())
        probs /= probs.sum()
        if top_p < 1.0:
            order = np.argsort(-probs, kind="stable")
            sorted_probs = probs[order]
            sorted_probs[(np.cumsum(sorted_probs) - sorted_probs) >= top_p] = 0.0
            return int(order[generator.choice(len(order), p=sorted_probs / sorted_probs.sum())])
        return int(generator.choice(len(probs), p=probs))

    def close(self) -> None:
        self.reset()
        self._lean = None
