"""The transformers backend: any local Hugging Face causal LM directory, with a kept KV cache.

It decodes token by token with its own loop (not ``generate()``) so that the cache is exactly
the ids it has seen: a prompt that extends them runs only its new tokens, a rewind crops the
cache to the common prefix. Greedy by default; sampling is seeded per call and position, so the
same prompt gives the same tokens whatever came before.
"""

from __future__ import annotations

import inspect
import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from ..trace import tokens
from ..extras import require
from .backend import Backend, Completion, ModelError, Progress, is_cancelled

from .byte_tokenizer import BYTE_OFFSET, ByteTokenizer
from .tokenizer import HFTokenizer, first_line, refuse_custom_code

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
_INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
_PREFILL_CHUNK = 4096
#: transformers releases this backend is tested with (pyproject's hf extra says the same)
SUPPORTED_TRANSFORMERS = "transformers>=5.16.1,<5.26"
#: KV-cache positions the GPU fit check reserves by default: the default token budget and a
#: prompt of up to 4,096 tokens
DEFAULT_CACHE_TOKENS = 8192 + 4096
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


# -- the model directory ---------------------------------------------------------------------


def check_model_dir(path: str) -> list[str]:
    """Check that ``path`` is a complete model directory; returns its weight files."""
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such model directory")
    if not os.path.isdir(path):
        raise ModelError(f"{path}: not a directory (--model takes a Hugging Face model directory)")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ModelError(f"{path}: no config.json, so not a Hugging Face model directory")
    refuse_custom_code(path, ("config.json", "tokenizer_config.json", "generation_config.json"))
    files: list[str] = []
    for index_name in _INDEX_FILES:
        index_path = os.path.join(path, index_name)
        if os.path.isfile(index_path):
            try:
                with open(index_path, encoding="utf-8") as handle:
                    shards = sorted(set(json.load(handle)["weight_map"].values()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                raise ModelError(f"{path}: {index_name} is damaged (no weight_map)") from None
            missing = [s for s in shards if not os.path.isfile(os.path.join(path, s))]
            if missing:
                raise ModelError(
                    f"{path}: incomplete download: {len(missing)} of {len(shards)} weight shards "
                    f"missing (first: {missing[0]})"
                )
            files = [os.path.join(path, s) for s in shards]
            break
    else:
        for name in _WEIGHT_FILES:
            if os.path.isfile(os.path.join(path, name)):
                files = [os.path.join(path, name)]
                break
    if not files:
        raise ModelError(f"{path}: no weights (model.safetensors or model.safetensors.index.json)")
    for file in files:
        if file.endswith(".safetensors"):
            _check_safetensors(file)
    if not any(os.path.isfile(os.path.join(path, name)) for name in _TOKENIZER_FILES):
        raise ModelError(f"{path}: no tokenizer files (tokenizer.json or tokenizer_config.json)")
    return files


def _safetensors_header(file: str) -> tuple[dict, int]:
    """The header of a safetensors file and the size its tensors need; ModelError if damaged."""
    name = os.path.basename(file)
    try:
        size = os.path.getsize(file)
        with open(file, "rb") as handle:
            head = handle.read(8)
            if head.startswith(b"version "):
                raise ModelError(f"{file}: a Git LFS pointer, not the weights (run 'git lfs pull')")
            if len(head) < 8:
                raise ModelError(f"{file}: truncated ({size} bytes): download it again")
            (length,) = struct.unpack("<Q", head)
            if length > size - 8 or length > 100 << 20:
                raise ModelError(f"{file}: not a safetensors file, or truncated: download it again")
            header = json.loads(handle.read(length))
    except OSError as exc:
        raise ModelError(f"{file}: cannot read it ({exc.strerror or exc})") from None
    except ValueError:
        raise ModelError(f"{name}: damaged header: download it again") from None
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + length + end > size:
        raise ModelError(f"{file}: truncated ({size} of {8 + length + end} bytes): download it again")
    return header, 8 + length + end


def _check_safetensors(file: str) -> None:
    _safetensors_header(file)


def weight_bytes(files: list[str], bytes_per_value: int = 2) -> int:
    """Bytes the weights take in memory at ``bytes_per_value`` (2 for bf16)."""
    total = 0
    for file in files:
        if not file.endswith(".safetensors"):
            total += os.path.getsize(file)
            continue
        header, _ = _safetensors_header(file)
        for key, value in header.items():
            if key == "__metadata__":
                continue
            count = 1
            for dim in value["shape"]:
                count *= dim
            total += count * min(bytes_per_value, _DTYPE_BYTES.get(value["dtype"], 2))
    return total


def read_json(path: str) -> dict:
    """A JSON object from a file; {} when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kv_bytes_per_token(config: dict, bytes_per_value: int = 2) -> int:
    """Bytes the KV cache takes per position: keys and values of every layer (bf16 by
    default). CWM (64 layers, 8 KV heads of 128): 256 KiB a token."""
    nested = config.get("text_config")
    text = nested if isinstance(nested, dict) else config
    try:
        layers = int(text["num_hidden_layers"])
        heads = int(text.get("num_attention_heads") or 1)
        kv_heads = int(text.get("num_key_value_heads") or heads)
        head_dim = int(text.get("head_dim") or int(text["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return 0
    return 2 * layers * kv_heads * head_dim * bytes_per_value


@dataclass
class Placement:
    """Where the weights go: ``device_map`` and ``max_memory`` for ``from_pretrained``."""

    device_map: dict | str
    max_memory: dict | None
    label: str


def plan_placement(index: int, free: Sequence[int], weights: int, kv_cache: int, host_free: int = 0) -> Placement:
    """Load straight onto GPU ``index`` when the weights and the KV cache fit in its free
    memory (with 10% to spare); else let accelerate spread the layers over every GPU, leaving
    each its share of the cache, then over the host's free memory, then disk (see
    :func:`offload_warning`). Sizes in bytes; ``free`` per GPU."""
    need = weights + kv_cache
    if need * 1.1 <= free[index]:
        return Placement({"": index}, None, f"cuda:{index}")
    share = kv_cache // max(len(free), 1)
    budget: dict = {i: max(int(room * 0.9) - share, 0) for i, room in enumerate(free)}
    budget["cpu"] = int(host_free * 0.9)  # without it accelerate would skip the CPU for the disk
    return Placement("auto", budget, f"{len(free)} GPU(s) (device_map=auto)")


def host_free_memory() -> int:
    """Bytes of host memory available now (Linux: MemAvailable; elsewhere the free pages)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def offload_warning(device_map: dict | None) -> str | None:
    """One line when accelerate put part of the model on the CPU or disk (every token then moves
    those weights to the GPU: decoding is many times slower), else None."""
    if not isinstance(device_map, dict):
        return None
    places = [str(v) for v in device_map.values()]
    off = [p for p in places if p in ("cpu", "disk")]
    if not off:
        return None
    where = " and ".join(sorted(set(off), key=("cpu", "disk").index))
    return (
        f"{len(off)} of {len(places)} parts of the model did not fit in GPU memory and run from {where}: "
        "decoding will be many times slower (free GPU memory, lower --token-budget, or serve the model with vLLM)"
    )


def cache_argument(model) -> str:
    """The keyword the model's forward takes its KV cache under: ``cache`` from transformers
    5.24 on, ``past_key_values`` before (5.24+ still accept that as a deprecated alias)."""
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in parameters else "past_key_values"


# -- devices ---------------------------------------------------------------------------------


def resolve_device(spec: str | None):
    """``auto|cpu|cuda|cuda:N`` -> a torch.device, or ModelError."""
    import torch

    spec = spec or "auto"
    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ModelError(f"--device {spec}: no CUDA GPU is available here; use --device cpu")
        index = int(spec[5:]) if spec.startswith("cuda:") else 0
        count = torch.cuda.device_count()
        if index >= count:
            raise ModelError(f"--device {spec}: there {'is' if count == 1 else 'are'} only {count} GPU(s) (cuda:0..cuda:{count - 1})")
        return torch.device(f"cuda:{index}")
    raise ModelError(f"--device {spec!r}: choose auto, cpu, cuda or cuda:N")


class _LoadProgress:
    """A tqdm stand-in that reports transformers' loading loops to a progress callback."""

    def __init__(self, report, iterable=None, *args, desc=None, total=None, **kwargs) -> None:
        self.report = report
        self.iterable = iterable
        self.desc = (desc or "loading").lower()
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total = total
        self.n = 0
        self._last = -1.0

    def __iter__(self):
        for item in self.iterable:
            yield item
            self.update(1)

    def update(self, n=1) -> None:
        self.n += n or 1
        if self.total:
            fraction = min(self.n / self.total, 1.0)
            if fraction - self._last >= 0.01 or fraction == 1.0:
                self._last = fraction
                self.report(self.desc, fraction)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


# -- the backend -----------------------------------------------------------------------------


class TransformersBackend(Backend):
    """A local Hugging Face model run by transformers, keeping its KV cache between calls."""

    # transformers' and torch's objects, typed loosely: the lean backend (model/lean.py) reuses
    # this class with none of them (model and tokenizer None, device a string), and close() drops
    # the model
    model: Any
    tokenizer: Any
    device: Any
    _torch: Any
    _cache: Any
    _tokens: HFTokenizer | ByteTokenizer

    def __init__(
        self,
        path: str,
        device: str = "auto",
        progress: Progress | None = None,
        name: str | None = None,
        lean: bool | None = None,
        cache_tokens: int = DEFAULT_CACHE_TOKENS,
    ) -> None:
        """``lean``: decode through :class:`LlamaDecoder` (None: when the model is a small
        Llama in fp32 on CPU; False: always through transformers' forward and DynamicCache).
        ``cache_tokens``: positions the KV cache must hold (prompt and trace), in the GPU fit
        check."""
        report = progress or (lambda stage, fraction: None)
        path = os.path.abspath(os.path.expanduser(path))
        files = check_model_dir(path)
        torch = require("torch", "hf", "a --model directory", ModelError)
        transformers = require("transformers", "hf", "a --model directory", ModelError)
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        self.path = path
        self.name = name or path
        self._torch = torch
        target = resolve_device(device)
        dtype = torch.bfloat16 if target.type == "cuda" else torch.float32
        config = read_json(os.path.join(path, "config.json"))

        report("loading tokenizer", None)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()
        previous_hook = hf_logging.set_tqdm_hook(
            lambda factory, args, kwargs: _LoadProgress(report, *args, **kwargs)
        )
        try:
            try:
                tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
            except Exception as exc:  # transformers raises many kinds here
                raise ModelError(f"{path}: cannot load the tokenizer: {first_line(exc)}") from None
            self._tokens = HFTokenizer(tokenizer, path)
            self.tokenizer = tokenizer
            self.special_ids = self._tokens.special_ids
            self._byte_level = ByteTokenizer.fits(path)  # the bundled tokenizer: the byte automaton
            self._guided = None  # llguidance's grammars for this tokenizer, once asked
            self._byte_grammar = None
            self.constrained_by_default = name == "bundled"
            load_kwargs: dict = {"dtype": dtype, "local_files_only": True, "trust_remote_code": False}
            placement = str(target)
            if target.type == "cuda":
                require("accelerate", "hf", f"loading a model straight onto {target}", ModelError)
                free = [torch.cuda.mem_get_info(i)[0] for i in range(torch.cuda.device_count())]
                plan = plan_placement(
                    target.index or 0, free, weight_bytes(files, 2), kv_bytes_per_token(config) * cache_tokens,
                    host_free_memory(),
                )
                load_kwargs["device_map"] = plan.device_map
                if plan.max_memory is not None:
                    load_kwargs["max_memory"] = plan.max_memory
                placement = plan.label
            report("loading weights", 0.0)
            try:
                model = AutoModelForCausalLM.from_pretrained(path, **load_kwargs)
            except Exception as exc:
                raise ModelError(f"{path}: cannot load the model: {first_line(exc)}") from None
        finally:
            hf_logging.set_tqdm_hook(previous_hook)
            hf_logging.set_verbosity(verbosity)
        self.warning = offload_warning(getattr(model, "hf_device_map", None))
        if self.warning:
            placement += " · part offloaded"
        self._transformers_version = transformers.__version__
        self._cache_argument = cache_argument(model)
        model.eval()
        self.model = model
        self.device = model.get_input_embeddings().weight.device
        self.dtype = dtype
        self._eos_ids = self._find_eos_ids()
        self.context_length = getattr(model.config, "max_position_embeddings", None)
        self._cache = None
        self._cached: list[int] = []  # ids whose keys and values are in the cache
        self._logits = None  # the model's logits after the last cached id
        params = sum(p.numel() for p in model.parameters())
        self._lean = _lean_decoder(model, target, dtype, params) if lean is not False else None
        kind = "bf16" if dtype == torch.bfloat16 else "fp32"
        label = model_label(path, name)
        self.description = f"{label} · {_size(params)} params · {placement} · {kind}"
        if self._lean is not None:
            self.description += " · lean decoder"
        report("ready", 1.0)

    # -- tokens ------------------------------------------------------------------------------
    def _find_eos_ids(self) -> set[int]:
        configs = (getattr(self.model, "generation_config", None), self.model.config)
        return eos_ids(self.special_ids, [getattr(c, "eos_token_id", None) for c in configs if c is not None])

    def encode(self, text: str) -> list[int]:
        return self._tokens.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokens.decode(ids)

    # -- the cache ---------------------------------------------------------------------------
    def _new_cache(self):
        from transformers import DynamicCache

        # Plain (non-sliding) layers for every layer: the model still masks its sliding-window
        # layers, and the cache can be cropped back to any length.
        return DynamicCache()

    def _crop(self, length: int) -> None:
        if length >= len(self._cached):
            return
        if self._lean is not None:
            self._lean.crop(length)
            del self._cached[length:]
            self._logits = None
            return
        if length == 0 or self._cache is None:
            self._cache = self._new_cache()
        else:
            self._cache.crop(length - len(self._cached))
        del self._cached[length:]
        self._logits = None

    def _feed(self, ids: Sequence[int]):
        """Run ``ids`` through the model after the cached ones; returns the last logits."""
        torch = self._torch
        if self._lean is not None:
            self._lean.crop(len(self._cached))
            logits = self._from_lean(self._lean.feed(list(ids)))
            self._cached.extend(ids)
            self._logits = logits
            return logits
        if self._cache is None:
            self._cache = self._new_cache()
        logits = None
        for start in range(0, len(ids), _PREFILL_CHUNK):
            chunk = list(ids[start : start + _PREFILL_CHUNK])
            batch = torch.tensor([chunk], dtype=torch.long, device=self.device)
            cache = {self._cache_argument: self._cache}
            out = self.model(input_ids=batch, use_cache=True, logits_to_keep=1, **cache)
            logits = out.logits[0, -1]
            self._cached.extend(chunk)
            self._check_cache()
        self._logits = logits
        return logits

    def _check_cache(self) -> None:
        """The cache must hold every id fed so far: a transformers version that takes the cache
        under another name drops it into ``**kwargs`` and computes each call from nothing,
        giving wrong logits without an error. Fail loudly instead."""
        held = self._cache.get_seq_length()
        if held != len(self._cached):
            self.reset()
            raise ModelError(
                f"transformers {self._transformers_version} did not keep the KV cache "
                f"({held} of {len(self._cached)} tokens held, passed as {self._cache_argument}=): "
                f"the logits would be wrong; install a supported version ({SUPPORTED_TRANSFORMERS})"
            )

    def _from_lean(self, logits):
        """The lean decoder's numpy logits as this backend's arrays (torch, shared memory)."""
        return self._torch.from_numpy(logits)

    def reset(self) -> None:
        """Forget the cache (the next call runs its whole prompt)."""
        self._cache = None
        self._cached = []
        self._logits = None

    @property
    def cached_tokens(self) -> int:
        return len(self._cached)

    # -- decoding ----------------------------------------------------------------------------
    def _generator(self, seed: int):
        return self._torch.Generator().manual_seed(seed)

    def _inference(self):
        return self._torch.inference_mode()

    @property
    def _out_of_memory(self):
        return self._torch.OutOfMemoryError

    def _choose(self, logits, temperature: float, top_p: float, generator) -> int:
        """The next id: argmax when greedy, else a seeded nucleus sample."""
        torch = self._torch
        if temperature <= 0.0:
            return int(torch.argmax(logits))
        probs = torch.softmax(logits.float().cpu() / temperature, dim=-1)
        if top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True)
            cumulative = torch.cumsum(sorted_probs, dim=-1)
            sorted_probs[(cumulative - sorted_probs) >= top_p] = 0.0
            pick = torch.multinomial(sorted_probs, 1, generator=generator)
            return int(order[pick])
        return int(torch.multinomial(probs, 1, generator=generator))

    # -- the frame grammar (--constrain) -----------------------------------------------------
    def constraint_problem(self) -> str | None:
        if self._byte_level:
            return None
        from .guided import guidance_problem

        return guidance_problem(self.tokenizer)

    def _token_mask(self, constraint):
        """The mask of one generation under ``constraint``: the byte automaton for the byte
        tokenizer, llguidance for any other."""
        if self._byte_level:
            from .byte_constraint import ByteGrammar, FrameAutomaton

            grammar = self._byte_grammar
            if grammar is None or (grammar.grammar is not constraint.grammar and grammar.grammar != constraint.grammar):
                grammar = self._byte_grammar = ByteGrammar(constraint.grammar, self.special_ids, BYTE_OFFSET)
            return FrameAutomaton(grammar, constraint)
        if self._guided is None:
            from .guided import GuidedGrammars

            self._guided = GuidedGrammars(self.tokenizer, self.special_ids)
        return self._guided.filter(constraint)

    def _masked(self, logits, allowed):
        """``logits`` with every id but ``allowed`` (a numpy array of ids) at minus infinity."""
        torch = self._torch
        index = torch.from_numpy(allowed).to(logits.device)
        masked = torch.full_like(logits, float("-inf"))
        masked[index] = logits[index]
        return masked

    def complete(
        self,
        prompt_ids: Sequence[int],
        stop_ids,
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        cancel=None,
        constraint=None,
    ) -> Completion:
        n = len(prompt_ids)
        if n == 0:
            raise ModelError("cannot complete an empty prompt")
        if max_new_tokens <= 0:
            return Completion([], 0, "length")
        mask = self._token_mask(constraint) if constraint is not None else None
        stops = set(stop_ids)
        generator = self._generator(((seed or 0) * 1_000_003 + n) % (1 << 63)) if temperature > 0.0 else None
        with self._inference():
            cached = self._cached
            m = len(cached)
            if n >= m and prompt_ids[:m] == cached:
                common = m
            else:
                common = _common_prefix(cached, prompt_ids)
            try:
                return self._complete(prompt_ids, n, common, stops, max_new_tokens, temperature, top_p, generator, cancel, mask)
            except self._out_of_memory:
                self.reset()
                raise ModelError(
                    f"out of {self.device} memory at {n} tokens of context: lower --token-budget"
                ) from None

    def _complete(self, prompt_ids, n, common, stops, max_new_tokens, temperature, top_p, generator, cancel, mask=None) -> Completion:
        """The decoding loop: run what the cache lacks, then one token at a time to a stop.
        ``mask``: the frame grammar's (``allowed``, ``take``), or None."""
        m = len(self._cached)
        if common == n == m and self._logits is not None:
            logits = self._logits
            processed = 0
        else:
            keep = min(common, n - 1)
            self._crop(keep)
            processed = n - keep
            logits = self._feed(prompt_ids[keep:])
        out: list[int] = []
        stopped = "length"
        fed_back = 0
        while len(out) < max_new_tokens:
            if is_cancelled(cancel):
                stopped = "cancelled"
                break
            if mask is not None:
                allowed = mask.allowed(max_new_tokens - len(out))
                token = self._choose(self._masked(logits, allowed) if len(allowed) else logits, temperature, top_p, generator)
                if not mask.take(token):
                    mask = None  # (a subclass chose past the mask: the rest is its own)
            else:
                token = self._choose(logits, temperature, top_p, generator)
            out.append(token)
            if token in self._eos_ids:
                stopped = "eos"
                break
            if token in stops:
                stopped = "stop"
                break
            if len(out) == max_new_tokens:
                break
            logits = self._feed([token])
            fed_back += 1
        return Completion(out, processed, stopped, fed_back)

    def close(self) -> None:
        self.reset()
        self.model = None


def model_label(path: str, name: str | None) -> str:
    """What the status bar calls a model: the bundled one by that name, a model id
    (``facebook/cwm``) as given, a directory by its folder's name."""
    if name == "bundled":
        return "bundled byte CWM"
    if name and name != path and not os.path.isabs(name):
        return name  # a model id found in the Hugging Face cache, not the snapshot's hash
    return os.path.basename(os.path.normpath(path))


def eos_ids(special_ids: dict[str, int], declared) -> set[int]:
    """``<|end_of_text|>``'s id and every ``eos_token_id`` a config declares (an id or a list)."""
    ids = {special_ids[tokens.END_OF_TEXT]}
    for value in declared:
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(v for v in value if isinstance(v, int))
    return ids


def _lean_decoder(model, target, dtype, params: int):
    """The lean decoder for a small Llama in fp32 on CPU (the bundled model): the same logits
    with far fewer operations per token."""
    import torch

    from .llama_decoder import LlamaDecoder

    if target.type != "cpu" or dtype != torch.float32 or params > 50_000_000 or not LlamaDecoder.supports(model):
        return None
    return LlamaDecoder(model)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    limit = min(len(a), len(b))
    lo, hi = 0, limit
    # binary search on equal slices (C-speed compares) instead of a Python loop
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if list(a[:mid]) == list(b[:mid]):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _size(params: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= scale:
            return f"{params / scale:.3g}{unit}"
    return str(params)
