"""The bundled model decoding under the frame grammar (#26): tokens/s constrained vs free, in one
run, and the time to its first model frame.

For each program (the samples, then the first CRUXEval programs) one free and one constrained
rollout run back to back, each round in the other order, so machine load falls on both alike;
tokens/s is each mode's generated tokens over its rollouts' time (the prompt's prefill
included, as a user waits for it), best of ``--repeat`` rounds. The mask's own cost is timed
apart (``FrameAutomaton.allowed`` and ``take``, per generated token). The first model frame is
timed in a fresh interpreter, imports included: open the bundled model, trace the program, and
write the first frame after the forced entry call (what the debugger shows as step 1).

    python bench/constrained_decode.py [--cruxeval 10] [--repeat 3] [--token-budget 1500]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FIRST_FRAME = """
import sys, time
began = time.perf_counter()
from cwmtui.interpreter import Interpreter, load_program
from cwmtui.model import Rollout, RolloutOptions
from cwmtui.model.opening import open_bundled
backend = open_bundled(device="cpu")
with Interpreter() as interpreter:
    program = load_program(sys.argv[1])
    truth = interpreter.trace(program)
    rollout = Rollout(backend, program, truth.frames[0], RolloutOptions(constrain=sys.argv[2] == "1"))
    frame = rollout.step()
print(time.perf_counter() - began, frame is not None and not frame.is_error)
"""


def programs(count: int):
    from cwmtui.evaluation.suite import CRUXEVAL_DATA
    from cwmtui.interpreter import cruxeval_program, load_program

    chosen = [load_program(os.path.join(ROOT, "samples", name)) for name in sorted(os.listdir(os.path.join(ROOT, "samples"))) if name.endswith(".py")]
    with open(CRUXEVAL_DATA, encoding="utf-8") as handle:
        for line in list(handle)[:count]:
            sample = json.loads(line)
            chosen.append(cruxeval_program(sample["code"], sample["input"], path=sample["id"]))
    return chosen


class MaskClock:
    """Times FrameAutomaton.allowed and take (the mask's whole cost per token)."""

    def __init__(self) -> None:
        from cwmtui.model import byte_constraint

        self.seconds = 0.0
        self.tokens = 0
        automaton = byte_constraint.FrameAutomaton
        allowed, take = automaton.allowed, automaton.take

        def timed_allowed(a, room=None):
            began = time.perf_counter()
            try:
                return allowed(a, room)
            finally:
                self.seconds += time.perf_counter() - began

        def timed_take(a, token):
            began = time.perf_counter()
            try:
                return take(a, token)
            finally:
                self.seconds += time.perf_counter() - began
                self.tokens += 1

        automaton.allowed, automaton.take = timed_allowed, timed_take


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cruxeval", type=int, default=10, help="CRUXEval programs after the samples (default 10)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--token-budget", type=int, default=1500)
    args = parser.parse_args()

    from cwmtui.interpreter import Interpreter
    from cwmtui.model import Rollout, RolloutOptions
    from cwmtui.model.opening import open_bundled

    backend = open_bundled(device="cpu")
    clock = MaskClock()
    with Interpreter() as interpreter:
        cases = [(p, interpreter.trace(p)) for p in programs(args.cruxeval)]
    best = {False: 0.0, True: 0.0}
    stats = {}
    for round_ in range(args.repeat):
        totals = {False: [0, 0.0, 0, 0], True: [0, 0.0, 0, 0]}  # tokens, seconds, frames, format errors
        mask_before = (clock.seconds, clock.tokens)
        for number, (program, truth) in enumerate(cases):
            order = (False, True) if (number + round_) % 2 == 0 else (True, False)
            for constrain in order:
                backend.reset()  # each rollout prefills its own prompt
                options = RolloutOptions(token_budget=args.token_budget, constrain=constrain)
                began = time.perf_counter()
                rollout = Rollout(backend, program, truth.frames[0], options)
                rollout.run()
                took = time.perf_counter() - began
                generated = rollout.frames[1:]
                total = totals[constrain]
                total[0] += sum(f.tokens for f in generated)
                total[1] += took
                total[2] += len(generated)
                total[3] += sum(1 for f in generated if f.is_error)
        for constrain, (count, seconds, frames, errors) in totals.items():
            rate = count / seconds
            if rate > best[constrain]:
                best[constrain] = rate
                stats[constrain] = (count, seconds, frames, errors)
        mask_seconds, mask_tokens = clock.seconds - mask_before[0], clock.tokens - mask_before[1]
    firsts = {constrain: first_frame(constrain, args.repeat) for constrain in (False, True)}

    load = os.getloadavg()[0]
    print(f"bundled model ({backend.description}); {len(cases)} programs (samples + {args.cruxeval} CRUXEval), "
          f"budget {args.token_budget} tokens each, greedy; best of {args.repeat} rounds; load average {load:.1f}")
    print(f"{'mode':<12} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'frames':>7} {'format errors':>14}")
    for constrain in (False, True):
        count, seconds, frames, errors = stats[constrain]
        name = "constrained" if constrain else "free"
        print(f"{name:<12} {count:>7} {seconds:>8.2f} {count / seconds:>9.0f} {frames:>7} {errors:>14}")
    print(f"free / constrained tokens/s: {best[False] / best[True]:.2f}x (target: within 1.3x)")
    print(f"the mask itself (allowed + take): {mask_seconds / max(mask_tokens, 1) * 1e6:.1f} us per token "
          f"over the last round's {mask_tokens} constrained tokens")
    print("first model frame, fresh interpreter, imports included (samples/compose.py), best of "
          f"{args.repeat}: free {firsts[False]:.2f} s, constrained {firsts[True]:.2f} s (target: under 2 s)")


def first_frame(constrain: bool, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, "-c", FIRST_FRAME, os.path.join(ROOT, "samples", "compose.py"), "1" if constrain else "0"],
                              capture_output=True, text=True, check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
        seconds, ok = done.stdout.split()
        assert ok == "True", done.stdout
        times.append(float(seconds))
    return min(times)


if __name__ == "__main__":
    main()
