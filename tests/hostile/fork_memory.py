"""A hostile program that stays under a per-process memory limit by forking: each child holds
``mib`` MiB (written, so resident), together far more than the limit."""

import os
import time


def spread(children, mib):  # << START_OF_TRACE
    pids = []
    for _ in range(children):
        pid = os.fork()
        if pid == 0:
            block = bytearray(mib << 20)
            block[:: 4096] = b"x" * len(block[:: 4096])
            time.sleep(30)
            os._exit(0)
        pids.append(pid)
    time.sleep(30)
    return len(pids)


spread(3, 200)
