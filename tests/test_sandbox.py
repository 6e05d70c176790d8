"""Programs run in a sandbox (bubblewrap): no writes outside a scratch /tmp, no network, nothing
left running; one clear line where it cannot be had; --no-sandbox to run without it."""

from __future__ import annotations

import ast
import os
import socket
from pathlib import Path

import pytest

from cwmtui.cli import main
from cwmtui.interpreter import Interpreter, Limits, load_program
from cwmtui.interpreter import runner
from cwmtui.trace import Status

HOSTILE = Path(__file__).resolve().parent / "hostile"

needs_sandbox = pytest.mark.skipif(
    not runner.sandbox_available() and os.environ.get("CI") != "true",
    reason="bubblewrap cannot make a sandbox on this machine (CI installs it and runs these)",
)


def test_ci_has_the_sandbox():
    """CI installs bubblewrap (.ci/run): there the sandbox tests below must run, not skip."""
    if os.environ.get("CI") == "true":
        assert runner.sandbox_available()


@pytest.fixture
def listener():
    """A server on the host's loopback that a program in the sandbox must not reach."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def reach(folder: Path, port, sandbox: bool) -> list[str]:
    target = folder / "beside.txt"
    program = load_program(str(HOSTILE / "escape_attempts.py"), call=f"reach({str(target)!r}, {port})")
    with Interpreter() as interpreter:
        trace = interpreter.trace(program, Limits(sandbox=sandbox))
    assert trace.status.kind is Status.COMPLETE, trace.status
    return ast.literal_eval(trace.return_value())


@needs_sandbox
def test_a_program_in_the_sandbox_writes_only_its_scratch_tmp_and_has_no_network(tmp_path, listener):
    probe = Path("/tmp/cwmtui-sandbox-probe")
    probe.unlink(missing_ok=True)
    beside = HOSTILE / "beside.txt"  # beside the program, outside /tmp (the sandbox's own /tmp is empty)
    try:
        done = reach(HOSTILE, listener, sandbox=True)
    finally:
        written = beside.exists()
        beside.unlink(missing_ok=True)
    assert done[0] == f"could not write {beside}: Read-only file system" and not written
    assert done[1] == "wrote /tmp/home/cwmtui-sandbox-probe"  # home: in the scratch /tmp
    assert done[2] == "wrote /tmp/cwmtui-sandbox-probe"  # the sandbox's own /tmp, not the host's
    assert done[3].startswith("no connection")
    assert not probe.exists() and not (Path.home() / "cwmtui-sandbox-probe").exists()
    assert not (Path.home() / "cwmtui-sandbox-probe").exists()


def test_no_sandbox_runs_the_program_with_the_users_permissions(tmp_path, listener):
    done = reach(tmp_path, listener, sandbox=False)
    assert done[0] == f"wrote {tmp_path / 'beside.txt'}" and done[3] == "connected"
    assert (tmp_path / "beside.txt").read_text() == "written from a traced program"
    for leftover in (Path.home() / "cwmtui-sandbox-probe", Path("/tmp/cwmtui-sandbox-probe")):
        leftover.unlink(missing_ok=True)


@needs_sandbox
def test_the_same_interpreter_switches_between_sandboxed_and_not(tmp_path, listener):
    with Interpreter() as interpreter:
        program = load_program(str(HOSTILE / "locals_keys.py"))
        assert interpreter.trace(program, Limits(sandbox=True)).status.kind is Status.COMPLETE
        assert interpreter._sandboxed
        assert interpreter.trace(program, Limits(sandbox=False)).status.kind is Status.COMPLETE
        assert not interpreter._sandboxed


def test_no_sandbox_to_be_had_is_one_line_and_the_program_still_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(runner, "_sandbox", [])  # as where bubblewrap is missing
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    program = HOSTILE / "locals_keys.py"
    assert main(["trace", str(program)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: no sandbox: bubblewrap (bwrap) is not installed, so programs run with your permissions, "
                   "files and network; install bubblewrap, or pass --no-sandbox to run them so knowingly"]
    assert main(["trace", str(program), "--no-sandbox"]) == 0
    assert capsys.readouterr().err == ""


def limits_read_back(tmp_path, interpreter, saved: dict) -> Limits:
    """The limits of a session file whose settings say ``saved``, as the session reads them."""
    import json

    from cwmtui.session import DebugSession

    program = load_program(str(HOSTILE / "locals_keys.py"))
    path = tmp_path / "s.json"
    DebugSession(program, None, truth=interpreter.trace(program)).save(str(path))
    data = json.loads(path.read_text())
    data.setdefault("settings", {})["limits"] = saved
    path.write_text(json.dumps(data))
    return DebugSession.load(str(path)).limits


def test_a_session_file_cannot_turn_the_sandbox_off(tmp_path, interpreter):
    loaded = limits_read_back(tmp_path, interpreter, {"seconds": 3.0, "sandbox": False})
    assert loaded.seconds == 3.0 and loaded.sandbox is True


@needs_sandbox
def test_nothing_a_program_started_is_left_in_the_sandbox():
    """After a run that left a detached process, the sandbox holds only bubblewrap's init, the
    fork server and the next program."""
    from cwmtui.interpreter import program_from_source

    census = program_from_source(
        "import os\n\ndef count():  # << START_OF_TRACE\n    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n",
        "<census>", call="count()",
    )
    with Interpreter() as interpreter:
        left = load_program(str(HOSTILE / "detached.py"), call="leave('/tmp/note')")
        assert interpreter.trace(left).return_value() == "'left'"
        pids = ast.literal_eval(interpreter.trace(census).return_value())
    assert len(pids) == 3, pids


PROBE = """import os, socket

def probe(paths):  # << START_OF_TRACE
    caps = [line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff')][0]
    seen = sorted(k for k in os.environ if k in ('SSH_AUTH_SOCK', 'DBUS_SESSION_BUS_ADDRESS', 'DISPLAY', 'SECRET_TOKEN'))
    reached = []
    for path in paths:
        try:
            client = socket.socket(socket.AF_UNIX)
            client.connect(path)
            reached.append(path)
        except OSError:
            pass
    try:
        os.system('mount -o remount,rw / 2>/dev/null')
        open('/etc/cwmtui-sandbox-probe', 'w').write('x')
        wrote = True
    except OSError:
        wrote = False
    return caps, seen, reached, wrote
"""


@needs_sandbox
def test_the_sandbox_drops_every_capability_names_no_socket_and_reaches_none(tmp_path, monkeypatch):
    """Even run as root, a program in the sandbox has no capability (it cannot remount the
    file system), sees no agent/bus/display variable, and cannot connect to a host unix socket
    in /tmp or /run, nor anywhere else on the (read-only) file system: a socket beside the
    program, as a Docker Desktop socket under the home folder would be (the system-call filter)."""
    import shutil
    import tempfile

    from cwmtui.interpreter import program_from_source

    sockets = []
    outside = Path(tempfile.mkdtemp(prefix=".sock-", dir=HOSTILE))  # not under /tmp or /run
    for folder in (tmp_path, Path("/run") if os.access("/run", os.W_OK) else tmp_path, outside):
        path = folder / f"cwmtui-test-{os.getpid()}.sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        sockets.append((server, path))
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sockets[0][1]))
    monkeypatch.setenv("SECRET_TOKEN", "t0ken")
    try:
        program = program_from_source(PROBE, "<probe>", call=f"probe({[str(p) for _, p in sockets]!r})")
        with Interpreter() as interpreter:
            trace = interpreter.trace(program, Limits(sandbox=True))
        caps, seen, reached, wrote = ast.literal_eval(trace.return_value())
    finally:
        for server, path in sockets:
            server.close()
            path.unlink(missing_ok=True)
        shutil.rmtree(outside, ignore_errors=True)
        Path("/etc/cwmtui-sandbox-probe").unlink(missing_ok=True)
    assert (caps, seen, reached, wrote) == ("0000000000000000", [], [], False)


def test_a_session_file_cannot_switch_a_limit_off(tmp_path, interpreter):
    loaded = limits_read_back(tmp_path, interpreter, {"processes": 0, "memory": 0, "seconds": "forever", "frames": 50})
    assert (loaded.processes, loaded.memory, loaded.seconds, loaded.frames) == (Limits().processes, Limits().memory, Limits().seconds, 50)
