"""`fabbench forecast`'s answer as Rich tables for people."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from fabbench.scaling.predict import Forecast
from fabbench.scaling.quantities import format_bandwidth
from fabbench.scaling.whatif import Prediction
from fabbench.units import format_size

HEADER = ("[bold]fabbench model[/]: predictions from α-β fits of the records and Zhang et al.'s "
          "what-if, [bold]not measurements[/]")
TITLE = "model"


def _num(x: float | None, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def fit_table(answer: Forecast) -> Table:
    t = Table(title=f"{TITLE}: α-β fit per run, op and transport, t = a(p)·α + b(p)·S·β "
              "(ring, pairwise alltoall, chain broadcast: 1/β compares with busbw)",
              title_justify="left")
    for name in ("run", "op", "transport", "ranks", "α µs", "1/β GB/s", "busbw@max",
                 "sizes", "points", "rms err", "max err"):
        t.add_column(name, justify="left" if name in ("run", "op", "transport") else "right",
                     no_wrap=name in ("op", "transport"))
    for f in answer.fits:
        rms = "-" if math.isnan(f.rms_rel_err) else f"{f.rms_rel_err:.1%}"
        bandwidth = None if math.isinf(f.bandwidth_gbyte_s) else f.bandwidth_gbyte_s
        t.add_row(f.run_id, f.op, f.transport, str(f.ranks), _num(f.alpha_us), _num(bandwidth),
                  _num(f.busbw_at_max_gbyte_s),
                  f"{format_size(f.min_bytes)}-{format_size(f.max_bytes)}",
                  str(f.points), rms, f"{f.max_rel_err:.1%}")
    return t


def allreduce_table(answer: Forecast) -> Table:
    a = answer
    t = Table(title=f"{TITLE}: allreduce at {a.nodes} nodes × {a.ranks_per_node} "
              f"ranks = {a.ranks} ranks, {format_bandwidth(a.bandwidth_bytes_per_s)}, "
              f"α {a.alpha_us:.3g} µs", title_justify="left")
    algs = list(a.allreduce[0].times_us) if a.allreduce else []
    for name in ("size", *(f"{x} µs" for x in algs), "best", "busbw GB/s", "bound µs"):
        t.add_column(name, justify="left" if name == "best" else "right")
    for r in a.allreduce:
        t.add_row(format_size(r.bytes), *(_num(r.times_us[x], ".4g") for x in algs),
                  r.best, _num(r.busbw_gbyte_s), _num(r.lower_bound_us, ".4g"))
    return t


def hierarchy_table(answer: Forecast) -> Table | None:
    h = answer.hierarchical
    if h is None:
        return None
    t = Table(title=f"{TITLE}: hierarchical allreduce (Won et al.), bottleneck "
              f"{h.bottleneck}", title_justify="left")
    for name in ("size", "T µs", "intra µs", "inter µs", "busbw GB/s", "best split µs",
                 "intra share"):
        t.add_column(name, justify="right")
    for r in h.rows:
        t.add_row(format_size(r.bytes), _num(r.time_us, ".4g"), _num(r.intra_us, ".4g"),
                  _num(r.inter_us, ".4g"), _num(r.busbw_gbyte_s), _num(r.best_split_us, ".4g"),
                  f"{r.best_split_intra_share:.0%}")
    return t


def _what_ifs(answer: Forecast, by_nodes: Sequence[Prediction],
              by_bandwidth: Sequence[Prediction], title: str, what: str,
              columns: tuple[str, str, str]) -> list[Table | str]:
    """A what-if's two tables: against nodes (at the forecast's bandwidth) and against
    bandwidth (at its nodes); ``what`` names the figure (scaling, step), ``columns`` the
    comm, overhead and scaling columns."""
    out: list[Table | str] = []
    for points, against, first in (
            (by_nodes, f"{what} vs nodes at {format_bandwidth(answer.bandwidth_bytes_per_s)}",
             "nodes"),
            (by_bandwidth, f"{what} vs bandwidth at {answer.nodes} nodes", "bandwidth")):
        t = Table(title=f"{TITLE}: {title.format(against=against)}", title_justify="left",
                  min_width=64)
        for name in (first, *columns):
            t.add_column(name, justify="right")
        for p in points:
            lead = (str(p.nodes) if first == "nodes"
                    else format_bandwidth(p.bandwidth_gbit_s * 1e9 / 8))
            t.add_row(lead, f"{p.comm_ms:.4g}", f"{p.overhead_ms:.4g}", f"{p.scaling:.3f}")
        out.append(t)
    return out


def train_tables(answer: Forecast) -> list[Table | str]:
    out: list[Table | str] = []
    for w in answer.train:
        measured = ("" if w.measured_scaling is None else f"; measured scaling "
                    f"{w.measured_scaling:.3f} at {w.measured_ranks} ranks")
        out.append(f"[bold]{w.model}[/] (batch {w.batch_per_rank}/rank): step "
                   f"{w.iteration_ms:.4g} ms, backward {w.backward_ms:.4g} ms, gradients "
                   f"{w.grad_bytes / 1e6:.4g} MB in {w.buckets} buckets{measured}")
        out += _what_ifs(answer, w.by_nodes, w.by_bandwidth,
                         f"{w.model} {{against}}, c={answer.compression:g}", "scaling",
                         ("comm ms", "overhead ms", "scaling"))
        out += [f"  assumed: {n}" for n in w.notes]
    return out


def replay_tables(answer: Forecast) -> list[Table | str]:
    """Each replayed trace's step against nodes and bandwidth, under what the replay measured
    and the model's figure at the same size."""
    out: list[Table | str] = []
    for r in answer.replay:
        out.append(f"[bold]replay of {r.trace}[/] ({r.mode}, {r.ranks} ranks): step "
                   f"{r.measured_step_ms:.4g} ms measured, {r.measured_exposed_ms:.4g} ms "
                   f"exposed; the model at that size {r.model_step_ms:.4g} ms; compute "
                   f"{r.compute_ms:.4g} ms a step")
        out += _what_ifs(answer, r.by_nodes, r.by_bandwidth, "replay {against}", "step",
                         ("comm ms", "exposed ms", "compute share"))
        out += [f"  {n}" for n in r.notes]
    return out
