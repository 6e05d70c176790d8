"""A hostile program whose values are too long for any trace: many strings of a megabyte, a
megabyte of bytes, a bytearray, and a list that holds them."""


def hoard(count):  # << START_OF_TRACE
    values = []
    for i in range(count):
        text = str(i) * (1 << 20)
        blob = text.encode()
        buffer = bytearray(blob)
        values.append(text)
    return len(values)


hoard(20)
