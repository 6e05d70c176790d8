"""The frame grammar over a BPE tokenizer, through llguidance (the ``constrain`` extra).

A hand-written walk of a BPE vocabulary would have to know which of 128,000 tokens can continue
a partial source line or JSON string; llguidance (the grammar engine behind vLLM's ``guidance``
backend) does that from the Lark grammar :meth:`FrameGrammar.lark` writes, with the model's own
tokenizer. On these CPUs, with CWM's tokenizer, a token's mask costs about 0.15 ms and a frame's
grammar about 2 ms to compile (xgrammar, measured on the same traces: 0.4 ms and 6-8 ms, and it
pulls in triton); the compiled grammars of the frames seen last are kept, since the same names
come back frame after frame.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..extras import require
from ..trace import tokens
from .backend import ModelError
from .frame_grammar import FrameConstraint

_KEPT = 64  # compiled grammars kept per tokenizer
WHAT = "--constrain with a --model directory (a BPE tokenizer)"


def guidance_problem(hf_tokenizer) -> str | None:
    """Why llguidance cannot constrain decoding with ``hf_tokenizer``, or None."""
    try:
        import llguidance  # noqa: F401
    except ImportError:
        from ..extras import missing

        return missing("constrain", WHAT, "llguidance")
    if not getattr(hf_tokenizer, "is_fast", False):
        return "--constrain needs a fast (Rust) Hugging Face tokenizer (tokenizer.json) for a --model directory"
    return None


class GuidedGrammars:
    """The frame grammars of one tokenizer, compiled on demand."""

    def __init__(self, hf_tokenizer, special_ids: dict[str, int]) -> None:
        require("llguidance", "constrain", WHAT, ModelError)
        import llguidance.hf

        self._llguidance = llguidance
        size = len(hf_tokenizer)
        self.vocab = size
        self.tokenizer = llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=size, eos_token=special_ids[tokens.END_OF_TEXT])
        self._kept: OrderedDict[str, Any] = OrderedDict()  # llguidance.LLMatcher by grammar text

    def filter(self, constraint: FrameConstraint) -> "GuidedFilter":
        text = constraint.grammar.lark(constraint)
        matcher = self._kept.get(text)
        if matcher is None:
            llguidance = self._llguidance
            matcher = llguidance.LLMatcher(self.tokenizer, llguidance.grammar_from("lark", text))
            if matcher.is_error():
                raise ModelError(f"the frame grammar does not compile for this tokenizer: {matcher.get_error().splitlines()[0]}")
            self._kept[text] = matcher
            if len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        else:
            self._kept.move_to_end(text)
        return GuidedFilter(matcher.deep_copy(), self.vocab)


class GuidedFilter:
    """One generation's mask: :meth:`allowed` the ids, :meth:`take` the one written."""

    def __init__(self, matcher, vocab: int) -> None:
        self._matcher = matcher
        self._vocab = vocab
        self.last: np.ndarray | None = None

    def allowed(self, room: int | None = None) -> np.ndarray:
        bits = np.unpackbits(np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
        self.last = np.flatnonzero(bits[: self._vocab]).astype(np.int64)
        return self.last

    def take(self, token: int) -> bool:
        last = self.last
        if last is not None:
            at = int(np.searchsorted(last, token))
            if at >= len(last) or int(last[at]) != token:
                return False
        self.last = None
        return bool(self._matcher.consume_token(token))
