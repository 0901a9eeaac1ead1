"""One rank: apply the fabric, start the communicator, check the transport, run the workload,
and (rank 0) write the records. Started by a launcher as ``python -m fabbench.launch.rank`` with
its plan and run state in its environment (plan.rank_env), or in-process by ``fabbench run``
inside a launched job."""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import json
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from fabbench import catalog, emulate
from fabbench.ceiling import measure as ceiling
from fabbench.ceiling.tools import tool_for
from fabbench.comm import primitives
from fabbench.comm.base import Communicator, create_communicator, graph_environment, graph_timing
from fabbench.errors import (
    DataCheckFailed,
    FabbenchError,
    RunError,
    TransportMismatch,
    UsageError,
)
from fabbench.launch import gpudirect, launchers, results_log, rundir
from fabbench.launch.discover import RankEnv, discover
from fabbench.launch.settings import Resolved, apply, resolve
from fabbench.launch.world import NODE_NAME_ENV, check_world, host_name
from fabbench.plan import PLAN_ENV, STATE_ENV, Plan, RunState
from fabbench.procs import Terminated, die_with_parent, signals_deferred, signals_unwind
from fabbench.results import lines, records
from fabbench.results.writer import ResultWriter
from fabbench.sysinfo.inventory import container_runtime, inventory
from fabbench.timing import heap
from fabbench.timing.deadline import Watchdog
from fabbench.workloads import interface as workloads
from fabbench.workloads.faults import Fault

if TYPE_CHECKING:
    from fabbench.floors.rules import Floors

#: True once this process became a rank. A library's threads (Gloo's, MPI's, Horovod's) may then
#: outlive the rank's work, and a normal interpreter exit aborts in C++ ("terminate called without
#: an active exception", a second line after fabbench's one): such a process leaves by os._exit.
entered = False

#: The kinds the summary counts: every kind of record a workload writes (from
#: fabbench.catalog) and the ceiling's, in the order of records.kinds().
R = TypeVar("R", bound=records.Record)
MEASURED = tuple(k for k in records.kinds() if k in (*catalog.RECORDS, "ceiling"))

#: The summary's error when a measurement came out wrong.
_WRONG = ("data check failed: wrong elements (see records with correct=false, or train records "
          "whose ranks ended with different gradients)")


def run_rank(plan: Plan, state: RunState, me: RankEnv, judge: Floors | None = None) -> int:
    """Returns the exit code: 0 all fine, 1 a data check failed or (with ``judge``) rank 0's
    results missed a floor, which every rank returns; raises on other failures.
    The steps are RankRun's, in order. Whatever fails once the watchdog runs is handled here:
    rank 0 writes the summary (under a run record it wrote), a library's exception becomes one
    line naming what the rank waited for, and the rank is marked ended; a failure while
    preparing is raised as it is."""
    global entered
    entered = True
    if launchers.get(me.origin).orphans_ranks:
        # the rank ends with its parent, which its origin does not arrange (horovodrun's
        # ssh shell, torchrun itself): that killed, the rank would measure on, unseen
        die_with_parent(signal.SIGTERM)
    run = RankRun.prepare(plan, state, me)
    run.start_watchdog()
    # a rank of another launcher (srun, torchrun) is stopped by SIGTERM (scancel, that
    # launcher's teardown), and no launcher of fabbench's is there to write the summary: it
    # unwinds, and rank 0 writes why (fabbench's own launcher writes it for its ranks)
    own = os.environ.get(rundir.ENV) is not None
    with contextlib.nullcontext() if own else signals_unwind():
        try:
            run.start_communicator()
            peers = run.exchange()
            run.write_run_record(peers)
            run.check_transport(peers)
            run.measure_ceiling(peers)
            failed = run.run_workloads(peers)
            code = run.finish(failed, judge)
            if failed:
                raise DataCheckFailed(_WRONG)
            return code
        except (FabbenchError, Terminated):
            raise
        except Exception as exc:  # a library error (a peer vanished, a socket closed): one line
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise RunError(f"failed in {run.dog.pending or 'start-up'}: "
                           f"{type(exc).__name__}: {first}") from None
        finally:
            # the summary says why, whatever is on its way out. Written here, with the signals
            # held: a SIGTERM that came while the rank unwound from a peer's reset (a launcher
            # stopping every rank at once) took the rank's summary with it (a CI run of the
            # fault matrix's torchrun launcher-kill row); now it is the reason written
            with signals_deferred():
                why = _why(sys.exc_info()[1], me.rank)
                if why is not None:
                    run.write_summary(False, why)
                run.end()
                run.results_to_log()


def _why(exc: BaseException | None, rank: int) -> str | None:
    """The summary's error for what ends a rank: a failure's own line, or the signal."""
    if isinstance(exc, Terminated):
        return (f"rank {rank} was stopped by signal {exc.signum} (its launcher or scheduler "
                "ended the run)")
    return str(exc) if isinstance(exc, FabbenchError) else None


@dataclass(frozen=True)
class Peers:
    """What the ranks told each other once the communicator was up, by rank."""

    ranks: list[tuple[str, str, str | None]]  # (transport, host, GPUDirect state)
    containers: list[str | None]  # the container runtime each rank runs in
    interfaces: list[str | None]  # each rank's TCP interface (None: none found, none needed)

    @classmethod
    def of(cls, gathered: list[Any]) -> Peers:
        return cls(ranks=[(t, host, gdr) for t, host, _, gdr, *_ in gathered],
                   containers=[g[4] for g in gathered], interfaces=[g[5] for g in gathered])

    @property
    def hosts(self) -> tuple[str, ...]:
        """Each rank's host, by rank."""
        return tuple(host for _, host, _ in self.ranks)

    @property
    def nodes(self) -> int:
        """The distinct hosts."""
        return len(set(self.hosts))


@dataclass
class RankRun:
    """One rank's state from start to end, and its steps in the order run_rank takes them.
    Rank 0 alone has a writer; every other step is the same on every rank (collectives)."""

    plan: Plan
    state: RunState
    me: RankEnv
    started: float  # time.monotonic() when the rank began: the summary's wall time
    resolved: Resolved
    chosen: list[workloads.Workload[Any]]
    writer: ResultWriter | None  # rank 0's
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MEASURED, 0))
    dog: Watchdog = field(init=False)
    comm: Communicator = field(init=False)
    transport: str = field(init=False)  # what this rank's library reported
    written: records.Run | None = None  # rank 0's run record, as written
    gpudirect_problem: str | None = None  # what GPUDirect got against what was asked

    @classmethod
    def prepare(cls, plan: Plan, state: RunState, me: RankEnv) -> RankRun:
        """Before any communication library starts: the fabric's environment applied, the
        workloads imported and prepared, the library asked to report its transport, and rank
        0's writer made (nothing opened yet)."""
        started = time.monotonic()
        rundir.mark_started(me.rank)
        results_log.wanted()  # a bad FABBENCH_RESULTS_TO_LOG stops here
        if os.environ.get(NODE_NAME_ENV):  # the records name this rank's host by it
            print(f"fabbench: rank {me.rank}: node {host_name()} ({NODE_NAME_ENV})",
                  file=sys.stderr, flush=True)
        resolved = resolve(plan)
        apply(resolved)
        if resolved.iface is not None:  # found here: said, recorded, and used by every step
            print(f"fabbench: rank {me.rank}: {resolved.iface.note()}", file=sys.stderr,
                  flush=True)
            state = dataclasses.replace(state, picked=(*state.picked, resolved.iface.note()))
            plan = dataclasses.replace(plan, iface=resolved.iface.name)
        os.environ["FABBENCH_LOCAL_RANK"] = str(me.local_rank)
        graph_environment(plan.collectives.policy.cuda_graph, os.environ)
        chosen = workloads.load(plan.workload)  # imported now, before the library starts
        for workload in chosen:
            workload.prepare(plan)
        report_env = primitives.get(plan.backend).report_env  # the library's transport report
        if report_env:
            folder = tempfile.mkdtemp(prefix="fabbench-")
            os.environ.update({k: v.replace("{dir}", folder) for k, v in report_env.items()})
        # a rank started by another launcher claims the file itself (fabbench's launcher holds it)
        writer = ResultWriter(plan.out, claim=not state.claimed) if me.rank == 0 else None
        return cls(plan=plan, state=state, me=me, started=started, resolved=resolved,
                   chosen=chosen, writer=writer)

    def start_watchdog(self) -> None:
        """Its thread, unarmed; on a deadline passed it marks the rank timed out and writes the
        summary from that thread."""
        self.dog = Watchdog(self.me.rank, self._on_timeout)

    def start_communicator(self) -> None:
        """The primitive's rendezvous, then the world it got against the one announced."""
        plan, me = self.plan, self.me
        self.dog.arm(plan.timeout_s * 2, f"starting {plan.primitive} (rendezvous of "
                                          f"{me.size} ranks)")
        self.comm = create_communicator(plan.primitive, rank_env=me.as_dict(), device=plan.device,
                                        horovod_over=plan.horovod_over, timeout_s=plan.timeout_s)
        self.dog.arm(plan.timeout_s, f"checking the world of {me.size} ranks")
        check_world(me, plan.primitive, self.comm, over=plan.horovod_over)  # before any write

    def exchange(self) -> Peers:
        """Every rank's transport, host, GPUDirect state and container, gathered; and whether
        rank 0 may write (it claims the results file first): when not, every rank stops."""
        self.dog.arm(self.plan.timeout_s, "exchanging transports and host names")
        refused = self._claim_results()
        self.transport = self.comm.transport()
        gathered = self.comm.gather_objects((self.transport, host_name(), refused,
                                             self.comm.gpudirect(), container_runtime(),
                                             self.plan.iface))
        self.dog.disarm()
        if gathered[0][2]:
            raise UsageError(gathered[0][2] if self.me.rank == 0 else f"rank 0: {gathered[0][2]}")
        return Peers.of(gathered)

    def _claim_results(self) -> str | None:
        """Rank 0 started by another launcher opens (claims) the results file now; why it may
        not write, or None."""
        if self.writer is None or self.state.claimed:
            return None
        try:
            self.writer.open()
        except UsageError as exc:
            return str(exc)
        return None

    def write_run_record(self, peers: Peers) -> None:
        """GPUDirect judged (every rank); rank 0 writes the run record, before any check can
        fail, so that a refused run still says what it found."""
        plan, resolved, comm = self.plan, self.resolved, self.comm
        cluster = emulate.current()
        gdr_record, self.gpudirect_problem = gpudirect.outcome(
            plan.gpudirect, resolved.settings.gpudirect_verify,
            [(r, host, state) for r, (_, host, state) in enumerate(peers.ranks)], plan.backend)
        if self.writer is None:
            return
        provenance = inventory()
        if hasattr(comm, "library_version"):
            provenance["versions"]["mpi_library"] = comm.library_version()
        report = comm.library_report()
        run = records.Run(
            run_id=plan.run_id,
            started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            argv=plan.argv, fabric=resolved.profile.name, wire=plan.wire,
            primitive=plan.primitive, horovod_over=plan.horovod_over, device=plan.device,
            ranks=comm.size, nodes=peers.nodes, rank_hosts=list(peers.hosts),
            rank_containers=peers.containers,
            transport=self.transport, interface=plan.iface,
            expected_transport=resolved.settings.transport, picked=self._picked(peers),
            profile_source=str(resolved.profile.source), profile_env=resolved.env(),
            profile_link=records.ProfileLink.of({"hardware": resolved.profile.hardware,
                                                 **resolved.profile.link.to_json()}),
            timing=records.Timing.of({**plan.collectives.policy.__dict__, **graph_timing(
                plan.collectives.policy.cuda_graph, os.environ)}), resumed=self.state.resumed,
            plan=plan.to_json(), timing_method=comm.timing_method,
            library_report=None if report is None else records.ConnectionReport.of(report),
            provenance=records.Provenance.of(provenance),
            emulation=None if cluster is None else records.EmulatedCluster.of_cluster(cluster),
            gpudirect=records.GpuDirect.of(gdr_record))
        self.written = self.writer.write(run)

    def _picked(self, peers: Peers) -> tuple[str, ...]:
        """What was picked for the user, with what the ranks found for themselves: their
        interfaces when they differ, and the node names the records carry when the job gave
        them (FABBENCH_NODE_NAME)."""
        picked = list(self.state.picked)
        if len(set(peers.interfaces)) > 1:
            picked.append("iface by rank: " + ", ".join(map(str, peers.interfaces)))
        if os.environ.get(NODE_NAME_ENV):
            picked.append(f"hosts=the nodes' names from {NODE_NAME_ENV} (rank 0's: "
                          f"{host_name()}; its hostname: {socket.gethostname()})")
        return tuple(picked)

    def check_transport(self, peers: Peers) -> None:
        """Transport truth: every rank's transport, GPUDirect and the hosts the fabric allows."""
        profile = self.resolved.profile
        _check_transport(peers.ranks, self.resolved.settings.transport, profile.name,
                         self.plan.wire)
        if self.gpudirect_problem is not None:
            raise TransportMismatch(self.gpudirect_problem)
        if profile.single_host and peers.nodes > 1:
            raise TransportMismatch(f"fabric {profile.name!r} is for one host, and "
                                    f"the ranks run on {peers.nodes} hosts")

    def measure_ceiling(self, peers: Peers) -> None:
        """The wire's raw limit, when asked for or (by default) when the ranks span nodes."""
        plan = self.plan
        if not (plan.ceiling or (plan.ceiling is None and peers.nodes > 1)):
            return
        for found in ceiling.measure(
                self.comm, list(peers.hosts), wire=plan.wire, iface=plan.iface,
                tool_name=tool_for(self.resolved.profile.hardware), seconds=plan.ceiling_s,
                arm=self.dog.arm, run_id=plan.run_id):
            self._keep(found, lines.ceiling)

    def run_workloads(self, peers: Peers) -> bool:
        """Each workload in turn, every record kept as it comes (rank 0 prints the workload's
        header before its first); whether any measurement came out wrong."""
        context = workloads.RankContext(comm=self.comm, plan=self.plan, state=self.state,
                                        transport=self.transport, hosts=peers.hosts,
                                        arm=self.dog.arm, fault=Fault.from_env())
        failed = False
        for workload in self.chosen:
            header = workload.header(self.written) if self.written is not None else None
            for record in workload.run(context):
                if header is not None:
                    print(header, flush=True)
                    header = None
                failed |= workload.wrong(record)
                self._keep(record, workload.line)
        return failed

    def _keep(self, record: R, show: Callable[[R], str]) -> None:
        """Count a finished measurement; rank 0 makes it durable, then shows it."""
        self.dog.disarm()
        self.counts[record.kind] += 1
        if self.writer is not None:
            try:
                self.writer.write(record)
            except OSError as exc:  # a full disk, a quota: one line, not a library's failure
                raise RunError(f"cannot write results to {self.writer.path}: "
                               f"{exc.strerror or exc}") from None
            print(show(record), flush=True)

    def finish(self, failed: bool, judge: Floors | None = None) -> int:
        """The summary; with ``judge``, rank 0's verdict on its results, which every rank
        learns (its exit code); then the communicator closed (under the watchdog: peers must
        arrive)."""
        self.dog.arm(self.plan.timeout_s, "finishing")
        self.write_summary(not failed, _WRONG if failed else None)
        code = 0 if judge is None or failed else self._judged(judge)
        self.comm.close()
        self.dog.disarm()
        return code

    def _judged(self, judge: Floors) -> int:
        """Rank 0 judges its results file against the floors and prints the verdict as
        `fabbench floors verify` does; every rank gets the verdict's exit code (the largest of the
        ranks' codes: rank 0's, the others giving 0), and a rank other than 0 that fails says
        where the FAIL lines are. A job's pods (a check before the job) all end with it."""
        from fabbench.floors.verify import verify  # after the measurements: not in their way

        mine = 0
        if self.writer is not None:
            verdict = verify(judge, [self.writer.path])
            print("\n".join(verdict.lines()), flush=True)
            mine = verdict.exit_code
        code = int(self.comm.max_scalar(float(mine)))
        if code and self.writer is None:
            print(f"fabbench: rank {self.me.rank}: rank 0's results missed the floors of "
                  f"{judge.path} (rank 0's output has the FAIL lines)", file=sys.stderr,
                  flush=True)
        return code

    def write_summary(self, ok: bool, error: str | None) -> None:
        """The summary, only under a run record this process wrote, and once: the last line
        (a failed data check writes it in finish, then reaches run_rank's handler)."""
        if (self.writer is not None and self.writer.counts.get("run")
                and not self.writer.counts.get("summary")):
            # a file that cannot take the summary (a full disk) is left as it is: the rank's
            # line says why, and the launcher writes its own summary if there is room
            with contextlib.suppress(OSError):
                self.writer.write(records.Summary(
                    run_id=self.plan.run_id, ok=ok, counts=dict(self.counts),
                    wall_s=round(time.monotonic() - self.started, 3), error=error))

    def _on_timeout(self, what: str, message: str) -> None:
        rundir.mark_timeout(self.me.rank, what)
        self.write_summary(False, message)

    def results_to_log(self) -> None:
        """Rank 0, its file closed, with FABBENCH_RESULTS_TO_LOG=1: the file written to stdout
        between the markers `fabbench from-log` reads (launch.results_log); a failure to is a
        line on stderr, never the run's."""
        if self.writer is None or not results_log.wanted():
            return
        if not self.writer.counts or not self.writer.path.exists():  # none, or another run's
            print("fabbench: rank 0: no results file to write to the log (the run wrote none)",
                  file=sys.stderr, flush=True)
            return
        try:
            count = results_log.emit(self.writer.path)
        except OSError as exc:
            print(f"fabbench: rank 0: results not written to the log: cannot read "
                  f"{self.writer.path}: {exc.strerror or exc}", file=sys.stderr, flush=True)
            return
        print(f"fabbench: rank 0: wrote {self.writer.path} to this log ({count} lines; "
              "`fabbench from-log` reads them back)", file=sys.stderr, flush=True)

    def end(self) -> None:
        """Whatever happened: the watchdog stopped, rank 0's file closed (an unwritten claim
        released), the rank marked ended."""
        self.dog.close()
        if self.writer is not None:
            self.writer.close()
        rundir.mark_ended(self.me.rank)


def _check_transport(peers: list[tuple[str, str, str | None]], patterns: tuple[str, ...],
                     fabric: str, wire: str) -> None:
    """Every rank's transport is one the fabric accepts. A world of one rank connects to no
    one: what its library names is what it set up, not what carried anything (NCCL names its
    network module, Socket, even with --fabric shm), so there is nothing to check; the record
    still says what the library named."""
    if len(peers) < 2:
        return
    for rank, (transport, host, _) in enumerate(peers):
        if not any(fnmatch.fnmatchcase(transport, p) for p in patterns):
            raise TransportMismatch(
                f"fabric {fabric!r} (wire {wire}) asked for transport {' or '.join(patterns)} "
                f"but rank {rank} on {host} used {transport!r}")


def main() -> int:
    """Entry point of a launched rank."""
    try:
        heap.settle()  # before any buffer exists: the allocator state fabbench measures in
    except OSError as exc:
        print(f"fabbench: error: rank: {exc}", file=sys.stderr, flush=True)
        return 1
    text = os.environ.get(PLAN_ENV)
    me = discover()
    if text is None or me is None:
        print("fabbench: error: this is a rank: start it through `fabbench run`", file=sys.stderr)
        return 2
    try:
        return run_rank(Plan.read(json.loads(text)),
                        RunState.read(json.loads(os.environ[STATE_ENV])), me)
    except FabbenchError as exc:
        print(f"fabbench: error: rank {me.rank}: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except Terminated as exc:
        print(f"fabbench: rank {me.rank}: stopped by signal {exc.signum}", file=sys.stderr,
              flush=True)
        return 128 + exc.signum


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # MPI and Horovod may keep threads alive; this rank's work is done and its records durable
    os._exit(code)
