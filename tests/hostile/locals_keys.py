"""A hostile program that puts keys into locals() that are not names: JSON holds only text."""


def keys():  # << START_OF_TRACE
    locals()[42] = "x"
    locals()[(1, 2)] = "tuple key"
    locals()[None] = 0
    y = 1
    return y


keys()
