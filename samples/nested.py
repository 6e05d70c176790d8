"""Nested calls: the model must step into each function and come back to the right line.

Every call opens a new scope (a call frame with all its arguments), every return closes it and
the caller resumes with all its locals written out again.
"""


def digits(n):
    return [int(d) for d in str(n)]


def digit_sum(n):
    total = 0
    for d in digits(n):
        total += d
    return total


def digital_root(n):  # << START_OF_TRACE
    steps = 0
    while n >= 10:
        n = digit_sum(n)
        steps += 1
    return n, steps


digital_root(98765)
