"""#25: every proportion with its 95% interval; differences between conditions; pass@k —
against values computed by hand (and the published ones)."""

from __future__ import annotations

import math
from itertools import combinations

import pytest

from cwmtui.analysis.stats import difference, pass_at_k, wilson


def test_wilson_interval_of_8_out_of_10_is_the_textbook_one():
    # p = 0.8, z^2 = 3.8415: centre (0.8 + 0.19207) / 1.38415 = 0.71683,
    # half 1.95996 * sqrt(0.016 + 0.0096033) / 1.38415 = 0.22660 -> [0.4902, 0.9434]
    p = wilson(8, 10)
    assert p.value == 0.8
    assert p.low == pytest.approx(0.4902, abs=1e-4) and p.high == pytest.approx(0.9433, abs=1e-4)
    assert p.describe() == "80.0% [49.0–94.3] (8/10)"
    assert p.to_json() == {"value": 0.8, "successes": 8, "n": 10, "ci95": [p.low, p.high]}


def test_wilson_at_the_edges_stays_in_zero_one_and_is_not_a_point():
    none, every = wilson(0, 40), wilson(40, 40)
    assert none.low == 0.0 and 0.08 < none.high < 0.09  # 0/40: [0, 0.0876]
    assert every.high == 1.0 and 0.91 < every.low < 0.92
    assert wilson(0, 0).describe() == "— (0/0)" and (wilson(0, 0).low, wilson(0, 0).high) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson(5, 4)


def test_newcombe_difference_of_two_proportions():
    # Newcombe (1998), table II, example (a): 56/70 - 48/80 = 0.2, 95% CI [0.0524, 0.3339]
    d = difference(wilson(56, 70), wilson(48, 80))
    assert d.value == pytest.approx(0.2)
    assert d.low == pytest.approx(0.0524, abs=1e-4) and d.high == pytest.approx(0.3339, abs=1e-4)
    assert d.describe() == "+20.0 points [+5.2, +33.4]"


def test_pass_at_k_is_the_unbiased_estimator():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # c / n
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 3, 3) == 1.0  # n - c < k: a right one is always drawn
    # against the definition: the share of k-subsets of the n samples holding a right one
    samples = [True, False, False, True, False, False, False]
    for k in range(1, len(samples) + 1):
        subsets = list(combinations(samples, k))
        expected = sum(any(s) for s in subsets) / len(subsets)
        assert pass_at_k(len(samples), sum(samples), k) == pytest.approx(expected)
    assert math.isfinite(pass_at_k(1000, 3, 100))
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 6)


def test_pass_at_k_of_a_run_averages_the_unbiased_estimates_over_programs():
    from cwmtui.analysis.report import aggregate

    def record(correct: list[bool], kinds: list[str | None]) -> dict:
        samples = [{"output": {"correct": c}, "first_divergence": {"kind": k, "step": 2} if k in ("state", "action") else None,
                    "class": k if k in ("state", "action", "unclassified") else "agree"}
                   for c, k in zip(correct, kinds)]
        return {"output": {"correct": correct[0]}, "frames": {"truth": 3, "model": 3, "action_matches": 3,
                "state_matches": 3}, "samples": samples, "status": "ended"}

    records = [record([True, False, True, False], [None, "state", "unclassified", "action"]),
               record([False] * 4, ["action"] * 4)]
    sampled = aggregate(records)["samples"]
    assert (sampled["programs"], sampled["samples"]) == (2, 4)
    # program 1: n=4, c=2: pass@1 = 1/2, pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass@4 = 1; program 2: 0
    assert sampled["pass_at_k"]["1"]["value"] == pytest.approx(0.25)
    assert sampled["pass_at_k"]["2"]["value"] == pytest.approx(5 / 12)
    assert sampled["pass_at_k"]["4"]["value"] == pytest.approx(0.5)
    assert list(sampled["pass_at_k"]) == ["1", "2", "4"]
    # the normal interval of the mean over the two programs: 0.25 ± 1.96 · stdev([0.5, 0]) / √2
    low, high = sampled["pass_at_k"]["1"]["ci95"]
    assert (low, high) == (0.0, pytest.approx(0.25 + 1.959963984540054 * 0.3535533905932738 / 2 ** 0.5))
    # (review: a sample cut off with every frame right is "unclassified", not "agree")
    assert sampled["first_divergence_kinds"] == {"action": 5, "agree": 1, "state": 1, "unclassified": 1}
    assert sampled["programs_right_at_least_once"] == 1
