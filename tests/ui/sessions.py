"""Deterministic sessions for the UI tests: a real truth, model frames parsed from a perturbed
rendering of it (what a replayed generation with one mistake looks like). No model runs."""

from __future__ import annotations

from pathlib import Path

from cwmtui.interpreter import load_program
from cwmtui.session import Branch, DebugSession
from cwmtui.trace import Compressor, RolloutStatus, frame_segments, parse_trace, prompt_segments
from cwmtui.ui.branch_view import SessionView

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "samples"


def frame_texts(frames) -> list[str]:
    compressor = Compressor()
    return ["".join(frame_segments(f, compressor)) for f in frames]


def model_frames(program, truth, edit=None, cut: int | None = None, end: bool = True):
    """Parse the truth's rendering after ``edit(step, text) -> text`` changed some frames."""
    texts = frame_texts(truth.frames)
    if edit is not None:
        texts = [edit(step, text) for step, text in enumerate(texts)]
    if cut is not None:
        texts = texts[:cut]
    body = "".join(texts) + ("<|end_of_text|>" if end else "")
    parser = parse_trace("".join(prompt_segments(program.source)) + body, program.source)
    frames = parser.frames
    for frame, text in zip(frames, texts):
        frame.tokens = len(text.encode())  # what the bundled byte model pays per frame
        frame.origin = "generated"
    return frames


def replace_once(step_wanted: int, old: str, new: str):
    def edit(step: int, text: str) -> str:
        if step == step_wanted:
            assert old in text, (old, text)
            return text.replace(old, new, 1)
        return text

    return edit


def offline_view(program, truth, frames, description="replay · recorded generation (test)") -> SessionView:
    """A session as `cwmtui open` shows it: no model behind it, the frames as recorded."""
    session = DebugSession(program, None, truth=truth)
    session.model_name, session.model_description = "replay", description
    branch = Branch("main", frames=frames, status=RolloutStatus.ENDED,
                    tokens={"trace": sum(f.tokens for f in frames), "processed": 0})
    session.branches = [branch]
    session.compare_branch(branch)
    return SessionView.from_session(session, origin="test")


def strings_view(interpreter) -> SessionView:
    """samples/strings.py with the model writing 'rv' for 'ru' (a string-valued error)."""
    program = load_program(str(SAMPLES / "strings.py"))
    truth = interpreter.trace(program)
    step = next(i for i, f in enumerate(truth.frames) if (f.locals or {}).get("rotated") == "'ru'")
    frames = model_frames(program, truth, replace_once(step, "\"rotated\": \"'ru'\"", "\"rotated\": \"'rv'\""))
    return offline_view(program, truth, frames)


def exception_view(interpreter) -> SessionView:
    """samples/exception.py where the model believes int('x7') works (an action divergence)."""
    program = load_program(str(SAMPLES / "exception.py"))
    truth = interpreter.trace(program)
    texts = frame_texts(truth.frames)
    step = next(i for i, f in enumerate(truth.frames) if f.event is not None and f.event.value == "exception")
    wrong = "<|return_sep|><|action_sep|>    return value * 2\n<|arg_sep|>\"14\"<|frame_sep|>"
    body = "".join(texts[:step]) + wrong + "<|end_of_text|>"
    parser = parse_trace("".join(prompt_segments(program.source)) + body, program.source)
    for frame, text in zip(parser.frames, texts[:step] + [wrong]):
        frame.tokens = len(text.encode())
        frame.origin = "generated"
    return offline_view(program, truth, parser.frames)
