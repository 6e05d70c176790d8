"""Every key of the debugger, in one table: it drives the footer, ``?`` help and the command
palette, and each binding has an id a keymap file can remap (``ui/keymap.py``)."""

from __future__ import annotations

from textual.binding import Binding

_STEP = Binding.Group("step")
_PAGE = Binding.Group("page")
_ENDS = Binding.Group("first/last")
_DIVERGENCE = Binding.Group("diverge")
_CALL = Binding.Group("call")
_MATCH = Binding.Group("match")
_BRANCH = Binding.Group("branch")
_SPEED = Binding.Group("speed")

#: Every key of the debugger, in ``?`` help and the palette, each with an id a keymap can rebind;
#: the footer shows those a user reaches for first (it must fit 120 columns: the rest are in ``?``).
#: No key that terminals or tmux take for themselves (ctrl+s, ctrl+b, …).
BINDINGS = [
    Binding("question_mark", "help", "Help", id="app.help", tooltip='Help: every key, and what each mark means', key_display="?"),
    Binding("q", "app.quit", "Quit", id="app.quit", tooltip='Quit'),
    Binding("down,j", "step(1)", "Step", id="cursor.next", tooltip='Next step', key_display="↓", group=_STEP),
    Binding("up,k", "step(-1)", "Back", id="cursor.previous", tooltip='Previous step', key_display="↑", group=_STEP),
    Binding("d", "divergence(1)", "Next divergence", id="divergence.next", tooltip='Next divergence', group=_DIVERGENCE),
    Binding("f", "first_divergence", "First divergence", id="divergence.first", group=_DIVERGENCE, show=False,
            tooltip="Go to the first divergence"),
    Binding("D", "divergence(-1)", "Previous divergence", id="divergence.previous", tooltip='Previous divergence', group=_DIVERGENCE),
    Binding("o", "override", "Override", id="intervene.override", tooltip="Override the model's next line at this step, and let it run on"),
    Binding("e", "edit_locals", "Edit", id="intervene.edit", tooltip="Edit the model's state at this step, and let it run on"),
    Binding("t", "teacher_forced", "Force lines", id="intervene.teacher-forced", tooltip="Teacher-force the actions: every line from the interpreter, the model writes only the states (T: whole frames)"),
    Binding("T", "teacher_forced_frames", "Force frames", id="intervene.teacher-forced-frames", show=False,
            tooltip="Teacher-force whole frames: at each step the model sees the interpreter's trace so far and writes only the next frame"),
    Binding("left_square_bracket", "branch(-1)", "Previous branch", id="branch.previous", tooltip='Previous branch', key_display="[", group=_BRANCH),
    Binding("right_square_bracket", "branch(1)", "Next branch", id="branch.next", tooltip='Next branch', key_display="]", group=_BRANCH),
    Binding("colon", "go_to", "Go to", id="cursor.go-to", tooltip='Go to a step', key_display=":"),
    Binding("slash", "search", "Find", id="search.start", tooltip='Search variables and values', key_display="/"),
    Binding("p", "play", "Play", id="play.toggle", tooltip='Play the trace step by step (again: stop)'),
    Binding("x", "export", "Export", id="session.export", tooltip='Export the session (JSON, and an SVG of the screen)'),
    Binding("l", "triage", "List", id="triage.list", tooltip='Failure list of the results file'),
    Binding("pagedown", "page(1)", "Page down", id="cursor.page-down", show=False, key_display="pgdn", group=_PAGE),
    Binding("pageup", "page(-1)", "Page up", id="cursor.page-up", show=False, key_display="pgup", group=_PAGE),
    Binding("g,home", "first", "First", id="cursor.first", show=False, key_display="g", group=_ENDS),
    Binding("G,end", "last", "Last", id="cursor.last", show=False, key_display="G", group=_ENDS),
    Binding("c", "call(1)", "Next call", id="call.next", show=False, group=_CALL),
    Binding("C", "call(-1)", "Previous call", id="call.previous", show=False, group=_CALL),
    Binding("n", "search_again(1)", "Next match", id="search.next", show=False, group=_MATCH),
    Binding("N", "search_again(-1)", "Previous match", id="search.previous", show=False, group=_MATCH),
    Binding("plus,equals_sign", "speed(1)", "Faster", id="play.faster", show=False, key_display="+", group=_SPEED),
    Binding("minus", "speed(-1)", "Slower", id="play.slower", show=False, key_display="-", group=_SPEED),
    Binding("z", "fold", "Unfold", id="state.fold", tooltip='Unfold long values in the state panel (again: fold)'),
    Binding("r", "resume", "Resume", id="work.resume", tooltip="Resume the cancelled rollout on show, from where it stopped"),
    Binding("tab", "focus_pane(1)", "Next pane", id="focus.next", show=False,
            tooltip="Focus the next pane (source, state, output): ↑↓ pgup pgdn scroll it, esc goes back to the steps"),
    Binding("shift+tab", "focus_pane(-1)", "Previous pane", id="focus.previous", show=False,
            tooltip="Focus the previous pane"),
    Binding("space", "demo_pause", "Pause demo", id="demo.pause", show=False, priority=True,
            tooltip="Pause the demo that plays itself (--demo); again: go on"),
    Binding("right", "demo_next", "Next demo step", id="demo.next", show=False, priority=True, key_display="→",
            tooltip="The demo's next step now (cuts a caption's pause or a wait short)"),
    Binding("escape", "cancel", "Cancel", id="work.cancel", tooltip="Back to the steps from a pane; or stop playing; or cancel what the model is writing", show=False, key_display="esc"),
]
#: the actions that start a branch (what they are called in a sentence): shown only where a
#: live model can run them; elsewhere their keys say why not (the app's fallback bindings)
INTERVENTIONS = {"override": "override", "edit_locals": "editing the state",
                 "teacher_forced": "the teacher-forced rollout",
                 "teacher_forced_frames": "the teacher-forced rollout of whole frames"}
#: what every mark on screen means (``?`` shows it under the keys)
LEGEND = [
    ("timelines", [
        ("●", "the first divergence: where the model first leaves the interpreter (f goes there)"),
        ("≠", "a value differs from the interpreter's"),
        ("⇄", "the model runs another line (action) or event"),
        ("✗", "format error: text the trace format cannot hold"),
        ("∅", "the model had stopped (its end reason is on the last row)"),
        ("+", "a step only the model took (past the program's end, or off its path)"),
        ("…", "not written yet"),
        ("?", "past the interpreter's trace: nothing to check against"),
        ("F", "forced from the interpreter (teacher forcing)"),
        ("E", "a state you edited"),
        ("O", "a line you overrode: never blamed on the model"),
        ("→ ← !", "a call, a return, an exception"),
        ("·", "no variable changed at this step"),
        ("■", "how the trace ended (the row after its last)"),
    ]),
    ("source", [
        ("▶", "the interpreter's line at this step"),
        ("◆", "the model's line at this step"),
        ("◈", "both are on this line"),
        ("✗", "the line of the first divergence"),
    ]),
    ("state", [
        ("=", "the same value"),
        ("≠", "a different value"),
        ("≈txt", "the same value written another way (e.g. other quotes)"),
        ("miss / extra", "only the interpreter / only the model has this variable"),
    ]),
]

#: the command palette's line in ``?`` and the README
PALETTE_HELP = "Command palette: every key's command, go to step, themes, layout"
#: bindings the palette leaves out: help (the palette is help), quit (Textual's own), cancel
PALETTE_SKIPS = frozenset({"app.help", "app.quit", "work.cancel"})


def keys_markdown() -> str:
    """The keys and the marks as the README lists them (between its ``<!-- keys -->`` markers):
    made from the same tables as ``?``, so the two always agree (a test checks the README).
    ``python -m cwmtui.ui.bindings`` prints it."""
    def keys_of(binding: Binding) -> str:
        shown = {"question_mark": "?", "left_square_bracket": "[", "right_square_bracket": "]", "colon": ":",
                 "slash": "/", "plus": "+", "equals_sign": "=", "minus": "-", "escape": "esc",
                 "pagedown": "pgdn", "pageup": "pgup", "shift+tab": "shift+tab"}
        return " ".join(f"`{shown.get(key.strip(), key.strip())}`" for key in binding.key.split(","))

    lines = ["| keys | does | id |", "|---|---|---|"]
    for binding in BINDINGS:
        lines.append(f"| {keys_of(binding)} | {binding.tooltip or binding.description} | `{binding.id}` |")
    lines.append(f"| `ctrl+p` | {PALETTE_HELP} | |")
    lines += ["", "| mark | where | means |", "|---|---|---|"]
    for where, entries in LEGEND:
        for mark, meaning in entries:
            lines.append(f"| `{mark}` | {where} | {meaning} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(keys_markdown(), end="")
