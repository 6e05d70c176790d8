def numbers():
    try:
        yield 1
        yield 2
    finally:
        print("closed")

def f():  # << START_OF_TRACE
    g = numbers()
    first = next(g)
    del g
    return first

f()
