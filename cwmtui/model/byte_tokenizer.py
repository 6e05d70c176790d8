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
BYTE_OFFSET = 3  # id of byte 0
PAD_ID = 0
EOS_ID = 1
#: the ids of the special tokens (pad, end of text, unk, then after the bytes begin of text and
#: the eight trace tokens): what build_byte_tokenizer() assigns
SPECIAL_IDS = {tokens.PAD: PAD_ID, tokens.END_OF_TEXT: EOS_ID, "<|unk|>": 2, tokens.BEGIN_OF_TEXT: 259}
SPECIAL_IDS.update({tok: 260 + i for i, tok in enumerate(tokens.TRACE_TOKENS)})
VOCAB_USED = 260 + len(tokens.TRACE_TOKENS)  # 268 ids in use


class ByteTokenizer:
    """The same tokenizer without transformers (importing it costs seconds at start-up): the ids
    and text of ``build_byte_tokenizer()`` with ``add_special_tokens=False,
    split_special_tokens=True`` and ``skip_special_tokens=False`` (a test checks). Text is UTF-8
    bytes + 3; decoding joins the bytes and the specials' text and drops invalid UTF-8, as
    ByT5Tokenizer does; an id no token has decodes to nothing."""

    def __init__(self, where: str = "byte tokenizer") -> None:
        from .backend import check_special_ids

        self.where = where
        self.special_ids = check_special_ids(dict(SPECIAL_IDS), where)
        self._text = {i: name.encode("utf-8") for name, i in SPECIAL_IDS.items()}

    def encode(self, text: str) -> list[int]:
        return [b + BYTE_OFFSET for b in text.encode("utf-8")]

    def decode(self, ids) -> str:
        out = bytearray()
        text = self._text
        for i in ids:
            if BYTE_OFFSET <= i < BYTE_OFFSET + 256:
                out.append(i - BYTE_OFFSET)
            else:
                out += text.get(i, b"")
        return out.decode("utf-8", errors="ignore")

    @staticmethod
    def fits(path: str) -> bool:
        """Is the tokenizer saved in ``path`` this one (ByT5 with these special ids)?"""
        import json
        import os

        try:
            with open(os.path.join(path, "tokenizer_config.json"), encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError):
            return False
        if not isinstance(config, dict) or config.get("tokenizer_class") != "ByT5Tokenizer":
            return False
        added = config.get("added_tokens_decoder") or {}
        try:
            saved = {entry["content"]: int(i) for i, entry in added.items()}
        except (AttributeError, KeyError, TypeError, ValueError):
            return False
        return saved == SPECIAL_IDS


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
