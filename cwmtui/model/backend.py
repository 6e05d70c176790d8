"""The backend protocol every world model speaks, and the command-line options that pick one.

A backend knows the ids of the CWM special tokens, encodes text without special-token parsing,
decodes ids, and completes a prompt given as token ids until a stop id. Prefix reuse is the
backend's job: a prompt that extends the previous one only costs its new tokens.

Nothing here imports torch or transformers; the backends that need them import them when they
are opened.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..trace import tokens
from ..trace.render import Special

#: where the bundled model lives (a Hugging Face directory)
BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")

#: ``progress(stage, fraction)``: what a backend is doing while it opens (fraction 0..1 or None)
Progress = Callable[[str, "float | None"], None]


class ModelError(Exception):
    """A model or server problem, explained to the user in one line."""


#: what step/force on a replay says
REPLAY_OVERRIDE = (
    "this is a replay of recorded generations: overrides need a live model (--model or --server)"
)


@dataclass
class Completion:
    """What one ``complete()`` call produced.

    ``ids``: the generated ids, ending with the stop id (or end of text) when one was hit.
    ``processed``: prompt tokens the model had to run for this call (not served from a cache).
    ``fed_back``: generated tokens that were run through the model to generate the next one.
    ``stopped``: ``"stop"`` (a stop id), ``"eos"`` (end of text), ``"length"`` (max_new_tokens),
    ``"cancelled"``, or ``"end"`` (a replay has no more recorded tokens).
    """

    ids: list[int]
    processed: int
    stopped: str
    fed_back: int = 0

    @property
    def work(self) -> int:
        """Token positions the model ran for this call."""
        return self.processed + self.fed_back


def is_cancelled(cancel) -> bool:
    """``cancel`` may be None, a ``threading.Event``-like object, or a callable."""
    if cancel is None:
        return False
    is_set = getattr(cancel, "is_set", None)
    if is_set is not None:
        return bool(is_set())
    return bool(cancel())


class Backend:
    """Base class of the backends: the protocol plus the id <-> segment plumbing they share."""

    name: str = ""
    description: str = ""
    special_ids: dict[str, int]
    can_generate: bool = True
    context_length: int | None = None  # positions the model can attend over, when known
    warning: str | None = None  # one line the user should see on opening (e.g. layers offloaded to CPU)
    #: what splits values in the token lens when it is not the model's own tokenizer
    #: (``--lens-tokenizer cwm``: CWM's BPE beside the byte-level bundled model or a replay)
    lens_tokenizer = None

    # -- the protocol ----------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def complete(
        self,
        prompt_ids: Sequence[int],
        stop_ids: Iterable[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        cancel=None,
    ) -> Completion:
        """Continue ``prompt_ids`` until a stop id, end of text or ``max_new_tokens``.

        ``prompt_ids`` is lent for the call: the rollout passes its own growing list (copying
        it every frame would make a long trace quadratic), so a backend copies what it keeps."""
        raise NotImplementedError

    def token_pieces(self, text: str) -> list[str]:
        """How the lens tokenizer (by default the model's own) splits ``text``: one string per
        token (bytes of a character that the tokenizer split are kept together, so the pieces
        always join back to ``text``)."""
        return split_pieces(self.lens_tokenizer or self, text)

    @property
    def lens_label(self) -> str:
        """Whose tokens the token lens shows, for its title."""
        if self.lens_tokenizer is not None:
            return f"{getattr(self.lens_tokenizer, 'where', 'the lens tokenizer')} (--lens-tokenizer)"
        return "the model's tokenizer"

    def close(self) -> None:
        pass

    def interrupt(self) -> None:
        """From another thread: make the call in progress return now (cancelled), e.g. a network
        read that would block quitting. A local model's calls check their cancel between tokens."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- shared plumbing -------------------------------------------------------------------
    def special_id(self, token: str) -> int:
        return self.special_ids[token]

    @property
    def eos_id(self) -> int:
        return self.special_ids[tokens.END_OF_TEXT]

    def encode_segments(self, segments: Iterable[str]) -> list[int]:
        """Ids of rendered segments: text pieces encoded one by one, special ids spliced in."""
        ids: list[int] = []
        special = self.special_ids
        for segment in segments:
            if isinstance(segment, Special):
                ids.append(special[str(segment)])
            elif segment:
                ids.extend(self.encode(segment))
        return ids

    def segments(self, ids: Sequence[int]) -> list[str]:
        """Generated ids as segments: runs of ordinary ids decoded to text, the CWM special ids
        as :class:`Special` pieces. A special-token string the model spelled out with ordinary
        tokens stays text, so it cannot be mistaken for structure."""
        by_id = self._specials_by_id()
        out: list[str] = []
        run: list[int] = []
        for token in ids:
            special = by_id.get(token)
            if special is None:
                run.append(token)
                continue
            if run:
                out.append(self.decode(run))
                run = []
            out.append(special)
        if run:
            out.append(self.decode(run))
        return out

    def _specials_by_id(self) -> dict[int, Special]:
        cached = getattr(self, "_special_map", None)
        if cached is None:
            cached = {i: Special(t) for t, i in self.special_ids.items()}
            self._special_map = cached
        return cached


def split_pieces(tokenizer, text: str) -> list[str]:
    """``text`` as ``tokenizer`` (anything with ``encode`` and ``decode``) splits it."""
    pieces: list[str] = []
    pending: list[int] = []
    for token in tokenizer.encode(text):
        pending.append(token)
        piece = tokenizer.decode(pending)
        if piece and not piece.endswith("\ufffd"):
            pieces.append(piece)
            pending = []
    if pending:
        pieces.append(tokenizer.decode(pending))
    return pieces


def check_special_ids(found: dict[str, int | None], where: str) -> dict[str, int]:
    """Every CWM special token must be one id; say which are missing otherwise."""
    missing = [t for t in tokens.SPECIAL_TOKENS if found.get(t) is None]
    if missing:
        raise ModelError(
            f"{where}: the tokenizer has no single token for {', '.join(missing)} "
            "(not a CWM tokenizer)"
        )
    return {t: int(found[t]) for t in tokens.SPECIAL_TOKENS}


def check_text_stays_text(tokenizer, where: str) -> None:
    """A special token's *string* in a program must encode as text, never as the special id:
    a source line holding ``"<|frame_sep|>"`` would otherwise end a frame in the prompt."""
    for token in tokens.SPECIAL_TOKENS:
        if tokenizer.special_ids[token] in tokenizer.encode(token):
            raise ModelError(
                f"{where}: the tokenizer turns the text {token!r} into the special token "
                "(it must stay text inside a program): not usable for traces"
            )


# -- command-line options --------------------------------------------------------------------


def _device(value: str) -> str:
    if value in ("auto", "cpu", "cuda"):
        return value
    if value.startswith("cuda:") and value[5:].isdigit():
        return value
    raise argparse.ArgumentTypeError(f"invalid device {value!r} (choose auto, cpu, cuda or cuda:N)")


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value!r}")
    return number


def _positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be positive and finite: {value!r}")
    return number


def _temperature(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not number >= 0.0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 (greedy) or more: {value!r}")
    return number


def _top_p(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 < number <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1]: {value!r}")
    return number


def add_model_options(parser: argparse.ArgumentParser, bundled_by_default: bool = True) -> None:
    """The options every verb that runs a world model shares. ``bundled_by_default``: without a
    model option the verb uses the bundled model (False: it runs no model, as ``cwmtui open``)."""
    from .rollout import RolloutOptions

    default = RolloutOptions()
    group = parser.add_argument_group("world model")
    bundled = "'bundled' (the default)" if bundled_by_default else "'bundled' (without a model option, none runs)"
    group.add_argument("--model", metavar="PATH|bundled", default=None, help=f"a local Hugging Face model directory, or {bundled}: the small byte-level CWM shipped with cwmtui")
    group.add_argument("--device", type=_device, default="auto", metavar="auto|cpu|cuda|cuda:N", help="where a --model runs (default auto: the GPU when there is one; bf16 on GPU, fp32 on CPU)")
    group.add_argument("--server", metavar="URL", help="an OpenAI-compatible server instead of a local model, e.g. http://localhost:8000 (vllm serve facebook/cwm)")
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
    group.add_argument("--frame-tokens", type=_positive_int, default=default.frame_tokens, metavar="N", help=f"tokens one frame may take before it counts as a format error (default {default.frame_tokens})")


def open_backend(
    model: str | None = None,
    device: str = "auto",
    server: str | None = None,
    server_kind: str = "vllm",
    tokenizer: str | None = None,
    replay: str | None = None,
    replay_id: str | None = None,
    progress: Progress | None = None,
    cache_tokens: int | None = None,
    api_key: str | None = None,
    served_model: str | None = None,
    lens_tokenizer: str | None = None,
    server_timeout: float = 300.0,
) -> Backend:
    """Open the backend the options name; raises ModelError with a one-line reason.

    ``cache_tokens``: positions a local model's KV cache must hold (its GPU fit check).

    ``model`` may also be the parsed options of :func:`add_model_options` (an argparse
    Namespace), as :func:`backend_from_args` takes them.
    """
    if isinstance(model, argparse.Namespace):
        return backend_from_args(model, progress=progress)
    lens = None
    if lens_tokenizer is not None:
        from .tokenizer import load_any_tokenizer

        lens = load_any_tokenizer(lens_tokenizer)  # before the model: a bad path costs no load
    backend = _open_model(model, device, server, server_kind, tokenizer, replay, replay_id, progress, cache_tokens, api_key, served_model, server_timeout)
    backend.lens_tokenizer = lens
    return backend


def _open_model(model, device, server, server_kind, tokenizer, replay, replay_id, progress, cache_tokens, api_key, served_model, server_timeout) -> Backend:
    chosen = [name for name, value in (("--model", model), ("--server", server), ("--replay", replay)) if value]
    if len(chosen) > 1:
        raise ModelError(f"{' and '.join(chosen)} cannot be used together: pick one world model")
    if replay_id is not None and not replay:
        raise ModelError("--id selects a record of --replay FILE; there is no --replay")
    for option, value in (("--api-key", api_key), ("--served-model", served_model)):
        if value is not None and not server:
            raise ModelError(f"{option} is for --server URL; there is no --server")
    if replay:
        from .replay import ReplayBackend

        return ReplayBackend.open(replay, replay_id, tokenizer=tokenizer)
    if server:
        from .server import ServerBackend

        return ServerBackend(server, kind=server_kind, tokenizer=tokenizer, api_key=api_key, served_model=served_model, timeout=server_timeout)
    if tokenizer:
        raise ModelError("--tokenizer is for --server or --replay; a --model directory has its own tokenizer")
    if model is None or model == "bundled":
        return open_bundled(device=device, progress=progress)
    return open_model_dir(model, device=device, progress=progress, cache_tokens=cache_tokens)


def open_model_dir(
    path: str,
    device: str = "auto",
    progress: Progress | None = None,
    name: str | None = None,
    cache_tokens: int | None = None,
) -> Backend:
    """A local Hugging Face directory (or a model id such as ``facebook/cwm`` already in the
    local Hugging Face cache): through transformers, or for a small Llama with the byte
    tokenizer on the CPU (the bundled model) without it (:mod:`cwmtui.model.lean`)."""
    from .lean import LeanBackend, lean_fits

    from .hub import model_directory

    resolved = model_directory(path)
    if resolved != path:
        name, path = name or path, resolved
    if lean_fits(path, device):
        return LeanBackend(path, progress=progress, name=name)
    from .hf import DEFAULT_CACHE_TOKENS, TransformersBackend

    return TransformersBackend(
        path, device=device, progress=progress, name=name, cache_tokens=cache_tokens or DEFAULT_CACHE_TOKENS
    )


def bundled_problem() -> str | None:
    """Why the bundled model cannot be opened, or None when it is installed."""
    if not os.path.isdir(BUNDLED_DIR):
        return f"{BUNDLED_DIR} does not exist"
    for name in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(BUNDLED_DIR, name)):
            return f"{BUNDLED_DIR} has no {name}"
    return None


def open_bundled(device: str = "auto", progress: Progress | None = None) -> Backend:
    problem = bundled_problem()
    if problem:
        raise ModelError(
            f"the bundled model is not installed: {problem}; pass --model PATH, --server URL or --replay FILE"
        )
    return open_model_dir(BUNDLED_DIR, device=device, progress=progress, name="bundled")


def backend_from_args(args: argparse.Namespace, progress: Progress | None = None) -> Backend:
    """The backend chosen by :func:`add_model_options` options."""
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
