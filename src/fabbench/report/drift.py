"""Drift of a figure across runs (docs/methods.md, "Drift of a node's figure"): a robust slope per
run (Theil-Sen) and the fitted figure projected some runs ahead, a one-sided Mann-Kendall test
of the trend toward the bad side (its exact distribution), and the verdict against a floor:
"below floor" when the latest figure already fails it, "drifting" when the trend is real and
its projection crosses the floor while the latest figure still passes, "steady" otherwise.

Every function takes many figure series at once, one row each (numpy; NaN where a run has no
figure), so a cluster's links are fitted as fast as its nodes."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05      # a trend is real when the one-sided Mann-Kendall p is at most this
MIN_RUNS = 5      # figures in the window a slope needs (and runs a trend needs)
CHUNK = 20_000    # rows fitted at a time (a row's pairs of runs are held at once)

BELOW, DRIFTING, STEADY, NOT_JUDGED = "below floor", "drifting", "steady", "not judged"
ABOVE = "above limit"  # BELOW for a figure where lower is better (a time)
FLAGGED = (BELOW, ABOVE, DRIFTING)


@dataclass(frozen=True)
class DriftFit:
    """One series' trend over the window: how many runs had a figure, the slope per run, the
    fitted figure at the window's last run and ``ahead`` runs after it, and the one-sided p of
    a trend toward the bad side (None where fewer than MIN_RUNS runs had a figure)."""

    runs: int
    slope: float | None
    fitted: float | None
    projected: float | None
    p_value: float | None


def fits(window: np.ndarray, ahead: int, higher_is_better: bool) -> list[DriftFit]:
    """The fit of each row of ``window`` (rows x runs, the runs in start order, NaN: no
    figure); x is the run's place in the window, so the slope is per run."""
    rows = np.asarray(window, dtype=float)
    if rows.ndim != 2:
        raise ValueError("fits takes a 2-D array: one row per series")
    out: list[DriftFit] = []
    for start in range(0, len(rows), CHUNK):
        out += _fits(rows[start:start + CHUNK], ahead, higher_is_better)
    return out


def _fits(rows: np.ndarray, ahead: int, higher_is_better: bool) -> list[DriftFit]:
    width = rows.shape[1]
    counts = np.sum(~np.isnan(rows), axis=1)
    i, j = np.triu_indices(width, 1)
    rise = rows[:, j] - rows[:, i]  # NaN where either run has no figure
    x = np.arange(width, dtype=float)
    with warnings.catch_warnings():  # a row without two figures: its slope is NaN, not used
        warnings.simplefilter("ignore", RuntimeWarning)
        slope = np.nanmedian(rise / (j - i), axis=1)
        intercept = np.nanmedian(rows - slope[:, None] * x, axis=1)
    kendall_s = np.nansum(np.sign(rise), axis=1)
    bad = -1.0 if higher_is_better else 1.0  # the side a figure gets worse to
    out = []
    for n, b, a, s in zip(counts.tolist(), slope.tolist(), intercept.tolist(),
                          kendall_s.tolist(), strict=True):
        if n < MIN_RUNS:
            out.append(DriftFit(runs=n, slope=None, fitted=None, projected=None, p_value=None))
            continue
        out.append(DriftFit(runs=n, slope=b, fitted=a + b * (width - 1),
                       projected=a + b * (width - 1 + ahead),
                       p_value=_tail(n, round(bad * s))))
    return out


def _tail(n: int, s: int) -> float:
    """P(S >= s) for Kendall's S of n figures in random order (no trend): S = M - 2 x
    inversions, M = n(n-1)/2, inversions distributed as Mahonian numbers over n! orders."""
    inv = _inversions(n)
    most = n * (n - 1) // 2
    # S >= s  <=>  inversions <= (M - s) / 2
    limit = math.floor((most - s) / 2)
    if limit < 0:
        return 0.0
    return float(min(1.0, sum(inv[:limit + 1])))


@functools.cache
def _inversions(n: int) -> tuple[float, ...]:
    """The distribution of the number of inversions of a random order of n items."""
    dist = np.ones(1)
    for k in range(2, n + 1):  # adding the k-th item adds 0..k-1 inversions, equally likely
        dist = np.convolve(dist, np.full(k, 1.0 / k))
    return tuple(dist.tolist())


@dataclass(frozen=True)
class Judged:
    """A series' verdict against its floor, why in words, and (drifting or failing toward it)
    in about how many runs the fitted line reaches the floor."""

    verdict: str
    why: str
    runs_to_floor: float | None = None


def judged(fit: DriftFit, latest: float | None, floor: float | None, *, higher_is_better: bool,
           ahead: int, in_latest: bool) -> Judged:
    """The verdict of one series (its fit over the window, its figure and floor at the latest
    run)."""
    if not in_latest or latest is None or floor is None:
        return Judged(NOT_JUDGED, "no figure in the latest run")
    fails = latest < floor if higher_is_better else latest > floor
    if fails:
        return Judged(BELOW if higher_is_better else ABOVE,
                      f"the latest figure {latest:.4g} is past the floor {floor:.4g}")
    if fit.slope is None or fit.p_value is None or fit.fitted is None \
            or fit.projected is None:
        return Judged(NOT_JUDGED, f"{fit.runs} run(s) with a figure in the window; a slope "
                                  f"needs {MIN_RUNS}")
    worse = fit.slope < 0 if higher_is_better else fit.slope > 0
    to_floor = (floor - fit.fitted) / fit.slope if worse else None
    if worse and fit.p_value <= ALPHA:
        crosses = fit.projected < floor if higher_is_better else fit.projected > floor
        if crosses:
            runs = max(to_floor or 0.0, 0.0)
            when = f"reaches the floor in about {runs:.1f} run(s)" if runs else \
                "is past the floor already at the latest run, whose own figure still passes"
            return Judged(DRIFTING, f"a trend of {fit.slope:+.3g} per run (p = "
                                    f"{fit.p_value:.2g}): its fitted line {when}",
                          runs_to_floor=runs)
        return Judged(STEADY, f"a real trend of {fit.slope:+.3g} per run (p = "
                              f"{fit.p_value:.2g}), the floor more than {ahead} run(s) away",
                      runs_to_floor=to_floor)
    return Judged(STEADY, f"no trend toward the floor (p = {fit.p_value:.2g})")


def series_window(figures: Sequence[Sequence[float | None]], window: int) -> np.ndarray:
    """The last ``window`` runs of each series (None: no figure) as a rows x runs array."""
    rows = np.array([[math.nan if f is None else f for f in row[-window:]] for row in figures],
                    dtype=float)
    return rows.reshape(len(figures), -1)
