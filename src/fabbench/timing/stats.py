"""Summary statistics of timing samples (microseconds)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_us: Sequence[float]) -> dict[str, float]:
    s = sorted(samples_us)
    return {"min": s[0], "p50": percentile(s, 50), "mean": statistics.fmean(s),
            "p99": percentile(s, 99), "max": s[-1],
            "stdev": statistics.stdev(s) if len(s) > 1 else 0.0}


MIN_CI_SAMPLES = 6  # below this the order-statistics interval of the median is not defined


def median_ci_halfwidth(samples: Sequence[float]) -> float:
    """Half-width of a distribution-free 95% confidence interval of the median (order statistics,
    normal approximation of the binomial), as a fraction of the median. inf below 6 samples."""
    n = len(samples)
    if n < MIN_CI_SAMPLES:
        return math.inf
    s = sorted(samples)
    k = max(0, math.floor(n / 2 - 1.96 * math.sqrt(n) / 2))
    lo, hi = s[k], s[min(n - 1, n - 1 - k)]
    med = percentile(s, 50)
    return (hi - lo) / 2 / med if med > 0 else math.inf


# The one rule for "stable", defined here only: the timing engine aims for it, every collective
# record carries its verdict (stable, stable_rule, median_ci95_rel), and the report applies it
# (computing it from the samples of records written before it was recorded).
STABLE_REL = 0.05
STABLE_RULE = f"median 95% CI within ±{STABLE_REL:.0%}"


def median_ci95_rel(samples: Sequence[float]) -> float | None:
    """median_ci_halfwidth, None where it cannot be known (too few samples, a zero median)."""
    rel = median_ci_halfwidth(samples)
    return rel if math.isfinite(rel) else None


def is_stable(rel: float | None) -> bool:
    return rel is not None and rel <= STABLE_REL
