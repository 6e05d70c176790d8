def f(items):  # << START_OF_TRACE
    by_len = sorted(items, key=lambda s: (len(s), s))
    upper = list(map(lambda s: s.upper(), by_len[:2]))
    return by_len, upper

f(["kiwi", "fig", "apple"])
