def make_counter(step):
    count = 0
    def bump():
        nonlocal count
        count += step
        return count
    return bump

def f():  # << START_OF_TRACE
    c = make_counter(5)
    a = c()
    b = c()
    return a, b

f()
