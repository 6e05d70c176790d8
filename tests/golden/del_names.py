def f(n):  # << START_OF_TRACE
    tmp = n * 2
    xs = [n, tmp, 3]
    d = {"a": 1, "b": 2}
    del tmp
    del xs[0]
    del d["a"]
    tmp = "again"
    return xs, d, tmp

f(5)
