"""Tokenizers as the backends use them: text in and out without special-token parsing, and the
ids of the CWM special tokens looked up by their strings."""

from __future__ import annotations

import glob
import json
import os
from typing import Sequence

from ..extras import require
from ..trace import tokens
from .backend import ModelError, check_special_ids, check_text_stays_text


class HFTokenizer:
    """A transformers tokenizer: ``encode`` never turns a literal ``<|frame_sep|>`` into the
    special id (``split_special_tokens=True``), ``decode`` keeps every character."""

    def __init__(self, tokenizer, where: str) -> None:
        self.tokenizer = tokenizer
        self.where = where
        self._size = len(tokenizer)  # ids 0..size-1 have a token
        self.special_ids = self._find_special_ids()
        check_text_stays_text(self, where)

    def find_special(self, token: str) -> int | None:
        """The id of a special token's string, when the tokenizer has it as one special token."""
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if not isinstance(token_id, int) or token_id == self.tokenizer.unk_token_id:
            return None
        return token_id

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
        """The text of ``ids``; an id no token has (a server's, out of the vocabulary) decodes to
        nothing rather than failing deep in the tokenizer."""
        size = self._size
        ids = [i for i in ids if type(i) is int and 0 <= i < size]
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def refuse_custom_code(path: str, config_files: Sequence[str]) -> None:
    """A model or tokenizer directory whose config asks transformers to import code from the
    directory (``auto_map``) is refused here, before transformers reads anything: cwmtui never
    runs a model directory's code (and passes ``trust_remote_code=False`` everywhere besides)."""
    for name in config_files:
        try:
            with open(os.path.join(path, name), encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError):
            continue  # absent or unreadable: the loader that needs it says so
        if isinstance(config, dict) and config.get("auto_map"):
            code = sorted(os.path.basename(f) for f in glob.glob(os.path.join(path, "*.py")))
            shipped = f" and ships {', '.join(code[:3])}" if code else ""
            raise ModelError(
                f"{path}: {name} asks to run the directory's own Python code (auto_map){shipped}; "
                "cwmtui never runs code from a model directory: use a model whose architecture "
                "transformers knows, or remove auto_map"
            )


def load_tokenizer(path: str) -> HFTokenizer:
    """A tokenizer from a local directory (offline), or ModelError."""
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file or directory (--tokenizer takes Meta's tokenizer.model, a Hugging Face tokenizer directory, or 'cwm')")
    if not os.path.isdir(path):
        raise ModelError(f"{path}: not a directory (--tokenizer takes a Hugging Face tokenizer directory, Meta's tokenizer.model, or 'cwm')")
    refuse_custom_code(path, ("tokenizer_config.json", "config.json"))
    require("transformers", "hf", "a Hugging Face tokenizer directory", ModelError)
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # transformers raises many kinds here
        raise ModelError(f"{path}: cannot load the tokenizer: {first_line(exc)}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    return HFTokenizer(tokenizer, path)


def load_any_tokenizer(spec: str):
    """``--tokenizer``: ``cwm`` (CWM's own tokenizer from the llama-models package), Meta's
    ``tokenizer.model`` (tiktoken BPE ranks; also a checkpoint directory that holds only that),
    or a Hugging Face tokenizer directory."""
    from .cwm_tokenizer import BUILTIN, CWMTokenizer

    if spec == BUILTIN:
        return CWMTokenizer(BUILTIN)
    path = os.path.expanduser(spec)
    if os.path.isfile(path):
        return CWMTokenizer(path)
    hf_files = ("tokenizer.json", "tokenizer_config.json")
    meta = os.path.join(path, "tokenizer.model")
    if os.path.isdir(path) and os.path.isfile(meta) and not any(os.path.isfile(os.path.join(path, f)) for f in hf_files):
        return CWMTokenizer(meta)
    return load_tokenizer(path)


def byte_tokenizer():
    """The bundled model's byte-level tokenizer (no files, no transformers needed)."""
    from .byte_tokenizer import ByteTokenizer

    return ByteTokenizer()


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
