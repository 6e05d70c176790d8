"""The tracer that runs inside the child process, and the fork server that starts it.

This module is the program's world: it imports only the standard library and is loaded once
per fork server (``python -m cwmtui.interpreter.child``). Each job forks a fresh process that
runs the user's program as ``__main__`` under ``sys.settrace`` and streams compact records to
the parent (marshal batches over a pipe, flushed every few hundred frames and every 50 ms), so
a crash loses at most the last few milliseconds and a long suite pays no interpreter start-up
per program. The parent (``runner.py``) turns the records into :class:`~cwmtui.trace.Frame`.

Records (tuples): ``(0, lineno, co_name, keys, reprs)`` call, ``(1, lineno, keys, reprs)`` line
(or ``(0, lineno, co_name, locals)`` and ``(1, lineno, locals)``, a copy of the locals dict, when
every value is of ``SIMPLE_TYPES``, and ``(1, lineno, keys, values)`` with a tuple of those values
from the C line tracer: the parent writes those reprs),
``(2, lineno, repr)`` return, ``(3, lineno, repr)`` exception, ``(4, stream, text)`` output
written through ``sys.stdout``/``sys.stderr``, ``(5, status, limit, message)`` end.
"""

from __future__ import annotations

import _thread
import fcntl
import json
import marshal
import opcode
import os
import resource
import select
import signal
import struct
import sys
import threading
import time
import types

_LINETRACE_ABI = 6  # LINETRACE_ABI in _linetrace.c


def _load_line_tracer():
    """The C helpers (cwmtui/interpreter/_linetrace.c: the line-event hot path, a flush on a
    fatal signal), built beside this file when the install had a C compiler; None otherwise, or
    when the build is stale. Loaded by path: the fork server runs this file as a script."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(here, "_linetrace" + suffix)
        if os.path.exists(path):
            try:
                spec = importlib.util.spec_from_file_location("cwmtui.interpreter._linetrace", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except ImportError:  # built for another Python
                return None
            return module if getattr(module, "ABI", None) == _LINETRACE_ABI else None  # a stale build: unused
    return None


_linetrace = _load_line_tracer()
_LineTracer = _linetrace.LineTracer if _linetrace is not None else None

CALL, LINE, RETURN, EXCEPTION, OUTPUT, END = range(6)
_HEADER = struct.Struct("<I")
_FLUSH_EVERY = 512  # frames between flushes (besides the watchdog's every _FLUSH_SECONDS)...
_BATCH_BYTES = 1 << 18  # ...or fewer, when frames are big: a batch that fits the cache marshals
# several times faster than a batch of megabytes
_FLUSH_SECONDS = 0.05
_PIPE_SIZE = 1 << 20
_REPR_SECONDS = 1.0  # a __repr__ running longer than this is replaced by a placeholder

# Preloaded in the fork server so a traced program's imports of them cost nothing.
_PRELOAD = ("re", "collections", "itertools", "functools", "math", "string", "json", "copy",
            "operator", "heapq", "bisect", "random", "statistics", "fractions", "decimal",
            "datetime", "textwrap", "typing", "dataclasses", "enum")

_in_repr = False  # read by the watchdog thread
#: Exact types whose values are immutable, marshal as themselves and repr the same in any
#: CPython 3.11 process. A frame whose locals are all of these is recorded as a copy of its
#: locals dict (one C call) and the parent writes the reprs (``plain_reprs``); any other frame
#: sends its names and the reprs made here. The program's process, the one the time limit
#: counts, is spared the reprs, and marshal sends a value that stays the same (a name bound to
#: 'a' for a thousand lines) once, as a back-reference after that.
SIMPLE_TYPES = frozenset((str, int, float, bool, type(None), complex, bytes))
_simple = SIMPLE_TYPES.issuperset  # (of the values' types) the parent reprs them; flush cuts long ones
#: characters of one value's repr the trace keeps: a longer one is cut, marked "… <cut: N
#: characters>" (no model predicts such a value in a frame, and 200 values of 20 MB must not
#: cross the pipe every line). _linetrace.c's MAX_VALUE is the same number.
MAX_VALUE = 1 << 16




def _marked(head: str, mark: str) -> str:
    """The start of a value's repr and the mark that says it was cut, MAX_VALUE characters in
    all (so a value cut once is never cut again when its batch is sent)."""
    return head[: MAX_VALUE - len(mark)] + mark


def cut_repr(text: str) -> str:
    """A repr longer than the trace keeps: its start, and how long it was."""
    if len(text) <= MAX_VALUE:
        return text
    _cut[0] += 1
    return _marked(text, f"… <cut: {len(text):,} characters>")


_TEXT_TYPES = (str, bytes, bytearray)
_sizeof = sys.getsizeof  # an object's own size bounds a text's length: a C-speed first look


def _long_text(value) -> bool:
    return type(value) in _TEXT_TYPES and len(value) > MAX_VALUE


def _long_text_repr(value) -> str:
    """The repr of a str, bytes or bytearray too long to keep, without building the whole of it."""
    _cut[0] += 1
    if type(value) is bytearray:
        return _marked(f"bytearray({bytes(value[:MAX_VALUE])!r}", f"… <cut: {len(value):,} bytes>)")
    unit = "characters" if type(value) is str else "bytes"
    return _marked(repr(value[:MAX_VALUE]), f"… <cut: {len(value):,} {unit}>")


_CONTAINER_TYPES = frozenset((list, tuple, dict, set, frozenset))


def _repr_floor(value, limit: int, depth: int = 0) -> int:
    """_linetrace.c's repr_floor where the C helpers are not built: a lower bound on
    ``len(repr(value))``, looked for no further than ``limit`` (deep or cyclic: over it)."""
    kind = type(value)
    if kind is str:
        return len(value) + 2
    if kind is bytes:
        return len(value) + 3
    if kind is bytearray:
        return len(value) + 14
    if kind not in _CONTAINER_TYPES:
        return 1
    n = len(value)
    total = 2 + (2 * (n - 1) if n else 0)
    if not n or total > limit:
        return total
    if depth >= 48:
        return limit + 1
    items = value.items() if kind is dict else value
    try:
        for item in items:
            if kind is dict:
                total += 2 + _repr_floor(item[0], limit - total, depth + 1)
                item = item[1]
            total += _repr_floor(item, limit - total, depth + 1)
            if total > limit:
                break
    except RuntimeError:  # changed size while looked at (another thread): build it carefully
        return limit + 1
    return total


if _linetrace is not None:
    _any_repr_over = _linetrace.any_repr_over
else:

    def _any_repr_over(values: list, limit: int) -> bool:
        return any(_repr_floor(v, limit) > limit for v in values)


#: how repr() writes a container it is already inside, and the brackets it writes around one
_CYCLE_MARKS: dict[type, str] = {list: "[...]", tuple: "(...)", dict: "{...}"}
_BRACKETS: dict[type, tuple[str, str]] = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"),
                                          set: ("{", "}"), frozenset: ("frozenset({", "})")}


class _Full(Exception):
    """A bounded repr has all the characters it may keep."""


def _bounded_repr(value) -> str:
    """``repr(value)`` of a list, tuple, dict, set or frozenset (exact types) whose repr is
    surely longer than the trace keeps: built piece by piece as CPython's repr builds it, stopping
    after MAX_VALUE characters, so a list of 64 MiB bytearrays costs a few KiB, not its whole
    repr. A short one (deep or cyclic) comes out exactly as repr() gives it. A __repr__ that
    raises or hangs propagates, as it would from repr()."""
    out: list[str] = []
    room = [MAX_VALUE]
    active: set[int] = set()  # containers being written: a cycle is "[...]", as repr writes it

    def emit(text: str) -> None:
        out.append(text)
        room[0] -= len(text)
        if room[0] < 0:
            raise _Full

    def walk(item) -> None:
        kind = type(item)
        if kind in _TEXT_TYPES and len(item) > room[0]:
            emit(repr(item[: room[0] + 1]) if kind is not bytearray else f"bytearray({bytes(item[: room[0] + 1])!r}")
            return  # (not reached: that is more than the room left)
        if kind not in _CONTAINER_TYPES:
            emit(repr(item))
            return
        if id(item) in active:
            emit(_CYCLE_MARKS.get(kind, f"{kind.__name__}(...)"))
            return
        if not item:
            emit(repr(item))
            return
        active.add(id(item))
        opening, closing = _BRACKETS[kind]
        emit(opening)
        for index, element in enumerate(item.items() if kind is dict else item):
            if index:
                emit(", ")
            if kind is dict:
                walk(element[0])
                emit(": ")
                element = element[1]
            walk(element)
        if kind is tuple and len(item) == 1:
            emit(",")
        emit(closing)
        active.discard(id(item))

    try:
        walk(value)
    except _Full:
        _cut[0] += 1
        return _marked("".join(out), f"… <cut: over {MAX_VALUE:,} characters>")
    return "".join(out)


_cut = [0]  # values cut in this run (the end status says so)
#: a batch of records larger than this is looked through for values too long to keep (a batch
#: is at most a few hundred KiB otherwise), so the common case pays nothing for the cap
_BIG_BATCH = MAX_VALUE * 8


def _cut_record(record):
    """A record holding a value too long to keep, with that value cut (a plain record, whose
    values the parent would repr, becomes a record of reprs, a long text cut without building
    its whole repr); any other record unchanged. Looked at only when a batch is large, so the
    tracer's hot path pays nothing for the cap."""
    kind = record[0]
    if kind in (RETURN, EXCEPTION):
        return record if len(record[2]) <= MAX_VALUE else (kind, record[1], cut_repr(record[2]))
    if kind in (LINE, CALL) and type(record[-1]) is list:  # names and reprs
        reprs = record[-1]
        if max(map(len, reprs), default=0) <= MAX_VALUE:
            return record
        return (*record[:-1], [*map(cut_repr, reprs)])
    if kind == LINE and len(record) == 3:
        head, snap = record[:2], record[2]
        names, values = (*snap,), (*snap.values(),)
    elif kind == LINE and len(record) == 4 and type(record[3]) is tuple:  # from the C line tracer
        head, names, values = record[:2], record[2], record[3]
    elif kind == CALL and len(record) == 4:
        head, snap = record[:3], record[3]
        names, values = (*snap,), (*snap.values(),)
    else:
        return record
    if not any(map(_long_text, values)):
        return record
    reprs = [_long_text_repr(v) if _long_text(v) else plain_reprs((v,))[0] for v in values]
    return (*head, names, reprs)
_exit = os._exit  # the real one: run_job wraps os._exit for the program
# The instructions a frame returns normally by (a return event elsewhere is an exception
# leaving the frame: CPython passes None as the value in both cases).
_RETURN_OPS = frozenset(
    opcode.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE") if name in opcode.opmap
)
_RECURSION_MESSAGE = (
    "the program reached Python's recursion limit (RecursionError), where the tracer cannot "
    "follow it; the trace stops there"
)


def _write_all(fd: int, *chunks: bytes) -> None:
    """Write every chunk, in one system call when the pipe takes them (no joined copy)."""
    written = os.writev(fd, chunks)
    if written == sum(map(len, chunks)):
        return
    view = memoryview(b"".join(chunks))[written:]
    while view:
        view = view[os.write(fd, view):]


def record_pipe() -> tuple[int, int]:
    """The pipe the records travel in, as large as the system allows an unprivileged process
    (1 MiB on Linux): a long trace then crosses in a few large writes, not many small ones."""
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (AttributeError, OSError):  # not Linux, or a lower system limit: the default pipe
        pass
    return read_end, write_end


class Recorder:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.records: list = []
        self.lock = threading.Lock()
        self.closed = False

    def flush(self) -> int:
        """Send what was recorded; return how many bytes that took."""
        if self.closed:  # before the lock, which a forked child may have inherited held
            return 0
        with self.lock:
            if self.closed:
                return 0
            records = self.records
            count = len(records)
            if not count:
                return 0
            batch = records[:count]
            try:
                data = marshal.dumps(batch)
            except ValueError:  # a str subclass from a __repr__: make it plain data
                data = marshal.dumps([_plain(r) for r in batch])
            if len(data) > _BIG_BATCH:  # it may carry a value too long to keep: those are cut
                cut = [_cut_record(r) for r in batch]
                if any(a is not b for a, b in zip(cut, batch)):
                    batch = cut
                    data = marshal.dumps([_plain(r) for r in cut])
            if _cut[0] and batch[-1][0] == END:  # the end says how many values were cut
                _, status, limit, message = batch[-1]
                note = f"{_cut[0]:,} value(s) longer than {MAX_VALUE:,} characters were cut (marked '… <cut: N characters>')"
                batch[-1] = (END, status, limit, f"{message}; {note}" if message else note)
                data = marshal.dumps([_plain(r) for r in batch])
            try:
                _write_all(self.fd, _HEADER.pack(len(data)), data)
            except OSError:
                self.closed = True
            del records[:count]
            return len(data)

    def end(self, status: str, limit: str | None = None, message: str = "") -> None:
        """Record the end of the run and leave the process at once."""
        sys.settrace(None)
        self.records.append((END, status, limit, message))  # flush adds how many values were cut
        self.flush()
        os._exit(0)


def _deeper(levels: int) -> None:
    """Go ``levels`` Python calls deeper and back: at a call event, the tracer trips the recursion
    limit a few levels before the program does, so it ends the trace itself (``too_deep``) instead
    of failing inside CPython's trace call, which would switch tracing off for the rest of the run."""
    if levels:
        _deeper(levels - 1)


def plain_reprs(values) -> list[str]:
    """The reprs of values of ``SIMPLE_TYPES``, as the child's tracer writes them (a huge int's
    repr raises ValueError in 3.11, which the child shows as a placeholder)."""
    try:
        return [*map(repr, values)]
    except ValueError:
        out = []
        for value in values:
            try:
                out.append(repr(value))
            except ValueError as exc:
                out.append(f"<{type(value).__qualname__} object: repr raised {type(exc).__name__}>")
        return out


def _plain(value):
    """The record as data marshal takes: str subclasses made plain, and anything else that is
    not plain data (a name the program put into ``locals()``) shown by its type."""
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):  # a copy of the locals
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return str.__str__(value)
    if value is None or type(value) in (int, float, bool, complex, bytes):
        return value
    return f"<{type(value).__qualname__} object>"


class Capture:
    """``sys.stdout``/``sys.stderr`` for the program: each write becomes an output record."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, recorder: Recorder, stream: int, budget: list[int]) -> None:
        self._recorder = recorder
        self._stream = stream
        self._budget = budget

    def write(self, text):
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._budget[0] -= len(text)
        if self._budget[0] < 0:
            keep = len(text) + self._budget[0]
            self._recorder.records.append((OUTPUT, self._stream, text[:keep]))
            self._recorder.end("limit", "output", "the program wrote more output than the limit")
        self._recorder.records.append((OUTPUT, self._stream, text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """As a real stream's close(): later writes raise ValueError."""
        self.closed = True

    closed = False

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def fileno(self) -> int:
        return 1 if self._stream == 0 else 2


def _describe_exception(value) -> str:
    try:
        text = str(value)
    except BaseException:
        text = ""
    name = type(value).__name__
    return f"{name}: {text}" if text else name


def run_job(job: dict, fd: int) -> None:
    """Run one program under the tracer; never returns."""
    recorder = Recorder(fd)
    records = recorder.records
    append = records.append
    limits = job["limits"]
    max_frames = limits["frames"]
    filename = job["filename"]
    entry_name = job["entry"]
    entry_first = job["entry_firstlineno"]
    bad_types: set = set()  # classes whose __repr__ ran too long: placeholders from then on
    hung: dict = {}  # id -> value whose repr ran too long (kept alive, so its id stays its own)
    entry = None  # the entry's frame, once it is called
    entry_exc = None  # the last exception that passed through the entry
    count = 0  # frames recorded, the one being recorded included
    every = _FLUSH_EVERY  # frames per flush
    next_check = min(every, max_frames + 1)  # the count at which the hot path looks up
    last_keys = ()  # the previous frame's names: a record reuses the tuple while they stay

    def placeholder(value, why: str) -> str:
        return f"<{type(value).__qualname__} object: repr {why}>"

    def blame(exc: BaseException) -> None:
        """Remember the class whose __repr__ was running when the watchdog cut it off."""
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_name == "__repr__" and "self" in tb.tb_frame.f_locals:
                bad_types.add(type(tb.tb_frame.f_locals["self"]))
            tb = tb.tb_next

    def timed_out(value, exc: BaseException) -> str:
        # this very value is remembered too: a list holding such an object hangs as well, but
        # other lists must keep their reprs
        blame(exc)
        hung[id(value)] = value
        return placeholder(value, "timed out")

    def safe_repr(value) -> str:
        global _in_repr
        if type(value) in bad_types or (hung and hung.get(id(value), hung) is value):
            return placeholder(value, "timed out")
        if _long_text(value):  # its start, without building the whole repr of a huge text
            return _long_text_repr(value)
        _in_repr = True
        try:
            if type(value) in _CONTAINER_TYPES and _any_repr_over([value], MAX_VALUE):
                return _bounded_repr(value)  # its start, without building the whole of it
            return repr(value)
        except KeyboardInterrupt as exc:
            return timed_out(value, exc)
        except BaseException as exc:  # noqa: BLE001 - any failure of user code
            return placeholder(value, f"raised {type(exc).__name__}")
        finally:
            _in_repr = False

    def reprs(values) -> list:
        global _in_repr
        values = [*values]  # (before any repr: a finalizer it runs may change the locals)
        if (
            not bad_types
            and not hung
            and max(map(_sizeof, values), default=0) <= MAX_VALUE
            and not _any_repr_over(values, MAX_VALUE)  # (a container of huge values: C speed)
        ):
            _in_repr = True
            try:
                return [*map(repr, values)]  # (a long one is cut when its batch is sent)
            except KeyboardInterrupt as exc:  # a __repr__ hung: find its class, then go slowly
                blame(exc)
            except BaseException:  # noqa: BLE001
                pass
            finally:
                _in_repr = False
        return [safe_repr(v) for v in values]

    def checkpoint() -> None:
        """Every few hundred frames: flush; stop when the frame limit is passed."""
        nonlocal next_check, every
        if count > max_frames:
            recorder.end("limit", "frames", f"stopped after {max_frames} frames")
        size = recorder.flush()
        if size:
            every = max(16, min(_FLUSH_EVERY, every * _BATCH_BYTES // size))
        next_check = min(count + every, max_frames + 1)

    # The hot path: every line of the program comes through here, so it counts frames inline
    # and calls as little as it can.
    def local(frame, event, arg):
        nonlocal count, entry_exc, last_keys
        try:
            if event == "line":
                count += 1
                if count >= next_check:
                    checkpoint()
                snap = frame.f_locals.copy()
                if _simple(map(type, snap.values())):
                    append((LINE, frame.f_lineno, snap))
                else:
                    keys = (*snap,)
                    if keys != last_keys:
                        last_keys = keys
                    append((LINE, frame.f_lineno, last_keys, reprs(snap.values())))
            elif event == "return":
                count += 1
                if count >= next_check:
                    checkpoint()
                append((RETURN, frame.f_lineno, safe_repr(arg)))
                if frame is entry:
                    if frame.f_code.co_code[frame.f_lasti] not in _RETURN_OPS:  # unwinding
                        exc = entry_exc
                        if isinstance(exc, MemoryError):
                            recorder.end("limit", "memory", "the program ran out of memory (MemoryError)")
                        recorder.end("raised", None, _describe_exception(exc) if exc is not None else "")
                    recorder.end("complete")
            elif event == "exception":
                count += 1
                if count >= next_check:
                    checkpoint()
                append((EXCEPTION, frame.f_lineno, safe_repr(arg)))
                if frame is entry:
                    entry_exc = arg[1]
        except MemoryError:
            recorder.end("limit", "memory", "out of memory while recording the trace")
        except RecursionError:
            too_deep()
        return local

    def too_deep() -> None:
        """The program is so deep in Python's recursion limit that the tracer cannot run: CPython
        would switch it off and the rest of the run would go unrecorded, so end here."""
        sys.setrecursionlimit(sys.getrecursionlimit() + 100)  # room to record the end
        recorder.end("limit", "recursion", _RECURSION_MESSAGE)

    def start(frame, event, arg):
        nonlocal entry, count, last_keys
        code = frame.f_code
        if entry is None:
            if code.co_name != entry_name or code.co_firstlineno != entry_first or code.co_filename != filename:
                return None
            entry = frame
        elif code.co_filename != filename:
            return None
        try:
            _deeper(3)
            count += 1
            if count >= next_check:
                checkpoint()
            snap = frame.f_locals.copy()
            if _simple(map(type, snap.values())):
                append((CALL, frame.f_lineno, code.co_name, snap))
            else:
                keys = (*snap,)
                if keys != last_keys:
                    last_keys = keys
                append((CALL, frame.f_lineno, code.co_name, last_keys, reprs(snap.values())))
        except RecursionError:
            too_deep()
        return tracer

    # Each traced frame gets `tracer`: `local` itself, or the C LineTracer that records plain
    # line events the way `local` does (in the `count` cell they share) and hands it the rest.
    tracer = local
    if _linetrace is not None and not os.environ.get("CWMTUI_PURE_TRACER"):
        cells = dict(zip(local.__code__.co_freevars, local.__closure__ or ()))
        assert _LineTracer is not None  # (with _linetrace)
        tracer = _LineTracer(local, records, cells["count"], cells["next_check"], LINE)
        _linetrace.flush_on_fatal_signal(recorder.flush)  # a segfault keeps what was recorded

    budget = [limits["output"]]
    sys.stdout = Capture(recorder, 0, budget)
    sys.stderr = Capture(recorder, 1, budget)
    deadline = time.monotonic() + limits["seconds"]
    # a hung __repr__ is cut after this long; a fraction of a short time limit, so it still fits
    repr_seconds = min(_REPR_SECONDS, max(0.1, limits["seconds"] / 4))

    def watchdog() -> None:
        seen = -1
        stuck_since = None
        while True:
            time.sleep(_FLUSH_SECONDS)
            recorder.flush()
            now = time.monotonic()
            if now > deadline:
                recorder.end("limit", "time", f"stopped after {limits['seconds']:g} s")
            if _in_repr and count == seen:
                stuck_since = stuck_since or now
                if now - stuck_since > repr_seconds:
                    stuck_since = None
                    _thread.interrupt_main()
            else:
                stuck_since = None
            seen = count

    threading.Thread(target=watchdog, daemon=True).start()

    def after_fork() -> None:  # a program that forks: its children record nothing
        sys.settrace(None)
        recorder.closed = True
        if _linetrace is not None:
            _linetrace.flush_on_fatal_signal(None)

    os.register_at_fork(after_in_child=after_fork)
    real_exit = os._exit

    def program_exit(status: int) -> None:  # the program's os._exit: keep what was recorded
        sys.settrace(None)
        recorder.flush()
        real_exit(status)

    os._exit = program_exit  # type: ignore[assignment]  # (os._exit is typed as never returning)

    module = types.ModuleType("__main__")
    # as CPython 3.11 sets it for `python prog.py`: absolute (a program from a suite or a replay,
    # "<sample_3>", has no file)
    module.__file__ = filename if filename.startswith("<") else os.path.abspath(filename)
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]  # (CPython reads it; not in the stubs)
    sys.modules["__main__"] = module
    sys.argv = [filename]
    sys.path.insert(0, os.path.dirname(os.path.abspath(filename)))
    try:
        code = compile(job["source"], filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        recorder.end("error", None, f"syntax error: {exc.msg} (line {exc.lineno})")
    sys.settrace(start)
    try:
        exec(code, module.__dict__)
        if job.get("call"):
            eval(compile(job["call"], "<call>", "eval", dont_inherit=True), module.__dict__)
    except SystemExit as exc:
        sys.settrace(None)
        if entry is None:
            recorder.end("not_called", None, f"the program exited (SystemExit: {exc.code}) before calling the entry")
        recorder.end("raised", None, f"SystemExit: {exc.code}")
    except MemoryError:
        sys.settrace(None)
        recorder.end("limit", "memory", "the program ran out of memory (MemoryError)")
    except BaseException as exc:  # noqa: BLE001 - the program's own failure is data
        sys.settrace(None)
        if entry is None:
            recorder.end("error", None, f"the program raised {_describe_exception(exc)} before calling the entry")
        if isinstance(exc, RecursionError):  # it hit the limit where the tracer could not run
            recorder.end("limit", "recursion", _RECURSION_MESSAGE)
        recorder.end("raised", None, _describe_exception(exc))
    sys.settrace(None)
    if entry is None:
        recorder.end("not_called", None, "")
    # The entry's return ends the run at once, so the tracer was switched off inside it.
    recorder.end("died", None, "tracing stopped before the entry returned (did the program call sys.settrace?)")
    real_exit(0)


def _child(job: dict, rec_w: int, out_w: int, err_w: int) -> None:
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    memory = job["limits"]["memory"]
    if memory:
        for limit in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE):  # no file larger than the memory limit either
            try:
                resource.setrlimit(limit, (memory, memory))
            except (ValueError, OverflowError, OSError):  # over what rlim_t holds: no limit
                pass
    try:
        run_job(job, rec_w)
    finally:
        _exit(0)  # never back into the server's loop, whatever the program did to os._exit


def _send(kind: bytes, payload: bytes) -> None:
    _write_all(1, _HEADER.pack(len(payload) + 1) + kind, payload)


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _relay(pid: int, job: dict, fds: dict[int, bytes]) -> dict:
    limits = job["limits"]
    hard_deadline = time.monotonic() + limits["seconds"] + 2.0
    raw_budget = limits["output"]
    memory = limits.get("memory") or 0
    processes = limits.get("processes") or 0
    open_fds = set(fds)
    killed = None
    exited = None
    tree = ProcessTree(os.getpid(), pid)
    next_look = 0.0
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], 0.05)
        for fd in ready:
            data = os.read(fd, _PIPE_SIZE)
            if not data:
                open_fds.discard(fd)
                continue
            kind = fds[fd]
            if kind != b"R":
                raw_budget -= len(data)
                if raw_budget < 0 and killed is None:
                    killed = "output"
                    tree.kill()
            _send(kind, data)
        if exited is None:
            exited = tree.reap()
            if exited is not None:
                tree.kill()  # whatever the program started goes with it, detached or not
                # drain what is left without waiting on descendants that kept a pipe open
                hard_deadline = min(hard_deadline, time.monotonic() + 0.5)
            elif killed is None and tree.watching and time.monotonic() >= next_look:
                next_look = time.monotonic() + 0.02  # /proc is read at most 50 times a second
                over = tree.over(processes, memory)
                if over is not None:
                    killed = over
                    tree.kill()
        if time.monotonic() > hard_deadline:
            if exited is None and killed is None:
                killed = "time"
            tree.kill()
            break
    for fd in fds:
        os.close(fd)
    tree.kill()
    exited = tree.wait()
    result: dict[str, str | int | None] = {"killed": killed}
    if os.WIFSIGNALED(exited):
        result["signal"] = os.WTERMSIG(exited)
    else:
        result["exitcode"] = os.WEXITSTATUS(exited)
    return result


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _set_subreaper() -> bool:
    """Make this process the reaper of every orphan among its descendants (Linux), so a
    program's detached processes (a double fork, ``setsid``) stay in its tree and can be counted
    and killed. False where the system has no such thing."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError, TypeError):
        return False


class ProcessTree:
    """Every process a job started, found under the fork server (its subreaper) in /proc: the
    limits on processes and memory hold for the whole tree, and nothing of it outlives the job."""

    PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    def __init__(self, root: int, job: int) -> None:
        self.root = root
        self.job = job
        self.job_status: int | None = None  # the job's wait status, once it was reaped
        self.watching = _SUBREAPER and os.path.isdir(f"/proc/{root}/task")

    def pids(self) -> list[int]:
        """The descendants of the root (their threads' children, level by level)."""
        found: list[int] = []
        stack = [self.root]
        while stack:
            parent = stack.pop()
            try:
                tasks = os.listdir(f"/proc/{parent}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    with open(f"/proc/{parent}/task/{task}/children", "rb") as handle:
                        children = handle.read().split()
                except OSError:
                    continue
                for child in children:
                    found.append(int(child))
                    stack.append(int(child))
        return found

    def resident(self, pids: list[int]) -> int:
        """The memory the processes hold: their proportional share of each page (Pss: a page
        that forked children share counts once), plus what they wrote into the sandbox's own
        /tmp and /dev/shm (memory too: tmpfs)."""
        total = 0
        for pid in pids:
            try:
                with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
                    for line in handle:
                        if line.startswith(b"Pss:"):
                            total += int(line.split()[1]) * 1024
                            break
            except (OSError, ValueError, IndexError):
                try:  # no smaps_rollup (an older kernel): resident pages
                    with open(f"/proc/{pid}/statm", "rb") as handle:
                        total += int(handle.read().split()[1]) * self.PAGE
                except (OSError, ValueError, IndexError):
                    pass
        if _SANDBOXED:
            for folder in ("/tmp", "/dev/shm"):
                try:
                    info = os.statvfs(folder)
                    total += (info.f_blocks - info.f_bfree) * info.f_frsize
                except OSError:
                    pass
        return total

    def over(self, processes: int, memory: int) -> str | None:
        """Which limit the tree is over now: ``"processes"``, ``"memory"`` or None."""
        pids = self.pids()
        if processes and len(pids) > processes:
            return "processes"
        if memory and self.resident(pids) > memory:
            return "memory"
        return None

    def reap(self) -> int | None:
        """Reap what died under the server (the job, orphans it left); the job's wait status
        once it ended."""
        while True:
            try:
                done, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not done:
                break
            if done == self.job:
                self.job_status = code
        return self.job_status

    def wait(self) -> int:
        """The job's wait status, waiting for it if it has not ended."""
        if self.job_status is None:
            _, self.job_status = os.waitpid(self.job, 0)
        return self.job_status

    def kill(self) -> None:
        """Kill the job's process group and every process left in the tree, until none is left
        (a fork bomb forks while it is being killed)."""
        _kill(self.job)
        if not self.watching:
            return
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.002)
            self.reap()


_SUBREAPER = False
_SANDBOXED = os.environ.get("CWMTUI_SANDBOX") == "1"  # /tmp and /dev/shm are this sandbox's own tmpfs


def serve() -> None:
    """The fork server: one job (length-prefixed JSON) in on stdin, records out on stdout."""
    global _SUBREAPER
    _SUBREAPER = _set_subreaper()
    for name in _PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass
    while True:
        header = _read_exact(0, _HEADER.size)
        if header is None:
            return
        body = _read_exact(0, _HEADER.unpack(header)[0])
        if body is None:
            return
        job = json.loads(body)
        rec_r, rec_w = record_pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            for fd in (rec_r, out_r, err_r):
                os.close(fd)
            _child(job, rec_w, out_w, err_w)
        for fd in (rec_w, out_w, err_w):
            os.close(fd)
        result = _relay(pid, job, {rec_r: b"R", out_r: b"O", err_r: b"E"})
        _send(b"X", json.dumps(result).encode())


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder must not shadow the program's imports
    serve()
