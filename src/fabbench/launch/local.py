"""The embedded launcher: start N ranks on this host and wait for them, with a deadline.

mpi and horovod-over-mpi ranks are started by mpirun with the profile's MCA parameters on its
command line; gloo and nccl ranks by a plain spawn with a TCP rendezvous (MASTER_ADDR/PORT);
horovod-over-gloo by horovodrun --gloo. The first rank that fails ends the others.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from fabbench.errors import RunError, UsageError
from fabbench.launch import rundir
from fabbench.launch.settings import Resolved
from fabbench.plan import Plan
from fabbench.procs import signals_unwind, stop_groups

RANK_MODULE = [sys.executable, "-m", "fabbench.launch.rank"]
# horovodrun --gloo prefixes every line of rank N's stdout with "[N]<stdout>:"; it has no
# option to turn that off
HOROVODRUN_PREFIX = r"^\[\d+\]<stdout>:"


@dataclass
class LaunchSpec:
    """What will be run: one command per process group, each with its environment additions."""

    commands: list[list[str]]
    env: list[dict[str, str]] = field(default_factory=list)
    # what a launcher puts before each line of a rank's stdout (horovodrun's "[0]<stdout>:"),
    # taken off so that the user reads the table as a directly started rank prints it
    stdout_prefix: str | None = None

    def describe(self) -> str:
        lines = []
        for argv, env in zip(self.commands, self.env, strict=True):
            shown = {k: v for k, v in env.items() if k != "FABBENCH_PLAN"}
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items()))
            lines.append(f"{prefix} {shlex.join(argv)}".strip())
        return "\n".join(lines)


def beside_python(tool: str) -> str:
    """A console script of this environment (a venv's bin/ need not be on PATH)."""
    candidate = os.path.join(os.path.dirname(sys.executable), tool)
    return candidate if os.access(candidate, os.X_OK) else tool


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mpirun_settings(resolved: Resolved) -> list[str]:
    """mpirun's options that carry the profile: root's permission, MCA parameters, and the
    environment variables exported to every rank (FABBENCH_PLAN among them)."""
    argv = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    for key, value in resolved.settings.mca.items():
        argv += ["--mca", key, value]
    for key in sorted([*resolved.settings.env, "FABBENCH_PLAN"]):
        argv += ["-x", key]
    return argv


def horovodrun(plan: Plan, hosts: str, iface: str | None,
               program: list[str] = RANK_MODULE) -> list[str]:
    """horovodrun --gloo starting ``program`` (the rank module) on HOSTS (host:slots,...)."""
    argv = [beside_python("horovodrun"), "--gloo", "-np", str(plan.ranks), "-H", hosts,
            "--start-timeout", str(int(plan.timeout_s))]
    if iface:
        argv += ["--network-interfaces", iface]
    return argv + program


def build(plan: Plan, resolved: Resolved, program: list[str] = RANK_MODULE) -> LaunchSpec:
    """The local ranks of ``plan``, each running ``program``: fabbench's rank module, or (the
    fidelity check) a reference loop started exactly as fabbench's ranks are."""
    env = resolved.env()
    base = {"FABBENCH_PLAN": plan.to_json()}
    if plan.launcher == "mpirun":
        argv = ["mpirun", "-np", str(plan.ranks), "--oversubscribe", "--bind-to", "none"]
        return LaunchSpec([argv + mpirun_settings(resolved) + program],
                          [{**resolved.settings.env, **base}])
    if plan.launcher == "horovodrun":
        return LaunchSpec([horovodrun(plan, f"localhost:{plan.ranks}", plan.iface, program)],
                          [{**env, **base}], stdout_prefix=HOROVODRUN_PREFIX)
    port = str(free_port())
    commands, envs = [], []
    for rank in range(plan.ranks):
        commands.append(list(program))
        envs.append({**env, **base, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                     "RANK": str(rank), "WORLD_SIZE": str(plan.ranks), "LOCAL_RANK": str(rank),
                     "LOCAL_WORLD_SIZE": str(plan.ranks)})
    return LaunchSpec(commands, envs)


def wall_limit(plan: Plan) -> float:
    """A bound for the whole run: start-up, then each point's budget and deadline."""
    # pairs: at most n rounds (n ranks), each of every size
    points = (plan.ranks if plan.workload == "pairs" else len(plan.ops)) * len(plan.dtypes) \
        * len(plan.sizes)
    per_point = plan.policy.budget_s * 3 + max(plan.op_timeout(s) for s in plan.sizes)
    ceiling = 0 if plan.ceiling is False else 2 * (3 * plan.ceiling_s + 30) + 30
    return 2 * plan.timeout_s + 60 + points * per_point + ceiling


def run(spec: LaunchSpec, deadline_s: float, ranks: int) -> tuple[int, str]:
    """Start every process (each in its own session), stream their output, stop all of them
    when one fails or the deadline passes. Returns the first non-zero exit code (or 0) and what
    the launcher saw of the ranks (who died first, who timed out waiting, who never arrived)."""
    procs: list[subprocess.Popen] = []
    copiers: list[threading.Thread] = []
    # a launcher stopped by SIGTERM or SIGHUP stops its ranks first (the finally below)
    with signals_unwind(), tempfile.TemporaryDirectory(prefix="fabbench-run-") as shared:
        watch = rundir.Watch(Path(shared))
        try:
            for argv, extra in zip(spec.commands, spec.env, strict=True):
                try:
                    procs.append(subprocess.Popen(
                        argv, env={**os.environ, **extra, rundir.ENV: shared},
                        start_new_session=True,
                        stdout=subprocess.PIPE if spec.stdout_prefix else None))
                except FileNotFoundError:
                    raise UsageError(f"cannot start {argv[0]!r}: not found on PATH") from None
                if spec.stdout_prefix:
                    copiers.append(_copy_unprefixed(procs[-1].stdout, spec.stdout_prefix))
            end = time.monotonic() + deadline_s
            while True:
                codes = [p.poll() for p in procs]
                watch.poll()
                # a rank ended by a signal counts as the shell says: 128 + the signal
                failed = [c if c > 0 else 128 - c for c in codes if c not in (None, 0)]
                if failed:
                    time.sleep(0.5)  # let the others report their own error first
                    watch.poll()
                    return failed[0], watch.explain(ranks)
                if all(c == 0 for c in codes):
                    return 0, ""
                if time.monotonic() > end:
                    raise RunError(f"the run passed its wall-clock limit of {deadline_s:.0f} s "
                                   "(see --timeout); stopped all ranks")
                time.sleep(0.2)  # the ranks may spin on every core: wake rarely
        finally:
            stop_groups(procs, signal.SIGTERM, 3.0, 3.0)
            for copier in copiers:  # the pipe closes with its last writer; never wait long
                copier.join(timeout=2.0)


def _copy_unprefixed(stream: IO[bytes], prefix: str) -> threading.Thread:
    """Copy a launcher's stdout to ours line by line, without the launcher's line prefix."""
    pattern = re.compile(prefix.encode())

    def copy() -> None:
        out = sys.stdout.buffer
        with contextlib.suppress(OSError, ValueError):
            for line in iter(stream.readline, b""):
                out.write(pattern.sub(b"", line, count=1))
                out.flush()

    thread = threading.Thread(target=copy, name="fabbench-stdout", daemon=True)
    thread.start()
    return thread


