def f(zoo):  # << START_OF_TRACE
    swapped = dict((v, k) for k, v in zoo.items())
    total = sum(n * n for n in swapped)
    return swapped, total

f({"a": 1, "b": 2})
