"""The run configuration: every option of ``fabbench run``, declared once.

A :class:`RunConfig` is frozen and nested (common settings, then one section per workload);
each field is declared once by :func:`option` (flag, study key, help, default, check). The
``run`` command's options, a study cell's keys, a job's argv and the chart's argument list are
all derived from these declarations, and ``RunConfig.from_argv(c.to_argv()) == c``.
Constructing one validates each field alone (a ``UsageError`` naming the flag); ``None`` means
"fabbench decides", and those decisions and the rules between fields belong to
:class:`fabbench.plan.Plan`."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

from fabbench import catalog
from fabbench import value_rules as rules
from fabbench.comm.primitives import HOROVOD_OVER, PRIMITIVES
from fabbench.errors import UsageError
from fabbench.fabrics.profile import GPUDIRECT, WIRES
from fabbench.option_fields import (
    COUNTS,
    FLOAT,
    INT,
    NAMES,
    SWITCH,
    TEXT,
    Bounds,
    Option,
    between,
    option,
    validate,
)

DEVICES = ("cpu", "cuda")
S = TypeVar("S")


def _out(path: str) -> str | None:
    """A file fabbench may write results to: new, empty, or one whose content starts as JSON
    Lines records do (fabbench's claim on it, which refuses a file that already holds results
    unless the run appends on purpose, comes when the run starts: a rank inside a job may see
    rank 0's first record already). Only read, never changed."""
    if not path or rules.has_control(path):
        return f"--out {path!r}: not a file name (empty, or a control character in it)"
    p = Path(path)
    if p.is_dir():
        return f"--out {path} is a directory: give a file name (JSON Lines)"
    if not p.exists():
        return None
    if not p.is_file():
        return f"--out {path} is not a regular file"
    try:
        with open(p, "rb") as f:  # procfs and sysfs files say size 0: read, do not stat
            head = f.read(1)
    except OSError as exc:
        return f"--out {path}: cannot read it ({exc.strerror})"
    if head and head != b"{":
        return f"--out {path} already holds data that is not fabbench results; choose " \
            "another --out (fabbench never overwrites a file)"
    return None


# ---- the configuration ----

SECTIONS: Mapping[str, type] = catalog.SECTIONS  # RunConfig.<workload>: its option section


@dataclass(frozen=True, kw_only=True, init=False)
class RunConfig:
    """One ``fabbench run``: the common settings, then one section per workload that has one
    (catalog.SECTIONS), read as ``config.train`` and given as ``RunConfig(train=TrainConfig(
    ...))``; a section not given is its defaults. A section declared in a workload's package
    (train's, halo's, ...) is read through ``__getattr__``, typed by ``section``."""

    fabric: str = option(
        "auto", TEXT, "--fabric", "ethernet, infiniband, omnipath, shm, auto, a site profile's "
        "name, or the path of a profile .toml file.", short="-f",
        check=lambda v: None if v.strip() else "--fabric must not be empty")
    primitive: str | None = option(
        None, TEXT, "--primitive", "mpi, gloo, nccl or horovod. Default: nccl when GPUs are "
        "visible, else mpi.", short="-p", choices=PRIMITIVES)
    horovod_over: str | None = option(
        None, TEXT, "--horovod-over", "Horovod's controller: mpi or gloo.", choices=HOROVOD_OVER,
        refusal="--horovod-over takes mpi or gloo, not {value!r}")
    wire: str = option(
        "native", TEXT, "--wire", "native (the fabric's hardware) or tcp (its software stack "
        "over TCP: UCX for infiniband, libfabric/OFI for omnipath).", choices=WIRES)
    workload: str = option(
        "collectives", TEXT, "--workload", catalog.described(), choices=catalog.NAMES,
        study="kind")
    ranks: int | None = option(
        None, INT, "--ranks", "Ranks to start (outside a job). Default: 2 local ranks; under "
        "`fabbench emulate`, nodes x ranks per node.", short="-n", show_default=False,
        placed=True, check=between(1, rules.MAX_LOCAL_RANKS, "ranks"))
    device: str | None = option(None, TEXT, "--device", "cpu or cuda. Default: cuda when GPUs "
                                "are visible.", choices=DEVICES)
    gpudirect: str = option(
        "auto", TEXT, "--gpudirect", "GPUDirect RDMA with --device cuda: on or off (the fabric "
        "profile's settings for the primitive; the run fails when the library reports "
        "otherwise), or auto (the library decides; what it did is recorded).", choices=GPUDIRECT,
        refusal="--gpudirect takes {known}, not {value!r}")
    timeout_s: float = option(
        30.0, FLOAT, "--timeout", "Seconds any operation may take (plus 1 s per 100 MB) before "
        "every rank stops.", check=Bounds(
            "timeout must be between 0 and 86400 seconds, not {v:g}", 0, 86400, low_open=True))
    out: str | None = option(
        None, TEXT, "--out", "Results file (JSON Lines). Default: results/<run id>-...",
        short="-o", placed=True, check=_out)
    iface: str | None = option(
        None, TEXT, "--iface", "Network interface for TCP traffic. Default: lo for local ranks; "
        "in a launched job each rank finds its own (the route to its rendezvous peer, else the "
        "default route, else the one interface up) and records which and why.",
        check=rules.Checked(rules.IFACE, "--iface"))
    rdma_device: str | None = option(
        None, TEXT, "--rdma-device", "RDMA device (e.g. mlx5_0). Default: the first active port.",
        check=rules.Checked(rules.RDMA_DEVICE, "--rdma-device"))
    ceiling: bool | None = option(
        None, SWITCH, "--ceiling", "Measure the wire's raw ceiling (iperf3 for ethernet) between "
        "two nodes first. Default: when the ranks span several hosts.", negative="--no-ceiling",
        show_default=False)
    ceiling_s: float = option(2.0, FLOAT, "--ceiling-seconds", "Seconds of each ceiling "
                              "measurement.", check=between(0.5, 600, "ceiling seconds"))
    # each workload's section by name (catalog.SECTIONS' order), read as attributes
    sections: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, *, sections: Mapping[str, Any] | None = None, **given: Any) -> None:
        hold_sections(self, SECTIONS, sections, given)
        validate(self)

    def __getattr__(self, name: str) -> Any:
        """The section of a workload declared in a package of its own (``config.train``,
        ``config.toy``), its type the package's: ``section(config, "toy", ToyConfig)`` gives it
        typed."""
        return section_of(self, name)

    def to_argv(self) -> list[str]:
        """The ``fabbench run`` arguments (after ``run``) that give this configuration: every
        field that differs from its default, in declaration order."""
        argv: list[str] = []
        for f in fields():
            value = f.get(self)
            if value == f.default:
                continue
            if f.option.kind is SWITCH:
                argv.append(f.option.flag if value else f.option.negative or "")
            else:
                argv += [f.option.flag, f.option.kind.write(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> RunConfig:
        """The configuration ``fabbench run ARGV`` asks for (flags only: ``--flag VALUE``,
        ``--flag=VALUE``, short flags, switches); a ``UsageError`` for anything else."""
        values: dict[str, Any] = {}
        args = iter(argv)
        for arg in args:
            flag, eq, text = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            f = BY_FLAG.get(flag)
            if f is None:
                raise UsageError(f"no such option: {arg!r}")
            if f.option.kind is SWITCH:
                if eq:
                    raise UsageError(f"{flag} takes no value")
                values[f.path] = flag != f.option.negative
                continue
            if not eq:
                following = next(args, None)
                if following is None:
                    raise UsageError(f"{flag} needs a value")
                text = following
            values[f.path] = f.option.kind.read(text, f.option.flag)
        return build(values)

    @classmethod
    def from_study(cls, keys: Mapping[str, Any]) -> RunConfig:
        """The configuration of study keys (:data:`STUDY_KEYS`: ``ops = "allreduce"``,
        ``batch_size = 64``, lists for comma lists)."""
        return build({STUDY_KEYS[key].path: study_value(key, value)
                      for key, value in keys.items()})

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with fields changed by dotted path (``"train.steps"``), validated again."""
        return build({**{f.path: f.get(self) for f in fields()}, **changes})


# ---- a frozen dataclass that holds workload sections (RunConfig, plan.Plan) ----

def hold_sections(obj: Any, types: Mapping[str, type], sections: Mapping[str, Any] | None,
                  given: dict[str, Any]) -> None:
    """Fill a frozen dataclass declared with ``init=False`` and a ``sections`` field: its own
    fields from ``given`` (else their defaults), its sections from ``sections`` or from
    ``given`` by name (else each section's defaults), in ``types``' order; a TypeError for a
    name it has no field or section of, or a section of the wrong class."""
    chosen = dict(sections or {})
    for name, cls in types.items():
        if name in given:
            chosen[name] = given.pop(name)
        section = chosen.setdefault(name, cls())
        if not isinstance(section, cls):
            raise TypeError(f"{type(obj).__name__}'s {name} section is a {cls.__name__}, not "
                            f"{type(section).__name__}")
    own = {f.name: f for f in dataclasses.fields(obj) if f.name != "sections"}
    unknown = (set(given) - set(own)) | (set(chosen) - set(types))
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {', '.join(sorted(unknown))}")
    for name, f in own.items():
        if name in given:
            value = given[name]
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        elif f.default is not dataclasses.MISSING:
            value = f.default
        else:
            raise TypeError(f"{type(obj).__name__} needs {name}")
        object.__setattr__(obj, name, value)
    object.__setattr__(obj, "sections", {name: chosen[name] for name in types})


def section_of(obj: Any, name: str) -> Any:
    """``obj.<name>``, a section of an object filled by :func:`hold_sections`."""
    sections = obj.__dict__.get("sections", {})
    if name in sections:
        return sections[name]
    raise AttributeError(f"{type(obj).__name__} has no field or section {name!r}")


def section(obj: object, name: str, cls: type[S]) -> S:
    """``obj.<name>``, a section fabbench declares (its class ``cls``), as its type."""
    value = section_of(obj, name)
    if not isinstance(value, cls):  # hold_sections checks each section's class
        raise TypeError(f"{type(obj).__name__}'s {name} section is a {type(value).__name__}")
    return value



# ---- the field table every consumer reads ----

@dataclass(frozen=True)
class Field:
    """One declared field, where it sits (``section`` None: a common setting)."""

    section: str | None
    name: str
    default: Any
    option: Option

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}" if self.section else self.name

    @property
    def param(self) -> str:
        """Its parameter name in the ``run`` command (the flag's name, e.g. ``timeout``)."""
        return self.option.flag.removeprefix("--").replace("-", "_")

    @property
    def panel(self) -> str:
        return f"{self.section.capitalize()} workload" if self.section else "Run"

    def get(self, config: RunConfig) -> Any:
        return getattr(getattr(config, self.section), self.name) if self.section else \
            getattr(config, self.name)


def _declared(cls: type, section: str | None) -> Iterator[Field]:
    for f in dataclasses.fields(cls):
        if "option" in f.metadata:
            default = f.default if f.default_factory is dataclasses.MISSING else \
                f.default_factory()
            yield Field(section, f.name, default, f.metadata["option"])


def fields() -> tuple[Field, ...]:
    """Every field, common settings first, then each section's, in declaration order."""
    return _FIELDS


_FIELDS = (*_declared(RunConfig, None),
           *(f for name, cls in SECTIONS.items() for f in _declared(cls, name)))
STUDY_KEYS: Mapping[str, Field] = {f.option.study: f for f in _FIELDS}
_BY_PATH: Mapping[str, Field] = {f.path: f for f in _FIELDS}
BY_FLAG: Mapping[str, Field] = {flag: f for f in _FIELDS
                                for flag in (f.option.flag, f.option.short, f.option.negative)
                                if flag}  # every name a field is given by on a command line
assert len(STUDY_KEYS) == len(_FIELDS), "two fields share a study key"

# What a rendered job (`fabbench render`, the Helm chart) defaults differently from `fabbench
# run`, by path: it names the fabric of the nodes it lands on (run's auto detects this host's).
RENDERED_DEFAULTS: Mapping[str, Any] = MappingProxyType({"fabric": "ethernet"})


def study_value(key: str, value: Any) -> Any:
    """A study key's TOML value (a string, number, boolean, or a list for a comma list) as its
    field's value, checked by the field's own rule (``UsageError``)."""
    f = STUDY_KEYS[key]
    kind = f.option.kind
    if isinstance(value, list):
        value = ",".join(map(str, value))
    if kind in (NAMES, COUNTS):
        value = kind.read(value, f.option.flag)
    elif kind is FLOAT:
        value = float(value)
    f.option.validate(f.name, value)
    return value


def build(values: Mapping[str, Any]) -> RunConfig:
    """A configuration from field values by dotted path (``{"train.steps": 10}``)."""
    common = {k: v for k, v in values.items() if "." not in k}
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for key, value in values.items():
        if "." in key:
            section, name = key.split(".", 1)
            sections[section][name] = value
    return RunConfig(**common, **{name: SECTIONS[name](**kw) for name, kw in sections.items()})


# ---- the run command's options ----

def typer_annotation(path: str, *, panel: bool = False) -> Any:
    """The field at ``path`` as a Typer option (``Annotated[type, typer.Option(...)]``): the
    ``run`` command's, and that of every command sharing the option (``fabbench render``'s
    --fabric). ``panel``: in its help panel."""
    import typer

    f = _BY_PATH[path]
    o = f.option
    names = [f"{o.flag}/{o.negative}"] if o.negative else [o.flag]
    if o.short:
        names.append(o.short)
    cli_type = o.kind.cli_type if f.default is not None else o.kind.cli_type | None
    return Annotated[cli_type, typer.Option(
        *names, help=o.help, show_default=o.show_default, metavar=o.metavar,
        rich_help_panel=f.panel if panel else None)]


def typer_parameters(*, placed: bool = True,
                     defaults: Mapping[str, Any] | None = None) -> list[inspect.Parameter]:
    """The ``fabbench run`` parameters, one per field, grouped in help panels per workload.
    ``placed=False``: less the fields whoever places the run sets (--ranks, --out: a rendered
    job's); ``defaults``: a command's own default of a field, by path (``fabbench render``'s
    fabric, which cannot be auto)."""
    params = []
    for f in _FIELDS:
        if f.option.placed and not placed:
            continue
        default = (defaults or {}).get(f.path, f.default)
        if f.option.kind in (NAMES, COUNTS) and default is not None:
            default = f.option.kind.write(default)
        params.append(inspect.Parameter(f.param, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=typer_annotation(f.path, panel=True)))
    return params


def from_parameters(given: Mapping[str, Any]) -> RunConfig:
    """The configuration of a command's parsed parameters (:func:`typer_parameters`; a field
    without one keeps its default): comma lists are read here, so a bad one is one line naming
    its flag."""
    values = {}
    for f in _FIELDS:
        if f.param not in given:
            continue
        value = given[f.param]
        if f.option.kind in (NAMES, COUNTS) and value is not None:
            value = f.option.kind.read(value, f.option.flag)
        values[f.path] = value
    return build(values)
