"""Tokenizers as the backends use them: text in and out without special-token parsing, and the
ids of the CWM special tokens looked up by their strings."""

from __future__ import annotations

import os
from typing import Sequence

from ..trace import tokens
from .backend import ModelError, check_special_ids


class HFTokenizer:
    """A transformers tokenizer: ``encode`` never turns a literal ``<|frame_sep|>`` into the
    special id (``split_special_tokens=True``), ``decode`` keeps every character."""

    def __init__(self, tokenizer, where: str) -> None:
        self.tokenizer = tokenizer
        self.where = where
        self.special_ids = self._find_special_ids()

    def _find_special_ids(self) -> dict[str, int]:
        tokenizer = self.tokenizer
        unk = tokenizer.unk_token_id
        found: dict[str, int | None] = {}
        for token in tokens.SPECIAL_TOKENS:
            token_id = tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, list) or token_id is None or (token_id == unk and token != tokenizer.unk_token):
                found[token] = None
            elif tokenizer.encode(token, add_special_tokens=False) != [token_id]:
                found[token] = None  # the string is not one token
            else:
                found[token] = token_id
        return check_special_ids(found, self.where)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def load_tokenizer(path: str) -> HFTokenizer:
    """A tokenizer from a local directory (offline), or ModelError."""
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such tokenizer directory")
    if not os.path.isdir(path):
        raise ModelError(f"{path}: not a directory (--tokenizer takes a Hugging Face tokenizer directory)")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many kinds here
        raise ModelError(f"{path}: cannot load the tokenizer: {first_line(exc)}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return HFTokenizer(tokenizer, path)


def byte_tokenizer():
    """The bundled model's byte-level tokenizer (no files, no transformers needed)."""
    from .byte_tokenizer import ByteTokenizer

    return ByteTokenizer()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
