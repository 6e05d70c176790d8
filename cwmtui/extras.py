"""The optional parts of the install: which extra brings which import, and the one-line error
when it is missing.

The core install (the TUI, the headless verbs, the bundled model, ``--server`` and ``--replay``)
needs neither torch nor transformers; ``pip install 'cwmtui[hf]'`` adds them for ``--model``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: extra -> what it is for, as the error says it
EXTRAS = {
    "hf": "a --model directory through transformers (torch, transformers, accelerate)",
    "cwm-tokenizer": "Meta's tokenizer.model and CWM's own tokenizer (tiktoken, llama-models)",
    "plot": "cwmtui eval --plot (matplotlib)",
    "train": "cwmtui train (torch, transformers, matplotlib)",
}


def missing(extra: str, what: str, module: str) -> str:
    """The one line for a missing optional module."""
    return f"{what} needs {module}, which the core install leaves out: pip install 'cwmtui[{extra}]'"


def require(module: str, extra: str, what: str, error: type[Exception]) -> ModuleType:
    """Import ``module``, or raise ``error`` with :func:`missing`'s line."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise error(missing(extra, what, module.split(".")[0])) from None
