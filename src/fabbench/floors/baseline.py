"""Floors made from runs of a healthy cluster (``fabbench baseline``): per point, the median and
spread of the runs' figures, and a floor that is the lower of two bounds: a stated fraction
below the median (``below``) and the bound the spread allows (``spread``: the median less K
robust standard deviations, 1.4826 x the median absolute deviation; 0 leaves it out). So a
floor never sits inside the spread healthy runs showed: where a point is noisy the floor is
wider, and a quiet point keeps the fraction. The file says how each floor was made, and which
runs it came from (file, run, start, image, fabric, transport, nodes)."""

from __future__ import annotations

import datetime
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from fabbench import __version__
from fabbench.errors import UsageError
from fabbench.floors.points import FLOORS, METRICS, Point, points_of
from fabbench.floors.rules import FORMAT
from fabbench.results.runs import Series
from fabbench.units import format_size
from fabbench.workloads.collectives.workload import CollectivesWorkload

# what a baseline judges, per workload: the metric of its points (each workload's floors)
BASELINE_METRIC = {name: floors.baseline for name, floors in FLOORS.items()}


@dataclass(frozen=True)
class Spread:
    """One point's figures over the runs."""

    figures: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.figures)

    @property
    def robust_sd(self) -> float:
        m = self.median
        return 1.4826 * statistics.median(abs(x - m) for x in self.figures)


class RuleKey(NamedTuple):
    """Which points one baseline rule covers (a per-node workload's rule covers every node of
    the run); None: the points do not say, and the rule selects by it not."""

    workload: str
    op: str | None
    bytes: int | None
    dtype: str | None
    primitive: str | None
    fabric: str
    transport_class: str | None
    nodes: int | None


def _key(p: Point) -> RuleKey:
    return RuleKey(p.workload, p.op, p.bytes, p.dtype, p.primitive, Path(p.fabric or "?").stem,
                   p.transport_class, p.nodes)


def make(series: Sequence[Series], *, below: float = 0.10, spread: float = 3.0,
         min_bytes: int = 1 << 20, name: str = "baseline") -> str:
    """The floors file (TOML text) of these runs."""
    if not series:
        raise UsageError("a baseline needs at least one run")
    if not 0 < below < 1:
        raise UsageError(f"--below must be between 0 and 1, not {below:g}")
    if not 0 <= spread < math.inf:
        raise UsageError(f"--spread must be a number 0 or more, not {spread:g}")
    failed = [s for s in series if s.summary is None or not s.summary.ok]
    if failed:
        raise UsageError(f"{failed[0].path}: run {failed[0].run.run_id} did not finish ok: a "
                         "baseline is made of healthy runs only")
    groups: dict[RuleKey, list[float]] = {}
    runs_of: dict[RuleKey, set[str]] = {}
    for p in points_of(series):
        metric = BASELINE_METRIC[p.workload]
        figure = p.metrics.get(metric)
        small = p.workload == CollectivesWorkload.name and (p.bytes or 0) < min_bytes
        if figure is None or small:
            continue
        groups.setdefault(_key(p), []).append(figure)
        runs_of.setdefault(_key(p), set()).add(p.run)
    if not groups:
        others = [n for n in FLOORS if n != CollectivesWorkload.name]
        raise UsageError("no figure to make a baseline of (collectives of at least "
                         f"{format_size(min_bytes)}, {', '.join(others[:-1])} or "
                         f"{others[-1]} records)")
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    how = f"{below:.0%} below the median" + (
        f", or {spread:g} robust standard deviations below it where that is lower"
        if spread else "")
    lines = [
        "# fabbench floors made by `fabbench baseline` from healthy runs: one rule per point,",
        f"# the floor {how}. Edit freely; docs/floors.md describes every key.",
        f"format = {_s(FORMAT)}",
        f"name = {_s(name)}",
        f"description = {_s(f'baseline of {len(series)} runs, floors {how}')}",
        "",
        "[baseline]",
        f"made = {_s(made)}",
        f"fabbench = {_s(__version__)}",
        f"floor = {_s(how)}",
        f"runs = {len(series)}",
    ]
    lines += _provenance(series)
    for key, figures in groups.items():
        lines += [""] + _rule(key, Spread(tuple(figures)), len(runs_of[key]), below=below,
                              k=spread, made=made)
    return "\n".join(lines) + "\n"


def _provenance(series: Iterable[Series]) -> list[str]:
    out = []
    for s in series:
        r = s.run
        image = r.provenance.image.ref if r.provenance.image else None
        out += ["", "[[baseline.run]]", f"file = {_s(str(s.path))}", f"run_id = {_s(r.run_id)}",
                f"started = {_s(r.started)}", f"fabric = {_s(r.fabric)}",
                f"primitive = {_s(r.primitive)}", f"transport = {_s(r.transport or '')}",
                f"nodes = {r.nodes}", f"ranks = {r.ranks}", f"host = {_s(r.provenance.host)}"]
        if image:
            out.append(f"image = {_s(str(image))}")
    return out


def _rule(key: RuleKey, figures: Spread, runs: int, *, below: float, k: float,
          made: str) -> list[str]:
    """One point's rule: the floor (a limit, for a time) a fraction of the median."""
    workload, op, nbytes, dtype, primitive, fabric, tclass, nodes = key
    metric = BASELINE_METRIC[workload]
    unit, higher = METRICS[metric]
    m = figures.median
    fraction = 1 - below
    if k:  # the bound the spread allows, K robust standard deviations from the median
        bound = m - k * figures.robust_sd if higher else m + k * figures.robust_sd
        fraction = min(fraction, bound / m if higher else m / bound)
    fraction = min(1.0, max(0.01, fraction))
    size = format_size(nbytes) if nbytes is not None else None
    rid = "-".join(str(x) for x in (workload, op, size, dtype, primitive, f"n{nodes}", metric)
                   if x is not None)
    what = f"{len(figures.figures)} figures from {runs} runs" if FLOORS[workload].per_node \
        else f"{runs} runs"
    source = (f"fabbench baseline of {what}, {made}: median {m:.4g} {unit}, min "
              f"{min(figures.figures):.4g}, max {max(figures.figures):.4g}, robust sd "
              f"{figures.robust_sd:.3g}")
    out = ["[[rule]]", f"id = {_s(rid)}", f"source = {_s(source)}",
           f"workload = {_s(workload)}"]
    if op is not None and FLOORS[workload].rule_op:
        out.append(f"op = {_s(op)}")
    if size is not None and FLOORS[workload].rule_size:
        out.append(f"size = {_s(size)}")
    if dtype is not None:
        out.append(f"dtype = {_s(dtype)}")
    if primitive is not None:
        out.append(f"primitive = {_s(primitive)}")
    out.append(f"fabric = {_s(fabric)}")
    if tclass is not None:
        out.append(f"transport = {_s(tclass)}")
    if nodes is not None:
        out.append(f"nodes = {nodes}")
    if FLOORS[workload].per_node:
        out.append("per_node = true")
    out += [f"metric = {_s(metric)}", f"baseline = {m:.6g}",
            f"baseline_fraction = {fraction:.4g}", f"unit = {_s(unit)}",
            f"baseline_runs = {runs}", f"baseline_min = {min(figures.figures):.6g}",
            f"baseline_max = {max(figures.figures):.6g}"]
    return out


def _s(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)
