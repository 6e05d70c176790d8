"""Recovery at batch scale (``cwmtui eval --recovery``): at each program's first divergence, give
the model the truth and let it run on.

Two interventions, each on a branch of the program's own :class:`DebugSession` (the debugger's
``o`` does the first one): the interpreter's real next line forced at the divergence (``action``:
was it a slip of control?), and the interpreter's whole frame there, its event, state and line
(``frame``: can the model go on from the true state?). Each records whether the branch's state
agrees with the interpreter's again, after how many steps, for how long, and whether its output
comes out right: ``record["recovery"]`` (see docs/evaluation.md).

Replays: the recorded generations of the free-running condition are reused; the interventions
run on a live model when one is given, or are replayed from an earlier results file's
``recovery`` generations.
"""

from __future__ import annotations

from ..analysis.recovery import RECOVERY_CONDITIONS as CONDITIONS
from ..session import Branch, DebugSession, SessionError
from ..session.intervention import Intervention
from ..trace import RolloutStatus
from .record import condition_summary, divergence_json


class RecoveryCancelled(Exception):
    """The run was cancelled while an intervention ran: the program is not done."""


def recover(model, truth, free_rollout, options, limits=None, recorded: dict | None = None, cancel=None) -> dict | None:
    """``record["recovery"]`` of one program: None where the free-running trace agreed (nothing
    to recover from), ``{"skipped": why}`` where there is no true step to force, else the
    divergence and one result per :data:`CONDITIONS`.

    ``model``: a live backend, or None to replay ``recorded`` (an earlier record's ``recovery``).
    """
    session = DebugSession(truth.case.program, model, options, limits, truth=truth.trace)
    main = session.adopt(free_rollout)
    divergence = main.comparison.first_divergence if main.comparison is not None else None
    if divergence is None:
        return None
    step = divergence.truth_index
    head: dict = {"step": step, "row": divergence.step, "kind": divergence.kind, "string_valued": divergence.string_valued}
    if step is None:
        return {**head, "skipped": "the model wrote on past the program's end: there is no true step to force"}
    if step == 0:
        return {**head, "skipped": "the generation holds no frame: there is nothing to go on from"}
    result: dict = dict(head)
    line_was_right = _line_was_right(main.frames, truth.trace.frames, step)
    for condition in CONDITIONS:
        branch: Branch | None
        if condition == "action" and line_was_right:
            result[condition] = {"skipped": LINE_WAS_RIGHT}
            continue
        if model is not None:
            try:
                branch = (session.override_with_truth(main, step, cancel=cancel) if condition == "action"
                          else session.override_with_frame(main, step, cancel=cancel))
            except SessionError as exc:
                result[condition] = {"skipped": str(exc)}
                continue
            if branch.status is RolloutStatus.CANCELLED:
                raise RecoveryCancelled(truth.case.id)
        else:
            branch = replayed_branch(session, (recorded or {}).get(condition))
            if branch is None:
                result[condition] = {"skipped": "no recorded generation for this intervention"}
                continue
        result[condition] = condition_result(truth, branch)
    return result


#: why the real line is not forced where the model's own line was right (a state or value
#: divergence): the model writes a step's state before its line, so the branch would write the
#: same wrong state again (under greedy decoding, the same trace byte for byte)
LINE_WAS_RIGHT = "the model's line there was right: forcing it changes nothing"


def _line_was_right(frames, truth, step: int) -> bool:
    """The model's frame at ``step`` has the interpreter's event and source line."""
    from ..trace.tokens import strip_marker

    if step >= len(frames) or step >= len(truth):
        return False
    mine, real = frames[step], truth[step]
    return not mine.is_error and mine.event is real.event and strip_marker(mine.action or "") == strip_marker(real.action or "")


def condition_result(truth, branch) -> dict:
    """What one intervention's branch did after it, against the truth."""
    rollout = branch.rollout
    text = rollout.text() if rollout is not None else ""
    summary = condition_summary(truth.trace, list(branch.frames), branch.status.value, text, branch.comparison)
    recovery = branch.recovery
    recovered = recovery is not None and recovery.recovered_at is not None
    return {
        "intervention": branch.intervention.to_json() if branch.intervention is not None else None,
        "generation": text,
        "status": summary["status"],
        "recovered": recovered,
        "at_row": recovery.at_step if recovery is not None else None,
        "recovered_at": recovery.recovered_at if recovery is not None else None,
        "steps_to_recover": recovery.recovered_at - recovery.at_step if recovered else None,
        "held_for": recovery.held_for if recovery is not None else 0,
        "held_to_end": bool(recovery is not None and recovery.held_to_end),
        "matched_after": recovery.matched_after if recovery is not None else 0,
        "rows_after": recovery.rows_after if recovery is not None else 0,
        "next_divergence": divergence_json(recovery.first_divergence) if recovery is not None else None,
        "summary": recovery.describe() if recovery is not None else "",
        "output": summary["output"],
        "trace_exact": summary["trace_exact"],
        "tokens": dict(branch.tokens),
    }


def recorded_branches(session: DebugSession, recovery) -> list[Branch]:
    """The interventions a results record's ``recovery`` holds, replayed as branches of
    ``session`` (whose main is the record's own rollout): what the debugger shows of them."""
    if not isinstance(recovery, dict):
        return []
    found = (replayed_branch(session, recovery.get(condition)) for condition in CONDITIONS)
    return [branch for branch in found if branch is not None]


def replayed_branch(session: DebugSession, recorded) -> Branch | None:
    """The branch an earlier run recorded for one intervention, replayed and scored again."""
    from .replayed import replayed_rollout

    if not isinstance(recorded, dict) or not isinstance(recorded.get("generation"), str):
        return None
    try:
        intervention = Intervention.from_json(recorded.get("intervention"))
    except (TypeError, ValueError):
        return None
    rollout = replayed_rollout(session.program, recorded)
    return session.adopt(rollout, name=f"main/{intervention.step}", parent="main", at_step=intervention.step,
                         intervention=intervention)


#: what became of a program's first divergence under ``--recovery``, as the triage list filters
#: it (each reads after "failures that …")
RECOVERS = "recover with the real line"
NEEDS_STATE = "recover only with the real frame"
LOST = "did not recover"
OUTCOMES = (RECOVERS, NEEDS_STATE, LOST)


def recovery_outcome(record: dict) -> str:
    """One of :data:`OUTCOMES` for a record run with ``--recovery`` ("" for none: it agreed, was
    not intervened on, or was not run with it)."""
    recovery = record.get("recovery")
    if not isinstance(recovery, dict) or "skipped" in recovery:
        return ""
    line, frame = recovery.get("action"), recovery.get("frame")
    recovered = [isinstance(r, dict) and bool(r.get("recovered")) for r in (line, frame)]
    if not any(isinstance(r, dict) and "skipped" not in r for r in (line, frame)):
        return ""
    if recovered[0]:
        return RECOVERS
    return NEEDS_STATE if recovered[1] else LOST


def recovery_lines(record: dict) -> list[tuple[str, str]]:
    """(intervention, what followed) for people: the triage panel's recovery lines."""
    recovery = record.get("recovery")
    if not isinstance(recovery, dict):
        return []
    if "skipped" in recovery:
        return [("recovery", f"not intervened on: {recovery['skipped']}")]
    lines = []
    for condition, label in (("action", "real line"), ("frame", "real frame")):
        result = recovery.get(condition)
        if isinstance(result, dict):
            lines.append((label, str(result.get("skipped") or result.get("summary") or "")))
    return lines
