"""A vs B (vs C ...): per operation and size, the time ratio to the baseline (the first run),
its 95 % interval and whether the difference is real or noise; training side by side; the
provenance fields that differ."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from fabbench.errors import UsageError
from fabbench.report.significance import MIN_TEST_SAMPLES, Verdict, compare_many, median_ratio
from fabbench.report.tables import OP_ORDER, unstable
from fabbench.results.records import Run
from fabbench.results.runs import Series
from fabbench.workloads.collectives.record import Collective
from fabbench.workloads.train.record import Train

# launcher bookkeeping that differs on every run and says nothing about the set-up
_VOLATILE_ENV = re.compile(
    r"^(OMPI_MCA_(orte|ess|pmix|initial_wdir|shmem|hwloc|rmaps|mpi_oversubscribe)\w*"
    r"|OMPI_COMM_WORLD_\w+|UCX_LOG_FILE|FABBENCH_LOCAL_RANK|MASTER_PORT|SLURM_JOB_ID)$")


@dataclass
class ComparedPoint:
    """One collective point (op, dtype, size, ranks) measured by the baseline (a) and by
    another run (b), with b's verdict against a."""

    op: str
    dtype: str
    bytes: int
    ranks: int
    a: Collective
    b: Collective
    other: Series
    verdict: Verdict

    @property
    def notes(self) -> str:
        why = [f"A: {w}" for w in [unstable(self.a)] if w]
        why += [f"B: {w}" for w in [unstable(self.b)] if w]
        return "; ".join(why)


@dataclass
class TrainRow:
    model: str
    ranks: int
    a: Train | None
    b: Train | None
    other: Series


@dataclass
class Comparison:
    baseline: Series
    others: list[Series]
    rows: list[ComparedPoint] = field(default_factory=list)
    train: list[TrainRow] = field(default_factory=list)
    provenance: list[tuple[str, list[str]]] = field(default_factory=list)  # field, values
    unmatched: list[str] = field(default_factory=list)

    def ops(self) -> list[str]:
        found = {r.op for r in self.rows}
        return [op for op in OP_ORDER if op in found] + sorted(found - set(OP_ORDER))

    def counts(self, other: Series) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            if r.other is other:
                out[r.verdict.verdict] = out.get(r.verdict.verdict, 0) + 1
        return out


def _key(rec: Collective) -> tuple[str, str, int, int]:
    return rec.op, rec.dtype, rec.bytes, rec.ranks


def _timing(rec: Collective) -> str:
    return rec.timing or "batch"  # a record older than --timing: batch, the only protocol then


def _samples(a: Collective, b: Collective) -> tuple[Sequence[float], Sequence[float], float]:
    """What B is tested against A on (none recorded: "no samples", a fabbench/1 point)."""
    return a.samples_us or [], b.samples_us or [], median_ratio(a.time_us.p50, b.time_us.p50)


def compare(series: list[Series]) -> Comparison:
    if len(series) < 2:
        raise UsageError("compare needs at least two runs (A B [...]); got "
                         f"{len(series)}")
    base, others = series[0], series[1:]
    result = Comparison(base, others)
    a_points = {(_key(c), _timing(c)): c for c in base.collectives}
    matched: list[tuple[tuple[str, str, int, int], Collective, Collective, Series]] = []
    for other in others:
        b_points = {(_key(c), _timing(c)): c for c in other.collectives}
        for key, timing in sorted(a_points.keys() & b_points.keys(),
                                  key=lambda k: (_op_index(k[0][0]), k[0][1], k[0][3],
                                                 k[0][2], k[1])):
            matched.append((key, a_points[key, timing], b_points[key, timing], other))
        only = len(a_points.keys() ^ b_points.keys())
        if only:
            result.unmatched.append(
                f"{only} points are in only one of {base.label} and {other.label} (different "
                "ops, sizes, dtypes, ranks or --timing: a batch figure and an osu figure of "
                "the same point are not compared)")
        a_train = {(t.model, t.ranks): t for t in base.of_kind(Train)}
        b_train = {(t.model, t.ranks): t for t in other.of_kind(Train)}
        for model, ranks in sorted(a_train.keys() | b_train.keys()):
            result.train.append(TrainRow(model, ranks, a_train.get((model, ranks)),
                                         b_train.get((model, ranks)), other))
    _baselines_positive(base, matched)
    verdicts = compare_many([_samples(a, b) for _, a, b, _ in matched])  # all at once: fast
    result.rows = [ComparedPoint(*key, a=a, b=b, other=other, verdict=verdict)
                   for (key, a, b, other), verdict in zip(matched, verdicts, strict=True)]
    if not result.rows and not any(t.a and t.b for t in result.train):
        raise UsageError(f"nothing to compare: {base.label} and the others share no operation, "
                         "size and rank count, and no training point")
    result.provenance = provenance_diff(series)
    return result


def _baselines_positive(base: Series, matched: Sequence[tuple[tuple[str, str, int, int],
                                                               Collective, Collective, Series]]
                        ) -> None:
    """Refuse a baseline point whose samples' median is not positive where it is tested (its
    resamples would divide by it): samples of 0 us are in the schema, not in a time ratio."""
    seen: set[int] = set()
    for (op, dtype, size, ranks), a, b, _ in matched:
        if id(a) in seen or min(len(a.samples_us or []), len(b.samples_us or [])) \
                < MIN_TEST_SAMPLES:
            continue
        seen.add(id(a))
        if statistics.median(a.samples_us or []) <= 0:
            raise UsageError(f"{base.label}: {op} {size} B {dtype}, {ranks} ranks: the median "
                             "of its samples is 0 us, no baseline for a time ratio")


def _op_index(op: str) -> int:
    return OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER)


def flatten_provenance(run: Run) -> dict[str, str]:
    """The run's set-up as "field: value" strings, launcher bookkeeping left out (a field that
    is None, not recorded, e.g. in a fabbench/1 file, or nothing, as a bare host's container,
    is left out too)."""
    out: dict[str, str] = {}
    for key in ("fabric", "wire", "primitive", "horovod_over", "device", "ranks", "nodes",
                "transport"):
        if getattr(run, key) is not None:
            out[key] = str(getattr(run, key))
    prov = run.provenance
    for key in ("host", "os", "container", "scheduler", "gpudirect_rdma"):
        if getattr(prov, key) is not None:
            out[key] = str(getattr(prov, key))
    for key, value in prov.cpu.to_json().items():
        out[f"cpu.{key}"] = str(value)
    for i, gpu in enumerate(prov.gpus or []):
        out[f"gpus[{i}]"] = ", ".join(str(x) for x in (gpu.name, gpu.memory, gpu.driver))
    for nic in prov.nics or []:
        out[f"nics.{nic.name}"] = (f"{nic.kind}, {nic.speed_mbit_s or '?'} Mb/s, "
                                   f"{nic.operstate}, mtu {nic.mtu}")
    for port in prov.rdma or []:
        out[f"rdma.{port.device}:{port.port}"] = f"{port.state}, {port.rate}, {port.link_layer}"
    for key, value in prov.versions.to_json().items():
        out[f"versions.{key}"] = str(value)
    for key, value in (prov.env or {}).items():
        if not _VOLATILE_ENV.match(key):
            out[f"env.{key}"] = str(value)
    for key, value in (prov.build or {}).items():
        out[f"build.{key}"] = str(value)
    return out


def provenance_diff(series: list[Series]) -> list[tuple[str, list[str]]]:
    flats = [flatten_provenance(s.run) for s in series]
    keys = sorted(set().union(*flats))
    diff = []
    for key in keys:
        values = [f.get(key, "—") for f in flats]
        if len(set(values)) > 1:
            diff.append((key, values))
    return diff
