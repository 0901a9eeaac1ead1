"""How an option of ``fabbench run`` is declared: a dataclass field made by :func:`option`, carrying
its :class:`Option` (flag, study key, help, choices, check) and the :class:`Kind` of its value
(how it is read from one argument and written as one). The run configuration and every
workload's section are declared with these; the ``run`` command's options, a study's keys, a
job's argv and the chart's values are derived from them. A section is a frozen keyword-only
dataclass whose ``__post_init__`` calls :func:`validate`::

    @dataclass(frozen=True, kw_only=True)
    class ToyConfig:
        rounds: int = option(3, INT, "--toy-rounds", "Rounds to time.",
                             check=at_least(1, "--toy-rounds"))

        def __post_init__(self) -> None:
            validate(self)"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from fabbench.errors import UsageError

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


def between(low: float, high: float, what: str) -> Bounds:
    return Bounds(f"{what} must be between {low:g} and {high:g}, not {{v:g}}", low, high)


def at_least(low: int, what: str) -> Bounds:
    return Bounds(f"{what} must be at least {low}, not {{v}}", low)


def validate(section: Any) -> None:
    """Check every declared field of a section (or of the run configuration) by its own rule:
    a ``UsageError`` naming the flag."""
    for f in dataclasses.fields(section):
        if "option" in f.metadata:
            f.metadata["option"].validate(f.name, getattr(section, f.name))
