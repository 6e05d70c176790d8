"""The parent side of the interpreter: a fork server, limits, and records turned into a Trace."""

from __future__ import annotations

import json
import marshal
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

from ..trace import Event, Frame, OutputChunk, Status, Trace, TraceStatus
from ..trace.tokens import strip_marker
from . import child, seccomp
from .program import Program

_HEADER = struct.Struct("<I")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_ADDRESS_MARK = " at 0x"
_plain_locals = child._linetrace.plain_locals if child._linetrace is not None else None
REFERENCE_VERSION = (3, 11)


@dataclass(frozen=True)
class Limits:
    frames: int = 10_000
    seconds: float = 10.0
    memory: int = 2 << 30  # bytes: each process's address space, and the resident memory of all of them
    output: int = 1 << 20  # characters the program may write
    processes: int = 64  # processes the program may have running at once (itself included)
    sandbox: bool = True  # run the program in the sandbox (see sandbox_command); False: --no-sandbox


def version_warning() -> str | None:
    if sys.version_info[:2] != REFERENCE_VERSION:
        have = ".".join(map(str, sys.version_info[:3]))
        return (
            f"warning: tracing under Python {have}; CWM was trained on CPython 3.11 traces, "
            "so line events and comprehension frames may differ"
        )
    return None


def json_keys(keys: tuple) -> tuple:
    """The locals' names as the trace's JSON object holds them: a program can put other keys
    into ``locals()`` (``locals()[42] = "x"``); they become the text ``json.dumps`` would
    write (``"42"``), or their repr where JSON has none (a tuple key). Names are almost always
    all text: one C-speed join checks that."""
    try:
        "".join(keys)
        return keys
    except TypeError:
        return tuple(_json_key(key) for key in keys)


def _json_key(key) -> str:
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        try:
            return json.dumps({key: 0})[2:-5]  # json's own spelling: true, null, 1.5, Infinity
        except ValueError:  # an int past what str() converts (10**5000)
            pass
    try:
        return repr(key)
    except ValueError:
        return f"<{type(key).__name__} key>"


_sandbox: list | None = None  # [path of bwrap] once found usable, [] once found not
_sandbox_lock = threading.Lock()  # threads asking at once all wait for the one probe


#: the variables a program in the sandbox sees (besides HOME and TMPDIR, which point into its
#: scratch): no agent, bus or display socket is named to it
SANDBOX_ENVIRONMENT = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "PYTHONHASHSEED",
                       "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "CWMTUI_PURE_TRACER")
#: what the sandbox covers with a private tmpfs: the scratch (/tmp) and where sockets live
SANDBOX_HIDDEN = ("/tmp", "/run", "/var/run")


def sandbox_command(env: dict[str, str], seccomp_fd: int | None = None) -> list[str] | None:
    """The command that puts a process in the sandbox, or None where bubblewrap is missing or
    cannot make one here (no user namespaces; found out once per process).

    bubblewrap's view of the system for the fork server and every program it runs: a user
    namespace with no capability (even for root: nothing can be remounted), the whole file system
    read-only, a private /tmp (the only place it can write, HOME and TMPDIR, the same path on
    every run, gone with the server) and a private /run (no host sockets there: agents, buses,
    Docker), the folders it needs from under those bound back read-only (the working folder, the
    Python installation), its own /dev and /proc, no network, its own process ids, only the
    variables of SANDBOX_ENVIRONMENT, killed with cwmtui; ``seccomp_fd`` (from
    :func:`seccomp.filter_fd`, passed to bubblewrap by the caller): no Unix socket by path either.
    ``env``: the variables to pass on."""
    if not sandbox_available():
        return None
    try:
        here = os.getcwd()
    except OSError:  # the folder cwmtui runs in was deleted
        here = "/"
    needed = [here, sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(child.__file__)), *sys.path]
    filtered = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    assert _sandbox  # (sandbox_available() found bwrap)
    return [_sandbox[0], *_sandbox_args(needed, env), *filtered, "--chdir", here]


def sandbox_available() -> bool:
    """Can bubblewrap make the sandbox here? Tried once per process (a thread asking while
    another probes waits for its answer: until then it is not known, not "no")."""
    global _sandbox
    if _sandbox is not None:
        return bool(_sandbox)
    with _sandbox_lock:
        if _sandbox is None:
            found: list = []
            bwrap = shutil.which("bwrap")
            if bwrap is not None:
                fd = seccomp.filter_fd()
                filtered = ["--seccomp", str(fd)] if fd is not None else []
                try:
                    probe = subprocess.run([bwrap, *_sandbox_args([], {}), *filtered, "--", "true"], capture_output=True,
                                           timeout=10, pass_fds=(fd,) if fd is not None else ())
                except (OSError, subprocess.SubprocessError):
                    probe = None
                finally:
                    if fd is not None:
                        os.close(fd)
                if probe is not None and probe.returncode == 0:
                    found = [bwrap]
            _sandbox = found
    return bool(_sandbox)


def _sandbox_args(needed: list[str], env: dict[str, str]) -> list[str]:
    args = ["--unshare-user", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for hidden in SANDBOX_HIDDEN:
        if os.path.isdir(hidden) and not os.path.islink(hidden):
            args += ["--tmpfs", hidden]
    back = sorted({os.path.realpath(p) for p in needed if p and os.path.isdir(p)
                   and any(os.path.realpath(p).startswith(h + "/") for h in SANDBOX_HIDDEN)})
    for path in back:  # under a hidden folder, but needed: read-only, as it is
        args += ["--ro-bind", path, path]
    args += ["--dir", "/tmp/home", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
             "--die-with-parent", "--clearenv"]
    for name in SANDBOX_ENVIRONMENT:
        if name in env:
            args += ["--setenv", name, env[name]]
    import site

    args += ["--setenv", "HOME", "/tmp/home", "--setenv", "TMPDIR", "/tmp", "--setenv", "CWMTUI_SANDBOX", "1",
             "--setenv", "PYTHONUSERBASE", site.getuserbase()]  # ~/.local's packages, as outside
    return args


def sandbox_warning(limits: "Limits") -> str | None:
    """The one line to show when a sandbox was asked for and cannot be had."""
    if not limits.sandbox or sandbox_available():
        return None
    why = "bubblewrap (bwrap) is not installed" if shutil.which("bwrap") is None else "bubblewrap cannot create one here (no user namespaces?)"
    return (
        f"warning: no sandbox: {why}, so programs run with your permissions, files and network; "
        "install bubblewrap, or pass --no-sandbox to run them so knowingly"
    )


def clean_repr(text: str) -> str:
    """Strip memory addresses from default reprs (spec §4.2)."""
    return _ADDRESS.sub("", text) if _ADDRESS_MARK in text else text


class TraceBuilder:
    """Turns the child's records into frames (resolved locals, depth, function, action)."""

    def __init__(self, program: Program, on_frame: Callable[[Frame], None] | None = None) -> None:
        self.actions = [strip_marker(line) for line in program.lines]
        self.frames: list[Frame] = []
        self.output: list[OutputChunk] = []
        self.status: TraceStatus | None = None
        self._stack: list[str] = []
        self._on_frame = on_frame
        self.forged = False  # records the tracer never writes came in (see forge_detected)
        self._previous: tuple[tuple, tuple, dict] | None = None  # the last plain record's names, values, locals

    def _plain_locals(self, keys: tuple, values: tuple) -> dict:
        """{name: repr} for a plain record: the names and values of a frame whose values are all
        of child.SIMPLE_TYPES (the child sends those values, not their reprs)."""
        previous = self._previous
        resolved = None
        if _plain_locals is not None:  # C: reuses the previous record's reprs of the same objects
            resolved = _plain_locals(keys, values, *previous) if previous else _plain_locals(keys, values, None, None, None)
        if resolved is None:
            reprs: Iterable[str] = child.plain_reprs(values)
            if _ADDRESS_MARK in "".join(reprs):
                reprs = map(clean_repr, reprs)
            resolved = dict(zip(keys, reprs))
        self._previous = (keys, values, resolved)
        return resolved

    def add_records(self, records: list) -> None:
        # Hot: a 10,000-frame trace passes 10,000 records through this loop, so names are bound
        # locally and a record's reprs are searched for addresses in one go, not one by one.
        frames = self.frames
        stack = self._stack
        actions = self.actions
        count = len(actions)
        on_frame = self._on_frame
        line, call, ret, exc = Event.LINE, Event.CALL, Event.RETURN, Event.EXCEPTION
        LINE, CALL, RETURN, EXCEPTION = child.LINE, child.CALL, child.RETURN, child.EXCEPTION
        plain_locals = self._plain_locals
        for record in records:
            kind = record[0]
            if kind == LINE:
                if len(record) == 3:  # a copy of the locals, all of child.SIMPLE_TYPES: repr them here
                    _, lineno, snap = record
                    resolved = plain_locals(json_keys((*snap,)), (*snap.values(),))
                else:
                    _, lineno, keys, values = record
                    if type(values) is tuple:  # the values themselves (the C line tracer)
                        resolved = plain_locals(json_keys(keys), values)
                    else:
                        if _ADDRESS_MARK in "".join(values):
                            values = map(clean_repr, values)
                        resolved = dict(zip(json_keys(keys), values))
                frame = Frame(
                    line,
                    actions[lineno - 1] if 1 <= lineno <= count else "\n",
                    resolved,
                    None,
                    lineno,
                    len(stack) - 1,
                    stack[-1] if stack else "?",
                )
            elif kind == CALL:
                if len(record) == 4:
                    _, lineno, name, snap = record
                    resolved = plain_locals(json_keys((*snap,)), (*snap.values(),))
                else:
                    _, lineno, name, keys, values = record
                    if _ADDRESS_MARK in "".join(values):
                        values = map(clean_repr, values)
                    resolved = dict(zip(json_keys(keys), values))
                frame = Frame(
                    call,
                    actions[lineno - 1] if 1 <= lineno <= count else "\n",
                    resolved,
                    None,
                    lineno,
                    len(stack),
                    name,
                )
                stack.append(name)
            elif kind == RETURN or kind == EXCEPTION:
                _, lineno, value = record
                frame = Frame(
                    ret if kind == RETURN else exc,
                    actions[lineno - 1] if 1 <= lineno <= count else "\n",
                    None,
                    clean_repr(value),
                    lineno,
                    max(len(stack) - 1, 0),
                    stack[-1] if stack else "?",
                )
                if kind == RETURN and stack:
                    stack.pop()
            elif kind == child.OUTPUT:
                self.add_output("stdout" if record[1] == 0 else "stderr", record[2])
                continue
            elif kind == child.END:
                _, status, limit, message = record
                self.status = TraceStatus(Status(status), message, limit)
                continue
            else:
                continue
            frames.append(frame)
            if on_frame is not None:
                on_frame(frame)

    def forge_detected(self) -> None:
        """Records the tracer never writes: the program wrote into the tracer's channel. What
        came after cannot be trusted, so the trace ends where they began."""
        self.forged = True
        where = f"after step {len(self.frames) - 1}" if self.frames else "before the tracer's first record"
        self.status = TraceStatus(
            Status.DIED, f"the program wrote into the tracer's own channel {where}: the trace stops there"
        )

    def add_output(self, stream: str, text: str) -> None:
        step = len(self.frames)
        last = self.output[-1] if self.output else None
        if last is not None and last.step == step and last.stream == stream:
            last.text += text
        else:
            self.output.append(OutputChunk(step, stream, text))

    def trace(self) -> Trace:
        status = self.status or TraceStatus(Status.DIED, "the tracer stopped without a word")
        return Trace(self.frames, status, self.output)


class Interpreter:
    """Runs programs under the tracer. One fork server serves many programs (a whole suite)."""

    def __init__(self, python: str | None = None, accelerated: bool = True) -> None:
        """``python``: the interpreter that runs programs (default: this one). ``accelerated``:
        record plain line events in C when the optional extension is built (the pure-Python
        tracer records the same trace, slower)."""
        self._python = python or sys.executable
        self._accelerated = accelerated
        self._process: subprocess.Popen | None = None
        self._sandboxed = False  # whether the running fork server is in the sandbox
        self._lock = threading.Lock()
        self.warning = version_warning()

    def sibling(self) -> "Interpreter":
        """Another interpreter that runs programs as this one does (the same Python, the same
        tracer), with a fork server of its own: a pool's next worker."""
        return Interpreter(self._python, self._accelerated)

    def __enter__(self) -> "Interpreter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            try:
                if process.stdin is not None:
                    process.stdin.close()
            except OSError:
                pass
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()

    def _server(self, sandbox: bool = True) -> subprocess.Popen:
        if self._process is not None and self._sandboxed != (sandbox and sandbox_available()):
            self.close()  # a run asks for the other kind of server
        if self._process is None or self._process.poll() is not None:
            env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
            env.pop("PYTHONSTARTUP", None)
            if not self._accelerated:
                env["CWMTUI_PURE_TRACER"] = "1"
            fd = seccomp.filter_fd() if sandbox and sandbox_available() else None
            wrapper = sandbox_command(env, fd) if sandbox else None
            command = [self._python, child.__file__]
            if wrapper is not None:
                command = [*wrapper, "--", *command]
            self._sandboxed = wrapper is not None
            try:
                self._process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    pass_fds=(fd,) if fd is not None else (),
                )
            finally:
                if fd is not None:
                    os.close(fd)
        return self._process

    def trace(
        self,
        program: Program,
        limits: Limits = Limits(),
        on_frame: Callable[[Frame], None] | None = None,
    ) -> Trace:
        """Record the program's run. Never raises for anything the program does."""
        with self._lock:
            builder = TraceBuilder(program, on_frame)
            job = child_job(program, limits)
            try:
                end = self._exchange(job, builder)
            except (OSError, ValueError, EOFError) as exc:
                self.close()
                builder.status = builder.status or TraceStatus(
                    Status.DIED, f"lost contact with the tracer process ({exc})"
                )
                return builder.trace()
            except BaseException:
                # on_frame raised (or ^C) mid-job: the server still sends this job's records, and
                # the next trace would read them as its own. A fresh server starts next time.
                self.close()
                raise
            if builder.status is None:
                builder.status = _status_from_end(end, limits)
            return builder.trace()

    def _exchange(self, job: dict, builder: TraceBuilder) -> dict:
        process = self._server(job["limits"].get("sandbox", True))
        body = json.dumps(job).encode()
        stdin, out = process.stdin, process.stdout
        assert stdin is not None and out is not None  # (the server is started with both pipes)
        stdin.write(_HEADER.pack(len(body)) + body)
        stdin.flush()
        pending = bytearray()
        while True:
            header = out.read(_HEADER.size)
            if len(header) < _HEADER.size:
                raise EOFError("the tracer process ended")
            size = _HEADER.unpack(header)[0]
            message = out.read(size)
            if len(message) < size:
                raise EOFError("the tracer process ended")
            kind, payload = message[:1], message[1:]
            if kind == b"R":
                pending += payload
                while len(pending) >= _HEADER.size:
                    need = _HEADER.unpack_from(pending)[0] + _HEADER.size
                    if len(pending) < need:
                        break
                    try:
                        records = marshal.loads(pending[_HEADER.size : need])
                    except (ValueError, EOFError, TypeError):
                        records = []
                    del pending[:need]
                    if isinstance(records, list) and not builder.forged:
                        try:
                            builder.add_records(records)
                        except (TypeError, ValueError, IndexError, KeyError, AttributeError):
                            builder.forge_detected()
            elif kind in (b"O", b"E"):
                builder.add_output(
                    "stdout" if kind == b"O" else "stderr", payload.decode("utf-8", "replace")
                )
            elif kind == b"X":
                return json.loads(payload)


def child_job(program: Program, limits: Limits) -> dict:
    """What the fork server needs to run the program (sent as JSON)."""
    return {
        "source": program.source,
        "filename": program.path,
        "entry": program.entry,
        "entry_firstlineno": program.entry_firstlineno,
        "call": program.call,
        "limits": asdict(limits),
    }


def _status_from_end(end: dict, limits: Limits) -> TraceStatus:
    if end.get("killed") == "time":
        return TraceStatus(Status.LIMIT, f"stopped after {limits.seconds:g} s", "time")
    if end.get("killed") == "output":
        return TraceStatus(Status.LIMIT, "the program wrote more output than the limit", "output")
    if end.get("killed") == "memory":
        return TraceStatus(
            Status.LIMIT, f"the program and the processes it started used more than {limits.memory >> 20} MiB of memory", "memory"
        )
    if end.get("killed") == "processes":
        return TraceStatus(Status.LIMIT, f"the program started more than {limits.processes} processes", "processes")
    if "signal" in end:
        number = end["signal"]
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return TraceStatus(Status.DIED, f"the program was killed by {name}")
    code = end.get("exitcode")
    return TraceStatus(Status.DIED, f"the program exited abruptly (exit code {code})", exit_code=code if type(code) is int else None)


def trace_program(
    program: Program, limits: Limits = Limits(), on_frame: Callable[[Frame], None] | None = None
) -> Trace:
    """Trace one program in a fresh fork server."""
    with Interpreter() as interpreter:
        return interpreter.trace(program, limits, on_frame)
