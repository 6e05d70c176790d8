"""Fresh training data every step: programs drawn from the families, traced, packed.

The batch of step ``s`` is a pure function of (seed, s): its programs are drawn from a generator
seeded by both, and the length curriculum depends on the step only. So the data position in a
checkpoint is just the step, and a resumed run sees exactly the batches a single run would.
A background process (:class:`BatchStream`) prepares the next batches while the model trains.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import random
from dataclasses import dataclass

from ..interpreter import Interpreter, Limits
from ..suites import families
from ..trace import Status
from .documents import PAD_ID, Document, document

#: family -> weight in the training mix
MIX = {"s5": 0.16, "zoo": 0.16, "crux": 0.11, "loop": 0.1, "helper": 0.08, "exception": 0.08, "grow": 0.08,
       "story": 0.08, "copy": 0.15}
LIMITS = Limits(frames=600, seconds=2.0)


def parse_mix(text: str) -> dict:
    """``"zoo=0.3,s5=0.2"``: the default mix with those families' weights changed (weights are
    relative; 0 leaves a family out); ``"default"``: the default mix. ValueError names a bad part."""
    mix = dict(MIX)
    if text.strip() == "default":
        return mix
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in MIX:
            raise ValueError(f"{part.strip()!r}: expected FAMILY=WEIGHT with FAMILY one of {', '.join(MIX)}")
        try:
            weight = float(value)
        except ValueError:
            weight = math.nan
        if not 0 <= weight < math.inf:
            raise ValueError(f"{part.strip()!r}: the weight must be a number, 0 or more")
        mix[name] = weight
    if not sum(mix.values()) > 0:
        raise ValueError("every family has weight 0: nothing to train on")
    return mix


def mix_text(mix: dict) -> str:
    """The mix as shares, largest first: ``"s5 16%, zoo 16%, copy 15%, ..."``."""
    total = sum(mix.values())
    return ", ".join(f"{name} {weight / total:.0%}" for name, weight in sorted(mix.items(), key=lambda kv: -kv[1]) if weight)


@dataclass(frozen=True)
class Curriculum:
    """The data as training goes on: longer programs and sequences (in tokens seen), drawn
    from the families in the proportions of ``mix`` ((family, weight) pairs)."""

    stages: tuple = ((3_000_000, 768, 2), (10_000_000, 1536, 3), (25_000_000, 2560, 4), (None, 4096, 5))
    mix: tuple = tuple(MIX.items())

    def at(self, tokens_seen: int) -> tuple[int, int]:
        """(maximum document length, maximum program size) at this point."""
        for limit, length, size in self.stages:
            if limit is None or tokens_seen < limit:
                return length, size
        return self.stages[-1][1], self.stages[-1][2]


@dataclass
class Batch:
    step: int
    rows: list  # list of micro-batches: (input_ids [B,T] list of lists, loss mask [B,T] list of lists)
    tokens: int  # real (non-pad) tokens
    loss_tokens: int
    families: dict


def draw_documents(interpreter: Interpreter, seed: int, step: int, budget: int, max_len: int, max_size: int,
                   mix: tuple = tuple(MIX.items())) -> list[Document]:
    rng = random.Random(f"batch:{seed}:{step}")
    names, weights = zip(*mix)
    docs: list[Document] = []
    total = 0
    index = 0
    misses = 0
    while total < budget and misses < 200:
        family = rng.choices(names, weights)[0]
        size = rng.randint(1, max_size)
        index += 1
        try:
            program = families.program(family, seed=seed * 1_000_003 + step, index=index, size=size)
        except Exception:  # a generator corner case: skip it, deterministically
            misses += 1
            continue
        trace = interpreter.trace(program, LIMITS)
        kind = trace.status.kind
        if kind not in (Status.COMPLETE, Status.RAISED) or len(trace.frames) < 2:
            misses += 1
            continue
        if kind is Status.RAISED and rng.random() < 0.5:
            continue
        doc = document(program.source, trace.frames, end=True, family=family)
        if len(doc) > max_len:
            misses += 1
            continue
        docs.append(doc)
        total += len(doc)
    return docs


def pack(docs: list[Document], micro_tokens: int) -> list[tuple[list, list]]:
    """Rows sorted by length, right-padded, grouped so rows x longest <= micro_tokens and no
    row is shorter than 3/4 of its group's longest (little padding).

    Right padding needs no attention mask: with causal attention no real token sees a pad.
    """
    docs = sorted(docs, key=len, reverse=True)
    micro: list[tuple[list, list]] = []
    i = 0
    while i < len(docs):
        longest = len(docs[i])
        j = i + 1
        while j < len(docs) and (j - i + 1) * longest <= micro_tokens and len(docs[j]) * 4 >= longest * 3:
            j += 1
        group = docs[i:j]
        i = j
        ids, mask = [], []
        for d in group:
            pad = longest - len(d)
            ids.append(d.ids + [PAD_ID] * pad)
            # mask[t] = 1 when token t is a target (predicted from position t-1)
            mask.append([0] * d.loss_start + [1] * (len(d) - d.loss_start) + [0] * pad)
        micro.append((ids, mask))
    return micro


def make_batch(interpreter: Interpreter, seed: int, step: int, batch_tokens: int, micro_tokens: int, curriculum: Curriculum,
               base: tuple[int, int] = (0, 0)) -> Batch:
    """The batch of ``step``. ``base`` = (step, tokens seen) where this run started: the
    curriculum follows tokens seen (estimated as base tokens + steps since x batch_tokens), so a
    run resumed with another batch size (a GPU run) stays at the same stage."""
    max_len, max_size = curriculum.at(base[1] + (step - base[0]) * batch_tokens)
    docs = draw_documents(interpreter, seed, step, batch_tokens, max_len, max_size, curriculum.mix)
    fam: dict[str, int] = {}
    for d in docs:
        fam[d.family] = fam.get(d.family, 0) + 1
    return Batch(step, pack(docs, micro_tokens), sum(len(d) for d in docs),
                 sum(len(d) - d.loss_start for d in docs), fam)


def _worker(queue, seed, start, batch_tokens, micro_tokens, curriculum, stride=1, base=(0, 0)) -> None:
    import os

    try:
        os.nice(5)
    except OSError:
        pass
    import queue as queues

    parent = os.getppid()
    with Interpreter() as interpreter:
        step = start
        while True:
            batch = make_batch(interpreter, seed, step, batch_tokens, micro_tokens, curriculum, base)
            while True:  # wait for room, but end with the trainer
                if os.getppid() != parent:
                    return
                try:
                    queue.put(batch, timeout=2)
                    break
                except queues.Full:
                    continue
            step += stride


class BatchStream:
    """Batches for steps start, start+1, ... prepared by background processes.

    With ``workers`` > 1 (a GPU run, where tracing is the bottleneck) worker w prepares steps
    start+w, start+w+workers, ...; the batches are the same whatever the number of workers.
    """

    def __init__(self, seed: int, start: int, batch_tokens: int, micro_tokens: int, curriculum: Curriculum | None = None,
                 prefetch: int = 6, workers: int = 1, base_tokens: int = 0) -> None:
        ctx = mp.get_context("spawn")
        self.queues = []
        self.processes = []
        for w in range(workers):
            queue = ctx.Queue(maxsize=max(2, prefetch // workers))
            process = ctx.Process(
                target=_worker, args=(queue, seed, start + w, batch_tokens, micro_tokens, curriculum or Curriculum(), workers,
                                      (start, base_tokens)),
                daemon=True,
            )
            process.start()
            self.queues.append(queue)
            self.processes.append(process)
        self.start = start
        self.next_step = start

    def get(self) -> Batch:
        batch = self.queues[(self.next_step - self.start) % len(self.queues)].get()
        assert batch.step == self.next_step
        self.next_step += 1
        return batch

    def close(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
