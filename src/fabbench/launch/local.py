"""The embedded launcher: run a LaunchSpec (launch.launchers composes it) and wait for its
processes, with a deadline. The first rank that fails ends the others.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fabbench import catalog
from fabbench.errors import RunError, UsageError
from fabbench.launch import notices, rundir
from fabbench.launch.launchers import LaunchSpec
from fabbench.plan import Plan
from fabbench.procs import dies_with_this_process, signals_unwind, stop_groups, stop_marked
from fabbench.workloads.collectives import Sweep

# after a rank showed a fault (its watchdog fired, or it died), how long the library's own abort
# may take to end the run before the launcher ends it (an MPI abort across nodes can hang for
# minutes; an mpirun whose ranks died at start-up was once seen hanging past its caller)
FAULT_GRACE_S = 5.0


def wall_limit(plan: Plan) -> float:
    """A bound for the whole run: start-up, then each point's budget and deadline."""
    own = catalog.WORKLOADS.get(plan.workload)
    sweep: Sweep = plan.collectives
    points = own.points(plan) if own and own.defines("points") else \
        len(sweep.ops) * len(sweep.dtypes) * len(sweep.sizes)
    per_point = sweep.policy.budget_s * 3 + max(plan.op_timeout(s) for s in sweep.sizes)
    ceiling = 0 if plan.ceiling is False else 2 * (3 * plan.ceiling_s + 30) + 30
    return 2 * plan.timeout_s + 60 + points * per_point + ceiling


def run(spec: LaunchSpec, deadline_s: float, ranks: int) -> tuple[int, str]:
    """Start every process (each in its own session), stream their output, stop all of them
    when one fails or the deadline passes. Returns the first non-zero exit code (or 0) and what
    the launcher saw of the ranks (who died first, who timed out waiting, who never arrived)."""
    procs: list[subprocess.Popen[bytes]] = []
    copiers: list[notices.Tail] = []  # a launcher's stdout, without its line prefix
    tails: list[notices.Tail] = []  # each process's stderr, copied through and kept
    # a launcher stopped by SIGTERM or SIGHUP stops its ranks first (the finally below); one
    # killed outright cannot: each process it started is sent SIGTERM by the kernel then (mpirun
    # stops its ranks and daemons on every node), not left to finish the run on its own
    orphaned = dies_with_this_process(signal.SIGTERM)
    with signals_unwind(), tempfile.TemporaryDirectory(prefix="fabbench-run-") as shared:
        watch = rundir.Watch(Path(shared))
        try:
            for argv, extra in zip(spec.commands, spec.env, strict=True):
                try:
                    procs.append(subprocess.Popen(
                        argv, env={**os.environ, **extra, rundir.ENV: shared},
                        start_new_session=True, preexec_fn=orphaned, stderr=subprocess.PIPE,
                        stdout=subprocess.PIPE if spec.stdout_prefix else None))
                except FileNotFoundError:
                    raise UsageError(f"cannot start {argv[0]!r}: not found on PATH") from None
                if procs[-1].stderr is not None:  # stderr=PIPE
                    tails.append(notices.Tail(procs[-1].stderr))
                out = procs[-1].stdout
                if spec.stdout_prefix and out is not None:  # stdout=PIPE
                    copiers.append(notices.Tail(out, stdout=True, strip=spec.stdout_prefix))
            end = time.monotonic() + deadline_s
            while True:
                codes = [p.poll() for p in procs]
                watch.poll()
                # a rank ended by a signal counts as the shell says: 128 + the signal
                failed = [c if c > 0 else 128 - c for c in codes if c not in (None, 0)]
                if failed:
                    time.sleep(0.5)  # let the others report their own error first
                    watch.poll()
                    # the last words of those that ended (a stream ends with its writers)
                    until = time.monotonic() + 1.0
                    for tail, code in zip(tails, codes, strict=True):
                        if code is not None:
                            tail.join(timeout_s=max(0.0, until - time.monotonic()))
                    sys.stderr.write(watch.said())  # what mpirun may have stopped relaying
                    return failed[0], _seen(watch, ranks, tails)
                if all(c == 0 for c in codes):
                    return 0, ""
                named = watch.first_fault
                if named is not None and time.monotonic() > named + FAULT_GRACE_S:
                    # a rank timed out or died and the library's own abort has not ended the
                    # run: the launcher ends it (the finally below), the rank's line first
                    why = _seen(watch, ranks, tails) or "a rank failed"
                    return 1, (f"{why}; the launcher stopped every rank and daemon "
                               f"{FAULT_GRACE_S:.0f} s after (the library had not ended the run)")
                if time.monotonic() > end:
                    raise RunError(f"the run passed its wall-clock limit of {deadline_s:.0f} s "
                                   "(see --timeout); stopped all ranks")
                time.sleep(0.2)  # the ranks may spin on every core: wake rarely
        finally:
            stop_groups(procs, signal.SIGTERM, 3.0, 3.0)
            # what the launchers started elsewhere (orted on another node, a rank in a
            # container) and left running carries the run's directory in its environment
            left = stop_marked(rundir.ENV, shared)
            if left:
                print(f"fabbench: stopped {len(left)} process(es) of this run still running "
                      f"after its launcher ended: {', '.join(left)}", file=sys.stderr)
            for copier in copiers:  # the pipe closes with its last writer; never wait long
                copier.join(timeout_s=2.0)
            for tail in tails:
                tail.join(timeout_s=2.0)


def _seen(watch: rundir.Watch, ranks: int, tails: list[notices.Tail]) -> str:
    """What the launcher saw of the ranks, and what a launcher process said it lost (the rank,
    node and signal mpirun names when a rank on another node died)."""
    said = next((n for n in (notices.notice(t.text()) for t in tails) if n), "")
    return "; ".join(part for part in (watch.explain(ranks), said) if part)
