"""Recovery over a whole suite (``cwmtui eval --recovery``): per class of first divergence, how
often the model's state agrees with the interpreter's again once it is given the real line, or
the real frame, and how soon and for how long; and the output accuracy the suite would have had
with each program's first divergence put right.

Input: the records of a results file (their ``recovery``, see
:mod:`cwmtui.evaluation.recovery_run`), so the table is rebuilt from a file without a model.
"""

from __future__ import annotations

import statistics
from collections import Counter

from .recovery import RECOVERY_CONDITIONS
from .stats import difference, wilson

#: the row of every divergence whose value is a string (beside its own class's row)
STRING_VALUED = "string-valued"
ALL = "all"


def recovery_report(records: list[dict]) -> dict | None:
    """``report["recovery"]``, or None when no record was run with ``--recovery``."""
    runs = [r for r in records if "recovery" in r]
    if not runs:
        return None
    diverged = [r["recovery"] for r in runs if isinstance(r.get("recovery"), dict)]
    skipped = Counter(d["skipped"] for d in diverged if "skipped" in d)
    tried = [d for d in diverged if "skipped" not in d]
    kinds = [kind for kind, _ in Counter(d.get("kind") for d in tried).most_common()]
    conditions = {}
    for condition in RECOVERY_CONDITIONS:
        results = [(d, d[condition]) for d in tried if _ran(d.get(condition))]
        groups = {kind: [res for d, res in results if d.get("kind") == kind] for kind in kinds}
        groups[STRING_VALUED] = [res for d, res in results if d.get("string_valued")]
        groups[ALL] = [res for _, res in results]
        conditions[condition] = {name: cell(group) for name, group in groups.items() if group or name == ALL}
    accuracy = {"free": _accuracy(runs, None)}
    for condition in RECOVERY_CONDITIONS:
        accuracy[condition] = _accuracy(runs, condition)
    differences = {
        f"{condition} - free": difference(accuracy[condition], accuracy["free"]).to_json()
        for condition in RECOVERY_CONDITIONS
    }
    differences["frame - action"] = difference(accuracy["frame"], accuracy["action"]).to_json()
    not_run = {condition: dict(Counter(d[condition]["skipped"] for d in tried
                                       if isinstance(d.get(condition), dict) and "skipped" in d[condition]).most_common())
               for condition in RECOVERY_CONDITIONS}
    return {
        "programs": len(runs),
        "diverged": len(diverged),
        "intervened": len(tried),
        "skipped": dict(skipped.most_common()),
        "not_run": {condition: reasons for condition, reasons in not_run.items() if reasons},
        "classes": kinds + [STRING_VALUED, ALL],
        "conditions": conditions,
        "output_accuracy": {name: proportion.to_json() for name, proportion in accuracy.items()},
        "differences": differences,
    }


def cell(results: list[dict]) -> dict:
    """One row of the recovery table: how many interventions, the share that recovered (95%
    interval), steps from the intervention to agreement (median, mean), agreement held after it
    (mean steps; the share that held to the end), and the share whose output came out right."""
    recovered = [r for r in results if r.get("recovered")]
    steps = [r["steps_to_recover"] for r in recovered if isinstance(r.get("steps_to_recover"), int)]
    held = [r.get("held_for", 0) for r in recovered]
    return {
        "count": len(results),
        "recovered": wilson(len(recovered), len(results)).to_json(),
        "steps_to_recover": {"median": statistics.median(steps) if steps else None,
                             "mean": statistics.fmean(steps) if steps else None},
        "held_for": {"mean": statistics.fmean(held) if held else None,
                     "median": statistics.median(held) if held else None},
        "held_to_end": wilson(sum(1 for r in recovered if r.get("held_to_end")), len(results)).to_json(),
        "output_correct": wilson(sum(1 for r in results if (r.get("output") or {}).get("correct")), len(results)).to_json(),
    }


def _ran(result) -> bool:
    return isinstance(result, dict) and "skipped" not in result


def _accuracy(records: list[dict], condition: str | None):
    """Output accuracy over ``records`` with each first divergence put right by ``condition``
    (None: as the model ran; a program without that intervention counts as it ran)."""
    correct = 0
    for record in records:
        ok = bool(record["output"]["correct"])
        recovery = record.get("recovery")
        if condition is not None and isinstance(recovery, dict) and _ran(recovery.get(condition)):
            ok = bool((recovery[condition].get("output") or {}).get("correct"))
        correct += ok
    return wilson(correct, len(records))
