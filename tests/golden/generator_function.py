def countdown(n):
    while n > 0:
        yield n
        n -= 1
    return "done"

def f(start):  # << START_OF_TRACE
    seen = []
    for v in countdown(start):
        seen.append(v)
    return seen

f(2)
