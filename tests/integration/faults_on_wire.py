"""The fault matrix of issue 36 (docs/faults.md), in one place for its test
(tests/integration/test_fault_matrix.py) and its bench (bench/fault_matrix.py): a standing
cluster of 2 emulated nodes, a short `fabbench run` on it, one fault injected once the run's
results file shows its first point, and what followed, measured: seconds from the fault to the
run's exit, its exit code, its headline, its results file, and what of the run was left running.

Needs root (network namespaces). Nothing here imports pytest, so that the bench can use it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from fabbench import procs
from fabbench.launch.rundir import alive

# a column of the matrix -> `fabbench run`'s options choosing it ("horovod": Horovod over its MPI
# controller, mpirun and orted; "horovod-gloo": over Gloo, started by horovodrun --gloo)
PRIMITIVES = ("mpi", "gloo", "horovod", "horovod-gloo")
CHOOSE = {"horovod-gloo": ("--primitive", "horovod", "--horovod-over", "gloo")}
RANK_MODULE = "fabbench.launch.rank"
MARKER = "FABBENCH_RUNDIR"  # fabbench.launch.rundir.ENV: every process of a run carries it
FLAP_S = 5.0
FIRST = 1 << 20  # the first point's size: the fault comes once it is in the results file


def sweep(budget_s: float) -> tuple[str, ...]:
    """A row's run: allreduce at the first point and 16 MiB, each point lasting ``budget_s``."""
    return ("--ops", "allreduce", "--sizes", "1M,16M", "--budget", f"{budget_s:g}",
            "--no-ceiling")


SWEEP = sweep(3)
# the rows with no fault to land mid-point (the control, the lossy link): shorter points
SWEEP_WELL = sweep(1)
TIMEOUT_S = 5  # --timeout of every row but the flap's
# how Gloo names a peer that was killed: its socket reset, or closed (a FIN: the dead peer had
# nothing unread; a CI run's torchrun row on loopback)
PEER_GONE = r"Connection (reset|closed) by peer"
SETTLE_S = 15.0  # how long after the run's exit its processes may take to be gone


def fabbench_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "fabbench", *args]


@dataclass(frozen=True)
class Cluster:
    """A standing cluster: its environment (FABBENCH_EMULATION) and its nodes' namespaces."""

    env: dict[str, str]
    namespaces: tuple[str, ...]


@contextlib.contextmanager
def standing(*extra: str) -> Iterator[Cluster]:
    """`fabbench emulate up --nodes 2 --link 1gbit EXTRA`, taken down on leaving."""
    up = subprocess.run(fabbench_argv("emulate", "up", "--nodes", "2", "--link", "1gbit",
                                      *extra), capture_output=True, text=True, timeout=120,
                        check=False)
    found = re.search(r"FABBENCH_EMULATION=(\S+)", up.stdout)
    if up.returncode != 0 or not found:
        raise RuntimeError(f"emulate up failed: {up.stderr[-2000:]}")
    env = {"FABBENCH_EMULATION": found.group(1)}
    state = json.loads(Path(found.group(1)).read_text())
    try:
        yield Cluster(env, tuple(n["netns"] for n in state["nodes"]))
    finally:
        down = subprocess.run(fabbench_argv("emulate", "down"), capture_output=True, text=True,
                              timeout=120, check=False, env={**os.environ, **env})
        if down.returncode != 0:
            raise RuntimeError(f"emulate down failed: {down.stderr[-2000:]}")


# --- what runs where -------------------------------------------------------------------------
def pids_in(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True,
                         timeout=10, check=False).stdout.split()
    return [int(p) for p in out if alive(int(p))]


def comm_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def cmdline_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def environ_of(pid: int) -> bytes:
    try:
        return b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def marker_of(pids: list[int]) -> str | None:
    """The run's marker (its launcher's directory), as one of its processes carries it."""
    for pid in pids:
        found = re.search(rb"\0" + MARKER.encode() + rb"=([^\0]+)", environ_of(pid))
        if found:
            return found.group(1).decode()
    return None


def marked(value: str, name: str = MARKER) -> list[int]:
    """Every live process (but this one) whose environment holds ``name=value``."""
    return [pid for pid, _ in procs.marked(name, value) if alive(pid)]


def left(cluster: Cluster, marker: str | None) -> list[str]:
    """What of the run still runs: every process in a node's namespace, and on the host every
    process carrying the run's marker, as "comm (pid)"."""
    pids = {p for ns in cluster.namespaces for p in pids_in(ns)}
    if marker:
        pids |= set(marked(marker))
    return [f"{comm_of(p)} ({p})" for p in sorted(pids)]


def on_node(cluster: Cluster, node: int, what: Callable[[int], bool]) -> int | None:
    return next((p for p in pids_in(cluster.namespaces[node]) if what(p)), None)


# --- the faults -------------------------------------------------------------------------------
@dataclass
class Target:
    """What a fault may act on: the cluster, the `fabbench run` process, its results file."""

    cluster: Cluster
    run: subprocess.Popen
    out: Path


def _link(cluster: Cluster, state: str) -> None:
    subprocess.run(["ip", "-n", cluster.namespaces[1], "link", "set", "fbnet0", state],
                   check=True, timeout=10)


def link_down(t: Target) -> None:
    _link(t.cluster, "down")


def flap(t: Target) -> None:
    _link(t.cluster, "down")
    time.sleep(FLAP_S)
    _link(t.cluster, "up")


def nothing(t: Target) -> None:
    """No fault (the control row), or one the cluster has from the start (a lossy link): the
    point the others' faults come at is marked all the same."""


def _kill_on_node1(t: Target, what: Callable[[int], bool], name: str) -> None:
    pid = on_node(t.cluster, 1, what)
    if pid is None:
        raise LookupError(f"no {name} on node 1: {left(t.cluster, None)}")
    os.kill(pid, signal.SIGKILL)


def is_rank(pid: int) -> bool:
    """The rank itself (python -m fabbench.launch.rank), not a shell whose command names it."""
    return cmdline_of(pid).split()[1:3] == ["-m", RANK_MODULE]


def kill_rank(t: Target) -> None:
    _kill_on_node1(t, is_rank, "rank")


def kill_daemon(t: Target) -> None:
    """Node 1's daemon: Open MPI's orted; under horovodrun, which has none, the shell its ssh
    runs the rank in (the session an sshd would hold; here the emulation's agent's)."""
    _kill_on_node1(t, lambda p: comm_of(p) in ("orted", "prted") or (
        comm_of(p) == "sh" and RANK_MODULE in cmdline_of(p)), "orted or the rank's shell")


@contextlib.contextmanager
def small_disk(folder: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted on ``folder`` (made), unmounted on leaving."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "fabbench-fault", str(folder)],
                   check=True, timeout=10)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True, timeout=30)


def fill_disk(t: Target) -> None:
    """Fill the results file's file system to the last byte: the next record cannot be written
    (whole, at least: what fits in the file's last page is written, and the rest refused)."""
    wrote = 0
    with contextlib.suppress(OSError), (t.out.parent / "filler").open("wb", buffering=0) as f:
        while True:
            wrote += f.write(b"\0" * 4096) or 0
    free = os.statvfs(t.out.parent)
    if free.f_bavail:  # the fault is not there: said, not taken for the run's doing
        raise RuntimeError(f"{t.out.parent} still has {free.f_bavail * free.f_frsize} bytes "
                           f"free after {wrote} bytes of filler")


def term_launcher(t: Target) -> None:
    t.run.send_signal(signal.SIGTERM)


def kill_launcher(t: Target) -> None:
    t.run.send_signal(signal.SIGKILL)


@dataclass(frozen=True, kw_only=True)
class Expect:
    """The right outcome of a row, as measured and judged right (docs/faults.md says why):
    the exit codes it may end with (a Popen returncode: -9 is killed by SIGKILL); a pattern
    fabbench's headline (its first `fabbench: error` line, else its first line) must match
    (None: no headline, the run ended well or could say nothing); a pattern the library's own
    text on stderr must match; the summary's ``ok`` and a pattern its error must match (None:
    no summary can be written); the bound on seconds from the fault to the exit; whether the
    run's processes may outlive its exit for a moment (its launcher was killed: they must be
    gone within SETTLE_S), else none may be left at the exit; and whether the file has room for
    the summary (if not, the launcher must say it wrote none)."""

    code: tuple[int, ...]
    headline: str | None
    ok: bool | None
    why: str = ""
    said: str = ""
    bound_s: float = 30.0
    settles: bool = False
    # what alone may still run at the exit and be gone within SETTLE_S (a pattern the
    # "name (pid)" entry must match), where the rest must be gone at the exit
    lingers: str = ""
    # the summary may not fit (a full disk): then the launcher must say it wrote none
    room: bool = True
    # a launcher that reports a failed job with a traceback of its own (torchrun): a pattern
    # its exception line must match; any other traceback is a problem
    traceback: str | None = None
    # a fault the launcher notices only at the job's end (a killed daemon whose ranks go on):
    # the ranks may finish every point first; then rank 0's ok summary stands, and the
    # headline must say so (runner._close_unfinished)
    may_finish: bool = False


FINISHED = r"every measurement had finished, and rank 0's summary says ok"


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One row of the matrix: its name, what it does (for people), its cluster's extra
    `emulate up` options, the run's --timeout, the injection, and the right outcome for each
    primitive (a primitive it does not apply to is missing, with the reason in ``absent``)."""

    name: str
    what: str
    inject: Callable[[Target], None]
    expect: dict[str, Expect]
    cluster: tuple[str, ...] = ()
    timeout_s: int = TIMEOUT_S
    # a primitive's own --timeout for this row, where it needs a longer one than timeout_s
    timeouts: dict[str, int] = field(default_factory=dict)
    delay_s: float = 1.0  # after the first point: the fault comes during the 16 MiB point
    absent: dict[str, str] = field(default_factory=dict)
    sweep: tuple[str, ...] = SWEEP
    # where the results file goes: a folder made for it (None: the caller's)
    disk: Callable[[Path], contextlib.AbstractContextManager[Path]] | None = None


# --- one row, run and measured ----------------------------------------------------------------
@dataclass
class Outcome:
    """What one run of a row did."""

    injected: bool
    code: int | None
    fault_to_exit_s: float | None
    headline: str
    records: list[dict]
    left_at_exit: list[str]
    left_after: list[str]  # still running SETTLE_S after the exit
    gone_s: float | None  # from the fault until nothing of the run was left
    stderr: str
    stdout: str

    @property
    def summary(self) -> dict | None:
        return self.records[-1] if self.records and self.records[-1].get("kind") == "summary" \
            else None

    def points(self) -> list[int]:
        return [r["bytes"] for r in self.records if r.get("kind") == "collective"]


def read_records(out: Path) -> list[dict]:
    """Every line of the results file, parsed (a line that does not parse fails here)."""
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def headline(stderr: str) -> str:
    """fabbench's own account of the run's end: its first error line (else its first line); a
    rank's line as horovodrun passes it on ("[1]<stderr>:fabbench: error: rank 1: ...") too."""
    lines = [line.strip() for line in (re.sub(r"^\[\d+\]<stderr>:", "", raw)
                                       for raw in stderr.splitlines())
             if line.startswith("fabbench:")]
    return next((line for line in lines if line.startswith("fabbench: error")),
                lines[0] if lines else "")


def run_row(cluster: Cluster, primitive: str, fault: Fault, out: Path) -> Outcome:
    """Run ``fault``'s row for ``primitive`` on ``cluster``, results to ``out`` (or to a file
    of that name on the row's own disk, beside it), its output beside ``out``."""
    if fault.disk is None:
        return _run_row(cluster, primitive, fault, out, out)
    with fault.disk(out.parent / f"{out.stem}.disk") as folder:
        outcome = _run_row(cluster, primitive, fault, folder / out.name, out)
        if (folder / out.name).exists():  # kept where the caller looks, the disk goes
            shutil.copyfile(folder / out.name, out)
        return outcome


def at_first_point(run: subprocess.Popen, results: Path, delay_s: float,
                   learn: Callable[[], None], inject: Callable[[], None],
                   state: dict[str, object]) -> threading.Thread:
    """A thread, started: once ``results`` holds the first point (within 180 s, while ``run``
    runs), ``delay_s`` later, it calls ``learn`` (what the fault and the sweep must know
    first), notes the moment (state["at"]) and calls ``inject`` (its failure: state["error"])."""
    def wait_then_inject() -> None:
        end = time.monotonic() + 180
        needle = f'"bytes":{FIRST}'
        while time.monotonic() < end and run.poll() is None:
            if results.exists() and needle in results.read_text(errors="replace"):
                time.sleep(delay_s)
                learn()
                state["at"] = time.monotonic()
                try:
                    inject()
                except Exception as exc:  # noqa: BLE001 - said in the outcome
                    state["error"] = f"{type(exc).__name__}: {exc}"
                return
            time.sleep(0.1)

    thread = threading.Thread(target=wait_then_inject, daemon=True)
    thread.start()
    return thread


def _run_row(cluster: Cluster, primitive: str, fault: Fault, out: Path,
             beside: Path) -> Outcome:
    expect = fault.expect[primitive]
    argv = fabbench_argv("run", *CHOOSE.get(primitive, ("--primitive", primitive)),
                         *fault.sweep, "--timeout",
                         str(fault.timeouts.get(primitive, fault.timeout_s)), "--out", str(out))
    # its output to files, not pipes: the ranks of a killed launcher would hold a pipe open,
    # and the run's exit is the process's, not its pipes' end
    logs = beside.with_suffix(".stdout"), beside.with_suffix(".stderr")
    with logs[0].open("w") as o, logs[1].open("w") as e:
        run = subprocess.Popen(argv, env={**os.environ, **cluster.env}, stdout=o, stderr=e)
    state: dict[str, object] = {}

    def learn() -> None:  # the run's marker, read from its processes before any of them goes
        state["marker"] = marker_of([p for ns in cluster.namespaces for p in pids_in(ns)])

    thread = at_first_point(run, out, fault.delay_s, learn,
                            lambda: fault.inject(Target(cluster, run, out)), state)
    limit = 240 + expect.bound_s
    try:
        run.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        logs[1].open("a").write(f"[fault matrix] the run did not end within {limit:.0f} s\n")
    finally:
        if run.poll() is None:
            run.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.wait(timeout=15)
            run.kill()
            run.wait(timeout=30)
    ended = time.monotonic()
    thread.join(timeout=2 * FLAP_S)
    _link(cluster, "up")  # the cluster stays usable for the next row (a no-op if it is up)
    stdout, stderr = (log.read_text(errors="replace") for log in logs)
    if "error" in state:
        stderr += f"\n[fault matrix] the fault could not be injected: {state['error']}"
    marker = state.get("marker") if isinstance(state.get("marker"), str) else None
    at_exit, after, gone = settle(lambda: left(cluster, marker), ended)  # type: ignore[arg-type]
    if marker and Path(marker).name.startswith("fabbench-run-"):
        # a killed launcher cannot remove its run directory (the ranks' pid files): we do
        shutil.rmtree(marker, ignore_errors=True)
    at = state.get("at")
    injected = isinstance(at, float) and "error" not in state
    return Outcome(
        injected=injected, code=run.returncode,
        fault_to_exit_s=ended - at if isinstance(at, float) else None,
        headline=headline(stderr), records=read_records(out), left_at_exit=at_exit,
        left_after=after,
        gone_s=gone - at if isinstance(at, float) and gone is not None else None,
        stderr=stderr, stdout=stdout)


def settle(running: Callable[[], list[str]], ended: float
           ) -> tuple[list[str], list[str], float | None]:
    """What ``running`` says is left at the run's exit (``ended``, monotonic), what is left
    SETTLE_S later (polled until nothing is), and when nothing was left (None: never)."""
    at_exit = running()
    after, gone = at_exit, ended if not at_exit else None
    while after and time.monotonic() < ended + SETTLE_S:
        time.sleep(0.2)
        after = running()
        if not after:
            gone = time.monotonic()
    return at_exit, after, gone


def problems(outcome: Outcome, expect: Expect) -> list[str]:
    """How ``outcome`` differs from ``expect``: empty when the row ended as it should."""
    o, found = outcome, []
    if not o.injected:
        return [f"the fault was not injected (the run ended first?): {o.stderr[-1500:]}"]
    if o.code not in expect.code:
        found.append(f"exit code {o.code}, not one of {expect.code}")
    if o.fault_to_exit_s is None or o.fault_to_exit_s > expect.bound_s:
        found.append(f"ended {o.fault_to_exit_s} s after the fault (bound {expect.bound_s} s)")
    if expect.headline is None and o.headline.startswith("fabbench: error"):
        found.append(f"an error headline where none was due: {o.headline}")
    if expect.headline is not None and not re.search(expect.headline, o.headline):
        found.append(f"headline {o.headline!r} does not match {expect.headline!r}")
    if "Traceback" in o.stderr and not (
            expect.traceback and o.stderr.count("Traceback") == 1
            and re.search(expect.traceback, o.stderr.split("Traceback", 1)[1])):
        found.append("a traceback on stderr")
    if expect.said and not re.search(expect.said, o.stderr):
        found.append(f"stderr does not say {expect.said!r}")
    recs = o.records
    if not recs or recs[0].get("kind") != "run" or FIRST not in o.points():
        found.append(f"the records before the fault are not intact: {recs[:3]}")
    if expect.ok is True and o.points() != [FIRST, 16 << 20]:
        found.append(f"the points measured are {o.points()}, not both")
    summary = o.summary
    if (expect.may_finish and summary is not None and summary.get("ok") is True
            and re.search(FINISHED, o.headline)):
        if o.points() != [FIRST, 16 << 20]:
            found.append(f"an ok summary, but the points measured are {o.points()}")
        expect = replace(expect, ok=True)
    if expect.ok is None and summary is not None:
        found.append(f"a summary where none can be written: {summary}")
    if summary is None and not expect.room and "no summary written" in o.stderr:
        pass
    elif expect.ok is not None and (summary is None or summary.get("ok") is not expect.ok):
        # what the file held and when the run's processes were gone: a summary missing once
        # in CI (torchrun launcher-kill) could not be made to miss here
        found.append(f"summary {summary}, not ok={expect.ok} (the file's records: "
                     f"{[r.get('kind') for r in o.records]}; gone {o.gone_s} s after the "
                     f"fault, left at the exit: {o.left_at_exit})")
    elif expect.ok is False and not re.search(expect.why, str(summary.get("error"))):
        found.append(f"the summary's error {summary.get('error')!r} does not say "
                     f"{expect.why!r}")
    at_exit = [p for p in o.left_at_exit if not (expect.lingers and re.match(expect.lingers, p))]
    if not expect.settles and at_exit:
        found.append(f"left running at the exit: {at_exit}")
    if o.left_after:
        found.append(f"left running {SETTLE_S:.0f} s after the exit: {o.left_after}")
    return found


# --- the rows ---------------------------------------------------------------------------------
def _all(expect: Expect, **but: Expect) -> dict[str, Expect]:
    return {p: but.get(p, expect) for p in PRIMITIVES}


SIXTEEN = r"rank \d: (timed out|failed) in allreduce of 16777216 bytes"
# horovodrun's line (launch/horovodrun_main.py) naming the first rank to end non-zero: the killed
# one, or rank 0 when its own failure ended it first
HOROVODRUN_LOST = (r"horovodrun: error: Horovod detected that one or more processes exited with "
                   r"non-zero status.* Process name: [01] Exit code: (137|1)\b")
FAULTS: tuple[Fault, ...] = (
    # the control: the same run on clean links, its figures the others' yardstick
    Fault(name="none", what="no fault (the control)", inject=nothing, delay_s=0.0,
          sweep=SWEEP_WELL,
          expect=_all(Expect(code=(0,), headline=None, ok=True, bound_s=45))),
    # the rank's deadline (--timeout, 8 s with the warm-up) passes: that rank's line is the
    # headline; mpirun's abort across nodes hangs, so the launcher ends the run 5 s later
    # horovod-gloo: while horovodrun stops the ranks, a thread of its own may die mid-print
    # ("Exception in thread Thread-1 (fn)", horovod/runner/util/threads.py, safe_shell_exec),
    # past the hook launch/horovodrun_main.py sets (seen once in CI): horovodrun's own words, kept
    Fault(name="link-down", what="node 1's link taken down for good", inject=link_down,
          expect=_all(Expect(code=(1,), headline=SIXTEEN, ok=False, why="16777216 bytes"),
                      **{"horovod-gloo": Expect(code=(1,), headline=SIXTEEN, ok=False,
                                                why="16777216 bytes",
                                                traceback=r"horovod/runner/")})),
    # shorter than --timeout: TCP retransmits once the link is back, and the run ends well
    Fault(name="flap", what=f"node 1's link down {FLAP_S:.0f} s, then up (--timeout 20)",
          inject=flap, timeout_s=20,
          expect=_all(Expect(code=(0,), headline=None, ok=True, bound_s=45))),
    # TCP hides the loss: slower figures, not a failure ("fault to exit": from the first point).
    # Horovod over Gloo does not start within 2 x 5 s on this link (its rendezvous and mesh
    # of connections pay the retransmissions: "rank 1 timed out in starting horovod"), so it
    # has --timeout 15 here
    Fault(name="loss", what="node 1's link drops 5 % of its packets (--lossy-node 1:5%)",
          inject=nothing, cluster=("--lossy-node", "1:5%"), delay_s=0.0, sweep=SWEEP_WELL,
          timeouts={"horovod-gloo": 15},
          expect=_all(Expect(code=(0,), headline=None, ok=True, bound_s=45))),
    # gloo: the peer's connection is reset, rank 0 names it; Open MPI: mpirun names the rank
    # and the signal, and fabbench the exit code (128 + 9) with what mpirun said (notices)
    Fault(name="rank-kill", what="the rank on node 1 killed (SIGKILL)", inject=kill_rank,
          expect=_all(Expect(code=(137,), headline=r"exited with code 137; mpirun says rank 1 "
                             r"\(pid \d+\) on node \S+ exited on signal 9", ok=False,
                             why=r"exit code 137.*rank 1 .* signal 9",
                             said=r"process rank 1 .* exited on signal 9", bound_s=15),
                      gloo=Expect(code=(1, 137), headline=SIXTEEN + ".*" + PEER_GONE,
                                  ok=False, why=PEER_GONE, bound_s=15),
                      # horovodrun: rank 0's Gloo connection is reset (or closed) and it names
                      # it; horovodrun says which rank ended first and how (launch/horovodrun)
                      # or Horovod's own shut-down, when its background loop meets the
                      # reset first (its line on stderr names it; a CI run of 45d6eb8's
                      # successor)
                      **{"horovod-gloo": Expect(
                          code=(1,), headline=SIXTEEN + r".*(Connection (reset|closed)|"
                          r"Horovod has been shut down)", ok=False,
                          why="Connection (reset|closed)|Horovod has been shut down",
                          said=HOROVODRUN_LOST, bound_s=15)})),
    # horovodrun has no daemon: what stands for one on node 1 is the shell its ssh session
    # runs the rank in; killed, the rank (armed with PR_SET_PDEATHSIG) ends too. Rank 0 named
    # the reset (or Horovod's shut-down that followed it) in 2 runs of 5; in 3 it was ended by
    # a SIGTERM first (its shell says "Terminated"; strace: sent by horovodrun's own middleman
    # of slot 0, horovodrun stopping rank 0 once rank 1 has ended), and the headline is the
    # launcher's "the ranks exited with code 1" beside horovodrun's line
    Fault(name="daemon-kill", what="node 1's launcher daemon (orted; horovodrun: the rank's "
                                   "ssh session shell) killed (SIGKILL)",
          inject=kill_daemon,
          expect={p: Expect(code=(205, 1), headline=r"exited with code \d+; mpirun lost its "
                            r"daemon on node \S+", ok=False, why=r"exit code .*daemon on node",
                            said=r"lost communication with a remote daemon",
                            bound_s=15, may_finish=True) for p in ("mpi", "horovod")}
          | {"horovod-gloo": Expect(code=(1,), headline=SIXTEEN + r"|the ranks exited with code 1",
                                    ok=False, why="Connection (reset|closed)|Horovod has been shut "
                                    "down|exit code 1", said=HOROVODRUN_LOST, bound_s=15)},
          absent={"gloo": "no daemon: the launcher starts each rank itself, in its node's "
                          "namespace (the rank-kill row)"}),
    # rank 0 cannot write the next record: its line names the file and the OS's words, the
    # record is taken back whole, and the launcher writes the summary if the room is there
    Fault(name="disk-full", what="--out's file system (a 1 MiB tmpfs) filled up",
          inject=fill_disk, disk=small_disk, delay_s=0.0,
          sweep=("--ops", "allreduce", "--sizes", "1M,2M,4M,8M,16M", "--budget", "1",
                 "--no-ceiling"),
          expect=_all(Expect(code=(1,), headline=r"rank 0: cannot write results to .*: No "
                             r"space left on device", ok=False,
                             why=r"No space left on device|exit code 1",
                             bound_s=20, room=False))),
    # horovodrun stops rank 0 itself and rank 1 through its ssh session (the rank ends with
    # its shell): rank 1 may see rank 0's connection go first and say so before it ends; or
    # the launcher's first line says it stopped a python process horovodrun left a moment
    # (its multiprocessing resource tracker, as the tracker's warnings tell)
    # the 16 MiB point lasts its budget (6 s here) after the fault, so that the ranks cannot
    # finish it in the seconds the launcher takes to stop them (at --budget 3 a CI run's rank 0
    # once wrote its ok summary first)
    Fault(name="launcher-term", what="`fabbench run` sent SIGTERM", inject=term_launcher,
          sweep=sweep(6),
          expect=_all(Expect(code=(143,), headline=r"stopped by signal 15", ok=False,
                             why=r"stopped by signal 15", bound_s=15),
                      **{"horovod-gloo": Expect(
                          code=(143,), headline=r"stopped by signal 15|rank 1: failed in "
                          r"allreduce|still running after its launcher ended", ok=False,
                          why=r"stopped by signal 15", bound_s=15)})),
    # no summary can be written; the kernel sends what it started SIGTERM (PR_SET_PDEATHSIG):
    # mpirun stops its ranks and orted, a gloo rank ends. At --budget 6, as the SIGTERM row:
    # mpirun takes about 2 s to stop its ranks, and at --budget 3 a CI run's ranks (of
    # 6e5311c's successor) finished the 16 MiB point first, rank 0 writing its ok summary
    Fault(name="launcher-kill", what="`fabbench run` sent SIGKILL", inject=kill_launcher,
          sweep=sweep(6),
          expect=_all(Expect(code=(-9,), headline=None, ok=None, bound_s=5, settles=True))),
)


# Rows whose mechanism another primitive's row already tests, run by bench/fault_matrix.py for
# the table but not by `make test`: Horovod over MPI is started, watched and stopped by mpirun
# as `mpi` is, over the same ob1/tcp, its results written by the same rank 0. What it adds is
# Horovod's own loop meeting a fault (a peer that stops answering, a peer that dies) and its
# clean run; TCP's retransmissions (flap, loss), mpirun losing its daemon, rank 0's full disk
# and the launcher stopped (SIGTERM, SIGKILL) are mpirun's and fabbench's, the mpi rows' own.
# Horovod over Gloo is started and stopped by horovodrun, which its other rows test (the
# launcher stopped, its ssh session's shell killed, a rank killed or cut off); a flap or a lossy
# link is TCP's retransmissions under Gloo, the gloo rows' own, and a full disk rank 0's
# writer's, the same for every primitive (together a minute of the module's time).
REPLAYED: dict[str, frozenset[str]] = {
    "horovod": frozenset({"flap", "loss", "daemon-kill", "disk-full", "launcher-term",
                          "launcher-kill"}),
    "horovod-gloo": frozenset({"flap", "loss", "disk-full"}),
}


def rows() -> list[tuple[str, Fault]]:
    """The (primitive, fault) rows the test runs, in the matrix's order (bench/fault_matrix.py
    walks FAULTS itself, every row)."""
    return [(p, f) for f in FAULTS for p in PRIMITIVES
            if p in f.expect and f.name not in REPLAYED.get(p, ())]
