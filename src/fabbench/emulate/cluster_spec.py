"""What an emulated cluster is made of: nodes and the shape of each node's link.

Rates are written as tc writes them (decimal: ``1gbit`` = 1e9 bit/s, ``250mbit``, ``100kbit``);
delays as ``50us``, ``1ms``; loss as ``0.1%``. A link is a node's cable to the switch; its shape
(rate, one-way delay, loss) applies to each direction, so a packet from node A to node B crosses
A's link and B's link: twice the delay, and the slower of the two rates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fabbench.errors import UsageError

MAX_NODES = 64
MAX_RANKS_PER_NODE = 64
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)\s*$", re.IGNORECASE)
_RATE_SCALE = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_DELAY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|ms|s)\s*$")
_DELAY_SCALE = {"us": 1.0, "ms": 1e3, "s": 1e6}
_LOSS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%?\s*$")
MIN_RATE, MAX_RATE = 10**4, 4 * 10**11  # 10 kbit/s .. 400 Gbit/s
MAX_DELAY_US = 10e6


def parse_rate(text: str) -> int:
    """bit/s from "1gbit", "250mbit", "100kbit"; UsageError otherwise."""
    m = _RATE.match(text)
    if not m:
        raise UsageError(f"bad link rate {text!r}: expected a number and a tc unit, e.g. 1gbit, "
                         "250mbit, 100kbit")
    rate = round(float(m.group(1)) * _RATE_SCALE[m.group(2).lower()])
    if not MIN_RATE <= rate <= MAX_RATE:
        raise UsageError(f"bad link rate {text!r}: must be between 10kbit and 400gbit")
    return rate


def parse_delay(text: str) -> float:
    """Microseconds from "50us", "1ms", "0" (0 alone needs no unit)."""
    if text.strip() == "0":
        return 0.0
    m = _DELAY.match(text)
    if not m:
        raise UsageError(f"bad delay {text!r}: expected a number and a unit, e.g. 50us, 1ms")
    delay = float(m.group(1)) * _DELAY_SCALE[m.group(2)]
    if delay > MAX_DELAY_US:
        raise UsageError(f"bad delay {text!r}: at most 10 s")
    return delay


def parse_loss(text: str) -> float:
    """Percent from "0.1%" or "0.1"."""
    m = _LOSS.match(text)
    if not m or not float(m.group(1)) < 100:
        raise UsageError(f"bad loss {text!r}: expected a percentage below 100, e.g. 0.1%")
    return float(m.group(1))


def format_rate(rate_bit_s: int) -> str:
    """tc's own form: 1000000000 -> "1gbit"."""
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if rate_bit_s % _RATE_SCALE[unit] == 0:
            return f"{rate_bit_s // _RATE_SCALE[unit]}{unit}"
    return f"{rate_bit_s}bit"


@dataclass(frozen=True, kw_only=True)
class Link:
    """One node's link to the switch, each direction shaped alike."""

    rate_bit_s: int
    delay_us: float = 0.0
    loss_pct: float = 0.0

    def __post_init__(self) -> None:
        if not MIN_RATE <= self.rate_bit_s <= MAX_RATE:
            raise UsageError(f"link rate {self.rate_bit_s} bit/s is outside 10kbit..400gbit")
        if not 0 <= self.delay_us <= MAX_DELAY_US:
            raise UsageError(f"link delay {self.delay_us} us is outside 0..10 s")
        if not 0 <= self.loss_pct < 100:
            raise UsageError(f"link loss {self.loss_pct} % is outside 0..100")


@dataclass(frozen=True, kw_only=True)
class Emulation:
    """N nodes, each with a link of the common shape unless overridden for that node."""

    nodes: int
    link: Link
    overrides: Mapping[int, Link] = field(default_factory=dict)
    ranks_per_node: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be between 1 and {MAX_NODES}, not {self.nodes}")
        if not 1 <= self.ranks_per_node <= MAX_RANKS_PER_NODE:
            raise UsageError(f"--ranks-per-node must be between 1 and {MAX_RANKS_PER_NODE}, "
                             f"not {self.ranks_per_node}")
        for node in self.overrides:
            if not 0 <= node < self.nodes:
                raise UsageError(f"node {node} does not exist (nodes are numbered 0 to "
                                 f"{self.nodes - 1})")
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    def link_of(self, node: int) -> Link:
        return self.overrides.get(node, self.link)


def _node_value(text: str, option: str) -> tuple[int, str]:
    node, sep, value = text.partition(":")
    if not sep or not node.strip().isdigit() or not value.strip():
        raise UsageError(f"bad {option} {text!r}: expected NODE:VALUE, e.g. 3:250mbit")
    return int(node), value


def make_emulation(*, nodes: int, link: str, delay: str = "0", loss: str = "0",
                   slow_nodes: tuple[str, ...] = (), lossy_nodes: tuple[str, ...] = (),
                   ranks_per_node: int = 1) -> Emulation:
    """The emulation the options describe: --slow-node N:RATE and --lossy-node N:LOSS change one
    node's link (the others keep --link/--delay/--loss)."""
    base = Link(rate_bit_s=parse_rate(link), delay_us=parse_delay(delay), loss_pct=parse_loss(loss))
    over: dict[int, Link] = {}
    for text in slow_nodes:
        node, value = _node_value(text, "--slow-node")
        prev = over.get(node, base)
        over[node] = Link(rate_bit_s=parse_rate(value), delay_us=prev.delay_us,
                          loss_pct=prev.loss_pct)
    for text in lossy_nodes:
        node, value = _node_value(text, "--lossy-node")
        prev = over.get(node, base)
        over[node] = Link(rate_bit_s=prev.rate_bit_s, delay_us=prev.delay_us,
                          loss_pct=parse_loss(value))
    return Emulation(nodes=nodes, link=base, overrides=over, ranks_per_node=ranks_per_node)
