"""A permutation tracked through many swaps (the S5 word problem).

The state is small, five letters, but every swap moves two of them, and the answer depends on
all the swaps before it. A model has to track the permutation over a long horizon: small
errors early on never wash out.
"""


def apply_swaps(swaps):  # << START_OF_TRACE
    cups = ["a", "b", "c", "d", "e"]
    for i, j in swaps:
        cups[i], cups[j] = cups[j], cups[i]
    return "".join(cups)


apply_swaps([(0, 1), (2, 4), (1, 3), (0, 4), (2, 3), (1, 2), (0, 3), (3, 4),
             (1, 4), (0, 2), (2, 4), (0, 1), (3, 1), (4, 0), (2, 3), (1, 0)])
