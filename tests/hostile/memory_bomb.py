"""A hostile program that eats memory as fast as it can, and writes while it does."""


def bomb():  # << START_OF_TRACE
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))
        print("more" * 1000)


bomb()
