"""The training loop: fp32 on CPU (bf16 autocast on CUDA), checkpoints, resume, warm start, progress."""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from dataclasses import asdict, dataclass, field

from ..suites import families
from .data import MIX, BatchStream, Curriculum, mix_text
from .model import build_model, export

CHECKPOINT = "checkpoint.pt"


@dataclass
class TrainOptions:
    out: str = "runs/train"
    size: str = "small"
    device: str = "cpu"
    seed: int = 0
    minutes: float | None = None
    steps: int | None = None
    batch_tokens: int = 8192
    micro_tokens: int = 8192
    # the learning-rate schedule; None: the resumed checkpoint's setting, else SCHEDULE's default
    lr: float | None = None
    min_lr: float | None = None
    warmup: int = 100
    decay_tokens: int | None = None  # cosine decay to min_lr over this many tokens (0: constant)
    decay_start: int | None = None  # tokens seen when the decay begins (an annealing phase of a long run)
    weight_decay: float = 0.1
    checkpoint_minutes: float = 5.0
    eval_minutes: float = 10.0  # follow held-out exact match this often (0: never)
    threads: int = 2
    resume: str | None = None
    init: str | None = None  # warm start: the weights of an exported model directory (fresh optimizer)
    precision: str = "auto"  # auto: bf16 autocast on CUDA, fp32 on CPU; or "fp32" / "bf16"
    log_every: int = 10
    workers: int = 1  # data processes (more on a GPU, where tracing is the bottleneck)
    mix: dict | None = None  # family -> weight; None: the resumed checkpoint's mix, else data.MIX
    extra: dict = field(default_factory=dict)


#: the schedule of a new run, where the options leave it unset (decay_tokens 0: a constant rate)
SCHEDULE = {"lr": 3e-3, "min_lr": 3e-4, "decay_tokens": 0, "decay_start": 0}


def resolve_schedule(opts: TrainOptions, saved: dict | None) -> None:
    """Fill the schedule options left unset: a resumed run keeps its checkpoint's schedule (an
    annealing run resumed without its flags must not jump back to the peak rate) and mix."""
    for name, default in {**SCHEDULE, "mix": MIX}.items():
        if getattr(opts, name) is None:
            value = (saved or {}).get(name)
            value = default if value is None else value
            setattr(opts, name, dict(value) if isinstance(value, dict) else value)


def use_bf16(opts: TrainOptions) -> bool:
    """bf16 autocast where it pays: on CUDA. On CPUs without native bf16 units (AVX2 parts such as
    these 2 cores) autocast emulates bf16 matmuls and trains ~12x slower than fp32
    (measured: 3,500 vs 283 tokens/s on 2048-token rows), so "auto" keeps fp32 there."""
    if opts.precision == "auto":
        return opts.device == "cuda"
    return opts.precision == "bf16"


def warm_start(model, directory: str) -> dict:
    """Load the weights of an exported model directory into ``model`` (grown into its layers,
    computing the same function, when ``model`` is a deeper shape: ``grow_layers``); return its
    training record (steps, tokens, seconds seen so far and its loss curve) so the run continues the count."""
    import torch
    from safetensors.torch import load_file

    from .model import grow_layers, layer_count

    weights = load_file(os.path.join(directory, "model.safetensors"))
    own = model.state_dict()
    depth = layer_count(weights)
    if depth < layer_count(own):  # a deeper shape: grow the layers in, same function
        weights = grow_layers(weights, layer_count(own))
    for name, tensor in weights.items():
        if name not in own or own[name].shape != tensor.shape:
            raise ValueError(f"{directory}: weight {name} does not fit a {type(model).__name__} of this size")
    missing = [n for n in own if n not in weights and n != "lm_head.weight"]
    if missing:
        raise ValueError(f"{directory}: no weight {missing[0]}")
    model.load_state_dict({n: t.to(torch.float32) for n, t in weights.items()}, strict=False)
    if getattr(model.config, "tie_word_embeddings", False):
        model.tie_weights()
    path = os.path.join(directory, "training.json")
    info = {}
    if os.path.exists(path):
        with open(path) as fh:
            info = json.load(fh)
    info.setdefault("shape", [[0, f"{depth} layers"]])
    return info


def learning_rate(opts: TrainOptions, step: int, tokens: int) -> float:
    """Linear warm-up over ``opts.warmup`` steps (counted from the optimizer's first step), then
    constant or a cosine decay to ``opts.min_lr``."""
    if step < opts.warmup:
        return opts.lr * (step + 1) / opts.warmup
    if not opts.decay_tokens:
        return opts.lr
    frac = min(1.0, max(0.0, (tokens - opts.decay_start) / opts.decay_tokens))
    return opts.min_lr + 0.5 * (opts.lr - opts.min_lr) * (1 + math.cos(math.pi * frac))


def masked_loss(model, ids, mask):
    """Mean cross-entropy over the targets where mask is 1 (mask[t]: predict token t from t-1)."""
    import torch.nn.functional as F

    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    targets = ids[:, 1:]
    keep = mask[:, 1:].bool()
    logits = model.lm_head(hidden[keep])
    return F.cross_entropy(logits.float(), targets[keep], reduction="sum"), int(keep.sum())


def save_checkpoint(path: str, model, optimizer, state: dict, opts: TrainOptions) -> None:
    import torch

    os.makedirs(path, exist_ok=True)
    payload = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "state": state,
        "options": asdict(opts),
        "size": opts.size,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    tmp = os.path.join(path, CHECKPOINT + ".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, os.path.join(path, CHECKPOINT))


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded, in one line."""


def load_checkpoint(path: str):
    """A checkpoint of ``cwmtui train``: tensors and plain data only (``weights_only``), so a
    crafted file cannot run code; a damaged or foreign one is a :class:`CheckpointError`."""
    import pickle
    import zipfile

    import torch

    file = path if path.endswith(".pt") else os.path.join(path, CHECKPOINT)
    if not os.path.exists(file):
        raise FileNotFoundError(f"{path}: no checkpoint ({CHECKPOINT}) there")
    try:
        checkpoint = torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only" in str(exc).lower() or "weights_only" in str(exc):
            raise CheckpointError(
                f"{file}: refused: it holds objects other than tensors and plain data "
                "(code could run on loading it; a checkpoint of cwmtui train holds none)"
            ) from None
        raise CheckpointError(f"{file}: damaged, not a checkpoint ({_first_line(exc)})") from None
    except (RuntimeError, EOFError, OSError, ValueError, KeyError, AttributeError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"{file}: damaged, not a checkpoint ({_first_line(exc)})") from None
    if not isinstance(checkpoint, dict) or not {"model", "state", "size"} <= set(checkpoint):
        raise CheckpointError(f"{file}: not a checkpoint of cwmtui train (no model, state and size in it)")
    return checkpoint


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:160]


def model_from_checkpoint(path: str):
    ckpt = load_checkpoint(path)
    model = build_model(ckpt["size"])
    model.load_state_dict(ckpt["model"])
    return model, ckpt


def held_out_documents():
    """A small fixed set of programs (seeds no training step draws) to follow progress."""
    from ..interpreter import Interpreter
    from ..suites import families, s5, zoo
    from .measure import trace_documents

    programs = [s5.program(n, seed=99, index=i) for n in (4, 8) for i in range(4)]
    programs += [zoo.program(kind, d, "flat" if i % 2 else "nested", seed=99, index=i)
                 for d in (1, 2) for i, kind in enumerate(("string", "list", "math", "dictionary"))]
    programs += [families.program(f, seed=-99, index=i, size=1) for f in ("crux", "loop", "story", "exception") for i in range(2)]
    with Interpreter() as interpreter:
        return [(p, d) for p, d, _ in trace_documents(programs, interpreter) if len(d) <= 2048]


def evaluate(model, documents) -> dict:
    """Teacher-forced next-frame exact, whole-trace exact and token accuracy on ``documents``."""
    from .measure import Table, score

    table = Table()
    was_training = model.training
    model.eval()
    try:
        for program, doc in documents:
            table.add(score(model, program, doc))
    finally:
        model.train(was_training)
    return {"frame_exact": round(table.frame_exact, 4), "trace_exact": round(table.trace_exact, 4),
            "token_accuracy": round(table.token_accuracy, 4), "programs": len(table.scores)}


class ThreadChoice:
    """Picks the torch thread count that trains fastest right now.

    The machine is shared: when another process holds a core, a multi-threaded step waits at
    every parallel region for the thread that lost its core, and one thread is faster. Every
    ``period`` steps, try each count for ``probe`` steps; keep one thread unless more are
    clearly (``margin``) faster.
    """

    def __init__(self, most: int, period: int = 30, probe: int = 2, margin: float = 1.25) -> None:
        self.counts = list(range(1, most + 1))
        self.period, self.probe, self.margin = period, probe, margin
        self.rates: dict[int, list[float]] = {}
        self.best = 1

    def choose(self, step: int) -> int:
        phase = step % self.period
        if phase < self.probe * len(self.counts):
            return self.counts[phase // self.probe]
        return self.best

    def record(self, step: int, rate: float) -> None:
        phase = step % self.period
        window = self.probe * len(self.counts)
        if phase < window:
            count = self.counts[phase // self.probe]
            self.rates.setdefault(count, []).append(rate)
            if phase == window - 1:
                # a run resumed mid-window has not measured every count: keep the current pick
                if len(self.rates) == len(self.counts):
                    # more threads only when clearly faster: a wrong pick costs a whole period
                    median = {c: sorted(r)[len(r) // 2] for c, r in self.rates.items()}
                    best = 1
                    for c in sorted(median):
                        if median[c] > self.margin * median[best]:
                            best = c
                    self.best = best
                self.rates = {}


class Progress:
    """A rich progress bar on a terminal; plain log lines otherwise (background runs)."""

    def __init__(self, total_seconds: float | None) -> None:
        self.tty = sys.stderr.isatty()
        self.bar = None
        if self.tty:
            from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn

            self.bar = RichProgress(TextColumn("[bold]train"), BarColumn(), TextColumn("{task.description}"),
                                    TimeElapsedColumn(), transient=False)
            self.task = self.bar.add_task("", total=total_seconds or None)
            self.bar.start()

    def update(self, elapsed: float, text: str, log: bool) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=elapsed, description=text)
        elif log:
            print(text, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def train(opts: TrainOptions) -> dict:
    import signal

    import torch

    stopping: list[int] = []

    def stop(signum, frame):  # finish the step, then save and leave
        if stopping:
            raise KeyboardInterrupt
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    torch.set_num_threads(opts.threads)
    device = torch.device(opts.device)
    state = {"step": 0, "tokens": 0, "loss_tokens": 0, "seconds": 0.0, "runs": 0}
    if opts.resume:
        ckpt = load_checkpoint(opts.resume)
        opts.size = ckpt["size"]
        model = build_model(opts.size, opts.seed)
        model.load_state_dict(ckpt["model"])
        state.update(ckpt["state"])
        torch.set_rng_state(ckpt["rng"]["torch"])
        random.setstate(ckpt["rng"]["python"])
        opts.seed = ckpt["options"]["seed"]
    else:
        ckpt = None
        model = build_model(opts.size, opts.seed)
    prior_curve: list = []
    if opts.init and ckpt is None:
        info = warm_start(model, opts.init)
        state.update({k: info.get(k, 0) for k in ("step", "tokens", "loss_tokens")})
        state["seconds"] = float(info.get("train_seconds", 0))
        state["runs"] = int(info.get("runs", 0))
        state.update({key: phases(info, key) for key in PHASES_BEFORE})
        prior_curve = info.get("loss_curve") or []
        state["optimizer_from"] = state["step"]  # a fresh optimizer warms up again
    resolve_schedule(opts, ckpt["options"] if ckpt is not None else None)
    if opts.decay_start < 0:  # "from here": the decay starts at the tokens seen so far
        opts.decay_start = state["tokens"]
    model.to(device).train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": opts.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=opts.lr, betas=(0.9, 0.95), eps=1e-8)
    if ckpt is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
    state["runs"] += 1
    # what changed over the runs, as [tokens seen, what] phases (runs before a record began used the first)
    note_phase(state, "precision", "bf16 autocast" if use_bf16(opts) else "fp32")
    note_phase(state, "data", data_label(opts.mix))
    note_phase(state, "shape", f"{model.config.num_hidden_layers} layers")
    params = sum(p.numel() for p in model.parameters())
    os.makedirs(opts.out, exist_ok=True)
    metrics = open(os.path.join(opts.out, "metrics.jsonl"), "a")
    for tokens_m, loss in prior_curve:  # the warm start's history, so the exported loss curve stays whole
        metrics.write(json.dumps({"tokens": int(tokens_m * 1e6), "loss": loss, "from": opts.init}) + "\n")
    print(f"cwmtui train: {opts.size} model, {params / 1e6:.2f}M parameters, {opts.device}, seed {opts.seed}, "
          f"{'bf16 autocast' if use_bf16(opts) else 'fp32'}, from step {state['step']} ({state['tokens'] / 1e6:.1f}M tokens seen)"
          f"{', warm start from ' + opts.init if opts.init and ckpt is None else ''}"
          f"{'' if opts.mix == MIX else ', mix ' + mix_text(opts.mix)}, out {opts.out}", flush=True)
    stream = BatchStream(opts.seed, state["step"], opts.batch_tokens, opts.micro_tokens, Curriculum(mix=tuple(opts.mix.items())), workers=opts.workers,
                         base_tokens=state["tokens"])
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16(opts))
    start = time.time()
    last_ckpt = start
    held_out = held_out_documents() if opts.eval_minutes else []
    last_eval = start
    progress = Progress(opts.minutes * 60 if opts.minutes else None)
    threads = ThreadChoice(opts.threads) if opts.device == "cpu" and opts.threads > 1 else None
    window: list[tuple[float, int, float]] = []
    try:
        while True:
            elapsed = time.time() - start
            if opts.minutes is not None and elapsed >= opts.minutes * 60:
                break
            if opts.steps is not None and state["step"] >= opts.steps:
                break
            if stopping:
                print("cwmtui train: stopping; saving a checkpoint", file=sys.stderr, flush=True)
                break
            batch = stream.get()
            if threads is not None:
                torch.set_num_threads(threads.choose(state["step"]))
            t0 = time.time()
            lr = learning_rate(opts, state["step"] - state.get("optimizer_from", 0), state["tokens"])
            for group in optimizer.param_groups:
                group["lr"] = lr
            total_loss = 0.0
            count = max(1, batch.loss_tokens)
            for ids, mask in batch.rows:
                ids_t = torch.tensor(ids, device=device)
                mask_t = torch.tensor(mask, device=device)
                with autocast:
                    loss_sum, _ = masked_loss(model, ids_t, mask_t)
                (loss_sum / count).backward()
                total_loss += float(loss_sum.detach())
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            dt = time.time() - t0
            if threads is not None:
                threads.record(state["step"], batch.tokens / dt)
            state["step"] += 1
            state["tokens"] += batch.tokens
            state["loss_tokens"] += batch.loss_tokens
            state["seconds"] += dt
            loss = total_loss / count
            window.append((dt, batch.tokens, loss))
            window = window[-20:]
            tps = sum(w[1] for w in window) / max(1e-9, sum(w[0] for w in window))
            avg = sum(w[2] for w in window) / len(window)
            metrics.write(json.dumps({"step": state["step"], "tokens": state["tokens"], "loss": round(loss, 5),
                                      "lr": lr, "grad_norm": round(grad_norm, 4), "tok_s": round(batch.tokens / dt),
                                      "time": round(state["seconds"], 1), "families": batch.families}) + "\n")
            text = (f"step {state['step']} loss {avg:.4f} {tps:,.0f} tok/s threads {torch.get_num_threads()} "
                    f"{state['tokens'] / 1e6:.2f}M tokens lr {lr:.2e}")
            if state["step"] % opts.log_every == 0:
                metrics.flush()
            progress.update(time.time() - start, text, state["step"] % opts.log_every == 0)
            if held_out and time.time() - last_eval >= opts.eval_minutes * 60:
                with autocast:
                    result = evaluate(model, held_out)
                metrics.write(json.dumps({"step": state["step"], "tokens": state["tokens"], "eval": result}) + "\n")
                metrics.flush()
                print(f"held-out at step {state['step']}: next-frame exact {result['frame_exact']:.1%}, whole-trace exact "
                      f"{result['trace_exact']:.1%}, token accuracy {result['token_accuracy']:.1%}", flush=True)
                last_eval = time.time()
            if time.time() - last_ckpt >= opts.checkpoint_minutes * 60:
                metrics.flush()
                save_checkpoint(opts.out, model, optimizer, state, opts)
                last_ckpt = time.time()
    except KeyboardInterrupt:
        print("cwmtui train: interrupted; saving a checkpoint", file=sys.stderr, flush=True)
    finally:
        progress.close()
        stream.close()
        metrics.close()
    save_checkpoint(opts.out, model, optimizer, state, opts)
    print(f"cwmtui train: stopped at step {state['step']}, {state['tokens'] / 1e6:.2f}M tokens, "
          f"checkpoint in {opts.out}", flush=True)
    return state


def loss_curve(run_dir: str, points: int = 16) -> list[list[float]]:
    """[[tokens seen (millions), mean training loss]] over ``points`` even stretches of a run."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as fh:
        for line in fh:
            try:
                m = json.loads(line)
                if "loss" in m:
                    rows.append((m["tokens"], m["loss"]))
            except (ValueError, KeyError):
                continue
    if not rows:
        return []
    rows.sort()
    # even stretches of tokens, not of rows: a warm start's history is one row per stretch of a
    # past run, beside one row a step of this one, and must not be averaged into the first point
    first, width = rows[0][0], (rows[-1][0] - rows[0][0]) / points or 1
    stretches: dict[int, list] = {}
    for tokens, loss in rows:
        stretches.setdefault(min(int((tokens - first) / width), points - 1), []).append((tokens, loss))
    return [[round(chunk[-1][0] / 1e6, 2), round(sum(r[1] for r in chunk) / len(chunk), 4)]
            for _, chunk in sorted(stretches.items())]


NO_HEADERS = "no module headers"
#: what the runs before each [tokens seen, what] record began used
PHASES_BEFORE = {"precision": "bf16 autocast", "data": NO_HEADERS, "shape": "4 layers"}


def data_label(mix: dict | None = None) -> str:
    """What the training data is now, where it changed over the bundled model's runs."""
    label = (f"{families.PREAMBLE_SHARE:.0%} of programs with a module header, "
             f"{families.DOUBLE_QUOTE_SHARE:.0%} with double-quoted strings")
    if families.S5_N_PER_SIZE != 4:  # the runs before the record of it drew S5 up to N = 20
        label += f", S5 up to N = {5 * families.S5_N_PER_SIZE}"
    return label if mix is None or mix == MIX else f"{label}; mix {mix_text(mix)}"


def phases(record: dict, key: str) -> list:
    """``record[key]``'s [tokens seen, what] phases; one from before the record began has one."""
    return record.get(key) or [[0, PHASES_BEFORE[key]]]


def note_phase(state: dict, key: str, now: str) -> None:
    """Record in ``state[key]`` that ``now`` holds from here on. A run from scratch starts with
    ``now``; a checkpoint from before the record began, with what ``PHASES_BEFORE`` says."""
    if key not in state:
        state[key] = phases(state, key) if state["tokens"] else [[0, now]]
    if state[key][-1][1] != now:
        state[key].append([state["tokens"], now])


def export_checkpoint(checkpoint: str, out_dir: str) -> dict:
    model, ckpt = model_from_checkpoint(checkpoint)
    state = ckpt["state"]
    info = {"size": ckpt["size"], "step": state["step"], "tokens": state["tokens"],
            "loss_tokens": state["loss_tokens"], "train_seconds": round(state["seconds"]),
            "seed": ckpt["options"]["seed"], "parameters": sum(p.numel() for p in model.parameters()),
            "lr": ckpt["options"]["lr"], "batch_tokens": ckpt["options"]["batch_tokens"],
            "min_lr": ckpt["options"].get("min_lr"), "decay_tokens": ckpt["options"].get("decay_tokens"), "decay_start": ckpt["options"].get("decay_start", 0),
            "runs": state.get("runs", 1), **{key: phases(state, key) for key in PHASES_BEFORE},
            "loss_curve": loss_curve(checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint))}
    export(model, out_dir, info)
    return info
