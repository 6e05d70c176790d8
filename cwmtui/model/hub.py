"""``--model ORG/NAME``: a model already in the local Hugging Face cache, found offline.

Every user's copy of Meta's CWM lives in the Hugging Face cache (``hf download facebook/cwm``
puts it there); ``--model facebook/cwm`` finds that snapshot with ``local_files_only``, so
nothing is ever downloaded. ``HF_HOME`` / ``HF_HUB_CACHE`` move the cache as usual.
"""

from __future__ import annotations

import os
import re

from ..extras import require
from .backend import ModelError

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def model_directory(spec: str) -> str:
    """``--model``'s directory: the path itself when it exists, else the cached snapshot of a
    model id such as ``facebook/cwm``."""
    path = os.path.expanduser(spec)
    if os.path.exists(path):
        return path
    return cached_model_dir(spec)


def cached_model_dir(spec: str) -> str:
    """The snapshot directory of model ``spec`` in the local cache, or ModelError."""
    if not _REPO_ID.match(spec) or spec.endswith((".", "-")) or ".." in spec:
        raise ModelError(f"{spec}: no such model directory")
    hub = require("huggingface_hub", "hf", f"--model {spec} (a model id in the Hugging Face cache)", ModelError)
    try:
        return hub.snapshot_download(repo_id=spec, local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - LocalEntryNotFoundError and the hub's other errors
        cache = getattr(getattr(hub, "constants", None), "HF_HUB_CACHE", "the Hugging Face cache")
        raise ModelError(
            f"{spec}: no such model directory, and not in the local Hugging Face cache ({cache}): "
            f"cwmtui downloads nothing; fetch it first with 'hf download {spec}' ({type(exc).__name__})"
        ) from None
