"""Rollout cost: prefix reuse against re-sending the prefix, and the frame loop against generate().

    python bench/rollout.py [--frames 500] [--hidden 128] [--layers 2] [--baseline-frames 40]
                            [--override-at 250] [--threads 1] [--lean]

The model is a random-weight Llama of a realistic shape (GQA, SwiGLU, RMSNorm, RoPE; small:
``--hidden``, ``--layers``) with the bundled byte tokenizer, saved to a temporary directory and
opened through the real transformers backend, on transformers' forward and DynamicCache (the
path CWM takes; ``--lean`` also times the lean decoder small CPU models get by default). A
random model writes garbage, so the decoding loop is *scripted*: at each position it emits the
token of the interpreter's own trace instead of the argmax (the model still runs every token
through its forward pass and KV cache, which is all the cost there is). That makes the run
deterministic and every frame a real frame. ``generate()`` gets the same script through a
logits processor, and the bench checks that both produce the same ids.

Figures, in one run:

1. tokens the model processed / tokens in the final trace, for the rollout (each frame one
   ``complete()`` call on the kept cache) and for a cwmdbg-style loop that re-sends the whole
   prefix every frame with no cache. The baseline's count for all frames is exact arithmetic
   (the sum of the prefix lengths it would send); it is also *run* for the first
   ``--baseline-frames`` frames, to show the measured count and the time it takes.
2. an override at frame ``--override-at`` (rewind, a forced action, run to the end): tokens it
   processed against the suffix's tokens.
3. wall time of the frame loop (``Rollout.run``: one call per frame, parsing each frame)
   against one raw ``model.generate()`` of the same tokens from the same prompt.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SOURCE = """def walk(n):  # << START_OF_TRACE
    k = 0
    j = 1
    for i in range(n):
        k = i
    return k
"""


def build_model(path: str, hidden: int, layers: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from cwmtui.model.byte_tokenizer import build_byte_tokenizer

    tokenizer = build_byte_tokenizer()
    heads = max(hidden // 64, 2)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=int(hidden * 8 / 3) // 16 * 16,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(heads // 4, 1),
        max_position_embeddings=65536,
        rope_theta=1e6,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|begin_of_text|>"),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=500, help="frames in the trace (about; the program is a loop)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--baseline-frames", type=int, default=40, help="frames the quadratic baseline is actually run for")
    parser.add_argument("--override-at", type=int, default=250)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lean", action="store_true", help="also time the frame loop on the lean decoder (the bundled model's path)")
    args = parser.parse_args()

    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from cwmtui.interpreter import Interpreter, program_from_source
    from cwmtui.model import Rollout, RolloutOptions, RolloutStatus
    from cwmtui.model.hf import TransformersBackend
    from cwmtui.trace import tokens
    from cwmtui.trace.render import frames_segments, prompt_segments

    torch.set_num_threads(args.threads)
    loops = max((args.frames - 6) // 2, 1)
    program = program_from_source(SOURCE, "<walk>", call=f"walk({loops})")
    with Interpreter() as interpreter:
        truth = interpreter.trace(program)
    assert truth.status.ok, truth.status.describe()

    class ScriptedBackend(TransformersBackend):
        script: list[int] = []

        def _choose(self, logits, temperature, top_p, generator) -> int:
            position = len(self._cached)
            return self.script[position] if position < len(self.script) else self.eos_id

    with tempfile.TemporaryDirectory() as directory:
        build_model(directory, args.hidden, args.layers)
        # transformers' forward and DynamicCache, the same as generate() uses (and CWM on a GPU)
        backend = ScriptedBackend(directory, device="cpu", lean=False)
        torch.set_num_threads(args.threads)
        model = backend.model
        script = backend.encode_segments(prompt_segments(program.source) + frames_segments(truth.frames, end=True))
        backend.script = script
        options = RolloutOptions(token_budget=1 << 30, max_frames=1 << 30)
        params = sum(p.numel() for p in model.parameters())
        print(f"model: random Llama, hidden {args.hidden}, {args.layers} layers, {model.config.num_attention_heads} heads "
              f"/ {model.config.num_key_value_heads} kv heads, {params / 1e6:.2f}M params, byte tokenizer, cpu fp32, "
              f"{args.threads} thread(s)")

        # -- 1. the frame loop on the kept cache ---------------------------------------------
        backend.reset()
        started = time.perf_counter()
        rollout = Rollout(backend, program, truth.frames[0], options)
        status = rollout.run()
        loop_seconds = time.perf_counter() - started
        assert status is RolloutStatus.ENDED and rollout.frames == truth.frames, "the scripted rollout is not the trace"
        trace_tokens = rollout.tokens_used
        start_ids = rollout.prompt_tokens + rollout.frames[0].tokens
        generated = len(rollout.ids) - start_ids + 1  # the frames after the entry, and the end of text
        print(f"program: a loop of {loops}: {len(truth.frames)} frames, {trace_tokens} tokens in the trace "
              f"(+{rollout.prompt_tokens} prompt), {generated} generated by the model")
        print()
        print("1. tokens processed by the model / tokens in the final trace")
        print(f"   rollout (kept cache)        {rollout.tokens_processed:>12,}  ratio {rollout.tokens_processed / trace_tokens:8.3f}"
              f"   ({rollout.calls} complete() calls)")

        ends = [rollout.prompt_tokens + sum(f.tokens for f in rollout.frames[: i + 1]) for i in range(len(rollout.frames))]
        ids = rollout.ids

        # -- 2. an override at frame k ---------------------------------------------------------
        k = min(args.override_at, len(rollout.frames) - 2)
        suffix = sum(f.tokens for f in rollout.frames[k:])
        before = rollout.tokens_processed
        started = time.perf_counter()
        rollout.rewind(k)
        first = rollout.step(force_action=truth.frames[k].action)
        override_first = rollout.tokens_processed - before
        rollout.run()
        override_seconds = time.perf_counter() - started
        after = rollout.tokens_processed - before
        assert rollout.frames == truth.frames and first == truth.frames[k]

        # -- 1b. the cwmdbg-style loop: each frame re-sends BOS + context + every frame so far ---
        resent = sum(ends) + sum(f.tokens - 1 for f in rollout.frames[1:])
        print(f"   cwmdbg-style (no cache)     {resent:>12,}  ratio {resent / trace_tokens:8.3f}   (counted: the prefix sent each frame)")
        measured = 0
        started = time.perf_counter()
        frames_run = min(args.baseline_frames, len(ends) - 1)
        for i in range(frames_run):
            backend.reset()
            completion = backend.complete(ids[: ends[i]], [backend.special_ids[tokens.FRAME_SEP]], options.frame_tokens)
            assert completion.ids == ids[ends[i] : ends[i + 1]]
            measured += completion.work
        baseline_seconds = time.perf_counter() - started
        print(f"   cwmdbg-style, run for frames 1-{frames_run}: {measured:,} tokens in {baseline_seconds:.1f} s "
              f"(the rollout ran {ends[frames_run] - ends[0] + 1:,} tokens for those frames)")

        print()
        print(f"2. override at frame {k} (rewind, forced action, run to the end)")
        print(f"   processed {after:,} tokens for a suffix of {suffix:,} tokens (ratio {after / suffix:.3f}); "
              f"the override frame: {override_first} tokens; prefix of {ends[k - 1]:,} tokens re-run: none "
              f"({override_seconds:.1f} s)")

        # -- 3. wall time against one raw generate() -----------------------------------------
        class Script(LogitsProcessor):
            def __call__(self, input_ids, scores):
                forced = torch.full_like(scores, float("-inf"))
                forced[:, script[input_ids.shape[1]]] = 0.0
                return forced

        prompt = torch.tensor([ids[:start_ids]])

        def raw_generate() -> float:
            with torch.inference_mode():
                started = time.perf_counter()
                output = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=generated,
                    do_sample=False,
                    logits_processor=LogitsProcessorList([Script()]),
                    eos_token_id=backend.eos_id,
                    pad_token_id=0,
                )
                seconds = time.perf_counter() - started
            assert output[0].tolist() == ids + [backend.eos_id], "generate() did not produce the same ids"
            return seconds

        def frame_loop() -> float:
            backend.reset()
            started = time.perf_counter()
            again = Rollout(backend, program, truth.frames[0], options)
            again.run()
            seconds = time.perf_counter() - started
            assert again.ids == ids
            return seconds

        # interleaved, so that load from other processes hits both alike
        generate_times = [raw_generate()]
        loop_times = [loop_seconds, frame_loop()]
        generate_times.append(raw_generate())
        loop_best, generate_best = min(loop_times), min(generate_times)
        print()
        print(f"3. wall time for the {generated:,} generated tokens ({len(truth.frames) - 1} frames)")
        print(f"   frame loop (Rollout.run)    {loop_best:8.1f} s   {loop_best / generated * 1000:6.2f} ms/token   "
              f"(best of {', '.join(f'{t:.1f}' for t in loop_times)})")
        print(f"   one model.generate()        {generate_best:8.1f} s   {generate_best / generated * 1000:6.2f} ms/token   "
              f"(best of {', '.join(f'{t:.1f}' for t in generate_times)})")
        print(f"   ratio                       {loop_best / generate_best:8.2f}")
        if args.lean:
            lean = ScriptedBackend(directory, device="cpu")
            torch.set_num_threads(args.threads)
            lean.script = script
            started = time.perf_counter()
            on_lean = Rollout(lean, program, truth.frames[0], options)
            on_lean.run()
            lean_seconds = time.perf_counter() - started
            assert on_lean.ids == ids
            print(f"   frame loop, lean decoder    {lean_seconds:8.1f} s   {lean_seconds / generated * 1000:6.2f} ms/token")
            lean.close()
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
