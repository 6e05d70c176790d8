"""Greedy decoding speed of the bundled byte-level CWM on CPU, fp32, KV cache.

Prints tokens/s for: transformers' LlamaForCausalLM forward per token (what a generic HF
backend does; the baseline, 1 and 2 torch threads) and cwmtui.model.llama_decoder.LlamaDecoder
(the lean path, numpy), interleaved in one run so machine load affects all alike. ``--tree DIR``
adds the LlamaDecoder of another checkout (e.g. ``git worktree add /tmp/oldwt 67b9ef7``: the
torch version it replaced), loaded from its file. Also the time to open the model both ways.

    python bench/bundled_decode.py [--model DIR] [--tokens 300] [--repeat 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=os.path.join("cwmtui", "model", "bundled"))
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", help="another checkout whose LlamaDecoder runs beside this one")
    args = parser.parse_args()
    opened = open_times(args.model)
    warnings.filterwarnings("ignore")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    from cwmtui.model.llama_decoder import LlamaDecoder
    from cwmtui.suites import s5
    from cwmtui.training.measure import decode_speed, load_model

    model = load_model(args.model, threads=1)
    prompt = [259, 267] + [3 + b for b in s5.program(8, 7).source.encode()] + [260]
    decoders = {"LlamaDecoder": LlamaDecoder(model)}
    if args.tree:
        import importlib.util

        spec = importlib.util.spec_from_file_location("other_decoder", os.path.join(args.tree, "cwmtui", "model", "llama_decoder.py"))
        other = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(other)
        decoders[f"LlamaDecoder ({args.tree})"] = other.LlamaDecoder(model)

    def lean_speed(decoder) -> float:
        decoder.crop(0)
        token = int(decoder.feed(prompt).argmax())
        start = time.perf_counter()
        for _ in range(args.tokens):
            token = int(decoder.feed([token]).argmax())
        return args.tokens / (time.perf_counter() - start)

    best: dict[tuple[str, int], float] = {}
    for _ in range(args.repeat):
        for threads in (1, 2):
            torch.set_num_threads(threads)
            runs = [("transformers forward", lambda: decode_speed(model, prompt, args.tokens))]
            runs += [(name, lambda d=d: lean_speed(d)) for name, d in decoders.items()]
            for name, fn in runs:
                rate = fn()
                best[(name, threads)] = max(best.get((name, threads), 0.0), rate)
    load = os.getloadavg()[0]
    params = sum(p.numel() for p in model.parameters())
    print(f"model {args.model}: {params / 1e6:.2f}M parameters; prompt {len(prompt)} tokens; "
          f"{args.tokens} greedy tokens, best of {args.repeat}; load average {load:.1f}")
    print(f"{'path':<36} {'torch threads':>13} {'tokens/s':>9}")
    for (name, threads), rate in best.items():
        print(f"{name:<36} {threads:>13} {rate:>9.0f}")
    print("\nopening the model in a fresh interpreter (imports included), best of 3:")
    for name, seconds in opened.items():
        print(f"  {name:<58} {seconds:6.2f} s")


def open_times(model: str) -> dict[str, float]:
    """Seconds from a fresh interpreter to an open backend: the lean path (numpy, no torch) and
    transformers' (TransformersBackend, as any --model directory)."""
    import subprocess

    scripts = {
        "open_backend(model) (LeanBackend: numpy, no torch/transformers)":
            "from cwmtui.model.opening import open_model_dir as o; o(sys.argv[1], device='cpu')",
        "TransformersBackend(model) (torch + transformers)":
            "from cwmtui.model.hf import TransformersBackend as T; T(sys.argv[1], device='cpu')",
    }
    out = {}
    for name, line in scripts.items():
        code = f"import sys, time\nt = time.perf_counter()\n{line}\nprint(time.perf_counter() - t)"
        runs = [float(subprocess.run([sys.executable, "-c", code, model], capture_output=True, text=True, check=True).stdout)
                for _ in range(3)]
        out[name] = min(runs)
    return out


if __name__ == "__main__":
    main()
