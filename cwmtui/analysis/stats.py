"""The statistics an evaluation reports with every proportion: its 95% interval, the interval of a
difference between two conditions, and pass@k.

Wilson's score interval (not the normal approximation, which leaves [0, 1] and collapses at 0
and n); Newcombe's hybrid score interval for a difference of two independent proportions (built
from the two Wilson intervals); the unbiased pass@k estimator of Chen et al. (2021), as the
CRUXEval harness computes it. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


@dataclass(frozen=True)
class Proportion:
    """``successes`` of ``n``, with its interval: what a table, a JSON report and a plot show."""

    successes: int
    n: int
    low: float
    high: float

    @property
    def value(self) -> float | None:
        return self.successes / self.n if self.n else None

    def to_json(self) -> dict:
        return {"value": self.value, "successes": self.successes, "n": self.n, "ci95": [self.low, self.high]}

    def describe(self) -> str:
        """``80.0% [49.0–94.3] (8/10)``, or ``— (0/0)``."""
        if not self.n:
            return "— (0/0)"
        return f"{100 * self.successes / self.n:.1f}% [{100 * self.low:.1f}–{100 * self.high:.1f}] ({self.successes}/{self.n})"


def wilson(successes: int, n: int, z: float = Z95) -> Proportion:
    """Wilson's score interval of ``successes`` out of ``n`` (n = 0: the whole of [0, 1])."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"wilson({successes}, {n}): need 0 <= successes <= n")
    if n == 0:
        return Proportion(0, 0, 0.0, 1.0)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # (exactly 0 and 1 at the ends: no rounding just inside or outside them)
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Proportion(successes, n, low, high)


@dataclass(frozen=True)
class Difference:
    """``first - second`` of two proportions, with Newcombe's 95% interval."""

    first: Proportion
    second: Proportion
    low: float
    high: float

    @property
    def value(self) -> float | None:
        if self.first.value is None or self.second.value is None:
            return None
        return self.first.value - self.second.value

    def to_json(self) -> dict:
        return {"value": self.value, "ci95": [self.low, self.high],
                "first": self.first.to_json(), "second": self.second.to_json()}

    def describe(self) -> str:
        """``+12.5 points [-3.1, +27.0]``."""
        if self.value is None:
            return "—"
        return f"{100 * self.value:+.1f} points [{100 * self.low:+.1f}, {100 * self.high:+.1f}]"


def difference(first: Proportion, second: Proportion) -> Difference:
    """Newcombe's hybrid score interval (method 10) for ``first - second``, independent samples."""
    if not first.n or not second.n:
        return Difference(first, second, -1.0, 1.0)
    p1, p2 = first.successes / first.n, second.successes / second.n
    d = p1 - p2
    low = d - math.sqrt((p1 - first.low) ** 2 + (second.high - p2) ** 2)
    high = d + math.sqrt((first.high - p1) ** 2 + (p2 - second.low) ** 2)
    return Difference(first, second, max(-1.0, low), min(1.0, high))


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``n`` samples of which ``correct`` are right:
    1 - C(n - c, k) / C(n, k), in the product form that neither overflows nor cancels."""
    if not 0 <= correct <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k(n={n}, correct={correct}, k={k}): need 0 <= correct <= n and 1 <= k <= n")
    if n - correct < k:
        return 1.0
    product = 1.0
    for i in range(n - correct + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product
