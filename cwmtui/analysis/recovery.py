"""Recovery after an intervention, and the teacher-forced condition.

An intervention at step ``k`` (the model's action replaced, or its locals edited) starts a
branch. Recovery asks what the model does with the help: the first step ``j > k`` where the
branch's full state matches the interpreter's again, for how many steps agreement then holds,
and where the branch itself first goes wrong after the intervention.

The teacher-forced condition of the paper forces every action from the truth, so the model only
predicts states: what is left is pure state propagation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..trace import Frame, RolloutStatus
from .compare import Comparison, Divergence, StepKind, compare, divergence_at
from .comparison import FORCED_WHOLE


#: the interventions ``cwmtui eval --recovery`` makes at a first divergence: the interpreter's real
#: line forced (was it a slip of control?), and its whole frame forced (can the model go on from the
#: true state?)
RECOVERY_CONDITIONS = ("action", "frame")


def scored_frames(frames: Sequence[Frame], forced_steps: Sequence[int]) -> list[Frame]:
    """The frames of a teacher-forced rollout as they are scored: each step in ``forced_steps``
    (after the seeded entry frame) becomes a format error, because the truth's frame there is not
    the model's. The frames themselves (shown, saved) keep what was forced."""
    if not forced_steps:
        return list(frames)
    scored = list(frames)
    for index in forced_steps:
        if 0 < index < len(scored):
            scored[index] = Frame(None, "", error=FORCED_WHOLE, raw="")
    return scored


def score_forced(truth, frames: Sequence[Frame], status, forced_steps: Sequence[int], partial: str = "") -> Comparison:
    """The one scoring of a rollout with forced frames (``truth``: the interpreter's Trace):
    :func:`compare` of :func:`scored_frames` (``partial``: the rollout's, see :func:`compare`)."""
    return compare(truth, scored_frames(frames, forced_steps), status, partial)


@dataclass
class Recovery:
    at_step: int  # the row of the intervention in the branch's comparison
    recovered_at: int | None  # first row after it where the whole state matches the truth
    held_for: int  # matching rows in a row from recovered_at on
    first_divergence: Divergence | None  # the branch's first divergence after the intervention
    held_to_end: bool = False  # agreement held to the end of the trace
    matched_after: int = 0  # matching rows after the intervention, in all
    rows_after: int = 0  # rows after the intervention

    def describe(self) -> str:
        if self.recovered_at is None:
            if self.first_divergence is None:
                return f"after the intervention at step {self.at_step} there is nothing left to compare"
            return (
                f"the state never matches the interpreter again after step {self.at_step}; "
                f"next divergence at step {self.first_divergence.step} ({self.first_divergence.kind})"
            )
        text = f"recovered at step {self.recovered_at}, {self.recovered_at - self.at_step} after the intervention at step {self.at_step}"
        if self.held_to_end:
            return text + f", and agreed to the end ({self.held_for} steps)"
        text += f"; agreement held for {self.held_for} step{'s' if self.held_for != 1 else ''}"
        if self.first_divergence is not None:
            text += f", then {self.first_divergence.regime} at step {self.first_divergence.step}"
        return text

    def to_json(self) -> dict:
        return {
            "at_step": self.at_step,
            "recovered": self.recovered_at is not None,
            "recovered_at": self.recovered_at,
            "held_for": self.held_for,
            "held_to_end": self.held_to_end,
            "matched_after": self.matched_after,
            "rows_after": self.rows_after,
            "first_divergence": self.first_divergence.to_json() if self.first_divergence else None,
            "summary": self.describe(),
        }

    @classmethod
    def from_json(cls, data: dict, comparison: Comparison) -> "Recovery":
        """The recovery :meth:`to_json` wrote for ``comparison`` (its divergence's frames come
        from the comparison's rows)."""
        first = data.get("first_divergence")
        if first is not None:
            row = comparison.steps[first["step"]]
            first = Divergence.from_json(first, row.truth_index, row.model_index)
        recovery = cls(
            at_step=data["at_step"], recovered_at=data["recovered_at"], held_for=data["held_for"],
            first_divergence=first, held_to_end=data["held_to_end"], matched_after=data["matched_after"],
            rows_after=data["rows_after"],
        )
        numbers = (recovery.at_step, recovery.held_for, recovery.matched_after, recovery.rows_after)
        if any(type(n) is not int for n in numbers) or type(recovery.held_to_end) is not bool \
                or recovery.recovered_at is not None and type(recovery.recovered_at) is not int:
            raise TypeError("a recovery's fields have the wrong types")
        return recovery


def recovery(comparison: Comparison, at_step: int) -> Recovery:
    """Recovery of a branch whose intervention is at row ``at_step`` of ``comparison``."""
    rows = comparison.steps
    after = rows[at_step + 1 :]
    recovered = next((r for r in after if r.kind is StepKind.MATCH and r.truth is not None and r.model is not None), None)
    held = 0
    divergence_row = None
    if recovered is not None:
        for row in rows[recovered.step :]:
            if row.kind is not StepKind.MATCH:
                break
            held += 1
        search = rows[recovered.step + held :]
    else:
        search = after
    divergence_row = next((r for r in search if r.kind.is_divergence), None)
    divergence = divergence_at(comparison.steps, divergence_row.step, comparison.status, comparison.truth_ending) if divergence_row is not None else None
    held_to_end = recovered is not None and divergence is None and not any(
        r.kind is StepKind.PENDING for r in rows[recovered.step :]
    )
    return Recovery(
        at_step=at_step,
        recovered_at=recovered.step if recovered is not None else None,
        held_for=held,
        first_divergence=divergence,
        held_to_end=held_to_end,
        matched_after=sum(1 for r in after if r.kind is StepKind.MATCH),
        rows_after=len(after),
    )


def teacher_force(
    rollout,
    truth: Sequence[Frame],
    on_frame: Callable[[int, Frame], None] | None = None,
    cancel=None,
    forced: list[int] | None = None,
) -> list[int]:
    """Run ``rollout`` with every event and action forced from ``truth``; returns the steps
    whose whole frame had to be forced.

    Each step the truth's event token and source line are spliced in and the model writes only
    the state (the locals, or the return value). Where it cannot (it writes end of text or a
    malformed frame), the truth's whole frame is forced so the two stay step for step: what
    remains to compare is the state alone. ``forced``: the list to record those steps in as they
    happen (a branch's own, so a comparison made while it streams scores them already).
    """
    forced = [] if forced is None else forced
    while len(rollout.frames) < len(truth):
        if _cancelled(cancel):
            break
        index = len(rollout.frames)
        expected = truth[index]
        frame = rollout.step(force_action=expected.action, force_event=expected.event, cancel=cancel)
        if frame is None and _stopped(rollout):
            break
        if frame is None or frame.is_error or frame.event is not expected.event:
            rollout.rewind(index)
            rollout.force(expected, origin="forced")
            forced.append(index)
        frame = rollout.frames[index]
        if on_frame is not None:
            on_frame(index, frame)
    if len(rollout.frames) == len(truth) and not _stopped(rollout) and not _cancelled(cancel):
        # the truth ended: does the model end too (end of text), or run on?
        frame = rollout.step(cancel=cancel)
        if frame is not None and on_frame is not None:
            on_frame(len(rollout.frames) - 1, frame)
    return forced


def _stopped(rollout) -> bool:
    status = getattr(rollout, "status", None)
    if not isinstance(status, RolloutStatus):
        return False
    return status.out_of_tokens or status in (RolloutStatus.CANCELLED, RolloutStatus.MAX_FRAMES)


def _cancelled(cancel) -> bool:
    if cancel is None:
        return False
    is_set = getattr(cancel, "is_set", None)
    return bool(is_set()) if is_set is not None else bool(cancel())
