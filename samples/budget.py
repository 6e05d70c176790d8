"""A loop that grows its state: every frame repeats the whole, growing list.

The trace format writes a changed value in full, so each step of this loop costs more tokens
than the one before. A rollout with a small --token-budget runs out before the program ends:
the paper's "token-budget exhaustion" regime.
"""


def collatz_path(n):  # << START_OF_TRACE
    path = [n]
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        path.append(n)
    return len(path), max(path)


collatz_path(27)
