"""Measuring a byte-level CWM on generated programs, directly over byte ids.

With greedy decoding two exact-match figures need only one forward pass per document:

- **teacher-forced next-frame exact match**: given the true prefix, greedy decoding writes a
  frame exactly iff the argmax at every position of that frame is the true token;
- **free-running whole-trace exact match**: a greedy rollout reproduces the whole trace iff it
  never leaves the true sequence, i.e. iff the argmax is right at every position of every frame
  and of the final ``<|end_of_text|>``.

So both come from the argmax of one teacher-forced pass. That is byte for byte: a model that
writes a value in full where the trace writes ``".."`` (unchanged) is wrong by bytes but right by
the state it means, and ``cwmtui eval`` and the debugger compare states after resolving ``".."``.
Given a backend, :func:`measure` also scores that way (the figures the acceptance criteria
name), looking again only at what the byte pass found wrong: a frame wrong by bytes is generated
from the true prefix by the rollout engine and its state compared; a trace wrong by bytes is
rolled out greedily until its first frame that differs from the truth. (The byte pass runs
transformers' forward; the second look, the backend ``cwmtui`` decodes with. Where the two
would break a near-tie differently, only what the byte pass found wrong is looked at again.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..interpreter import Interpreter, Limits
from ..suites import SuiteProgram
from ..trace import Status, Trace
from .documents import Document, document

CONTEXT = 4096


@dataclass
class Score:
    program: SuiteProgram
    frames: int = 0
    frames_exact: int = 0
    trace_exact: bool = False
    fits: bool = True
    tokens: int = 0
    token_correct: int = 0
    first_wrong_frame: int | None = None
    frames_scored: int = 0  # frames inside the context
    wrong_frames: list[int] = field(default_factory=list)  # frames wrong by bytes (0: the first after the entry)
    trace_exact_bytes: bool = False

    @property
    def frames_exact_bytes(self) -> int:
        """Frames in the context the byte pass found right (``frames_exact`` before a rescore)."""
        return self.frames_scored - len(self.wrong_frames)


@dataclass
class Table:
    scores: list[Score] = field(default_factory=list)

    def add(self, score: Score) -> None:
        self.scores.append(score)

    def share(self, hits: str, of: str | None = None) -> float:
        """The sum of the scores' ``hits`` over the sum of their ``of`` (None: over the programs)."""
        n = sum(getattr(s, of) for s in self.scores) if of else len(self.scores)
        return sum(getattr(s, hits) for s in self.scores) / n if n else 0.0

    @property
    def frame_exact(self) -> float:
        return self.share("frames_exact", "frames_scored")

    @property
    def trace_exact(self) -> float:
        return self.share("trace_exact")

    @property
    def frame_exact_bytes(self) -> float:
        return self.share("frames_exact_bytes", "frames_scored")

    @property
    def trace_exact_bytes(self) -> float:
        return self.share("trace_exact_bytes")

    @property
    def token_accuracy(self) -> float:
        return self.share("token_correct", "tokens")


def load_model(path: str, threads: int = 1):
    import torch
    from transformers import AutoModelForCausalLM

    from ..model.hf import check_model_dir

    check_model_dir(path)  # refuses a directory that asks to run its own code
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True, trust_remote_code=False)
    return model.eval()


def trace_documents(programs: list[SuiteProgram], interpreter: Interpreter) -> list[tuple[SuiteProgram, Document, Trace]]:
    out = []
    for program in programs:
        trace = interpreter.trace(program, Limits(frames=5000, seconds=5.0))
        if trace.status.kind not in (Status.COMPLETE, Status.RAISED):
            continue
        family = getattr(program, "meta", {}).get("family", "")
        out.append((program, document(program.source, trace.frames, end=True, family=family), trace))
    return out


def score(model, program: SuiteProgram, doc: Document, context: int = CONTEXT) -> Score:
    import torch

    result = Score(program, frames=len(doc.frame_starts or []) - 1)
    # a document longer than the context is scored on the frames that fit (it cannot be exact)
    result.fits = len(doc) <= context
    if doc.loss_start >= context:
        return result
    ids = torch.tensor([doc.ids[:context]])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0]
    pred = logits[:-1].argmax(-1)
    right = (pred == ids[0, 1:]).tolist()  # right[t-1]: token t predicted correctly
    starts = doc.frame_starts or []
    ok_all = result.fits
    seen = 0
    for k in range(len(starts)):
        lo = starts[k]
        hi = starts[k + 1] if k + 1 < len(starts) else len(doc)
        if hi > len(right) + 1:
            break  # beyond the context
        ok = all(right[t - 1] for t in range(lo, hi))
        if k + 1 < len(starts):  # a frame (the last start is <|end_of_text|>)
            result.frames_exact += ok
            if not ok:
                result.wrong_frames.append(k)
        if not ok and result.first_wrong_frame is None:
            result.first_wrong_frame = k
        ok_all = ok_all and ok
        seen = k + 1
    result.trace_exact = ok_all and seen == len(starts)
    result.frames_scored = min(seen, result.frames)
    result.trace_exact_bytes = result.trace_exact
    span = right[doc.loss_start - 1 :]
    result.tokens = len(span)
    result.token_correct = sum(span)
    return result


def measure(model, programs: list[SuiteProgram], interpreter: Interpreter, backend=None) -> Table:
    """Byte-for-byte figures from one teacher-forced pass; with ``backend`` (the same weights
    opened by :func:`cwmtui.model.opening.open_model_dir`), ``frames_exact`` and ``trace_exact`` become
    the state-level figures (see the module's docstring; the byte ones are kept beside them)."""
    table = Table()
    for program, doc, trace in trace_documents(programs, interpreter):
        result = score(model, program, doc)
        if backend is not None:
            rescore(result, backend, trace)
        table.add(result)
    return table


def rescore(result: Score, backend, trace: Trace) -> None:
    """Turn ``result``'s byte figures into state-level ones (see the module's docstring)."""
    if result.wrong_frames:
        result.frames_exact += frames_right(backend, result.program, trace, {k + 1 for k in result.wrong_frames})
    if result.fits and not result.trace_exact:
        result.trace_exact = rollout_divergence(backend, result.program, trace, start=known_right(result) + 1) is None


def known_right(result: Score) -> int:
    """How many frames after the entry the byte pass found right in a row: a greedy rollout
    writes exactly those, so a rollout may force them and start generating after them."""
    return result.frames_scored if result.first_wrong_frame is None else result.first_wrong_frame


def frames_right(backend, program: SuiteProgram, trace: Trace, steps: set[int]) -> int:
    """How many of the truth's frames ``steps`` the model writes right (state compared) when
    it is given the true trace before each: teacher-forced next-frame, one frame at a time."""
    from ..evaluation.record import frame_agrees
    from ..model.rollout import Rollout

    rollout = Rollout(backend, program, trace.frames[0])
    right = 0
    for k in range(1, min(max(steps, default=0) + 1, len(trace.frames))):
        if k in steps:
            right += frame_agrees(rollout.step(), trace.frames[k])
            rollout.rewind(k)
        rollout.force(trace.frames[k])
    return right


def rollout_divergence(backend, program: SuiteProgram, trace: Trace, start: int = 1) -> int | None:
    """The step of the first frame a free-running greedy rollout gets wrong, compared as
    ``cwmtui eval``'s *whole trace exact* compares (states after resolving ``".."``); None when
    the whole trace is right. The rollout stops at that frame. Steps before ``start`` are known
    right (see :func:`known_right`): they are forced from the truth rather than generated."""
    from ..evaluation.record import frame_agrees
    from ..model.rollout import Rollout, RolloutStatus

    truth = trace.frames
    rollout = Rollout(backend, program, truth[0])
    for frame in truth[1 : min(start, len(truth))]:
        rollout.force(frame)

    def wrong(frame) -> bool:
        k = len(rollout.frames) - 1
        return k >= len(truth) or not frame_agrees(frame, truth[k])

    rollout.run(until=wrong)
    if rollout.frames and wrong(rollout.frames[-1]):
        return len(rollout.frames) - 1
    if rollout.status is RolloutStatus.ENDED and len(rollout.frames) == len(truth):
        return None
    return len(rollout.frames)  # it ended early or ran out of budget: the next step is missing


def lean_decode_speed(model, prompt_ids: list[int], new_tokens: int = 300) -> float:
    """The same with :class:`cwmtui.model.llama_decoder.LlamaDecoder`."""
    from ..model.llama_decoder import LlamaDecoder

    decoder = LlamaDecoder(model, max_len=len(prompt_ids) + new_tokens + 1)
    token = int(decoder.feed(prompt_ids).argmax())
    start = time.perf_counter()
    for _ in range(new_tokens):
        token = int(decoder.feed([token]).argmax())
    return new_tokens / (time.perf_counter() - start)


def decode_speed(model, prompt_ids: list[int], new_tokens: int = 300) -> float:
    """Greedy tokens per second with a KV cache (fp32), after the prompt is processed."""
    import torch
    from transformers import DynamicCache

    cache = DynamicCache()  # updated in place, as the transformers backend uses it
    with torch.inference_mode():
        out = model(input_ids=torch.tensor([prompt_ids]), cache=cache, use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
        start = time.perf_counter()
        for _ in range(new_tokens):
            out = model(input_ids=token, cache=cache, use_cache=True)
            token = out.logits[:, -1:].argmax(-1)
        return new_tokens / (time.perf_counter() - start)
