"""Time one operation with fabbench and with the bare reference loops, alternating, and judge.

A reference loop is started by fabbench's own launcher (launch.launchers.launch_spec with the loop
in place of the rank module): the same mpirun line and MCA parameters, the same rendezvous, the same
emulated nodes when this runs under `fabbench emulate`. fabbench is run as a user runs it, a
`fabbench run` subprocess writing a results file.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fabbench.comm import batch_loop
from fabbench.comm.batch_loop import build_with_mpicc
from fabbench.errors import RunError, UsageError
from fabbench.procs import stop_groups
from fabbench.timing.engine import TimingPolicy

if TYPE_CHECKING:
    from fabbench.plan import Plan
    from fabbench.workloads.collectives.record import Collective

LOOPS = Path(__file__).resolve().parent / "loops"
PY_LOOP = LOOPS / "py_loop.py"
C_LOOP = LOOPS / "mpi_loop.c"

# The band (docs/methods.md, "Fidelity"): at and above BAND_FROM_BYTES the busbw ratio
# fabbench / reference must lie within 1 +- BAND_REL; at the smallest sizes (<= 64 B) fabbench
# may add at most LATENCY_ADDED_US (MPI, whose latency is a few microseconds) or LATENCY_REL of
# the reference's time (Gloo and Horovod, whose latency is tens to hundreds of microseconds).
BAND_REL = 0.03
BAND_FROM_BYTES = 256 << 10
LATENCY_MAX_BYTES = 64
LATENCY_ADDED_US = 2.0
LATENCY_REL = 0.05

OPS = ("allreduce", "sendrecv")


@dataclass(frozen=True, kw_only=True)
class FidelityPath:
    """One way the bytes move: a fabric profile (and wire) and a primitive."""

    label: str
    fabric: str
    primitive: str
    horovod_over: str | None = None
    wire: str = "native"
    device: str = "cpu"
    references: tuple[str, ...]  # the first one decides the verdict

    def run_args(self) -> list[str]:
        args = ["--fabric", self.fabric, "--primitive", self.primitive, "--wire", self.wire,
                "--device", self.device]
        return args + (["--horovod-over", self.horovod_over] if self.horovod_over else [])


def path_for(fabric: str, primitive: str, *, wire: str = "native", device: str = "cpu",
             horovod_over: str | None = None, c_loop: bool = True) -> FidelityPath:
    """The path a site runs (doctor --fidelity): its references by primitive."""
    if device == "cuda" and primitive in ("mpi", "horovod"):
        raise UsageError(f"the fidelity check has no reference loop for {primitive} on GPU "
                         "buffers yet (its loops are host-memory MPI): check with --device cpu")
    refs = {"mpi": ("c", "mpi4py") if c_loop else ("mpi4py",), "gloo": ("torch",),
            "nccl": ("torch",), "horovod": ("horovod",)}[primitive]
    label = f"{primitive}{'-' + horovod_over if horovod_over else ''}-{fabric}" + (
        f"-{wire}" if wire != "native" else "")
    return FidelityPath(label=label, fabric=fabric, primitive=primitive, wire=wire,
                        device=device, horovod_over=horovod_over, references=refs)


# Every path this host can run without special hardware (the infiniband and omnipath profiles
# over their `tcp` wire drive UCX and libfabric through their TCP transports).
PATHS: dict[str, FidelityPath] = {p.label: p for p in (
    FidelityPath(label="mpi-tcp", fabric="ethernet", primitive="mpi", references=("c", "mpi4py")),
    FidelityPath(label="mpi-shm", fabric="shm", primitive="mpi", references=("c", "mpi4py")),
    FidelityPath(label="mpi-ucx", fabric="infiniband", wire="tcp", primitive="mpi",
                 references=("c", "mpi4py")),
    FidelityPath(label="mpi-ofi", fabric="omnipath", wire="tcp", primitive="mpi",
                 references=("c", "mpi4py")),
    FidelityPath(label="gloo-tcp", fabric="ethernet", primitive="gloo", references=("torch",)),
    FidelityPath(label="horovod-mpi", fabric="ethernet", primitive="horovod",
                 horovod_over="mpi", references=("horovod",)),
    FidelityPath(label="horovod-gloo", fabric="ethernet", primitive="horovod",
                 horovod_over="gloo", references=("horovod",)),
)}
REFERENCES = {"c": "C MPI loop", "c-osu": "C MPI loop with OSU's protocol",
              "mpi4py": "mpi4py loop", "torch": "torch.distributed loop",
              "horovod": "Horovod allreduce_ loop"}


def paths(names: str) -> list[FidelityPath]:
    """'all' or a comma list of path labels."""
    wanted = list(PATHS) if names == "all" else [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in PATHS]
    if unknown or not wanted:
        raise UsageError(f"unknown fidelity path {(unknown or [names])[0]!r} "
                         f"(known: {', '.join(PATHS)}, all)")
    return [PATHS[n] for n in wanted]


def cache_dir() -> Path:
    return batch_loop.cache_dir() / "fidelity"


def build_c_loop() -> Path:
    """mpi_loop.c compiled with this host's mpicc, cached by the source and mpicc's identity."""
    try:
        return build_with_mpicc(C_LOOP, cache_dir(), shared=False, what="the C reference loop")
    except UsageError as exc:
        raise UsageError(f"{exc}; leave the reference 'c' out to compare with the mpi4py loop "
                         "only") from None


def reference_program(reference: str, op: str) -> list[str]:
    if reference == "c":
        return [str(build_c_loop()), op]
    if reference == "c-osu":  # the C loop with OSU's protocol (mpi_loop.c, --osu)
        return [str(build_c_loop()), op, "--osu"]
    return [sys.executable, str(PY_LOOP), reference, op]


def plan_for(path: FidelityPath, ranks: int | None, sizes: Iterable[int], op: str) -> Plan:
    from fabbench.config import RunConfig
    from fabbench.runner import make_plan
    from fabbench.workloads.collectives import CollectivesConfig

    plan, _ = make_plan(RunConfig(fabric=path.fabric, primitive=path.primitive,
                                  horovod_over=path.horovod_over, wire=path.wire, ranks=ranks,
                                  device=path.device, collectives=CollectivesConfig(
                                      ops=(op,), sizes=",".join(map(str, sizes)))),
                        local_launch=True)
    return plan


def parse_loop_output(text: str) -> dict[int, float]:
    """"bytes p50_us samples batch" lines (anything else a launcher prints is skipped)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(?:\[\d+\]<stdout>:)?(\d+) (\d+(?:\.\d+)?) \d+ \d+$", line.strip())
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def run_commands(commands: list[tuple[list[str], dict[str, str]]], timeout_s: float,
                 what: str) -> list[str]:
    """Run every (argv, environment) at once, each in its own session, under one deadline;
    their stdouts. Every group is stopped when the deadline passes or this is interrupted; the
    first that failed is named with the end of its output."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) for argv, env in commands]
    end = time.monotonic() + timeout_s
    try:
        outs = [p.communicate(timeout=max(0.0, end - time.monotonic())) for p in procs]
    except subprocess.TimeoutExpired:
        raise RunError(f"{what} passed its limit of {timeout_s:.0f} s; stopped") from None
    finally:
        stop_groups(procs, signal.SIGTERM, 3.0, 3.0)
    for p, (out, err) in zip(procs, outs, strict=True):
        if p.returncode != 0:
            tail = "\n".join((err or out).strip().splitlines()[-8:])
            raise RunError(f"{what} failed (exit {p.returncode}):\n{tail}")
    return [out for out, _ in outs]


def run_reference(path: FidelityPath, reference: str, op: str, sizes: list[int],
                  ranks: int | None, timeout_s: float, batch_s: float = 0.005
                  ) -> dict[int, float]:
    """The reference loop's p50 per size; a batch of operations takes ``batch_s`` (fabbench's
    engine: its budget over its samples target)."""
    from fabbench.launch.launchers import launch_spec
    from fabbench.launch.settings import resolve

    plan = plan_for(path, ranks, sizes, op)
    spec = launch_spec(plan, resolve(plan), reference_program(reference, op) + list(
        map(str, sizes)), forward={"FABBENCH_LOOP_DEVICE": path.device,
                                   "FABBENCH_LOOP_BATCH_S": repr(batch_s)})
    commands = [(argv, {**os.environ, **env})
                for argv, env in zip(spec.commands, spec.env, strict=True)]
    # one command (mpirun, horovodrun) or one per rank (a spawn): rank 0 prints
    outs = run_commands(commands, timeout_s, f"the {REFERENCES[reference]} on {path.label}")
    return parse_loop_output(outs[0])


def run_fabbench(path: FidelityPath, op: str, sizes: list[int], ranks: int | None,
                 budget_s: float, timeout_s: float, timing: str = "batch") -> dict[int, float]:
    """`fabbench run` as a user runs it (``--timing``: the protocol); each point's figure from
    its results file: the p50 (batch), or OSU's own statistic (osu: osu_average_us)."""
    from fabbench.results.reader import read_results
    from fabbench.workloads.collectives.record import Collective

    with tempfile.TemporaryDirectory(prefix="fabbench-fidelity-") as tmp:
        out = Path(tmp, "r.jsonl")
        argv = [sys.executable, "-m", "fabbench", "run", *path.run_args(), "--ops", op,
                "--sizes", ",".join(map(str, sizes)), "--budget", str(budget_s),
                "--no-ceiling", "--timing", timing, "--out", str(out)]
        if ranks is not None:
            argv += ["--ranks", str(ranks)]
        run_commands([(argv, dict(os.environ))], timeout_s, f"fabbench on {path.label}")
        points = read_results(out).of_kind(Collective)
        if timing == "osu":
            return {r.bytes: osu_average_us(r) for r in points}
        return {r.bytes: r.time_us.p50 for r in points}


def osu_ladder(sizes: list[int]) -> list[int]:
    """The sizes OSU's binary runs for ``-m lo:hi``: lo doubled while it is at most hi, with
    the sizes asked that fall off that ladder added (OSU does not report those). Beside OSU's
    binary every side runs these, so that each has done the same operations before a size:
    under OSU's short warm-up a figure depends on them (docs/methods.md, "Fidelity")."""
    lo, hi = min(sizes), max(sizes)
    ladder = []
    size = lo
    while size <= hi:
        ladder.append(size)
        size *= 2
    return sorted({*ladder, *sizes})


def osu_average_us(rec: Collective) -> float:
    """OSU's "Avg Latency" of a point timed with --timing osu: each rank's mean time per
    operation over all its operations, averaged over the ranks (OSU reduces the ranks' means
    with a sum / size). The record keeps every rank's own time per sample (rank_samples_us),
    each the mean of a batch of equal size, so their mean is the rank's mean."""
    ranks = rec.rank_samples_us
    if not ranks or not all(ranks):
        raise RunError(f"the {rec.op} point of {rec.bytes} bytes has no per-rank samples")
    return statistics.fmean(statistics.fmean(own) for own in ranks)


@dataclass(frozen=True)
class FidelityPoint:
    """fabbench against one reference at one size. ``ratios`` are the rounds' own ratios
    (reference time / fabbench time, each round's two runs side by side); the verdict takes
    their median, so that a drift of the machine between rounds cancels instead of landing on
    one side. ``ref_us`` and ``fabbench_us`` are each side's median over the rounds."""

    path: str
    op: str
    bytes: int
    reference: str
    ref_us: float
    fabbench_us: float
    ratios: tuple[float, ...] = ()

    @property
    def ratio(self) -> float:
        """busbw fabbench / reference (= time reference / fabbench): > 1 fabbench is faster."""
        return statistics.median(self.ratios) if self.ratios else self.ref_us / self.fabbench_us

    @property
    def spread(self) -> tuple[float, float]:
        """The lowest and highest round's ratio."""
        return (min(self.ratios), max(self.ratios)) if self.ratios else (self.ratio, self.ratio)

    @property
    def added_us(self) -> float:
        return self.fabbench_us - self.ref_us

    def verdict(self, primitive: str) -> tuple[bool | None, str]:
        """(within the band, the goal as text); None where no goal applies (mid sizes)."""
        if self.bytes >= BAND_FROM_BYTES:
            return abs(self.ratio - 1) <= BAND_REL, f"ratio 1+-{BAND_REL:g}"
        if self.bytes <= LATENCY_MAX_BYTES:
            if primitive == "mpi":
                return abs(self.added_us) <= LATENCY_ADDED_US, f"+-{LATENCY_ADDED_US:g} us"
            return abs(self.ratio - 1) <= LATENCY_REL, f"ratio 1+-{LATENCY_REL:g}"
        return None, "-"


AGAIN = "again"  # the first reference run a second time in each round: the noise floor (A/A)


def compare(path: FidelityPath, op: str, sizes: list[int], *, rounds: int = 3,
            ranks: int | None = None, budget_s: float = 0.15, timeout_s: float = 600.0,
            references: tuple[str, ...] | None = None,
            others: Mapping[str, Callable[[], dict[int, float]]] | None = None,
            again: bool = False, timing: str = "batch",
            progress: Callable[[str], None] | None = None) -> list[FidelityPoint]:
    """Run the references, any ``others`` (a name and a run giving its time per size in
    microseconds, e.g. OSU's binaries) and fabbench once per round, ``rounds`` times, the order
    reversed every other round (ABBA: a steady drift of the machine falls on both sides alike);
    Points of fabbench against each reference in turn, then each of the others, from the rounds'
    paired ratios. With ``again`` the first reference also runs a second time in every round and
    a last set of Points, reference ``AGAIN``, compares it with itself: the spread this machine
    gives two identical programs, against which a miss can be read. ``timing``: fabbench's
    --timing (compare ``osu`` with references of OSU's protocol: c-osu, OSU's binaries)."""
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    refs = references or path.references
    batch_s = budget_s / TimingPolicy().samples_target
    runs: dict[str, Callable[[], dict[int, float]]] = {
        **{ref: functools.partial(run_reference, path, ref, op, sizes, ranks, timeout_s,
                                  batch_s) for ref in refs},
        **(others or {}),
        "fabbench": functools.partial(run_fabbench, path, op, sizes, ranks, budget_s,
                                      timeout_s, timing)}
    if again:
        runs[AGAIN] = runs[refs[0]]
    taken: list[dict[str, dict[int, float]]] = []
    for i in range(rounds):
        this: dict[str, dict[int, float]] = {}
        for side in (list(runs) if i % 2 == 0 else list(reversed(runs))):
            if progress is not None:
                progress(f"{path.label} {op}: round {i + 1}/{rounds}, {side}")
            this[side] = runs[side]()
        taken.append(this)

    def point(ref: str, size: int, against: str = "fabbench") -> FidelityPoint | None:
        pairs = [(r[ref][size], r[against][size]) for r in taken
                 if size in r[ref] and size in r[against]]
        if not pairs:
            return None
        return FidelityPoint(path.label, op, size, AGAIN if against == AGAIN else ref,
                     statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs),
                     tuple(a / b for a, b in pairs))

    sizes_seen = sorted({s for r in taken for s in r["fabbench"]})
    points = [point(ref, size) for ref in runs if ref not in ("fabbench", AGAIN)
              for size in sizes_seen]
    if again:
        points += [point(refs[0], size, AGAIN) for size in sizes_seen]
    return [p for p in points if p is not None]
