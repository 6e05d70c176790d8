"""pass@k over a run with several samples per program (``cwmtui eval --samples N``).

pass@k is the unbiased estimator of Chen et al. (2021), as the CRUXEval harness reports it,
computed per program from its ``n`` samples and ``c`` right ones and averaged over programs. Its
95% interval is the normal one of that mean over programs (clipped to [0, 1]): it reflects which
programs were drawn, not the sampling within a program (a few samples per program widen it).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter

from .stats import Z95, pass_at_k

#: the k reported (those up to the number of samples)
KS = (1, 2, 5, 10, 20, 50, 100)


def sampling_report(records: list[dict]) -> dict | None:
    """``report["samples"]``, or None when no record holds several samples."""
    sampled = [r["samples"] for r in records if isinstance(r.get("samples"), list) and len(r["samples"]) > 1]
    if not sampled:
        return None
    n = min(len(samples) for samples in sampled)
    table = {}
    for k in sorted({k for k in KS if k <= n} | {n}):
        estimates = [pass_at_k(len(s), sum(1 for x in s if (x.get("output") or {}).get("correct")), k) for s in sampled]
        table[str(k)] = mean_interval(estimates)
    kinds = Counter((x.get("first_divergence") or {}).get("kind") or x.get("class") or "unclassified"
                    for s in sampled for x in s)
    steps = [x["first_divergence"]["step"] for s in sampled for x in s if x.get("first_divergence")]
    return {
        "programs": len(sampled),
        "samples": n,
        "pass_at_k": table,
        "first_divergence_kinds": dict(kinds.most_common()),
        "first_divergence_step": {"median": statistics.median(steps) if steps else None,
                                  "mean": statistics.fmean(steps) if steps else None},
        "programs_right_at_least_once": sum(1 for s in sampled if any((x.get("output") or {}).get("correct") for x in s)),
    }


def mean_interval(values: list[float]) -> dict:
    """The mean of per-program estimates with its normal 95% interval over programs."""
    count = len(values)
    mean = statistics.fmean(values)
    half = Z95 * statistics.stdev(values) / math.sqrt(count) if count > 1 else float("nan")
    low, high = (max(0.0, mean - half), min(1.0, mean + half)) if count > 1 else (0.0, 1.0)
    return {"value": mean, "n": count, "ci95": [low, high]}
