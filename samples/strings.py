"""String operations: the values the model must track are strings.

Each step edits a string a little (slices, joins, case changes, a cipher), so a model that
tokenizes text into subwords has to get every character of the new value right. This is where
the paper's "string-valued state" failures show up: the action is right, the string is not.
"""


def scramble(text, shift):  # << START_OF_TRACE
    out = []
    for word in text.split():
        head, tail = word[0], word[1:]
        rotated = ""
        for ch in tail.lower():
            if ch.isalpha():
                rotated += chr((ord(ch) - 97 + shift) % 26 + 97)
            else:
                rotated += ch
        out.append(head.upper() + rotated[::-1])
        print(word, "->", out[-1])
    joined = "-".join(out)
    return joined.replace("-", " ", 1)


scramble("world model", 3)
