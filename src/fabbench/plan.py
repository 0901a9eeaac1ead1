"""A Plan: every option of a run, validated once; everything downstream trusts it.

The launcher hands the plan to each rank as JSON (FABBENCH_PLAN), so every rank runs the same one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from fabbench.comm import registry
from fabbench.comm.registry import DTYPES, HOROVOD_OVER, OPS, PRIMITIVES
from fabbench.errors import UsageError
from fabbench.fabrics.profile import GPUDIRECT, WIRES
from fabbench.networks.registry import MODELS
from fabbench.timing.engine import TimingPolicy
from fabbench.workloads import names as workload_names

WORKLOADS = workload_names.NAMES
PRECISIONS = ("fp32", "bf16", "fp16")
DEVICES = ("cpu", "cuda")
DEFAULT_SIZES = {"cpu": "8:64M", "cuda": "8:1G"}
PAIR_SCHEDULES = ("rounds", "serial")  # pairs: a round's pairs at once, or one pair at a time
PAIRS_SIZES = "8,1M"  # pairs: the latency at the smallest size, the bandwidth at the largest
MAX_LOCAL_RANKS = 512


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
    gpudirect: str = "auto"  # on/off: the profile's [primitive.X.gpudirect.on|off]; auto: none
    timeout_s: float = 30.0
    policy: TimingPolicy = TimingPolicy()
    out: str
    iface: str | None = None
    rdma_device: str | None = None
    run_id: str
    argv: tuple[str, ...] = ()
    picked: tuple[str, ...] = ()  # what fabbench chose for the user ("primitive=mpi (no GPU)")
    skip: tuple[str, ...] = ()  # points already measured ("op/dtype/bytes"), for --resume
    resumed: bool = False
    claimed: bool = False  # the launcher holds the claim on `out` (results/claim.py)
    # train (workloads/train/)
    model: str = "resnet50"
    batch_size: int = 32  # per rank
    image_size: int | None = None  # image side (pixels) or sequence length (tokens); None: model's
    steps: int = 20
    warmup_steps: int = 5
    bucket_mb: float = 25.0  # DDP bucket_cap_mb; also the bucket size of the mpi engine
    fusion_mb: float | None = None  # HOROVOD_FUSION_THRESHOLD in MiB; None: Horovod's default
    precision: str = "fp32"
    scaling: tuple[int, ...] = ()  # rank counts run one after another (runner.run)
    baseline_samples_per_s: float | None = None  # the 1-rank run's, for scaling efficiency
    # the wire's ceiling (ceiling/measure.py) before the workload: None = when the ranks span
    # more than one host
    ceiling: bool | None = None
    ceiling_s: float = 2.0
    # pairs (workloads/pairs.py): "rounds" (a round's disjoint pairs at once) or "serial"
    pair_schedule: str = "rounds"
    # halo (workloads/halo.py)
    cells_per_rank: int = 64**3
    halo_iters: int = 50

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
        if registry.get(self.primitive).gpu_only and self.device != "cuda":
            raise UsageError(f"{self.primitive} moves GPU buffers only: it needs --device cuda "
                             "and a GPU")
        if self.gpudirect not in GPUDIRECT:
            raise UsageError(f"--gpudirect takes {', '.join(GPUDIRECT)}, not {self.gpudirect!r}")
        if self.gpudirect != "auto" and self.device != "cuda":
            raise UsageError(f"--gpudirect {self.gpudirect} is about GPU buffers: it needs "
                             "--device cuda")
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
        if not 0.5 <= self.ceiling_s <= 600:
            raise UsageError(f"ceiling seconds must be between 0.5 and 600, not "
                             f"{self.ceiling_s}")
        if workload_names.runs(self.workload, "train"):
            self._check_train()
        if self.workload == "halo":
            self._check_halo()
        if self.pair_schedule not in PAIR_SCHEDULES:
            raise UsageError(f"--pair-schedule takes auto, {', '.join(PAIR_SCHEDULES)}, not "
                             f"{self.pair_schedule!r}")
        if workload_names.runs(self.workload, "pairs") and \
                not registry.get(self.primitive).point_to_point:
            *some, last = [n for n in registry.PRIMITIVES if registry.get(n).point_to_point]
            able = f"{', '.join(some)} or {last}" if some else last
            raise UsageError(f"--workload pairs needs point-to-point messages, which "
                             f"{self.primitive} does not have: use --primitive {able}")

    def _check_train(self) -> None:
        if self.model not in MODELS:
            raise UsageError(f"unknown model {self.model!r} (known: {', '.join(MODELS)})")
        if self.batch_size < 1:
            raise UsageError(f"batch size must be at least 1, not {self.batch_size}")
        spec = MODELS[self.model]
        spec.check_input(self.input_size)
        if spec.batchnorm and self.batch_size * (self.input_size // spec.input_multiple) ** 2 < 2:
            raise UsageError(f"{self.model} has batch norm: batch size {self.batch_size} at image "
                             f"size {self.input_size} leaves one value per channel; use a batch "
                             "of at least 2 or a larger image")
        if self.steps < 2 or self.warmup_steps < 1:
            raise UsageError(f"steps must be at least 2 and warm-up steps at least 1 (not "
                             f"{self.steps} and {self.warmup_steps})")
        if not self.bucket_mb > 0 or (self.fusion_mb is not None and not self.fusion_mb >= 0):
            raise UsageError("bucket size must be > 0 MiB and fusion threshold >= 0 MiB")
        if self.fusion_mb is not None and self.primitive != "horovod":
            raise UsageError("--fusion-mb is Horovod's fusion threshold: use it with "
                             "--primitive horovod (DDP and mpi take --bucket-mb)")
        if self.precision not in PRECISIONS:
            raise UsageError(f"unknown precision {self.precision!r} "
                             f"(known: {', '.join(PRECISIONS)})")
        if self.precision == "fp16" and self.device != "cuda":
            raise UsageError("fp16 mixed precision needs --device cuda (on CPU use bf16)")
        if any(not 1 <= n <= MAX_LOCAL_RANKS for n in self.scaling):
            raise UsageError(f"scaling rank counts must be between 1 and {MAX_LOCAL_RANKS}")

    def _check_halo(self) -> None:
        if self.cells_per_rank < 8:
            raise UsageError(f"cells per rank must be at least 8 (2 x 2 x 2), not "
                             f"{self.cells_per_rank}")
        if self.halo_iters < 1:
            raise UsageError(f"halo iterations must be at least 1, not {self.halo_iters}")

    @property
    def input_size(self) -> int:
        """The model's input: image side in pixels or sequence length in tokens."""
        return self.image_size or MODELS[self.model].default_input

    @property
    def backend(self) -> str:
        """The profile section (and wire library) the primitive uses: Horovod uses its
        controller's."""
        return registry.get(self.primitive).backend(self.horovod_over)

    @property
    def launcher(self) -> str:
        """How local ranks are started (comm.registry): mpirun, a spawn, or horovodrun."""
        return registry.get(self.primitive).launcher(self.horovod_over)

    def op_timeout(self, nbytes: int) -> float:
        """The deadline of one operation: the base timeout plus 1 s per 100 MB (a slow link)."""
        return self.timeout_s + nbytes / 1e8

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        # a plan written by an older fabbench may name a timing knob since removed (stable_rel)
        known = {f.name for f in dataclasses.fields(TimingPolicy)}
        data["policy"] = TimingPolicy(**{k: v for k, v in data["policy"].items() if k in known})
        for key in ("ops", "sizes", "dtypes", "argv", "picked", "scaling", "skip"):
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)
