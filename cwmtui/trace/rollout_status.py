"""Why a model's trace stopped: one name per reason, shared by the rollout, the comparison, the
session, its files, ``eval`` and the screen (stdlib only, at the bottom with the trace types)."""

from __future__ import annotations

import enum


class RolloutStatus(str, enum.Enum):
    """A rollout's state. The value is the name files and reports write (``"budget"``); being a
    ``str``, it also equals that text."""

    RUNNING = "running"
    ENDED = "ended"  # the model wrote <|end_of_text|>
    BUDGET = "budget"  # the token budget ran out (or a recording stops)
    CONTEXT = "context"  # the model's context is full: it cannot see past it, whatever the budget
    FRAME_LIMIT = "frame_limit"  # one frame took more tokens than a frame may: a format error
    MAX_FRAMES = "max_frames"  # the frame cap
    CANCELLED = "cancelled"

    def __str__(self) -> str:
        return self.value

    @property
    def label(self) -> str:
        """For people: ``"budget exhausted"``."""
        return _LABELS[self]

    @property
    def out_of_tokens(self) -> bool:
        """The trace stopped for want of tokens: the budget ran out, or the model's context is
        full. Everything that scores or counts budget exhaustion asks this, not for BUDGET."""
        return self in (RolloutStatus.BUDGET, RolloutStatus.CONTEXT)

    @property
    def stopped_early(self) -> bool:
        """Still running or cancelled: rows the model has not written yet are pending, not missing."""
        return self in (RolloutStatus.RUNNING, RolloutStatus.CANCELLED)

    @classmethod
    def read(cls, value) -> "RolloutStatus":
        """The status a saved session, results or replay file gives (``None``: ended). Files
        written before this enum spelled some reasons otherwise (``"budget exhausted"``,
        ``"BUDGET"``, a backend's ``"length"``); those are read here and nowhere else. Raises
        ValueError for anything else."""
        if value is None:
            return cls.ENDED
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            try:
                return cls(text)
            except ValueError:
                if text in _EARLIER:
                    return _EARLIER[text]
        raise ValueError(f"not a rollout status: {value!r}")


_LABELS = {
    RolloutStatus.RUNNING: "running",
    RolloutStatus.ENDED: "ended",
    RolloutStatus.BUDGET: "budget exhausted",
    RolloutStatus.CONTEXT: "context full",
    RolloutStatus.FRAME_LIMIT: "frame too long",
    RolloutStatus.MAX_FRAMES: "too many frames",
    RolloutStatus.CANCELLED: "cancelled",
}

#: the spellings of earlier files and of backends' stop reasons
_EARLIER = {
    "eos": RolloutStatus.ENDED,
    "stop": RolloutStatus.ENDED,
    "complete": RolloutStatus.ENDED,
    "budget exhausted": RolloutStatus.BUDGET,
    "length": RolloutStatus.BUDGET,
    "context full": RolloutStatus.CONTEXT,
    "frame limit": RolloutStatus.FRAME_LIMIT,
    "frame too long": RolloutStatus.FRAME_LIMIT,
    "too long": RolloutStatus.MAX_FRAMES,
    "too_long": RolloutStatus.MAX_FRAMES,
}
