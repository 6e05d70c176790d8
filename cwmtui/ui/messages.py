"""The messages workers post to the debugger screen: the only way engine work reaches the UI.

A worker never touches a widget, the app or the screen: it posts one of these, and the
screen's handler changes what is shown. Messages that stream (a branch's newer state, what a
worker is doing) replace an older one of their kind still in the queue (Textual's
``can_replace``), so a fast rollout costs a few redraws a second, not one per frame.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from textual.message import Message

from ..session import BranchState

if TYPE_CHECKING:
    from ..analysis.lens import Lens
    from .branch_view import BranchView, SessionView


class SessionReady(Message):
    """The truth is recorded (and perhaps a model is open): here is what to show."""

    def __init__(self, view: SessionView) -> None:
        self.view = view
        super().__init__()


class ModelState(Message):
    """Whether a model is there to grow branches; ``reason``: why not (shown when the user asks
    for an intervention); ``replay``: the session replays recorded generations."""

    def __init__(self, reason: str = "", replay: bool = False) -> None:
        self.reason = reason
        self.replay = replay
        super().__init__()


class Activity(Message):
    """What a worker is doing now (shown in the status bar); "" when it is done."""

    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__()

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Activity)  # only the newest is worth showing


class BranchStarted(Message):
    def __init__(self, branch: BranchView, select: bool = True) -> None:
        self.branch = branch
        self.select = select
        super().__init__()


class BranchUpdated(Message):
    """A running branch's newer state (its frames so far, compared in the worker)."""

    def __init__(self, branch: BranchView, state: BranchState) -> None:
        self.branch = branch
        self.state = state
        super().__init__()

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, BranchUpdated) and message.branch is self.branch


class BranchFinished(Message):
    """A branch stopped (ended, ran out of budget, was cancelled): its last state."""

    def __init__(self, branch: BranchView, state: BranchState) -> None:
        self.branch = branch
        self.state = state
        super().__init__()


class WorkStarted(Message):
    """A job began: ``cancel`` stops it (esc)."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        super().__init__()


class WorkDone(Message):
    """A worker's job ended (whatever it posted before): its cancel key no longer applies."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        super().__init__()


class WorkFailed(Message):
    """A worker failed: a one-line title and a message for the user."""

    def __init__(self, title: str, message: str, fatal: bool = False) -> None:
        self.title = title
        self.message = message
        self.fatal = fatal
        super().__init__()


class Notice(Message):
    """Something the user should know that is not a failure (e.g. a model partly offloaded to
    the CPU): a warning toast."""

    def __init__(self, title: str, message: str) -> None:
        self.title = title
        self.message = message
        super().__init__()


class LensWanted(Message):
    """The state panel shows a string-valued difference whose token lens the engine has not
    worked out yet (posted by the panel; the screen asks a worker)."""

    def __init__(self, branch: BranchView, row: int, name: str) -> None:
        self.branch = branch
        self.row = row
        self.name = name
        super().__init__()


class LensReady(Message):
    """A worker worked out a token lens (None: the tokenizer cannot split it)."""

    def __init__(self, key: tuple, lens: Lens | None) -> None:
        self.key = key
        self.lens = lens
        super().__init__()


class ExportDone(Message):
    """A worker wrote the exported session (``error``: why it could not)."""

    def __init__(self, json_path, svg_path, error: str = "") -> None:
        self.json_path = json_path
        self.svg_path = svg_path
        self.error = error
        super().__init__()
