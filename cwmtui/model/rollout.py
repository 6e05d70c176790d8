"""A rollout: the model's trace of one program, built frame by frame.

The prompt is ``BOS, <|trace_context_start|>, source (with the START_OF_TRACE marker),
<|frame_sep|>``, then the entry CALL frame forced from the interpreter's truth (real
arguments, as Meta's CRUXEval harness seeds it). Each step asks the backend for one frame and
parses what came back. The rollout keeps the token ids of everything so far and hands the whole
list to the backend every time; the backend runs only what it has not seen (its KV cache, or
the server's prefix cache), so a whole rollout costs its tokens once, not once per frame.

Generated ids are turned into segments (runs of ordinary ids decoded to text, CWM special ids
as :class:`Special` pieces) and fed to the :class:`TraceParser`, so a literal special-token
string inside a value or a source line cannot be mistaken for structure. Forced frames are
rendered with the same ``".."`` rule the interpreter's traces use, encoded segment by segment,
and fed to the parser too, so its scope stack and ``".."`` base stay in step.

A *constrained* rollout (``RolloutOptions.constrain``; the bundled model's default) asks the
backend to decode every generated piece under the program's frame grammar
(:mod:`cwmtui.model.frame_grammar`): an event, JSON locals of the program's names, one of its own
source lines, a JSON value, and the end of text only once the entry function has returned. What
it writes then always parses; where it diverges from the truth is about code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from ..interpreter.program import Program
from ..trace import tokens
from ..trace.frame import Event, Frame
from ..trace.parser import TraceParser
from ..trace.render import Compressor, Special, frame_segments, prompt_segments
from ..trace.rollout_status import RolloutStatus
from .backend import REPLAY_OVERRIDE, Backend, ModelError, is_cancelled
from .frame_grammar import FrameConstraint, FrameGrammar


@dataclass
class RolloutOptions:
    token_budget: int = 8192  # tokens of the whole trace (generated and forced frames)
    frame_tokens: int = 512  # tokens one frame may take
    max_frames: int = 2000
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    #: decode under the program's frame grammar; None: the model's default (the bundled model
    #: constrained, any other free), which the first rollout of a live model writes back here
    #: so that sessions and results record which it was
    constrain: bool | None = None


_NOT_IN_FRAMES = (tokens.BEGIN_OF_TEXT, tokens.TRACE_CONTEXT_START)


class Rollout:
    """The model's trace of ``program``; see the module docstring."""

    def __init__(
        self,
        backend: Backend,
        program: Program,
        entry_frame: Frame | None,
        options: RolloutOptions | None = None,
    ) -> None:
        options = options or RolloutOptions()
        self.backend = backend
        self.program = program
        self.frames: list[Frame] = []
        self.status = RolloutStatus.RUNNING
        self.message = ""  # why the rollout stopped, for people
        self.partial = ""  # text of a frame the budget cut off (not a frame)
        self.tokens_used = 0  # tokens in the trace so far (frames only)
        self.tokens_processed = 0  # token positions the model ran, all calls together
        self.calls = 0  # backend.complete() calls
        special = backend.special_ids
        self._frame_sep = special[tokens.FRAME_SEP]
        self._action_sep = special[tokens.ACTION_SEP]
        self._arg_sep = special[tokens.ARG_SEP]
        self._events = {special[event.token]: event for event in Event}
        self._prompt_segments = prompt_segments(program.source)
        self._ids: list[int] = backend.encode_segments(self._prompt_segments)
        self.prompt_tokens = len(self._ids)
        self._ends: list[int] = []  # len(self._ids) after each frame
        self._segments: list[list[str]] = []  # each frame's segments as the parser saw them
        self._bases: list[dict | None] = []  # the ".." base after each frame
        self._cut: list[bool] = []  # the frame was cut off (the parser saw it unterminated)
        self._compressor = Compressor()
        self._parser = self._new_parser()
        self._ended_by_eos = False
        self._context_bound = False  # the model's context, not the token budget, limits this frame
        self._depths: list[int] = []  # scopes open after each frame (calls less returns)
        if options.constrain is None and backend.can_generate:
            options.constrain = bool(backend.constrained_by_default)  # the model's default, recorded
        #: whether the model decodes under the frame grammar (never for a replay)
        self.constrained = bool(options.constrain) and backend.can_generate
        self._grammar: FrameGrammar | None = None
        if self.constrained:
            problem = backend.constraint_problem()
            if problem is not None:
                raise ModelError(problem)
            self._grammar = FrameGrammar.of_source(program.source)
        if backend.can_generate:
            self.options = options
            if entry_frame is not None:
                self._force(entry_frame, "forced")
        else:
            # A replay reproduces what was recorded: the limits of a live run do not cut it.
            self.options = replace(options, token_budget=1 << 62, frame_tokens=1 << 62, max_frames=1 << 62)
            for frame in getattr(backend, "seed_frames", ()):
                self._force(frame, "forced")

    # -- reading -----------------------------------------------------------------------------
    @property
    def ids(self) -> list[int]:
        """The token ids of the prompt and every frame (a copy)."""
        return list(self._ids)

    def text(self) -> str:
        """The trace in CWM token text (frames, and ``<|end_of_text|>`` when the model ended)."""
        text = "".join("".join(segments) for segments in self._segments)
        return text + tokens.END_OF_TEXT if self._ended_by_eos else text

    def document(self) -> str:
        """The prompt followed by :meth:`text`."""
        return "".join(self._prompt_segments) + self.text()

    @property
    def done(self) -> bool:
        return self.status not in (RolloutStatus.RUNNING, RolloutStatus.CANCELLED)

    # -- building ----------------------------------------------------------------------------
    def step(self, force_action: str | None = None, force_event: Event | str | None = None, cancel=None) -> Frame | None:
        """One frame. ``force_action``: the model writes the event and locals, the given source
        line is spliced in after ``<|action_sep|>`` (a return or exception frame then gets
        ``<|arg_sep|>`` and the model writes the value). ``force_event``: the event token is
        spliced in first. Returns the new frame, or None when no frame was added (the model
        ended, the budget ran out, cancelled)."""
        if (force_action is not None or force_event is not None) and not self.backend.can_generate:
            raise ModelError(REPLAY_OVERRIDE)
        if self.status is RolloutStatus.CANCELLED:
            self._resume()
        if self.status is not RolloutStatus.RUNNING:
            return None
        options = self.options
        if len(self.frames) >= options.max_frames:
            self._stop(RolloutStatus.MAX_FRAMES, f"too long: the model wrote {options.max_frames} frames without ending")
            return None
        remaining = options.token_budget - self.tokens_used
        context = self.backend.context_length
        self._context_bound = context is not None and context - len(self._ids) < remaining
        if context is not None and self._context_bound:
            # The model cannot see past its context: that is where its budget really ends.
            remaining = context - len(self._ids)
            if remaining <= 0:
                self._stop(RolloutStatus.CONTEXT, self._context_full())
                return None
        if remaining <= 0:
            self._stop(RolloutStatus.BUDGET, f"budget exhausted: {self.tokens_used} of {options.token_budget} tokens used")
            return None
        limit = min(options.frame_tokens, remaining)
        by_budget = remaining <= options.frame_tokens
        ids: list[int] = []
        start = self._constraint("frame", None, by_budget)
        if force_event is not None:
            ids.append(self.backend.special_ids[Event(force_event).token])
            start = self._constraint("event", Event(force_event), by_budget)
        if force_action is None:
            done = self._generate(ids, [self._frame_sep], limit, cancel, start)
        else:
            done = self._generate(ids, [self._action_sep, self._frame_sep], limit, cancel, start)
            if done == "stop" and ids[-1] == self._action_sep:
                ids.extend(self.backend.encode(force_action))
                event = self._events.get(ids[0])
                if event is not None and event.has_arg:
                    ids.append(self._arg_sep)
                    value = self._constraint("value", event, by_budget)
                    done = self._generate(ids, [self._frame_sep], limit, cancel, value)
                else:
                    ids.append(self._frame_sep)
        frame = self._settle(ids, done, by_budget, limit)
        if frame is not None and force_action is not None and not frame.is_error:
            frame.origin = "overridden"  # the line is the user's, the event and state the model's
        return frame

    def _constraint(self, start: str, event: Event | None, by_budget: bool) -> FrameConstraint | None:
        """What the frame grammar allows from ``start`` on, here (None: a free rollout)."""
        if self._grammar is None:
            return None
        depth = self._depths[-1] if self._depths else 0
        events: tuple[Event, ...]
        if not self.frames:  # the model writes the entry's call itself
            events, may_end = (Event.CALL,), False
        elif depth > 0:
            events, may_end = tuple(Event), False
        else:  # the entry returned: the trace ends
            events, may_end = (), True
        base = self._compressor.base
        return FrameConstraint(self._grammar, start, event, events, may_end,
                               frozenset(base) if base is not None else None, close_within=not by_budget)

    def _generate(self, ids: list[int], stops: list[int], limit: int, cancel, constraint=None) -> str:
        """Let the model continue the frame ``ids``; extends ``ids``; returns how it stopped."""
        room = limit - len(ids)
        if room <= 0:
            return "length"
        options = self.options
        base = len(self._ids)
        self._ids.extend(ids)  # lent to the backend for the call (see Backend.complete)
        extra = {"constraint": constraint} if constraint is not None else {}
        try:
            completion = self.backend.complete(
                self._ids, stops, room, options.temperature, options.top_p, options.seed, cancel, **extra
            )
        finally:
            del self._ids[base:]
        self.calls += 1
        self.tokens_processed += completion.work
        ids.extend(completion.ids)
        return completion.stopped

    def _settle(self, ids: list[int], done: str, by_budget: bool, limit: int) -> Frame | None:
        """Turn a finished (or cut) generation into a frame and a status."""
        if done == "cancelled":
            self._stop(RolloutStatus.CANCELLED, "cancelled")
            return None
        if done == "stop" and ids and ids[-1] == self._frame_sep:
            return self._take(ids, ids, None)
        if done == "eos":
            body = ids[:-1]
            self._ended_by_eos = True
            frame = self._take(body, body + [self._frame_sep], "frame cut off by end of text") if body else None
            self._stop(RolloutStatus.ENDED, "the model ended the trace")
            return frame
        if done == "end":  # a replay ran out of recorded tokens
            self.partial = "".join(self._clean(self.backend.segments(ids)))
            if not ids and not self.frames:
                self._stop(RolloutStatus.BUDGET, "budget exhausted: the recorded generation is empty (the model wrote nothing)")
            else:
                self._stop(RolloutStatus.BUDGET, "budget exhausted: the recorded generation stops here")
            return None
        if by_budget:
            self.partial = "".join(self._clean(self.backend.segments(ids)))
            if self._context_bound:
                self._stop(RolloutStatus.CONTEXT, self._context_full())
            else:
                used = self.tokens_used + len(ids)
                self._stop(RolloutStatus.BUDGET, f"budget exhausted: {used} of {self.options.token_budget} tokens used")
            return None
        frame = self._take(ids, ids + [self._frame_sep], f"format error: the frame took more than {limit} tokens")
        self._stop(RolloutStatus.FRAME_LIMIT, f"a frame took more than {limit} tokens")
        return frame

    def _take(self, written: list[int], stored: list[int], cut: str | None) -> Frame:
        """Parse the model's ids ``written`` into a frame and append it. ``cut``: the frame has
        no ``<|frame_sep|>`` (it was cut off), this is the error to show."""
        segments = self._clean(self.backend.segments(written))
        if cut is None:
            parsed = self._parser.feed(segments)
            frame = parsed[-1]
        else:
            self._parser.feed(segments)
            parsed = self._parser.finish()
            frame = parsed[-1] if parsed else Frame(None, "", error=cut, raw="")
            frame.error = cut
            segments = segments + [Special(tokens.FRAME_SEP)]
        frame.tokens = len(written)
        frame.origin = "generated"
        if frame.error is not None and frame.locals is None:
            self._compressor.advance(None, None)
        else:
            self._compressor.advance(frame.event, frame.locals)
        self._append(frame, stored, segments, cut is not None)
        return frame

    @staticmethod
    def _clean(segments: list[str]) -> list[str]:
        """A <|begin_of_text|> or <|trace_context_start|> inside a frame is an error, not the
        start of a new prompt: keep it as text so the frame becomes a format error."""
        return [str(s) if isinstance(s, Special) and s in _NOT_IN_FRAMES else s for s in segments]

    def _append(self, frame: Frame, ids: list[int], segments: list[str], cut: bool = False) -> None:
        self._ids.extend(ids)
        self._cut.append(cut)
        self._ends.append(len(self._ids))
        self._segments.append(segments)
        self._bases.append(self._compressor.base)
        event = frame.event if frame.error is None else None
        depth = self._depths[-1] if self._depths else 0
        self._depths.append(depth + (1 if event is Event.CALL else -1 if event is Event.RETURN else 0))
        self.frames.append(frame)
        self.tokens_used += frame.tokens

    def force(self, frame: Frame, origin: str = "forced") -> None:
        """Append ``frame`` as given (the interpreter's, or one the user edited); the model
        continues from it. A rollout that had stopped continues."""
        if not self.backend.can_generate:
            raise ModelError(REPLAY_OVERRIDE)
        self._force(frame, origin)
        self._resume()

    def _force(self, frame: Frame, origin: str) -> None:
        segments = frame_segments(frame, self._compressor)
        ids = self.backend.encode_segments(segments)
        self._parser.feed(segments)
        self._append(replace(frame, tokens=len(ids), origin=origin), ids, segments)

    def rewind(self, k: int) -> None:
        """Keep ``frames[:k]``; the next step continues after frame ``k - 1``."""
        if not 0 <= k <= len(self.frames):
            raise ValueError(f"rewind({k}): the rollout has {len(self.frames)} frames")
        del self.frames[k:], self._segments[k:], self._ends[k:], self._bases[k:], self._cut[k:], self._depths[k:]
        del self._ids[self._ends[-1] if k else self.prompt_tokens :]
        self._compressor = Compressor()
        self._compressor.base = self._bases[-1] if k else None
        self._parser = self._new_parser()
        for segments, cut in zip(self._segments, self._cut):
            if cut:  # it was parsed unterminated: the same again
                self._parser.feed(segments[:-1])
                self._parser.finish()
            else:
                self._parser.feed(segments)
        self.tokens_used = sum(frame.tokens for frame in self.frames)
        self._resume()

    def run(self, until=None, on_frame: Callable[[Frame], None] | None = None, cancel=None) -> RolloutStatus:
        """Step until the rollout stops, or ``until``: a frame count, or a predicate on each new
        frame. ``on_frame`` sees every new frame; ``cancel`` (an Event or a callable) stops it,
        also in the middle of a frame. Returns the status (RUNNING when ``until`` was reached)."""
        if self.status is RolloutStatus.CANCELLED:
            self._resume()
        while self.status is RolloutStatus.RUNNING:
            if isinstance(until, int) and len(self.frames) >= until:
                break
            if is_cancelled(cancel):
                self._stop(RolloutStatus.CANCELLED, "cancelled")
                break
            frame = self.step(cancel=cancel)
            if frame is not None:
                if on_frame is not None:
                    on_frame(frame)
                if callable(until) and until(frame):
                    break
        return self.status

    # -- state -------------------------------------------------------------------------------
    def _new_parser(self) -> TraceParser:
        parser = TraceParser(self.program.source)
        parser.feed(self._prompt_segments)
        return parser

    def _context_full(self) -> str:
        """Why a rollout stopped at the model's context (the screen reads the number from it)."""
        return f"context full: the model's context of {self.backend.context_length} tokens is full"

    def _stop(self, status: RolloutStatus, message: str) -> None:
        self.status = status
        self.message = message

    def _resume(self) -> None:
        self.status = RolloutStatus.RUNNING
        self.message = ""
        self.partial = ""
        self._ended_by_eos = False
