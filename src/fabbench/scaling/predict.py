"""The whole `fabbench forecast` answer: fits, allreduce at scale, training what-ifs,
assumptions, as a typed record (Forecast) whose ``to_json`` is what ``--json`` prints.

Reads results files only (results.runs); never a comm library.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabbench.errors import UsageError
from fabbench.results.link import ceiling_of, link_of
from fabbench.results.reader import collector_paused
from fabbench.results.runs import Series, load
from fabbench.scaling import costs, hierarchy, replay_whatif, whatif
from fabbench.scaling.fit import Fit, fit_records
from fabbench.scaling.quantities import format_bandwidth, parse_bandwidth, parse_duration
from fabbench.workloads.replay.record import Replay
from fabbench.workloads.train.record import Train

MODEL = "alpha-beta (fit) + Zhang et al. 2020 (training) + Won et al. 2021 (hierarchy)"
SIZES = (8, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
NODES = (1, 2, 4, 8, 16, 32, 64)
BANDWIDTHS = ("1Gbit", "10Gbit", "25Gbit", "100Gbit")
# the largest what-if a forecast takes: past these its figures overflow or mean nothing
MAX_NODES, MAX_RANKS_PER_NODE, MAX_COMPRESSION = 1_000_000, 4096, 1e6


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    nodes: int = 16
    ranks_per_node: int = 1
    bandwidth: str | None = None        # per node, e.g. "25Gbit"
    latency: str | None = None          # per message, e.g. "5us"
    intra_bandwidth: str | None = None  # per rank inside a node
    compression: float = 1.0
    backward_fraction: float | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, not {self.nodes}")
        if not 1 <= self.ranks_per_node <= MAX_RANKS_PER_NODE:
            raise UsageError(f"--ranks-per-node must be between 1 and {MAX_RANKS_PER_NODE}, "
                             f"not {self.ranks_per_node}")
        if not 1 <= self.compression <= MAX_COMPRESSION:
            raise UsageError(f"--compression must be a ratio between 1 and {MAX_COMPRESSION:g}, "
                             f"not {self.compression}")
        if self.backward_fraction is not None and not 0.01 <= self.backward_fraction <= 1:
            raise UsageError(f"--backward-fraction must be between 0.01 and 1, not "
                             f"{self.backward_fraction}")
        for name in ("bandwidth", "intra_bandwidth"):
            if getattr(self, name) is not None:
                parse_bandwidth(getattr(self, name))
        if self.latency is not None:
            parse_duration(self.latency)


def _allreduce_fit(fits: list[Fit], single_node: set[str] | None = None) -> Fit | None:
    """The allreduce fit to scale from: a resolved bandwidth first, then the most ranks."""
    found = [f for f in fits if f.op == "allreduce"
             and (single_node is None or f.transport in single_node)]
    if not found:
        return None
    return max(found, key=lambda f: (f.beta_s_per_byte > 0, f.ranks, f.points))


@dataclass(frozen=True, kw_only=True)
class AllreduceRow:
    """One message size of allreduce at scale: every exact algorithm's time, the best one, its
    busbw and the bandwidth lower bound."""

    bytes: int
    times_us: dict[str, float]  # by algorithm
    best: str
    best_us: float
    busbw_gbyte_s: float
    lower_bound_us: float

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "times_us": dict(self.times_us), "best": self.best,
                "best_us": self.best_us, "busbw_gbyte_s": self.busbw_gbyte_s,
                "lower_bound_us": self.lower_bound_us}


@dataclass(frozen=True, kw_only=True)
class HierarchyRow:
    """One message size of the hierarchical allreduce: T = max(intra, inter), and T at the
    best split of the bandwidth (its intra-node share)."""

    bytes: int
    time_us: float
    intra_us: float
    inter_us: float
    busbw_gbyte_s: float
    best_split_us: float
    best_split_intra_share: float

    def to_json(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "time_us": self.time_us, "intra_us": self.intra_us,
                "inter_us": self.inter_us, "busbw_gbyte_s": self.busbw_gbyte_s,
                "best_split_us": self.best_split_us,
                "best_split_intra_share": self.best_split_intra_share}


@dataclass(frozen=True, kw_only=True)
class Hierarchy:
    """Won et al.'s hierarchical allreduce: the two bandwidths, which one bounds, the rows."""

    intra_bytes_per_s: float
    inter_bytes_per_s_per_rank: float
    bottleneck: str  # "inter-node" or "intra-node"
    rows: tuple[HierarchyRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {"intra_bytes_per_s": self.intra_bytes_per_s,
                "inter_bytes_per_s_per_rank": self.inter_bytes_per_s_per_rank,
                "bottleneck": self.bottleneck, "rows": [r.to_json() for r in self.rows]}


@dataclass(frozen=True, kw_only=True)
class TrainForecast:
    """One trained model's what-if (Zhang et al.): its measured profile, and the predicted
    scaling against nodes (at the network's bandwidth) and against bandwidth (at the nodes)."""

    model: str
    batch_per_rank: int
    measured_ranks: int
    measured_scaling: float | None
    iteration_ms: float
    backward_ms: float
    grad_bytes: float
    buckets: int
    notes: tuple[str, ...]
    by_nodes: tuple[whatif.Prediction, ...]
    by_bandwidth: tuple[whatif.Prediction, ...]

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "batch_per_rank": self.batch_per_rank,
                "measured_ranks": self.measured_ranks, "measured_scaling": self.measured_scaling,
                "iteration_ms": self.iteration_ms, "backward_ms": self.backward_ms,
                "grad_bytes": self.grad_bytes, "buckets": self.buckets, "notes": list(self.notes),
                "by_nodes": [p.to_json() for p in self.by_nodes],
                "by_bandwidth": [p.to_json() for p in self.by_bandwidth]}


@dataclass(frozen=True, kw_only=True)
class ReplayForecast:
    """One replayed trace's what-if (fabbench.scaling.replay_whatif): what the replay measured,
    the model at the measured size beside it (where the forecast leaves the measurement), and
    the predicted step against nodes (at the network's bandwidth) and against bandwidth (at
    the nodes)."""

    trace: str
    mode: str
    ranks: int
    compute_ms: float
    measured_step_ms: float
    measured_exposed_ms: float
    model_step_ms: float   # the model's step at the measured size, as the replay ran it
    notes: tuple[str, ...]
    by_nodes: tuple[whatif.Prediction, ...]
    by_bandwidth: tuple[whatif.Prediction, ...]

    def to_json(self) -> dict[str, Any]:
        return {"trace": self.trace, "mode": self.mode, "ranks": self.ranks,
                "compute_ms": self.compute_ms, "measured_step_ms": self.measured_step_ms,
                "measured_exposed_ms": self.measured_exposed_ms,
                "model_step_ms": self.model_step_ms, "notes": list(self.notes),
                "by_nodes": [p.to_json() for p in self.by_nodes],
                "by_bandwidth": [p.to_json() for p in self.by_bandwidth]}


@dataclass(frozen=True, kw_only=True)
class Forecast:
    """`fabbench forecast`'s answer: the network it assumed (per-node bandwidth, α), the fits it
    rests on, allreduce at scale, the hierarchical model (None: one rank a node, one node, or
    no intra-node bandwidth), each trained model's what-if, the assumptions and the warnings."""

    model: str = MODEL
    nodes: int
    ranks_per_node: int
    ranks: int
    bandwidth_bytes_per_s: float
    alpha_s: float
    compression: float
    fits: tuple[Fit, ...]
    allreduce: tuple[AllreduceRow, ...]
    hierarchical: Hierarchy | None
    train: tuple[TrainForecast, ...]
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    replay: tuple[ReplayForecast, ...] = ()

    @property
    def alpha_us(self) -> float:
        return self.alpha_s * 1e6

    def to_json(self) -> dict[str, Any]:
        """What ``fabbench forecast --json`` prints: strict JSON (inf and nan as null)."""
        out: dict[str, Any] = jsonable({
            "model": self.model, "nodes": self.nodes, "ranks_per_node": self.ranks_per_node,
            "ranks": self.ranks, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "alpha_us": self.alpha_us, "compression": self.compression,
            "fits": [f.to_json() for f in self.fits],
            "allreduce": [r.to_json() for r in self.allreduce],
            "hierarchical": None if self.hierarchical is None else self.hierarchical.to_json(),
            Train.kind: [t.to_json() for t in self.train], "assumptions": list(self.assumptions),
            "warnings": list(self.warnings)})
        if self.replay:  # a key of its own where replays were read (other answers as before)
            out[Replay.kind] = jsonable([r.to_json() for r in self.replay])
        return out


def build(paths: Iterable[str | Path], options: ModelOptions) -> Forecast:
    with collector_paused():  # reading and fitting make no cycles (results.reader)
        return _build(list(paths), options)

def _build(paths: list[str | Path], options: ModelOptions) -> Forecast:
    series = load(paths)
    collectives = [c for s in series for c in s.collectives]
    trains = [t for s in series for t in s.of_kind(Train)]
    replays = [r for s in series for r in s.of_kind(Replay)]
    warnings = [w for s in series for w in s.warnings]
    if not collectives and not trains and not replays:
        raise UsageError(f"{', '.join(map(str, paths))}: no collective, train or replay "
                         "records: nothing to model (run `fabbench run` first)")
    fits: list[Fit] = []
    if collectives:
        try:
            fits, skipped = fit_records(collectives)
            warnings += skipped
        except UsageError as exc:
            if not trains and not replays:
                raise
            warnings.append(str(exc))
    if replays:
        fitted, skipped = replay_whatif.fits(replays)
        fits += fitted
        warnings += skipped
    assumptions: list[str] = []

    # the network: per-node bandwidth and per-message latency
    fit = _allreduce_fit(fits)
    if options.bandwidth:
        bw = parse_bandwidth(options.bandwidth)
        bw_source = f"--bandwidth {options.bandwidth} (line rate: an upper bound)"
    elif fit is not None and fit.beta_s_per_byte > 0:
        bw = 1 / fit.beta_s_per_byte
        bw_source = f"fitted allreduce bandwidth over {fit.transport}"
    elif (ceiling := next((c for s in series if (c := ceiling_of(s.ceilings))), None)):
        # what the wire delivered in the same job, not what the link is rated at (an emulated
        # or shared link can deliver much less than its nominal rate)
        bw = ceiling.speed_gbit_s * 1e9 / 8
        bw_source = f"the wire's ceiling measured in the job ({ceiling.what})"
    else:
        link = next((link_of(s.run) for s in series if link_of(s.run)), None)
        if link is None:
            raise UsageError("no bandwidth to model with: the records resolve none and name no "
                             "link; give --bandwidth (e.g. 25Gbit)")
        bw = link.speed_gbit_s * 1e9 / 8
        bw_source = f"the run's link {link.what}"
    if options.latency is not None:
        alpha = parse_duration(options.latency)
        alpha_source = f"--latency {options.latency}"
    elif fit is not None:
        alpha = fit.alpha_s
        alpha_source = f"fitted allreduce α over {fit.transport}"
    else:
        alpha, alpha_source = 0.0, "none (latency left out)"
    params = costs.Params(alpha_s=alpha, beta_s_per_byte=1 / bw)
    p = options.nodes * options.ranks_per_node
    assumptions.append(f"network: {format_bandwidth(bw)} per node from {bw_source}; "
                       f"α = {alpha * 1e6:.3g} µs from {alpha_source}")
    assumptions.append("allreduce at scale: α-β-γ formulas (docs/methods.md) with γ folded into β; "
                       "each rank's traffic crosses one link of that bandwidth (exact for a ring "
                       "laid out node by node; optimistic for the lg p algorithms when ranks "
                       "share a NIC); no congestion, no protocol switches")

    rows: list[AllreduceRow] = []
    for nbytes in SIZES:
        times = {alg: costs.time_s("allreduce", alg, p, nbytes, params)
                 for alg in costs.algorithms("allreduce") if costs.exact(alg, p)}
        alg, t = costs.best("allreduce", p, nbytes, params)
        rows.append(AllreduceRow(
            bytes=nbytes, times_us={a: v * 1e6 for a, v in times.items()}, best=alg,
            best_us=t * 1e6, busbw_gbyte_s=costs.busbw_gbyte_s("allreduce", p, nbytes, t),
            lower_bound_us=costs.allreduce_lower_bound_s(p, nbytes, bw) * 1e6))

    hier = _hierarchical(options, fits, series, bw, assumptions)

    train_out: list[TrainForecast] = []
    if trains:
        assumptions.append("training: Zhang et al.'s what-if; workers are nodes, ranks inside a "
                           "node reduce at no cost; buckets go one at a time as they become ready; "
                           "latency and reduction cost left out unless --latency is given")
    for rec in _train_profiles(trains):
        profile = whatif.profile_from_record(rec, options.backward_fraction)
        alpha_s = alpha if options.latency else 0.0
        by_nodes = tuple(whatif.predict(profile, n, bw, compression=options.compression,
                                        alpha_s=alpha_s)
                         for n in sorted({*NODES, options.nodes}))
        by_bw = tuple(whatif.predict(profile, options.nodes, b, compression=options.compression,
                                     alpha_s=alpha_s)
                      for b in sorted({*map(parse_bandwidth, BANDWIDTHS), bw}))
        train_out.append(TrainForecast(
            model=profile.model, batch_per_rank=rec.batch_per_rank, measured_ranks=rec.ranks,
            measured_scaling=rec.scaling_efficiency, iteration_ms=profile.iteration_s * 1e3,
            backward_ms=profile.backward_s * 1e3, grad_bytes=profile.grad_bytes,
            buckets=len(profile.buckets), notes=profile.notes, by_nodes=by_nodes,
            by_bandwidth=by_bw))
    replay_out = _replays(replays, options, params, assumptions, warnings)
    return Forecast(nodes=options.nodes, ranks_per_node=options.ranks_per_node, ranks=p,
                    bandwidth_bytes_per_s=bw, alpha_s=alpha, compression=options.compression,
                    fits=tuple(fits), allreduce=tuple(rows), hierarchical=hier,
                    train=tuple(train_out), assumptions=tuple(assumptions),
                    warnings=tuple(warnings), replay=replay_out)


def _replays(replays: list[Replay], options: ModelOptions, params: costs.Params,
             assumptions: list[str], warnings: list[str]) -> tuple[ReplayForecast, ...]:
    """Each replayed trace's what-if (one per trace and mode: the record of the most ranks)."""
    chosen: dict[tuple[str, str], Replay] = {}
    for rec in replays:
        key = (rec.trace_sha256, rec.mode)
        if key not in chosen or rec.ranks > chosen[key].ranks:
            chosen[key] = rec
    out = []
    for rec in chosen.values():
        try:
            profile = replay_whatif.ReplayProfile.of(rec)
        except UsageError as exc:
            warnings.append(f"{exc}; its forecast is left out")
            continue
        at = replay_whatif.predict(profile, rec.ranks, params, scaled=False)
        compute_at = profile.compute_s if rec.mode == "gaps" else 0.0
        model_step = compute_at + at.overhead_s
        measured = profile.measured_step_s
        off = model_step / measured - 1 if measured > 0 else math.nan
        notes = (f"measured: {rec.ranks} ranks, a step of {measured * 1e3:.4g} ms ({rec.mode}); "
                 f"the model at that size and mode: {model_step * 1e3:.4g} ms ({off:+.0%}); "
                 f"the rows at other nodes or bandwidths are the model's alone",)
        by_nodes = tuple(replay_whatif.predict(profile, n, params)
                         for n in sorted({*NODES, options.nodes}))
        by_bw = tuple(replay_whatif.predict(profile, options.nodes, costs.Params(
            alpha_s=params.alpha_s, beta_s_per_byte=1 / b))
            for b in sorted({*map(parse_bandwidth, BANDWIDTHS), params.bandwidth_bytes_per_s}))
        out.append(ReplayForecast(
            trace=rec.trace, mode=rec.mode, ranks=rec.ranks, compute_ms=profile.compute_s * 1e3,
            measured_step_ms=measured * 1e3, measured_exposed_ms=profile.measured_exposed_s * 1e3,
            model_step_ms=model_step * 1e3, notes=notes, by_nodes=by_nodes, by_bandwidth=by_bw))
    if out:
        assumptions.append("replay: the trace's steps simulated (docs/replay.md, Forecast): "
                           "workers are nodes; operations on groups of every rank run over "
                           "--nodes workers with their whole array kept, the others keep their "
                           "group and the replay's time; compute gaps as recorded; the link "
                           "carries one operation at a time")
    return tuple(out)


def _train_profiles(trains: list[Train]) -> list[Train]:
    """One record per (model, batch, input): the one with the fewest ranks (the cleanest
    compute time)."""
    chosen: dict[tuple[str, int, int | None, str | None], Train] = {}
    for rec in trains:
        key = (rec.model, rec.batch_per_rank, rec.input_size, rec.precision)
        if key not in chosen or rec.ranks < chosen[key].ranks:
            chosen[key] = rec
    return list(chosen.values())


def _hierarchical(options: ModelOptions, fits: list[Fit], series: list[Series], bw: float,
                  assumptions: list[str]) -> Hierarchy | None:
    """Won et al.: intra-node then inter-node, T = max(t_intra, t_inter), and the best split."""
    rpn = options.ranks_per_node
    if rpn == 1 or options.nodes == 1:
        return None
    if options.intra_bandwidth:
        intra = parse_bandwidth(options.intra_bandwidth)
        source = f"--intra-bandwidth {options.intra_bandwidth}"
    else:
        single = {c.transport for s in series if s.run.nodes == 1 for c in s.collectives}
        fit = _allreduce_fit(fits, single)
        if fit is None or fit.beta_s_per_byte == 0:
            assumptions.append("no intra-node bandwidth (no single-node allreduce fit, no "
                               "--intra-bandwidth): the hierarchical model is left out")
            return None
        intra = 1 / fit.beta_s_per_byte
        source = f"fitted single-node allreduce over {fit.transport}"
    inter = bw / rpn
    sizes = [rpn, options.nodes]
    assumptions.append(f"hierarchical allreduce (Won et al.): {rpn} ranks per node at "
                       f"{format_bandwidth(intra)} each ({source}), then {options.nodes} nodes, "
                       f"the node's link shared by its ranks ({format_bandwidth(inter)} each); "
                       "T = max over dimensions, bandwidth terms only")
    rows: list[HierarchyRow] = []
    for nbytes in SIZES[1:]:
        t, parts = hierarchy.collective_time_s("allreduce", nbytes, sizes, [intra, inter])
        split = hierarchy.optimal_split("allreduce", nbytes, sizes, intra + inter)
        t_best, _ = hierarchy.collective_time_s("allreduce", nbytes, sizes, split)
        rows.append(HierarchyRow(
            bytes=nbytes, time_us=t * 1e6, intra_us=parts[0] * 1e6, inter_us=parts[1] * 1e6,
            busbw_gbyte_s=costs.busbw_gbyte_s("allreduce", rpn * options.nodes, nbytes, t),
            best_split_us=t_best * 1e6, best_split_intra_share=split[0] / (intra + inter)))
    return Hierarchy(intra_bytes_per_s=intra, inter_bytes_per_s_per_rank=inter,
                     bottleneck="inter-node" if rows and rows[-1].inter_us >= rows[-1].intra_us
                     else "intra-node", rows=tuple(rows))


def jsonable(obj: Any) -> Any:
    """The answer with inf/nan as null (strict JSON)."""
    if isinstance(obj, float):
        return None if math.isinf(obj) or math.isnan(obj) else obj
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj
