def f(a):  # << START_OF_TRACE
    i, j = 0, len(a) - 1
    while i < j:
        a[i], a[j] = a[j], a[i]
        i, j = i + 1, j - 1
    first, *rest = a
    return first, rest

f([1, 2, 3, 4])
