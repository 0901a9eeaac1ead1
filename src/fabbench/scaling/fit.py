"""α and β per (op, transport, ranks) from collective records.

Model: t(S) = a(p)·α + b(p)·S·β, with (a, b) of the algorithm whose β coefficient is nccl-tests'
busbw factor (ring allreduce, ring reduce-scatter/allgather, pairwise alltoall, chain broadcast),
so 1/β is comparable to the busbw of large messages and to a link's bandwidth. A reduction's γ
cannot be told apart from β by sizes alone: β here includes it.

The fit is least squares on the per-size p50 times, weighted by 1/t (it minimises relative
errors), so 8-byte latencies and 64-MiB transfers count alike; α, β ≥ 0 (when the unconstrained
solution is negative, the better of the two one-parameter fits). Its quality is the RMS and the
largest relative residual; it is valid for the sizes it saw.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabbench.errors import UsageError
from fabbench.scaling.costs import BUSBW_ALGORITHM, Params, coefficients
from fabbench.workloads.collectives.record import Collective

MIN_SIZES = 2  # distinct sizes a fit needs (two unknowns)


@dataclass(frozen=True, kw_only=True)
class Fit:
    op: str
    transport: str
    ranks: int
    algorithm: str
    run_id: str = ""
    alpha_s: float
    beta_s_per_byte: float
    points: int
    min_bytes: int
    max_bytes: int
    rms_rel_err: float    # sqrt(mean(((t_fit − t)/t)²)); nan with only as many sizes as unknowns
    max_rel_err: float
    busbw_at_max_gbyte_s: float  # measured busbw (GB/s) at the largest size, for comparison
    warnings: tuple[str, ...] = field(default=())

    @property
    def params(self) -> Params:
        return Params(alpha_s=self.alpha_s, beta_s_per_byte=self.beta_s_per_byte)

    @property
    def alpha_us(self) -> float:
        return self.alpha_s * 1e6

    @property
    def bandwidth_gbyte_s(self) -> float:
        """1/β in GB/s (1e9 B/s): the asymptotic busbw; inf when β was not resolved."""
        return math.inf if self.beta_s_per_byte == 0 else 1e-9 / self.beta_s_per_byte

    def predict_s(self, nbytes: float) -> float:
        a, b, _ = coefficients(self.op, self.algorithm, self.ranks)
        return a * self.alpha_s + b * nbytes * self.beta_s_per_byte

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "op": self.op, "transport": self.transport,
                "ranks": self.ranks,
                "algorithm": self.algorithm, "alpha_us": self.alpha_us,
                "beta_s_per_byte": self.beta_s_per_byte,
                "bandwidth_gbyte_s": None if math.isinf(self.bandwidth_gbyte_s)
                else self.bandwidth_gbyte_s,
                "points": self.points, "min_bytes": self.min_bytes, "max_bytes": self.max_bytes,
                "rms_rel_err": None if math.isnan(self.rms_rel_err) else self.rms_rel_err,
                "max_rel_err": self.max_rel_err, "busbw_at_max_gbyte_s": self.busbw_at_max_gbyte_s,
                "warnings": list(self.warnings)}


def _solve(design: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Non-negative weighted least squares for two unknowns (relative residuals)."""
    rows = design / times[:, None]
    ones = np.ones_like(times)
    x: np.ndarray = np.linalg.lstsq(rows, ones, rcond=None)[0]
    if (x >= 0).all():
        return x
    best, best_err = np.zeros(2), math.inf
    for j in range(2):
        col = rows[:, j]
        denom = float(col @ col)
        if denom <= 0:
            continue
        cand = np.zeros(2)
        cand[j] = max(0.0, float(col @ ones) / denom)
        err = float(np.sum((rows @ cand - ones) ** 2))
        if err < best_err:
            best, best_err = cand, err
    return best


def fit_points(op: str, transport: str, ranks: int, sizes: list[int], times_s: list[float],
               busbw_at_max_gbyte_s: float = math.nan, run_id: str = "") -> Fit:
    """Fit α, β to (S, p50 time) points of one op, transport and rank count."""
    distinct = sorted(set(sizes))
    if len(distinct) < MIN_SIZES:
        raise UsageError(f"{op} over {transport} ({ranks} ranks): {len(distinct)} size(s) "
                         f"measured; a fit of α and β needs at least {MIN_SIZES}")
    if ranks < 2:
        raise UsageError(f"{op} over {transport}: 1 rank moves no bytes; nothing to fit")
    algorithm = BUSBW_ALGORITHM[op]
    a, b, _ = coefficients(op, algorithm, ranks)
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if not (t > 0).all():
        raise UsageError(f"{op} over {transport}: a p50 time is zero; cannot fit")
    design = np.column_stack([np.full_like(s, a), b * s])
    alpha, beta = (float(v) for v in _solve(design, t))
    rel = (design @ np.array([alpha, beta]) - t) / t
    warnings = []
    rms = float(np.sqrt(np.mean(rel**2))) if len(distinct) > MIN_SIZES else math.nan
    if len(distinct) == MIN_SIZES:
        warnings.append("only two sizes: the fit is exact, its quality unknown")
    if beta == 0:
        warnings.append(f"bandwidth not resolved (sizes up to {max(sizes)} B are all "
                        "latency): measure larger sizes")
    if alpha == 0:
        warnings.append("latency not resolved: measure smaller sizes")
    if not math.isnan(rms) and rms > 0.25:
        warnings.append(f"poor fit (RMS relative error {rms:.0%}): the α-β model does not "
                        "describe these times well (protocol switches, caches)")
    return Fit(op=op, transport=transport, ranks=ranks, algorithm=algorithm, run_id=run_id,
               alpha_s=alpha,
               beta_s_per_byte=beta, points=len(sizes), min_bytes=int(min(sizes)),
               max_bytes=int(max(sizes)), rms_rel_err=rms,
               max_rel_err=float(np.max(np.abs(rel))), busbw_at_max_gbyte_s=busbw_at_max_gbyte_s,
               warnings=tuple(warnings))


def fit_records(records: Iterable[Collective]) -> tuple[list[Fit], list[str]]:
    """One fit per (run, op, transport, ranks) that has enough sizes; the rest are warnings.
    UsageError when there are no collective records or none can be fitted."""
    groups: dict[tuple[str, str, str, int], list[Collective]] = defaultdict(list)
    for r in records:
        groups[(r.run_id, r.op, r.transport, int(r.ranks))].append(r)
    if not groups:
        raise UsageError("no collective records to fit")
    fits, skipped = [], []
    for (run_id, op, transport, ranks), recs in sorted(groups.items()):
        largest = max(recs, key=lambda r: r.bytes)
        try:
            fits.append(fit_points(op, transport, ranks, [r.bytes for r in recs],
                                   [r.time_us.p50 * 1e-6 for r in recs],
                                   float(largest.busbw_gbyte_s), run_id))
        except UsageError as exc:
            skipped.append(f"not fitted: {exc}")
    if not fits:
        raise UsageError(f"no (op, transport) has enough points to fit: {skipped[0]}")
    return fits, skipped
