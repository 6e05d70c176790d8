"""Compare the interpreter's trace (the truth) with a model's rollout, step by step.

Step ``k`` pairs the truth's frame ``k`` with the model's frame ``k`` for as long as both follow
the same path (same event, same source line). The first step that differs is the *first
divergence*, classified in the failure regimes of "Debugging code world models" (arXiv
2602.07672): action hallucination (the model took another line), state error (right line,
wrong locals), string-valued state (the first wrong variable holds a string), token-budget
exhaustion, plus format errors, early ends and runaway generations. After the paths part, the
rest of the two timelines is aligned (longest common runs of (event, line) pairs) so both can be
shown side by side and steps where the model is back on the real path are compared again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..trace import Event, Frame, RolloutStatus, Status, Trace
from ..trace.collector import collector_paused
from ..trace.tokens import strip_marker
from .values import shorten


from .comparison import (
    StepKind,
    VariableDiff,
    StepComparison,
    REGIMES,
    Divergence,
    Comparison,
    SavedSteps,
    SavedAlignment,
)
from .comparison import CUT_NOTE, MODEL_ONLY_STEP, SKIPPED_STEP, _compare_pair, _path_kind
from .cut_frame import judge_cut, model_base
from .explain import _a, _agreed, _cut_story, _end_story, _extra_story, _override_story, _path_story, _where

#: the data types live in comparison.py; they are imported from here too
__all__ = ["StepKind", "VariableDiff", "StepComparison", "REGIMES", "Divergence", "Comparison", "SavedSteps", "SavedAlignment", "compare", "divergence_at", "action_key", "changed_names", "SKIPPED_STEP", "MODEL_ONLY_STEP"]


def action_key(frame: Frame | None):
    """What must agree for two frames to be the same step: the event and the source line."""
    if frame is None or frame.event is None or frame.error is not None:
        return object()  # never equal to anything
    action = frame.action
    return (frame.event, strip_marker(action) if "START_OF_TRACE" in action else action)


def changed_names(frames: Sequence[Frame]) -> list[set[str]]:
    """For each frame, the names whose value differs from the scope's previous frame."""
    stack: list[dict[str, str]] = []
    result: list[set[str]] = []
    for frame in frames:
        changed: set[str] = set()
        # frames are not changed once made: the stack holds their locals, not copies
        if frame.event is Event.CALL:
            stack.append(frame.locals or {})
        elif frame.event is Event.LINE and frame.locals is not None:
            previous = stack[-1] if stack else {}
            changed = {k for k, v in frame.locals.items() if previous.get(k) != v}
            if stack:
                stack[-1] = frame.locals
            else:
                stack.append(frame.locals)
        elif frame.event is Event.RETURN and stack:
            stack.pop()
        result.append(changed)
    return result


RESYNC_WINDOW = 48  # steps the two paths may drift apart and still be re-synchronised
RESYNC_CONFIRM = 3  # matching steps in a row that count as being back on the same path


def _resync(a: list, b: list, i: int, j: int, same, b_grows: bool = False) -> tuple[int, int] | None:
    """The nearest (skip in a, skip in b) after which the paths run together again.

    Among the nearest candidates, the one whose steps also agree in state wins: in a loop the
    same lines come round again and again, and the values say which iteration is which.
    A shorter run that reaches the end of a trace counts too, unless that trace still grows
    (``b_grows``: a rollout still being written, whose next frame may part again): rows decided
    on its last frame would be laid out again with every frame, jumping while it streams.
    """
    n, m = len(a), len(b)
    for total in range(1, RESYNC_WINDOW + 1):
        best = None
        best_score = -1
        for skip_a in range(total + 1):
            ii, jj = i + skip_a, j + total - skip_a
            if ii >= n or jj >= m or a[ii] != b[jj]:
                continue
            run = 1
            while run < RESYNC_CONFIRM and ii + run < n and jj + run < m and a[ii + run] == b[jj + run]:
                run += 1
            if run == RESYNC_CONFIRM or ii + run == n or (jj + run == m and not b_grows):
                score = sum(1 for k in range(run) if same(ii + k, jj + k))
                if score > best_score:
                    best, best_score = (skip_a, total - skip_a), score
        if best is not None:
            return best
    return None


def _rest_alignment(truth_keys: list, model_keys: list, start: int, same=lambda i, j: False,
                    model_grows: bool = False) -> list[tuple[int | None, int | None]]:
    """Rows for the two paths from ``start`` on, re-synchronised where (event, line) runs match.

    Greedy: where the paths differ, find the nearest pair of steps from which they run
    together again (within a window) and show the steps in between on their own side; when
    there is none, pair steps one to one. Linear in the trace length for a fixed window.
    """
    a, b = truth_keys, model_keys
    n, m = len(a), len(b)
    rows: list[tuple[int | None, int | None]] = []
    i = j = start
    while i < n and j < m:
        if a[i] == b[j]:
            rows.append((i, j))
            i += 1
            j += 1
            continue
        found = _resync(a, b, i, j, same, model_grows)
        if found is None:
            # no common path in sight: pair steps one to one for half a window, then look again
            for _ in range(min(RESYNC_WINDOW // 2, n - i, m - j)):
                rows.append((i, j))
                i += 1
                j += 1
            continue
        skip_a, skip_b = found
        paired = min(skip_a, skip_b)
        rows += [(i + k, j + k) for k in range(paired)]
        rows += [(i + k, None) for k in range(paired, skip_a)]
        rows += [(None, j + k) for k in range(paired, skip_b)]
        i += skip_a
        j += skip_b
    rows += [(k, None) for k in range(i, n)]
    rows += [(None, k) for k in range(j, m)]
    return rows


_TRUTH_CACHE: list = [None]  # (frames list, its length, keys, changed names) of the last truth


def _truth_facts(frames: Sequence[Frame]) -> tuple[list, list[set[str]]]:
    """Keys and changed names of the truth's frames; a truth compared again (a UI re-comparing
    a streaming rollout) reuses them."""
    cached = _TRUTH_CACHE[0]
    if cached is not None and cached[0] is frames and cached[1] == len(frames):
        return cached[2], cached[3]
    keys = [action_key(f) for f in frames]
    changed = changed_names(frames)
    _TRUTH_CACHE[0] = (frames, len(frames), keys, changed)
    return keys, changed


def compare(truth: Trace, frames: Sequence[Frame], status: RolloutStatus = RolloutStatus.ENDED,
            partial: str = "") -> Comparison:
    """Compare the truth with a model's frames; ``status``: why the model's trace stopped.

    A model that ran out of tokens (budget or context) may have stopped in the middle of a
    frame: its text is ``partial`` (a rollout's ``partial``: its frames never hold it), or else
    the last of ``frames`` as an unterminated error frame. That frame is no format error; but
    where what it had written already differs from the interpreter's frame at its row, the row
    is a divergence."""
    if not isinstance(status, RolloutStatus):
        raise TypeError(f"compare() takes a RolloutStatus, not {status!r} (RolloutStatus.read() reads a saved one)")
    with collector_paused():  # a row, two sets and a list a step: the collector would rescan them
        return _compare(truth, frames, status, partial)


def _compare(truth: Trace, frames: Sequence[Frame], status: RolloutStatus, partial: str = "") -> Comparison:
    cut_text = partial if status.out_of_tokens else ""
    if status.out_of_tokens and not cut_text and frames and frames[-1].is_error:
        cut_text = frames[-1].raw or ""
        frames = frames[:-1]  # the frame the budget cut off in the middle: not a format error
    truth_frames = truth.frames
    truth_partial = not truth.status.whole and truth.status.kind in (Status.LIMIT, Status.DIED)
    truth_keys, truth_changed = _truth_facts(truth_frames)
    model_keys = [action_key(f) for f in frames]
    n_truth, n_model = len(truth_frames), len(frames)
    common = 0
    limit = min(n_truth, n_model)
    while common < limit and truth_keys[common] == model_keys[common]:
        common += 1
    alignment: list[tuple[int | None, int | None]] = [(i, i) for i in range(common)]
    if common < max(n_truth, n_model):

        def same(ti: int, mi: int) -> bool:
            t, m = truth_frames[ti], frames[mi]
            return t.locals == m.locals and t.arg == m.arg

        alignment += _rest_alignment(truth_keys, model_keys, common, same, model_grows=status.stopped_early)

    model_changed = changed_names(frames)
    last_model_row = max((r for r, (_, m) in enumerate(alignment) if m is not None), default=-1)
    last_truth_row = max((r for r, (t, _) in enumerate(alignment) if t is not None), default=-1)

    steps: list[StepComparison] = []
    for row, (ti, mi) in enumerate(alignment):
        t = truth_frames[ti] if ti is not None else None
        m = frames[mi] if mi is not None else None
        variables: list[VariableDiff] = []
        order = False
        note = ""
        if ti is not None and mi is not None and t is not None and m is not None:
            if truth_keys[ti] == model_keys[mi]:
                kind, variables, order, note = _compare_pair(t, m)
            else:
                kind = _path_kind(t, m)
        elif t is not None:
            if row > last_model_row:
                kind = StepKind.PENDING if status.stopped_early else StepKind.MISSING
            else:
                kind, note = StepKind.ACTION, SKIPPED_STEP
        else:
            if row > last_truth_row:
                kind = StepKind.UNCHECKED if truth_partial else StepKind.EXTRA
            elif m is not None and (m.event is None or m.error is not None):
                kind = StepKind.FORMAT
            else:
                kind, note = StepKind.ACTION, MODEL_ONLY_STEP
        steps.append(
            StepComparison(
                step=row,
                truth=t,
                model=m,
                kind=kind,
                variables=variables,
                changed=truth_changed[ti] if ti is not None else set(),
                truth_index=ti,
                model_index=mi,
                model_changed=model_changed[mi] if mi is not None else set(),
                order_differs=order,
                note=note,
            )
        )

    if cut_text and last_model_row + 1 < len(steps) and steps[last_model_row + 1].kind is StepKind.MISSING:
        row = last_model_row + 1
        cut_truth = steps[row].truth
        judged = judge_cut(cut_truth, cut_text, model_base(frames, truth_frames, alignment)) if cut_truth else None
        if judged is not None:
            kind, model, variables = judged
            steps[row] = replace(steps[row], model=model, kind=kind, variables=variables, note=CUT_NOTE)

    result = Comparison(steps, None, alignment, "agree", status, 0, truth.status.ending)
    first = next((row for row in steps if row.kind.is_divergence), None)
    if first is not None:
        result.first_divergence = divergence_at(steps, first.step, status, truth.status.ending)
        result.verdict = "diverge"
        result.agreed_steps = first.step
    else:
        if status.stopped_early and n_model < n_truth:
            result.verdict = "pending"
        result.agreed_steps = sum(1 for s in steps if s.kind is StepKind.MATCH)
    return result


def divergence_at(steps: Sequence[StepComparison], row: int, status: RolloutStatus,
                  ending: str = "the entry function returned") -> Divergence | None:
    """The divergence shown at ``row``, classified and explained (None for a matching row)."""
    here = steps[row]
    kind = here.kind
    if not kind.is_divergence:
        return None
    if here.cut and here.truth is not None:
        return _cut_divergence(here, steps, status)
    if kind in (StepKind.STATE, StepKind.VALUE) and here.variables:
        return _state_divergence(here, steps)
    n_truth = sum(1 for s in steps if s.truth is not None)
    n_model = sum(1 for s in steps if s.model is not None)
    agreed = sum(1 for s in steps[:row] if s.kind is StepKind.MATCH)
    if kind is StepKind.MISSING:
        name = "budget" if status.out_of_tokens else "format" if status is RolloutStatus.FRAME_LIMIT else "truncated"
        done = sum(1 for s in steps[:row] if s.model is not None)
        story = _end_story(name, status, here.truth, done, n_truth)
        return _make(here, name, [], False, story, here.truth, None)
    if kind is StepKind.EXTRA:
        done = sum(1 for s in steps[:row] if s.truth is not None)
        return _make(here, "extra", [], False, _extra_story(here.model, done, n_model, ending), None, here.model)
    # the paths part: compare the interpreter's next step with the model's next step
    truth = here.truth or next((s.truth for s in steps[row:] if s.truth is not None), None)
    model = here.model or next((s.model for s in steps[row:] if s.model is not None), None)
    if truth is None or model is None:  # one path has nothing left: describe it as an end
        if model is None:
            return _make(here, "truncated", [], False, _end_story("truncated", status, truth, row, n_truth), truth, None)
        return _make(here, "extra", [], False, _extra_story(model, row, n_model, ending), None, model)
    name = _path_kind(truth, model).value
    if model.origin == "overridden" and name in ("action", "event"):  # the user's line, not the model's
        return _make(here, "override", [], False, _override_story(truth, model, row), truth, model)
    return _make(here, name, [], False, _path_story(name, truth, model, steps, row, agreed), truth, model)


def _make(row: StepComparison, kind, variables, string_valued, explanation, truth, model) -> Divergence:
    regime = REGIMES["string"] if string_valued else REGIMES[kind]
    lineno = (truth.lineno if truth is not None else None) or (model.lineno if model is not None else None)
    return Divergence(
        step=row.step,
        kind=kind,
        variables=variables,
        string_valued=string_valued,
        regime=regime,
        explanation=explanation,
        truth_index=row.truth_index,
        model_index=row.model_index,
        lineno=lineno,
    )


def _state_divergence(row: StepComparison, steps: Sequence[StepComparison]) -> Divergence:
    first = row.variables[0]
    string_valued = first.type_name == "str"
    names = [v.name for v in row.variables]
    kind = "value" if row.kind is StepKind.VALUE else "state"
    truth = row.truth
    if kind == "value":
        what = "exception" if truth is not None and truth.event is Event.EXCEPTION else "return value"
        story = (
            f"At step {row.step} the model followed the right path to {_where(truth)} but predicted the "
            f"wrong {what}: {shorten(first.predicted)} instead of {shorten(first.expected)}"
            f" ({_a(first.type_name)})."
        )
    elif first.missing:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model's locals lack `{first.name}`, "
            f"which holds {shorten(first.expected)} ({_a(first.type_name)})."
        )
    elif first.extra:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model's locals have a `{first.name}` "
            f"({shorten(first.predicted)}) that the real program does not have yet."
        )
    else:
        story = (
            f"At step {row.step}, before {_where(truth)} runs, the model thinks `{first.name}` is "
            f"{shorten(first.predicted)} but it is {shorten(first.expected)} ({_a(first.type_name)})."
        )
    if len(names) > 1:
        story += f" {len(names) - 1} more variable{'s' if len(names) > 2 else ''} differ ({', '.join(names[1:4])}{', …' if len(names) > 4 else ''})."
    if first.literal_equal:
        story += " The two spell the same Python value in different text (ordering or quoting), so the value is right but the text is not."
    story += " " + _agreed(row.step, sum(1 for s in steps[: row.step] if s.kind is StepKind.MATCH))
    story += " The model stayed on the right path, so this is a state error, not an action hallucination."
    if string_valued:
        story += (
            " The wrong value is a string: string-valued state is where CWM fails most, because the tokenizer splits"
            " strings into subword pieces and the model must rebuild them piece by piece (the token lens shows the pieces)."
        )
    later = [s for s in steps[row.step + 1 :] if s.kind in (StepKind.ACTION, StepKind.EVENT)]
    if later:
        story += f" The wrong state later sends the model down another path (step {later[0].step})."
    return _make(row, kind, names, string_valued, story, row.truth, row.model)


# -- a frame the model ran out of tokens in the middle of (judged in cut_frame.py) ---------


def _cut_divergence(row: StepComparison, steps: Sequence[StepComparison], status: RolloutStatus) -> Divergence:
    """The divergence of a row whose model frame was cut off but already differs."""
    kind = row.kind.value
    first = row.variables[0] if row.variables else None
    string_valued = kind in ("state", "value") and first is not None and first.type_name == "str"
    matched = sum(1 for s in steps[: row.step] if s.kind is StepKind.MATCH)
    story = _cut_story(kind, status, row.truth, row.model, first, row.step, matched)
    return _make(row, kind, [v.name for v in row.variables], string_valued, story, row.truth, row.model)
