"""Sizes and size sweeps: "8", "1K", "64M", "1K:16M", "1K:16M:4" (factor), "8,64,1K".

Units are binary (K = 1024), as nccl-tests and the OSU benchmarks use them.
"""

from __future__ import annotations

import re

from fabbench.errors import UsageError

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")
MAX_BYTES = 1 << 40


def parse_size(text: str) -> int:
    """Parse one size ("64", "1K", "16MiB") into bytes; raise UsageError naming the bad text."""
    m = _SIZE.match(text)
    if not m or m.group(2).upper() not in _UNITS:
        raise UsageError(f"bad size {text!r}: expected a number with an optional unit K, M or G")
    value = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if value <= 0 or value > MAX_BYTES:
        raise UsageError(f"bad size {text!r}: must be between 1 byte and 1 TiB")
    return value


def parse_sizes(spec: str) -> tuple[int, ...]:
    """Parse a sweep: "MIN:MAX[:FACTOR]" (geometric, like nccl-tests -b/-e/-f) or a comma list."""
    spec = spec.strip()
    if not spec:
        raise UsageError("bad size sweep '': expected MIN:MAX[:FACTOR] or a comma list")
    if ":" in spec:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            raise UsageError(f"bad size sweep {spec!r}: expected MIN:MAX[:FACTOR]")
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        factor = 2
        if len(parts) == 3:
            if not parts[2].strip().isdigit() or int(parts[2]) < 2:
                raise UsageError(f"bad size sweep {spec!r}: FACTOR must be an integer >= 2")
            factor = int(parts[2])
        if lo > hi:
            raise UsageError(f"bad size sweep {spec!r}: MIN is larger than MAX")
        sizes = []
        size = lo
        while size <= hi:
            sizes.append(size)
            size *= factor
        return tuple(sizes)
    sizes = sorted({parse_size(p) for p in spec.split(",") if p.strip()} or {0})
    if sizes == [0]:
        raise UsageError(f"bad size sweep {spec!r}: no sizes")
    return tuple(sizes)


def format_size(nbytes: int) -> str:
    """Short binary form: 8 -> "8", 1024 -> "1K", 3 MiB -> "3M"."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)
