def index(words):  # << START_OF_TRACE
    firsts = {w[0] for w in words}
    lengths = {w: len(w) for w in words}
    return firsts, lengths

index(["pear", "plum", "fig"])
