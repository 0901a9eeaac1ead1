"""Typed results records, one frozen keyword-only dataclass per kind, and the schema check.

A record is checked against schema.json (version SCHEMA) when made and again by the writer on
the exact object it serializes, so no invalid byte reaches a results file; NaN and Infinity are
refused everywhere. ``| None`` marks a field some supported version does not require (None when
read from a file that lacks it; the writer still passes it). Objects of stable shape inside a
record are typed too (Nested); free-form ones stay mappings. A new kind of fabbench's own: a
dataclass decorated with ``@kind("name")`` and its ``$defs`` entry in schema.json with the same
fields (a unit test compares them); a new field goes in both and in the history beside
results.SCHEMA. The run's kinds are here; a workload's kind lives in its package (the
collectives', halo's, pairs'), registered when fabbench.catalog loads the package (``kind_of``
and ``kinds`` load it when a kind of schema.json is not registered yet)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from fabbench.errors import InvalidRecord
from fabbench.results import SCHEMA, SCHEMA_FILES
from fabbench.results.fast_check import Check, fast_check

if TYPE_CHECKING:
    import jsonschema

    from fabbench.emulate.cluster import Cluster

R = TypeVar("R", bound="Record")
N = TypeVar("N", bound="Nested")
KINDS: dict[str, type[Record]] = {}
# the kinds a workload package registers, with their own JSON schemas (fabbench's own kinds are
# those of schema.json)
OWN_SCHEMAS: dict[str, Mapping[str, Any]] = {}


def kind(name: str, schema: Mapping[str, Any] | None = None) -> Callable[[type[R]], type[R]]:
    """Register a record class under its kind; a kind is registered once. A kind of
    fabbench's own is described in schema.json; a workload package's kind brings its own
    ``schema``: a JSON schema of an object whose ``properties`` list every field of the class
    and ``kind`` (as schema.json's ``$defs`` entries do), checked as fabbench's own kinds are
    (finite numbers; ``kind`` and ``run_id`` required), in every schema version."""
    def register(cls: type[R]) -> type[R]:
        if name in KINDS:
            raise ValueError(f"record kind {name!r} is registered twice")
        builtin = name in _schema(SCHEMA)["properties"]["kind"]["enum"]
        if builtin and schema is not None:
            raise ValueError(f"record kind {name!r} is fabbench's own: schema.json describes it")
        if not builtin:
            if schema is None:
                raise ValueError(f"record kind {name!r} is not in {SCHEMA}'s schema: give its "
                                 "own schema")
            listed = set(schema.get("properties", {}))
            missing = ({f.name for f in dataclasses.fields(cls)} | {"kind"}) - listed
            if missing:
                raise ValueError(f"record kind {name!r}: its schema does not list "
                                 f"{', '.join(sorted(missing))}")
            import jsonschema  # the walk: only where a schema is checked or a record refused

            jsonschema.Draft202012Validator.check_schema(dict(schema))
            OWN_SCHEMAS[name] = schema
        cls.kind = name
        KINDS[name] = cls
        return cls
    return register


@functools.cache
def _own_kinds() -> tuple[str, ...]:
    """fabbench's own kinds, in schema.json's order."""
    return tuple(_schema(SCHEMA)["properties"]["kind"]["enum"])


def _load_own() -> None:
    """Register the kinds fabbench's own workload packages declare: loading the catalog loads
    them (and the installed packages' too)."""
    from fabbench import catalog  # noqa: F401  (a lower layer: its import registers them)


def kind_of(name: str) -> type[Record] | None:
    """The class of a record kind, or None when no package loaded declares it."""
    cls = KINDS.get(name)
    if cls is None and name in _own_kinds():
        _load_own()
        cls = KINDS.get(name)
    return cls


def kinds() -> dict[str, type[Record]]:
    """Every record kind this fabbench knows: its own in schema.json's order, then the installed
    workload packages' in the order they registered."""
    if any(n not in KINDS for n in _own_kinds()):
        _load_own()
    own = {n: KINDS[n] for n in _own_kinds()}
    return {**own, **{n: c for n, c in KINDS.items() if n not in own}}


_SCALARS = frozenset({str, int, bool, type(None)})  # the JSON values that are never NaN


def _all_finite(value: Any) -> bool:
    """No NaN or Infinity in a JSON-like value, found quickly: True means _finite would find
    none; False, that it may (it decides). The numbers of a list or an object are added up in
    one pass in C: a NaN or an Infinity among them makes the sum one (so does a sum past
    float's range: _finite looks then, and finds none)."""
    exact = type(value)
    if exact in _SCALARS:
        return True
    if exact is dict:
        items: Any = value.values()
    elif exact is list:
        items = value
    elif isinstance(value, float):
        return math.isfinite(value)
    elif isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return True
    try:
        total = sum(items)
    except (TypeError, OverflowError):  # not numbers only (or an int past float's range)
        return all(map(_all_finite, items))
    return not isinstance(total, float) or math.isfinite(total)


def _finite(value: Any, where: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path (keys and indexes) of the first NaN or Infinity in a JSON-like value, else None.
    A path, not a string: a key may be empty or hold a '/'."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, Mapping):
        items: Any = (((*where, k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = (((*where, i), v) for i, v in enumerate(value))
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


def _is_array(checker: Any, instance: Any) -> bool:
    return isinstance(instance, list | tuple)


@functools.cache
def _finite_class() -> type[jsonschema.protocols.Validator]:
    """Draft 2020-12's validator class whose "number" is a finite number and whose "array" is
    a tuple too (as json writes it, and as jsonschema-rs, the fast check, takes it)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine_many({"number": _is_finite_number,
                                               "array": _is_array})
    made: type[jsonschema.protocols.Validator] = (
        jsonschema.validators.extend(base, type_checker=checker))  # type: ignore[no-untyped-call]
    return made


@functools.cache
def _schema(version: str) -> dict[str, Any]:
    """The JSON schema of one version (schema.json, schema-1.json)."""
    text = resources.files("fabbench.results").joinpath(SCHEMA_FILES[version]).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def validator(schema: str = SCHEMA) -> jsonschema.protocols.Validator:
    """The validator of one schema version; its "number" is a finite number."""
    return _finite_class()(_schema(schema))


def _own_schema(name: str) -> dict[str, Any]:
    """The schema of a workload package's kind: its own, with ``kind`` and ``run_id`` as every
    record has them."""
    return {"type": "object", "required": ["kind", "run_id"],
            "properties": {"kind": {"const": name}, "run_id": {"type": "string", "minLength": 1}},
            "allOf": [dict(OWN_SCHEMAS[name])]}


@functools.cache
def _own_validator(name: str) -> jsonschema.protocols.Validator:
    """The validator of a workload package's kind (_own_schema)."""
    return _finite_class()(_own_schema(name))


@functools.cache
def _fast(schema: str, own: str | None, lenient: bool, parsed: bool = False) -> Check | None:
    """The fast check (results.fast_check: jsonschema-rs) of a schema version, or of a workload
    package's kind (``own``); ``lenient``: a reader's, fields the schema does not list not
    refused; ``parsed``: records json made."""
    return fast_check(_own_schema(own) if own else _schema(schema), lenient=lenient,
                      parsed=parsed)


def problem(record: Mapping[str, Any], schema: str = SCHEMA, *,
            unknown_fields: bool = False, parsed: bool = False, finite: bool = False
            ) -> str | None:
    """What is wrong with a record as JSON (one line naming the field), or None. A writer
    refuses fields the schema does not list; a reader passes ``unknown_fields=True`` and ignores
    them (a newer fabbench may add fields without a new version), and ``parsed=True`` where json
    made the record (exact JSON types only), ``finite=True`` where the parser refused every
    NaN, Infinity and number past float's range (orjson does). A record is checked by
    jsonschema-rs (results.fast_check); one it refuses, or cannot judge, is walked by
    jsonschema, whose verdict and best-matching error are the answer."""
    bad = None if finite or _all_finite(record) else _finite(record)
    if bad is not None:
        value = json.dumps(_at(record, bad))
        return (f"{'/'.join(map(str, bad))}: {value} is not a finite number (NaN and Infinity "
                "are refused)")
    name = record.get("kind")
    if isinstance(name, str) and kind_of(name) is None:
        return (f"kind: {name!r} is not a record kind this fabbench knows ({', '.join(kinds())}); "
                "a workload package's records need that package installed")
    own = isinstance(name, str) and name in OWN_SCHEMAS
    fast = _fast(schema, record["kind"] if own else None, unknown_fields, parsed)
    if fast is not None and fast(record):
        return None
    return _walked(record, schema, own=own, unknown_fields=unknown_fields)


def _walked(record: Mapping[str, Any], schema: str, *, own: bool,
            unknown_fields: bool) -> str | None:
    """problem's answer by jsonschema's walk of the schema."""
    import jsonschema

    errors = (_own_validator(record["kind"]) if own else validator(schema)).iter_errors(record)
    if unknown_fields:
        errors = (e for e in errors if e.validator != "additionalProperties")
    error = jsonschema.exceptions.best_match(errors)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "record"
    return f"{where}: {error.message}"


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _plain(value: Any) -> Any:
    """JSON types only: a nested object becomes its JSON object (Nested.to_json), tuples
    lists, mappings plain dicts (copies)."""
    if isinstance(value, Nested):
        return value.to_json()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


_NONE: Mapping[str, Any] = MappingProxyType({})
# a Nested field with this metadata is left out of the JSON when None (see Nested)
OMITTED: Mapping[str, bool] = MappingProxyType({"omitted": True})


def after(name: str, metadata: Mapping[str, Any] = _NONE) -> Mapping[str, Any]:
    """Metadata that writes a record's field right after the field ``name`` in its JSON: a
    base's fields stand where the kinds wrote them before the base (see Measured)."""
    return MappingProxyType({**metadata, "after": name})


_WRITTEN: dict[type, tuple[dataclasses.Field[Any], ...]] = {}


def _written(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """A record's fields in the order its JSON holds them: declaration order, each field with
    ``after`` metadata moved (in declaration order) right after the field it names."""
    if cls not in _WRITTEN:
        fields = list(dataclasses.fields(cls))
        for f in [f for f in fields if "after" in f.metadata]:
            fields.remove(f)
            fields.insert([g.name for g in fields].index(f.metadata["after"]) + 1, f)
        _WRITTEN[cls] = tuple(fields)
    return _WRITTEN[cls]


def _key(f: dataclasses.Field[Any]) -> str:
    """A field's JSON key: its name, less the ``_`` a Python keyword takes (``from_``)."""
    return f.name.removesuffix("_")


def _nested_type(hint: Any) -> tuple[type[Nested], bool] | None:
    """The Nested class a field's type holds, and whether as a sequence of them (``X``,
    ``X | None``, ``Sequence[X]``, ``Sequence[X] | None``); None for any other type."""
    if isinstance(hint, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            return None
        hint = args[0]
    many = typing.get_origin(hint) is Sequence
    item = typing.get_args(hint)[0] if many else hint
    if typing.get_origin(item) is None and isinstance(item, type) and issubclass(item, Nested):
        return item, many
    return None


_NESTED_FIELDS: dict[type, dict[str, tuple[type[Nested], bool]]] = {}


def _nested_fields(cls: type) -> dict[str, tuple[type[Nested], bool]]:
    """The fields of a record or nested class that hold nested objects (see _nested_type).
    A class whose annotations do not resolve at run time (a name only a type checker imports,
    in a workload package's record, say) is taken to hold none."""
    found = _NESTED_FIELDS.get(cls)
    if found is None:
        try:
            hints = typing.get_type_hints(cls)
        except NameError:
            hints = {}
        found = _NESTED_FIELDS[cls] = {
            f.name: spec for f in dataclasses.fields(cls)
            if (spec := _nested_type(hints.get(f.name))) is not None}
    return found


def _made(spec: tuple[type[Nested], bool], value: Any, *, read: bool) -> Any:
    """A nested field's value from its JSON (Nested.read, or Nested.of for a writer); a value
    that already is the dataclass is kept (a record read again with fields changed)."""
    cls, many = spec

    def one(item: Any) -> Any:
        if isinstance(item, cls):
            return item
        return cls.read(item) if read else cls.of(item)
    if value is None:
        return None
    return tuple(one(v) for v in value) if many else one(value)


_READ_PLANS: dict[tuple[type, frozenset[str]], tuple[
    list[tuple[str, str, tuple[type[Nested], bool] | None]], frozenset[str]]] = {}


def _read_plan(cls: type, ignored: frozenset[str]) -> tuple[
        list[tuple[str, str, tuple[type[Nested], bool] | None]], frozenset[str]]:
    """How _read fills a class: each field's name, JSON key and nested type (or None), and the
    keys that are not extra; worked out once per class."""
    plan = _READ_PLANS.get((cls, ignored))
    if plan is None:
        fields = dataclasses.fields(cls)
        nested = _nested_fields(cls)
        plan = _READ_PLANS[cls, ignored] = (
            [(f.name, _key(f), nested.get(f.name)) for f in fields],
            frozenset(_key(f) for f in fields) | ignored)
    return plan


def _read(cls: Any, data: Mapping[str, Any], ignored: frozenset[str]) -> Any:
    """A record or nested object of a JSON object, unchecked (Record.read, Nested.read)."""
    fields, keys = _read_plan(cls, ignored)
    made = object.__new__(cls)
    values = made.__dict__  # a frozen dataclass's fields, set as its own __init__ would
    for name, key, spec in fields:
        value = data.get(key)
        values[name] = value if spec is None else _made(spec, value, read=True)
    values["_extra"] = _NONE if keys.issuperset(data) else MappingProxyType(
        {k: v for k, v in data.items() if k not in keys})
    return made


def _check_nested(made: Any) -> None:
    """A TypeError naming the field where a writer passed a nested field other than its
    dataclass (a dict, say: ``X.of`` makes the dataclass of a JSON object)."""
    for name, (cls, many) in _nested_fields(type(made)).items():
        value = getattr(made, name)
        for item in () if value is None else value if many else (value,):
            if not isinstance(item, cls):
                raise TypeError(f"{type(made).__name__}.{name} takes "
                                f"{'a sequence of ' if many else ''}records.{cls.__name__}, "
                                f"not {type(item).__name__} (records.{cls.__name__}.of makes "
                                "one of a JSON object)")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """Base of every kind: ``run_id`` ties a record to its run record.

    A record is made two ways. The writer's side calls the constructor, which checks the record
    against the current schema (every field passed, None only where the schema allows null;
    a nested object passed as its dataclass, see Nested). The loader calls ``read``, with a
    JSON object its own version's schema already accepted: a field the object does not hold is
    None (fields a supported version does not require are annotated ``| None`` for that reason;
    none is filled in with a guessed value), and fields this fabbench does not know (from a
    newer writer) are kept, as read, in ``extra``. Nested objects are read the same way into
    their dataclasses (Nested.read)."""

    kind: ClassVar[str]
    run_id: str

    def __post_init__(self) -> None:
        _check_nested(self)
        self.to_json()

    @classmethod
    def read(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record of a JSON object read from a results file (results.reader checks it
        against its version's schema and renames old fields first; this does not check)."""
        record: R = _read(cls, data, frozenset({"kind"}))
        return record

    @property
    def extra(self) -> Mapping[str, Any]:
        """Fields of the line that this fabbench's record does not declare (a newer writer's),
        as read; empty for a record made here."""
        extra: Mapping[str, Any] = self.__dict__.get("_extra", _NONE)
        return extra

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this record, checked against the schema (InvalidRecord if not)."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in _written(type(self)):
            out[f.name] = _plain(getattr(self, f.name))
        return checked(out)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Nested:
    """Base of the typed objects inside a record (a run's timing, provenance, GPUDirect state,
    profile link and emulated cluster; times; a training run's buckets and interface counters;
    a ceiling's endpoints and directions). Each lists the fields of its
    object in schema.json's ``$defs`` (where the schema leaves an object open, the fields this
    fabbench writes), in the order the writer writes them; a field a supported version, or the
    schema, lets a file lack is ``| None``.

    Made as a record is, two ways. The writer's side calls the constructor, or ``of`` with the
    JSON object a collector returns (InvalidRecord for a key the class does not declare, or
    one it needs missing). The loader's ``Record.read`` calls ``read``: a key the object lacks
    is None (and stays out of ``to_json``), and keys this fabbench does not declare are kept,
    as read, in ``extra``, as at the top level (and, as there, not written back). ``to_json``
    is the JSON object: every field, None as null, except a field declared with OMITTED
    metadata, which is left out when None (a key the writer leaves out when it has nothing),
    and a key absent from the object ``of`` or ``read`` made it of. A field named like a Python
    keyword ends in ``_`` (``from_``); its JSON key does not."""

    def __post_init__(self) -> None:
        _check_nested(self)

    @classmethod
    def of(cls: type[N], data: Mapping[str, Any]) -> N:
        """The writer's object of a JSON object (its nested objects made too); a key with a
        default that the object lacks stays out of ``to_json``, as it was out of the object."""
        fields = {_key(f): f for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in fields]
        missing = [k for k, f in fields.items()
                   if k not in data and f.default is dataclasses.MISSING]
        if unknown:
            raise InvalidRecord(f"records.{cls.__name__} has no field {unknown[0]!r}")
        if missing:
            raise InvalidRecord(f"records.{cls.__name__} needs {missing[0]!r}")
        nested = _nested_fields(cls)
        made = cls(**{f.name: _made(nested[f.name], data[k], read=False)
                      if f.name in nested else data[k] for k, f in fields.items() if k in data})
        if len(data) < len(fields):  # keys with defaults left out: to_json leaves them out
            made.__dict__["_absent"] = frozenset(k for k in fields if k not in data)
        return made

    @classmethod
    def read(cls: type[N], data: Mapping[str, Any]) -> N:
        """The object of a JSON object read from a results file (unchecked, as Record.read);
        the keys it lacks are remembered, so that ``to_json`` leaves them out again."""
        made: N = _read(cls, data, frozenset())
        if not _read_plan(cls, frozenset())[1].issubset(data):
            made.__dict__["_absent"] = frozenset(
                key for _, key, _ in _read_plan(cls, frozenset())[0] if key not in data)
        return made

    @property
    def extra(self) -> Mapping[str, Any]:
        """Keys of the object that this fabbench does not declare, as read; empty for an
        object made here."""
        extra: Mapping[str, Any] = self.__dict__.get("_extra", _NONE)
        return extra

    def to_json(self) -> dict[str, Any]:
        """The JSON object (plain types; not checked: its record is); of an object read, the
        keys it held."""
        out: dict[str, Any] = {}
        absent = self.__dict__.get("_absent", ())
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if (value is not None or not f.metadata.get("omitted")) and _key(f) not in absent:
                out[_key(f)] = _plain(value)
        return out


def checked(record: dict[str, Any]) -> dict[str, Any]:
    """The record itself when it satisfies the current schema, else InvalidRecord."""
    why = problem(record)
    if why is not None:
        raise InvalidRecord(f"refused a {record.get('kind', '?')} record that does not satisfy "
                            f"{SCHEMA}: {why}")
    return record


@dataclasses.dataclass(frozen=True, kw_only=True)
class Times(Nested):
    """A measurement's times in microseconds (timing.stats.summarize); stdev is absent from
    files written before it was recorded."""

    min: float
    p50: float
    mean: float
    p99: float
    max: float
    stdev: float | None = dataclasses.field(default=None, metadata=OMITTED)


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmulatedLink(Nested):
    """One emulated node's shaped link (emulate/spec.py's Link, as the run record keeps it);
    the schema leaves the object open, so a file may lack any field."""

    node: str | None
    address: str | None
    speed_gbit_s: float | None
    delay_us: float | None
    loss_pct: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class EmulatedCluster(Nested):
    """The emulated cluster the ranks ran on (emulate/cluster.py): its nodes, their links; the
    schema leaves the object open, so a file may lack any field."""

    nodes: int | None
    ranks_per_node: int | None
    interface: str | None
    subnet: str | None
    owner_pid: int | None
    links: Sequence[EmulatedLink] | None

    @classmethod
    def of_cluster(cls, cluster: Cluster) -> EmulatedCluster:
        """What the run record keeps of an emulated cluster."""
        return cls(nodes=len(cluster.nodes), ranks_per_node=cluster.ranks_per_node,
                   interface=cluster.iface, subnet=cluster.subnet, owner_pid=cluster.owner_pid,
                   links=[EmulatedLink(node=n.hostname, address=n.address,
                                       speed_gbit_s=n.link.rate_bit_s / 1e9,
                                       delay_us=n.link.delay_us, loss_pct=n.link.loss_pct)
                          for n in cluster.nodes])


@dataclasses.dataclass(frozen=True, kw_only=True)
class ConnectionReport(Nested):
    """What the communication library said of its connections: NCCL's (comm/nccl_report.py:
    network to lines) or a CUDA-aware MPI's (cuda_aware, evidence). The schema leaves the
    object open; a report holds the keys its library gave (``of`` and ``read`` keep exactly
    those)."""

    network: str | None = None
    transport: str | None = None
    gpudirect: str | None = None
    net_connections: int | None = None
    gdr_connections: int | None = None
    channels: int | None = None
    link_layers: Sequence[str] | None = None
    ofi_provider: str | None = None
    lines: Sequence[str] | None = None
    cuda_aware: bool | None = None
    evidence: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timing(Nested):
    """A run's timing policy (timing.engine.TimingPolicy, as the run took it). The schema leaves
    the object open and requires none of it, so every field may be absent (a field added to the
    policy later is missing from older files)."""

    budget_s: float | None
    min_samples: int | None
    max_samples: int | None
    samples_target: int | None
    max_batch: int | None
    warmup_s: float | None
    patience: float | None
    protocol: str | None
    cuda_graph: bool | None = dataclasses.field(default=None, metadata=OMITTED)
    graph_ops: int | None = dataclasses.field(default=None, metadata=OMITTED)
    nccl_graph_mixing: str | None = dataclasses.field(default=None, metadata=OMITTED)


@dataclasses.dataclass(frozen=True, kw_only=True)
class GpuDirect(Nested):
    """GPUDirect RDMA asked for and got (launch.gpudirect.outcome); fabbench/1 has none."""

    requested: str        # auto, on, off
    obtained: str | None  # on, off, partial; None: nothing said so
    verify: str           # report, library, none: how the run learns what it got
    evidence: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileLink(Nested):
    """Where the fabric profile reads the link's speed (fabrics.profile.LinkSpec), with the
    profile's hardware kind."""

    hardware: str
    speed_from: str
    device_env: Sequence[str]
    iface_env: Sequence[str]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Nic(Nested):
    """A network interface of the run's host (sysinfo.sysfs.NetDevice)."""

    name: str
    operstate: str | None
    speed_mbit_s: int | None
    mtu: int | None
    kind: str | None  # ether, infiniband (IPoIB), loopback, other
    pci: bool | None  # backed by a physical device


@dataclasses.dataclass(frozen=True, kw_only=True)
class Port(Nested):
    """A verbs or hfi1 port of the run's host, as recorded (sysinfo.sysfs.RdmaPort; the schema's
    rdma_port)."""

    device: str
    port: int
    state: str | None
    rate: str | None  # e.g. "100 Gb/sec (4X EDR)"
    link_layer: str | None
    driver: str | None
    active: bool | None
    rate_gbit_s: float | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cpu(Nested):
    """The host's processor and memory (sysinfo.inventory.cpu_info); a figure the host does
    not tell is None."""

    model: str | None = None
    arch: str | None = None
    cores: int | None = None
    threads: int | None = None
    memory_bytes: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gpu(Nested):
    """A GPU as nvidia-smi lists it (sysinfo.inventory.gpu_info), its fields as nvidia-smi
    writes them ("81559 MiB")."""

    index: str | None = None
    name: str | None = None
    memory: str | None = None
    driver: str | None = None
    pci: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Versions(Nested):
    """The versions of the libraries a run may use (sysinfo.inventory.library_versions; None:
    not installed), and the MPI library's own words when the run used MPI."""

    fabbench: str | None = None
    python: str | None = None
    torch: str | None = None
    mpi4py: str | None = None
    horovod: str | None = None
    openmpi: str | None = None
    ucx: str | None = None
    libfabric: str | None = None
    nccl: str | None = None
    mpi_library: str | None = dataclasses.field(default=None, metadata=OMITTED)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Image(Nested):
    """The fabbench image the run's rank 0 ran from (sysinfo.inventory.image_identity): its id
    (<version>-<flavor>-<hash of the build manifest>), what the manifest says of it, and its
    registry reference, where the reference came from and its digest where known (absent, not
    null, where nobody told); older files have no image at all."""

    id: str
    version: str | None
    flavor: str | None
    vcs_ref: str | None
    inputs: str | None  # the hash of the image's build inputs
    ref: str | None = dataclasses.field(default=None, metadata=OMITTED)
    ref_source: str | None = dataclasses.field(default=None, metadata=OMITTED)
    digest: str | None = dataclasses.field(default=None, metadata=OMITTED)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Provenance(Nested):
    """The host inventory of rank 0 (sysinfo.inventory): the schema requires host, cpu, gpus,
    nics, rdma, versions and env; the rest is what the inventory adds. build and env stay
    mappings: free-form, their keys are the image's build manifest's (its own format,
    containers/manifest.sh: components and their keys vary by flavour) and the environment's."""

    host: str
    os: str | None
    cpu: Cpu
    gpus: Sequence[Gpu]
    nics: Sequence[Nic]
    rdma: Sequence[Port]
    hfi: Sequence[str] | None  # Omni-Path devices
    gpudirect_rdma: bool | None  # the peer-memory module is loaded
    versions: Versions
    build: Mapping[str, Any] | None  # the image's build manifest
    image: Image | None  # None: not in the fabbench image
    container: str | None  # the container runtime; None: the bare host
    container_version: str | None = dataclasses.field(default=None, metadata=OMITTED)
    container_version_source: str | None = dataclasses.field(default=None, metadata=OMITTED)
    scheduler: str | None
    env: Mapping[str, str]


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
    profile_link: ProfileLink | None  # the profile's hardware kind, where speed is read
    timing: Timing | None
    resumed: bool | None
    # fabbench.plan.Plan.to_json(), which Plan.read types (runner's --resume); a mapping here:
    # its keys are every option of `fabbench run` and each installed workload package's
    # section, and older files hold older plans (sections flat, run-time state), which
    # Plan.read reads and a fixed class would drop
    plan: Mapping[str, Any] | None
    timing_method: str | None  # how the communicator's times were taken
    library_report: ConnectionReport | None  # what the library said of its connections
    provenance: Provenance
    emulation: EmulatedCluster | None = None  # the emulated cluster the ranks ran on
    gpudirect: GpuDirect | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured(Record):
    """Base of the kinds timed by timing.engine (collective, pairs): how the samples were taken
    and their times (microseconds). Their JSON holds these fields after the kind's ``iters``."""

    samples: int | None = dataclasses.field(metadata=after("iters"))
    batch: int | None = dataclasses.field(metadata=after("samples"))
    warmup: int | None = dataclasses.field(metadata=after("batch"))
    # the protocol (timing.engine.PROTOCOLS); absent: batch
    timing: str | None = dataclasses.field(metadata=after("warmup"))
    time_us: Times = dataclasses.field(metadata=after("timing"))
    samples_us: Sequence[float] | None = dataclasses.field(metadata=after("time_us"))




@dataclasses.dataclass(frozen=True, kw_only=True)
class Endpoint(Nested):
    """A host of a ceiling measurement: its rank, host and address."""

    rank: int
    host: str
    address: str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class CeilingDirection(Nested):
    """One direction a ceiling measured: from a host to a host ("from" in the JSON)."""

    from_: str
    to: str
    gbit_s: float
    retransmits: int | None  # TCP segments resent; None: the tool does not say


@kind("ceiling")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Ceiling(Record):
    """The wire's ceiling between two hosts (ceiling/measure.py), one way or both ways."""

    tool: str
    mode: str
    interface: str | None
    client: Endpoint
    server: Endpoint
    seconds: float | None
    directions: Sequence[CeilingDirection]
    per_direction_gbit_s: float | None
    error: str | None


@kind("summary")
@dataclasses.dataclass(frozen=True, kw_only=True)
class Summary(Record):
    """The last record of a run: did it finish, what it holds, why it failed."""

    ok: bool
    counts: Mapping[str, int]
    wall_s: float
    error: str | None = None
