"""Themes: Textual CSS files in ``themes/``, chosen by name or by path.

A theme file is ordinary Textual CSS. Its ``$name: value;`` declarations are the theme's
colours: the ones Textual's own theme knows (``$primary``, ``$background``, ``$surface``, ...
and ``$dark: true|false``, ``$ansi: true|false``) and cwmtui's (``$cwm-*``, ``$syntax-*``).
They become a Textual :class:`~textual.theme.Theme`, so every widget, the footer and the command
palette follow them. Any rules in the file are added to the app's stylesheet after the
built-in ones, so a theme can restyle any widget.

Where the named themes live: ``cwmtui/themes`` (package data in a wheel; in the repository
it is a link to the top-level ``themes/`` folder, so an editable install and a checkout read
the same files), then the top-level ``themes/`` next to the package as a fallback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.css.stylesheet import Stylesheet, StylesheetParseError
from textual.css.tokenizer import TokenError
from textual.theme import Theme

from ..files import read_text

DEFAULT_THEME = "dark"

_PACKAGE = Path(__file__).resolve().parent.parent
THEME_DIRS = (_PACKAGE / "themes", _PACKAGE.parent / "themes")

_DECLARATION = re.compile(r"^\s*\$([A-Za-z_][\w-]*)\s*:\s*([^;{}]+?)\s*;", re.MULTILINE)
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_THEME_FIELDS = {
    "primary", "secondary", "warning", "error", "success", "accent",
    "foreground", "background", "surface", "panel", "boost",
}

#: Every cwmtui variable with the value used when a theme does not set it (the dark theme's).
VARIABLE_DEFAULTS = {
    "cwm-truth": "#5fafff",
    "cwm-model": "#d787ff",
    "cwm-diverge": "#ff5f5f",
    "cwm-diverge-background": "#5f0000",
    "cwm-changed": "#ffd75f",
    "cwm-off-path": "#af87d7",
    "cwm-pending": "#808080",
    "cwm-dim": "#8a8a8a",
    "cwm-cursor": "#264f78",
    "cwm-cursor-text": "#ffffff",
    "cwm-truth-line": "#1d3b53",
    "cwm-model-line": "#3b2d4f",
    "cwm-match": "#5fd75f",
    "cwm-badge": "#ffaf00",
    "syntax-keyword": "#ff79c6",
    "syntax-string": "#f1fa8c",
    "syntax-number": "#bd93f9",
    "syntax-comment": "#7f8c98",
    "syntax-function": "#50fa7b",
    "syntax-builtin": "#8be9fd",
    "syntax-operator": "#ff9e64",
}


class ThemeError(Exception):
    """A theme that cannot be found or read, explained in one line."""


@dataclass(frozen=True)
class ThemeFile:
    name: str
    path: Path
    css: str
    theme: Theme


def theme_names() -> list[str]:
    """Names of the themes shipped with cwmtui (the first folder that has any)."""
    for folder in THEME_DIRS:
        if folder.is_dir():
            names = sorted(p.stem for p in folder.glob("*.tcss"))
            if names:
                return names
    return []


def find_theme(spec: str) -> Path:
    """A theme file from a name (``light``) or a path (``my.tcss``, ``~/themes/x.tcss``)."""
    candidate = Path(spec).expanduser()
    if spec.endswith(".tcss") or "/" in spec or candidate.is_file():
        if candidate.is_file():
            return candidate
        if candidate.is_dir():
            raise ThemeError(f"theme file {spec!r} is a directory, not a .tcss file")
        raise ThemeError(f"theme file {spec!r} not found")
    for folder in THEME_DIRS:
        path = folder / f"{spec}.tcss"
        if path.is_file():
            return path
    names = ", ".join(theme_names()) or "none installed"
    raise ThemeError(f"no theme named {spec!r} (themes: {names}; or pass a .tcss path)")


def load_theme(spec: str) -> ThemeFile:
    path = find_theme(spec)
    try:
        css = read_text(path, "theme file (.tcss)", ThemeError)
    except ThemeError as exc:
        raise ThemeError(f"theme {exc}") from None
    return parse_theme(css, path)


def parse_theme(css: str, path: Path) -> ThemeFile:
    values = {name: value for name, value in _DECLARATION.findall(_COMMENT.sub("", css))}
    name = "cwmtui-" + path.stem
    fields = {k: v for k, v in values.items() if k in _THEME_FIELDS}
    if "primary" not in fields:
        raise ThemeError(f"theme {str(path)!r} does not set $primary")
    variables = {k: v for k, v in values.items() if k not in _THEME_FIELDS | {"dark", "ansi"}}
    theme = Theme(
        name=name,
        dark=values.get("dark", "true").lower() != "false",
        ansi=values.get("ansi", "false").lower() == "true",
        variables=variables,
        **fields,
    )
    _check(css, path, theme)
    return ThemeFile(path.stem, path, css, theme)


def _check(css: str, path: Path, theme: Theme) -> None:
    """Raise ThemeError now for what would otherwise stop the app once it has started: a colour
    that does not parse, or CSS rules that Textual rejects."""
    where = f"theme {str(path)!r}"
    try:
        variables = theme.to_color_system().generate()
        for name in VARIABLE_DEFAULTS.keys() & theme.variables.keys():
            Color.parse(theme.variables[name])
    except ColorParseError as exc:
        raise ThemeError(f"{where}: {exc}") from None
    stylesheet = Stylesheet(variables={**variables, **VARIABLE_DEFAULTS, **theme.variables})
    stylesheet.add_source(css, read_from=(str(path), ""))
    try:
        stylesheet.parse()
    except TokenError as exc:
        line = exc.start[0] if exc.start else "?"  # 1-based here, 0-based in the parse errors below
        raise ThemeError(f"{where}, line {line}: {str(exc).splitlines()[0]}") from None
    except StylesheetParseError as exc:
        token, message = next((error for rule in exc.errors.rules for error in rule.errors), (None, "invalid CSS"))
        line = f", line {token.location[0] + 1}" if token is not None else ""
        text = re.sub(r"\[/?[a-z]*\]", "", getattr(message, "summary", str(message)))
        raise ThemeError(f"{where}{line}: {text}") from None
