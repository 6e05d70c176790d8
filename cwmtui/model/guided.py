"""The frame grammar over a BPE tokenizer, through llguidance (the ``constrain`` extra).

A hand-written walk of a BPE vocabulary would have to know which of 128,000 tokens can continue
a partial source line or JSON string; llguidance (the grammar engine behind vLLM's ``guidance``
backend) does that from the Lark grammar :meth:`FrameGrammar.lark` writes, with the model's own
tokenizer. On these CPUs, with CWM's tokenizer, a token's mask costs about 0.15 ms and a frame's
grammar about 2 ms to compile (xgrammar, measured on the same traces: 0.4 ms and 6-8 ms, and it
pulls in triton); the compiled grammars of the frames seen last are kept, since the same names
come back frame after frame.

The frame limit (``--frame-tokens``): a grammar says what a frame may be, not how long, so
beside llguidance's matcher a :class:`FrameCloser` follows the frame through the bundled
tokenizer's byte automaton (:mod:`cwmtui.model.byte_constraint`; each token's bytes, the
special tokens as themselves) and knows how few tokens can still close it. Near the limit it
keeps to the tokens after which the frame can still close in time, as the byte automaton does
for the bundled model: a runaway value is cut short as a wrong value, not left as a format
error. The tokens left are counted from above: JSON's punctuation a byte a token, a source line
as many tokens as its tokenization takes (a BPE vocabulary holds every byte, so that much always
fits); so only a frame that would have closed within that excess of the limit can be steered
(on CRUXEval's 14,148 true frames with CWM's tokenizer the excess is 0 tokens for 66% of
frames, at most 5 for 96%, at most 10 for 99.7%, and 13 at most). Following costs about 9 µs a token beside
llguidance's 117 µs; a mask within the last tokens about 3.5 ms (CWM's vocabulary), beside
0.4 ms (``bench/frame_limit_bpe.py``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..extras import require
from ..trace import tokens
from .backend import ModelError
from .byte_constraint import _PRINTABLE, ARG, DONE, KEY_FREE, START, VALUE, ByteGrammar, FrameAutomaton, nodes
from .frame_grammar import FrameConstraint, FrameGrammar

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

        size = len(hf_tokenizer)
        self._start(llguidance.hf.from_tokenizer(hf_tokenizer, n_vocab=size, eos_token=special_ids[tokens.END_OF_TEXT]),
                    size, special_ids)

    @classmethod
    def of_lltokenizer(cls, lltokenizer, vocab: int, special_ids: dict[str, int]) -> "GuidedGrammars":
        """Over a tokenizer llguidance already has (tiktoken's, as vLLM builds it for CWM)."""
        require("llguidance", "constrain", WHAT, ModelError)
        grammars = cls.__new__(cls)
        grammars._start(lltokenizer, vocab, special_ids)
        return grammars

    def _start(self, lltokenizer, vocab: int, special_ids: dict[str, int]) -> None:
        import llguidance

        self._llguidance = llguidance
        self.vocab = vocab
        self.tokenizer = lltokenizer
        self.special_ids = special_ids
        self._kept: OrderedDict[str, Any] = OrderedDict()  # llguidance.LLMatcher by grammar text
        self._vocabulary: Vocabulary | None = None  # the bytes of every token (for the frame limit)
        self._costs: OrderedDict[FrameGrammar, TokenCosts] = OrderedDict()

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
        closer = FrameCloser(self._token_costs(constraint.grammar), self.vocabulary, constraint) if constraint.close_within else None
        return GuidedFilter(matcher.deep_copy(), self.vocab, closer)

    @property
    def vocabulary(self) -> "Vocabulary":
        if self._vocabulary is None:
            self._vocabulary = Vocabulary(self.tokenizer, self.vocab, self.special_ids)
        return self._vocabulary

    def _token_costs(self, grammar: FrameGrammar) -> "TokenCosts":
        costs = self._costs.get(grammar)
        if costs is None:
            costs = self._costs[grammar] = TokenCosts(grammar, self.special_ids, self.vocabulary)
            if len(self._costs) > _KEPT:
                self._costs.popitem(last=False)
        else:
            self._costs.move_to_end(grammar)
        return costs


class GuidedFilter:
    """One generation's mask: :meth:`allowed` the ids, :meth:`take` the one written.
    ``closer``: what keeps the frame within the call's room (None: the room is the budget's)."""

    def __init__(self, matcher, vocab: int, closer: "FrameCloser | None" = None) -> None:
        self._matcher = matcher
        self._vocab = vocab
        self.closer = closer
        self.last: np.ndarray | None = None

    def allowed(self, room: int | None = None) -> np.ndarray:
        bits = np.unpackbits(np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8), bitorder="little")
        ids = np.flatnonzero(bits[: self._vocab]).astype(np.int64)
        if room is not None and self.closer is not None:
            ids = self.closer.fitting(ids, room)
        self.last = ids
        return ids

    def take(self, token: int) -> bool:
        last = self.last
        if last is not None:
            at = int(np.searchsorted(last, token))
            if at >= len(last) or int(last[at]) != token:
                return False
        self.last = None
        if not self._matcher.consume_token(token):
            return False
        if self.closer is not None:
            self.closer.take(token)
        return True


class Vocabulary:
    """What the frame limit needs of a BPE vocabulary: each token's bytes, which are special,
    which hold only bytes a JSON string may hold as they are (printable ASCII, no quote or
    backslash), and a tokenizer for counting."""

    def __init__(self, lltokenizer, vocab: int, special_ids: dict[str, int]) -> None:
        self.size = vocab
        self.special = frozenset(special_ids.values())
        self.bytes = [b"" if i in self.special else lltokenizer.decode_bytes([i]) for i in range(vocab)]
        printable = frozenset(_PRINTABLE)
        self.plain = np.array([bool(data) and i not in self.special and all(b in printable for b in data)
                               for i, data in enumerate(self.bytes)], dtype=bool)
        # a token with a byte outside printable ASCII: never in a JSON string as json.dumps writes it
        self.foreign = np.array([i not in self.special and any(b < 0x20 or b > 0x7E for b in data)
                                 for i, data in enumerate(self.bytes)], dtype=bool)
        self.tokenize = lltokenizer.tokenize_bytes

    def steps(self, token: int) -> list[int]:
        """``token`` as the byte automaton's ids: a special token as itself, any other as its
        bytes (each past the vocabulary: byte ``b`` is ``size + b``)."""
        if token in self.special:
            return [token]
        size = self.size
        return [size + b for b in self.bytes[token]] if 0 <= token < size else [-1]


class TokenCosts(ByteGrammar):
    """The byte automaton's grammar over a BPE vocabulary: bytes are ids past the vocabulary,
    and how few tokens a source line still takes is counted in tokens (its tokenization: the
    tokens after the point reached, and the bytes of the token it is inside), so ``rest()`` is
    an upper bound on the tokens that close the frame."""

    def __init__(self, grammar: FrameGrammar, special_ids: dict[str, int], vocabulary: Vocabulary) -> None:
        super().__init__(grammar, special_ids, vocabulary.size)
        longest = 0
        for node in nodes(self.lines):
            node.rest = 1 << 20
        for line in grammar.lines:
            data = line.encode("utf-8")
            ends = []  # where each of the line's tokens ends, in bytes
            at = 0
            for token in vocabulary.tokenize(data):
                at += len(vocabulary.bytes[token])
                ends.append(at)
            if at != len(data):  # (a tokenizer that adds or drops bytes: the line at a byte a token)
                ends = list(range(1, len(data) + 1))
            node, k = self.lines, 0
            for depth in range(len(data) + 1):
                while k < len(ends) and ends[k] <= depth:
                    k += 1
                inside = (ends[k] - depth) if k < len(ends) and depth > (ends[k - 1] if k else 0) else 0
                cost = (len(ends) - k - (1 if inside else 0)) + inside
                node.rest = min(node.rest, cost)
                if depth < len(data):
                    node = node.children[data[depth]]
            longest = max(longest, len(ends))
        self.slack = self.slack_for(longest)


class FrameCloser:
    """Follows one generation through the byte automaton and, near the room's end, keeps to
    the tokens after which the frame can still close in time (see the module docstring)."""

    def __init__(self, grammar: TokenCosts, vocabulary: Vocabulary, constraint: FrameConstraint) -> None:
        self.grammar = grammar
        self.vocabulary = vocabulary
        self.automaton: FrameAutomaton | None = FrameAutomaton(grammar, constraint)

    def take(self, token: int) -> None:
        """The model wrote ``token``. Bytes the byte automaton would not write (llguidance's
        grammar is a little wider) end the following: the frame is then llguidance's alone."""
        automaton = self.automaton
        if automaton is not None and not self._advance(automaton, token):
            self.automaton = None

    def _advance(self, automaton: FrameAutomaton, token: int) -> bool:
        for step in self.vocabulary.steps(token):
            allowed = automaton._allowed()
            at = int(np.searchsorted(allowed, step))
            if at >= len(allowed) or int(allowed[at]) != step:
                return False
            automaton.advance(step)
        return True

    def rest_after(self, token: int) -> int | None:
        """The fewest tokens that close the frame after ``token`` (None: the automaton would
        not write it, or the frame is no longer followed)."""
        if self.automaton is None:
            return None
        other = self.automaton.copy()
        return other.rest() if self._advance(other, token) else None

    def fitting(self, ids: np.ndarray, room: int) -> np.ndarray:
        """Of llguidance's ``ids``, those after which the frame can close within ``room`` - 1
        tokens; if none can, those that close it soonest."""
        automaton = self.automaton
        if automaton is None or automaton.mode in (START, DONE) or not len(ids):
            return ids
        rest = automaton.rest()
        if room > rest + self.grammar.slack:
            return ids
        budget = room - 1
        vocabulary = self.vocabulary
        keep = np.zeros(len(ids), dtype=bool)
        if automaton.mode in (VALUE, ARG, KEY_FREE) and not automaton.escape:
            # a run of plain bytes leaves the way out as it was (one more where a value of
            # dots may not close yet): no need to try each of the many thousand
            plain = vocabulary.plain[ids]
            dots = automaton.mode == VALUE and 0 <= automaton.dots <= 2 and not automaton._may_elide()
            if (rest + 1 if dots else rest) <= budget:  # (a dot after ".." may keep the value open one byte more)
                keep |= plain
            tried = np.flatnonzero(~plain & ~vocabulary.foreign[ids])  # (the automaton follows no other)
        else:
            tried = np.arange(len(ids))
        rests: dict[int, int] = {}  # position in ids: the fewest tokens that close the frame after it
        for at in tried.tolist():
            after = self.rest_after(int(ids[at]))
            if after is not None:
                rests[at] = after
                keep[at] = after <= budget
        if keep.any():
            return ids[keep]
        if rests:  # it cannot close in time: as soon as it can
            soonest = min(rests.values())
            return ids[sorted(at for at, after in rests.items() if after == soonest)]
        return ids
