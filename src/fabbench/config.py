"""The run configuration: every option of ``fabbench run``, declared once.

A :class:`RunConfig` is what a user asks of one run: frozen, nested (the common settings, then
one section per workload), each field declared once by :func:`option` with its command-line flag,
its study key, its help text, its default (the dataclass default) and its own validation. From
these declarations come

* the ``fabbench run`` command's options (:func:`typer_parameters`, grouped by help panel),
* a study cell's keys (:data:`STUDY_KEYS`, :meth:`RunConfig.from_study`),
* the arguments a Slurm or Kubernetes job runs (:meth:`RunConfig.to_argv`), and
* the chart's argument list (fabbench.render.chart writes the fields to charts/fabbench/files/),

and ``RunConfig.from_argv(c.to_argv()) == c`` for every valid configuration.

Contract: constructing a configuration validates each field on its own (a ``UsageError`` naming
the flag). ``None`` means "not given: fabbench decides" (``primitive``, ``device``, ``ranks``,
...); what it decides, and the rules between fields that need those decisions, belong to
:class:`fabbench.plan.Plan`, built from a configuration before anything starts.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any

from fabbench import workload_names
from fabbench.comm.registry import ALL_DTYPES, ALL_OPS, HOROVOD_OVER, PRIMITIVES
from fabbench.errors import UsageError
from fabbench.fabrics.profile import GPUDIRECT, WIRES
from fabbench.networks.registry import MODELS
from fabbench.timing.engine import PROTOCOLS
from fabbench.units import parse_sizes

PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("cpu", "cuda")
PAIR_SCHEDULES = ("auto", "rounds", "serial")
MAX_LOCAL_RANKS = 512


# ---- the value kinds: how a field's value is written as, and read from, one argument ----

def number_text(value: float) -> str:
    """A float as the shortest text that reads back to it, in the notation Go's ``%v`` (Helm's
    ``toString``) writes: positional, or ``1e+06`` style from an exponent of 6 or below -4. The
    chart writes numbers this way, so Python and the chart write the same argument."""
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) + int(exponent) - 1
    lead = "-" if sign else ""
    if power < -4 or power >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{lead}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if int(exponent) >= 0:
        return lead + text + "0" * int(exponent)
    point = len(text) + int(exponent)
    return lead + (text[:point] if point > 0 else "0") + "." + "0" * max(0, -point) + \
        text[max(0, point):]


def _csv(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))


@dataclass(frozen=True)
class Kind:
    """How values of one type are read from an argument and written as one."""

    name: str  # the chart's name of it: text, int, float, switch, list
    read: Callable[[str, str], Any]  # (argument, flag) -> value; UsageError if it is none
    write: Callable[[Any], str]
    cli_type: Any  # what Typer parses the option as
    holds: Callable[[Any], bool]  # is a value of this kind
    what: str  # what a value of this kind is, in a message



def _read_int(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{flag} takes a whole number, not {text!r}") from None


def _read_float(text: str, flag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} takes a number, not {text!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{flag} takes a finite number, not {text!r}")
    return value


def _read_ints(text: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in _csv(text))
    except ValueError:
        raise UsageError(f"{flag} takes a comma list of whole numbers, not {text!r}") from None


def _is(*types: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, types) and (bool in types or not isinstance(v, bool))


def _tuple_of(item: type) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, tuple) and all(_is(item)(x) for x in v)


TEXT = Kind("text", lambda text, flag: text, str, str, _is(str), "text")
INT = Kind("int", _read_int, str, int, _is(int), "a whole number")
FLOAT = Kind("float", _read_float, number_text, float,
             lambda v: _is(int, float)(v) and math.isfinite(v), "a finite number")
SWITCH = Kind("switch", lambda text, flag: text, str, bool, _is(bool), "true or false")
NAMES = Kind("list", lambda text, flag: _csv(text), ",".join, str, _tuple_of(str),
             "a tuple of names")
COUNTS = Kind("list", _read_ints, lambda v: ",".join(map(str, v)), str, _tuple_of(int),
              "a tuple of whole numbers")


# ---- one field's declaration ----

@dataclass(frozen=True)
class Option:
    """The declaration of one field: everything every consumer derives from."""

    kind: Kind
    flag: str  # "--batch-size"
    help: str
    study: str  # the key (or matrix axis, see study.spec) a study sets it by
    short: str | None = None  # "-f"
    negative: str | None = None  # a switch's "off" flag (--no-ceiling)
    choices: tuple[str, ...] = ()
    refusal: str = "unknown {noun} {value!r} (known: {known})"  # for a value not in choices
    check: Callable[[Any], str | None] | None = None  # a message when the value is bad
    placed: bool = False  # set by whoever places the run (a study, a job), not carried by them
    show_default: bool = True
    metavar: str | None = None

    def validate(self, name: str, value: Any) -> None:
        """Raise ``UsageError`` when ``value`` is not one this field takes (None: not given)."""
        if value is None:
            return
        if not self.kind.holds(value):
            raise UsageError(f"{self.flag} takes {self.kind.what}, not {value!r}")
        values = value if isinstance(value, tuple) and self.choices else (value,)
        for v in values if self.choices else ():
            if v not in self.choices:
                raise UsageError(self.refusal.format(
                    noun=name.replace("_", " ").removesuffix(" s"), value=v, flag=self.flag,
                    known=", ".join(self.choices)))
        message = self.check(value) if self.check else None
        if message:
            raise UsageError(message)


def option(default: Any, kind: Kind, flag: str, help: str, *, study: str | None = None,
           **more: Any) -> Any:
    """A dataclass field carrying its :class:`Option` (the study key defaults to the flag's
    name with underscores)."""
    key = study or flag.removeprefix("--").replace("-", "_")
    return field(default=default, metadata={"option": Option(kind, flag, help, key, **more)})


@dataclass(frozen=True)
class Bounds:
    """A number field's range as its check: the message (``{v}``: the value) when a value is
    outside it. Declared as data, so the chart's schema states the same range."""

    message: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False  # the low end itself is outside

    def __call__(self, v: float) -> str | None:
        low = self.low is not None and (v <= self.low if self.low_open else v < self.low)
        return self.message.format(v=v) if low or (self.high is not None and v > self.high) \
            else None


def _between(low: float, high: float, what: str) -> Bounds:
    return Bounds(f"{what} must be between {low:g} and {high:g}, not {{v:g}}", low, high)


def _at_least(low: int, what: str) -> Bounds:
    return Bounds(f"{what} must be at least {low}, not {{v}}", low)


def _sizes(text: str) -> str | None:
    parse_sizes(text)  # a UsageError naming the bad part
    return None


def _out(path: str) -> str | None:
    """A file fabbench may write results to: new, empty, or one whose content starts as JSON
    Lines records do (fabbench's claim on it, which refuses a file that already holds results
    unless the run appends on purpose, comes when the run starts: a rank inside a job may see
    rank 0's first record already). Only read, never changed."""
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

@dataclass(frozen=True, kw_only=True)
class CollectivesConfig:
    """``--workload collectives``: a size sweep of the primitive's collective operations."""

    ops: tuple[str, ...] | None = option(
        None, NAMES, "--ops", "Comma list of allreduce, allgather, reduce_scatter, broadcast, "
        "alltoall, sendrecv. Default: all the primitive has.", choices=ALL_OPS,
        refusal="fabbench has no operation {value!r} (operations: {known})",
        check=lambda v: None if v else "no operations to run")
    sizes: str | None = option(
        None, TEXT, "--sizes", "MIN:MAX[:FACTOR] or a comma list, units K/M/G (1024). Default "
        "8:64M on CPU, 8:1G on GPU; 8,1M for pairs.", check=_sizes)
    dtypes: tuple[str, ...] = option(
        ("float32",), NAMES, "--dtypes", "Comma list: float32, float64, float16, bfloat16.",
        choices=ALL_DTYPES, refusal="fabbench does not support dtype {value!r} (dtypes: {known})",
        check=lambda v: None if v else "no dtypes to run")
    check: bool = option(False, SWITCH, "--check", "Verify every result; a wrong element "
                         "fails the run.", negative="--no-check")
    budget_s: float = option(0.1, FLOAT, "--budget", "Measured seconds per point (op, size, "
                             "dtype).", check=Bounds("--budget must be positive, not {v:g}", 0,
                                                     low_open=True))
    min_samples: int = option(5, INT, "--min-samples", "Samples per point, at least.",
                              check=_at_least(1, "--min-samples"))
    max_samples: int = option(200, INT, "--max-samples", "Samples per point, at most.",
                              check=_at_least(1, "--max-samples"))
    timing: str = option(
        "batch", TEXT, "--timing", "batch: a sample times back-to-back operations (as "
        "nccl-tests); osu: OSU's counts and way, a collective timed alone with a barrier after "
        "it (osu_allreduce), sendrecv and pairs back to back with no barrier among them "
        "(osu_bibw -W 1). Compare a figure with another tool's under that tool's protocol.",
        choices=PROTOCOLS, refusal="{flag} takes {known}, not {value!r}")

    def __post_init__(self) -> None:
        _validate(self)
        if self.max_samples < self.min_samples:
            raise UsageError(f"--max-samples {self.max_samples} is below --min-samples "
                             f"{self.min_samples}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """``--workload train``: data-parallel training of a synthetic-data model."""

    model: str = option("resnet50", TEXT, "--model", "A model of `fabbench models`.",
                        choices=tuple(MODELS))
    batch_size: int = option(32, INT, "--batch-size", "Samples per rank per step.",
                             check=_at_least(1, "batch size"))
    image_size: int | None = option(
        None, INT, "--image-size", "Image side in pixels (multiple of 32), or tokens per "
        "sequence for a transformer. Default: the model's (224; the context).",
        check=_at_least(1, "--image-size"))
    steps: int = option(20, INT, "--steps", "Timed steps.", check=_at_least(2, "steps"))
    warmup_steps: int = option(5, INT, "--warmup-steps", "Untimed steps first.",
                               check=_at_least(1, "warm-up steps"))
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
        _validate(self)
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


@dataclass(frozen=True, kw_only=True)
class HaloConfig:
    """``--workload halo``: a 3-D stencil's halo exchange."""

    cells_per_rank: int = option(64**3, INT, "--cells-per-rank", "Cells per rank (a "
                                 "cube).", check=_at_least(8, "cells per rank (2 x 2 x 2)"))
    halo_iters: int = option(50, INT, "--halo-iters", "Timed iterations.",
                             check=_at_least(1, "halo iterations"))

    def __post_init__(self) -> None:
        _validate(self)


@dataclass(frozen=True, kw_only=True)
class PairsConfig:
    """``--workload pairs``: node pairs in rounds, to find the slow node."""

    pair_schedule: str = option(
        "auto", TEXT, "--pair-schedule", "Rounds (each round's disjoint pairs at once, as "
        "on a real fleet), serial (one pair at a time, the others wait) or auto (serial on an "
        "emulated cluster, whose nodes share this host's CPUs; rounds otherwise).",
        choices=PAIR_SCHEDULES, refusal="{flag} takes {known}, not {value!r}")

    def __post_init__(self) -> None:
        _validate(self)


SECTIONS: Mapping[str, type] = {"collectives": CollectivesConfig, "train": TrainConfig,
                                "halo": HaloConfig, "pairs": PairsConfig}


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """One ``fabbench run``: the common settings, then one section per workload."""

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
        "collectives", TEXT, "--workload", "collectives, train, halo, pairs (node pairs in "
        "rounds: finds the slow node), or all (collectives then train).",
        choices=workload_names.NAMES, study="kind")
    ranks: int | None = option(
        None, INT, "--ranks", "Ranks to start (outside a job). Default: 2 local ranks; under "
        "`fabbench emulate`, nodes x ranks per node.", short="-n", show_default=False,
        placed=True, check=_between(1, MAX_LOCAL_RANKS, "ranks"))
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
        None, TEXT, "--iface", "Network interface for TCP traffic. Default: lo for local ranks, "
        "else the default route's.")
    rdma_device: str | None = option(
        None, TEXT, "--rdma-device", "RDMA device (e.g. mlx5_0). Default: the first active port.")
    ceiling: bool | None = option(
        None, SWITCH, "--ceiling", "Measure the wire's raw ceiling (iperf3 for ethernet) between "
        "two nodes first. Default: when the ranks span several hosts.", negative="--no-ceiling",
        show_default=False)
    ceiling_s: float = option(2.0, FLOAT, "--ceiling-seconds", "Seconds of each ceiling "
                              "measurement.", check=_between(0.5, 600, "ceiling seconds"))
    collectives: CollectivesConfig = field(default_factory=CollectivesConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    halo: HaloConfig = field(default_factory=HaloConfig)
    pairs: PairsConfig = field(default_factory=PairsConfig)

    def __post_init__(self) -> None:
        _validate(self)

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


def _validate(section: Any) -> None:
    for f in dataclasses.fields(section):
        if "option" in f.metadata:
            f.metadata["option"].validate(f.name, getattr(section, f.name))


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
