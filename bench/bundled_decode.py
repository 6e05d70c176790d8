"""Greedy decoding speed of the bundled byte-level CWM on CPU, fp32, KV cache.

Prints tokens/s for: transformers' LlamaForCausalLM forward per token (what a generic HF
backend does; the baseline) and cwmtui.model.llama_decoder.LlamaDecoder (the lean path), with
1 and 2 torch threads, interleaved in one run so machine load affects both alike.

    python bench/bundled_decode.py [--model DIR] [--tokens 300] [--repeat 3]
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
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    from cwmtui.model.llama_decoder import LlamaDecoder
    from cwmtui.suites import s5
    from cwmtui.training.measure import decode_speed, load_model

    model = load_model(args.model, threads=1)
    prompt = [259, 267] + [3 + b for b in s5.program(8, 7).source.encode()] + [260]
    decoder = LlamaDecoder(model)

    def lean_speed() -> float:
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
            for name, fn in (("transformers forward", lambda: decode_speed(model, prompt, args.tokens)), ("LlamaDecoder", lean_speed)):
                rate = fn()
                best[(name, threads)] = max(best.get((name, threads), 0.0), rate)
    load = os.getloadavg()[0]
    params = sum(p.numel() for p in model.parameters())
    print(f"model {args.model}: {params / 1e6:.2f}M parameters; prompt {len(prompt)} tokens; "
          f"{args.tokens} greedy tokens, best of {args.repeat}; load average {load:.1f}")
    print(f"{'path':<22} {'threads':>7} {'tokens/s':>9}")
    for (name, threads), rate in best.items():
        print(f"{name:<22} {threads:>7} {rate:>9.0f}")


if __name__ == "__main__":
    main()
