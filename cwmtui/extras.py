"""The optional parts of the install: the one-line error that names the extra to install when
a module of one is missing.

The core install (the TUI, the headless verbs, the bundled model, ``--server`` and ``--replay``)
needs neither torch nor transformers; ``pip install 'cwmtui[hf]'`` adds them for ``--model``.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def missing(extra: str, what: str, module: str) -> str:
    """The one line for a missing optional module."""
    return f"{what} needs {module}, which the core install leaves out: pip install 'cwmtui[{extra}]'"


def require(module: str, extra: str, what: str, error: type[Exception]) -> ModuleType:
    """Import ``module``, or raise ``error`` with :func:`missing`'s line."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise error(missing(extra, what, module.split(".")[0])) from None
