"""Figures of a study: per group (a network, a workload, a collective), every cell's median
time with the 95 % interval of its difference to the best cell, significant ones marked; and the
forecast's scaling against nodes and link speed."""

from __future__ import annotations

import matplotlib.pyplot as plt

from fabbench.report.plots import _STYLE, Plot, _grid
from fabbench.report.study.answer import StudyAnswer
from fabbench.report.study.groups import METRIC, UNIT


def cells(a: StudyAnswer) -> list[Plot]:
    groups = [g for g in a.groups if g.rows]
    if not groups:
        return []
    fig, axes = _grid(len(groups), f"study {a.manifest.study}: each cell against the best "
                      "(bar: median; whisker: 95 % CI of the difference)")
    labels: set[str] = set()
    with plt.rc_context(_STYLE):
        for ax, g in zip(axes, groups, strict=True):
            names = [r.cell.label for r in g.rows]
            labels.update(names)
            best = g.rows[0].median
            medians = [r.median for r in g.rows]
            low, high = [], []
            for r in g.rows:
                _, lo, hi = r.diff()
                low.append(0.0 if lo is None else max(0.0, r.median - best * (1 + lo / 100)))
                high.append(0.0 if hi is None else max(0.0, best * (1 + hi / 100) - r.median))
            colours = ["C2" if r.best else "C3" if r.verdict and r.verdict.significant
                       else "C7" for r in g.rows]
            y = list(range(len(g.rows)))
            ax.barh(y, medians, color=colours, xerr=[low, high], capsize=3)
            ax.set_yticks(y, names)
            ax.invert_yaxis()
            ax.set_xlabel(f"{METRIC[g.kind]} ({UNIT[g.kind]}, median)")
            ax.set_title(g.title)
        fig.tight_layout(rect=(0, 0.04, 1, 0.95))
        fig.text(0.01, 0.01, "green: best; red: significantly different; grey: not "
                 "significant", fontsize=8)
    return [Plot("study-cells", "each cell against the best cell of its group", fig,
                 sorted(labels))]


def forecast(a: StudyAnswer) -> list[Plot]:
    forecast = a.forecast
    if forecast is None or not forecast.train:
        return []
    trains = forecast.train
    fig, axes = _grid(2, "forecast (fabbench model, Zhang et al.'s what-if): scaling factor")
    with plt.rc_context(_STYLE):
        for t in trains:
            label = f"{t.model} (batch {t.batch_per_rank})"
            nodes = [p.nodes for p in t.by_nodes]
            axes[0].plot(nodes, [p.scaling for p in t.by_nodes], marker="o", label=label)
            bws = [p.bandwidth_gbit_s for p in t.by_bandwidth]
            axes[1].plot(bws, [p.scaling for p in t.by_bandwidth], marker="o", label=label)
        axes[0].set_xscale("log", base=2)
        axes[0].set_xlabel("nodes")
        axes[1].set_xscale("log")
        axes[1].set_xlabel(f"link (Gbit/s) at {forecast.nodes} nodes")
        for ax in axes:
            ax.set_ylabel("scaling factor")
            ax.set_ylim(0, 1.05)
            ax.legend(fontsize=7)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
    return [Plot("study-forecast", "forecast: scaling against nodes and link speed", fig,
                 [t.model for t in trains])]
