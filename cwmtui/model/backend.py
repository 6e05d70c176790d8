"""The backend protocol every world model speaks (opening one: :mod:`cwmtui.model.opening`).

A backend knows the ids of the CWM special tokens, encodes text without special-token parsing,
decodes ids, and completes a prompt given as token ids until a stop id. Prefix reuse is the
backend's job: a prompt that extends the previous one only costs its new tokens.

Nothing here imports torch or transformers; the backends that need them import them when they
are opened.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..trace import tokens
from ..trace.render import Special

#: ``progress(stage, fraction)``: what a backend is doing while it opens (fraction 0..1 or None)
Progress = Callable[[str, "float | None"], None]


class ModelError(Exception):
    """A model or server problem, explained to the user in one line."""


#: what step/force on a replay says
REPLAY_OVERRIDE = (
    "this is a replay of recorded generations: overrides need a live model (--model or --server)"
)
#: what --constrain with fgserve says
FGSERVE_NO_GRAMMAR = (
    "fgserve has no structured output, so it cannot decode under the frame grammar: "
    "drop --constrain (or use a vLLM --server, a --model directory or the bundled model)"
)


@dataclass
class Completion:
    """What one ``complete()`` call produced.

    ``ids``: the generated ids, ending with the stop id (or end of text) when one was hit.
    ``processed``: prompt tokens the model had to run for this call (not served from a cache).
    ``fed_back``: generated tokens that were run through the model to generate the next one.
    ``stopped``: ``"stop"`` (a stop id), ``"eos"`` (end of text), ``"length"`` (max_new_tokens),
    ``"cancelled"``, or ``"end"`` (a replay has no more recorded tokens).
    """

    ids: list[int]
    processed: int
    stopped: str
    fed_back: int = 0

    @property
    def work(self) -> int:
        """Token positions the model ran for this call."""
        return self.processed + self.fed_back


def nothing_to_complete(max_new_tokens: int, cancel) -> Completion | None:
    """The completion a backend gives without asking its model (no room left, or cancelled
    before it began), or None: the call must run."""
    if max_new_tokens <= 0:
        return Completion([], 0, "length")
    if is_cancelled(cancel):
        return Completion([], 0, "cancelled")
    return None


def is_cancelled(cancel) -> bool:
    """``cancel`` may be None, a ``threading.Event``-like object, or a callable."""
    if cancel is None:
        return False
    is_set = getattr(cancel, "is_set", None)
    if is_set is not None:
        return bool(is_set())
    return bool(cancel())


class Backend:
    """Base class of the backends: the protocol plus the id <-> segment plumbing they share."""

    name: str = ""
    description: str = ""
    special_ids: dict[str, int]
    can_generate: bool = True
    context_length: int | None = None  # positions the model can attend over, when known
    warning: str | None = None  # one line the user should see on opening (e.g. layers offloaded to CPU)
    #: what splits values in the token lens when it is not the model's own tokenizer
    #: (``--lens-tokenizer cwm``: CWM's BPE beside the byte-level bundled model or a replay)
    lens_tokenizer = None
    #: a rollout whose options leave the constraint unset decodes under the frame grammar (the
    #: bundled model: its failures are then about code, not about JSON)
    constrained_by_default: bool = False

    # -- the protocol ----------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def complete(
        self,
        prompt_ids: Sequence[int],
        stop_ids: Iterable[int],
        max_new_tokens: int,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        cancel=None,
        constraint=None,
    ) -> Completion:
        """Continue ``prompt_ids`` until a stop id, end of text or ``max_new_tokens``.

        ``prompt_ids`` is lent for the call: the rollout passes its own growing list (copying
        it every frame would make a long trace quadratic), so a backend copies what it keeps.
        ``constraint``: a :class:`~cwmtui.model.frame_grammar.FrameConstraint`, the frame
        grammar the tokens must follow (only passed where :meth:`constraint_problem` is None)."""
        raise NotImplementedError

    def constraint_problem(self) -> str | None:
        """Why this backend cannot decode under the frame grammar (``--constrain``), in one
        line, or None when it can."""
        return f"{self.name or 'this model'} cannot decode under the frame grammar: drop --constrain"

    def token_pieces(self, text: str) -> list[str]:
        """How the lens tokenizer (by default the model's own) splits ``text``: one string per
        token (bytes of a character that the tokenizer split are kept together, so the pieces
        always join back to ``text``)."""
        return split_pieces(self.lens_tokenizer or self, text)

    @property
    def lens_label(self) -> str:
        """Whose tokens the token lens shows, for its title."""
        if self.lens_tokenizer is not None:
            return f"{getattr(self.lens_tokenizer, 'where', 'the lens tokenizer')} (--lens-tokenizer)"
        return "the model's tokenizer"

    def close(self) -> None:
        pass

    def interrupt(self) -> None:
        """From another thread: make the call in progress return now (cancelled), e.g. a network
        read that would block quitting. A local model's calls check their cancel between tokens."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- shared plumbing -------------------------------------------------------------------
    @property
    def eos_id(self) -> int:
        return self.special_ids[tokens.END_OF_TEXT]

    def encode_segments(self, segments: Iterable[str]) -> list[int]:
        """Ids of rendered segments: text pieces encoded one by one, special ids spliced in."""
        ids: list[int] = []
        special = self.special_ids
        for segment in segments:
            if isinstance(segment, Special):
                ids.append(special[str(segment)])
            elif segment:
                ids.extend(self.encode(segment))
        return ids

    def segments(self, ids: Sequence[int]) -> list[str]:
        """Generated ids as segments: runs of ordinary ids decoded to text, the CWM special ids
        as :class:`Special` pieces. A special-token string the model spelled out with ordinary
        tokens stays text, so it cannot be mistaken for structure."""
        by_id = self._specials_by_id()
        out: list[str] = []
        run: list[int] = []
        for token in ids:
            special = by_id.get(token)
            if special is None:
                run.append(token)
                continue
            if run:
                out.append(self.decode(run))
                run = []
            out.append(special)
        if run:
            out.append(self.decode(run))
        return out

    def _specials_by_id(self) -> dict[int, Special]:
        cached = getattr(self, "_special_map", None)
        if cached is None:
            cached = {i: Special(t) for t, i in self.special_ids.items()}
            self._special_map = cached
        return cached


def split_pieces(tokenizer, text: str) -> list[str]:
    """``text`` as ``tokenizer`` (anything with ``encode`` and ``decode``) splits it."""
    pieces: list[str] = []
    pending: list[int] = []
    for token in tokenizer.encode(text):
        pending.append(token)
        piece = tokenizer.decode(pending)
        if piece and not piece.endswith("\ufffd"):
            pieces.append(piece)
            pending = []
    if pending:
        pieces.append(tokenizer.decode(pending))
    return pieces


def check_special_ids(found: dict[str, int | None], where: str) -> dict[str, int]:
    """Every CWM special token must be one id; say which are missing otherwise."""
    missing = [t for t in tokens.SPECIAL_TOKENS if found.get(t) is None]
    if missing:
        raise ModelError(
            f"{where}: the tokenizer has no single token for {', '.join(missing)} "
            "(not a CWM tokenizer)"
        )
    return {t: i for t in tokens.SPECIAL_TOKENS if (i := found[t]) is not None}  # (all of them: checked above)


def check_text_stays_text(tokenizer, where: str) -> None:
    """A special token's *string* in a program must encode as text, never as the special id:
    a source line holding ``"<|frame_sep|>"`` would otherwise end a frame in the prompt."""
    for token in tokens.SPECIAL_TOKENS:
        if tokenizer.special_ids[token] in tokenizer.encode(token):
            raise ModelError(
                f"{where}: the tokenizer turns the text {token!r} into the special token "
                "(it must stay text inside a program): not usable for traces"
            )
