def parse(text):
    try:
        value = int(text)
    except ValueError as e:
        reason = str(e)
        value = -1
    return value

def f(a, b):  # << START_OF_TRACE
    x = parse(a)
    y = parse(b)
    try:
        ratio = x / (y + 1)
    except ZeroDivisionError:
        ratio = None
    return x, y, ratio

f("12", "oops")
