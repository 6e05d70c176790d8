"""The parser puts model frames back in their scopes: line numbers, functions and depths."""

from cwmtui.trace import Event, Frame, parse_trace, render_frames

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
