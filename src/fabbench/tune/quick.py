"""`fabbench tune`'s defaults: a tune that fits in minutes, and `--quick`, about 5 minutes on 2
emulated nodes at 1 Gbit/s (docs/tuning.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

# the sizes where a link's bandwidth shows, and allreduce (the op of data-parallel training);
# every other run option is `fabbench run`'s
DEFAULTS: Mapping[str, Any] = {"collectives.ops": ("allreduce",),
                               "collectives.sizes": "1M,4M,16M,64M",
                               "collectives.budget_s": 1.0}
REPEATS = 3
# --quick: a size where the algorithms differ most and one where the wire does, shorter
# samples, two rounds, and no narrowing of settings that did not hold (each costs a final stage)
QUICK: Mapping[str, Any] = {"sizes": "4M,64M", "budget": 0.3}
QUICK_REPEATS = 2


def quick(options: Mapping[str, object], repeats: int, given: Collection[str]
          ) -> tuple[dict[str, object], int]:
    """The run options and repeats of `--quick`: QUICK's and QUICK_REPEATS where the command
    line did not give them (``given``: the names it gave, even at their default values)."""
    merged = {**options, **{k: v for k, v in QUICK.items() if k not in given}}
    return merged, repeats if "repeats" in given else QUICK_REPEATS
