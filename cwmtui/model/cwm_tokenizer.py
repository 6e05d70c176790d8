"""Meta's own tokenizer file: ``<checkpoint>/tokenizer.model`` (tiktoken BPE ranks), as fgserve
and cwmdbg users have it, and the same Llama 3 BPE with no checkpoint at all (``cwm``: the
file Meta's ``llama-models`` package ships).

CWM's tokenizer is the Llama 3 BPE (128,000 regular tokens, the Llama 3 pre-tokenizer pattern)
with 256 reserved special ids from 128,000 on; the trace tokens are re-used reserved ids (spec
§1.1). Text is encoded *ordinarily*: a special token's string inside a program stays text.
tiktoken does the BPE; this module only reads the ranks file and names the special ids.
"""

from __future__ import annotations

import base64
import os
from typing import Sequence

from ..extras import require
from ..trace import tokens
from .backend import ModelError, check_special_ids, check_text_stays_text

#: the Llama 3 pre-tokenizer split (spec §1.1)
PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
FIRST_SPECIAL = 128_000
SPECIAL_COUNT = 256
#: the named special ids of CWM's tokenizer (spec §1.1); the rest are reserved
NAMED = {
    **tokens.CWM_IDS,
    "<|start_header_id|>": 128006,
    "<|end_header_id|>": 128007,
    "<|eom_id|>": 128008,
    "<|eot_id|>": 128009,
    "<|reasoning_thinking_start|>": 128120,
    "<|reasoning_thinking_end|>": 128121,
}
#: ``--tokenizer cwm``: the Llama 3 BPE file inside the llama-models package
BUILTIN = "cwm"


def special_tokens() -> dict[str, int]:
    """Every special id by its string: the named ones, and ``<|reserved_special_token_N|>``
    for the others (N = id - 128,000)."""
    named_ids = set(NAMED.values())
    table = dict(NAMED)
    for token_id in range(FIRST_SPECIAL, FIRST_SPECIAL + SPECIAL_COUNT):
        if token_id not in named_ids:
            table[f"<|reserved_special_token_{token_id - FIRST_SPECIAL}|>"] = token_id
    return table


def read_ranks(path: str) -> dict[bytes, int]:
    """A tiktoken ranks file: one ``BASE64 RANK`` line per token; ModelError if it is not one."""
    ranks: dict[bytes, int] = {}
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, 1):  # noqa: B007 (the error below names the line)
                if not line.strip():
                    continue
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError:  # also binascii.Error
        raise ModelError(
            f"{path}:{number}: not a tiktoken BPE file (lines of 'BASE64 RANK'; Meta's tokenizer.model is one)"
        ) from None
    if not ranks:
        raise ModelError(f"{path}: empty, not a tiktoken BPE file")
    if len(ranks) != FIRST_SPECIAL or max(ranks.values()) != FIRST_SPECIAL - 1:
        # CWM's special ids start right after the 128,000 ranks of the Llama 3 BPE: any other
        # file would put them elsewhere
        raise ModelError(f"{path}: {len(ranks):,} BPE ranks, not the 128,000 of CWM's (Llama 3) tokenizer")
    return ranks


def builtin_path() -> str:
    """The Llama 3 BPE file of the llama-models package (the ``cwm-tokenizer`` extra)."""
    require("llama_models", "cwm-tokenizer", "--tokenizer cwm (CWM's tokenizer without a checkpoint)", ModelError)
    from importlib import resources

    path = resources.files("llama_models") / "llama3" / "tokenizer.model"
    if not path.is_file():
        raise ModelError("the installed llama-models has no llama3/tokenizer.model: pip install 'llama-models>=0.3'")
    return str(path)


class CWMTokenizer:
    """CWM's tokenizer from a tiktoken ranks file: ``encode`` never produces a special id,
    ``decode`` writes the special ids as their strings and leaves out ids no token has."""

    def __init__(self, path: str) -> None:
        self.path = path if path != BUILTIN else builtin_path()
        what = "--tokenizer cwm" if path == BUILTIN else "Meta's tokenizer.model"
        tiktoken = require("tiktoken", "cwm-tokenizer", what, ModelError)
        self.where = path
        ranks = read_ranks(self.path)
        self._special = special_tokens()
        self._encoding = tiktoken.Encoding(
            name=f"cwm:{os.path.basename(self.path)}",
            pat_str=PATTERN,
            mergeable_ranks=ranks,
            special_tokens=self._special,
        )
        self._by_id = {i: t.encode("utf-8") for t, i in self._special.items()}
        self.special_ids = check_special_ids({t: self._special.get(t) for t in tokens.SPECIAL_TOKENS}, self.where)
        check_text_stays_text(self, self.where)

    def find_special(self, token: str) -> int | None:
        return self._special.get(token)

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        out = bytearray()
        for token_id in ids:
            special = self._by_id.get(token_id)
            if special is not None:
                out += special
                continue
            try:
                out += self._encoding.decode_single_token_bytes(token_id)
            except (KeyError, OverflowError, ValueError):
                pass  # an id no token has (a server's out-of-range id) decodes to nothing
        return out.decode("utf-8", errors="replace")

    @property
    def vocab_size(self) -> int:
        return FIRST_SPECIAL + SPECIAL_COUNT
