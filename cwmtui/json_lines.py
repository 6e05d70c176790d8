"""JSON-lines files (suites, results, replays): one reader, one set of one-line messages."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from .files import read_text
from .trace.source import source_lines

# What reading fields out of well-formed JSON of the wrong shape raises: a missing key, a list or a
# number where an object belongs, a string where a number belongs, a short list.
DAMAGED_DATA = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def read_json_lines(path: str | Path, what: str, error: type[Exception]) -> list[tuple[int, dict]]:
    """The JSON objects of the file at *path* with their line numbers; blank lines are skipped.

    Every problem is raised as *error* with a one-line message naming the file and, where it
    applies, the line; *what* names the kind of file (``"replay file"``) for a directory given.
    """
    return list(iter_json_lines(path, what, error))


def iter_json_lines(path: str | Path, what: str, error: type[Exception]) -> Iterator[tuple[int, dict]]:
    """As :func:`read_json_lines`, parsing each line only when it is reached (the file is read at
    once, so a file that cannot be read fails before the first object)."""
    # lines end at \n, \r\n or \r, not at a U+2028 that JSON text may hold raw inside a string
    lines = source_lines(read_text(path, what, error))
    return _objects(lines, path, error)


def _objects(lines: list[str], path, error) -> Iterator[tuple[int, dict]]:
    for number, text in enumerate(lines, 1):
        text = text.rstrip()  # so that a column in a message is a column of the file's line
        if not text:
            continue
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise error(f"{path}:{number}: not valid JSON ({json_problem(exc)})") from None
        if not isinstance(data, dict):
            raise error(f"{path}:{number}: not a JSON object")
        yield number, data


def json_problem(exc: Exception) -> str:
    """What json.loads found wrong, in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc).split(";")[0]  # e.g. a number of more digits than int() converts
