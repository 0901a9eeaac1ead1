"""One rank: apply the fabric, start the communicator, check the transport, run the workload,
and (rank 0) write the records. Started by a launcher as ``python -m fabbench.launch.rank`` with
its plan and run state in its environment (plan.rank_env), or in-process by ``fabbench run``
inside a launched job."""

from __future__ import annotations

import fnmatch
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from fabbench import emulate
from fabbench.ceiling import measure as ceiling
from fabbench.ceiling.tools import tool_for
from fabbench.comm import registry
from fabbench.comm.base import create_communicator
from fabbench.errors import (
    DataCheckFailed,
    FabbenchError,
    RunError,
    TransportMismatch,
    UsageError,
)
from fabbench.launch import gpudirect, rundir
from fabbench.launch.discover import RankEnv, discover
from fabbench.launch.settings import apply, resolve
from fabbench.launch.world import check_world
from fabbench.plan import PLAN_ENV, STATE_ENV, Plan, RunState
from fabbench.results import lines, records
from fabbench.results.writer import ResultWriter
from fabbench.sysinfo.inventory import container_runtime, inventory
from fabbench.timing import heap
from fabbench.timing.deadline import Watchdog
from fabbench.workloads import registry as workloads
from fabbench.workloads.faults import Fault

#: True once this process became a rank. A library's threads (Gloo's, MPI's, Horovod's) may then
#: outlive the rank's work, and a normal interpreter exit aborts in C++ ("terminate called without
#: an active exception", a second line after fabbench's one): such a process leaves by os._exit.
entered = False


def run_rank(plan: Plan, state: RunState, me: RankEnv) -> int:
    """Returns the exit code: 0 all fine, 1 a data check failed; raises on other failures."""
    global entered
    entered = True
    started = time.monotonic()
    rundir.mark_started(me.rank)
    resolved = resolve(plan)
    apply(resolved)
    os.environ["FABBENCH_LOCAL_RANK"] = str(me.local_rank)
    chosen = workloads.load(plan.workload)  # imported now, before the library starts
    for workload in chosen:
        workload.prepare(plan)
    report_env = registry.get(plan.backend).report_env  # the library's transport report
    if report_env:
        folder = tempfile.mkdtemp(prefix="fabbench-")
        os.environ.update({k: v.replace("{dir}", folder) for k, v in report_env.items()})
    # a rank started by another launcher claims the file itself (fabbench's launcher holds it)
    writer = ResultWriter(plan.out, claim=not state.claimed) if me.rank == 0 else None
    counts = {"collective": 0, "train": 0, "halo": 0, "ceiling": 0, "pairs": 0}

    def summary(ok: bool, error: str | None) -> records.Summary:
        return records.Summary(run_id=plan.run_id, ok=ok, counts=dict(counts),
                               wall_s=round(time.monotonic() - started, 3), error=error)

    def close_run(ok: bool, error: str | None) -> None:
        """The summary, only under a run record this process wrote."""
        if writer is not None and writer.counts.get("run"):
            writer.write(summary(ok, error))

    def on_timeout(what: str, message: str) -> None:
        rundir.mark_timeout(me.rank, what)
        close_run(False, message)

    dog = Watchdog(me.rank, on_timeout)
    try:
        dog.arm(plan.timeout_s * 2, f"starting {plan.primitive} (rendezvous of "
                                     f"{me.size} ranks)")
        comm = create_communicator(plan.primitive, rank_env=me.as_dict(), device=plan.device,
                                   horovod_over=plan.horovod_over, timeout_s=plan.timeout_s)
        dog.arm(plan.timeout_s, f"checking the world of {me.size} ranks")
        check_world(me, plan.primitive, comm, over=plan.horovod_over)  # before anything is written
        dog.arm(plan.timeout_s, "exchanging transports and host names")
        refused = None
        if writer is not None and not state.claimed:
            try:
                writer.open()  # claimed now: every rank learns below whether rank 0 may write
            except UsageError as exc:
                refused = str(exc)
        transport = comm.transport()
        gathered = comm.gather_objects((transport, socket.gethostname(), refused,
                                        comm.gpudirect(), container_runtime()))
        dog.disarm()
        if gathered[0][2]:
            raise UsageError(gathered[0][2] if me.rank == 0 else f"rank 0: {gathered[0][2]}")
        peers = [(t, host, gdr) for t, host, _, gdr, _ in gathered]
        nodes = len({peer[1] for peer in peers})
        cluster = emulate.current()
        gdr_record, gdr_problem = gpudirect.outcome(
            plan.gpudirect, resolved.settings.gpudirect_verify,
            [(r, host, state) for r, (_, host, state) in enumerate(peers)], plan.backend)
        written: dict[str, Any] | None = None  # rank 0's run record, as written
        if writer is not None:
            provenance = inventory()
            if hasattr(comm, "library_version"):
                provenance["versions"]["mpi_library"] = comm.library_version()
            run = records.Run(
                run_id=plan.run_id,
                started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                argv=plan.argv, fabric=resolved.profile.name, wire=plan.wire,
                primitive=plan.primitive, horovod_over=plan.horovod_over, device=plan.device,
                ranks=comm.size, nodes=nodes, rank_hosts=[peer[1] for peer in peers],
                rank_containers=[g[4] for g in gathered],
                transport=transport, interface=plan.iface,
                expected_transport=resolved.settings.transport, picked=state.picked,
                profile_source=str(resolved.profile.source), profile_env=resolved.env(),
                profile_link={"hardware": resolved.profile.hardware,
                              **resolved.profile.link.to_json()},
                timing=plan.policy.__dict__, resumed=state.resumed,
                plan=json.loads(plan.to_json()), timing_method=comm.timing_method,
                library_report=comm.library_report(), provenance=provenance,
                emulation=None if cluster is None else cluster.as_record(),
                gpudirect=gdr_record)
            written = writer.write(run)
        _check_transport(peers, resolved.settings.transport, resolved.profile.name, plan.wire)
        if gdr_problem is not None:
            raise TransportMismatch(gdr_problem)
        if resolved.profile.single_host and nodes > 1:
            raise TransportMismatch(f"fabric {resolved.profile.name!r} is for one host, and "
                                    f"the ranks run on {nodes} hosts")
        failed = False

        def keep(record: records.Record, show: Callable[[dict[str, Any]], str]) -> None:
            """Count a finished measurement; rank 0 makes it durable, then shows it."""
            dog.disarm()
            counts[record.kind] += 1
            if writer is not None:
                print(show(writer.write(record)), flush=True)

        hosts = tuple(peer[1] for peer in peers)
        if plan.ceiling or (plan.ceiling is None and nodes > 1):
            for found in ceiling.measure(
                    comm, list(hosts), wire=plan.wire, iface=plan.iface,
                    tool_name=tool_for(resolved.profile.hardware), seconds=plan.ceiling_s,
                    arm=dog.arm, run_id=plan.run_id):
                keep(found, lines.ceiling)
        context = workloads.RankContext(comm=comm, plan=plan, state=state, transport=transport,
                                        hosts=hosts, arm=dog.arm, fault=Fault.from_env())
        for workload in chosen:
            header = workload.header(written) if written is not None else None
            for record in workload.run(context):
                if header is not None:
                    print(header, flush=True)
                    header = None
                failed |= workload.wrong(record)
                keep(record, workload.line)
        dog.arm(plan.timeout_s, "finishing")
        error = "data check failed: wrong elements (see records with correct=false, or train " \
            "records whose ranks ended with different gradients)" if failed else None
        close_run(not failed, error)
        comm.close()
        dog.disarm()
        if failed:
            raise DataCheckFailed(error)
        return 0
    except FabbenchError as exc:
        close_run(False, str(exc))
        raise
    except Exception as exc:  # a library error (a peer vanished, a socket closed): one line
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        failure = RunError(f"failed in {dog.pending or 'start-up'}: {type(exc).__name__}: "
                           f"{first}")
        close_run(False, str(failure))
        raise failure from None
    finally:
        dog.close()
        if writer is not None:
            writer.close()
        rundir.mark_ended(me.rank)


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
        return run_rank(Plan.from_json(text), RunState.from_json(os.environ[STATE_ENV]), me)
    except FabbenchError as exc:
        print(f"fabbench: error: rank {me.rank}: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # MPI and Horovod may keep threads alive; this rank's work is done and its records durable
    os._exit(code)
