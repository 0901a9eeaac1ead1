"""The fault matrix of issue 36 under launchers other than fabbench's own
(docs/faults-launchers.md): a step of `fabbench run` ranks started by srun on the emulated Slurm
cluster (.ci/slurm/start.sh four), ranks started by torchrun on this host, and a study
(`fabbench study run`) whose cell runs. As in faults_on_wire.py (whose Outcome, Expect and
`problems` these rows share): the fault comes once the results file shows the first point, and
what followed is measured: seconds from the fault to the launcher's exit, its exit code, the
headline, the results file and what was left running. "Left running" here is every process
carrying the row's own marker (FAULT_MATRIX_MARK, in the launcher's environment, which srun,
torchrun and the study hand down to every rank), and for Slurm the job's slurmstepd on any node.

Needs root (network namespaces, Slurm's daemons). Nothing here imports pytest: the bench
(bench/fault_launchers.py) uses it too."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from integration.faults_on_wire import (
    PEER_GONE,
    TIMEOUT_S,
    Expect,
    Outcome,
    at_first_point,
    cmdline_of,
    comm_of,
    environ_of,
    headline,
    marked,
    pids_in,
    read_records,
    settle,
    sweep,
)

REPO = Path(__file__).resolve().parents[2]
FABBENCH = str(Path(sys.executable).parent / "fabbench")  # the venv's console script
MARK = "FAULT_MATRIX_MARK"
# the same short sweep as the emulated rows (faults_on_wire.SWEEP), over gloo
SWEEP = (*sweep(3), "--timeout", str(TIMEOUT_S))


# --- where the launcher runs ------------------------------------------------------------------
@dataclass(frozen=True)
class Slurm:
    """A 4-node emulated Slurm cluster of this module's own (.ci/slurm/start.sh four, in its own
    directory and on its own port): the environment its commands need, its directory, and its
    nodes (hostname, netns, address) from the emulation's state file."""

    env: dict[str, str]
    dir: Path
    nodes: tuple[dict, ...]
    agent: Path

    def node(self, name: str) -> dict:
        return next(n for n in self.nodes if n["hostname"] == name)

    def slurmd_pid(self, name: str) -> int | None:
        try:
            pid = int((self.dir / f"slurmd-{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if comm_of(pid) == "slurmd" else None

    def start_slurmd(self, name: str) -> None:
        """Start node ``name``'s slurmd again, as start.sh does, and wait until the node is
        usable (a slurmd restarted finds its running steps again)."""
        env = {**self.env, "PMIX_MCA_psec": "munge,native,none"}
        subprocess.run([str(self.agent), name, "slurmd", "-f", str(self.dir / name / "slurm.conf"),
                        "-N", name], env=env, check=True, timeout=30, capture_output=True)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            state = subprocess.run(["sinfo", "-h", "-n", name, "-o", "%t"], env=self.env,
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            if self.slurmd_pid(name) and state in ("idle", "mix", "alloc"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"slurmd of {name} did not come back within 60 s")

    def _squeue(self) -> list[str]:
        return subprocess.run(["squeue", "-h", "-o", "%i %t %N"], env=self.env,
                              capture_output=True, text=True, timeout=10).stdout.split("\n")

    def wait_free(self, timeout_s: float = 90) -> None:
        """Wait until the cluster has no job left, so the next row's srun is not queued behind
        the last row's. A job whose node lost its slurmd mid-step (the slurmd-kill row) may
        stay COMPLETING after the slurmd is back (a CI run of 44394dc: the scancel row's job
        queued for 255 s); after 20 s such a node is set down and resumed, which ends it, and
        after 40 s what is left is cancelled."""
        start = time.monotonic()
        nudged: set[str] = set()
        while True:
            jobs = [line.split() for line in self._squeue() if line.strip()]
            if not jobs:
                return
            waited = time.monotonic() - start
            if waited > timeout_s:
                raise RuntimeError(f"the cluster still has jobs after {timeout_s:.0f} s: {jobs}")
            if waited > 20:
                for job in jobs:
                    if len(job) == 3 and job[1] == "CG" and job[2] not in nudged:
                        nudged.add(job[2])
                        for state in ("state=down reason=fault-matrix", "state=resume"):
                            subprocess.run(["scontrol", "update", f"nodename={job[2]}",
                                            *state.split(" ")], env=self.env,
                                           capture_output=True, timeout=10, check=False)
            if waited > 40:  # an earlier row's job Slurm still counts (its checks are done)
                subprocess.run(["scancel", *(job[0] for job in jobs)], env=self.env,
                               capture_output=True, timeout=10, check=False)
            time.sleep(0.5)


SLURM_DIR = Path("/var/tmp/fabbench-slurm/faults")
SLURM_PORT = 16877  # its slurmctld's; start.sh four takes the next one for the slurmds


@contextlib.contextmanager
def slurm_four() -> Iterator[Slurm]:
    """The cluster, started (or found running) and stopped on leaving, its emulated nodes too."""
    env = {**os.environ, "FABBENCH_SLURM_DIR": str(SLURM_DIR),
           "FABBENCH_SLURM_PORT": str(SLURM_PORT), "FABBENCH": FABBENCH}
    stop = [str(REPO / ".ci/slurm/stop.sh"), "four"]
    try:
        p = subprocess.run([str(REPO / ".ci/slurm/start.sh"), "four"], env=env,
                           capture_output=True, text=True, timeout=240, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"the Slurm cluster did not start: {p.stderr[-2000:]}")
        env["SLURM_CONF"] = p.stdout.strip().splitlines()[-1]
        emulation = Path((SLURM_DIR / "emulation").read_text().strip())
        state = json.loads(emulation.read_text())
        yield Slurm(env, SLURM_DIR, tuple(state["nodes"]),
                    emulation.parent / "bin" / "ssh")
    finally:
        subprocess.run(stop, env=env, capture_output=True, timeout=180, check=False)


# --- what a fault acts on ---------------------------------------------------------------------
@dataclass
class Scene:
    """The launcher's process, the results file, the row's marker, the Slurm cluster (srun rows)
    and what the injection learnt (the job id)."""

    proc: subprocess.Popen
    out: Path
    mark: str
    slurm: Slurm | None = None
    seen: dict[str, str] = field(default_factory=dict)


def _ranks(scene: Scene) -> list[int]:
    """The run's ranks: processes of the row's marker running `fabbench run` or a rank module."""
    return [p for p in marked(scene.mark, MARK)
            if re.search(r"fabbench run |fabbench\.launch\.rank", cmdline_of(p))]


def _var(pid: int, name: str) -> str | None:
    found = re.search(rb"\0" + name.encode() + rb"=([^\0]*)", environ_of(pid))
    return found.group(1).decode() if found else None


def _rank(scene: Scene, rank: int, var: str) -> int:
    pid = next((p for p in _ranks(scene) if _var(p, var) == str(rank)), None)
    if pid is None:
        raise LookupError(f"no rank {rank} ({var}) among {_ranks(scene)}")
    return pid


def kill_rank_1(var: str) -> Callable[[Scene], None]:
    """SIGKILL the rank whose ``var`` (SLURM_PROCID, RANK) is 1."""
    def inject(scene: Scene) -> None:
        os.kill(_rank(scene, 1, var), signal.SIGKILL)
    return inject


def signal_launcher(sig: int) -> Callable[[Scene], None]:
    def inject(scene: Scene) -> None:
        scene.proc.send_signal(sig)
    return inject


def kill_slurmd_of_rank_1(scene: Scene) -> None:
    assert scene.slurm is not None
    pid = scene.slurm.slurmd_pid(scene.seen["node1"])
    if pid is None:
        raise LookupError(f"no slurmd of {scene.seen['node1']} running")
    os.kill(pid, signal.SIGKILL)


def scancel(scene: Scene) -> None:
    assert scene.slurm is not None
    subprocess.run(["scancel", scene.seen["job"]], env=scene.slurm.env, check=True, timeout=30)


# --- one row ----------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Row:
    """One row: the launcher (its column), the fault's name, what it does (for people), the
    injection and the right outcome."""

    launcher: str
    name: str
    what: str
    inject: Callable[[Scene], None]
    expect: Expect
    delay_s: float = 1.0  # after the first point: the fault comes during the 16 MiB point


def slurm_leftovers(slurm: Slurm, job: str | None) -> list[str]:
    """The job's slurmstepd processes, and whatever but slurmd runs in a node's namespace."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and job and cmdline_of(int(entry.name)).startswith(
                f"slurmstepd: [{job}."):
            found.add(int(entry.name))
    for node in slurm.nodes:
        found |= {p for p in pids_in(node["netns"]) if comm_of(p) != "slurmd"}
    return [f"{comm_of(p)} ({p})" for p in sorted(found)]


def measure(row: Row, argv: list[str], env: dict[str, str], out: Path, logs: Path,
            results: Path | None = None, slurm: Slurm | None = None,
            cwd: Path | None = None) -> tuple[Outcome, Scene]:
    """Start ``argv`` (the launcher) with ``env`` and the row's marker, its output to files
    beside ``logs``; once ``results`` (default ``out``) shows the first point, wait the row's
    delay and inject its fault; wait for the launcher's exit (bounded), then for what of it
    is left running to be gone (bounded by SETTLE_S)."""
    results = results or out
    mark = uuid.uuid4().hex
    files = logs.with_suffix(".stdout"), logs.with_suffix(".stderr")
    with files[0].open("w") as o, files[1].open("w") as e:
        proc = subprocess.Popen(argv, env={**os.environ, **env, MARK: mark}, stdout=o, stderr=e,
                                cwd=cwd, start_new_session=True)
    scene = Scene(proc, out, mark, slurm)
    state: dict[str, object] = {}

    def learn() -> None:  # what the fault and the sweep need to know: the job, rank 1's node
        for pid in _ranks(scene):
            for var, key in (("SLURM_JOB_ID", "job"), ("SLURMD_NODENAME", "node")):
                value = _var(pid, var)
                if value:
                    scene.seen[key] = value
                    if key == "node" and _var(pid, "SLURM_PROCID") == "1":
                        scene.seen["node1"] = value

    thread = at_first_point(proc, results, row.delay_s, learn, lambda: row.inject(scene), state)
    limit = 240 + row.expect.bound_s
    try:
        proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        with files[1].open("a") as e:
            e.write(f"[fault matrix] the launcher did not end within {limit:.0f} s\n")
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    ended = time.monotonic()
    thread.join(timeout=10)

    def left() -> list[str]:
        pids = marked(mark, MARK)
        found = [f"{comm_of(p)} ({p})" for p in sorted(pids)]
        if slurm is not None:
            found += [x for x in slurm_leftovers(slurm, scene.seen.get("job")) if x not in found]
        return found

    at_exit, after, gone = settle(left, ended)
    for pid in marked(mark, MARK):  # the next row starts clean, whatever this one left
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    stdout, stderr = (f.read_text(errors="replace") for f in files)
    if "error" in state:
        stderr += f"\n[fault matrix] the fault could not be injected: {state['error']}"
    at = state.get("at")
    injected = isinstance(at, float) and "error" not in state
    return Outcome(
        injected=injected, code=proc.returncode,
        fault_to_exit_s=ended - at if isinstance(at, float) else None,
        headline=headline(stderr) or _first_error(stderr), records=read_records(results),
        left_at_exit=at_exit, left_after=after,
        gone_s=gone - at if isinstance(at, float) and gone is not None else None,
        stderr=stderr, stdout=stdout), scene


def _first_error(stderr: str) -> str:
    """The launcher's own first error line where fabbench wrote none (srun's, torchrun's)."""
    return next((line.strip() for line in stderr.splitlines()
                 if re.search(r"error|Error|failed", line)), "")


# --- the launchers: how each row's run is started ---------------------------------------------
def srun_launch(slurm: Slurm, out: Path) -> tuple[list[str], dict[str, str]]:
    """A step of 2 `fabbench run` ranks over Gloo, one on node0 and one on node1 (rank 1),
    started by srun from this host as a rendered job's step is (--kill-on-bad-exit=1), the
    rendezvous at node0. --immediate bounds the wait for the nodes: a row whose job is queued
    fails in a minute, saying so, not at the row's deadline."""
    port = 30000 + uuid.uuid4().int % 10000
    return (["srun", "--kill-on-bad-exit=1", "--immediate=60", "--nodes=2", "--ntasks-per-node=1",
             "--nodelist=node0,node1", "--job-name=fabbench-fault", FABBENCH, "run",
             "--primitive", "gloo", "--iface", "fbnet0", *SWEEP, "--out", str(out)],
            {**slurm.env, "MASTER_ADDR": slurm.node("node0")["address"],
             "MASTER_PORT": str(port)})


def torchrun_launch(out: Path) -> tuple[list[str], dict[str, str]]:
    """torchrun starting 2 `fabbench run` ranks over Gloo on this host (its own rendezvous on a
    free port: --standalone)."""
    torchrun = str(Path(sys.executable).parent / "torchrun")
    return ([torchrun, "--standalone", "--nproc-per-node", "2", "--no-python", FABBENCH, "run",
             "--primitive", "gloo", "--iface", "lo", *SWEEP, "--out", str(out)], {})


STUDY = """name = "faults"
description = "one cell, its study stopped while it runs"
matrix = { fabric = ["ethernet"], primitive = ["gloo"], workload = ["allreduce"], nodes = [1] }
run = { ranks_per_node = 2, timeout = 5, deadline = 120 }
workload.allreduce = { kind = "collectives", ops = "allreduce", sizes = "1M,16M", budget = 3 }
"""
CELL = "allreduce-ethernet-gloo-n1"


def study_launch(folder: Path) -> tuple[list[str], Path, Path]:
    """`fabbench study run` of STUDY into ``folder``/out: its argv, its directory, and the
    results file of its one cell."""
    source = folder / "faults.toml"
    source.write_text(STUDY)
    directory = folder / "out"
    return ([sys.executable, "-m", "fabbench", "study", "run", str(source), "--out",
             str(directory)], directory, directory / "cells" / f"{CELL}.jsonl")


# --- the rows ---------------------------------------------------------------------------------
LAUNCHERS = ("srun", "torchrun", "study")
# how torchrun reports workers that failed, or its own stop: a traceback ending in its exception
TORCHRUN_FAILED = (r"torch\.distributed\.elastic\.multiprocessing\.(errors\.ChildFailedError|"
                   r"api\.SignalException)")
ROWS: tuple[Row, ...] = (
    Row(launcher="srun", name="rank-kill", what="the rank on node1 (rank 1) killed (SIGKILL)",
        inject=kill_rank_1("SLURM_PROCID"),
        # rank 0's connection is reset and its line names the operation; srun (asked to
        # --kill-on-bad-exit) ends the step with 128 + 9 and names the node, task and signal;
        # slurmstepd on node0 may outlive srun by a few seconds, ending the step. srun's
        # SIGTERM to rank 0 may come before rank 0 sees the reset (a CI run of 6e5311c): then
        # rank 0 says it was stopped, and srun's line is what names the killed rank
        expect=Expect(code=(137,), headline=r"failed in allreduce of 16777216 bytes.*"
                      + PEER_GONE + "|stopped by signal 15", said=r"node1: task 1: Killed",
                      ok=False, why=PEER_GONE + "|rank 0 was stopped by signal 15",
                      bound_s=15, settles=True)),
    Row(launcher="srun", name="slurmd-kill",
        what="slurmd of node1 (the node of rank 1) killed (SIGKILL)",
        inject=kill_slurmd_of_rank_1,
        # slurmd is not in the step's path: slurmstepd runs the rank and talks to srun itself,
        # so the run ends well (the seconds are the rest of the run). That node's slurmstepd
        # reports the step's end to its slurmd, which is dead: it may outlive srun's exit a
        # moment (a CI run of d4f8f8a), and must still be gone within SETTLE_S
        expect=Expect(code=(0,), headline=None, ok=True, bound_s=45,
                      lingers=r"slurmstepd \(\d+\)$")),
    # slurmstepd sends every rank SIGTERM: each unwinds, rank 0 writes the summary saying so
    Row(launcher="srun", name="scancel", what="the job cancelled (scancel)", inject=scancel,
        expect=Expect(code=(143,), headline=r"stopped by signal 15",
                      said=r"STEP \d+\.0 ON node0 CANCELLED", ok=False,
                      why=r"rank 0 was stopped by signal 15", bound_s=15, settles=True)),
    Row(launcher="torchrun", name="rank-kill", what="local rank 1 killed (SIGKILL)",
        # torchrun reports the failed workers (its ChildFailedError: rank 1's SIGKILL as the
        # root cause) and exits 1; rank 0 names its connection reset (or closed: a CI run), or,
        # when torchrun's SIGTERM comes first (1 repeat of 3), that it was stopped
        inject=kill_rank_1("RANK"),
        expect=Expect(code=(1,), headline=r"failed in allreduce of 16777216 bytes.*"
                      + PEER_GONE + "|stopped by signal 15",
                      said=r"exitcode\s*: -9 .*\(SIGKILL\)", ok=False,
                      why=PEER_GONE + "|rank 0 was stopped by signal 15", bound_s=15,
                      traceback=TORCHRUN_FAILED)),
    # torchrun sends its workers SIGTERM: each unwinds, rank 0 writes the summary saying so;
    # torchrun then raises its SignalException and exits 1
    Row(launcher="torchrun", name="launcher-term", what="torchrun sent SIGTERM",
        inject=signal_launcher(signal.SIGTERM),
        expect=Expect(code=(1,), headline=r"stopped by signal 15",
                      said="Received 15 death signal, shutting down workers", ok=False,
                      why=r"rank 0 was stopped by signal 15", bound_s=15,
                      traceback=TORCHRUN_FAILED)),
    # torchrun's workers die with it (the rank arms PR_SET_PDEATHSIG: torchrun starts them in
    # sessions of their own, and before, they ran the sweep on and wrote ok: true); rank 0
    # writes the summary saying it was stopped
    Row(launcher="torchrun", name="launcher-kill", what="torchrun sent SIGKILL",
        inject=signal_launcher(signal.SIGKILL),
        expect=Expect(code=(-9,), headline=None, ok=False,
                      why=r"rank 0 was stopped by signal 15", bound_s=5, settles=True)),
    Row(launcher="study", name="launcher-term", what="`fabbench study run` sent SIGTERM",
        inject=signal_launcher(signal.SIGTERM),
        expect=Expect(code=(1,), headline=r"study stopped by SIGTERM", ok=False,
                      why="stopped by signal", bound_s=20)),
    Row(launcher="study", name="launcher-kill", what="`fabbench study run` sent SIGKILL",
        inject=signal_launcher(signal.SIGKILL),
        expect=Expect(code=(-9,), headline=None, ok=False, why="stopped by signal 15",
                      bound_s=5, settles=True)),
)


def run_row(row: Row, folder: Path, slurm: Slurm | None = None) -> tuple[Outcome, Scene]:
    """Run ``row`` in ``folder`` (its files there); ``slurm`` for the srun rows."""
    folder.mkdir(parents=True, exist_ok=True)
    logs = folder / f"{row.launcher}-{row.name}"
    if row.launcher == "srun":
        if slurm is None:
            raise ValueError("an srun row needs the Slurm cluster")
        slurm.wait_free()
        out = folder / "results.jsonl"
        argv, env = srun_launch(slurm, out)
        return measure(row, argv, env, out, logs, slurm=slurm)
    if row.launcher == "torchrun":
        out = folder / "results.jsonl"
        argv, env = torchrun_launch(out)
        return measure(row, argv, env, out, logs)
    argv, directory, cell = study_launch(folder)
    return measure(row, argv, {}, directory / "study.json", logs, results=cell)
