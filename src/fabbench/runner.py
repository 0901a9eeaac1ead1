"""`fabbench run` as a library call: options -> Plan -> launch (or be a rank) -> table."""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fabbench import catalog, emulate
from fabbench.comm import batch_loop, primitives
from fabbench.comm.cuda_aware import ask_ompi_info
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.launch import local
from fabbench.launch.discover import discover
from fabbench.launch.launchers import launch_spec
from fabbench.launch.rank import run_rank
from fabbench.launch.settings import Resolved, resolve, resolve_fabric
from fabbench.launch.world import announced_nodes
from fabbench.plan import Plan, RunState
from fabbench.procs import Terminated, signals_deferred
from fabbench.results.claim import claim
from fabbench.results.reader import read_results, salvage
from fabbench.results.records import Run, Summary
from fabbench.results.writer import ResultWriter
from fabbench.sysinfo.gpus import gpus_visible, require_gpu
from fabbench.workload_base import Workload
from fabbench.workloads.collectives.resume import measured

if TYPE_CHECKING:
    from fabbench.floors.rules import Floors


def make_plan(c: RunConfig, *, local_launch: bool, argv: tuple[str, ...] = ()
              ) -> tuple[Plan, RunState]:
    """The plan of configuration ``c`` on this host: what it leaves to fabbench decided here
    (the primitive and device from the GPUs visible, the fabric detected, the ranks and
    interface of a local launch or of the emulated cluster it runs under), then validated;
    and the state of its launch, which says what was picked for the user."""
    cluster = emulate.current() if local_launch else None
    picked = []
    primitive = c.primitive
    if primitive is None:
        primitive, why = primitives.default_primitive(gpus_visible())
        picked.append(f"primitive={primitive} ({why})")
    spec = primitives.get(primitive)
    batch_loop.wanted()  # FABBENCH_MPI_LOOP checked here, before any rank starts
    device = c.device or ("cuda" if spec.gpu_only or gpus_visible() else "cpu")
    fabric = c.fabric
    if fabric == "auto":
        fabric = resolve_fabric("auto")
        picked.append(f"fabric={fabric} (detected)")
    ranks, iface = 2 if c.ranks is None else c.ranks, c.iface or ("lo" if local_launch else None)
    if cluster is not None:
        ranks, iface = _on_cluster(c, cluster)
    elif c.iface is not None and local_launch and not Path("/sys/class/net", c.iface).exists():
        have = ", ".join(sorted(p.name for p in Path("/sys/class/net").iterdir()))
        raise UsageError(f"no network interface {c.iface!r} on this host (it has: {have})")
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    out = c.out or str(Path("results") / f"{run_id}-{Path(fabric).stem}-{primitive}.jsonl")
    decided = {}
    for name, workload in catalog.WORKLOADS.items():  # what each workload's options leave open
        if workload.defines("decide"):
            decided[name], note = workload.decide(getattr(c, name), cluster is not None)
            if note is not None and catalog.runs(c.workload, name):
                picked.append(note)
    plan = Plan.of(c, fabric=fabric, primitive=primitive, device=device, ranks=ranks, iface=iface,
                   out=out, run_id=run_id, argv=argv, decided=decided)
    return plan, RunState(picked=tuple(picked))


def _on_cluster(c: RunConfig, cluster: emulate.Cluster) -> tuple[int, str]:
    """Ranks and interface on an emulated cluster: every slot (nodes x ranks per node) unless
    --ranks asks for fewer; the nodes' own interface, never loopback."""
    if c.iface is not None and c.iface != cluster.iface:
        raise UsageError(f"on the emulated cluster the ranks talk over the nodes' interface "
                         f"{cluster.iface!r}, not {c.iface!r} (leave --iface out)")
    ranks = cluster.ranks if c.ranks is None else c.ranks
    if ranks > cluster.ranks:
        raise UsageError(f"--ranks {ranks} is more than the emulated cluster's "
                         f"{len(cluster.nodes)} nodes x {cluster.ranks_per_node} ranks per node")
    return ranks, cluster.iface


@dataclasses.dataclass
class Outcome:
    code: int
    plan: Plan
    launched: bool  # this process launched the ranks (else it was one)
    error: str | None = None  # the launcher's one-line account of a failed run


def dry_run(c: RunConfig, argv: tuple[str, ...] = ()) -> str:
    """Exactly what would be set and launched."""
    me = discover()
    plan, state = make_plan(c, local_launch=me is None, argv=argv)
    resolved = resolve(plan)
    lines = [f"# fabric {resolved.profile.name} from {resolved.profile.source}",
             f"# primitive {plan.primitive}" + (f" over {plan.horovod_over}"
                                                if plan.horovod_over else ""),
             f"# wire {plan.wire}, device {plan.device}, gpudirect {plan.gpudirect}, "
             f"accepted transports: {', '.join(resolved.settings.transport)}"]
    lines += [f"# picked {p}" for p in state.picked]
    if resolved.iface is not None:
        lines.append(f"# picked {resolved.iface.note()}")
    lines.append("# environment:")
    lines += [f"{k}={v}" for k, v in sorted(resolved.env().items())]
    if me is None:
        cluster = emulate.current()
        where = (f"on {len(cluster.nodes)} emulated nodes" if cluster else "local")
        lines.append(f"# launch ({plan.ranks} {where} ranks):")
        lines.append(launch_spec(plan, resolved).describe())
    else:
        lines.append(f"# this process is rank {me.rank} of {me.size} (started by {me.origin})")
    lines.append(f"# results: {plan.out}")
    return "\n".join(lines)


def run(c: RunConfig, argv: tuple[str, ...] = (), judge: Floors | None = None) -> Outcome:
    """Run configuration ``c`` (``argv``: the command line, recorded): as one rank inside a
    launched job, else by launching the ranks here. Inside a job, ``judge``'s verdict on rank
    0's results is every rank's exit code (outside, the caller judges the file)."""
    me = discover()
    announced_nodes(me)  # a bad FABBENCH_EXPECT_NODES stops here, before any rank starts
    plan, state = make_plan(c, local_launch=me is None, argv=argv)
    _refuse_cuda_unaware_mpi(plan)
    if me is not None:
        return Outcome(run_rank(plan, state, me, judge), plan, launched=False)
    _refuse_without_gpu(plan)
    resolved = resolve(plan)  # refuses missing hardware before anything starts
    held = claim(plan.out)  # one run per results file; held until the ranks are done
    try:
        state = dataclasses.replace(state, claimed=True)
        series = _series(plan)
        if series is not None:
            return _run_series(plan, state, *series)
        code, error = _launch(plan, state, resolved)
        return Outcome(code, plan, launched=True, error=error)
    finally:
        held.release()


def _launch(plan: Plan, state: RunState, resolved: Resolved) -> tuple[int, str | None]:
    """Start the local ranks, wait, and close the results file of a run that did not finish.
    Returns the exit code and, on failure, one line on what failed."""
    try:
        code, seen = local.run(launch_spec(plan, resolved, state=state), local.wall_limit(plan),
                               plan.ranks)
    except Terminated as exc:  # the ranks are stopped; the file says why it ends here
        with signals_deferred():  # a second signal does not cut the summary short
            _close_unfinished(plan, 128 + exc.signum,
                              f"fabbench was stopped by signal {exc.signum}")
        raise
    if code == 0:
        return 0, None
    wrote = os.path.exists(plan.out) and os.path.getsize(plan.out) > 0
    error = (f"{plan.primitive} on fabric {resolved.profile.name!r} (asked for transport "
             f"{' or '.join(resolved.settings.transport)}) failed: the ranks exited "
             f"with code {code}" + (f"; {seen}" if seen else "") +
             (" (the results file has what finished)" if wrote else
              " before writing any result (the library's own message is above)"))
    with signals_deferred():
        finished = _close_unfinished(plan, code, seen)
    if finished:
        error += ("; every measurement had finished, and rank 0's summary says ok: what failed "
                  "came after them (the results stand; the launch did not end well)")
    return code, error


def _series(plan: Plan) -> tuple[Workload[Any], tuple[int, ...]] | None:
    """The workload whose series the plan asks for (a workload's ``series``: train's
    --scaling), and its rank counts; None for one launch."""
    for spec in catalog.WORKLOADS.values():
        if spec.series is not None:
            counts = spec.series.counts(plan)
            if counts:
                return spec, counts
    return None


def _run_series(plan: Plan, state: RunState, spec: Workload[Any], counts: tuple[int, ...]
                ) -> Outcome:
    """One local launch per rank count, smallest first, all appended to the same results file
    (one run record, its measurements and its summary per rank count; run ids end in -n<ranks>).
    What the series makes of the 1-rank run's records (train: its samples/s, p50) is handed to
    the later runs, whose records then carry their scaling efficiency T_n / (n * T_1)."""
    assert spec.series is not None
    baseline: float | None = None
    for n in counts:
        step = dataclasses.replace(plan, ranks=n, run_id=f"{plan.run_id}-n{n}")
        code, _ = _launch(step, dataclasses.replace(state, baseline_samples_per_s=baseline),
                          resolve(step))
        if code != 0:  # the failed run's summary says why; larger counts are not started
            return Outcome(code, plan, launched=True)
        if n == 1:
            baseline = spec.series.baseline([
                r for r in read_results(step.out).of_kind(spec.record)
                if r.run_id == step.run_id])
    return Outcome(0, plan, launched=True)


def _refuse_cuda_unaware_mpi(plan: Plan) -> None:
    """--device cuda with mpi: refuse before any rank starts when ompi_info says the Open MPI
    was built without CUDA support. Each rank asks the running library again after MPI_Init
    (comm/cuda_aware.py has the order of evidence); neither looks at whether a GPU is here."""
    if plan.primitive == "mpi" and plan.device == "cuda":
        answer = ask_ompi_info()
        if answer is not None and not answer.aware:
            raise UsageError(answer.refusal())


def _refuse_without_gpu(plan: Plan) -> None:
    """A run on GPU buffers where this process sees no GPU: refused in one line before any rank
    starts, saying why (sysinfo.gpus: a container started without the NVIDIA runtime, a CPU
    build of torch, no driver). A rank of a launched job does not ask here: its communicator
    does, after its library's own checks (an MPI that is not CUDA-aware says so first)."""
    if plan.device == "cuda":
        require_gpu(f"--primitive {plan.primitive}" if primitives.get(plan.primitive).gpu_only
                    else "--device cuda")


def _close_unfinished(plan: Plan, code: int, seen: str) -> bool:
    """A run whose rank 0 died wrote no summary: say so in the file, keep everything else.
    A last line cut short by the kill is no record: it is cut off, with a warning. True when
    the run had finished after all: its last record is rank 0's summary saying ok (the launch
    failed after the measurements, e.g. mpirun lost a daemon it needed only to end the job)."""
    path = Path(plan.out)
    if not path.exists():
        return False
    records = _complete_records(path)
    if not records or records[-1].get("kind") == "summary":
        return bool(records) and records[-1].get("run_id") == plan.run_id and \
            records[-1].get("ok") is True
    counts: dict[str, int] = {}
    for rec in records:
        if rec.get("kind") != "run":
            counts[rec["kind"]] = counts.get(rec["kind"], 0) + 1
    writer = ResultWriter(path)
    try:
        writer.write(Summary(run_id=plan.run_id, ok=False, counts=counts, wall_s=0.0,
                             error=f"the ranks ended with exit code {code} before the run "
                             "finished" + (f": {seen}" if seen else "")))
    except OSError as exc:  # a full disk: the records before stay whole
        print(f"fabbench: warning: {path}: no summary written: {exc.strerror or exc}",
              file=sys.stderr)
    finally:
        writer.close()
    return False


def _drop_partial_line(path: Path) -> None:
    """Truncate an incomplete last line (a write cut by a kill: never a record), with a
    warning."""
    data = path.read_bytes()
    keep = data.rfind(b"\n") + 1
    if keep < len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
            os.fsync(f.fileno())
        print(f"fabbench: warning: {path}: dropped an incomplete last line "
              f"({len(data) - keep} bytes)", file=sys.stderr)


def _complete_records(path: Path) -> list[dict[str, Any]]:
    """The records of a file this run's ranks wrote, whatever state they left it in."""
    _drop_partial_line(path)
    return salvage(path)


def resume(path: str, argv: tuple[str, ...]) -> Outcome:
    """Continue the last run of a results file where it stopped: the same plan, the points not
    yet measured, appended to the same file under the same run id."""
    if discover() is not None:
        raise UsageError("--resume launches local ranks; run it outside a job")
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"cannot resume {path}: no such file")
    # a results file at all? (schema-checked; a cut last line is skipped, then cut off)
    records = read_results(file).records
    _drop_partial_line(file)
    runs = [r for r in records if isinstance(r, Run)]
    if not runs or runs[-1].plan is None:
        raise UsageError(f"cannot resume {path}: its run record has no plan "
                         "(written by an older fabbench)")
    plan = Plan.read(runs[-1].plan)
    mine = [r for r in records if r.run_id == plan.run_id]
    if isinstance(mine[-1], Summary) and mine[-1].ok:
        raise UsageError(f"{path}: run {plan.run_id} finished; nothing to resume")
    done = measured(plan, mine)
    plan = dataclasses.replace(plan, out=str(file), argv=argv)
    state = RunState(picked=tuple(runs[-1].picked or ()), skip=done, resumed=True,
                     claimed=True)
    _refuse_without_gpu(plan)
    held = claim(file, append=True)
    try:
        code, error = _launch(plan, state, resolve(plan))
    finally:
        held.release()
    return Outcome(code, plan, launched=True, error=error)
