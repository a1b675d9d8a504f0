"""Confidence intervals for success rates."""

from __future__ import annotations

import math


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a binomial proportion; (0, 1) when n = 0.

    Wilson rather than the normal approximation because success rates near 0 or 1 (an untrained
    policy) would otherwise get intervals outside [0, 1] or of zero width.
    """
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)
