"""Every workload fabbench knows, each one class (fabbench.workload_base.Workload, registered by
name): its name, what it measures, how it runs, the record kind it writes, the section of its
own options, how ``fabbench report`` shows its records and what a study's report ranks its cells
by. fabbench's halo and pairs are classes in packages of their own (loaded by name, ``own``);
its collectives and train are still declared here as WorkloadSpecs with their option sections
(TRANSITIONAL, issue 61: the registry takes a spec through workload_base.FromSpec); a package
installed beside fabbench adds its own through the ``fabbench.workloads`` entry-point group (an
entry naming its class), read when this module is imported. The tables other modules read are
derived from the registry, ``WORKLOADS``: the configuration's sections, the record kinds a
summary counts, the study kinds and report metrics. "all" stands for several workloads run one after
the other (collectives, then train), spelled here once and asked of ``parts``/``runs``.

A layer of its own between the vocabulary (the primitives, networks and timing protocols its
sections name) and the configuration (which takes its sections); a workload's loop, which imports
torch and the communicators, is imported by its class only when a rank runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from types import MappingProxyType
from typing import Any

from fabbench import value_rules as rules
from fabbench.comm.primitives import ALL_DTYPES, ALL_OPS
from fabbench.errors import UsageError
from fabbench.networks.models import MODELS
from fabbench.option_fields import (
    COUNTS,
    FLOAT,
    INT,
    SWITCH,
    TEXT,
    Bounds,
    at_least,
    option,
    validate,
)
from fabbench.option_fields import NAMES as NAME_LIST
from fabbench.timing.engine import PROTOCOLS
from fabbench.units import parse_sizes
from fabbench.workload_base import REGISTRY, FromSpec, Workload
from fabbench.workload_spec import Findings, StudyMetric, WorkloadFloors, WorkloadSpec, load_entry

PRECISIONS = ("fp32", "bf16", "fp16")
CUDA_GRAPH = ("auto", "off", "on")  # off first: the one every primitive can take
MAX_LOCAL_RANKS = 512
ENTRY_POINTS = "fabbench.workloads"  # the entry-point group a workload package declares in


# ---- fabbench's own workloads: their option sections, then their specs ----

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

    def __post_init__(self) -> None:
        validate(self)
        if self.max_samples < self.min_samples:
            raise UsageError(f"--max-samples {self.max_samples} is below --min-samples "
                             f"{self.min_samples}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """``--workload train``: data-parallel training of a synthetic-data model."""

    model: str = option("resnet50", TEXT, "--model", "A model of `fabbench models`.",
                        choices=tuple(MODELS))
    batch_size: int = option(32, INT, "--batch-size", "Samples per rank per step.",
                             check=at_least(1, "batch size"))
    image_size: int | None = option(
        None, INT, "--image-size", "Image side in pixels (multiple of 32), or tokens per "
        "sequence for a transformer. Default: the model's (224; the context).",
        check=at_least(1, "--image-size"))
    steps: int = option(20, INT, "--steps", "Timed steps.", check=at_least(2, "steps"))
    warmup_steps: int = option(5, INT, "--warmup-steps", "Untimed steps first.",
                               check=at_least(1, "warm-up steps"))
    scaling: tuple[int, ...] | None = option(
        None, COUNTS, "--scaling", "Rank counts run one after another, e.g. 1,2,4 (1 is "
        "added); efficiency T_n/(n*T_1).",
        check=lambda v: None if all(1 <= n <= MAX_LOCAL_RANKS for n in v) else
        f"scaling rank counts must be between 1 and {MAX_LOCAL_RANKS}")
    bucket_mb: float = option(25.0, FLOAT, "--bucket-mb", "DDP bucket size "
                              "(bucket_cap_mb), also the mpi engine's, MiB.",
                              check=Bounds("bucket size must be > 0 MiB", 0, low_open=True))
    fusion_mb: float | None = option(
        None, FLOAT, "--fusion-mb", "Horovod fusion threshold, MiB. Default: Horovod's.",
        check=Bounds("fusion threshold must be >= 0 MiB", 0))
    precision: str = option("fp32", TEXT, "--precision", "fp32, bf16 (autocast) or fp16 "
                            "(autocast + loss scaling, GPU).", choices=PRECISIONS)

    def __post_init__(self) -> None:
        validate(self)
        spec = MODELS[self.model]
        spec.check_input(self.input_size)
        if spec.batchnorm and self.batch_size * (self.input_size // spec.input_multiple) ** 2 < 2:
            raise UsageError(f"{self.model} has batch norm: batch size {self.batch_size} at image "
                             f"size {self.input_size} leaves one value per channel; use a batch "
                             "of at least 2 or a larger image")

    @property
    def input_size(self) -> int:
        """The model's input: image side in pixels or sequence length in tokens."""
        return self.image_size or MODELS[self.model].default_input


def admitted(found: object, where: str) -> Workload[Any]:
    """The workload that ``found`` (what ``where`` names) is: the registered instance of a
    Workload class, or (TRANSITIONAL) a WorkloadSpec's; anything else is an error naming
    ``where``."""
    if isinstance(found, WorkloadSpec):
        return FromSpec(found)
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
    return admitted(load_entry(entry), entry)


BUILTIN = (
    WorkloadSpec(name="collectives", summary="a size sweep of the collective operations",
                 entry="fabbench.workloads.collectives:WORKLOAD", record="collective",
                 section=CollectivesConfig,
                 floors=WorkloadFloors(metrics=("busbw", "algbw", "time"), baseline="busbw",
                                       ops=(*ALL_OPS, "reduce"), rule_size=True),
                 metric=StudyMetric(name="time", unit="µs", value="time_us.p50",
                                    throughput="busbw GB/s",
                                    throughput_short="busbw GB/s")),
    WorkloadSpec(name="train", summary="data-parallel training of a network",
                 entry="fabbench.workloads.train:WORKLOAD", record="train", section=TrainConfig,
                 lines="fabbench.results.lines:TRAIN",
                 floors=WorkloadFloors(metrics=("samples_per_s", "step_time"),
                                       baseline="samples_per_s"),
                 metric=StudyMetric(name="step time", unit="ms", value="step_ms",
                                    throughput="samples/s (all ranks)",
                                    throughput_short="samples/s")),
    own("fabbench.workloads.halo.workload:HaloWorkload"),
    own("fabbench.workloads.pairs.workload:PairsWorkload"),
)
SEQUENCES: Mapping[str, tuple[str, ...]] = MappingProxyType({"all": ("collectives", "train")})


# ---- the registry: fabbench's own, then the installed packages' ----

def installed() -> list[Workload[Any]]:
    """The workloads installed packages declare in the ``fabbench.workloads`` entry-point group
    (each entry naming its class), sorted by entry name; an entry that cannot be loaded, or
    names no registered Workload class, is an error naming the package (a workload package that
    is half installed is never skipped quietly)."""
    specs = []
    for ep in sorted(metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        where = f"the {ENTRY_POINTS} entry point {ep.name!r} ({ep.value}" + \
            (f", package {ep.dist.name}" if ep.dist else "") + ")"
        try:
            spec = ep.load()
        except Exception as exc:  # the package's own error, named with it
            raise ValueError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
        specs.append(admitted(spec, where))
    return specs


def _registry(*given: Workload[Any] | WorkloadSpec) -> Mapping[str, Workload[Any]]:
    """The workloads by name, in the order given (a WorkloadSpec taken as its FromSpec); a name
    given twice (or taken by a sequence) and a record kind written by two workloads are
    refused."""
    specs = [FromSpec(w) if isinstance(w, WorkloadSpec) else w for w in given]
    out: dict[str, Workload[Any]] = {}
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
    for name, spec in WORKLOADS.items():
        if spec.defines("findings"):
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
