"""Opening a world model: the bundled one, a model directory, a server or a replay file.

Keyword arguments, no command-line parsing (``cli/model_options.py`` turns options into these).
Each backend module is imported only when it is opened, so the core install stays light.
"""

from __future__ import annotations

import os
from typing import Sequence

from .backend import Backend, ModelError, Progress

#: where the bundled model lives (a Hugging Face directory)
BUNDLED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")


def open_backend(
    model: str | None = None,
    device: str = "auto",
    server: str | Sequence[str] | None = None,
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

    ``server``: one URL, or several (replicas of one model: a
    :class:`~cwmtui.model.replicas.ReplicaBackend`; backends opened over the same URLs while
    one is open share its load and health). ``cache_tokens``: positions a local model's KV
    cache must hold (its GPU fit check).
    """
    lens = None
    if lens_tokenizer is not None:
        from .tokenizer import load_any_tokenizer

        lens = load_any_tokenizer(lens_tokenizer)  # before the model: a bad path costs no load
    backend = _open_model(model, device, server, server_kind, tokenizer, replay, replay_id, progress, cache_tokens, api_key, served_model, server_timeout)
    backend.lens_tokenizer = lens
    return backend


def _open_model(model, device, server, server_kind, tokenizer, replay, replay_id, progress, cache_tokens, api_key, served_model, server_timeout) -> Backend:
    servers = [server] if isinstance(server, str) else list(server or [])
    server = servers[0] if servers else None
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
    if len(servers) > 1:
        from .replicas import ReplicaBackend

        return ReplicaBackend(servers, kind=server_kind, tokenizer=tokenizer, api_key=api_key, served_model=served_model, timeout=server_timeout)
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
