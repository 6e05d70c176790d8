def greet(name):  # << START_OF_TRACE
    # Grüße, 世界
    word = "héllo"
    full = word + ", " + name + " 🌍"
    chars = [c for c in name if ord(c) > 127]
    return full, chars

greet("Zoë")
