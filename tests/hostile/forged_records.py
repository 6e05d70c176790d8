"""A hostile program that writes forged records into the tracer's own channel (every inherited
file descriptor it can find): records of the wrong shape, and an END that claims success."""

import marshal
import os
import struct


def forge():  # << START_OF_TRACE
    batches = [
        [(1, "not a line number", ("x",), ("1",))],
        [(0, None)],
        [(5, "complete", None, "forged")],
        "not even a list",
    ]
    for fd in range(3, 64):
        for batch in batches:
            blob = marshal.dumps(batch)
            try:
                os.write(fd, struct.pack("<I", len(blob)) + blob)
            except OSError:
                pass
    y = 1
    return y


forge()
