def scale(xs, k):  # << START_OF_TRACE
    doubled = [x * k for x in xs if x > 0]
    pairs = [(a, b) for a in "ab" for b in range(2)]
    return doubled, pairs

scale([3, -1, 2], 10)
