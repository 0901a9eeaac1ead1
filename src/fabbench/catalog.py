"""Every workload fabbench knows, each declared once as a fabbench.workload_spec.WorkloadSpec:
its name, what it measures, the object that runs it, the record kind it writes, the section of
its own options, how ``fabbench report`` shows its records and what a study's report ranks its
cells by. fabbench's own collectives, train, halo and pairs are declared in packages of their
own (loaded by name, ``own``); a package installed beside fabbench
adds its own through the ``fabbench.workloads`` entry-point group (an entry naming its spec),
read when this module is imported. The tables other modules read are derived
from the registry, ``WORKLOADS``: the configuration's sections, the record kinds a summary
counts, the study kinds and report metrics. "all" stands for several workloads run one after
the other (collectives, then train), spelled here once and asked of ``parts``/``runs``.

A layer of its own between the vocabulary (the primitives, networks and timing protocols its
sections name) and the configuration (which takes its sections); workload modules, which import
torch and the communicators, are named by their entries and imported only when a rank runs one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from types import MappingProxyType
from typing import Any

from fabbench.errors import UsageError
from fabbench.workload_spec import Findings, StudyMetric, WorkloadSpec

ENTRY_POINTS = "fabbench.workloads"  # the entry-point group a workload package declares in


# ---- fabbench's own workloads, each in a package of its own ----

def own(module: str) -> WorkloadSpec:
    """The spec of one of fabbench's own workloads that is declared in a package of its own
    (its module's ``SPEC``), loaded by name as an installed package's entry is: the package
    sits in a layer above this one (it takes records, the plan and the communicator), and
    nothing here imports it by a statement."""
    spec = getattr(importlib.import_module(module), "SPEC", None)
    if not isinstance(spec, WorkloadSpec):
        raise ValueError(f"{module}.SPEC is {type(spec).__name__}, not a WorkloadSpec")
    return spec


BUILTIN = (
    own("fabbench.workloads.collectives"),
    own("fabbench.workloads.train"),
    own("fabbench.workloads.halo"),
    own("fabbench.workloads.pairs"),
)
SEQUENCES: Mapping[str, tuple[str, ...]] = MappingProxyType({"all": ("collectives", "train")})


# ---- the registry: fabbench's own, then the installed packages' ----

def installed() -> list[WorkloadSpec]:
    """The specs installed packages declare in the ``fabbench.workloads`` entry-point group,
    sorted by entry name; an entry that cannot be loaded, or names no WorkloadSpec, is an error
    naming the package (a workload package that is half installed is never skipped quietly)."""
    specs = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        where = f"the {ENTRY_POINTS} entry point {ep.name!r} ({ep.value}" + \
            (f", package {ep.dist.name}" if ep.dist else "") + ")"
        try:
            spec = ep.load()
        except Exception as exc:  # the package's own error, named with it
            raise ValueError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
        if not isinstance(spec, WorkloadSpec):
            raise ValueError(f"{where} names {type(spec).__name__}, not a WorkloadSpec")
        specs.append(spec)
    return specs


def _registry(*specs: WorkloadSpec) -> Mapping[str, WorkloadSpec]:
    """The specs by name, in the order given; a name given twice (or taken by a sequence) and
    a record kind written by two workloads are refused."""
    out: dict[str, WorkloadSpec] = {}
    kinds: dict[str, str] = {}
    for spec in specs:
        if spec.name in out or spec.name in SEQUENCES:
            raise ValueError(f"workload {spec.name!r} registered twice")
        if spec.record in kinds:
            raise ValueError(f"workloads {kinds[spec.record]!r} and {spec.name!r} both write "
                             f"{spec.record!r} records")
        out[spec.name] = spec
        kinds[spec.record] = spec.name
    return MappingProxyType(out)


WORKLOADS: Mapping[str, WorkloadSpec] = _registry(*BUILTIN, *installed())
ENTRIES: Mapping[str, str] = MappingProxyType({n: w.entry for n, w in WORKLOADS.items()})
#: The option section of each workload that has one: RunConfig.<name>.
SECTIONS: Mapping[str, type] = MappingProxyType(
    {n: w.section for n, w in WORKLOADS.items() if w.section is not None})
#: The record kinds the workloads write, each once, in the registry's order.
RECORDS: tuple[str, ...] = tuple(w.record for w in WORKLOADS.values())
#: What a study's report ranks each workload's cells by, for the workloads it ranks.
METRICS: Mapping[str, StudyMetric] = MappingProxyType(
    {n: w.metric for n, w in WORKLOADS.items() if w.metric is not None})

NAMES = (*WORKLOADS, *SEQUENCES)


def described() -> str:
    """The ``--workload`` help: every workload with its summary, then the sequences."""
    runs_ = [f"{n} ({w.summary})" for n, w in WORKLOADS.items()]
    runs_ += [f"{n} ({' then '.join(p)})" for n, p in SEQUENCES.items()]
    return ", ".join(runs_[:-1]) + f", or {runs_[-1]}."


def findings(of_kind: Callable[[str], Sequence[Any]]) -> dict[str, Findings | None]:
    """What each workload with a ``findings`` hook makes of one run's records of its kind
    (``of_kind``: the run's records of a kind, by its name), by workload name; None where the
    run has none of them or the hook finds nothing."""
    out: dict[str, Findings | None] = {}
    for name, spec in WORKLOADS.items():
        if spec.findings is not None:
            records = of_kind(spec.record)
            out[name] = spec.findings(records) if records else None
    return out


def parts(name: str) -> tuple[str, ...]:
    """The workloads ``name`` runs, in order (UsageError for an unknown name)."""
    if name in SEQUENCES:
        return SEQUENCES[name]
    if name in WORKLOADS:
        return (name,)
    raise UsageError(f"unknown workload {name!r} (known: {', '.join(NAMES)})")


def runs(name: str, part: str) -> bool:
    """Does workload ``name`` run ``part`` (train in "all", ...)?"""
    return part in parts(name)
