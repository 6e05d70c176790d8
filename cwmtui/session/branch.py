"""A branch of a session: one rollout of the model (the main one, or one grown from an
intervention), with its frames, status, comparison and recovery; and :class:`BranchState`, a
read-only picture of one for a screen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from ..analysis.compare import Comparison
from ..analysis.recovery import Recovery
from ..trace import Frame, RolloutStatus
from ..trace.stored import StoredFrames
from .intervention import Intervention

if TYPE_CHECKING:
    from ..model.rollout import Rollout


#: why a teacher-forced branch stopped when the model wrote a frame after the program's last
#: (it is shown: the comparison calls it a step past the end) instead of end of text
RAN_ON = "the model ran on past the program's end instead of writing end of text"


@dataclass
class Branch:
    name: str
    parent: str | None = None
    at_step: int | None = None  # the model frame the branch departs from its parent at
    intervention: Intervention | None = None
    frames: list[Frame] | StoredFrames = field(default_factory=list)  # (a saved session's: rows, built as shown)
    status: RolloutStatus = RolloutStatus.RUNNING  # why the rollout stopped (or that it runs)
    comparison: Comparison | None = None
    recovery: Recovery | None = None
    tokens: dict = field(default_factory=lambda: {"trace": 0, "processed": 0})
    forced_steps: list[int] = field(default_factory=list)  # teacher forcing: frames forced whole
    lens: dict | None = None  # {"step", "variable", "lens"} of a string-valued divergence
    settings: dict | None = None  # the rollout options it ran with (token budget, decoding)
    message: str = ""  # why the rollout stopped, for people ("... the model's context of 4096 tokens is full")
    token_limit: int | None = None  # the tokens it may write: the budget, or less where the context is smaller
    partial: str = ""  # the text of a frame the budget or the context cut off (checked as far as it goes)
    rollout: Rollout | None = field(default=None, repr=False, compare=False)  # live only

    @property
    def live(self) -> bool:
        return self.rollout is not None


@dataclass(frozen=True)
class BranchState:
    """A branch as it stands at one moment, read-only: what a screen shows of it. The engine
    makes one (:meth:`DebugSession.branch_state`, in the thread that runs the branch) and hands
    it over whole, so the screen never copies a branch field by field, nor compares, nor reads a
    branch that a worker is growing. ``branch`` is the engine's branch, to grow new branches from."""

    branch: Branch
    frames: Sequence[Frame]  # its frames then (a list of its own, or a saved session's rows)
    comparison: Comparison
    status: RolloutStatus
    tokens_used: int = 0
    tokens_processed: int = 0

    @property
    def name(self) -> str:
        return self.branch.name

    @property
    def parent(self) -> str | None:
        return self.branch.parent

    @property
    def at_step(self) -> int | None:
        return self.branch.at_step

    @property
    def intervention(self) -> Intervention | None:
        return self.branch.intervention

    @property
    def recovery(self) -> Recovery | None:
        return self.branch.recovery

    @property
    def settings(self) -> dict | None:
        return self.branch.settings

    @property
    def message(self) -> str:
        """Why the rollout stopped, for people ("" while it runs)."""
        return "" if self.status is RolloutStatus.RUNNING else self.branch.message

    @property
    def token_limit(self) -> int | None:
        return self.branch.token_limit
