"""A hostile program for the terminal: it prints, holds and returns every kind of escape
sequence, and its own source line below holds them raw. Nothing of it may reach a terminal as
anything but text (tests/test_terminal_text.py)."""

CORPUS = [
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "\x1b]0;pwned\x07",  # OSC 0: the window title
    "\x1b]8;;https://example.invalid/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8: a hyperlink
    "\x1b]52;c;cHduZWQ=\x07",  # OSC 52: the clipboard
    "\x1bP+q544e\x1b\\",  # DCS
    "\x9b31m\x9d0;c1\x9c\x85",  # C1 controls
    "\x1b[?1049l\x1b[?1000h",  # leave the alternate screen, mouse reporting on
    "\x07\x08\r\x0b\x0c\x7f",  # bell, backspace, carriage return, VT, FF, DEL
    "\u202eevil\u202c",  # a bidi override
    "[/x] [link=https://example.invalid/]click[/link] [bold]b[/bold] [red]",  # Rich markup
]


class Shouty:
    def __repr__(self):
        return "Shouty" + CORPUS[0] + CORPUS[1] + "[/x]"


def show(items):  # << START_OF_TRACE
    raw = "RAW[2J]0;raw-title [/x]"
    thing = Shouty()
    for item in items:
        print(item)
    return "".join(items) + raw + repr(thing)


show(CORPUS)
