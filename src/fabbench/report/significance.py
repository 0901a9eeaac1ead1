"""Is a number stable, and is a difference real? numpy only (no scipy).

- stable: the one rule of timing.stats (STABLE_RULE: the distribution-free 95 % interval of
  the median within ±STABLE_REL of it), as recorded with each point (the loader derives it for
  points written before it was recorded, fabbench/1); why_unstable says why a point fails it.
- Mann-Whitney U (two-sided, normal approximation with tie and continuity corrections).
- bootstrap 95 % confidence interval of the ratio of medians (B / A), seeded: reproducible.
A difference is called real only when both agree: p < ALPHA and the interval excludes 1.
compare_many tests the points of a comparison together, each with the verdict it has alone.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from fabbench.timing.stats import MIN_CI_SAMPLES, STABLE_REL

if TYPE_CHECKING:
    import numpy as np  # imported where a comparison is computed: a report needs none of it

ALPHA = 0.05
BOOTSTRAP = 2000
MIN_TEST_SAMPLES = 5  # samples a side needs before two points are tested
_SEED = 20200922  # HPEC 2020
_ROWS = 256  # points tested in one array: its resamples' medians are _ROWS x BOOTSTRAP
_THREADS = 4  # arrays of points tested at once, at most (see _each)
T = TypeVar("T")
U = TypeVar("U")


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

    if len(a) == 0 or len(b) == 0:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    (u1, p), = _mann_whitney_rows(np.asarray([a], float), np.asarray([b], float))
    return u1, p


def _mann_whitney_rows(x: np.ndarray, y: np.ndarray) -> list[tuple[float, float]]:
    """mann_whitney of each row of ``x`` against the same row of ``y`` (k rows each, of n1 and
    n2 samples). Ranks are averaged over ties: each rank sum and tie count is exact (sums of
    half-integers), whatever the order they are summed in."""
    import numpy as np

    k, n1 = x.shape
    n2 = y.shape[1]
    n = n1 + n2
    both = np.concatenate([x, y], axis=1)
    order = np.argsort(both, axis=1, kind="stable")
    ordered = np.take_along_axis(both, order, axis=1)
    position = np.broadcast_to(np.arange(1, n + 1), (k, n))
    starts = np.ones((k, n), bool)  # where a run of equal values begins, in sorted order
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones((k, n), bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, n + 1)[:, ::-1], axis=1)[:, ::-1]
    x_ranks = np.where(order < n1, (first + last) / 2, 0.0).sum(axis=1)
    ties = ((last - first + 1) ** 2 - 1).sum(axis=1)  # c equal values: c * (c**2 - 1)
    out = []
    for rank_sum, tie_sum in zip(x_ranks.tolist(), ties.tolist(), strict=True):
        u1 = rank_sum - n1 * (n1 + 1) / 2
        mu = n1 * n2 / 2
        tie = float(tie_sum) / (n * (n - 1)) if n > 1 else 0.0
        sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie))
        if sigma == 0:
            out.append((u1, 1.0))
            continue
        z = (abs(u1 - mu) - 0.5) / sigma
        out.append((u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))))
    return out


@functools.lru_cache(maxsize=64)  # (n, resamples) arrays of counts: kept few
def _first_draw(nx: int, resamples: int) -> tuple[np.ndarray, Mapping[str, Any]]:
    """A's draw (nx samples) from the seeded generator, as counts (_counts), and the
    generator's state after it: B's draw is its next. Every comparison of nx samples draws the
    same."""
    import numpy as np

    rng = np.random.default_rng(_SEED)
    return _counts(rng.integers(0, nx, (resamples, nx)), nx), rng.bit_generator.state


@functools.lru_cache(maxsize=64)  # (n, resamples) arrays of counts: kept few
def _second_draw(nx: int, ny: int, resamples: int) -> np.ndarray:
    """B's draw (ny samples) after A's (nx) as counts (_counts): the same for every
    comparison of nx and ny samples."""
    import numpy as np

    rng = np.random.default_rng(_SEED)
    rng.bit_generator.state = _first_draw(nx, resamples)[1]
    return _counts(rng.integers(0, ny, (resamples, ny)), ny)


def _counts(draws: np.ndarray, n: int) -> np.ndarray:
    """How often each of n samples is drawn by each resample (a row of ``draws``), as an
    (n, resamples) array of the smallest integers that hold n."""
    import numpy as np

    resamples = draws.shape[0]
    flat = (draws * resamples + np.arange(resamples)[:, None]).ravel()  # sample, resample
    counts = np.bincount(flat, minlength=n * resamples).reshape(n, resamples)
    small = counts.astype(np.min_scalar_type(n))
    small.flags.writeable = False
    return small


def _resample_medians(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of each resample of each row of ``values`` (k rows of n samples), the
    resamples given by ``counts`` ((n, resamples): how often each sample is drawn): the same
    figures, to the last bit, as numpy's median of each resample drawn (its middle value, or the
    mean of its two middle values), found from the counts in each row's sorted order: the
    m-th smallest value of a resample is the row's r-th smallest value, r the number of ranks
    below which the resample holds m values or fewer."""
    import numpy as np

    k, n = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=1)
    low, high = (n - 1) // 2, n // 2  # the middle positions (one when n is odd)
    shape = (k, counts.shape[1])
    held = np.zeros(shape, counts.dtype)  # values drawn of rank <= r, per resample
    below = np.empty(shape, bool)
    ones = below.view(np.uint8)  # below as 1 and 0: added without a cast
    rank_low = np.zeros(shape, counts.dtype)
    rank_high = np.zeros(shape, counts.dtype) if low != high else rank_low
    below_all = 0  # ranks below both middle positions in every resample: counted, not added
    for r in range(n):
        np.add(held, counts[order[:, r]], out=held)  # indexing: faster than np.take's out=
        if below_all == r and np.less_equal(held, low, out=below).all():
            below_all += 1
            continue
        np.less_equal(held, high, out=below)
        if not below.any():
            break
        rank_high += ones
        if low != high:
            np.less_equal(held, low, out=below)
            rank_low += ones
    rank_high += below_all
    if low != high:
        rank_low += below_all
    start = (np.arange(k) * n)[:, None]  # each row's first value in ordered, flat
    medians: np.ndarray = ordered.take(rank_high + start)
    if low != high:  # the mean of the two middle values, as numpy's: (low + high) / 2
        medians += ordered.take(rank_low + start)
        medians /= 2
    return medians


def _medians(ordered: np.ndarray) -> np.ndarray:
    """numpy's median of each row of sorted values."""
    n = ordered.shape[1]
    if n % 2:
        return ordered[:, n // 2]
    result: np.ndarray = (ordered[:, n // 2 - 1] + ordered[:, n // 2]) / 2
    return result


def bootstrap_median_ratio(a: Sequence[float], b: Sequence[float],
                           resamples: int = BOOTSTRAP, level: float = 0.95
                           ) -> tuple[float, float, float]:
    """median(b) / median(a) and its percentile bootstrap interval."""
    import numpy as np

    if len(a) == 0 or len(b) == 0:
        raise ValueError("a ratio of medians needs positive samples on both sides")
    (ratio, low, high), = _bootstrap_rows(np.asarray([a], float), np.asarray([b], float),
                                          None, resamples, level)
    return ratio, low, high


def _bootstrap_rows(x: np.ndarray, y: np.ndarray, which: Sequence[int] | None = None,
                    resamples: int = BOOTSTRAP, level: float = 0.95
                    ) -> list[tuple[float, float, float]]:
    """bootstrap_median_ratio of each row of ``x`` (A, k rows of nx samples) against the same
    row of ``y`` (B, ny samples). The draws are the same for every row (A's the seeded
    generator's first, B's its next): drawn once. ``which`` numbers the rows of ``x`` that
    are the same point (0, 1, ... in order of first row; None: each row its own): A's
    resample medians are made once for each (a compare of many runs against one tests each of
    A's points again and again), and divide its rows in turn (fewest turns when its rows are
    together)."""
    import numpy as np

    mx = _medians(np.sort(x, axis=1))
    if (mx <= 0).any():
        raise ValueError("a ratio of medians needs positive samples on both sides")
    nx, ny = x.shape[1], y.shape[1]
    index = np.arange(len(x)) if which is None else np.asarray(which)
    first = np.zeros(index.max() + 1, int)
    first[index[::-1]] = np.arange(len(x))[::-1]  # each point's first row
    ma = _resample_medians(x[first], _first_draw(nx, resamples)[0])
    ratios = _resample_medians(y, _second_draw(nx, ny, resamples))  # B's, then over A's
    ends = [*np.flatnonzero(np.diff(index)) + 1, len(x)]  # rows of the same point in turn
    for start, end in zip([0, *ends[:-1]], ends, strict=True):
        ratios[start:end] /= ma[index[start]]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail], axis=1, overwrite_input=True)
    ratio = _medians(np.sort(y, axis=1)) / mx
    return list(zip(ratio.tolist(), low.tolist(), high.tolist(), strict=True))


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
    return compare_many([(a, b, ratio)])[0]


def compare_many(points: Sequence[tuple[Sequence[float], Sequence[float], float]]
                 ) -> list[Verdict]:
    """compare_samples of each (A's samples, B's samples, recorded ratio), the same verdicts
    to the last bit, computed together: the points of the same sample counts, whose bootstrap
    draws are the same, in one array each, the arrays side by side on the process's cores."""
    import numpy as np

    verdicts: list[Verdict | None] = [None] * len(points)
    tested: dict[tuple[int, int], list[int]] = {}
    for i, (a, b, ratio) in enumerate(points):
        if len(a) == 0 or len(b) == 0:
            verdicts[i] = Verdict(ratio, None, None, None, "no samples")
        elif min(len(a), len(b)) < MIN_TEST_SAMPLES:
            verdicts[i] = Verdict(ratio, None, None, None, "too few samples")
        else:
            tested.setdefault((len(a), len(b)), []).append(i)
    first: dict[int, int] = {}  # A's samples by identity: a point tested against many runs
    for i, (a, _, _) in enumerate(points):
        first.setdefault(id(a), i)
    chunks = [rows[start:start + _ROWS]  # A's counts in turn (its draws kept), a point's rows
              for _, group in sorted(tested.items())  # together
              for rows in [sorted(group, key=lambda i: first[id(points[i][0])])]
              for start in range(0, len(rows), _ROWS)]
    chunks.sort(key=lambda at: -len(at) * sum(map(len, points[at[0]][:2])))  # largest first

    def tested_chunk(at: list[int]) -> list[tuple[tuple[float, float, float], float]]:
        x = np.asarray([points[i][0] for i in at], float)
        y = np.asarray([points[i][1] for i in at], float)
        a_of: dict[int, int] = {}
        which = [a_of.setdefault(id(points[i][0]), len(a_of)) for i in at]
        return [(interval, p) for interval, (_, p) in zip(
            _bootstrap_rows(x, y, which), _mann_whitney_rows(x, y), strict=True)]

    for at, found in zip(chunks, _each(tested_chunk, chunks), strict=True):
        for i, ((ratio, low, high), p) in zip(at, found, strict=True):
            real = p < ALPHA and not low <= 1.0 <= high
            word = ("faster" if ratio < 1 else "slower") if real else "same"
            verdicts[i] = Verdict(ratio, low, high, p, word)
    return [v for v in verdicts if v is not None]


def _each(work: Callable[[T], U], items: Sequence[T]) -> Iterator[U]:
    """work(item) of each item, in order, on as many threads as this process has cores (at
    most _THREADS): a chunk's time is mostly numpy's loops over its arrays, which run without
    the interpreter's lock, so chunks run side by side; each is computed as alone (the same
    figures in any order)."""
    threads = min(_THREADS, len(items), _cores())
    if threads < 2:
        yield from map(work, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="fabbench-compare") as pool:
        yield from pool.map(work, items)


def _cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
