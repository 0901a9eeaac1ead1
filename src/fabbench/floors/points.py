"""What a floor judges: measured figures as :class:`Point` s, whoever measured them.

A point is one figure set of one measurement (a collective at one size, from fabbench, nccl-tests
or OSU; one training measurement; one figure set of a workload that declares its own, such as one
node's bandwidth to its peers from fabbench's pairs records), with what a rule may select it by
and what it may be measured against (the wire's ceiling and nominal rate, where recorded). Other
tools' points claim no transport, so a rule that requires a transport class does not judge them.
Metric units (a rule's are converted to these): busbw, algbw, bw in GB/s (1e9 bytes/s) and time
in µs; samples_per_s; step_time in ms."""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from fabbench import catalog
from fabbench.errors import UsageError
from fabbench.results.link import link_of
from fabbench.results.runs import Series
from fabbench.workload_spec import WorkloadFloors

# metric -> (its unit, whether higher is better)
METRICS: Mapping[str, tuple[str, bool]] = {
    "busbw": ("GB/s", True), "algbw": ("GB/s", True), "bw": ("GB/s", True),
    "time": ("µs", False), "samples_per_s": ("samples/s", True), "step_time": ("ms", False),
}
# the metrics each workload's points carry, and the operations a rule may name for it (each
# workload's floors, fabbench.catalog)
FLOORS: Mapping[str, WorkloadFloors] = {
    n: w.floors for n, w in catalog.WORKLOADS.items() if w.floors is not None}
WORKLOAD_METRICS: Mapping[str, tuple[str, ...]] = {n: f.metrics for n, f in FLOORS.items()}
WORKLOAD_OPS: Mapping[str, tuple[str, ...]] = {n: f.ops for n, f in FLOORS.items()}

# transport classes: what kind of wire a reported transport is (fnmatch patterns, in order;
# the first match wins). "gdr": GPU memory moved by the NIC directly (GPUDirect RDMA).
TRANSPORT_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ib-gdr", ("nccl/IB*GDR*", "nccl/IB*/GDRDMA*")),
    ("ib", ("nccl/IB*", "ucx/rc*", "ucx/dc*", "ucx/ud*", "cm/ofi/verbs*", "ofi/verbs*")),
    ("opa", ("cm/ofi/psm2*", "ofi/psm2*", "nccl/Libfabric/psm2*", "nccl/AWS Libfabric/psm2*",
             "psm2*")),
    ("shm", ("ob1/vader*", "ob1/sm*", "ucx/sm*", "ucx/posix*", "ucx/sysv*", "ucx/cma*",
             "nccl/P2P*", "nccl/SHM*", "nccl/NVLS*")),
    ("tcp", ("ob1/tcp*", "gloo/tcp*", "nccl/Socket*", "ucx/tcp*", "cm/ofi/tcp*", "ofi/tcp*",
             "ofi/sockets*")),
)
CLASSES = tuple(name for name, _ in TRANSPORT_CLASSES)


def transport_class(transport: str | None) -> str | None:
    """The class of a reported transport ("ob1/tcp" -> "tcp"); None for none reported or one
    no class knows. A run's transport may list several ("ob1/tcp, ob1/vader"): the class of
    the first that has one that is not shm, else shm."""
    if not transport:
        return None
    found = []
    for part in (p.strip() for p in transport.split(",")):
        for name, patterns in TRANSPORT_CLASSES:
            if any(fnmatch.fnmatchcase(part, p) for p in patterns):
                found.append(name)
                break
    wire = [c for c in found if c != "shm"]
    return wire[0] if wire else (found[0] if found else None)


@dataclass(frozen=True, kw_only=True)
class Point:
    """One measurement's figures, with what a rule selects it by."""

    source: str                 # "fabbench", "nccl-tests", "osu"
    file: str                   # the file it was read from
    run: str                    # the run's id (fabbench) or a label of the file's run
    workload: str               # the workload's name (collectives, pairs, train, ...)
    op: str | None = None       # allreduce, ...; pairs: sendrecv; train: the network's name
    bytes: int | None = None
    dtype: str | None = None
    primitive: str | None = None
    fabric: str | None = None
    transport: str | None = None  # as the library reported it; None: not claimed
    gpudirect: bool | None = None  # GPUDirect RDMA obtained (None: not known)
    ranks: int | None = None
    nodes: int | None = None
    node: str | None = None     # the node the figures are of (pairs); None: the whole run
    metrics: Mapping[str, float] = field(default_factory=dict)  # by METRICS name, its unit
    ceiling_gbit_s: float | None = None  # the wire's measured ceiling, one direction
    nominal_gbit_s: float | None = None  # the link's line rate
    evidence: str = ""          # how the figure was made ("median of 3 pairs at 1 MiB")
    peers: Mapping[str, float] = field(default_factory=dict)  # pairs: bw to each other node

    @property
    def transport_class(self) -> str | None:
        """The class of its transport; InfiniBand with GPUDirect RDMA obtained is "ib-gdr"."""
        found = transport_class(self.transport)
        return "ib-gdr" if found == "ib" and self.gpudirect else found


def points_of(series: Iterable[Series]) -> Iterator[Point]:
    """The points of fabbench runs: the figures of each workload that declares its own
    (``WorkloadFloors.points``: the collectives' and train's, each record's)."""
    for s in series:
        run = s.run
        link = _link(s)
        ceiling = _ceiling(s)
        gdr = run.gpudirect.obtained == "on" if run.gpudirect and run.gpudirect.obtained \
            else None
        point = functools.partial(Point, source="fabbench", file=str(s.path), run=run.run_id,
                                  primitive=run.primitive, fabric=run.fabric, gpudirect=gdr,
                                  nodes=run.nodes, ceiling_gbit_s=ceiling, nominal_gbit_s=link)
        for name in FLOORS:
            if (workload := catalog.WORKLOADS[name]).defines("floor_points"):
                # made, not replace()d: a file may hold 100,000 of them
                for f in workload.floor_points(s.of_kind(workload.record)):
                    yield point(workload=name, op=f.op, bytes=f.bytes, dtype=f.dtype,
                                transport=f.transport,
                                ranks=run.ranks if f.ranks is None else f.ranks,
                                node=f.node, metrics=f.metrics, evidence=f.evidence,
                                peers=f.peers)


def _link(s: Series) -> float | None:
    try:
        link = link_of(s.run)
    except UsageError:  # no profile of that name here: a point without a nominal rate
        return None
    return link.speed_gbit_s if link else None


def _ceiling(s: Series) -> float | None:
    """The slower direction of the run's measured ceilings (Gbit/s), if it measured any."""
    rates = [d.gbit_s for c in s.ceilings if not c.error for d in c.directions or ()
             if d.gbit_s]
    return min(rates) if rates else None
