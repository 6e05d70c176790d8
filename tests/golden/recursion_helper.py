def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

def f(k):  # << START_OF_TRACE
    value = fib(k)
    return value

f(3)
