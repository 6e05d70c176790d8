"""The sandbox's system-call filter: no socket that could reach a host service by its path.

bubblewrap gives the program no network (its own network namespace) and a private /tmp and
/run, but the rest of the file system is there, read-only, and a read-only mount does not stop
``connect()`` to a Unix socket that lives on it (a Docker Desktop socket under the home folder,
a database's under /var/lib). This filter makes ``socket(AF_UNIX, ...)`` fail with EACCES, so no
path-named socket can be reached; ``socketpair()`` (which asyncio and multiprocessing pipes use)
is left alone, as is every other call. io_uring, which can open sockets without the socket()
call, is refused, and so is any system call made through another architecture's entry (32-bit
calls on x86-64 multiplex sockets through socketcall(), which a filter cannot look into).

The filter is classic BPF for seccomp (``struct sock_filter``, the form bubblewrap's
``--seccomp FD`` reads), built here for x86-64 and AArch64; elsewhere there is none and the rest
of the sandbox still holds.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR, _ARCH, _ARG0 = 0, 4, 16  # (args[0]'s low half: little-endian machines only, as both below)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_REFUSE = 0x00050000 | errno.EACCES  # SECCOMP_RET_ERRNO: the call fails with "Permission denied"
_AF_UNIX = 1

#: machine: (AUDIT_ARCH_*, socket, io_uring_setup, the first number no native call has)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425, 0x40000000),  # x32 calls are numbered from 0x40000000
    "aarch64": (0xC00000B7, 198, 425, 0x80000000),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def socket_filter(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (this one's by default) as bubblewrap reads it, or None where
    cwmtui knows no system-call numbers."""
    known = _ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, socket_nr, io_uring_nr, foreign = known
    program = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ, arch, jt=1),  # another architecture's entry: refused
        _op(_RET, _REFUSE),
        _op(_LD_W_ABS, _NR),
        _op(_JGE, foreign, jt=5),  # x32's numbers: refused
        _op(_JEQ, io_uring_nr, jt=4),
        _op(_JEQ, socket_nr, jf=2),
        _op(_LD_W_ABS, _ARG0),
        _op(_JEQ, _AF_UNIX, jt=1),
        _op(_RET, _ALLOW),
        _op(_RET, _REFUSE),
    ]
    return b"".join(program)


def filter_fd(machine: str | None = None) -> int | None:
    """A file descriptor to read the filter from (for ``bwrap --seccomp FD``), or None. The
    caller passes it to bubblewrap and closes it after starting it."""
    program = socket_filter(machine)
    if program is None:
        return None
    read_end, write_end = os.pipe()  # (the filter is a few hundred bytes: the pipe holds it)
    try:
        os.write(write_end, program)
    finally:
        os.close(write_end)
    return read_end
