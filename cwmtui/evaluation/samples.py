"""Several samples per program (``cwmtui eval --samples N --temperature T``): pass@k of output
accuracy, as the CRUXEval harness reports it, and each sample's first divergence.

Sample 0 is the free-running rollout the record already holds (seed ``--seed``); samples 1..N-1
run with seeds ``--seed + i``, each scored by the same comparison. ``record["samples"]`` keeps
each one's generation, status, output and first divergence, so a results file is rescored (and
its pass@k recomputed) without a model.
"""

from __future__ import annotations

from dataclasses import replace

from ..trace import RolloutStatus
from .record import rollout_summary


class SamplingCancelled(Exception):
    """The run was cancelled while a sample ran: the program is not done."""


def sample_summary(free: dict, seed: int) -> dict:
    """One sample as a record keeps it (``free``: :func:`.record.rollout_summary` of its rollout)."""
    return {
        "seed": seed,
        "generation": free["generation"],
        "status": free["status"],
        "output": {"predicted": free["output"]["predicted"], "correct": free["output"]["correct"]},
        "trace_exact": free["trace_exact"],
        "first_divergence": free["first_divergence"],
        "class": free["class"],
    }


def more_samples(backend, truth, rollout_options, count: int, cancel=None, recorded: list | None = None) -> list[dict]:
    """Samples 1..count-1 of one program (sample 0 is the record's own rollout): run on
    ``backend``, or replayed from ``recorded`` (an earlier record's ``samples``)."""
    from ..model.rollout import Rollout
    from .replayed import replayed_rollout

    samples = []
    for index in range(1, count):
        seed = rollout_options.seed + index
        if recorded is not None:
            if index >= len(recorded) or not isinstance(recorded[index], dict):
                break
            rollout = replayed_rollout(truth.case.program, recorded[index])
            seed = recorded[index].get("seed", seed)
        else:
            rollout = Rollout(backend, truth.case.program, truth.trace.frames[0], replace(rollout_options, seed=seed))
            rollout.run(cancel=cancel)
            if rollout.status is RolloutStatus.CANCELLED:
                raise SamplingCancelled(truth.case.id)
        samples.append(sample_summary(rollout_summary(truth.trace, rollout), seed))
    return samples
