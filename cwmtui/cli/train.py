"""``cwmtui train``: train the bundled byte-level CWM on traces of generated programs."""

from __future__ import annotations

import math
import os

from . import UsageError
from ..model.opening import BUNDLED_DIR
from .options import Parser

BUNDLED = BUNDLED_DIR


EXAMPLES = """examples:
  nice -n 10 cwmtui train --out runs/main              # train on CPU until stopped (Ctrl-C / SIGTERM saves)
  nice -n 10 cwmtui train --resume runs/main           # continue where it stopped
  cwmtui train --resume runs/main --export bundled     # export the checkpoint as the bundled model
  cwmtui train --card                                  # measure the bundled model, write MODEL_CARD.md
  nice -n 10 cwmtui train --init bundled --out runs/more --lr 6e-4 --min-lr 3e-5 --decay-tokens 25e6 --decay-start -1
                                                       # keep training the bundled model (no checkpoint needed),
                                                       # annealing again over about the tokens the run will see
  nice -n 10 cwmtui train --init runs/small-export --size deep --out runs/deep --lr 4e-4 --min-lr 1.5e-5 --decay-tokens 28e6 --decay-start -1
                                                       # a 4-layer model's weights grown into 6 layers (the same
                                                       # function to start with), then trained on
  cwmtui train --resume runs/main --device cuda --minutes 8 --batch-tokens 65536 --workers 12
                                                       # a few minutes on a GPU, then --export
"""


def build_parser() -> Parser:
    from ..training.model import SIZES

    import argparse

    parser = Parser(prog="cwmtui train", formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Train the bundled byte-level CWM on traces of generated programs (fresh data every step). "
        "Checkpoints go to --out; --resume continues a run; --export writes a Hugging Face directory."),
        epilog=EXAMPLES)
    parser.add_argument("--out", metavar="DIR", help="checkpoint directory (default: runs/train, or the --resume directory)")
    parser.add_argument("--minutes", type=float, metavar="M", help="stop cleanly after M minutes and save")
    parser.add_argument("--steps", type=int, metavar="N", help="stop after step N (counted over all runs)")
    parser.add_argument("--resume", metavar="DIR", help="continue from the checkpoint in DIR")
    parser.add_argument("--init", metavar="DIR", help="start from the weights of an exported model directory ('bundled': the package's model) with a fresh optimizer; the token count continues")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto", help="auto: bf16 autocast on CUDA, fp32 on CPU (bf16 is emulated, ~12x slower, on CPUs without bf16 units)")
    parser.add_argument("--size", choices=sorted(SIZES), default="small", help="model shape (default small; deep: small with 6 layers, grown from a small model's weights by --init, computing what it did)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-tokens", type=int, default=8192, metavar="N", help="tokens per optimizer step")
    parser.add_argument("--micro-tokens", type=int, metavar="N", help="tokens per forward pass (default: --batch-tokens)")
    parser.add_argument("--lr", type=float, help="peak learning rate (default 3e-3; a resumed run keeps its own)")
    parser.add_argument("--min-lr", type=float, help="the rate the decay ends at (default 3e-4; a resumed run keeps its own)")
    parser.add_argument("--decay-tokens", type=float, metavar="N", help="cosine-decay the learning rate to --min-lr over N tokens seen (default: constant; 0: constant; a resumed run keeps its own)")
    parser.add_argument("--decay-start", type=float, metavar="T", help="begin the decay at T tokens seen ('-1': now, the tokens seen so far), for an annealing phase (default 0; a resumed run keeps its own)")
    parser.add_argument("--mix", metavar="F=W,...", help="the families' weights in the training data, e.g. 'zoo=0.3,s5=0.25' (the rest keep theirs; 0 leaves one out; 'default': the default mix; a resumed run keeps its own)")
    parser.add_argument("--threads", type=int, default=2, help="most torch threads on CPU (the loop picks 1..N, whichever trains faster on the shared machine)")
    parser.add_argument("--workers", type=int, default=1, help="processes generating and tracing programs (raise it on a GPU)")
    parser.add_argument("--checkpoint-minutes", type=float, default=5.0, metavar="M")
    parser.add_argument("--eval-minutes", type=float, default=10.0, metavar="M", help="measure held-out exact match every M minutes (0: never)")
    parser.add_argument("--export", metavar="DIR", help="export the checkpoint (--resume DIR or --out) as a Hugging Face model directory and exit ('bundled': the package's model)")
    parser.add_argument("--card", action="store_true", help="measure the model in --export DIR (default bundled) and write its MODEL_CARD.md")
    return parser


def run(args) -> int:
    from ..extras import require

    for module in ("torch", "transformers", "safetensors"):
        require(module, "train", "cwmtui train", UsageError)
    from ..training.loop import CheckpointError

    try:
        return _train(args)
    except CheckpointError as exc:  # a damaged or foreign checkpoint (--resume, --export, --card)
        raise UsageError(str(exc)) from None


def _train(args) -> int:
    from ..training.loop import TrainOptions, export_checkpoint, train

    # the command prints its own progress; transformers' bars for loading and saving one small
    # file would only interleave with it (read when transformers is imported, so set it first)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if args.export and args.export == "bundled":
        args.export = BUNDLED
    if args.card:
        from ..training.card import write_card

        target = args.export or BUNDLED
        if args.resume or args.out:
            info = export_checkpoint(args.resume or args.out, target)
            print(f"exported step {info['step']} ({info['tokens'] / 1e6:.1f}M tokens) to {target}")
        write_card(target)
        return 0
    if args.export:
        source = args.resume or args.out
        if not source:
            raise UsageError("--export needs the checkpoint: --resume DIR (or --out DIR)")
        try:
            info = export_checkpoint(source, args.export)
        except FileNotFoundError as exc:
            raise UsageError(str(exc)) from None
        print(f"exported step {info['step']} ({info['tokens'] / 1e6:.1f}M tokens, {info['parameters'] / 1e6:.2f}M parameters) to {args.export}")
        return 0
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device here")
    if args.resume and not os.path.exists(os.path.join(args.resume, "checkpoint.pt")):
        raise UsageError(f"{args.resume}: no checkpoint.pt to resume from")
    if args.init == "bundled":
        args.init = BUNDLED
    if args.init and args.resume:
        raise UsageError("--init starts a new run from exported weights; --resume continues a checkpoint: use one")
    if args.init and not os.path.exists(os.path.join(args.init, "model.safetensors")):
        raise UsageError(f"{args.init}: no model.safetensors to start from")
    # `not x > 0` also refuses NaN, which compares false with everything and would never stop a run
    if args.minutes is not None and not args.minutes > 0:
        raise UsageError("--minutes must be positive")
    for option, value in (("--steps", args.steps), ("--batch-tokens", args.batch_tokens), ("--micro-tokens", args.micro_tokens),
                          ("--threads", args.threads), ("--checkpoint-minutes", args.checkpoint_minutes),
                          ("--lr", args.lr)):
        if value is not None and not 0 < value < math.inf:
            raise UsageError(f"{option} must be positive (and finite)")
    for option, value in (("--min-lr", args.min_lr), ("--decay-tokens", args.decay_tokens)):
        if value is not None and not 0 <= value < math.inf:
            raise UsageError(f"{option} must be 0 or more (and finite)")
    if args.decay_start is not None and not math.isfinite(args.decay_start):
        raise UsageError("--decay-start must be a number of tokens, or -1 (now)")
    mix = None
    if args.mix is not None:
        from ..training.data import parse_mix

        try:
            mix = parse_mix(args.mix)
        except ValueError as exc:
            raise UsageError(f"--mix: {exc}") from None
    out = args.out or args.resume or os.path.join("runs", "train")
    if not args.resume and os.path.exists(os.path.join(out, "checkpoint.pt")):
        # a new run would write its first checkpoint over that one, hours of training lost
        raise UsageError(f"{out} already holds a checkpoint: --resume {out} continues it, or pick another --out")
    opts = TrainOptions(
        out=out,
        size=args.size, device=args.device, seed=args.seed, minutes=args.minutes, steps=args.steps,
        batch_tokens=args.batch_tokens, micro_tokens=args.micro_tokens or args.batch_tokens,
        lr=args.lr, min_lr=args.min_lr, decay_tokens=None if args.decay_tokens is None else int(args.decay_tokens),
        decay_start=None if args.decay_start is None else int(args.decay_start),
        checkpoint_minutes=args.checkpoint_minutes, threads=args.threads, resume=args.resume, init=args.init, precision=args.precision,
        workers=max(1, args.workers), eval_minutes=max(0.0, args.eval_minutes), mix=mix,
    )
    train(opts)
    return 0
