"""Figures of a report: busbw and latency vs size (a panel per op, a line per run), training
samples/s vs ranks, and B/A time ratios of a comparison. matplotlib with the Agg backend; every
figure is written as PNG and SVG (SVG keeps its text as text, so labels are searchable)."""

from __future__ import annotations

import io
import math
import re
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from fabbench.report.tables import ops_of, unstable  # noqa: E402
from fabbench.results.runs import Series  # noqa: E402
from fabbench.timing.stats import STABLE_RULE  # noqa: E402
from fabbench.units import format_size  # noqa: E402
from fabbench.workloads.train.record import Train  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from fabbench.report.compare import Comparison
    from fabbench.report.trend import RuleTrend, Trend, TrendRow

_STYLE: dict[RcKeyType, Any] = {"svg.fonttype": "none", "svg.hashsalt": "fabbench",
                                "figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                                "font.size": 9}


@dataclass
class Plot:
    """A finished figure: a file stem, a caption, and the series it shows."""

    name: str
    title: str
    figure: Figure
    series: list[str]

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()

    def svg(self) -> str:
        buf = io.StringIO()
        with plt.rc_context(_STYLE):
            self.figure.savefig(buf, format="svg", metadata={"Date": None})
        return buf.getvalue()

    def files(self) -> list[tuple[str, bytes | str]]:
        """The figure's files (name, content) for a folder: PNG and SVG."""
        return [(f"{self.name}.png", self.png()), (f"{self.name}.svg", self.svg())]

    def close(self) -> None:
        plt.close(self.figure)


def _grid(n: int, title: str) -> tuple[Figure, list[Any]]:
    cols = min(3, n)
    rows = math.ceil(n / cols)
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows + 0.6),
                                 squeeze=False)
    fig.suptitle(title)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


UNSTABLE = f"unstable (not {STABLE_RULE})"
_SIZE_FMT = FuncFormatter(lambda x, _pos: format_size(int(x)) if x >= 1 else "")


def _size_axis(ax: Any) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(_SIZE_FMT)
    ax.set_xlabel("size (bytes)")


def _legend(fig: Figure, axes: Sequence[Any]) -> None:
    found: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            found.setdefault(label, handle)
    if UNSTABLE in found:  # the marker's explanation goes last
        found[UNSTABLE] = found.pop(UNSTABLE)
    labels, handles = list(found), list(found.values())
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))),
               frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.02 * math.ceil(len(labels) / 4), 1, 0.97))


def size_sweeps(series: Sequence[Series]) -> list[Plot]:
    """busbw vs size and p50 latency vs size (band: min to p99), a panel per operation."""
    ops = ops_of(series)
    if not ops:
        return []
    plots = []
    for metric in ("busbw", "latency"):
        with plt.rc_context(_STYLE):
            title = ("bus bandwidth vs size" if metric == "busbw"
                     else "latency (p50; band min..p99) vs size")
            fig, axes = _grid(len(ops), title)
            unstable_shown = False
            for ax, op in zip(axes, ops, strict=True):
                for s in series:
                    recs = sorted((c for c in s.collectives if c.op == op),
                                  key=lambda c: c.bytes)
                    if not recs or (metric == "busbw" and s.run.ranks == 1):
                        continue  # one rank: no bus (console.ONE_RANK)
                    x = [c.bytes for c in recs]
                    if metric == "busbw":
                        (line,) = ax.plot(x, [c.busbw_gbyte_s for c in recs], marker="o",
                                          markersize=3, label=s.label)
                    else:
                        (line,) = ax.plot(x, [c.time_us.p50 for c in recs], marker="o",
                                          markersize=3, label=s.label)
                        ax.fill_between(x, [c.time_us.min for c in recs],
                                        [c.time_us.p99 for c in recs],
                                        color=line.get_color(), alpha=0.15, linewidth=0)
                    line.set_gid(f"series-{s.label}")
                    shaky = [(xi, yi) for xi, yi, c in zip(x, line.get_ydata(), recs,
                                                          strict=True) if unstable(c)]
                    if shaky:
                        marked = ax.scatter(*zip(*shaky, strict=True), s=40, facecolors="none",
                                            edgecolors="crimson", linewidths=1, zorder=3,
                                            label=UNSTABLE if not unstable_shown else None)
                        marked.set_gid(f"unstable-{s.label}")
                        unstable_shown = True
                ax.set_title(op)
                _size_axis(ax)
                ax.set_yscale("log")
                ax.set_ylabel("busbw (GB/s)" if metric == "busbw" else "time (µs)")
            _legend(fig, axes)
        plots.append(Plot(metric, title, fig, [s.label for s in series]))
    return plots


def training(series: Sequence[Series]) -> list[Plot]:
    """samples/s (p50, ± ci95) vs ranks: a line per fabric/primitive and model."""
    curves: dict[str, list[Train]] = defaultdict(list)
    for s in series:
        for r in s.of_kind(Train):
            curves[f"{s.base_label} {r.model}"].append(r)
    if not curves:
        return []
    with plt.rc_context(_STYLE):
        fig, axes = _grid(1, "training throughput vs ranks")
        ax = axes[0]
        for label, recs in sorted(curves.items()):
            recs.sort(key=lambda r: r.ranks)
            container = ax.errorbar([r.ranks for r in recs],
                                    [r.samples_per_s["p50"] for r in recs],
                                    yerr=[r.samples_per_s["ci95"] for r in recs],
                                    marker="o", markersize=4, capsize=3, label=label)
            container.lines[0].set_gid(f"series-{label}")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
        ax.set_xlabel("ranks")
        ax.set_ylabel("samples/s")
        _legend(fig, axes)
    return [Plot(Train.kind, "training throughput vs ranks", fig, sorted(curves))]


def ratios(comparison: Comparison) -> list[Plot]:
    """Time ratio B/A vs size per op with its 95 % interval; below 1: B is faster."""
    ops = comparison.ops()
    if not ops:
        return []
    with plt.rc_context(_STYLE):
        fig, axes = _grid(len(ops), f"time ratio vs {comparison.baseline.label} "
                                    "(p50; bars: 95% CI; < 1 is faster)")
        for ax, op in zip(axes, ops, strict=True):
            for other in comparison.others:
                rows = [r for r in comparison.rows if r.op == op and r.other is other]
                if not rows:
                    continue
                x = [r.bytes for r in rows]
                y = [r.verdict.ratio for r in rows]
                low = [r.verdict.ratio - (r.verdict.ci_low or r.verdict.ratio) for r in rows]
                high = [(r.verdict.ci_high or r.verdict.ratio) - r.verdict.ratio for r in rows]
                container = ax.errorbar(x, y, yerr=[low, high], marker="o", markersize=3,
                                        capsize=2, label=other.label)
                container.lines[0].set_gid(f"series-{other.label}")
            ax.axhline(1.0, color="grey", linewidth=1)
            ax.set_title(op)
            _size_axis(ax)
            ax.set_yscale("log")
            ax.set_ylabel(f"time / {comparison.baseline.label}")
        _legend(fig, axes)
    return [Plot("ratio", "time ratio", fig, [o.label for o in comparison.others])]


def trend(found: Trend) -> list[Plot]:
    """Each flagged node's figure across the runs (`report --trend`) against its floor, the
    band of the other nodes (min to max, and their median) and the fitted line over the
    window projected ahead; with no node flagged, the band alone per rule."""
    plots: list[Plot] = []
    for rule in found.rules:
        flagged: list[TrendRow | None] = [n for n in rule.nodes if n.flagged]
        for node in flagged or [None]:
            made = _trend_plot(found, rule, node)
            if any(p.name == made.name for p in plots):  # two names made the same stem
                made.name += f"-{len(plots)}"
            plots.append(made)
    return plots


def _trend_plot(found: Trend, rule: RuleTrend, node: TrendRow | None) -> Plot:
    import numpy as np

    x = np.arange(1, len(found.runs) + 1)
    others = np.array([[np.nan if f is None else f for f in n.figures]
                       for n in rule.nodes if n is not node], dtype=float)
    name = f"node {node.subject}" if node is not None else "every node"
    title = (f"{rule.rule.id}: {name}, {rule.rule.metric} across {len(x)} runs"
             + (f" ({node.judged.verdict})" if node is not None else ""))
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(8.4, 4.6))
        fig.suptitle(title)
        if len(others):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a run without the others
                low, high = np.nanmin(others, axis=0), np.nanmax(others, axis=0)
                mid = np.nanmedian(others, axis=0)
            label = "the other nodes" if node is not None else "the nodes"
            band = ax.fill_between(x, low, high, color="grey", alpha=0.25, linewidth=0,
                                   label=f"{label} (min..max)")
            band.set_gid("band")
            ax.plot(x, mid, color="grey", linestyle="--", linewidth=1,
                    label=f"{label} (median)")
        floors = [np.nan if f is None else f for f in (node or rule.nodes[0]).floors]
        (floor_line,) = ax.step(x, floors, where="mid", color="crimson", linewidth=1.2,
                                label="floor" if rule.rule.higher_is_better else "limit")
        floor_line.set_gid("floor")
        if node is not None:
            (line,) = ax.plot(x, [np.nan if f is None else f for f in node.figures],
                              marker="o", markersize=3, color="tab:blue", label=node.subject)
            line.set_gid(f"series-{node.subject}")
            fit = node.fit
            if fit.slope is not None and fit.fitted is not None:
                ends = np.array([max(1, len(x) - found.window + 1), len(x) + found.ahead])
                (fitted,) = ax.plot(ends, fit.fitted + fit.slope * (ends - len(x)),
                                    color="tab:blue", linestyle=":",
                                    label=f"fit over the last {min(found.window, len(x))} "
                                          f"runs, {found.ahead} ahead")
                fitted.set_gid("fit")
        ax.set_ylim(bottom=0)  # every figure is a rate or a time: a fit below 0 leaves it
        ax.set_xlabel("run (in the order they started)")
        ax.set_ylabel(f"{rule.rule.metric} ({rule.unit})")
        _legend(fig, [ax])
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", f"trend-{rule.rule.id}-"
                                           f"{node.subject if node is not None else 'all'}")
    return Plot(stem, title, fig, [n.subject for n in rule.nodes])
