"""Measuring a byte-level CWM on generated programs, directly over byte ids.

With greedy decoding two exact-match figures need only one forward pass per document:

- **teacher-forced next-frame exact match**: given the true prefix, greedy decoding writes a
  frame exactly iff the argmax at every position of that frame is the true token;
- **free-running whole-trace exact match**: a greedy rollout reproduces the whole trace iff it
  never leaves the true sequence, i.e. iff the argmax is right at every position of every frame
  and of the final ``<|end_of_text|>``.

So both come from the argmax of one teacher-forced pass (identical to what a rollout engine
would report for exactness; it says nothing about *how* a wrong rollout goes wrong).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..interpreter import Interpreter, Limits
from ..suites import SuiteProgram
from ..trace import Status
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


@dataclass
class Table:
    scores: list[Score] = field(default_factory=list)

    def add(self, score: Score) -> None:
        self.scores.append(score)

    @property
    def frame_exact(self) -> float:
        n = sum(s.frames_scored for s in self.scores)
        return sum(s.frames_exact for s in self.scores) / n if n else 0.0

    @property
    def trace_exact(self) -> float:
        return sum(s.trace_exact for s in self.scores) / len(self.scores) if self.scores else 0.0

    @property
    def token_accuracy(self) -> float:
        n = sum(s.tokens for s in self.scores)
        return sum(s.token_correct for s in self.scores) / n if n else 0.0


def load_model(path: str, threads: int = 1):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model.eval()


def trace_documents(programs: list[SuiteProgram], interpreter: Interpreter) -> list[tuple[SuiteProgram, Document]]:
    out = []
    for program in programs:
        trace = interpreter.trace(program, Limits(frames=5000, seconds=5.0))
        if trace.status.kind not in (Status.COMPLETE, Status.RAISED):
            continue
        out.append((program, document(program.source, trace.frames, end=True, family=getattr(program, "meta", {}).get("family", ""))))
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
        if not ok and result.first_wrong_frame is None:
            result.first_wrong_frame = k
        ok_all = ok_all and ok
        seen = k + 1
    result.trace_exact = ok_all and seen == len(starts)
    result.frames_scored = min(seen, result.frames)
    span = right[doc.loss_start - 1 :]
    result.tokens = len(span)
    result.token_correct = sum(span)
    return result


def measure(model, programs: list[SuiteProgram], interpreter: Interpreter) -> Table:
    table = Table()
    for program, doc in trace_documents(programs, interpreter):
        table.add(score(model, program, doc))
    return table


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
