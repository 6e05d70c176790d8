"""A recorded generation (a results record's, or one of its conditions') as a finished rollout."""

from __future__ import annotations


def replayed_rollout(program, data: dict):
    """The finished rollout of a recorded generation of ``program`` (``data``: a results
    record's condition, with its ``generation`` and ``status``)."""
    from ..model.replay import replay_rollout
    from ..trace import RolloutStatus

    rollout = replay_rollout(program, data["generation"])
    recorded = data.get("status")
    if rollout.status.out_of_tokens and isinstance(recorded, str):
        # the recording just stops; a results file says why (a frame limit, the frame cap)
        try:
            rollout.status = RolloutStatus.read(recorded)
        except ValueError:  # a status this version does not know: the recording just stops
            pass
    return rollout
