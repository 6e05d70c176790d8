"""Reading the user's files (programs, sessions, suites, results, replays) with one-line errors."""

from __future__ import annotations

from pathlib import Path


def read_bytes(path: str | Path, what: str, error: type[Exception]) -> bytes:
    """The bytes of the file at *path*; every problem is raised as *error* with a one-line
    message naming the file (*what* names the kind of file a directory was given for)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or exc})") from None


def read_text(path: str | Path, what: str, error: type[Exception]) -> str:
    """The UTF-8 text of the file at *path* (without a byte-order mark), or *error* as
    :func:`read_bytes` raises it, or for a byte that is not UTF-8."""
    data = read_bytes(path, what, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}: not UTF-8 text (bad byte on line {line})") from None
    return text.removeprefix("\ufeff")
