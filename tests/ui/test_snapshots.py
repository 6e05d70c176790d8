"""Snapshots of what the user sees (pytest-textual-snapshot), on recorded sessions: stable.

Update after an intended change with ``pytest tests/ui/test_snapshots.py --snapshot-update``
and look at the SVGs (tests/ui/__snapshots__/) before committing them.
"""

from __future__ import annotations

import pytest

from cwmtui.ui.app import CwmApp

from .sessions import strings_view


@pytest.fixture
def strings(interpreter):
    return strings_view(interpreter)


def test_main_screen_at_the_first_divergence(snap_compare, strings):
    assert snap_compare(CwmApp(strings), press=["d"], terminal_size=(120, 40))


def test_override_modal(snap_compare, strings):
    strings.can_generate = True  # the modal as a live session shows it (nothing is run here)
    assert snap_compare(CwmApp(strings), press=["d", "o"], terminal_size=(120, 40))


def test_state_panel_with_the_token_lens(snap_compare, strings):
    # the source in its own column leaves the state panel room for the table and the lens
    app = CwmApp(strings, layout="columns")
    assert snap_compare(app, press=["d"], terminal_size=(160, 50))


def test_light_theme(snap_compare, strings):
    assert snap_compare(CwmApp(strings, theme="light"), press=["d"], terminal_size=(120, 40))


def test_narrow_terminal(snap_compare, strings):
    assert snap_compare(CwmApp(strings), press=["d"], terminal_size=(80, 24))
