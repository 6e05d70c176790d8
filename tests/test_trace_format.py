"""The CWM text format: the spec §6 worked example byte for byte, rendering and parsing."""

import json

from cwmtui.interpreter import load_program
from cwmtui.trace import Event, Frame, parse_trace, render_frames, render_trace, split_text, tokens
from cwmtui.trace.render import Special, frames_segments, prompt_segments

from .conftest import GOLDEN


def strawberry(interpreter):
    program = load_program(str(GOLDEN / "strawberry.py"), call="f('r')")
    return program, interpreter.trace(program)


def test_strawberry_matches_spec_byte_for_byte(interpreter):
    program, trace = strawberry(interpreter)
    assert trace.status.ok
    assert len(trace.frames) == 41
    expected = (GOLDEN / "strawberry.cwm").read_text()
    assert render_frames(trace.frames, end=True) == expected
    assert len(expected.encode()) == 4529  # the spec counts the end-of-text token in


def test_entry_call_action_has_no_marker(interpreter):
    program, trace = strawberry(interpreter)
    assert "START_OF_TRACE" in program.source.splitlines()[17]
    assert trace.frames[0].action == "def f(c):\n"


def test_strawberry_round_trips_through_the_parser(interpreter):
    program, trace = strawberry(interpreter)
    parsed = parse_trace(render_trace(program.source, trace.frames))
    assert parsed.ended
    assert parsed.context == program.source
    assert parsed.frames == trace.frames


def test_frames_after_a_callee_returns_show_every_value(interpreter):
    _, trace = strawberry(interpreter)
    text = render_frames(trace.frames[28:29])
    # frame 29 of the spec (index 28) in isolation renders full: it follows a RETURN
    assert '"c": "\'r\'"' in text


def test_prompt_is_an_id_friendly_segment_list():
    source = 'def f():  # << START_OF_TRACE\n    return "<|frame_sep|>"\n'
    segments = prompt_segments(source)
    assert [isinstance(s, Special) for s in segments] == [True, True, False, True]
    assert "".join(segments) == tokens.BEGIN_OF_TEXT + tokens.TRACE_CONTEXT_START + source + tokens.FRAME_SEP


def test_a_literal_special_token_in_a_value_stays_text_in_segments():
    frame = Frame(Event.CALL, "def f(s):\n", {"s": "'<|frame_sep|>'"}, lineno=1, function="f")
    segments = frames_segments([frame])
    specials = [s for s in segments if isinstance(s, Special)]
    assert specials == [tokens.CALL_SEP, tokens.ACTION_SEP, tokens.FRAME_SEP]


def test_non_ascii_values_are_escaped_in_locals_but_not_in_actions():
    frame = Frame(Event.CALL, "def f(t):  # 니\n", {"t": "'니'"}, lineno=1, function="f")
    text = render_frames([frame])
    assert '"t": "\'\\ub2c8\'"' in text
    assert "# 니\n" in text


def test_parser_never_raises_and_keeps_raw_text():
    garbage = [
        "",
        "hello",
        tokens.LINE_SEP + "{not json" + tokens.ACTION_SEP + "x\n" + tokens.FRAME_SEP,
        tokens.CALL_SEP + '{"a": 1}' + tokens.ACTION_SEP + "def f(a):\n" + tokens.FRAME_SEP,
        tokens.RETURN_SEP + tokens.ACTION_SEP + "    return 1\n" + tokens.FRAME_SEP,
        tokens.FRAME_SEP * 3,
        tokens.LINE_SEP + '{"a": ".."}' + tokens.ACTION_SEP + "    x\n" + tokens.FRAME_SEP,
        tokens.CALL_SEP + '{"a": "1"}' + tokens.ACTION_SEP + "def f(a):\n",  # cut off
    ]
    for text in garbage:
        parsed = parse_trace(text, source="def f(a):\n    return 1\n")
        for frame in parsed.frames:
            if frame.error:
                assert frame.raw is not None


def test_parser_reports_each_malformation():
    source = "def f(a):\n    x = 1\n    return a\n"
    call = tokens.CALL_SEP + '{"a": "1"}' + tokens.ACTION_SEP + "def f(a):\n" + tokens.FRAME_SEP
    bad_json = tokens.LINE_SEP + '{"a": ' + tokens.ACTION_SEP + "    x = 1\n" + tokens.FRAME_SEP
    parsed = parse_trace(call + bad_json, source)
    assert parsed.frames[0].error is None
    assert parsed.frames[1].error == "locals are not valid JSON"
    assert parsed.frames[1].raw.startswith(tokens.LINE_SEP)
    no_arg = tokens.RETURN_SEP + tokens.ACTION_SEP + "    return a\n" + tokens.FRAME_SEP
    assert parse_trace(call + no_arg, source).frames[1].error == "missing <|arg_sep|> value"
    cut = parse_trace(call + tokens.LINE_SEP + '{"a": ".."}', source)
    assert cut.frames[-1].error.startswith("unterminated frame")
    assert not cut.ended


def test_parser_strips_the_marker_as_a_suffix_only():
    source = "def STAR(a):  # << START_OF_TRACE\n    return a\n"
    text = tokens.CALL_SEP + '{"a": "1"}' + tokens.ACTION_SEP + "def STAR(a): # << START_OF_TRACE\n" + tokens.FRAME_SEP
    frame = parse_trace(text, source).frames[0]
    assert frame.action == "def STAR(a):\n"
    assert frame.lineno == 1
    assert frame.function == "STAR"


def test_parser_locates_duplicate_lines_by_position():
    source = "def f(n):\n    n += 1\n    n += 1\n    return n\n"
    frames = [
        Frame(Event.CALL, "def f(n):\n", {"n": "0"}, None, 1, 0, "f"),
        Frame(Event.LINE, "    n += 1\n", {"n": "0"}, None, 2, 0, "f"),
        Frame(Event.LINE, "    n += 1\n", {"n": "1"}, None, 3, 0, "f"),
        Frame(Event.LINE, "    return n\n", {"n": "2"}, None, 4, 0, "f"),
        Frame(Event.RETURN, "    return n\n", None, "2", 4, 0, "f"),
    ]
    parsed = parse_trace(render_frames(frames, end=True), source)
    assert [f.lineno for f in parsed.frames] == [1, 2, 3, 4, 4]
    assert parsed.frames == frames


def test_split_text_marks_specials():
    pieces = split_text(tokens.LINE_SEP + "{}" + tokens.ACTION_SEP + "x\n")
    assert [isinstance(p, Special) for p in pieces] == [True, False, True, False]


def test_json_defaults_are_cwm_defaults(interpreter):
    _, trace = strawberry(interpreter)
    text = render_frames(trace.frames[:3])
    assert '{"c": "..", "word": "\'strawberry\'"}' in text
    assert json.dumps({"a": "b"}) == '{"a": "b"}'
