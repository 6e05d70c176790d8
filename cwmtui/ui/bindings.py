"""Every key of the debugger, in one table: it drives the footer, ``?`` help and the command
palette, and each binding has an id a keymap file can remap (``ui/keymap.py``)."""

from __future__ import annotations

from textual.binding import Binding

_STEP = Binding.Group("step")
_PAGE = Binding.Group("page")
_ENDS = Binding.Group("first/last")
_DIVERGENCE = Binding.Group("divergence")
_CALL = Binding.Group("call")
_MATCH = Binding.Group("match")
_BRANCH = Binding.Group("branch")
_SPEED = Binding.Group("speed")

#: Every key of the debugger: all in the footer (grouped) and in ``?`` help, each with an id
#: a keymap can rebind. No key that terminals or tmux take for themselves (ctrl+s, ctrl+b, …).
BINDINGS = [
    Binding("question_mark", "help", "Help", id="app.help", key_display="?"),
    Binding("down,j", "step(1)", "Step", id="cursor.next", key_display="↓/j", group=_STEP),
    Binding("up,k", "step(-1)", "Back", id="cursor.previous", key_display="↑/k", group=_STEP),
    Binding("d", "divergence(1)", "Next divergence", id="divergence.next", group=_DIVERGENCE),
    Binding("D", "divergence(-1)", "Previous divergence", id="divergence.previous", group=_DIVERGENCE),
    Binding("o", "override", "Override", id="intervene.override"),
    Binding("e", "edit_locals", "Edit state", id="intervene.edit"),
    Binding("t", "teacher_forced", "Teacher-force", id="intervene.teacher-forced"),
    Binding("left_square_bracket", "branch(-1)", "Previous branch", id="branch.previous", key_display="[", group=_BRANCH),
    Binding("right_square_bracket", "branch(1)", "Next branch", id="branch.next", key_display="]", group=_BRANCH),
    Binding("colon", "go_to", "Go to", id="cursor.go-to", key_display=":"),
    Binding("slash", "search", "Search", id="search.start", key_display="/"),
    Binding("p", "play", "Play", id="play.toggle"),
    Binding("x", "export", "Export", id="session.export"),
    Binding("l", "triage", "Failure list", id="triage.list"),
    Binding("pagedown", "page(1)", "Page down", id="cursor.page-down", key_display="pgdn", group=_PAGE),
    Binding("pageup", "page(-1)", "Page up", id="cursor.page-up", key_display="pgup", group=_PAGE),
    Binding("g,home", "first", "First", id="cursor.first", key_display="g", group=_ENDS),
    Binding("G,end", "last", "Last", id="cursor.last", key_display="G", group=_ENDS),
    Binding("c", "call(1)", "Next call", id="call.next", group=_CALL),
    Binding("C", "call(-1)", "Previous call", id="call.previous", group=_CALL),
    Binding("n", "search_again(1)", "Next match", id="search.next", group=_MATCH),
    Binding("N", "search_again(-1)", "Previous match", id="search.previous", group=_MATCH),
    Binding("plus,equals_sign", "speed(1)", "Faster", id="play.faster", key_display="+", group=_SPEED),
    Binding("minus", "speed(-1)", "Slower", id="play.slower", key_display="-", group=_SPEED),
    Binding("z", "fold", "Unfold values", id="state.fold"),
    Binding("escape", "cancel", "Cancel", id="work.cancel", key_display="esc"),
    Binding("q", "app.quit", "Quit", id="app.quit"),
]
#: bindings the palette leaves out: help (the palette is help), quit (Textual's own), cancel
PALETTE_SKIPS = frozenset({"app.help", "app.quit", "work.cancel"})
