"""One line of a results file: a program, the model's generation, and how it compares.

A results file (``cwmtui eval --out RESULTS.jsonl``) holds one JSON object per program. It is a
replay file (``{"id", "program" | ("code", "input"), "generation"}``), so any program of a run
reopens offline, and it carries what the triage view sorts by (``class``, ``string_valued``,
``step``) and what the report aggregates, so ``cwmtui eval --report RESULTS.jsonl`` reprints the
tables without a model. See docs/evaluation.md for every field.
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from pathlib import Path

from ..analysis.outcome import entry_outcome, is_string_value, outcomes_agree
from ..json_lines import read_json_lines
from ..trace import Frame, Trace

FORMAT_VERSION = 1


class ResultsError(Exception):
    """A results file that cannot be read; one line for the user."""


def frame_key(frame: Frame) -> tuple:
    return (frame.event, frame.action, frame.locals, frame.arg)


def frame_agrees(predicted: Frame | None, expected: Frame) -> bool:
    """The model's frame is the truth's, as *whole trace exact* asks: the same event, source
    line and state or value (``".."`` resolved), and well formed."""
    return predicted is not None and not predicted.is_error and frame_key(predicted) == frame_key(expected)


def condition_summary(truth: Trace, frames: list[Frame], status: str, text: str, comparison=None) -> dict:
    """What one rollout (free-running or teacher-forced) did, against the truth."""
    truth_outcome = entry_outcome(truth.frames)
    model_outcome = entry_outcome(f for f in frames if not f.is_error)
    actions, states = frame_matches(truth, frames, comparison)
    exact = (
        len(frames) == len(truth.frames)
        and status == "ended"
        and all(frame_agrees(p, t) for t, p in zip(truth.frames, frames))
    )
    divergence = _divergence_json(comparison)
    return {
        "generation": text,
        "status": status,
        "output": {
            "expected": truth_outcome.value,
            "expected_kind": truth_outcome.kind,
            "predicted": model_outcome.value,
            "predicted_kind": model_outcome.kind,
            "correct": outcomes_agree(truth_outcome, model_outcome),
        },
        "frames": {
            "truth": len(truth.frames),
            "model": len(frames),
            "format_errors": sum(1 for f in frames if f.is_error),
            "action_matches": actions,
            "state_matches": states,
        },
        "trace_exact": exact,
        "first_divergence": divergence,
        "class": divergence["kind"] if divergence else ("agree" if exact else "unclassified"),
    }


def rollout_summary(truth: Trace, rollout) -> dict:
    """:func:`condition_summary` of a finished free-running rollout (its frames, status, text,
    and the frame a budget cut, compared as far as it goes)."""
    from ..analysis.compare import compare

    comparison = compare(truth, rollout.frames, rollout.status, rollout.partial)
    return condition_summary(truth, rollout.frames, rollout.status.value, rollout.text(), comparison)


def frame_matches(truth: Trace, frames: list[Frame], comparison=None) -> tuple[int, int]:
    """How many truth frames the model got right: (action, state).

    With a comparison, its rows count (after a divergence the two paths are re-aligned, so a
    model back on the real path scores again); without one, frame k is paired with frame k.
    Action: the model's frame has the truth's event and source line. State: also its locals
    (or its return value / exception).
    """
    steps = getattr(comparison, "steps", None)
    if steps is not None:
        rows = [row for row in steps if row.truth is not None and row.model is not None and not getattr(row, "cut", False)]
        kinds = [getattr(row.kind, "value", row.kind) for row in rows]
        return sum(1 for k in kinds if k in ("match", "state", "value")), sum(1 for k in kinds if k == "match")
    actions = states = 0
    for expected, predicted in zip(truth.frames, frames):
        if predicted.is_error or predicted.event is None:
            continue
        if predicted.event is expected.event and predicted.action == expected.action:
            actions += 1
            if predicted.locals == expected.locals and predicted.arg == expected.arg:
                states += 1
    return actions, states


def result_record(
    case,
    suite: str,
    truth: Trace,
    free: dict,
    *,
    model: str = "",
    timings: dict | None = None,
    tokens: dict | None = None,
    teacher_forced: dict | None = None,
) -> dict:
    """The results-file line of one program (``free`` and ``teacher_forced`` from :func:`condition_summary`)."""
    program = case.program
    divergence = free.get("first_divergence")
    record = {
        "id": case.id,
        "suite": suite,
        "metadata": dict(case.metadata),
        "program": program.source,
        "entry": program.entry,
        "call": program.call,
        **case.given,  # code + input for CRUXEval
        "model": model,
        "generation": free["generation"],
        "status": free["status"],
        # the triage view sorts by these three
        "class": free["class"],
        "string_valued": bool(divergence and divergence.get("string_valued")),
        "step": divergence["step"] if divergence else None,
        "output": {**free["output"], "string_valued": is_string_value(free["output"]["expected"])},
        "trace_exact": free["trace_exact"],
        "frames": free["frames"],
        "first_divergence": divergence,
        "truth": {"status": truth.status.kind.value, "frames": len(truth.frames)},
        "timings": timings or {},
        "tokens": tokens or {},
        "version": FORMAT_VERSION,
    }
    if teacher_forced is not None:
        record["teacher_forced"] = teacher_forced
    return record


#: the status of a program whose model calls failed (a server error): not the model's answer
ERROR_STATUS = "error"


def error_record(case, suite: str, truth: Trace, error: str, *, model: str = "", timings: dict | None = None) -> dict:
    """The results-file line of a program the model could not be run on (the server failed):
    the error is its result, kept apart from the model's answers in the report."""
    outcome = entry_outcome(truth.frames)
    free = {
        "generation": "",
        "status": ERROR_STATUS,
        "output": {
            "expected": outcome.value,
            "expected_kind": outcome.kind,
            "predicted": None,
            "predicted_kind": None,
            "correct": False,
        },
        "frames": {"truth": len(truth.frames), "model": 0, "format_errors": 0, "action_matches": 0, "state_matches": 0},
        "trace_exact": False,
        "first_divergence": None,
        "class": "model error",
    }
    record = result_record(case, suite, truth, free, model=model, timings=timings)
    record["error"] = error
    return record


def _divergence_json(comparison) -> dict | None:
    return divergence_json(getattr(comparison, "first_divergence", None) if comparison is not None else None)


def divergence_json(divergence) -> dict | None:
    """A divergence as a results record keeps it (step, kind, regime, variables, line, story)."""
    if divergence is None:
        return None
    if hasattr(divergence, "to_json"):
        data = divergence.to_json()
    else:
        data = asdict(divergence) if is_dataclass(divergence) and not isinstance(divergence, type) else dict(divergence)
    kind = data.get("kind")
    data["kind"] = getattr(kind, "value", kind)
    data["variables"] = list(data.get("variables") or [])
    data["string_valued"] = bool(data.get("string_valued"))
    keys = ("step", "kind", "regime", "variables", "string_valued", "line", "explanation")
    return {key: data.get(key) for key in keys}


def read_results(path: str | Path) -> list[dict]:
    """The records of a results file, or a :class:`ResultsError` that says what is wrong."""
    records = []
    for number, record in read_json_lines(path, "results file", ResultsError):
        if "output" not in record or "frames" not in record:
            raise ResultsError(f"{path}:{number}: not a line of a 'cwmtui eval' results file")
        records.append(record)
    if not records:
        raise ResultsError(f"{path}: no results in it")
    return records
