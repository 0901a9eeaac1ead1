"""A Plan: every option of a run, validated once; everything downstream trusts it.

The launcher hands the plan to each rank as JSON (FABBENCH_PLAN), so every rank runs the same one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from fabbench.comm.registry import DTYPES, HOROVOD_OVER, OPS, PRIMITIVES
from fabbench.errors import UsageError
from fabbench.fabrics.profile import WIRES
from fabbench.timing.engine import TimingPolicy

WORKLOADS = ("collectives",)
DEVICES = ("cpu", "cuda")
DEFAULT_SIZES = {"cpu": "8:64M", "cuda": "8:1G"}
MAX_LOCAL_RANKS = 512


def gpus_visible() -> bool:
    """NVIDIA GPUs present and not hidden (checked without importing torch)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return any(re.fullmatch(r"nvidia\d+", p.name) for p in Path("/dev").glob("nvidia*"))


@dataclass(frozen=True, kw_only=True)
class Plan:
    fabric: str
    primitive: str
    horovod_over: str | None = None
    wire: str = "native"
    ranks: int = 2
    workload: str = "collectives"
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...] = ("float32",)
    check: bool = False
    device: str = "cpu"
    timeout_s: float = 30.0
    policy: TimingPolicy = TimingPolicy()
    out: str
    iface: str | None = None
    rdma_device: str | None = None
    run_id: str
    argv: tuple[str, ...] = ()
    picked: tuple[str, ...] = ()  # what fabbench chose for the user ("primitive=mpi (no GPU)")

    def __post_init__(self) -> None:
        if self.primitive not in PRIMITIVES:
            raise UsageError(f"unknown primitive {self.primitive!r} "
                             f"(known: {', '.join(PRIMITIVES)})")
        if self.horovod_over is not None and (self.primitive != "horovod"
                                              or self.horovod_over not in HOROVOD_OVER):
            raise UsageError(f"--horovod-over takes {' or '.join(HOROVOD_OVER)} and only with "
                             "--primitive horovod")
        if self.wire not in WIRES:
            raise UsageError(f"unknown wire {self.wire!r} (known: {', '.join(WIRES)})")
        if not 1 <= self.ranks <= MAX_LOCAL_RANKS:
            raise UsageError(f"ranks must be between 1 and {MAX_LOCAL_RANKS}, not {self.ranks}")
        if self.workload not in WORKLOADS:
            raise UsageError(f"unknown workload {self.workload!r} (known: {', '.join(WORKLOADS)})")
        if self.device not in DEVICES:
            raise UsageError(f"unknown device {self.device!r} (known: {', '.join(DEVICES)})")
        if self.primitive == "nccl" and self.device != "cuda":
            raise UsageError("nccl moves GPU buffers only: it needs --device cuda and a GPU")
        for op in self.ops:
            if op not in OPS[self.primitive]:
                raise UsageError(f"primitive {self.primitive!r} has no operation {op!r} "
                                 f"(it has: {', '.join(OPS[self.primitive])})")
        if not self.ops:
            raise UsageError("no operations to run")
        for dtype in self.dtypes:
            if dtype not in DTYPES[self.primitive]:
                raise UsageError(f"primitive {self.primitive!r} does not support dtype {dtype!r} "
                                 f"(it supports: {', '.join(DTYPES[self.primitive])})")
        if not self.sizes:
            raise UsageError("no sizes to run")
        if not 0 < self.timeout_s <= 86400:
            raise UsageError(f"timeout must be between 0 and 86400 seconds, not {self.timeout_s}")

    @property
    def backend(self) -> str:
        """The profile section (and wire library) the primitive uses: Horovod uses its
        controller's."""
        return (self.horovod_over or "mpi") if self.primitive == "horovod" else self.primitive

    @property
    def launcher(self) -> str:
        """How local ranks are started: mpirun for MPI-based primitives, a spawn otherwise."""
        if self.backend == "mpi":
            return "mpirun"
        if self.primitive == "horovod":
            return "horovodrun"
        return "spawn"

    def op_timeout(self, nbytes: int) -> float:
        """The deadline of one operation: the base timeout plus 1 s per 100 MB (a slow link)."""
        return self.timeout_s + nbytes / 1e8

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        data["policy"] = TimingPolicy(**data["policy"])
        for key in ("ops", "sizes", "dtypes", "argv", "picked"):
            data[key] = tuple(data[key])
        return cls(**data)
