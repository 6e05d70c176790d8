def total(xs):  # << START_OF_TRACE
    acc = 0
    for i in range(len(xs)):
        if xs[i] % 2 == 0:
            acc += xs[i]
        else:
            acc -= 1
    return acc

total([4, 7, 10])
