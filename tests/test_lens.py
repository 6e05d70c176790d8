"""The token lens: a wrong string as the tokenizer splits it, differing pieces marked."""

from cwmtui.analysis.lens import Lens, byte_pieces, token_lens, value_pieces

VOCAB = sorted(['{"', ' "', "'", "straw", "berry", "bery", "ber", "ry", '"', "}", '"}', "'\"", "'\"}"], key=len, reverse=True)


def bpe_like(text: str) -> list[str]:
    """Greedy longest match over a tiny vocabulary, single characters otherwise."""
    pieces, i = [], 0
    while i < len(text):
        for word in VOCAB:
            if text.startswith(word, i):
                pieces.append(word)
                i += len(word)
                break
        else:
            pieces.append(text[i])
            i += 1
    return pieces


def test_value_is_split_as_it_stands_in_the_locals_object():
    text, pieces = value_pieces("'strawberry'", bpe_like)
    assert text == "\"'strawberry'\""
    # the edge pieces carry their context; one that is only the JSON string's quote (' "') is
    # the format's, not the value's: it is not counted (#24)
    assert pieces == ["'", "straw", "berry", "'\"}"]


def test_one_dropped_letter_marks_only_the_piece_it_lives_in():
    lens = token_lens("'strawberry'", "'strawbery'", bpe_like)
    assert [p.text for p in lens.expected] == ["'", "straw", "berry", "'\"}"]
    assert [p.text for p in lens.predicted] == ["'", "straw", "bery", "'\"}"]
    assert [p.differs for p in lens.expected] == [False, False, True, False]
    assert [p.differs for p in lens.predicted] == [False, False, True, False]
    assert lens.first_difference == 2
    assert lens.changed_pieces == (1, 1)


def test_return_values_are_split_without_the_locals_context():
    lens = token_lens("'berry'", "'berry'", bpe_like, in_locals=False)
    assert [p.text for p in lens.expected] == ["'", "berry", "'\""]
    assert lens.first_difference is None


def test_byte_pieces_show_each_character_and_json_escapes():
    lens = token_lens("'a\\nb'", "'a b'", byte_pieces, in_locals=False)
    assert lens.expected_text == "\"'a\\\\nb'\""
    marked = "".join(p.text for p in lens.expected if p.differs)
    assert marked == "\\\\n"


def test_lens_round_trips_through_json():
    lens = token_lens("'strawberry'", "'strawbery'", bpe_like)
    again = Lens.from_json(lens.to_json())
    assert again == lens
