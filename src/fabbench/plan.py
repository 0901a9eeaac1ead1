"""A Plan: one run as it will happen, built from a RunConfig (fabbench.config) once fabbench has
decided what the configuration leaves to it (primitive, device, fabric, ranks, sizes, ...), and
validated once; everything downstream trusts it.

A field's own rule is declared with it in the configuration and applied here again to the
decided values; the rules between fields, which need those decisions (a GPU-only primitive needs
--device cuda, an operation the primitive has, ...), live here. The launcher hands the plan to
each rank as JSON (rank_env), so every rank runs the same one; what a launch knows beyond the
plan (what was picked, what a resumed run has measured, ...) is a RunState beside it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fabbench import catalog, config
from fabbench.comm import primitives
from fabbench.comm.primitives import DTYPES, HOROVOD_OVER, OPS
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.timing.engine import TimingPolicy
from fabbench.units import parse_sizes

DEFAULT_SIZES = {"cpu": "8:64M", "cuda": "8:1G"}

# the configuration's common fields a plan holds under the same name (their rules apply as they
# are; --out is the claim's to check when the run starts)
_COMMON = tuple(f for f in config.fields() if f.section is None and f.name != "out")
# the configuration's sections a plan holds (what a workload's spec ``decide``s decided: train's
# scaling series, the pairs' schedule); the collectives' it holds decided, in its own fields
# (ops, sizes, policy)
SECTIONS: Mapping[str, type] = {n: c for n, c in config.SECTIONS.items() if n != "collectives"}


@dataclass(frozen=True, kw_only=True, init=False)
class Plan:
    """One run's options, every one decided (``of``) and checked; no state of its launch. The
    sections of the workloads that take options beyond the common ones (SECTIONS) are read as
    attributes (``plan.train``), as a RunConfig's are."""

    fabric: str
    primitive: str
    horovod_over: str | None = None
    wire: str = "native"
    ranks: int = 2
    workload: str = "collectives"
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...] = ("float32",)
    check: bool = False
    device: str = "cpu"
    gpudirect: str = "auto"  # on/off: the profile's [primitive.X.gpudirect.on|off]; auto: none
    timeout_s: float = 30.0
    policy: TimingPolicy = TimingPolicy()
    out: str
    iface: str | None = None
    rdma_device: str | None = None
    run_id: str
    argv: tuple[str, ...] = ()
    # the wire's ceiling (ceiling/measure.py) before the workload: None = when the ranks span
    # more than one host
    ceiling: bool | None = None
    ceiling_s: float = 2.0
    # the workloads' sections by name, as decided (runner.make_plan: each spec's ``decide``)
    sections: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, *, sections: Mapping[str, Any] | None = None, **given: Any) -> None:
        config.hold_sections(self, SECTIONS, sections, given)
        self._check()

    def __getattr__(self, name: str) -> Any:
        """A workload package's section (``plan.train``, ``plan.toy``)."""
        return config.section_of(self, name)

    def _check(self) -> None:
        for f in _COMMON:
            f.option.validate(f.name, getattr(self, f.name))
        if self.horovod_over is not None and \
                self.horovod_over not in primitives.get(self.primitive).controllers:
            raise UsageError(f"--horovod-over takes {' or '.join(HOROVOD_OVER)} and only with "
                             "--primitive horovod")
        if primitives.get(self.primitive).gpu_only and self.device != "cuda":
            raise UsageError(f"{self.primitive} moves GPU buffers only: it needs --device cuda "
                             "and a GPU")
        if self.policy.cuda_graph and not can_graph(self.primitive, self.device):
            graphs = [n for n in primitives.PRIMITIVES if primitives.get(n).cuda_graph]
            raise UsageError(f"--cuda-graph on captures GPU operations in a CUDA graph: it needs "
                             f"--primitive {' or '.join(graphs)} with --device cuda (not "
                             f"{self.primitive} on {self.device})")
        if self.gpudirect != "auto" and self.device != "cuda":
            raise UsageError(f"--gpudirect {self.gpudirect} is about GPU buffers: it needs "
                             "--device cuda")
        spec = primitives.get(self.primitive)
        for op in self.ops:
            if op not in OPS[self.primitive]:
                raise UsageError(f"primitive {self.primitive!r} has no operation {op!r} "
                                 f"(it has: {', '.join(OPS[self.primitive])})")
            if op not in spec.ops_on(self.device):
                raise UsageError(f"{self.primitive} cannot {op} {self.device} buffers (its point-"
                                 "to-point messages take host memory only): use --device cpu, "
                                 f"or leave {op} out")
        if not self.ops:
            raise UsageError("no operations to run")
        for dtype in self.dtypes:
            if dtype not in DTYPES[self.primitive]:
                raise UsageError(f"primitive {self.primitive!r} does not support dtype {dtype!r} "
                                 f"(it supports: {', '.join(DTYPES[self.primitive])})")
        if not self.sizes:
            raise UsageError("no sizes to run")
        for part in catalog.parts(self.workload):  # each workload's own rules
            own = catalog.WORKLOADS[part].check
            if own is not None:
                own(self)

    @classmethod
    def of(cls, c: RunConfig, *, fabric: str, primitive: str, device: str, ranks: int,
           iface: str | None, out: str, run_id: str,
           decided: Mapping[str, Any] | None = None, argv: tuple[str, ...] = ()) -> Plan:
        """The plan of configuration ``c`` with what it leaves open decided by the caller
        (``fabric`` named, not auto; the primitive, device, ranks, ...; ``decided``, workloads'
        sections as their specs decided them, in place of ``c``'s); the sizes and operations it
        leaves open are the primitive's and device's defaults."""
        coll = c.collectives
        own = catalog.WORKLOADS.get(c.workload)
        sizes = coll.sizes or (own.sizes if own and own.sizes else DEFAULT_SIZES[device])
        return cls(
            fabric=fabric, primitive=primitive, horovod_over=c.horovod_over, wire=c.wire,
            ranks=ranks, ops=coll.ops or primitives.get(primitive).ops_on(device),
            sizes=parse_sizes(sizes),
            dtypes=coll.dtypes, check=coll.check, device=device, gpudirect=c.gpudirect,
            timeout_s=c.timeout_s,
            policy=TimingPolicy(budget_s=coll.budget_s, min_samples=coll.min_samples,
                                max_samples=coll.max_samples, protocol=coll.timing,
                                cuda_graph=graphed(coll, primitive, device)),
            out=out, iface=iface, rdma_device=c.rdma_device, run_id=run_id, argv=argv,
            workload=c.workload, ceiling=c.ceiling, ceiling_s=c.ceiling_s,
            sections={**{n: getattr(c, n) for n in SECTIONS}, **(decided or {})})

    @property
    def backend(self) -> str:
        """The profile section (and wire library) the primitive uses: Horovod uses its
        controller's."""
        return primitives.get(self.primitive).backend(self.horovod_over)

    @property
    def launcher(self) -> str:
        """How local ranks are started (comm.primitives): mpirun, a spawn, or horovodrun."""
        return primitives.get(self.primitive).launcher(self.horovod_over)

    def op_timeout(self, nbytes: int) -> float:
        """The deadline of one operation: the base timeout plus 1 s per 100 MB (a slow link)."""
        return self.timeout_s + nbytes / 1e8

    def to_json(self) -> dict[str, Any]:
        """The plan's JSON object, each section under its own name beside the plan's fields."""
        data = dataclasses.asdict(self)
        data.update(data.pop("sections"))
        return data

    @classmethod
    def read(cls, json_object: Mapping[str, Any]) -> Plan:
        """A plan of ``to_json``, also one a results file of an older fabbench holds: a
        timing knob since removed (stable_rel) and the run-time state plans once carried
        (now RunState's) are left out; the workloads' options it held flat, each under its
        own name, are read into their sections."""
        data = copy.deepcopy(dict(json_object))
        known = {f.name for f in dataclasses.fields(TimingPolicy)}
        data["policy"] = TimingPolicy(**{k: v for k, v in data["policy"].items() if k in known})
        for name, section in SECTIONS.items():
            if name not in data:  # an older plan: the section's fields flat
                data[name] = {f.name: data.pop(f.name) for f in dataclasses.fields(section)
                              if f.name in data}
        sections = {name: section(**_tuples(data.pop(name)))
                    for name, section in SECTIONS.items()}
        fields = {f.name for f in dataclasses.fields(cls)} - {"sections"}
        return cls(sections=sections,
                   **{k: v for k, v in _tuples(data).items() if k in fields})


def _tuples(data: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}


@dataclass(frozen=True, kw_only=True)
class RunState:
    """What one launch of a plan knows that is no option of it, handed to every rank beside the
    plan: what fabbench picked for the user ("primitive=mpi (no GPU visible)"), the points a
    resumed run measured already ("op/dtype/bytes"), whether it resumes, whether the launcher
    holds the claim on the results file (results/claim.py; else rank 0 claims it), and the
    1-rank run's samples/s (p50) that a scaling series' later runs compare with."""

    picked: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    resumed: bool = False
    claimed: bool = False
    baseline_samples_per_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def read(cls, json_object: Mapping[str, Any]) -> RunState:
        return cls(**_tuples(dict(json_object)))


# The environment that hands a launched rank its plan and state (launch.launchers puts it in every
# rank's environment; launch.rank reads it).
PLAN_ENV, STATE_ENV = "FABBENCH_PLAN", "FABBENCH_RUN_STATE"


def rank_env(plan: Plan, state: RunState) -> dict[str, str]:
    return {PLAN_ENV: json.dumps(plan.to_json()), STATE_ENV: json.dumps(state.to_json())}


def graphed(coll: catalog.CollectivesConfig, primitive: str, device: str) -> bool:
    """``--cuda-graph`` decided: on and off as asked (Plan._check refuses on where it cannot
    be); auto, on where the primitive's operations can be captured, on GPU buffers, under the
    batch protocol (the one that times operations back to back)."""
    if coll.cuda_graph != "auto":
        return coll.cuda_graph == "on"
    return can_graph(primitive, device) and coll.timing == "batch"


def can_graph(primitive: str, device: str) -> bool:
    """The primitive's operations can be captured in a CUDA graph on ``device``'s buffers."""
    return primitives.get(primitive).cuda_graph and device == "cuda"
