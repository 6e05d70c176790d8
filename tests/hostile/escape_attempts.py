"""A hostile program that reaches outside: it writes a file at ``target``, in the home folder
and in /tmp, connects to the network, and reports what it managed. In the sandbox only its
scratch folder (HOME and TMPDIR) takes writes, and there is no network."""

import os
import socket


def reach(target, port):  # << START_OF_TRACE
    done = []
    for path in (target, os.path.expanduser("~/cwmtui-sandbox-probe"), "/tmp/cwmtui-sandbox-probe"):
        try:
            with open(path, "w") as handle:
                handle.write("written from a traced program")
            done.append("wrote " + path)
        except OSError as exc:
            done.append(f"could not write {path}: {exc.strerror}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        done.append("connected")
    except OSError as exc:
        done.append(f"no connection: {exc.strerror or exc}")
    return done
