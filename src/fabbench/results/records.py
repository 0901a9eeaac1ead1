"""Typed results records, one frozen keyword-only dataclass per kind, and the schema check.

A record is validated against the package's JSON schema (schema.json, version SCHEMA) when it
is made and again by the writer on the exact object it serializes, so no invalid byte reaches a
results file. NaN and Infinity are refused everywhere: JSON has no such numbers, and a report
cannot plot them.

A field annotated ``| None`` is one the schema does not require (of the current version or an
older one): a file may lack it, and a record read from such a file holds None there (see
Record.read); the writer still passes every field.

Adding a kind: a dataclass here decorated with ``@kind("name")`` (the registry refuses a name
twice), and its ``$defs`` entry in schema.json listing the same fields (a unit test compares
them). A new field: add it to both, and say so in the history in results/__init__.py.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

import jsonschema

from fabbench.errors import InvalidRecord
from fabbench.results import SCHEMA, SCHEMA_FILES

R = TypeVar("R", bound="Record")
KINDS: dict[str, type[Record]] = {}


def kind(name: str) -> Callable[[type[R]], type[R]]:
    """Register a record class under its kind; a kind is registered once."""
    def register(cls: type[R]) -> type[R]:
        if name in KINDS:
            raise ValueError(f"record kind {name!r} is registered twice")
        cls.kind = name
        KINDS[name] = cls
        return cls
    return register


def _finite(value: Any, where: str) -> str | None:
    """The path of the first NaN or Infinity in a JSON-like value, else None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, Mapping):
        items: Any = ((f"{where}/{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}/{i}", v) for i, v in enumerate(value))
    else:
        return None
    for path, item in items:
        found = _finite(item, path)
        if found is not None:
            return found
    return None


def _is_finite_number(checker: Any, instance: Any) -> bool:
    return (isinstance(instance, int | float) and not isinstance(instance, bool)
            and math.isfinite(instance))


@functools.cache
def validator(schema: str = SCHEMA) -> jsonschema.protocols.Validator:
    """The validator of one schema version; its "number" is a finite number."""
    text = resources.files("fabbench.results").joinpath(SCHEMA_FILES[schema]).read_text()
    base = jsonschema.Draft202012Validator
    cls = jsonschema.validators.extend(
        base, type_checker=base.TYPE_CHECKER.redefine("number", _is_finite_number))
    return cls(json.loads(text))


def problem(record: Mapping[str, Any], schema: str = SCHEMA, *,
            unknown_fields: bool = False) -> str | None:
    """What is wrong with a record as JSON (one line naming the field), or None. A writer
    refuses fields the schema does not list; a reader passes ``unknown_fields=True`` and ignores
    them (a newer fabbench may add fields without a new version)."""
    bad = _finite(record, "")
    if bad is not None:
        value = json.dumps(_at(record, bad))
        return f"{bad}: {value} is not a finite number (NaN and Infinity are refused)"
    errors = validator(schema).iter_errors(record)
    if unknown_fields:
        errors = (e for e in errors if e.validator != "additionalProperties")
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "record"
    return f"{where}: {error.message}"


def _at(value: Any, path: str) -> Any:
    for part in path.split("/"):
        value = value[int(part)] if isinstance(value, list | tuple) else value[part]
    return value


def _plain(value: Any) -> Any:
    """JSON types only: tuples become lists, mappings plain dicts (copies)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


_NONE: Mapping[str, Any] = MappingProxyType({})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """Base of every kind: ``run_id`` ties a record to its run record.

    A record is made two ways. The writer's side calls the constructor, which checks the record
    against the current schema (every field passed, None only where the schema allows null).
    The loader calls ``read``, with a JSON object its own version's schema already accepted:
    a field the object does not hold is None (fields a supported version does not require are
    annotated ``| None`` for that reason; none is filled in with a guessed value), and fields
    this fabbench does not know (from a newer writer) are kept, as read, in ``extra``."""

    kind: ClassVar[str]
    run_id: str

    def __post_init__(self) -> None:
        self.to_dict()

    @classmethod
    def read(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record of a JSON object read from a results file (results.reader checks it
        against its version's schema and renames old fields first; this does not check)."""
        names = {f.name for f in dataclasses.fields(cls)}
        record = object.__new__(cls)
        for name in names:
            object.__setattr__(record, name, data.get(name))
        object.__setattr__(record, "_extra", MappingProxyType(
            {k: v for k, v in data.items() if k not in names and k != "kind"}))
        return record

    @property
    def extra(self) -> Mapping[str, Any]:
        """Fields of the line that this fabbench's record does not declare (a newer writer's),
        as read; empty for a record made here."""
        return self.__dict__.get("_extra", _NONE)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this record, checked against the schema (InvalidRecord if not)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in dataclasses.fields(self):
            out[f.name] = _plain(getattr(self, f.name))
        return checked(out)


def checked(record: dict[str, Any]) -> dict[str, Any]:
    """The record itself when it satisfies the current schema, else InvalidRecord."""
    why = problem(record)
    if why is not None:
        raise InvalidRecord(f"refused a {record.get('kind', '?')} record that does not satisfy "
                            f"{SCHEMA}: {why}")
    return record


Times = Mapping[str, float]  # min, p50, mean, p99, max, stdev (microseconds)


@kind("run")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Run(Record):
    """The first record of a run: what was asked, what was picked, where it ran."""

    schema: str = SCHEMA
    started: str
    argv: Sequence[str]
    fabric: str
    wire: str | None
    primitive: str
    horovod_over: str | None
    device: str | None
    ranks: int
    nodes: int
    rank_hosts: Sequence[str] | None  # the host of each rank
    # the container runtime each rank ran in (None: the bare host); absent in older files
    rank_containers: Sequence[str | None] | None = None
    transport: str | None
    interface: str | None
    expected_transport: Sequence[str] | None
    picked: Sequence[str] | None
    profile_source: str | None
    profile_env: Mapping[str, str] | None
    profile_link: Mapping[str, Any] | None  # the profile's hardware kind, where speed is read
    timing: Mapping[str, Any] | None
    resumed: bool | None
    plan: Mapping[str, Any] | None
    timing_method: str | None  # how the communicator's times were taken
    library_report: Mapping[str, Any] | None  # what the library said of its connections
    provenance: Mapping[str, Any]
    emulation: Mapping[str, Any] | None = None  # the emulated cluster the ranks ran on
    gpudirect: Mapping[str, Any] | None  # requested, obtained, verify, evidence


@kind("collective")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Collective(Record):
    """One measured point of the collectives sweep (op, dtype, size)."""

    op: str
    bytes: int
    count: int | None
    dtype: str
    ranks: int
    transport: str
    iters: int
    samples: int | None
    batch: int | None
    warmup: int | None
    timing: str | None  # the protocol (timing.engine.PROTOCOLS); absent: batch
    time_us: Times
    samples_us: Sequence[float] | None
    algbw_gbyte_s: float
    busbw_gbyte_s: float
    busbw_mean_gbyte_s: float | None
    correct: bool | None
    wrong: int | None
    wrong_ranks: Sequence[int] | None
    rank_samples_us: Sequence[Sequence[float]] | None  # each rank's own samples
    stable: bool           # by stable_rule (timing.stats.STABLE_RULE)
    stable_rule: str
    median_ci95_rel: float | None  # None: too few samples for the interval


@kind("train")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Train(Record):
    """A data-parallel training measurement (one rank count)."""

    model: str
    parameters: int
    reference_parameters: int | None
    family: str | None
    input_size: int | None
    batch_per_rank: int
    global_batch: int | None
    ranks: int
    engine: str | None
    primitive: str | None
    horovod_over: str | None
    transport: str | None
    device: str | None
    precision: str | None
    threads_per_rank: int | None
    steps: int | None
    warmup_steps: int | None
    samples_per_s: Mapping[str, float]           # p50, mean, ci95 (all ranks)
    samples_per_s_per_rank: Mapping[str, float] | None
    step_ms: float
    step_ms_mean: float | None
    compute_ms: float | None
    compute_ms_mean: float | None
    comm_ms: float
    comm_fraction: float | None
    allreduce_ms: float | None
    step_ms_samples: Sequence[float] | None
    compute_ms_samples: Sequence[float] | None
    grad_bytes: int | None
    wire_bytes_per_rank: int | None
    buckets: Mapping[str, Any] | None   # cap_mb, count, bytes, source
    net: Mapping[str, Any] | None       # interface counters: tx/rx/peak/link in _gbit_s
    grads_identical: bool | None
    grads_finite_nonzero: bool | None
    params_identical: bool | None
    grads_differ_without_exchange: bool | None
    baseline_samples_per_s: float | None
    scaling_efficiency: float | None


@kind("halo")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Halo(Record):
    """A 3-D halo exchange measurement."""

    cells_per_rank: int
    side: int | None
    grid: Sequence[int] | None
    ranks: int
    iterations: int | None
    dtype: str | None
    transport: str | None
    time_us: Times
    exchange_us: Times | None
    samples_us: Sequence[float] | None  # per iteration, the slowest rank's
    compute_us_p50: float | None
    bytes_per_iter: int
    messages_per_iter: int | None
    exchange_gbyte_s: float | None
    correct: bool | None
    wrong: int | None


@kind("ceiling")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Ceiling(Record):
    """The wire's ceiling between two hosts (ceiling/measure.py), one way or both ways."""

    tool: str
    mode: str
    interface: str | None
    client: Mapping[str, Any]    # rank, host, address
    server: Mapping[str, Any]
    seconds: float | None
    directions: Sequence[Mapping[str, Any]]  # from, to, gbit_s, retransmits
    per_direction_gbit_s: float | None
    error: str | None


@kind("pairs")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Pairs(Record):
    """One pair of a round-robin tournament of nodes (or ranks): bidirectional sendrecv."""

    op: str
    # "rounds": a round's pairs at once; "serial": one pair at a time
    schedule: str | None = "rounds"
    round: int
    rounds: int | None
    unit: str          # "node" or "rank"
    units: int | None
    a: int
    b: int
    a_rank: int
    b_rank: int
    a_host: str
    b_host: str
    bytes: int
    dtype: str
    transport: str
    iters: int | None
    samples: int | None
    batch: int | None
    warmup: int | None
    timing: str | None  # the protocol (timing.engine.PROTOCOLS); absent: batch
    time_us: Times
    samples_us: Sequence[float] | None
    bw_gbyte_s: float
    correct: bool | None


@kind("summary")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Summary(Record):
    """The last record of a run: did it finish, what it holds, why it failed."""

    ok: bool
    counts: Mapping[str, int]
    wall_s: float
    error: str | None = None
