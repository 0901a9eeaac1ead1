"""The lifetimes of an emulated cluster: around one fabbench command (`emulate run -- run ...`),
or standing (`emulate up` starts a small holder process that owns the cluster until `emulate down`
or a signal). Teardown always runs: after success, failure, Ctrl-C and SIGTERM; a SIGKILLed
owner's objects are removed by the next `emulate`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from fabbench.emulate import net
from fabbench.emulate.cluster import ENV, STATE_FILE, Cluster
from fabbench.emulate.cluster import read as read_cluster
from fabbench.emulate.cluster_spec import Emulation, Link
from fabbench.emulate.site import SITE_ENV, Site
from fabbench.errors import RunError, UsageError
from fabbench.procs import signals_unwind, stop_groups, wait_group

HOLDER = "fabbench.emulate.hold"
UP_DEADLINE_S = 120
DOWN_DEADLINE_S = 60
STOP_GRACE_S = 10.0  # after the first signal, the command stops its ranks; then SIGKILL


@contextlib.contextmanager
def emulated(emulation: Emulation, *, standing: bool = False) -> Iterator[Cluster]:
    """A cluster owned by this process for the duration of the block."""
    net.require_privileges()
    net.sweep_stale()
    with signals_unwind():
        cluster = net.build(emulation, standing=standing)
        try:
            yield cluster
        finally:
            # a second signal during teardown must not leave objects behind
            with _ignoring_signals():
                failed = net.teardown(cluster.owner_pid)
            if failed:
                raise RunError(f"could not remove {', '.join(failed)}")


@contextlib.contextmanager
def _ignoring_signals() -> Iterator[None]:
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    saved = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
    try:
        yield
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


def run_under(emulation: Emulation, argv: list[str], max_time_s: float) -> int:
    """Run `fabbench ARGV` (e.g. run ...) against a fresh cluster; returns its exit code."""
    if not argv:
        raise UsageError("give the fabbench command to run after `--`, e.g. "
                         "`fabbench emulate --nodes 2 --link 1gbit -- run --primitive mpi`")
    with emulated(emulation) as cluster:
        describe(cluster)
        return _fabbench(argv, {ENV: str(cluster.state_file)}, max_time_s)


def run_study(site: Site, argv: list[str], max_time_s: float) -> int:
    """Run `fabbench study run ...` as the emulated ``site`` would (emulate/site.py): each cell
    makes its own cluster of the site's shape. Returns the study's exit code."""
    if argv[:2] != ["study", "run"]:
        raise UsageError("an emulated site runs `-- study run STUDY --out DIR`")
    net.require_privileges()
    print(f"fabbench: emulate: study on an emulated site of {site.nodes} nodes: "
          + describe_links(site.emulation)
          + (f"; ranks in {site.image} ({site.runtime})" if site.image else ""),
          file=sys.stderr, flush=True)
    with signals_unwind():
        return _fabbench(argv, {SITE_ENV: site.to_json()}, max_time_s)


def _fabbench(argv: list[str], env: dict[str, str], max_time_s: float) -> int:
    """`fabbench ARGV` in a session of its own with ``env`` added, stopped at ``max_time_s``
    or when this process is interrupted; its exit code."""
    child = subprocess.Popen([sys.executable, "-m", "fabbench", *argv],
                             env={**os.environ, **env}, start_new_session=True)
    code = wait_group(child, max_time_s, STOP_GRACE_S)
    if code is None:
        print(f"fabbench: error: emulate: `fabbench {' '.join(argv)}` ran past "
              f"--max-time {max_time_s:.0f} s; stopped it", file=sys.stderr)
        return 124
    return code


def describe_links(emulation: Emulation) -> str:
    """"node0-2 1 Gbit/s, node3 0.25 Gbit/s": each node's link rate, runs of equal ones joined."""
    rates = [emulation.link_of(i).rate_bit_s for i in range(emulation.nodes)]
    parts, start = [], 0
    for i in range(1, len(rates) + 1):
        if i == len(rates) or rates[i] != rates[start]:
            nodes = f"node{start}" if i - 1 == start else f"node{start}-{i - 1}"
            parts.append(f"{nodes} {rates[start] / 1e9:g} Gbit/s")
            start = i
    return ", ".join(parts)


def describe(cluster: Cluster) -> None:
    links = ", ".join(f"{n.hostname} {n.address} {n.link.rate_bit_s / 1e9:g} Gbit/s"
                      + (f" {n.link.delay_us:g} us" if n.link.delay_us else "")
                      + (f" {n.link.loss_pct:g} % loss" if n.link.loss_pct else "")
                      for n in cluster.nodes)
    print(f"fabbench: emulate: {len(cluster.nodes)} nodes on {cluster.subnet} "
          f"(interface {cluster.iface}): {links}", file=sys.stderr, flush=True)


def emulation_to_json(emulation: Emulation) -> str:
    return json.dumps({"nodes": emulation.nodes, "ranks_per_node": emulation.ranks_per_node,
                       "link": emulation.link.__dict__,
                       "overrides": {str(k): v.__dict__ for k, v in emulation.overrides.items()}})


def emulation_from_json(text: str) -> Emulation:
    data = json.loads(text)
    return Emulation(nodes=data["nodes"], ranks_per_node=data["ranks_per_node"],
                     link=Link(**data["link"]),
                     overrides={int(k): Link(**v) for k, v in data["overrides"].items()})


def up(emulation: Emulation) -> Cluster:
    """Start a holder process that builds the cluster and keeps it; return once it is ready."""
    net.require_privileges()
    net.sweep_stale()
    fd, log = tempfile.mkstemp(prefix="fabbench-emulate-", suffix=".log")
    try:
        holder = subprocess.Popen([sys.executable, "-m", HOLDER, emulation_to_json(emulation)],
                                  stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                  start_new_session=True)
        state = net.STATE_ROOT / str(holder.pid) / STATE_FILE
        end = time.monotonic() + UP_DEADLINE_S
        while not state.exists():
            if holder.poll() is not None:
                said = Path(log).read_text().strip().splitlines() or ["no message"]
                error = UsageError if holder.returncode == 2 else RunError
                raise error(f"emulate up: the cluster could not be made: "
                            f"{said[-1].removeprefix('fabbench: error: ')}")
            if time.monotonic() > end:
                stop_groups([holder], signal.SIGTERM, STOP_GRACE_S)
                raise RunError(f"emulate up: the cluster was not ready within "
                               f"{UP_DEADLINE_S} s")
            time.sleep(0.1)
    finally:
        os.close(fd)
        os.unlink(log)
    from fabbench.emulate.cluster import load

    return load(state)


def standing() -> list[Cluster]:
    """The standing clusters of live holders."""
    found = []
    if net.STATE_ROOT.is_dir():
        for d in sorted(net.STATE_ROOT.iterdir()):
            path = d / STATE_FILE
            if path.is_file():
                with contextlib.suppress(ValueError, TypeError, KeyError, OSError):
                    cluster = Cluster.from_json(path.read_text())
                    if cluster.standing and net.alive(cluster.owner_pid):
                        found.append(cluster)
    return found


def down(pid: int | None = None, *, every: bool = False) -> list[int]:
    """Stop a standing cluster, wait for its teardown, then sweep what stopped emulations left;
    the holders stopped. Which: the one held by ``pid``; else the one FABBENCH_EMULATION names;
    else the only one standing; all of them only when ``every`` says so (on a shared host another
    user's cluster is not this command's to stop)."""
    net.require_privileges()
    if pid is None and not every:
        here = os.environ.get(ENV)
        if here:  # its owner may be gone: then only what it left is swept
            pid = read_cluster(here).owner_pid
        else:
            holders = sorted(c.owner_pid for c in standing())
            if len(holders) > 1:
                raise UsageError(f"{len(holders)} emulated clusters stand (holders "
                                 f"{', '.join(map(str, holders))}): name one with --pid, or "
                                 "stop them all with --all")
    clusters = [c for c in standing() if pid is None or c.owner_pid == pid]
    if pid is not None and not clusters and net.alive(pid):
        raise UsageError(f"pid {pid} holds no standing emulated cluster")
    for c in clusters:
        if _is_holder(c.owner_pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.owner_pid, signal.SIGTERM)
    end = time.monotonic() + DOWN_DEADLINE_S
    while any(net.alive(c.owner_pid) for c in clusters):
        if time.monotonic() > end:
            raise RunError("emulate down: holders still running after "
                           f"{DOWN_DEADLINE_S} s: "
                           + ", ".join(str(c.owner_pid) for c in clusters
                                       if net.alive(c.owner_pid)))
        time.sleep(0.1)
    net.sweep_stale()
    return [c.owner_pid for c in clusters]


def _is_holder(pid: int) -> bool:
    try:
        return HOLDER in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
