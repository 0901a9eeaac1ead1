"""The workloads' names, as data that anything may read without importing a workload: each name
and the object that implements it ("module:attribute", loaded by workloads.registry.load), and
the one name that stands for several workloads run one after the other ("all": collectives, then
train), spelled here once and asked of ``parts``/``runs``. A module of the vocabulary layer, not of
workloads/: the configuration, the plan and study files check a workload's name below the layer
that runs workloads."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from fabbench.errors import UsageError

ENTRIES: Mapping[str, str] = MappingProxyType({
    "collectives": "fabbench.workloads.collectives:WORKLOAD",
    "train": "fabbench.workloads.train:WORKLOAD",
    "halo": "fabbench.workloads.halo:WORKLOAD",
    "pairs": "fabbench.workloads.pairs:WORKLOAD",
})
SEQUENCES: Mapping[str, tuple[str, ...]] = MappingProxyType({"all": ("collectives", "train")})

NAMES = (*ENTRIES, *SEQUENCES)


def parts(name: str) -> tuple[str, ...]:
    """The workloads ``name`` runs, in order (UsageError for an unknown name)."""
    if name in SEQUENCES:
        return SEQUENCES[name]
    if name in ENTRIES:
        return (name,)
    raise UsageError(f"unknown workload {name!r} (known: {', '.join(NAMES)})")


def runs(name: str, part: str) -> bool:
    """Does workload ``name`` run ``part`` (train in "all", ...)?"""
    return part in parts(name)
