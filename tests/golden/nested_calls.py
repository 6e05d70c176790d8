def square(x):
    return x * x

def hypot2(a, b):
    sa = square(a)
    sb = square(b)
    return sa + sb

def f(a, b):  # << START_OF_TRACE
    h = hypot2(a, b)
    ok = h == 25
    return ok

f(3, 4)
