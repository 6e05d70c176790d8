"""MODEL_CARD.md for an exported model directory, with figures measured on fresh programs.

``cwmtui train --card [--export DIR]`` (or ``python -m cwmtui.training.card [DIR]``).
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..analysis.stats import wilson
from ..interpreter import Interpreter
from ..suites import families, s5, zoo
from .data import MIX, mix_text
from .loop import phases
from .measure import Table, decode_speed, lean_decode_speed, load_model, measure

#: evaluation seeds: disjoint from the training draws (training uses seeds >= 0 for families
#: and >= 1,000,000 for the s5 / zoo programs inside the mix)
CARD_SEED = 7
FAMILY_SEED = -7
META_S5 = {8: 100, 16: 80, 32: 40, 64: 0, 128: 0}
META_STRING_NESTING = {1: 90, 2: 75, 3: 58, 4: 39, 5: 25}
TRAIN_FAMILIES = ("crux", "loop", "helper", "exception", "grow", "story", "copy", "s5", "zoo")


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def pct_interval(share: float, n: int) -> str:
    """``share`` of ``n`` programs with its 95% Wilson interval: at 20-40 programs a figure
    moves by 10-20 points from sample to sample, which matters next to a threshold."""
    if not n:
        return pct(share)
    interval = wilson(round(share * n), n)
    digits = 1 if n >= 200 else 0  # (a large sample's interval is narrower than a point)
    return f"{pct(share)} ({100 * interval.low:.{digits}f}-{100 * interval.high:.{digits}f})"


def byte_pct(row: dict, key: str) -> str:
    """A row's byte-for-byte figure (a card measured before the state-level ones has only those)."""
    return pct(row.get(key + "_bytes", row[key]))


def figures(table) -> dict:
    """A table's exact-match figures: state-level (as ``cwmtui eval`` compares) and byte for byte."""
    return {"programs": len(table.scores), "frame_exact": table.frame_exact, "trace_exact": table.trace_exact,
            "frame_exact_bytes": table.frame_exact_bytes, "trace_exact_bytes": table.trace_exact_bytes}


def measurements(path: str, count: int = 20) -> dict:
    from ..model.opening import open_model_dir

    model = load_model(path)
    out: dict = {"families": {}, "s5": {}, "zoo": {}, "zoo_string": {}}
    t0 = time.time()
    with Interpreter() as interpreter, open_model_dir(path, device="cpu") as backend:
        for fam in TRAIN_FAMILIES:
            programs = [families.program(fam, FAMILY_SEED, i, size=1 + i % 3) for i in range(count)]
            t = measure(model, programs, interpreter, backend)
            out["families"][fam] = figures(t) | {"token_accuracy": t.token_accuracy}
        for n in s5.EVAL_NS:
            # the acceptance figures (N = 8, 16; zoo depth 1-2) on twice the programs: 16 or 20 were too few
            t = measure(model, s5.generate([n], count=2 * count if n <= 16 else 10, seed=CARD_SEED), interpreter, backend)
            out["s5"][n] = figures(t) | {"fits": sum(s.fits for s in t.scores)}
        per = max(1, count // 10)  # programs per (type, form); 2 at the default count: 32 per depth
        for depth in zoo.EVAL_DEPTHS:
            # depths 1-2 are acceptance figures: twice the programs (a superset of the 32)
            progs = zoo.generate(depths=[depth], count=2 * per if depth <= 2 else per, seed=CARD_SEED)
            t = measure(model, progs, interpreter, backend)
            row = figures(t)
            for form in zoo.FORMS:
                row[form] = Table([s for s in t.scores if s.program.meta["form"] == form]).trace_exact
            out["zoo"][depth] = row
            strings = zoo.generate(types=["string"], depths=[depth], count=max(3, count // 3), seed=CARD_SEED)
            out["zoo_string"][depth] = figures(measure(model, strings, interpreter, backend))
        out["samples"] = sample_divergences(backend, interpreter)
    prompt = [259, 267] + [3 + b for b in s5.program(8, CARD_SEED).source.encode()] + [260]
    out["decode_tokens_per_s"] = max(decode_speed(model, prompt) for _ in range(2))
    out["lean_decode_tokens_per_s"] = max(lean_decode_speed(model, prompt) for _ in range(2))
    out["load_average"] = round(os.getloadavg()[0], 1)
    out["measure_seconds"] = round(time.time() - t0)
    return out


SAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "samples")


def sample_divergences(backend, interpreter) -> dict:
    """For each program in samples/: its frames, and where the debugger shows the first
    divergence of a greedy rollout (the step and its kind; None: the whole trace is right)."""
    from ..analysis.compare import compare
    from ..interpreter import ProgramError, load_program
    from ..model.rollout import Rollout
    from .measure import trace_documents

    found: dict = {}
    if not os.path.isdir(SAMPLES):
        return found
    for name in sorted(os.listdir(SAMPLES)):
        if not name.endswith(".py"):
            continue
        try:
            program = load_program(os.path.join(SAMPLES, name))
        except ProgramError:
            continue
        for prog, doc, trace in trace_documents([program], interpreter):
            rollout = Rollout(backend, prog, trace.frames[0])
            rollout.run()
            first = compare(trace, rollout.frames, rollout.status, rollout.partial).first_divergence
            found[name] = {"frames": len(trace.frames), "tokens": len(doc), "first_divergence": first and first.step,
                           "kind": first and first.kind}
    return found


def render(path: str, m: dict) -> str:
    with open(os.path.join(path, "config.json")) as fh:
        config = json.load(fh)
    info = {}
    if os.path.exists(os.path.join(path, "training.json")):
        with open(os.path.join(path, "training.json")) as fh:
            info = json.load(fh)
    size = os.path.getsize(os.path.join(path, "model.safetensors"))
    lines = [
        "# Bundled byte-level CWM",
        "",
        "A small Llama-style decoder trained by cwmtui from scratch on execution traces of generated",
        "Python programs, recorded by cwmtui's own tracer in Meta CWM's trace format. It is loaded",
        "by the same code path as Meta's CWM (`AutoModelForCausalLM` / `AutoTokenizer` on this",
        "directory). It is tiny and trained on a CPU budget: read the figures below before trusting it.",
        "",
        *decoding_section(m),
        "## Architecture",
        "",
        f"- `LlamaForCausalLM`: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, MLP {config['intermediate_size']}, tied embeddings, RoPE, "
        f"context {config['max_position_embeddings']} tokens",
        *([f"- depth over training: {phases_text(info, 'shape')} (each new layer began as a copy of the layer "
           "before it with zeroed output projections: the identity, so the grown model computed what the "
           "smaller one did, then trained on)"] if len(phases(info, "shape")) > 1 else []),
        f"- parameters: {info.get('parameters', 0) / 1e6:.2f}M; weights {size / 1e6:.1f} MB (bf16 safetensors; run in fp32 on CPU)",
        f"- tokenizer: bytes (ids 3-258) + `<|pad|>` 0, `<|end_of_text|>` 1, `<|unk|>` 2, `<|begin_of_text|>` 259, "
        f"the eight trace tokens 260-267; vocabulary padded to {config['vocab_size']}",
        "",
        "## Data",
        "",
        "Fresh programs every step, from `cwmtui/suites/` (never CRUXEval, which is evaluation data):",
        "S5 permutation swaps with any N, zoo compositions (8 types, depth 1-5, nested and flattened),",
        "CRUXEval-style functions over str/list/dict methods (our own generator, in the CRUXEval",
        "wrapper), loops with counters and accumulators, helper calls, caught exceptions, and",
        "programs whose state grows, programs shaped like the demos in `samples/`, and straight-line code "
        "binding random names to random literals (only copying predicts it). "
        f"Default shares: {mix_text(MIX)}. "
        "As real files are written, a share of them open with a module header (docstring, comments, "
        "imports) and a share quote their strings with `\"`: "
        f"{phases_text(info, 'data')}. Each is traced by `cwmtui.interpreter`, rendered as",
        "`prompt + frames + <|end_of_text|>`; the entry CALL frame belongs to the prompt and the",
        "loss covers the frames after it. Length curriculum: documents up to 768 tokens, then",
        "1536, 2560 and 4096.",
        "",
        "## Training",
        "",
        f"- steps: {info.get('step', '?')}; tokens seen: {info.get('tokens', 0) / 1e6:.1f}M "
        f"({info.get('loss_tokens', 0) / 1e6:.1f}M under the loss); training time: "
        f"{info.get('train_seconds', 0) / 3600:.1f} h of compute on 2 shared CPU cores ({phases_text(info, 'precision')}); seed {info.get('seed', '?')}",
        f"- AdamW (0.9, 0.95), weight decay 0.1, peak learning rate {info.get('lr', '?')} after 100 warm-up steps"
        + (f", cosine decay to {info.get('min_lr') or 'a tenth of it'} over {info['decay_tokens'] / 1e6:.0f}M tokens from {info.get('decay_start', 0) / 1e6:.0f}M"
           if info.get("decay_tokens") else "")
        + f", {info.get('batch_tokens', '?')} tokens a step, {info.get('runs', 1)} resumed run(s)",
        "- reproduce: `cwmtui train --out runs/main` (resume with `--resume runs/main`), then "
        "`cwmtui train --resume runs/main --export bundled` and `cwmtui train --card`; to go on from these "
        "weights without the checkpoint: `cwmtui train --init bundled --out runs/more` (fresh optimizer, the token count continues)",
        "- training loss (mean cross-entropy per byte over the trace frames) by tokens seen: "
        + ", ".join(f"{t:g}M {l:.3f}" for t, l in info.get("loss_curve", [])),
        "",
        "## Measured",
        "",
        "Greedy decoding, fresh seeds. *Next-frame exact*: given the true trace so far, the model",
        "writes the next frame right: its event, source line and state (or value). *Whole-trace exact*:",
        "a free-running greedy rollout from the entry frame writes every frame right and then",
        "`<|end_of_text|>`. States are compared as `cwmtui eval` and the debugger compare them, after",
        "resolving `\"..\"` (unchanged): a value written in full where the trace has `\"..\"` is the same",
        "state. The *byte for byte* columns ask for the trace's exact bytes; they come from one",
        "teacher-forced pass, and what that pass finds wrong is generated again to compare states",
        "(`cwmtui/training/measure.py`). A trace longer than the context counts as wrong. Whole-trace",
        "figures carry their 95% interval (Wilson): at 20-40 programs they are coarse (and a zoo depth",
        "counts each program twice, nested and flattened, so its interval is narrower than it should be).",
        "",
        "| training family | programs | next-frame exact | byte for byte | whole-trace exact | byte for byte | token accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for fam, row in m["families"].items():
        lines.append(f"| {fam} | {row['programs']} | {pct(row['frame_exact'])} | {byte_pct(row, 'frame_exact')} | "
                     f"{pct_interval(row['trace_exact'], row['programs'])} | {byte_pct(row, 'trace_exact')} | {pct(row['token_accuracy'])} |")
    lines += ["", "| S5, N = | programs | whole-trace exact (free-running) | byte for byte | next-frame exact (teacher-forced) | byte for byte | Meta CWM free-running |",
              "|---|---|---|---|---|---|---|"]
    for n, row in m["s5"].items():
        fits = "" if row["fits"] == row["programs"] else f" ({row['programs'] - row['fits']} longer than the context)"
        lines.append(f"| {n} | {row['programs']} | {pct_interval(row['trace_exact'], row['programs'])}{fits} | {byte_pct(row, 'trace_exact')} | "
                     f"{pct(row['frame_exact'])} | {byte_pct(row, 'frame_exact')} | {META_S5[int(n)]}% |")
    lines += ["", "| zoo depth | programs | whole-trace exact | byte for byte | nested | flattened | next-frame exact | string type only | Meta CWM string nesting |",
              "|---|---|---|---|---|---|---|---|---|"]
    for d, row in m["zoo"].items():
        s = m["zoo_string"][d]
        lines.append(f"| {d} | {row['programs']} | {pct_interval(row['trace_exact'], row['programs'])} | {byte_pct(row, 'trace_exact')} | {pct(row['nested'])} | "
                     f"{pct(row['flat'])} | {pct(row['frame_exact'])} | {pct(s['trace_exact'])} | {META_STRING_NESTING[int(d)]}% |")
    if m.get("samples"):
        lines += ["", "| samples/ program | frames | tokens | first divergence (greedy; step, kind) |", "|---|---|---|---|"]
        for name, row in m["samples"].items():
            step, kind = row["first_divergence"], row.get("kind")
            if step is None:
                first = "none: whole trace right"
            elif kind == "budget":
                first = f"none before the token budget ran out (step {step})"
            else:
                first = f"{step} ({kind})" if kind else str(step)
            lines.append(f"| {name} | {row['frames']} | {row['tokens']} | {first} |")
        lines += ["", "Step 0 is the entry CALL frame (forced from the truth); step 1 is the first frame the model writes."]
    lines += ["", "Greedy decoding speed (fp32, KV cache, one thread, machine load average "
              f"{m.get('load_average', '?')} while measuring): transformers forward per token "
              f"{m['decode_tokens_per_s']:.0f} tokens/s; `cwmtui.model.llama_decoder.LlamaDecoder` (numpy, what "
              f"`cwmtui` runs) {m.get('lean_decode_tokens_per_s', 0):.0f} tokens/s (see docs/benchmarks.md, also for start-up).", "",
              "Meta CWM figures are the published ones for the 32B model (\"Debugging code world models\",",
              "arXiv 2602.07672): S5 free-running 100/80/40/0/0% at N = 8..128; string nesting 90/75/58/39/25%",
              "at depth 1..5. Regenerate this card with `cwmtui train --card`.", ""]
    return "\n".join(lines)


def decoding_section(m: dict) -> list[str]:
    """The card's word on decoding: cwmtui runs this model under the frame grammar unless
    ``--free``, with the figures of both ways where ``m["constrained"]`` has them (measured by
    ``cwmtui eval`` and ``bench/constrained_decode.py``, not by the card: carried over)."""
    lines = [
        "## Decoding: constrained by default",
        "",
        "cwmtui runs this model **under the program's frame grammar** unless told `--free`: each token",
        "is chosen among those the format allows there (an event; JSON locals of names the program's",
        "scopes have; one of the program's own source lines, byte for byte; a JSON value; the end of",
        "text only once the entry function has returned), a byte mask from",
        "`cwmtui/model/byte_constraint.py`. Every frame it writes parses, so where it goes wrong is",
        "about code (which line, which value), not about JSON. The mask never refuses what the",
        "interpreter writes (tested on every sample and all 800 CRUXEval programs); near the",
        "`--frame-tokens` limit it closes the frame in time, so a runaway value ends as a wrong value.",
        "`--free` gives the raw model (the figures under *Measured* are the raw model's).",
        "",
    ]
    c = m.get("constrained")
    if not c:
        return lines
    n = c["programs"]
    which = f"All {n}" if n == 800 else f"The first {n}"  # (CRUXEval has 800)
    lines += [f"{which} CRUXEval programs (`{c['command']}`, greedy; 95% Wilson intervals; docs/evaluation.md has the tables):", "",
              "| decoding | well-formed traces | output accuracy | first divergence by kind | first divergence at step |",
              "|---|---|---|---|---|"]
    for mode in ("constrained", "free"):
        row = c["modes"][mode]
        kinds = ", ".join(f"{kind} {count}" for kind, count in row["first_divergence"].items())
        steps = ", ".join(f"{step}: {count}" for step, count in row["first_step"].items())
        lines.append(f"| {mode}{' (`--free`)' if mode == 'free' else ''} | {pct_interval(row['well_formed'] / n, n)} | "
                     f"{pct_interval(row['correct_outputs'] / n, n)} | {kinds} | {steps} |")
    speed = c.get("speed")
    if speed:
        rate = speed["tokens_per_s"]
        lines += ["", f"Cost (`{speed['command']}`, load average {speed['load_average']}): "
                  f"{rate['constrained']:.0f} tokens/s constrained against {rate['free']:.0f} free in the same run "
                  f"({rate['free'] / rate['constrained']:.2f}×); the mask itself {speed['mask_us_per_token']:.0f} µs a token; "
                  f"the first model frame on screen {speed['first_frame_s']['constrained']:.2f} s after `cwmtui samples/strings.py` "
                  f"({speed['first_frame_s']['free']:.2f} s with `--free`). See docs/benchmarks.md."]
    return lines + [""]


def phases_text(info: dict, key: str) -> str:
    """'bf16 autocast' or 'bf16 autocast to 10.7M tokens, then fp32' from the export record."""
    record = phases(info, key)
    parts = [record[0][1]]
    for tokens, name in record[1:]:
        parts.append(f"to {tokens / 1e6:.1f}M tokens, then {name}")
    return " ".join(parts)


def write_card(path: str, count: int = 20) -> str:
    m = measurements(path, count)
    try:  # the constrained-decoding figures are measured apart (decoding_section): kept
        with open(os.path.join(path, "measurements.json")) as fh:
            kept = json.load(fh).get("constrained")
    except (OSError, ValueError, AttributeError):
        kept = None
    if kept and "constrained" not in m:
        m["constrained"] = kept
    text = render(path, m)
    with open(os.path.join(path, "MODEL_CARD.md"), "w") as fh:
        fh.write(text)
    with open(os.path.join(path, "measurements.json"), "w") as fh:
        json.dump(m, fh, indent=1)
        fh.write("\n")
    print(f"wrote {os.path.join(path, 'MODEL_CARD.md')} (measured in {m['measure_seconds']} s)")
    return text


if __name__ == "__main__":
    from ..model.opening import BUNDLED_DIR as BUNDLED

    write_card(sys.argv[1] if len(sys.argv) > 1 else BUNDLED)
