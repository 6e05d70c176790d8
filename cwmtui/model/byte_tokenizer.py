"""The byte-level tokenizer of the bundled model: 256 bytes plus the CWM special tokens.

It is a transformers ``ByT5Tokenizer`` (pure Python, saves and reloads offline through
``AutoTokenizer`` with identical ids): ids 0-2 are pad, end of text and unk, 3-258 the bytes,
then ``<|begin_of_text|>`` and the eight trace tokens. Encode text with
``add_special_tokens=False, split_special_tokens=True`` so a literal ``<|frame_sep|>`` in a
program stays bytes.
"""

from __future__ import annotations

from ..trace import tokens

BYTE_SPECIALS = (tokens.BEGIN_OF_TEXT,) + tokens.TRACE_TOKENS


def build_byte_tokenizer():
    from tokenizers import AddedToken
    from transformers import ByT5Tokenizer

    def special(text: str) -> AddedToken:
        return AddedToken(text, lstrip=False, rstrip=False, normalized=False, special=True)

    return ByT5Tokenizer(
        extra_ids=0,
        additional_special_tokens=[special(t) for t in BYTE_SPECIALS],
        pad_token=special(tokens.PAD),
        eos_token=special(tokens.END_OF_TEXT),
        unk_token=special("<|unk|>"),
        bos_token=special(tokens.BEGIN_OF_TEXT),
    )
