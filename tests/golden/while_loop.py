def collatz(n):  # << START_OF_TRACE
    steps = 0
    while n != 1:
        if n % 2:
            n = 3 * n + 1
        else:
            n //= 2
        steps += 1
    return steps

collatz(6)
