def f(text):  # << START_OF_TRACE
    parts = text.split("<|frame_sep|>")
    marker = "<|end_of_text|>"
    return parts, marker

f("a<|frame_sep|>b")
