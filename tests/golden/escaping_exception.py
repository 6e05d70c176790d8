def check(v):
    if v > 2:
        raise ValueError(f"too big: {v}")
    return v

def f(items):  # << START_OF_TRACE
    out = []
    for v in items:
        out.append(check(v))
    return out

try:
    f([1, 5])
except ValueError:
    pass
