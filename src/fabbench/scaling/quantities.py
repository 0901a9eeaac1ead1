"""Bandwidths and latencies as users write them: "25Gbit", "100G", "12.5GB/s", "5us".

Network units are decimal (G = 1e9). A lower-case ``b`` or ``bit`` is bits and a bare prefix
("100G") means bits per second, as link speeds are quoted; an upper-case ``B`` is bytes.
"""

from __future__ import annotations

import re

from fabbench.errors import UsageError

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BANDWIDTH = re.compile(
    r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKmMgGtT]?)"
    r"(bit/s|bits/s|bit|bits|bps|b/s|b|B/s|Bps|B|)\s*$")
_DURATION = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(ns|us|µs|ms|s|)\s*$")
# what a forecast takes (a link's rate, a message's latency): beyond these its arithmetic
# overflows or underflows to infinities and zeros that it would print as figures
MIN_BYTES_S, MAX_BYTES_S = 1e3 / 8, 1e15 / 8
MAX_LATENCY_S = 1.0
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "": 1e-6}


def parse_bandwidth(text: str) -> float:
    """Bytes per second from "25Gbit", "25Gb/s", "100G", "12.5GB/s"; UsageError otherwise."""
    m = _BANDWIDTH.match(text)
    if not m:
        raise UsageError(f"bad bandwidth {text!r}: expected a number and a unit, e.g. 25Gbit, "
                         "100G (bits/s) or 12.5GB/s (bytes/s)")
    value = float(m.group(1)) * _PREFIX[m.group(2).upper()]
    per_byte = m.group(3).startswith("B")
    bytes_per_s = value if per_byte else value / 8
    if not MIN_BYTES_S <= bytes_per_s <= MAX_BYTES_S:
        raise UsageError(f"bad bandwidth {text!r}: a link runs between 1 kbit/s and 1 Pbit/s")
    return bytes_per_s


def parse_duration(text: str) -> float:
    """Seconds from "5us", "1.5ms", "0"; a bare number is microseconds (as results are)."""
    m = _DURATION.match(text)
    if not m:
        raise UsageError(f"bad latency {text!r}: expected a number and a unit, e.g. 5us, "
                         "1.5ms (a bare number is µs)")
    seconds = float(m.group(1)) * _SECONDS[m.group(2)]
    if not seconds <= MAX_LATENCY_S:
        raise UsageError(f"bad latency {text!r}: at most {MAX_LATENCY_S:g} s")
    return seconds


def format_bandwidth(bytes_per_s: float) -> str:
    """Link-style: 3.125e9 -> "25 Gb/s"."""
    bits = bytes_per_s * 8
    for unit, scale in (("Tb/s", 1e12), ("Gb/s", 1e9), ("Mb/s", 1e6), ("kb/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:.4g} {unit}"
    return f"{bits:.4g} b/s"
