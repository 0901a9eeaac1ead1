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
from fabbench.comm.primitives import HOROVOD_OVER
from fabbench.config import RunConfig
from fabbench.errors import UsageError

# the configuration's common fields a plan holds under the same name (their rules apply as they
# are; --out is the claim's to check when the run starts)
_COMMON = tuple(f for f in config.fields() if f.section is None and f.name != "out")
# the configuration's sections a plan holds (train's scaling series decided, and what a
# workload ``decide``s), each as its class says (``PLANNED``: the class of what its
# ``planned`` decides for the plan, as the collectives' Sweep), else as the configuration's
SECTIONS: Mapping[str, type] = {n: getattr(c, "PLANNED", c) for n, c in config.SECTIONS.items()}


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
    workload: str
    device: str = "cpu"
    gpudirect: str = "auto"  # on/off: the profile's [primitive.X.gpudirect.on|off]; auto: none
    timeout_s: float = 30.0
    out: str
    iface: str | None = None
    rdma_device: str | None = None
    run_id: str
    argv: tuple[str, ...] = ()
    # the wire's ceiling (ceiling/measure.py) before the workload: None = when the ranks span
    # more than one host
    ceiling: bool | None = None
    ceiling_s: float = 2.0
    # the workloads' sections by name, as decided (runner.make_plan: each workload's ``decide``)
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
        for held in self.sections.values():  # a section's rules against the primitive
            check_plan = getattr(held, "check_plan", None)
            if check_plan is not None:
                check_plan(self.primitive, self.device)
        if self.gpudirect != "auto" and self.device != "cuda":
            raise UsageError(f"--gpudirect {self.gpudirect} is about GPU buffers: it needs "
                             "--device cuda")
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
        sections as their workloads decided them, in place of ``c``'s); a section that is
        ``planned`` (the collectives' sweep) is decided for the primitive and device, its sizes
        left open the workload's own (its class's ``sizes``) or the device's."""
        own = catalog.WORKLOADS.get(c.workload)
        sizes = own.sizes if own else None

        def held(section: Any) -> Any:
            planned = getattr(section, "planned", None)
            return section if planned is None else \
                planned(primitive=primitive, device=device, sizes=sizes)

        return cls(
            fabric=fabric, primitive=primitive, horovod_over=c.horovod_over, wire=c.wire,
            ranks=ranks, device=device, gpudirect=c.gpudirect, timeout_s=c.timeout_s,
            out=out, iface=iface, rdma_device=c.rdma_device, run_id=run_id, argv=argv,
            workload=c.workload, ceiling=c.ceiling, ceiling_s=c.ceiling_s,
            sections={**{n: held(getattr(c, n)) for n in SECTIONS}, **(decided or {})})

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
        """The plan's JSON object, each section under its own name beside the plan's fields;
        a section whose class places its fields (``AFTER``: the collectives' sweep, whose fields
        were the plan's own) has them among the plan's, each after the key it names."""
        data = dataclasses.asdict(self)
        sections = data.pop("sections")
        for name, cls in SECTIONS.items():
            after: Mapping[str, str] | None = getattr(cls, "AFTER", None)
            if after is not None:
                flat = sections.pop(name)
                for key, value in flat.items():
                    keys = list(data)
                    at = keys.index(after[key]) + 1
                    data = {**{k: data[k] for k in keys[:at]}, key: value,
                            **{k: data[k] for k in keys[at:]}}
        data.update(sections)
        return data

    @classmethod
    def read(cls, json_object: Mapping[str, Any]) -> Plan:
        """A plan of ``to_json``, also one a results file of an older fabbench holds: a
        timing knob since removed (stable_rel) and the run-time state plans once carried
        (now RunState's) are left out; the workloads' options it held flat, each under its
        own name, are read into their sections."""
        data = copy.deepcopy(dict(json_object))
        for name, section in SECTIONS.items():
            if name not in data:  # an older plan, or a placed section: its fields flat
                data[name] = {f.name: data.pop(f.name) for f in dataclasses.fields(section)
                              if f.name in data}
        sections = {name: section.read(data.pop(name)) if hasattr(section, "read") else
                    section(**_tuples(data.pop(name))) for name, section in SECTIONS.items()}
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
