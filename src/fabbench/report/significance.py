"""Is a number stable, and is a difference real? numpy only (no scipy).

- stable: the one rule of timing.stats (STABLE_RULE: the distribution-free 95 % interval of
  the median within ±STABLE_REL of it), as recorded with each point (the loader derives it for
  points written before it was recorded, fabbench/1); why_unstable says why a point fails it.
- Mann-Whitney U (two-sided, normal approximation with tie and continuity corrections).
- bootstrap 95 % confidence interval of the ratio of medians (B / A), seeded: reproducible.
A difference is called real only when both agree: p < ALPHA and the interval excludes 1.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fabbench.timing.stats import MIN_CI_SAMPLES, STABLE_REL

if TYPE_CHECKING:
    import numpy as np  # imported where a comparison is computed: a report needs none of it

ALPHA = 0.05
BOOTSTRAP = 2000
MIN_TEST_SAMPLES = 5  # samples a side needs before two points are tested
_SEED = 20200922  # HPEC 2020


def why_unstable(stable: bool, ci95_rel: float | None, samples: int) -> str | None:
    """Why a point is not stable by the one rule (STABLE_RULE), or None when it is. ``stable``
    is its verdict as recorded, ``ci95_rel`` the half-width of its median's 95 % interval over
    the median (None: unknown), ``samples`` how many samples it holds."""
    if stable:
        return None
    if ci95_rel is None:
        return f"only {samples} samples" if samples < MIN_CI_SAMPLES else "median 95% CI unknown"
    return f"median 95% CI ±{100 * ci95_rel:.0f}% (wider than ±{STABLE_REL:.0%})"


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """U statistic of ``a`` and the two-sided p-value (normal approximation)."""
    import numpy as np

    x, y = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    both = np.concatenate([x, y])
    ranks = _rankdata(both)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    mu = n1 * n2 / 2
    _, counts = np.unique(both, return_counts=True)
    n = n1 + n2
    tie = float((counts ** 3 - counts).sum()) / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie))
    if sigma == 0:
        return u1, 1.0
    z = (abs(u1 - mu) - 0.5) / sigma
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def _rankdata(values: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties sharing the mean of their ranks."""
    import numpy as np

    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), float)
    ranks[order] = np.arange(1, len(values) + 1)
    uniq, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    counts = np.bincount(inverse)
    return (sums / counts)[inverse]


@functools.lru_cache(maxsize=1024)
def _after_first_draw(nx: int, resamples: int) -> Mapping[str, Any]:
    """The seeded generator's state once it has drawn A's resampling indices (nx samples): B's
    are its next draw. Every comparison of nx samples draws the same: a state is kept, not the
    draws (their sizes vary point by point)."""
    import numpy as np

    rng = np.random.default_rng(_SEED)
    rng.integers(0, nx, (resamples, nx))
    return rng.bit_generator.state


@functools.lru_cache(maxsize=512)
def _baseline_medians(samples: tuple[float, ...], resamples: int) -> np.ndarray:
    """The medians of A's bootstrap resamples (the seeded generator's first draw). A compare of
    many runs against one tests each of A's points again and again: they are made once."""
    import numpy as np

    draws = np.random.default_rng(_SEED).integers(0, len(samples), (resamples, len(samples)))
    medians: np.ndarray = np.median(np.asarray(samples, float)[draws], axis=1)
    medians.flags.writeable = False
    return medians


def bootstrap_median_ratio(a: Sequence[float], b: Sequence[float],
                           resamples: int = BOOTSTRAP, level: float = 0.95
                           ) -> tuple[float, float, float]:
    """median(b) / median(a) and its percentile bootstrap interval."""
    import numpy as np

    x, y = np.asarray(a, float), np.asarray(b, float)
    if len(x) == 0 or len(y) == 0 or np.median(x) <= 0:
        raise ValueError("a ratio of medians needs positive samples on both sides")
    rng = np.random.default_rng(_SEED)
    rng.bit_generator.state = _after_first_draw(len(x), resamples)
    my = np.median(y[rng.integers(0, len(y), (resamples, len(y)))], axis=1)
    ratios = my / _baseline_medians(tuple(x.tolist()), resamples)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(np.median(y) / np.median(x)), float(low), float(high)


@dataclass(frozen=True)
class Verdict:
    """B against A at one point: the time ratio B / A (< 1: B is faster); is it real?"""

    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str  # "faster", "slower", "same", "too few samples", "no samples"

    @property
    def significant(self) -> bool:
        return self.verdict in ("faster", "slower")


def median_ratio(a: float, b: float) -> float:
    """B's median over A's (infinite when A's is not positive)."""
    return b / a if a > 0 else math.inf


def compare_samples(a: Sequence[float], b: Sequence[float], *, ratio: float) -> Verdict:
    """B against A at one point, from their samples. ``ratio`` is B's median over A's as
    recorded: the verdict's ratio when a side has fewer than MIN_TEST_SAMPLES (no test then);
    with enough samples the ratio is that of the samples' medians."""
    if len(a) == 0 or len(b) == 0:
        return Verdict(ratio, None, None, None, "no samples")
    if min(len(a), len(b)) < MIN_TEST_SAMPLES:
        return Verdict(ratio, None, None, None, "too few samples")
    ratio, low, high = bootstrap_median_ratio(a, b)
    _, p = mann_whitney(a, b)
    real = p < ALPHA and not low <= 1.0 <= high
    word = ("faster" if ratio < 1 else "slower") if real else "same"
    return Verdict(ratio, low, high, p, word)
