"""A composition of small functions: the output of each is the input of the next.

An error in any stage propagates to every stage after it, so the first divergence is what
matters: after it, the model's values are wrong for a reason, not by chance.
"""


def double(xs):
    return [2 * x for x in xs]


def keep_odd_positions(xs):
    return xs[1::2]


def running_total(xs):
    totals = []
    acc = 0
    for x in xs:
        acc += x
        totals.append(acc)
    return totals


def pipeline(xs):  # << START_OF_TRACE
    stage1 = double(xs)
    stage2 = keep_odd_positions(stage1)
    stage3 = running_total(stage2)
    return stage3[-1]


pipeline([3, 1, 4, 1, 5, 9, 2, 6])
