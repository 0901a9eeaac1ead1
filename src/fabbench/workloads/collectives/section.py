"""The collectives' options (``--ops``, ``--sizes``, ``--dtypes``, ``--check`` and how a point is
timed) as the user gives them, ``CollectivesConfig`` (``RunConfig.collectives``), and as a run
holds them decided, ``Sweep`` (``plan.collectives``): the operations and sizes the primitive and
device leave open named, the timing policy made. The pairs time their exchanges by the same
section (their workload names its fields in ``shares``), so ``--sizes`` means one thing
everywhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fabbench import value_rules as rules
from fabbench.comm import primitives
from fabbench.comm.primitives import ALL_DTYPES, ALL_OPS, DTYPES, OPS
from fabbench.errors import UsageError
from fabbench.option_fields import FLOAT, INT, SWITCH, TEXT, Bounds, at_least, option, validate
from fabbench.option_fields import NAMES as NAME_LIST
from fabbench.timing.engine import PROTOCOLS, TimingPolicy
from fabbench.units import parse_sizes

__all__ = ["CUDA_GRAPH", "DEFAULT_SIZES", "CollectivesConfig", "Sweep", "can_graph", "graphed"]

CUDA_GRAPH = ("auto", "off", "on")  # off first: the one every primitive can take
# --sizes when neither the user nor the workload's class gives them, by device
DEFAULT_SIZES = {"cpu": "8:64M", "cuda": "8:1G"}


@dataclass(frozen=True, kw_only=True)
class Sweep:
    """The collectives' section as a plan holds it, every choice made: the operations, sizes
    (bytes) and dtypes of the sweep, whether each point is checked, and how it is timed. The
    plan holds one for every workload (the timing policy and the CUDA graph setting apply to
    a rank of any workload; the pairs run over its sizes and dtypes)."""

    ops: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    check: bool = False
    policy: TimingPolicy = TimingPolicy()

    # where each field sits in the plan's JSON (the run record's ``plan``): among the plan's
    # own fields, after the one named, as when they were the plan's own
    AFTER: ClassVar[Mapping[str, str]] = {"ops": "workload", "sizes": "ops", "dtypes": "sizes",
                                          "check": "dtypes", "policy": "timeout_s"}

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> Sweep:
        """A sweep of a plan's JSON: the timing knobs a policy since dropped (stable_rel) left
        out, lists made tuples."""
        given: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                 for k, v in data.items()}
        if "policy" in given:
            known = {f.name for f in dataclasses.fields(TimingPolicy)}
            given["policy"] = TimingPolicy(**{k: v for k, v in given["policy"].items()
                                              if k in known})
        return cls(**given)

    def check_plan(self, primitive: str, device: str) -> None:
        """The sweep's rules against the plan's primitive and device: a CUDA graph where the
        primitive can be captured, operations and dtypes the primitive has (on the device's
        buffers), something to run."""
        if self.policy.cuda_graph and not can_graph(primitive, device):
            graphs = [n for n in primitives.PRIMITIVES if primitives.get(n).cuda_graph]
            raise UsageError(f"--cuda-graph on captures GPU operations in a CUDA graph: it needs "
                             f"--primitive {' or '.join(graphs)} with --device cuda (not "
                             f"{primitive} on {device})")
        spec = primitives.get(primitive)
        for op in self.ops:
            if op not in OPS[primitive]:
                raise UsageError(f"primitive {primitive!r} has no operation {op!r} "
                                 f"(it has: {', '.join(OPS[primitive])})")
            if op not in spec.ops_on(device):
                raise UsageError(f"{primitive} cannot {op} {device} buffers (its point-"
                                 "to-point messages take host memory only): use --device cpu, "
                                 f"or leave {op} out")
        if not self.ops:
            raise UsageError("no operations to run")
        for dtype in self.dtypes:
            if dtype not in DTYPES[primitive]:
                raise UsageError(f"primitive {primitive!r} does not support dtype {dtype!r} "
                                 f"(it supports: {', '.join(DTYPES[primitive])})")
        if not self.sizes:
            raise UsageError("no sizes to run")


@dataclass(frozen=True, kw_only=True)
class CollectivesConfig:
    """``--workload collectives``: a size sweep of the primitive's collective operations."""

    ops: tuple[str, ...] | None = option(
        None, NAME_LIST, "--ops", "Comma list of allreduce, allgather, reduce_scatter, broadcast, "
        "alltoall, sendrecv. Default: all the primitive has.", choices=ALL_OPS,
        refusal="fabbench has no operation {value!r} (operations: {known})",
        check=lambda v: None if v else "no operations to run")
    sizes: str | None = option(
        None, TEXT, "--sizes", "MIN:MAX[:FACTOR] or a comma list, units K/M/G (1024). Default "
        "8:64M on CPU, 8:1G on GPU; 8,1M for pairs.",
        check=rules.Checked(rules.SIZES, "--sizes", first=parse_sizes))
    dtypes: tuple[str, ...] = option(
        ("float32",), NAME_LIST, "--dtypes", "Comma list: float32, float64, float16, bfloat16.",
        choices=ALL_DTYPES, refusal="fabbench does not support dtype {value!r} (dtypes: {known})",
        check=lambda v: None if v else "no dtypes to run")
    check: bool = option(False, SWITCH, "--check", "Verify every result; a wrong element "
                         "fails the run.", negative="--no-check")
    budget_s: float = option(0.1, FLOAT, "--budget", "Measured seconds per point (op, size, "
                             "dtype).", check=Bounds("--budget must be positive, not {v:g}", 0,
                                                     low_open=True))
    min_samples: int = option(5, INT, "--min-samples", "Samples per point, at least.",
                              check=at_least(1, "--min-samples"))
    max_samples: int = option(200, INT, "--max-samples", "Samples per point, at most.",
                              check=at_least(1, "--max-samples"))
    timing: str = option(
        "batch", TEXT, "--timing", "batch: a sample times back-to-back operations (as "
        "nccl-tests); osu: OSU's counts and way, a collective timed alone with a barrier after "
        "it (osu_allreduce), sendrecv and pairs back to back with no barrier among them "
        "(osu_bibw -W 1). Compare a figure with another tool's under that tool's protocol.",
        choices=PROTOCOLS, refusal="{flag} takes {known}, not {value!r}")
    cuda_graph: str = option(
        "auto", TEXT, "--cuda-graph", "on: a sample's operations are captured once in a CUDA "
        "graph and replayed, timing what the library does on the GPU (as nccl-tests -G); off: "
        "eager calls, each paying the host's per-call cost (what an eager training loop "
        "pays); auto: on for NCCL with --timing batch, else off.", choices=CUDA_GRAPH,
        refusal="{flag} takes {known}, not {value!r}")

    # the fields a workload that names this section in its ``shares`` takes too (the pairs':
    # they time sendrecv over the sweep's sizes and dtypes); the operations are the sweep's own
    SHARED: ClassVar[tuple[str, ...]] = ("sizes", "dtypes", "check", "budget_s", "min_samples",
                                         "max_samples", "timing", "cuda_graph")
    # what a plan holds of this section: decided by ``planned``
    PLANNED: ClassVar[type] = Sweep

    def __post_init__(self) -> None:
        validate(self)
        if self.max_samples < self.min_samples:
            raise UsageError(f"--max-samples {self.max_samples} is below --min-samples "
                             f"{self.min_samples}")

    def planned(self, *, primitive: str, device: str, sizes: str | None) -> Sweep:
        """The sweep a run of ``primitive`` on ``device`` makes of these options: the
        operations and sizes left open are the primitive's on the device and ``sizes`` (the
        workload's own default, else the device's), the timing policy made."""
        return Sweep(ops=self.ops or primitives.get(primitive).ops_on(device),
                     sizes=parse_sizes(self.sizes or sizes or DEFAULT_SIZES[device]),
                     dtypes=self.dtypes, check=self.check,
                     policy=TimingPolicy(budget_s=self.budget_s, min_samples=self.min_samples,
                                         max_samples=self.max_samples, protocol=self.timing,
                                         cuda_graph=graphed(self, primitive, device)))


def graphed(coll: CollectivesConfig, primitive: str, device: str) -> bool:
    """``--cuda-graph`` decided: on and off as asked (Sweep.check_plan refuses on where it
    cannot be); auto, on where the primitive's operations can be captured, on GPU buffers,
    under the batch protocol (the one that times operations back to back)."""
    if coll.cuda_graph != "auto":
        return coll.cuda_graph == "on"
    return can_graph(primitive, device) and coll.timing == "batch"


def can_graph(primitive: str, device: str) -> bool:
    """The primitive's operations can be captured in a CUDA graph on ``device``'s buffers."""
    return primitives.get(primitive).cuda_graph and device == "cuda"
