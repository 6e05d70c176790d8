"""The frame limit under llguidance (#26): what following a BPE frame through the byte automaton
(``FrameCloser``) costs beside llguidance's own mask, in one run, and how far from the limit it
can steer a frame the model would have closed in time.

Over the true traces of CRUXEval programs with CWM's tokenizer (128,256 ids; needs the
``cwm-tokenizer`` and ``constrain`` extras), each frame as the rollout asks for it:

- per token: llguidance's mask and advance (``compute_bitmask`` + ``consume_token``), and the
  follower's advance (``FrameCloser.take``), timed apart;
- near the limit: one ``GuidedFilter.allowed`` inside a value, far from the limit (llguidance's
  mask alone) and within the last tokens (the follower tries the tokens that could end it);
- the excess: for each true frame, the most by which the follower's count of the tokens that
  close it (an upper bound) exceeds what the frame really took; a frame that ends within that
  many tokens of ``--frame-tokens`` is the only kind that can be steered.

    python bench/frame_limit_bpe.py [--cruxeval 200]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cwmtui.interpreter import Interpreter, cruxeval_program, program_from_source  # noqa: E402
from cwmtui.model import Rollout, RolloutOptions  # noqa: E402
from cwmtui.model.frame_grammar import FrameConstraint, FrameGrammar  # noqa: E402
from cwmtui.trace import Event, tokens  # noqa: E402
from tests.test_constraint import TruthBackend  # noqa: E402  (writes the true frames, a call each)

CRUXEVAL = os.path.join(ROOT, "cwmtui", "data", "cruxeval", "cruxeval.jsonl")
UNLIMITED = RolloutOptions(token_budget=1 << 40, frame_tokens=1 << 30, max_frames=1 << 30, constrain=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cruxeval", type=int, default=200, help="CRUXEval programs (default 200; 800 is all)")
    args = parser.parse_args()

    import llguidance
    import llguidance.tiktoken

    from cwmtui.model.cwm_tokenizer import CWMTokenizer
    from cwmtui.model.guided import FrameCloser, GuidedGrammars

    cwm = CWMTokenizer("cwm")
    end = cwm.special_ids[tokens.END_OF_TEXT]
    lltok = llguidance.tiktoken.lltokenizer_from_encoding(cwm._encoding, n_vocab=cwm.vocab_size, eos_token=end)
    grammars = GuidedGrammars.of_lltokenizer(lltok, cwm.vocab_size, cwm.special_ids)
    vocabulary = grammars.vocabulary  # (built once per tokenizer: not a token's cost)
    compiled: dict[str, object] = {}
    spent = {"llguidance": 0.0, "follower": 0.0}
    counted = 0
    excess: collections.Counter = collections.Counter()
    longest = 0
    over_limit = 0  # true frames longer than the default --frame-tokens

    def seen(constraint: FrameConstraint, ids):  # (TruthBackend's check: None, nothing refused)
        nonlocal counted, longest, over_limit
        text = constraint.grammar.lark(constraint)
        if text not in compiled:
            compiled[text] = llguidance.LLMatcher(lltok, llguidance.grammar_from("lark", text))
        matcher = compiled[text].deep_copy()
        began = time.perf_counter()
        for token in ids:
            matcher.compute_bitmask()
            matcher.consume_token(token)
        spent["llguidance"] += time.perf_counter() - began
        closer = FrameCloser(grammars._token_costs(constraint.grammar), vocabulary, constraint)
        began = time.perf_counter()
        for token in ids:
            closer.take(token)
        spent["follower"] += time.perf_counter() - began
        counted += len(ids)
        longest = max(longest, len(ids))
        over_limit += len(ids) > RolloutOptions().frame_tokens
        closer = FrameCloser(grammars._token_costs(constraint.grammar), vocabulary, constraint)
        worst = 0
        for index, token in enumerate(ids):
            closer.take(token)
            if closer.automaton is None:
                raise SystemExit(f"the follower lost a true frame: {cwm.decode(ids)!r}")
            worst = max(worst, closer.automaton.rest() - (len(ids) - index - 1))
        excess[worst] += 1
        return None

    with open(CRUXEVAL, encoding="utf-8") as handle:
        samples = [json.loads(line) for line in handle if line.strip()][: args.cruxeval]
    with Interpreter() as interpreter:
        for sample in samples:
            program = cruxeval_program(sample["code"], sample["input"])
            truth = interpreter.trace(program)
            Rollout(TruthBackend(cwm, program, truth.frames, seen), program, None, UNLIMITED).run()

    frames = sum(excess.values())
    print(f"{len(samples)} CRUXEval programs, {frames} true frames, {counted} tokens (longest frame {longest}; "
          f"{over_limit} over the default --frame-tokens {RolloutOptions().frame_tokens})")
    print(f"per token: llguidance mask + advance {spent['llguidance'] / counted * 1e6:7.1f} µs   "
          f"follower {spent['follower'] / counted * 1e6:6.1f} µs")

    # one mask inside a value: far from the limit, then within its last tokens
    loop = "def f(n):  # << START_OF_TRACE\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n"
    source = program_from_source(loop, "<f>", call="f(3)").source
    mask = grammars.filter(FrameConstraint(FrameGrammar.of_source(source), events=(Event.LINE,), close_within=True))
    for token in [cwm.special_ids[Event.LINE.token]] + cwm.encode('{"n": "11'):
        mask.allowed(1000)
        mask.take(token)
    for room in (1000, 20):
        timings = []
        for _ in range(20):
            began = time.perf_counter()
            allowed = mask.allowed(room)
            timings.append(time.perf_counter() - began)
        print(f"one mask inside a value, {room:4d} tokens of room: {sorted(timings)[len(timings) // 2] * 1e3:6.2f} ms "
              f"({len(allowed)} ids allowed)")

    print("excess of the follower's count over the tokens a true frame took:")
    share = 0
    for k in sorted(excess):
        share += excess[k]
        print(f"  <= {k:2d} tokens: {share / frames:7.2%} of frames")


if __name__ == "__main__":
    main()
