class Broken:
    def __repr__(self):
        raise RuntimeError("no repr")

def f():  # << START_OF_TRACE
    b = Broken()
    n = 1
    return n

f()
