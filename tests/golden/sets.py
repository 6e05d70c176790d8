def f(a, b):  # << START_OF_TRACE
    left = set(a)
    right = set(b)
    common = left & right
    left.discard("kiwi")
    union = left | right
    return sorted(common), union

f(["apple", "kiwi", "fig"], ["fig", "plum", "kiwi"])
