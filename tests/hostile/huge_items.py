"""A hostile program whose values are small lists and dicts holding huge texts: their reprs
would be hundreds of MiB each line, though each container is a few bytes to sys.getsizeof."""


def hoard():  # << START_OF_TRACE
    shelf = []
    for i in range(6):
        shelf.append(bytearray(48 << 20))
        index = {"text": "x" * (40 << 20), "pair": ("y" * (40 << 20),)}
    return len(shelf) + len(index)


hoard()
