"""Reading the user's files (programs, sessions, suites, results, replays) with one-line errors."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: the largest file read whole (a results file of a large suite is some hundreds of MiB)
MAX_FILE_BYTES = 2 << 30


def read_bytes(path: str | Path, what: str, error: type[Exception], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the file at *path*; every problem is raised as *error* with a one-line
    message naming the file (*what* names the kind of file a directory was given for). Only a
    regular file is read (a device such as /dev/zero never ends, a pipe nobody writes to never
    opens), and only up to *limit* bytes."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise IsADirectoryError
            if not stat.S_ISREG(info.st_mode):
                raise error(f"{path}: not a regular file (a device, a pipe or a socket), not a {what}")
            if info.st_size > limit:
                raise error(f"{path}: {info.st_size / 2**20:,.0f} MiB, larger than a {what} can be ({limit >> 20:,} MiB)")
            data = handle.read(limit + 1)
            if len(data) > limit:  # it grew while being read
                raise error(f"{path}: larger than a {what} can be ({limit >> 20:,} MiB)")
            return data
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read it ({exc.strerror or exc})") from None


def read_text(path: str | Path, what: str, error: type[Exception], limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of the file at *path* (without a byte-order mark), or *error* as
    :func:`read_bytes` raises it, or for a byte that is not UTF-8."""
    data = read_bytes(path, what, error, limit)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(f"{path}: not UTF-8 text (bad byte on line {line})") from None
    return text.removeprefix("\ufeff")
