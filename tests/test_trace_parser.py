"""The parser: frames put back in their scopes (line numbers, functions, depths), and text
fed in whatever chunks a model's stream delivers."""

import pytest

from cwmtui.trace import Event, Frame, TraceParser, parse_trace, render_frames, render_trace

from . import goldens

GENERATOR = """\
def gen(n):
    yield n
    yield n + 1

def f():  # << START_OF_TRACE
    return list(gen(1))
"""


def test_a_generator_resumed_mid_body_is_placed_in_its_generator():
    frames = [
        Frame(Event.CALL, "def f():\n", {}, None, 5, 0, "f"),
        Frame(Event.LINE, "    return list(gen(1))\n", {}, None, 6, 0, "f"),
        Frame(Event.CALL, "def gen(n):\n", {"n": "1"}, None, 1, 1, "gen"),
        Frame(Event.LINE, "    yield n\n", {"n": "1"}, None, 2, 1, "gen"),
        Frame(Event.RETURN, "    yield n\n", None, "1", 2, 1, "gen"),
        Frame(Event.CALL, "    yield n\n", {"n": "1"}, None, 2, 1, "gen"),  # resumption
        Frame(Event.LINE, "    yield n + 1\n", {"n": "1"}, None, 3, 1, "gen"),
        Frame(Event.RETURN, "    yield n + 1\n", None, "2", 3, 1, "gen"),
        Frame(Event.CALL, "    yield n + 1\n", {"n": "1"}, None, 3, 1, "gen"),
        Frame(Event.RETURN, "    yield n + 1\n", None, "None", 3, 1, "gen"),
        Frame(Event.RETURN, "    return list(gen(1))\n", None, "[1, 2]", 6, 0, "f"),
    ]
    parsed = parse_trace(render_frames(frames, end=True), GENERATOR)
    assert parsed.frames == frames


def test_identical_def_lines_are_told_apart_by_their_local_names():
    source = """\
def outer1():
    def helper(x):
        return x
    return helper(1)

def outer2(k):
    def helper(x):
        return x + k
    return helper(2)

def f():  # << START_OF_TRACE
    return outer2(5)
"""
    frames = [
        Frame(Event.CALL, "def f():\n", {}, None, 11, 0, "f"),
        Frame(Event.LINE, "    return outer2(5)\n", {}, None, 12, 0, "f"),
        Frame(Event.CALL, "def outer2(k):\n", {"k": "5"}, None, 6, 1, "outer2"),
        Frame(Event.LINE, "    def helper(x):\n", {"k": "5"}, None, 7, 1, "outer2"),
        Frame(Event.LINE, "    return helper(2)\n", {"k": "5", "helper": "<function outer2.<locals>.helper>"}, None, 9, 1, "outer2"),
        # the same text as line 2, but the free variable k exists only in outer2's helper
        Frame(Event.CALL, "    def helper(x):\n", {"x": "2", "k": "5"}, None, 7, 2, "helper"),
        Frame(Event.LINE, "        return x + k\n", {"x": "2", "k": "5"}, None, 8, 2, "helper"),
    ]
    parsed = parse_trace(render_frames(frames), source)
    assert parsed.frames == frames


@pytest.mark.parametrize("size", [1, 2, 5, 13, 64])
def test_text_fed_in_any_chunks_parses_like_the_whole(size):
    program = goldens.program("strawberry")
    text = render_trace(program.source, [], end=False) + goldens.expected_text("strawberry")
    whole = parse_trace(text)
    assert len(whole.frames) == 41 and whole.ended
    parser = TraceParser()
    streamed = []
    for start in range(0, len(text), size):  # special tokens get split across chunks
        streamed += parser.feed(text[start : start + size])
    streamed += parser.finish()
    assert streamed == parser.frames == whole.frames
    assert parser.context == program.source and parser.ended


def test_a_chunk_ending_in_what_looks_like_a_token_start_is_text_at_the_end():
    parser = TraceParser("def f(a):\n    return a <1\n")
    parser.feed('<|call_sep|>{"a": "1"}<|action_sep|>def f(a):\n<|frame_sep|><|line_sep|>{"a": ".."}<|action_sep|>    return a <')
    assert parser.pending_text.endswith("    return a <")
    frames = parser.feed("1\n<|frame_sep|><|")
    assert [f.action for f in frames] == ["    return a <1\n"] and frames[0].lineno == 2
    tail = parser.finish()  # "<|" never became a token: an unterminated frame holding it
    assert len(tail) == 1 and tail[0].raw == "<|"
