def f(words):  # << START_OF_TRACE
    s = ""
    for w in words:
        s += w[::-1] + "\n"
    line = f"{len(s)}:\t{s!r}"
    joined = "-".join(words)
    return s, line, joined

f(["ab", "c'd"])
