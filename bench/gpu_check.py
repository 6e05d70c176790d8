"""The GPU check: a --model on CUDA in bf16, one sample, and the same model on the CPU beside it.

    python bench/gpu_check.py --model /models/cwm            # Meta's CWM (or facebook/cwm from the HF cache)
    python bench/gpu_check.py --model bundled                # the bundled model through transformers (real frames)
    python bench/gpu_check.py --model tiny                   # a small random CwmForCausalLM it builds itself
    python bench/gpu_check.py --model tiny --device cpu      # the script itself, on a machine without a GPU

It is the script to run the day a GPU is at hand (``pip install 'cwmtui[hf]'`` first). It
prints, for the sample program (default ``samples/strings.py``, greedy, the default budgets):

- how the model was placed (one GPU, spread over several, any part offloaded), load time;
- tokens/s of the rollout (generated and processed tokens over wall time) and the first frame's
  latency;
- peak GPU memory (``torch.cuda.max_memory_allocated``) against the weights and the KV cache
  cwmtui's fit check reserved;
- whether the frames match the CPU run of the same model (fp32; only for models small enough to
  run on the CPU, ``--cpu-max-params``): the first frame where they differ, if any. bf16 on the
  GPU and fp32 on the CPU can pick different argmaxes where two logits are close, so a late
  difference on a random model is expected; an early one on a trained model is worth a look.

A random model (``tiny``) writes a random trace, so its frames test the machinery, not a
model; its tokens/s is a lower bound of per-token overhead, not of CWM's speed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def build_tiny(path: str) -> str:
    """A small random CwmForCausalLM (Meta's architecture) with the byte tokenizer: the tests'
    builder, at a size where the GPU has something to do."""
    from tests.tiny_models import build_tiny_cwm

    return str(build_tiny_cwm(Path(path), hidden=256, heads=4, kv_heads=2, sliding_window=128, positions=16384))


def run(backend, program, budget: int) -> dict:
    """One greedy rollout of ``program``: its frames and its timings."""
    from cwmtui.interpreter import Interpreter
    from cwmtui.model.rollout import Rollout, RolloutOptions

    with Interpreter() as interpreter:
        truth = interpreter.trace(program)
    rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(token_budget=budget))
    first: list[float] = []
    began = time.perf_counter()
    rollout.run(on_frame=lambda frame: first.append(time.perf_counter() - began) if not first else None)
    seconds = time.perf_counter() - began
    return {
        "frames": list(rollout.frames),
        "status": rollout.status.name.lower(),
        "generated": rollout.tokens_used,
        "processed": rollout.tokens_processed,
        "seconds": seconds,
        "first_frame_s": first[0] if first else None,
        "truth_frames": len(truth.frames),
    }


def first_difference(a: list, b: list) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if (x.event, x.action, x.locals, x.arg, x.error) != (y.event, y.action, y.locals, y.arg, y.error):
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model directory, a model id in the local Hugging Face cache, 'bundled' or 'tiny'")
    parser.add_argument("--program", default=os.path.join(ROOT, "samples", "strings.py"))
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a dry run of the script)")
    parser.add_argument("--token-budget", type=int, default=8192)
    parser.add_argument("--cpu-max-params", type=float, default=2e9, help="compare with a CPU run only below this many parameters")
    args = parser.parse_args(argv)

    import torch

    from cwmtui.interpreter import load_program
    from cwmtui.model.hf import DEFAULT_CACHE_TOKENS, TransformersBackend, kv_bytes_per_token, read_json
    from cwmtui.model.opening import BUNDLED_DIR
    from cwmtui.model.hub import model_directory

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA GPU here: run with --device cpu for a dry run of this script", file=sys.stderr)
        return 2
    program = load_program(args.program)
    with tempfile.TemporaryDirectory() as scratch:
        if args.model == "tiny":
            path = build_tiny(os.path.join(scratch, "tiny"))
        else:
            path = BUNDLED_DIR if args.model == "bundled" else model_directory(args.model)
        began = time.perf_counter()
        backend = TransformersBackend(path, device=args.device, lean=False)
        load_s = time.perf_counter() - began
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats(backend.device)
        result = run(backend, program, args.token_budget)
        peak = torch.cuda.max_memory_allocated(backend.device) if args.device.startswith("cuda") else None
        params = sum(p.numel() for p in backend.model.parameters())
        kv = kv_bytes_per_token(read_json(os.path.join(path, "config.json"))) * DEFAULT_CACHE_TOKENS
        gpu = {"description": backend.description, "warning": backend.warning, **result}
        backend.close()
        cpu = None
        if params <= args.cpu_max_params:
            reference = TransformersBackend(path, device="cpu", lean=False)
            cpu = run(reference, program, args.token_budget)
            reference.close()

    tokens_per_s = gpu["generated"] / gpu["seconds"] if gpu["seconds"] else 0.0
    rows = [
        ("model", gpu["description"]),
        ("device", f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})" if args.device.startswith("cuda") else "cpu (dry run)"),
        ("placement warning", gpu["warning"] or "none"),
        ("load", f"{load_s:.1f} s"),
        ("program", f"{os.path.relpath(args.program)} ({gpu['truth_frames']} interpreter frames)"),
        ("rollout", f"{len(gpu['frames'])} frames, {gpu['status']}, {gpu['generated']} trace tokens, {gpu['processed']} processed"),
        ("tokens/s", f"{tokens_per_s:,.0f} trace tokens/s ({gpu['processed'] / gpu['seconds']:,.0f} processed/s), {gpu['seconds']:.2f} s"),
        ("first frame", f"{gpu['first_frame_s']:.3f} s" if gpu["first_frame_s"] is not None else "none written"),
    ]
    if peak is not None:
        rows.append(("peak GPU memory", f"{peak / 2**30:.2f} GiB (KV cache reserved by the fit check: {kv / 2**30:.2f} GiB)"))
    if cpu is None:
        rows.append(("frames vs CPU", f"not compared ({params / 1e9:.1f}B parameters > --cpu-max-params)"))
    else:
        at = first_difference(gpu["frames"], cpu["frames"])
        same = "all match" if at is None else f"differ from frame {at} (of {len(gpu['frames'])} / {len(cpu['frames'])})"
        rows.append(("frames vs CPU", f"{same}; CPU {cpu['generated'] / cpu['seconds']:,.0f} tokens/s"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
