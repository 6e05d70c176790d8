def twice(fn):
    def wrapper(x):
        return fn(fn(x))
    return wrapper

@twice
def inc(x):  # << START_OF_TRACE
    y = x + 1
    return y

inc(1)
