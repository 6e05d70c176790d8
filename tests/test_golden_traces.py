"""Golden traces: each program in tests/golden/ traced by the real interpreter must give the
committed CWM text byte for byte, and that text must parse back to the very same frames.

The .cwm files were read frame by frame against the spec's rules (§3 events, §4 locals and the
".." rule); regenerate them with scripts/regen_goldens.py only for a deliberate change.
"""

import json

import os

import pytest

from cwmtui.trace import Event, parse_trace, render_frames, render_trace, tokens
from cwmtui.trace.render import ELIDED, frames_segments, prompt_segments

from . import goldens

NAMES = goldens.names()


@pytest.fixture(scope="module")
def traces(interpreter):
    return {name: (goldens.program(name), interpreter.trace(goldens.program(name))) for name in NAMES}


def test_there_are_enough_goldens():
    assert len(NAMES) >= 21
    assert all((goldens.GOLDEN / f"{name}.cwm").exists() for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_trace_matches_golden_text(traces, name):
    program, trace = traces[name]
    assert trace.status.kind is goldens.expected_status(name), trace.status.describe()
    assert render_frames(trace.frames, end=True) == goldens.expected_text(name)


def test_the_pure_python_tracer_records_the_same_traces(traces):
    # the C line tracer (when built) and the pure-Python one behind it must agree frame for frame
    from cwmtui.interpreter import Interpreter

    with Interpreter(accelerated=False) as pure:
        for name in NAMES:
            program, trace = traces[name]
            again = pure.trace(program)
            assert again.frames == trace.frames, name
            assert again.status == trace.status, name


def test_the_c_line_tracer_is_built_where_a_compiler_was_at_hand():
    import shutil

    from cwmtui.interpreter import child

    import sysconfig

    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if (shutil.which("gcc") is None and shutil.which("cc") is None) or not os.path.exists(headers):
        pytest.skip("no C compiler or Python headers: the pure-Python tracer runs alone")
    assert child._LineTracer is not None, "pip install -e . builds cwmtui/interpreter/_linetrace.c"


def _has_special_literal(program, trace) -> bool:
    """Does literal special-token text occur in the program or its values? Then only the
    segment form is unambiguous (spec §1.1: prompts go to a model as ids, not text)."""
    texts = [program.source] + [f.arg or "" for f in trace.frames]
    texts += [v for f in trace.frames for v in (f.locals or {}).values()]
    return any(t in text for text in texts for t in tokens.SPECIAL_TOKENS)


@pytest.mark.parametrize("name", NAMES)
def test_golden_round_trips_through_the_parser(traces, name):
    program, trace = traces[name]
    by_segments = parse_trace(prompt_segments(program.source) + frames_segments(trace.frames, end=True))
    assert by_segments.context == program.source
    assert by_segments.ended
    assert by_segments.frames == trace.frames  # lineno, depth and function included
    if not _has_special_literal(program, trace):
        by_text = parse_trace(render_trace(program.source, trace.frames))
        assert by_text.context == program.source
        assert by_text.frames == trace.frames


def _shown_locals(text: str) -> list[dict | None]:
    """The locals each frame of a golden's text shows, as written (".." kept)."""
    shown = []
    for frame_text in text.removesuffix(tokens.END_OF_TEXT).split(tokens.FRAME_SEP)[:-1]:
        head, _, rest = frame_text.partition(tokens.ACTION_SEP)
        event = next(t for t in (tokens.CALL_SEP, tokens.LINE_SEP, tokens.RETURN_SEP, tokens.EXCEPTION_SEP) if head.startswith(t))
        body = head[len(event):]
        shown.append(json.loads(body) if event in (tokens.CALL_SEP, tokens.LINE_SEP) else None)
        if event in (tokens.RETURN_SEP, tokens.EXCEPTION_SEP):
            assert body == "" and tokens.ARG_SEP in rest  # no locals, an arg
    return shown


@pytest.mark.parametrize("name", [n for n in NAMES if n != "special_token_literal"])
def test_golden_text_follows_the_dotdot_rule(traces, name):
    """Spec §4.3, checked on the committed text independently of the renderer: a CALL shows
    everything; a LINE shows ".." exactly for the values equal to those at its scope's last
    CALL/LINE, when nothing but that scope's EXCEPTION frames came in between."""
    _, trace = traces[name]
    shown = _shown_locals(goldens.expected_text(name))
    assert len(shown) == len(trace.frames)
    for i, frame in enumerate(trace.frames):
        if frame.event is Event.CALL:
            assert ELIDED not in shown[i].values()
            assert shown[i] == frame.locals
        if frame.event is not Event.LINE:
            continue
        base = None
        for j in range(i - 1, -1, -1):
            before = trace.frames[j]
            if before.depth != frame.depth or before.event is Event.RETURN:
                break  # another scope ran in between: no base, everything in full
            if before.event is not Event.EXCEPTION:
                base = before.locals
                break
        expected = {k: ELIDED if base is not None and base.get(k) == v else v for k, v in frame.locals.items()}
        assert shown[i] == expected, f"frame {i + 1}"


def _frames(traces, name):
    return traces[name][1].frames


def test_exception_frames_carry_the_repr_of_the_exc_info_tuple(traces):
    frames = _frames(traces, "escaping_exception")
    raised = [f for f in frames if f.event is Event.EXCEPTION]
    assert [f.function for f in raised] == ["check", "f"]  # one per frame it passes through
    assert raised[0].arg == "(<class 'ValueError'>, ValueError('too big: 5'), <traceback object>)"
    assert raised[0].locals is None
    # each unwound frame then returns None, and the trace ends at the entry's
    assert [(f.event, f.arg) for f in frames[-3:]] == [
        (Event.RETURN, "None"), (Event.EXCEPTION, raised[0].arg), (Event.RETURN, "None")]
    assert traces["escaping_exception"][1].status.message == "ValueError: too big: 5"


def test_generator_resumption_is_a_call_with_every_local(traces):
    frames = _frames(traces, "generator_function")
    resumed = [f for f in frames if f.event is Event.CALL and f.function == "countdown"][1:]
    assert [(f.action, f.locals) for f in resumed] == [
        ("        yield n\n", {"n": "2"}), ("        yield n\n", {"n": "1"})]
    yields = [f.arg for f in frames if f.event is Event.RETURN and f.function == "countdown"]
    assert yields == ["2", "1", "'done'"]


def test_decorated_entry_call_action_is_the_decorator_line(traces):
    frames = _frames(traces, "decorated_entry")
    assert (frames[0].action, frames[0].lineno, frames[0].function) == ("@twice\n", 6, "inc")


def test_non_ascii_is_escaped_in_json_but_raw_in_actions(traces):
    text = goldens.expected_text("non_ascii")
    assert '"word": "\'h\\u00e9llo\'"' in text
    assert '    word = "héllo"\n' in text
    assert "\\ud83c\\udf0d" in text and '" 🌍"\n' in text


def test_default_reprs_lose_their_addresses(traces):
    frames = _frames(traces, "object_reprs")
    assert frames[-1].arg == "(Point(4, 2), [<__main__.Plain object>])"
    assert not any(" at 0x" in v for f in frames for v in (f.locals or {}).values())


def test_deleted_names_disappear_and_return_at_the_end(traces):
    frames = _frames(traces, "del_names")
    assert list(frames[5].locals) == ["n", "xs", "d"]  # after `del tmp`
    assert list(frames[8].locals) == ["n", "xs", "d", "tmp"]  # bound again: f_locals order


def test_cruxeval_style_call_wraps_the_expression_in_main(traces):
    program, trace = traces["cruxeval_style"]
    assert program.source.endswith("\ndef main():  # << START_OF_TRACE\n    return f([2, 7, 11], 9)\n")
    assert (trace.frames[0].action, trace.frames[0].locals) == ("def main():\n", {})
    assert trace.return_value() == "[0, 1]"
