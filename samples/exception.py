"""An exception: raised in a helper, passing through its frame, caught by the caller.

The trace shows an exception frame where the error is raised, one where it passes through the
caller, and the handler's lines after it. Models often miss the jump into the except block.
"""


def parse_number(text):
    value = int(text)
    return value * 2


def parse_all(items):  # << START_OF_TRACE
    good = []
    bad = []
    for item in items:
        try:
            good.append(parse_number(item))
        except ValueError as err:
            bad.append(item)
            print("skipped", repr(item), "-", err)
    return good, bad


parse_all(["4", "x7", "15", "2.5", "9"])
