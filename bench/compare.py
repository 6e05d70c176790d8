"""Cost of comparing a rollout with the truth: the alignment after an action divergence.

    python bench/compare.py [--n N] [--repeat R]

Workload: a loop program traced by the interpreter (about ``3 * N`` frames); model frames are
the truth's CWM text parsed back, then perturbed in three ways:

* ``identical``   the model agrees everywhere (no alignment past the common prefix);
* ``one skip``    the model skips one frame early on (one action divergence, then the paths
  re-synchronise);
* ``many skips``  the model skips every 7th frame after step 10 (a drifting path: hundreds of
  divergences in a repetitive loop, the hard case for an aligner).

Aligners, timed on the same frames in the same run (best of ``R``):

* ``greedy``  ``compare()`` as shipped: the common prefix, then a windowed greedy re-sync;
* ``difflib`` the baseline: ``compare()`` with the tail aligned by ``difflib.SequenceMatcher``
  (longest matching blocks, ``autojunk`` off), which the first version used.

Also printed: the rows each produces (fewer rows = fewer one-sided rows = a tighter
alignment), and the cost of re-comparing after every frame while a rollout streams (what a UI
that refreshes the comparison per frame pays over a whole rollout).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cwmtui.analysis import compare as compare_module  # noqa: E402
from cwmtui.trace import RolloutStatus  # noqa: E402
from cwmtui.interpreter import Interpreter, program_from_source  # noqa: E402
from cwmtui.trace import parse_trace, render_frames  # noqa: E402

SOURCE = """\
def f(n):  # << START_OF_TRACE
    s = ''
    for i in range(n):
        if i % 3 == 0:
            s += 'a'
        else:
            s += 'b'
    return s

f({n})
"""


def difflib_alignment(truth_keys, model_keys, start, same=None):
    a, b = truth_keys[start:], model_keys[start:]
    rows = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [(start + i1 + k, start + j1 + k) for k in range(i2 - i1)]
            continue
        paired = min(i2 - i1, j2 - j1) if tag == "replace" else 0
        rows += [(start + i1 + k, start + j1 + k) for k in range(paired)]
        rows += [(start + i, None) for i in range(i1 + paired, i2)]
        rows += [(None, start + j) for j in range(j1 + paired, j2)]
    return rows


def timed(fn, repeat):
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=600, help="loop iterations (about 3 frames each)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    program = program_from_source(SOURCE.format(n=args.n), "bench.py")
    with Interpreter() as interpreter:
        truth = interpreter.trace(program)
    frames = parse_trace(render_frames(truth.frames, end=True), source=program.source).frames
    cases = {
        "identical": frames,
        "one skip": frames[:10] + frames[11:],
        "many skips": frames[:10] + [f for i, f in enumerate(frames[10:]) if i % 7 != 0],
    }
    shipped = compare_module._rest_alignment
    print(f"truth: {len(truth.frames)} frames (n={args.n}), best of {args.repeat}")
    print(f"{'case':<12} {'aligner':<8} {'seconds':>9} {'rows':>6}  first divergence")
    for name, model in cases.items():
        for aligner, function in (("greedy", shipped), ("difflib", difflib_alignment)):
            compare_module._rest_alignment = function
            try:
                seconds, result = timed(lambda model=model: compare_module.compare(truth, model, RolloutStatus.ENDED), args.repeat)
            finally:
                compare_module._rest_alignment = shipped
            first = result.first_divergence
            where = f"step {first.step} ({first.kind})" if first else "-"
            print(f"{name:<12} {aligner:<8} {seconds:>9.3f} {len(result.steps):>6}  {where}")

    # a UI that re-compares after every streamed frame: the whole rollout, frame by frame
    model = cases["one skip"]
    start = time.perf_counter()
    for k in range(1, len(model) + 1):
        compare_module.compare(truth, model[:k], RolloutStatus.RUNNING)
    total = time.perf_counter() - start
    print(f"streaming: re-compare after each of {len(model)} frames: {total:.2f} s in all, {1000 * total / len(model):.2f} ms per frame")


if __name__ == "__main__":
    main()
