"""Floors files: human-edited TOML, one ``[[rule]]`` per judgement (docs/floors.md; its JSON
schema is docs/floors.schema.json).

A rule names what it judges (``workload``; optionally ``op``, ``size`` or ``sizes``, ``dtype``,
``primitive``, ``fabric``, ``transport`` class, ``nodes``, ``link`` rate) and how: a floor on
one ``metric`` (``at_least`` or ``at_most`` in a ``unit``; ``ceiling_fraction`` of the wire's
measured ceiling; ``nominal_fraction`` of the link's line rate; ``baseline_fraction`` of a
``baseline`` figure), or a transport requirement (``require_transport``, ``forbid_transport``:
transport classes). ``tolerance`` lowers a floor (raises a limit) by a fraction; ``repeats``
passes on the first of N tries that holds. Every rule says where its figure came from
(``source``). A bad file is a ``UsageError`` naming the file, the rule and the key: the CLI's
one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from fabbench.errors import UsageError
from fabbench.floors.points import CLASSES, FLOORS, METRICS, WORKLOAD_METRICS, WORKLOAD_OPS, Point
from fabbench.units import parse_size

FORMAT = "fabbench-floors/1"
FORMATS = (FORMAT,)
REFERENCE = Path(__file__).parent / "reference.toml"  # the shipped reference floors

# a unit a rule may write, as (its family, the factor to the family's base): bandwidth in
# GB/s, time in seconds, rate in samples/s
UNITS: Mapping[str, tuple[str, float]] = {
    "GB/s": ("bandwidth", 1.0), "MB/s": ("bandwidth", 1e-3), "Gbit/s": ("bandwidth", 0.125),
    "Gb/s": ("bandwidth", 0.125), "Mbit/s": ("bandwidth", 0.000125),
    "s": ("time", 1.0), "ms": ("time", 1e-3), "µs": ("time", 1e-6), "us": ("time", 1e-6),
    "ns": ("time", 1e-9), "samples/s": ("rate", 1.0),
}
# each metric's unit (points.METRICS) in the same terms
_METRIC_UNIT = {metric: UNITS[unit] for metric, (unit, _) in METRICS.items()}

_SELECTORS = ("workload", "op", "size", "sizes", "dtype", "primitive", "fabric", "transport",
              "nodes", "ranks", "link")
_FLOORS = ("at_least", "at_most", "ceiling_fraction", "nominal_fraction", "baseline_fraction")
_KEYS = {"id", "source", "description", *_SELECTORS, "metric", *_FLOORS, "unit", "baseline",
         "baseline_runs", "baseline_min", "baseline_max", "reference", "require_transport",
         "forbid_transport", "tolerance", "repeats", "per_node"}
_TOP = {"format", "name", "description", "rule", "baseline"}


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One rule of a floors file, checked."""

    id: str
    source: str
    workload: str
    description: str = ""
    op: str | None = None
    sizes: tuple[int, int] | None = None  # inclusive range; one size: (n, n)
    dtype: str | None = None
    primitive: str | None = None
    fabric: str | None = None
    transport: tuple[str, ...] | None = None  # the transport classes it selects
    nodes: int | None = None
    ranks: int | None = None
    link: float | None = None  # the link's line rate in Gbit/s (within 10 %)
    metric: str | None = None
    kind: str | None = None  # at_least, at_most, ceiling_fraction, nominal_fraction, baseline
    value: float | None = None  # the floor (at_least/at_most, in the metric's unit) or fraction
    unit: str | None = None  # as the file wrote it
    baseline: float | None = None  # in the metric's unit
    baseline_runs: int | None = None
    reference: float | None = None  # the figure the source reports (the metric's unit)
    require_transport: tuple[str, ...] = ()
    forbid_transport: tuple[str, ...] = ()
    tolerance: float = 0.0
    repeats: int = 1
    per_node: bool = False

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.metric][1] if self.metric else True

    @property
    def judges_transport(self) -> bool:
        return bool(self.require_transport or self.forbid_transport)

    def matches(self, p: Point) -> bool:
        """Does the rule select this point (its selectors only; a floor on a metric the
        point lacks still selects it, and judges it "not judged")?"""
        if p.workload != self.workload:
            return False
        if self.op is not None and p.op != self.op:
            return False
        if self.sizes is not None and (p.bytes is None or
                                       not self.sizes[0] <= p.bytes <= self.sizes[1]):
            return False
        for name in ("dtype", "primitive", "nodes", "ranks"):
            want = getattr(self, name)
            if want is not None and getattr(p, name) != want:
                return False
        if self.fabric is not None and p.fabric is not None and \
                Path(p.fabric).stem != self.fabric:
            return False
        if self.transport is not None and p.transport_class not in self.transport:
            return False
        if self.link is not None and (p.nominal_gbit_s is None or
                                      abs(p.nominal_gbit_s / self.link - 1) > 0.1):
            return False
        return not (self.per_node and p.node is None)

    def floor(self, p: Point) -> tuple[float | None, str]:
        """The floor (or limit) for this point in the metric's unit, before tolerance, and how
        it was made; None with the reason when the point lacks what it is made of."""
        assert self.metric is not None and self.value is not None
        unit = METRICS[self.metric][0]
        if self.kind in ("at_least", "at_most"):
            return self.value, f"{self.kind.replace('_', ' ')} {_num(self.value)} {unit}"
        if self.kind == "baseline":
            assert self.baseline is not None
            figure = self.baseline * self.value if self.higher_is_better else \
                self.baseline / self.value
            return figure, f"{self.value:.0%} of the baseline {_num(self.baseline)} {unit}"
        rate = p.ceiling_gbit_s if self.kind == "ceiling_fraction" else p.nominal_gbit_s
        what = "measured ceiling" if self.kind == "ceiling_fraction" else "link's line rate"
        if rate is None:
            return None, f"the run has no {what}"
        return self.value * rate / 8, f"{self.value:.0%} of the {what} {_num(rate)} Gbit/s"


@dataclass(frozen=True)
class Floors:
    """A floors file: its name, its rules, and the provenance of the baseline it was made
    from (``fabbench baseline``; empty for a hand-written file)."""

    path: Path
    name: str
    description: str
    rules: tuple[Rule, ...]
    baseline: Mapping[str, Any] = field(default_factory=dict)


def _num(v: float) -> str:
    return f"{v:.4g}"


def load(path: str | Path) -> Floors:
    """Read and check a floors file (UsageError, one line naming the file, rule and key)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read floors file {path}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a TOML file: {exc}") from None
    return parse(data, path)


def parse(data: Mapping[str, Any], path: Path) -> Floors:
    """A floors file's content, checked."""
    where = str(path)
    unknown = set(data) - _TOP
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: "
                         f"{', '.join(sorted(_TOP))})")
    if data.get("format") not in FORMATS:
        raise UsageError(f"{where}: format = {data.get('format')!r} is not one this fabbench "
                         f"reads ({', '.join(FORMATS)})")
    rules = data.get("rule")
    if not isinstance(rules, list) or not rules:
        raise UsageError(f"{where}: no [[rule]] tables")
    parsed: list[Rule] = []
    for i, raw in enumerate(rules, 1):
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: rule {i} is not a table")
        rule = _rule(raw, f"{where}: rule {raw.get('id', i)!s}")
        if any(r.id == rule.id for r in parsed):
            raise UsageError(f"{where}: rule id {rule.id!r} is used twice")
        parsed.append(rule)
    baseline = data.get("baseline", {})
    if not isinstance(baseline, dict):
        raise UsageError(f"{where}: [baseline] must be a table")
    return Floors(path, str(data.get("name") or path.stem), str(data.get("description", "")),
                  tuple(parsed), baseline)


def _text(raw: Mapping[str, Any], key: str, where: str, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise UsageError(f"{where}: {key} is required")
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: {key} must be a non-empty string, not {value!r}")
    return value


def _number(raw: Mapping[str, Any], key: str, where: str, *, low: float = 0.0,
            high: float | None = None, open_low: bool = True) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where}: {key} must be a number, not {value!r}")
    if value < low or (open_low and value == low) or (high is not None and value > high):
        bound = f"above {low:g}" if open_low else f"at least {low:g}"
        raise UsageError(f"{where}: {key} = {value!r} must be {bound}"
                         + (f" and at most {high:g}" if high is not None else ""))
    return float(value)


def _classes(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise UsageError(f"{where}: {key} takes a transport class or a list of them")
    for v in values:
        if v not in CLASSES:
            raise UsageError(f"{where}: {key}: unknown transport class {v!r} (classes: "
                             f"{', '.join(CLASSES)})")
    return tuple(values)


def _rule(raw: Mapping[str, Any], where: str) -> Rule:
    unknown = set(raw) - _KEYS
    if unknown:
        raise UsageError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    rid = _text(raw, "id", where, required=True)
    source = _text(raw, "source", where, required=True)
    workload = _text(raw, "workload", where, required=True)
    assert rid is not None and source is not None and workload is not None
    if workload not in WORKLOAD_METRICS:
        raise UsageError(f"{where}: unknown workload {workload!r} (floors judge: "
                         f"{', '.join(WORKLOAD_METRICS)})")
    op = _text(raw, "op", where)
    # a workload with no ops whose rules name one (train: the network) takes any name
    named = bool(WORKLOAD_OPS[workload]) or not FLOORS[workload].rule_op
    if op is not None and named and op not in WORKLOAD_OPS[workload]:
        known = ", ".join(WORKLOAD_OPS[workload]) or "none"
        raise UsageError(f"{where}: unknown op {op!r} for a {workload} rule (ops: {known})")
    sizes = _sizes(raw, where)
    if sizes is not None and not FLOORS[workload].sized:
        raise UsageError(f"{where}: a {workload} rule matches no size; leave size out")
    transport = _classes(raw, "transport", where) if "transport" in raw else None
    if transport == ():
        raise UsageError(f"{where}: transport = [] selects nothing")
    nodes, ranks = _count(raw, "nodes", where), _count(raw, "ranks", where)
    require = _classes(raw, "require_transport", where)
    forbid = _classes(raw, "forbid_transport", where)
    if set(require) & set(forbid):
        raise UsageError(f"{where}: a transport class both required and forbidden matches "
                         "nothing")
    if transport is not None and forbid and set(transport) <= set(forbid):
        raise UsageError(f"{where}: it selects only transport classes it forbids: it can "
                         "never pass")
    kinds = [k for k in _FLOORS if k in raw]
    metric = _text(raw, "metric", where)
    if len(kinds) > 1:
        raise UsageError(f"{where}: one floor per rule: {' and '.join(kinds)} both given")
    if not kinds and not (require or forbid):
        raise UsageError(f"{where}: no floor ({', '.join(_FLOORS)}) and no transport "
                         "requirement: the rule judges nothing")
    per_node = raw.get("per_node", False)
    if not isinstance(per_node, bool):
        raise UsageError(f"{where}: per_node must be true or false")
    if per_node and not FLOORS[workload].per_node:
        each = [n for n, f in FLOORS.items() if f.per_node]
        quoted = " or ".join(f'"{n}"' for n in each)
        raise UsageError(f"{where}: per_node judges each node's {' or '.join(each)}: a "
                         f"{workload} rule has no per-node figure (use workload = {quoted})")
    common: dict[str, Any] = dict(
        id=rid, source=source, workload=workload, description=raw.get("description", ""),
        op=op, sizes=sizes, dtype=_text(raw, "dtype", where),
        primitive=_text(raw, "primitive", where), fabric=_text(raw, "fabric", where),
        transport=transport, nodes=nodes, ranks=ranks, link=_number(raw, "link", where),
        require_transport=require, forbid_transport=forbid,
        tolerance=_number(raw, "tolerance", where, high=0.9, open_low=False) or 0.0,
        repeats=_repeats(raw, where), per_node=per_node,
        reference=_number(raw, "reference", where))
    if not kinds:
        if metric is not None or "unit" in raw:
            raise UsageError(f"{where}: metric and unit belong to a floor; a transport rule "
                             "takes neither")
        return Rule(**common)
    kind = kinds[0]
    if metric is None:
        raise UsageError(f"{where}: {kind} needs a metric "
                         f"({', '.join(WORKLOAD_METRICS[workload])})")
    if metric not in WORKLOAD_METRICS[workload]:
        raise UsageError(f"{where}: unknown metric {metric!r} for a {workload} rule (metrics: "
                         f"{', '.join(WORKLOAD_METRICS[workload])})")
    higher = METRICS[metric][1]
    if kind in ("at_least", "at_most") and (kind == "at_least") != higher:
        raise UsageError(f"{where}: {metric} is {'higher' if higher else 'lower'} is better: "
                         f"use {'at_least' if higher else 'at_most'}, not {kind}")
    if kind in ("ceiling_fraction", "nominal_fraction") and METRICS[metric][0] != "GB/s":
        raise UsageError(f"{where}: {kind} compares a bandwidth with the wire; {metric} is "
                         f"in {METRICS[metric][0]}")
    fraction = kind.endswith("_fraction")
    value = _number(raw, kind, where, high=1.0 if kind != "baseline_fraction" else 1.0) \
        if fraction else _number(raw, kind, where)
    assert value is not None
    unit = _text(raw, "unit", where)
    baseline = None
    if kind in ("at_least", "at_most") or kind == "baseline_fraction":
        if unit is None:
            raise UsageError(f"{where}: {kind} needs a unit (for {metric}: "
                             f"{_units_of(metric)})")
        value = _in_metric_unit(value, unit, metric, where) if not fraction else value
    elif unit is not None:
        raise UsageError(f"{where}: {kind} is a fraction: it takes no unit")
    if kind == "baseline_fraction":
        raw_baseline = _number(raw, "baseline", where)
        if raw_baseline is None:
            raise UsageError(f"{where}: baseline_fraction needs the baseline figure "
                             "(baseline = ...)")
        assert unit is not None
        baseline = _in_metric_unit(raw_baseline, unit, metric, where)
    elif "baseline" in raw:
        raise UsageError(f"{where}: baseline belongs to baseline_fraction")
    reference = common.pop("reference")
    if reference is not None and unit is not None:
        reference = _in_metric_unit(reference, unit, metric, where)
    runs = raw.get("baseline_runs")
    return Rule(**common, metric=metric, kind="baseline" if kind == "baseline_fraction" else kind,
                value=value, unit=unit, baseline=baseline, reference=reference,
                baseline_runs=runs if isinstance(runs, int) else None)


def _units_of(metric: str) -> str:
    family = _METRIC_UNIT[metric][0]
    return ", ".join(u for u, (f, _) in UNITS.items() if f == family)


def _in_metric_unit(value: float, unit: str, metric: str, where: str) -> float:
    if unit not in UNITS:
        raise UsageError(f"{where}: unknown unit {unit!r} (units: {', '.join(UNITS)})")
    family, factor = UNITS[unit]
    want, base = _METRIC_UNIT[metric]
    if family != want:
        raise UsageError(f"{where}: {metric} is measured in {METRICS[metric][0]}: unit "
                         f"{unit!r} is not one of {_units_of(metric)}")
    return value * factor / base


def _sizes(raw: Mapping[str, Any], where: str) -> tuple[int, int] | None:
    if "size" in raw and "sizes" in raw:
        raise UsageError(f"{where}: size and sizes both given")
    text = raw.get("size", raw.get("sizes"))
    if text is None:
        return None
    key = "size" if "size" in raw else "sizes"
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str):
        raise UsageError(f"{where}: {key} must be a size (\"64M\") or a range (\"1M:64M\")")
    try:
        if key == "size":
            n = parse_size(text)
            return (n, n)
        low, sep, high = text.partition(":")
        if not sep:
            raise UsageError(f"{where}: sizes takes a range MIN:MAX, not {text!r}")
        lo, hi = parse_size(low), parse_size(high)
    except UsageError as exc:
        raise UsageError(f"{where}: {key}: {exc}") from None
    if lo > hi:
        raise UsageError(f"{where}: sizes {text!r} is empty (its MIN is above its MAX): the "
                         "rule matches nothing")
    return (lo, hi)


def _count(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    value = raw.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or
                              value < 1):
        raise UsageError(f"{where}: {key} must be a whole number of at least 1, not {value!r}")
    return value


def _repeats(raw: Mapping[str, Any], where: str) -> int:
    value = raw.get("repeats", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: repeats must be a whole number of at least 1, not {value!r}")
    return value
