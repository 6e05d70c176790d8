"""A hostile program that leaves a process behind: a double fork into a new session, which
sleeps long after the program has returned (and writes its pid to ``note``). Run it with
``--call "leave('/tmp/note')"``."""

import os
import time


def leave(note):  # << START_OF_TRACE
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            with open(note, "w") as handle:
                handle.write(str(os.getpid()))
            time.sleep(120)
        os._exit(0)
    os.waitpid(pid, 0)
    time.sleep(0.3)
    return "left"

