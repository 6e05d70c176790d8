"""The English of a divergence: what happened at a step, for people (used by compare's
classification; every sentence a user reads about a divergence is written here)."""

from __future__ import annotations

from typing import Sequence


from ..trace import Frame, RolloutStatus


from .comparison import StepComparison, StepKind


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
        return (
            f"The model used up its token budget after {step} steps, with {remaining} of the interpreter's "
            f"{n_truth} steps still to go (the next would be {_where(truth)}). Every step it did write agreed with "
            "the interpreter. This is token-budget exhaustion: a long trace (many loop iterations, long values) "
            "runs out of tokens before it runs out of steps; a larger --token-budget lets it go on."
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

