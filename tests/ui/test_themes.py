"""Themes: found by name or path, shipped with the package, readable on 16-colour terminals."""

from __future__ import annotations

import pytest
from rich.color import ColorSystem, ColorType

from cwmtui.ui.app import CwmApp
from cwmtui.ui.themes import THEME_DIRS, ThemeError, find_theme, load_theme, theme_names

from .sessions import strings_view

SHIPPED = ("dark", "light", "high-contrast")


def test_the_shipped_themes_are_found_by_name_in_the_package():
    assert set(SHIPPED) <= set(theme_names())
    for name in SHIPPED:
        path = find_theme(name)
        assert path.parent in THEME_DIRS and path.name == f"{name}.tcss"
    # the package's themes/ is the repository's top-level themes/ (a link in a checkout)
    package, top = THEME_DIRS
    assert sorted(p.name for p in package.glob("*.tcss")) == sorted(p.name for p in top.glob("*.tcss"))


def test_a_theme_file_by_path(tmp_path):
    path = tmp_path / "mine.tcss"
    path.write_text("$dark: false;\n$primary: #884400;\n$cwm-diverge: #aa0000;\nTimeline { background: #ffffff; }\n")
    theme = load_theme(str(path))
    assert theme.theme.name == "cwmtui-mine" and not theme.theme.dark
    assert theme.theme.variables["cwm-diverge"] == "#aa0000"
    with pytest.raises(ThemeError, match="does not set \\$primary"):
        bad = tmp_path / "bad.tcss"
        bad.write_text("$cwm-diverge: red;\n")
        load_theme(str(bad))
    latin = tmp_path / "latin.tcss"
    latin.write_bytes(b"$primary: #884400;\n/* caf\xe9 */\n")
    with pytest.raises(ThemeError, match=r"^theme .*latin.tcss: not UTF-8 text \(bad byte on line 2\)$"):
        load_theme(str(latin))


async def test_a_theme_file_restyles_the_app(interpreter, tmp_path):
    path = tmp_path / "mine.tcss"
    path.write_text("$primary: #884400;\n$cwm-changed: #00ff00;\nSourcePane { background: #102030; }\n")
    app = CwmApp(strings_view(interpreter), theme=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.debugger
        changed = screen.query_one("#truth").get_component_rich_style("timeline--changed", partial=True)
        assert changed.color.triplet.hex == "#00ff00"
        assert screen.query_one("#source").styles.background.hex == "#102030"


COMPONENTS = {
    "#truth": ["timeline--cursor", "timeline--changed", "timeline--divergent", "timeline--divergent-row",
               "timeline--off-path"],
    "#source": ["source--truth-line", "source--keyword", "source--string", "source--divergence-mark"],
    "#state": ["state--differs", "state--lens-differs", "state--changed"],
}


def standard(color, fallback):
    """The colour a 16-colour terminal shows for ``color`` (rich's downgrade)."""
    if color is None or color.type is ColorType.DEFAULT:
        return fallback
    return color.downgrade(ColorSystem.STANDARD).number


@pytest.mark.parametrize("name", SHIPPED)
async def test_every_mark_stays_visible_on_a_16_colour_terminal(interpreter, name):
    app = CwmApp(strings_view(interpreter), theme=name)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.debugger
        for selector, components in COMPONENTS.items():
            widget = screen.query_one(selector)
            base = widget.rich_style
            background = standard(base.bgcolor, -1)
            foreground = standard(base.color, -2)
            for component in components:
                style = base + widget.get_component_rich_style(component, partial=True)
                fg = standard(style.color, foreground)
                bg = standard(style.bgcolor, background)
                # text stays readable: its colour is not its background's, once folded to 16
                assert fg != bg, (name, component)
                if style.bgcolor is not None and style.bgcolor != base.bgcolor:
                    # a marked row (cursor, divergence, current line) still stands out
                    assert bg != background or style.bold or style.reverse, (name, component)


async def test_the_high_contrast_theme_uses_only_the_terminals_16_colours(interpreter):
    app = CwmApp(strings_view(interpreter), theme="high-contrast")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.debugger
        for selector, components in COMPONENTS.items():
            widget = screen.query_one(selector)
            for component in components:
                style = widget.get_component_rich_style(component, partial=True)
                for color in (style.color, style.bgcolor):
                    assert color is None or color.type in (ColorType.STANDARD, ColorType.DEFAULT), (component, color)


def test_the_defaults_are_the_dark_themes_values():
    """The values a theme that leaves a variable out falls back on are the dark theme's, as the
    table says (#23: cwm-model had drifted from themes/dark.tcss)."""
    import re

    from cwmtui.ui.themes import THEME_DIRS, VARIABLE_DEFAULTS

    dark = (THEME_DIRS[0] / "dark.tcss").read_text()
    declared = dict(re.findall(r"^\$([\w-]+):\s*([^;]+);", dark, re.M))
    for name, value in VARIABLE_DEFAULTS.items():
        assert declared.get(name, value).strip() == value, name
