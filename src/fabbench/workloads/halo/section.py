"""The halo exchange's options: its section of the configuration (``RunConfig.halo``, the "Halo
workload" panel of `fabbench run --help`, a study's keys)."""

from __future__ import annotations

from dataclasses import dataclass

from fabbench.option_fields import INT, at_least, option, validate


@dataclass(frozen=True, kw_only=True)
class HaloConfig:
    """``--workload halo``: a 3-D stencil's halo exchange."""

    cells_per_rank: int = option(64**3, INT, "--cells-per-rank", "Cells per rank (a "
                                 "cube).", check=at_least(8, "cells per rank (2 x 2 x 2)"))
    halo_iters: int = option(50, INT, "--halo-iters", "Timed iterations.",
                             check=at_least(1, "halo iterations"))

    def __post_init__(self) -> None:
        validate(self)
