"""The paper's tables from a batch of results (``cwmtui eval``), as one JSON-able object.

Input: the records of a results file (:mod:`cwmtui.evaluation.record`), i.e. plain dicts, so a
report can be rebuilt from a file without a model. Definitions:

- ``output_accuracy``: share of programs whose entry finished with the truth's value (a return
  value equal as a Python literal, or the same exception);
- ``trace_exact``: share of programs whose whole model trace equals the truth, frame for frame,
  and ended there;
- ``action_exact`` / ``state_exact``: per-frame rates over all truth frames of the batch: frame
  k of the model has the truth's event and source line (action), or its event and locals/value
  (state); frames the model never wrote count as misses;
- ``first_divergence_kinds`` / ``regimes``: how many programs first diverged in each way;
- ``string_valued``: share of string-valued outputs among all programs vs among output failures
  (the paper's 46%-vs-73% analysis on CRUXEval);
- ``truncations``: programs whose rollout hit the token budget (or filled the model's context:
  counted under ``budget`` too), the per-frame limit or the frame cap;
- ``by_n`` (S5): accuracy per number of swaps, free-running and teacher-forced;
- ``by_depth`` / ``by_type`` / ``by_form`` (composition zoo): accuracy per composition depth,
  per value type with the ``p**d`` baseline (``p`` = that type's depth-1 accuracy), and nested
  vs flattened.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

from ..trace import RolloutStatus
from .recovery_report import recovery_report
from .sampling_report import sampling_report
from .stats import Proportion, difference, wilson

#: Meta CWM's published figures ("Debugging code world models", arXiv 2602.07672; CWM tech report)
PUBLISHED: dict[str, dict[str, Any]] = {
    "s5": {
        "free": {8: 1.00, 16: 0.80, 32: 0.40, 64: 0.00, 128: 0.00},
        "teacher_forced": {8: 1.00, 16: 1.00, 32: 1.00, 64: 0.90, 128: 0.90},
    },
    "zoo": {"string_nested": {1: 0.90, 2: 0.75, 3: 0.58, 4: 0.39, 5: 0.25}},
    "cruxeval": {"output_accuracy": 0.88},
}

TRUNCATION_STATUSES = ("budget", "frame_limit", "max_frames")

#: the two decodings of the free-running condition: without the frame grammar, and under it
DECODINGS = ("free", "constrained")


def rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


#: the proportions of a condition, with what they count: (successes, sample) per view list
PROPORTIONS = ("output_accuracy", "trace_exact", "action_exact", "state_exact", "valid_format")


def intervals(views: list[dict]) -> dict:
    """Each proportion of :func:`condition_metrics` with its 95% Wilson interval and sample
    size: programs for the program-level ones, frames for the per-frame rates (frames of one
    program are not independent: read those intervals as too narrow)."""
    frames = sum(v["frames"]["truth"] for v in views)
    counts = {
        "output_accuracy": (sum(1 for v in views if v["output"]["correct"]), len(views)),
        "trace_exact": (sum(1 for v in views if v.get("trace_exact")), len(views)),
        "action_exact": (min(frames, sum(v["frames"]["action_matches"] for v in views)), frames),
        "state_exact": (min(frames, sum(v["frames"]["state_matches"] for v in views)), frames),
        "valid_format": (sum(1 for v in views if not v["frames"].get("format_errors")), len(views)),
    }
    return {key: wilson(*counts[key]).to_json() for key in PROPORTIONS}


SURVIVAL_POINTS = 60  # steps a survival curve is given at (at most; every step of a short suite)


def survival(views: list[dict]) -> list[list[float]]:
    """The share of programs whose trace still agrees after step k: ``[[k, share], ...]`` for k
    from 0 to the longest true trace (every step where it changes, for up to SURVIVAL_POINTS). A program agrees after step k when its first divergence
    comes later (or never: a trace that agreed to its end keeps counting)."""
    if not views:
        return []
    firsts = [(v.get("first_divergence") or {}).get("step") for v in views]
    firsts = [s if isinstance(s, int) else None for s in firsts]
    longest = max(int(v["frames"]["truth"]) for v in views)
    # every step (up to SURVIVAL_POINTS) until the last first divergence, where the curve moves;
    # after it the curve is flat to the longest trace, given at SURVIVAL_POINTS points at most
    moves = min(longest, max((s for s in firsts if s is not None), default=0) + 1)
    stride = max(1, -(-moves // SURVIVAL_POINTS))
    points = set(range(0, moves + 1, stride)) | {moves}
    if longest > moves:
        points |= set(range(moves, longest + 1, max(1, -(-(longest - moves) // SURVIVAL_POINTS)))) | {longest}
    return [[k, sum(1 for s in firsts if s is None or s > k) / len(views)] for k in sorted(points)]


def condition_metrics(views: list[dict]) -> dict:
    """Rates over the free-running (or teacher-forced) part of each record."""
    count = len(views)
    correct = sum(1 for v in views if v["output"]["correct"])
    truth_frames = sum(v["frames"]["truth"] for v in views)
    kinds = Counter(v["first_divergence"]["kind"] for v in views if v.get("first_divergence"))
    regimes = Counter(
        v["first_divergence"].get("regime") or "unclassified" for v in views if v.get("first_divergence")
    )
    statuses = Counter(_truncation(normal_status(v.get("status"))) for v in views)
    return {
        "count": count,
        "output_accuracy": rate(correct, count),
        "trace_exact": rate(sum(1 for v in views if v.get("trace_exact")), count),
        "action_exact": rate(sum(v["frames"]["action_matches"] for v in views), truth_frames),
        "state_exact": rate(sum(v["frames"]["state_matches"] for v in views), truth_frames),
        "valid_format": rate(sum(1 for v in views if not v["frames"].get("format_errors")), count),
        "first_divergence_kinds": dict(kinds.most_common()),
        "regimes": dict(regimes.most_common()),
        "truncations": {status: statuses.get(status, 0) for status in TRUNCATION_STATUSES},
        "intervals": intervals(views),
        "survival": survival(views),
    }


def _truncation(status: str) -> str:
    """The truncation a status counts as: a full context is the budget regime too."""
    return RolloutStatus.BUDGET.value if status == RolloutStatus.CONTEXT.value else status


def normal_status(status) -> str:
    """A results record's status as RolloutStatus names it (earlier files' spellings read too);
    anything else (``"error"``: the model call failed) as it is."""
    try:
        return RolloutStatus.read(status).value
    except ValueError:
        return str(status).lower()


def aggregate(records: Iterable[dict], suite: str | None = None) -> dict:
    """The report of a batch. Programs whose model calls failed (``status: error``, a server
    error) are not the model's answers: they are counted under ``model_errors`` and left out of
    every rate."""
    records = list(records)
    failed = [r for r in records if r.get("status") == "error"]
    records = [r for r in records if r.get("status") != "error"]
    report: dict = {
        "suite": suite or _common(r.get("suite") for r in records + failed) or "mixed",
        "model": _common(r.get("model") for r in records + failed),
    }
    report.update(condition_metrics(records))
    if failed:
        report["model_errors"] = {
            "count": len(failed),
            "ids": [r.get("id") for r in failed[:20]],
            "first": str(failed[0].get("error") or ""),
        }
    forced = [r["teacher_forced"] for r in records if r.get("teacher_forced")]
    if forced:
        report["teacher_forced"] = condition_metrics(forced)
        report["differences"] = {"teacher_forced - free": condition_differences(report["teacher_forced"], report)}
    decodings = {r.get("decoding") for r in records if r.get("decoding")}
    if decodings:  # how the free-running condition was decoded: "constrained", "free" (or "mixed")
        report["decoding"] = decodings.pop() if len(decodings) == 1 else "mixed"
    for name in DECODINGS:  # the other decoding, run beside it (--conditions)
        beside = [r[name] for r in records if isinstance(r.get(name), dict)]
        if beside:
            report[name] = condition_metrics(beside)
            constrained, free = (report[name], report) if name == "constrained" else (report, report[name])
            report.setdefault("differences", {})["constrained - free"] = condition_differences(constrained, free)
    sampled = sampling_report(records)
    if sampled is not None:
        report["samples"] = sampled
    recovered = recovery_report(records)
    if recovered is not None:
        report["recovery"] = recovered
    report["string_valued"] = string_valued_shares(records)
    report["tokens"] = _token_figures(records)
    report["timings"] = _timing_figures(records)
    by_n = breakdown_by_n(records)
    if by_n:
        report["by_n"] = by_n
    if any("depth" in r.get("metadata", {}) for r in records):
        report["by_depth"] = breakdown_by_depth(records)
        report["by_type"] = breakdown_by_type(records)
        report["by_form"] = breakdown_by_form(records)
    return report


def condition_differences(first: dict, second: dict) -> dict:
    """``first - second`` for each proportion, with Newcombe's 95% interval (it takes the two
    conditions as independent samples; on the same programs it is conservative)."""
    def proportion(metrics: dict, key: str) -> Proportion:
        cell = metrics["intervals"][key]
        return Proportion(cell["successes"], cell["n"], *cell["ci95"])

    return {key: difference(proportion(first, key), proportion(second, key)).to_json() for key in PROPORTIONS}


def string_valued_shares(records: list[dict]) -> dict:
    strings = [r for r in records if r["output"].get("string_valued")]
    failures = [r for r in records if not r["output"]["correct"]]
    failed_strings = [r for r in failures if r["output"].get("string_valued")]
    return {
        "outputs": rate(len(strings), len(records)),
        "failures": rate(len(failed_strings), len(failures)),
        "string_outputs": len(strings),
        "failures_count": len(failures),
        "string_failures": len(failed_strings),
        "accuracy_string": rate(sum(1 for r in strings if r["output"]["correct"]), len(strings)),
        "accuracy_other": rate(
            sum(1 for r in records if r["output"]["correct"] and not r["output"].get("string_valued")),
            len(records) - len(strings),
        ),
    }


def breakdown_by_n(records: list[dict]) -> dict:
    groups = _group(records, lambda r: r.get("metadata", {}).get("n"))
    table = {}
    for n in sorted(groups):
        rows = groups[n]
        entry = _cell(rows)
        forced = [r["teacher_forced"] for r in rows if r.get("teacher_forced")]
        if forced:
            entry["teacher_forced"] = _cell(forced)
        table[n] = entry
    return table


def breakdown_by_depth(records: list[dict]) -> dict:
    by_type = breakdown_by_type(records)
    groups = _group(records, lambda r: r.get("metadata", {}).get("depth"))
    table = {}
    for depth in sorted(groups):
        entry = _cell(groups[depth])
        weighted = [(cells[depth]["count"], cells[depth]["baseline"]) for cells in by_type.values()
                    if depth in cells and cells[depth]["baseline"] is not None]
        total = sum(c for c, _ in weighted)
        entry["baseline"] = sum(c * b for c, b in weighted) / total if total else None
        table[depth] = entry
    return table


def breakdown_by_type(records: list[dict]) -> dict:
    """Accuracy per type and depth, with the baseline ``p**d`` (p: the type's depth-1 accuracy)."""
    groups = _group(records, lambda r: r.get("metadata", {}).get("type"))
    table = {}
    for kind in sorted(groups, key=str):
        depths = _group(groups[kind], lambda r: r.get("metadata", {}).get("depth"))
        cells = {}
        for depth in sorted(depths):
            cell = cells[depth] = _cell(depths[depth])
            forms = _group(depths[depth], lambda r: r.get("metadata", {}).get("form"))
            if forms:
                cell["by_form"] = {form: _cell(forms[form])["output_accuracy"] for form in sorted(forms, key=str)}
        p = cells[1]["output_accuracy"] if 1 in cells else None
        for depth, cell in cells.items():
            cell["baseline"] = p**depth if p is not None else None
        table[kind] = cells
    return table


def breakdown_by_form(records: list[dict]) -> dict:
    groups = _group(records, lambda r: r.get("metadata", {}).get("form"))
    table = {}
    for form in sorted(groups, key=str):
        depths = _group(groups[form], lambda r: r.get("metadata", {}).get("depth"))
        table[form] = {depth: _cell(depths[depth]) for depth in sorted(depths)}
    return table


def _cell(views: list[dict]) -> dict:
    count = len(views)
    return {
        "count": count,
        "output_accuracy_ci95": wilson(sum(1 for v in views if v["output"]["correct"]), count).to_json()["ci95"],
        "output_accuracy": rate(sum(1 for v in views if v["output"]["correct"]), count),
        "trace_exact": rate(sum(1 for v in views if v.get("trace_exact")), count),
        "state_exact": rate(
            sum(v["frames"]["state_matches"] for v in views), sum(v["frames"]["truth"] for v in views)
        ),
    }


def _group(records: list[dict], key) -> dict:
    groups: dict = defaultdict(list)
    for record in records:
        value = key(record)
        if value is not None:
            groups[value].append(record)
    return groups


def _common(values) -> str | None:
    found = {v for v in values if v}
    return found.pop() if len(found) == 1 else None


def _token_figures(records: list[dict]) -> dict:
    trace = [r.get("tokens", {}).get("trace") for r in records]
    processed = [r.get("tokens", {}).get("processed") for r in records]
    trace = [t for t in trace if isinstance(t, int)]
    processed = [t for t in processed if isinstance(t, int)]
    return {
        "trace_mean": sum(trace) / len(trace) if trace else None,
        "trace_max": max(trace) if trace else None,
        "processed_total": sum(processed) if processed else None,
    }


def _timing_figures(records: list[dict]) -> dict:
    model = [r.get("timings", {}).get("model_s") for r in records]
    truth = [r.get("timings", {}).get("truth_s") for r in records]
    model = [t for t in model if isinstance(t, (int, float))]
    truth = [t for t in truth if isinstance(t, (int, float))]
    return {
        "model_s": sum(model) if model else None,
        "truth_s": sum(truth) if truth else None,
        "model_mean_s": sum(model) / len(model) if model else None,
    }
