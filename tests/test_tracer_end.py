"""How a trace ends: complete only when the entry really returned, and never by the tracer
failing on what the program did.

CPython gives a return event with value None both for ``return None`` and for an exception
leaving the frame, so the tracer must tell them apart, also when a ``finally`` clause ran lines
in between (the re-raise at its end gives no new exception event).
"""

import textwrap

from cwmtui.interpreter import program_from_source
from cwmtui.trace import Event, Status


def run(interpreter, source: str):
    return interpreter.trace(program_from_source(textwrap.dedent(source), "prog.py"))


def test_an_exception_leaving_the_entry_through_finally_is_raised_not_complete(interpreter):
    trace = run(interpreter, """\
        def f():  # << START_OF_TRACE
            try:
                x = 1 / 0
            finally:
                y = 2
        f()
        """)
    assert trace.status.kind is Status.RAISED
    assert trace.status.message == "ZeroDivisionError: division by zero"
    events = [frame.event for frame in trace.frames]
    assert events == [Event.CALL, Event.LINE, Event.LINE, Event.EXCEPTION, Event.LINE, Event.RETURN]
    assert trace.frames[-1].arg == "None"


def test_a_return_in_finally_swallows_the_exception_and_completes(interpreter):
    trace = run(interpreter, """\
        def f():  # << START_OF_TRACE
            try:
                x = 1 / 0
            finally:
                return 3
        f()
        """)
    assert trace.status.kind is Status.COMPLETE
    assert trace.frames[-1].arg == "3"


def test_a_caught_exception_then_an_implicit_return_none_completes(interpreter):
    trace = run(interpreter, """\
        def f():  # << START_OF_TRACE
            try:
                raise KeyError('k')
            except KeyError:
                pass
        f()
        """)
    assert trace.status.kind is Status.COMPLETE
    assert trace.frames[-1].event is Event.RETURN and trace.frames[-1].arg == "None"


def test_the_last_exception_is_the_one_reported(interpreter):
    trace = run(interpreter, """\
        def f():  # << START_OF_TRACE
            try:
                raise KeyError('first')
            except KeyError:
                raise ValueError('second')
        f()
        """)
    assert trace.status.kind is Status.RAISED
    assert trace.status.message == "ValueError: second"


def test_a_name_that_is_not_a_string_in_locals_does_not_kill_the_trace(interpreter):
    trace = run(interpreter, """\
        class Key:
            def __repr__(self):
                return 'Key()'
        def f():  # << START_OF_TRACE
            x = 1
            locals()[Key()] = 2
            y = 3
            return x + y
        f()
        """)
    assert trace.status.kind is Status.COMPLETE
    assert trace.frames[-1].arg == "4"
    assert trace.frames[-2].locals == {"x": "1", "<Key object>": "2", "y": "3"}


def test_plain_values_show_the_reprs_the_program_would_print(interpreter):
    # frames whose locals are all str/int/float/bool/None/complex/bytes travel as values and get
    # their reprs in the parent: they must read exactly as repr() in the program
    trace = run(interpreter, """\
        class Loud(str):
            def __repr__(self):
                return 'Loud!'
        def f():  # << START_OF_TRACE
            a, b, c, d, e, g = 'it\\'s "x"\\n', -7, 0.1 + 0.2, None, True, 2 - 1.5j
            h = b'\\x00\\xff'
            big = 10 ** 5000
            loud = Loud('quiet')
            return 1
        f()
        """)
    assert trace.status.kind is Status.COMPLETE
    by_line = {frame.lineno: frame.locals for frame in trace.frames if frame.event is Event.LINE}
    assert by_line[6] == {"a": repr('it\'s "x"\n'), "b": "-7", "c": repr(0.1 + 0.2), "d": "None", "e": "True",
                          "g": "(2-1.5j)"}
    assert by_line[7]["h"] == repr(b"\x00\xff")
    assert by_line[8]["big"] == "<int object: repr raised ValueError>"
    assert by_line[9]["loud"] == "Loud!"  # a str subclass keeps its own __repr__


def test_recursion_caught_inside_the_entry_ends_the_trace_at_the_limit_also_without_arguments(interpreter):
    trace = run(interpreter, """\
        def deep():
            return deep()
        def f():  # << START_OF_TRACE
            try:
                deep()
            except RecursionError:
                return "caught"
        f()
        """)
    assert (trace.status.kind, trace.status.limit) == (Status.LIMIT, "recursion")


def test_actions_are_physical_lines_even_with_a_form_feed_or_a_line_separator_in_them(interpreter):
    # str.splitlines would cut at U+2028 (inside the literal) and at the form feed, and every
    # later action would be the wrong line; Python numbers lines at \n, \r\n and \r only
    source = 'def f():  # << START_OF_TRACE\n    s = "a\u2028b"\n\x0c\n    t = 1\n    return s\n\nf()\n'
    trace = interpreter.trace(program_from_source(source, "<sep>"))
    assert [frame.action for frame in trace.frames] == [
        "def f():\n", '    s = "a\u2028b"\n', "    t = 1\n", "    return s\n", "    return s\n"]
    assert trace.return_value() == "'a\\u2028b'"
