"""The command-line options that pick a world model and how it decodes, shared by every verb
that runs one, and the backend and rollout options they give."""

from __future__ import annotations

import argparse

from ..model.backend import FGSERVE_NO_GRAMMAR, Backend, ModelError, Progress
from ..model.opening import open_backend
from ..model.rollout import RolloutOptions


def _device(value: str) -> str:
    if value in ("auto", "cpu", "cuda"):
        return value
    if value.startswith("cuda:") and value[5:].isdigit():
        return value
    raise argparse.ArgumentTypeError(f"invalid device {value!r} (choose auto, cpu, cuda or cuda:N)")


def _number(kind: type, fits, need: str):
    """An argparse type: ``kind`` (int or float) of the text, refused unless ``fits`` it."""
    def parse(value: str):
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a {'whole number' if kind is int else 'number'}: {value!r}") from None
        if not fits(number):
            raise argparse.ArgumentTypeError(f"{need}: {value!r}")
        return number

    return parse


_positive_int = _number(int, lambda n: n >= 1, "must be at least 1")
_positive_float = _number(float, lambda n: 0.0 < n < float("inf"), "must be positive and finite")
_temperature = _number(float, lambda n: 0.0 <= n < float("inf"), "must be 0 (greedy) or more")
_top_p = _number(float, lambda n: 0.0 < n <= 1.0, "must be in (0, 1]")


def add_model_options(parser: argparse.ArgumentParser, bundled_by_default: bool = True) -> None:
    """The options every verb that runs a world model shares. ``bundled_by_default``: without a
    model option the verb uses the bundled model (False: it runs no model, as ``cwmtui open``)."""
    default = RolloutOptions()
    group = parser.add_argument_group("world model")
    bundled = "'bundled' (the default)" if bundled_by_default else "'bundled' (without a model option, none runs)"
    group.add_argument("--model", metavar="PATH|bundled", default=None, help=f"a local Hugging Face model directory, or {bundled}: the small byte-level CWM shipped with cwmtui")
    group.add_argument("--device", type=_device, default="auto", metavar="auto|cpu|cuda|cuda:N", help="where a --model runs (default auto: the GPU when there is one; bf16 on GPU, fp32 on CPU)")
    group.add_argument("--server", metavar="URL", action="append", help="an OpenAI-compatible server instead of a local model, e.g. http://localhost:8000 (vllm serve facebook/cwm); give it again for each replica of the same model (one vllm serve per GPU or node): calls are spread over them by load, a rollout stays on its replica, a replica that fails is marked down and its calls go to the others")
    group.add_argument("--server-timeout", type=_positive_float, default=300.0, metavar="S", help="the most one call to --server may take, retries included (default 300 s): a server that never answers, or drips its answer, is given up on")
    group.add_argument("--server-kind", choices=("vllm", "fgserve"), default="vllm", help="the server's protocol: vllm (/v1/completions, the default) or fgserve (Meta's /completions)")
    group.add_argument("--api-key", metavar="KEY", help="the API key of a --server started with 'vllm serve --api-key' (default: $VLLM_API_KEY; never $OPENAI_API_KEY)")
    group.add_argument("--served-model", metavar="NAME", help="which model (or LoRA adapter) of a --server serving several to prompt")
    group.add_argument("--tokenizer", metavar="PATH|cwm", help="for --server (default: the server's /tokenize endpoint) or --replay token counts: Meta's tokenizer.model, a Hugging Face tokenizer directory, or 'cwm' (CWM's own tokenizer, the cwm-tokenizer extra)")
    group.add_argument("--lens-tokenizer", metavar="cwm|PATH", help="split values in the token lens with this tokenizer instead of the model's: 'cwm' (CWM's own BPE, the cwm-tokenizer extra: the string-valued-state analysis in CWM's tokens, beside the byte-level bundled model or a replay), Meta's tokenizer.model, or a Hugging Face tokenizer directory")
    group.add_argument("--replay", metavar="FILE.jsonl", help="open recorded generations instead of running a model (one JSON object per line)")
    group.add_argument("--id", dest="replay_id", metavar="ID", help="which record of --replay to open (needed when the file has several)")
    group.add_argument("--temperature", type=_temperature, default=default.temperature, metavar="T", help="sampling temperature (default 0: greedy)")
    group.add_argument("--top-p", type=_top_p, default=default.top_p, metavar="P", help="nucleus sampling threshold (default 1)")
    group.add_argument("--seed", type=int, default=default.seed, metavar="N", help=f"sampling seed (default {default.seed})")
    group.add_argument("--token-budget", type=_positive_int, default=default.token_budget, metavar="N", help=f"tokens the whole model trace may take (default {default.token_budget})")
    group.add_argument("--frame-tokens", type=_positive_int, default=default.frame_tokens, metavar="N", help=f"tokens one frame may take before it counts as a format error (default {default.frame_tokens}; under the frame grammar a local model, bundled or --model, closes the frame in time instead; a --server's grammar cannot)")
    grammar = group.add_mutually_exclusive_group()
    grammar.add_argument("--constrain", dest="constrain", action="store_true", default=None, help="decode under the program's frame grammar: events, JSON locals of its own names, its own source lines, so every frame parses and a divergence is about code (the default for the bundled model; a --model directory needs the constrain extra, a --server vLLM's structured output)")
    grammar.add_argument("--free", dest="constrain", action="store_false", help="decode without the frame grammar: the raw model, format errors and all (the default for any model but the bundled one)")


def backend_from_args(args: argparse.Namespace, progress: Progress | None = None) -> Backend:
    """The backend chosen by :func:`add_model_options` options."""
    check_constrain(args)
    return open_backend(
        model=getattr(args, "model", None),
        device=getattr(args, "device", "auto"),
        server=getattr(args, "server", None),
        server_kind=getattr(args, "server_kind", "vllm"),
        tokenizer=getattr(args, "tokenizer", None),
        replay=getattr(args, "replay", None),
        replay_id=getattr(args, "replay_id", None),
        progress=progress,
        api_key=getattr(args, "api_key", None),
        served_model=getattr(args, "served_model", None),
        lens_tokenizer=getattr(args, "lens_tokenizer", None),
        server_timeout=getattr(args, "server_timeout", 300.0),
        cache_tokens=(getattr(args, "token_budget", None) or 8192) + 4096,  # the trace and a prompt of up to 4,096 tokens
    )


def rollout_options_from_args(args) -> RolloutOptions:
    """RolloutOptions from the options :func:`add_model_options` adds. Without --constrain or
    --free the constraint is the model's default (the bundled model's: constrained), which the
    first rollout writes into the options, so sessions and results record which it was."""
    default = RolloutOptions()
    return RolloutOptions(
        token_budget=getattr(args, "token_budget", default.token_budget),
        frame_tokens=getattr(args, "frame_tokens", default.frame_tokens),
        max_frames=default.max_frames,
        temperature=getattr(args, "temperature", default.temperature),
        top_p=getattr(args, "top_p", default.top_p),
        seed=getattr(args, "seed", default.seed),
        constrain=getattr(args, "constrain", default.constrain),
    )


def check_constrain(args) -> None:
    """--constrain where no frame grammar can run, refused in one line before anything opens."""
    if getattr(args, "constrain", None) is not True:
        return
    if getattr(args, "replay", None):
        raise ModelError("--constrain needs a live model: a --replay reproduces the recorded generations as they were")
    if getattr(args, "server", None) and getattr(args, "server_kind", "vllm") == "fgserve":
        raise ModelError(FGSERVE_NO_GRAMMAR)
