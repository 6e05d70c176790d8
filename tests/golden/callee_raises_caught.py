def pick(items, i):
    item = items[i]
    return item

def f(items):  # << START_OF_TRACE
    found = []
    for i in (0, 5):
        try:
            found.append(pick(items, i))
        except IndexError as exc:
            found.append(type(exc).__name__)
    return found

f(["x"])
