def describe(name, count):
    return "{} x{}".format(
        name,
        count,
    )

def f(n):  # << START_OF_TRACE
    stock = {
        "apples": n,
        "pears": n + 1,
    }
    text = describe(
        "apples",   
        stock["apples"],
    )
    total = (stock["apples"]
             + stock["pears"])
    return text, total

f(2)
