"""The user's keymap: bindings remapped by their ids, from a file in the platform's config folder.

``keymap.toml`` in ``platformdirs.user_config_dir("cwmtui")`` (``~/.config/cwmtui`` on Linux;
``$CWMTUI_KEYMAP`` names another file) maps a binding id, as ``?`` lists them, to the keys that
should trigger it::

    "divergence.next" = "d,right"
    "cursor.next" = "j"

An id cwmtui does not have, a value that is not text, or a file that is not TOML is one line
saying so; the keys that are understood still apply.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import platformdirs


def keymap_path() -> Path:
    override = os.environ.get("CWMTUI_KEYMAP")
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("cwmtui")) / "keymap.toml"


def load_keymap(known_ids: set[str], path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """``(keymap, problems)``: the bindings the file remaps (id -> keys), and one line per thing
    in it that could not be used. No file: an empty keymap."""
    path = path or keymap_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, [f"keymap {path}: not read ({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"]
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, keys in data.items():
        if binding_id not in known_ids:
            problems.append(f"keymap {path}: no binding {binding_id!r} (press ? for the ids)")
        elif not isinstance(keys, str) or not keys.strip():
            problems.append(f"keymap {path}: {binding_id!r} needs its keys as text, e.g. \"d,right\"")
        else:
            keymap[binding_id] = keys.replace(" ", "")
    return keymap, problems
