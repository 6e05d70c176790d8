"""The English of a divergence: what happened at a step, for people (used by compare's
classification; every sentence a user reads about a divergence is written here)."""

from __future__ import annotations

from typing import Sequence


from ..trace import Frame, RolloutStatus


from .comparison import StepComparison, StepKind, VariableDiff
from .values import shorten


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def _event(frame: Frame) -> str:
    """A frame's event as a word ("malformed" for a frame without one)."""
    return frame.event.value if frame.event is not None else "malformed"


def _where(frame: Frame | None) -> str:
    if frame is None:
        return ""
    line = f"line {frame.lineno}" if frame.lineno else "a line"
    return f"{line} (`{frame.action.strip()}`)"


def _agreed(step: int, matched: int | None = None) -> str:
    if step == 0:
        return "The very first step already differs."
    if matched is not None and matched != step:
        return f"{matched} of the {step} steps before it matched the interpreter."
    return f"The model agreed with the interpreter for {step} step{'s' if step != 1 else ''} before that."


def _path_story(kind: str, truth: Frame, model: Frame, steps: Sequence[StepComparison], common: int, matched: int) -> str:
    if kind == "format":
        return (
            f"At step {common} the model wrote a frame that does not follow the CWM trace format "
            f"({model.error}); the interpreter's step was {_a(_event(truth))} event at {_where(truth)}. "
            + _agreed(common, matched)
            + " A format error ends what can be compared: the model's text no longer says which line runs next or what the locals are."
        )
    if kind == "event":
        what = f"{_a(_event(model))} event at {_where(model)}"
        story = (
            f"At step {common} the interpreter has {_a(_event(truth))} event at {_where(truth)}, "
            f"but the model predicted {what}. "
        )
    else:
        story = (
            f"At step {common} the interpreter runs {_where(truth)} next, but the model predicted "
            f"{_where(model)}. "
        )
    story += _agreed(common, matched)
    story += " This is an action hallucination: the model lost track of the control flow"
    story += ", although the state it carried up to here was right." if matched == common else "."
    resync = next((s for s in steps[common + 1 :] if s.truth is not None and s.model is not None and s.kind in (StepKind.MATCH, StepKind.STATE)), None)
    if resync is not None:
        story += (
            f" The two paths meet again at row {resync.step} (interpreter step {resync.truth_index}, "
            f"model step {resync.model_index})."
        )
    else:
        story += " The two paths do not meet again."
    return story


def _end_story(kind: str, status: RolloutStatus, truth: Frame | None, step: int, n_truth: int) -> str:
    remaining = n_truth - step
    if kind == "budget":
        context = status is RolloutStatus.CONTEXT
        if step == 0:
            return (
                f"The model's trace has no frame: it stopped before its first step "
                f"({'its context was full' if context else 'its token budget ran out, or the recorded generation is empty'}), "
                f"where the interpreter's trace has {n_truth} steps, starting with {_where(truth)}. "
                "No step of the model's can agree with the interpreter's."
            )
        used = "filled its context" if context else "used up its token budget"
        more = ("a model with a longer context (or a shorter program) lets it go on" if context
                else "a larger --token-budget lets it go on")
        return (
            f"The model {used} after {step} steps, with {remaining} of the interpreter's "
            f"{n_truth} steps still to go (the next would be {_where(truth)}). Every step it did write agreed with "
            "the interpreter. This is token-budget exhaustion: a long trace (many loop iterations, long values) "
            f"runs out of tokens before it runs out of steps; {more}."
        )
    if kind == "format":
        return (
            f"After {step} agreeing steps the model's next frame ran past the per-frame token limit without "
            f"closing, a format error; the interpreter's next step is {_where(truth)}."
        )
    if status is RolloutStatus.CANCELLED:
        return f"The rollout was cancelled after {step} steps; every step it wrote agreed with the interpreter."
    if status is RolloutStatus.MAX_FRAMES:
        return (
            f"The rollout stopped at its frame cap after {step} steps; the interpreter's trace has {n_truth}. "
            "Every step it wrote agreed."
        )
    return (
        f"The model ended the trace (end of text) after {step} steps, but the interpreter goes on for "
        f"{remaining} more, starting with {_where(truth)}. Every step the model wrote agreed: it stopped too early."
    )


def _cut_story(kind: str, status: RolloutStatus, truth: Frame | None, model: Frame | None,
               first: VariableDiff | None, step: int, matched: int) -> str:
    """A frame the model ran out of tokens in the middle of, whose text already differs."""
    limit = "the model's context filled up" if status is RolloutStatus.CONTEXT else "the token budget ran out"
    story = f"At step {step} {limit} in the middle of the model's frame, but what it had written of it already differs: "
    written = shorten((model.raw if model is not None else "") or "")
    if kind == "state" and first is not None and first.missing:
        story += f"its locals before {_where(truth)} close without `{first.name}`, which holds {shorten(first.expected)}."
    elif kind == "state" and first is not None and first.extra:
        story += f"its locals before {_where(truth)} have a `{first.name}` that the real program does not have yet."
    elif kind == "state" and first is not None:
        story += (
            f"before {_where(truth)} runs, the model thinks `{first.name}` is {shorten(first.predicted)} but it is "
            f"{shorten(first.expected)} ({_a(first.type_name)})."
        )
    elif kind == "state":
        story += f"the locals it began to write before {_where(truth)} are not the interpreter's ({written})."
    elif kind == "value" and first is not None:
        what = "exception" if first.name == "raise" else "return value"
        story += f"at {_where(truth)} it began the {what} {shorten(first.predicted)}, but it is {shorten(first.expected)}."
    elif kind in ("action", "event") and model is not None and model.event is not None:
        line = model.action.strip()
        began = f"{_a(_event(model))} event" + (f" at `{line}…`" if line else "")
        story += f"the interpreter has {_a(_event(truth)) if truth is not None else 'an'} event at {_where(truth)}, but the model began {began}."
    else:
        story += f"the text ({written}) does not follow the CWM trace format; the interpreter's step is {_where(truth)}."
    story += " " + _agreed(step, matched)
    if kind in ("action", "event"):
        story += " This is an action hallucination, not token-budget exhaustion: the tokens ran out after the model had left the real path."
    elif kind in ("state", "value"):
        story += " This is a state error, not token-budget exhaustion: the tokens ran out after the state had gone wrong."
        if first is not None and first.type_name == "str":
            story += " The wrong value is a string: string-valued state is where CWM fails most."
    return story


def _extra_story(model: Frame | None, step: int, n_model: int, ending: str = "the entry function returned") -> str:
    return (
        f"The interpreter's trace ends after {step} steps ({ending}), but the model did not "
        f"write end of text: it ran on past the end with {n_model - step} more frame{'s' if n_model - step != 1 else ''}, "
        f"starting with {_a(_event(model)) + ' event' if model is not None and model.event else 'a malformed frame'} at {_where(model)}. "
        "Everything up to the end agreed; this is a runaway generation (the model's trace is too long)."
    )


def _override_story(truth: Frame, model: Frame, step: int) -> str:
    return (
        f"At step {step} the line is yours: the model was given {_where(model)} where the interpreter runs "
        f"{_where(truth)}. The paths part here because of the override, not because of the model; what the "
        "model does from here on is its answer to the line it was given."
    )

