"""Every workload fabbench knows, each one class (fabbench.workload_base.Workload, registered by
name): its name, what it measures, how it runs, the record kind it writes, the section of its
own options, how ``fabbench report`` shows its records and what a study's report ranks its cells
by. fabbench's own collectives, train, halo and pairs sit in packages of their own, each a class
in its package's workload.py (loaded by name, ``own``); a package installed beside fabbench adds
its own through the ``fabbench.workloads`` entry-point group (an entry naming its class), read
when this module is imported. The tables other modules read are
derived from the registry, ``WORKLOADS``: the configuration's sections, the record kinds a
summary counts, the study kinds and report metrics. "all" stands for several workloads run one after
the other (collectives, then train), spelled here once and asked of ``parts``/``runs``.

A layer of its own between the vocabulary (the primitives, networks and timing protocols its
sections name) and the configuration (which takes its sections); a workload's loop, which imports
torch and the communicators, is imported by its class only when a rank runs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from types import MappingProxyType
from typing import Any

from fabbench.errors import UsageError
from fabbench.workload_base import REGISTRY, Workload
from fabbench.workload_spec import Findings, StudyMetric

ENTRY_POINTS = "fabbench.workloads"  # the entry-point group a workload package declares in


# ---- fabbench's own workloads, each in a package of its own ----

def admitted(found: object, where: str) -> Workload[Any]:
    """The workload that ``found`` (what ``where`` names) is: the registered instance of a
    Workload class; anything else is an error naming ``where``."""
    if isinstance(found, type) and issubclass(found, Workload):
        workload = REGISTRY.of(found)
        if workload is None:
            raise ValueError(f"{where} names {found.__name__}, a Workload class that is not "
                             "registered (decorate it with fabbench.workload_base.register)")
        return workload
    what = found.__name__ if isinstance(found, type) else type(found).__name__
    raise ValueError(f"{where} names {what}, not a Workload class")


def own(entry: str) -> Workload[Any]:
    """One of fabbench's own workloads that is a class in a package of its own ("module:Class"),
    loaded by name as an installed package's entry is: the package sits in a layer above this
    one (it takes records, the plan and the communicator), and nothing here imports it by a
    statement; importing its module registers it."""
    module, _, cls = entry.partition(":")
    return admitted(getattr(importlib.import_module(module), cls), entry)


BUILTIN = (
    own("fabbench.workloads.collectives.workload:CollectivesWorkload"),
    own("fabbench.workloads.train.workload:TrainWorkload"),
    own("fabbench.workloads.halo.workload:HaloWorkload"),
    own("fabbench.workloads.pairs.workload:PairsWorkload"),
    own("fabbench.workloads.replay.workload:ReplayWorkload"),
)
SEQUENCES: Mapping[str, tuple[str, ...]] = MappingProxyType({"all": ("collectives", "train")})


# ---- the registry: fabbench's own, then the installed packages' ----

def installed() -> list[Workload[Any]]:
    """The workloads installed packages declare in the ``fabbench.workloads`` entry-point group
    (each entry naming its class), sorted by entry name; an entry that cannot be loaded, or
    names no registered Workload class, is an error naming the package (a workload package that
    is half installed is never skipped quietly)."""
    found = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        where = f"the {ENTRY_POINTS} entry point {ep.name!r} ({ep.value}" + \
            (f", package {ep.dist.name}" if ep.dist else "") + ")"
        try:
            loaded = ep.load()
        except Exception as exc:  # the package's own error, named with it
            raise ValueError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
        found.append(admitted(loaded, where))
    return found


def _registry(*given: Workload[Any]) -> Mapping[str, Workload[Any]]:
    """The workloads by name, in the order given; a name given twice (or taken by a sequence)
    and a record kind written by two workloads are refused."""
    out: dict[str, Workload[Any]] = {}
    kinds: dict[str, str] = {}
    for workload in given:
        if workload.name in out or workload.name in SEQUENCES:
            raise ValueError(f"workload {workload.name!r} registered twice")
        if workload.record in kinds:
            raise ValueError(f"workloads {kinds[workload.record]!r} and {workload.name!r} both "
                             f"write {workload.record!r} records")
        out[workload.name] = workload
        kinds[workload.record] = workload.name
    return MappingProxyType(out)


WORKLOADS: Mapping[str, Workload[Any]] = _registry(*BUILTIN, *installed())
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
    for name, workload in WORKLOADS.items():
        if workload.defines("findings"):
            records = of_kind(workload.record)
            out[name] = workload.findings(records) if records else None
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
