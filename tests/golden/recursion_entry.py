def fact(n):  # << START_OF_TRACE
    if n <= 1:
        return 1
    return n * fact(n - 1)

fact(3)
