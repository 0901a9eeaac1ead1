"""The hybrid model across emulated nodes, ranks in the image: `fabbench emulate --nodes 2 --link
1gbit --image IMG --runtime R -- run --primitive P`, where the host's launcher starts one
containerised `fabbench run` per slot (mpi: the host's mpirun over the cluster's hostfile and
namespace agent; gloo: one process per rank, rendezvous at node 0), under Apptainer (sid's 1.4
from .ci/apptainer.sh, as the unprivileged user, the SIF mounted with squashfuse) and under
Charliecloud's ch-run (the directory image).

Each run must show that the bytes crossed the 1 Gbit/s wire (busbw at 64 MiB at most 1.05 x
0.125 GB/s), that the ranks came up on 2 hosts, and that every rank ran in the container (the
run record's rank_containers). After every test, passed or failed: no namespace, bridge or
state of its cluster, no mount, loop device or process of the user is left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, stop
from fabbench.results.reader import read_results
from fabbench.results.records import Run
from integration.test_apptainer import (  # noqa: F401  (fixtures)
    APPTAINER,
    BUILD_TIMEOUT_S,
    SIF_TIMEOUT_S,
    USER,
    Sif,
    clean_env,
    sif,
    user_dir,
)
from integration.test_charliecloud import ChImage, host_env, image  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(BUILD_TIMEOUT_S + SIF_TIMEOUT_S + 1800),
]

LINK_GBYTE_S = 1e9 / 8 / 1e9  # 1 Gbit/s
SIZE = 64 * 2**20
RUN = ["--fabric", "ethernet", "--iface", "fbnet0", "--sizes", f"8,{SIZE}",
       "--ops", "allreduce", "--budget", "0.3", "--timeout", "120", "--out", "r.jsonl"]
TRANSPORT = {"mpi": "ob1/tcp", "gloo": "gloo/tcp"}


def emulate_in_image(runtime: str, img: str, primitive: str, cwd: Path,
                     env: dict[str, str]) -> tuple[subprocess.CompletedProcess, int]:
    """`fabbench emulate ... --image IMG --runtime RUNTIME -- run --primitive P` in CWD;
    returns it and the pid that owned the cluster."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabbench", "emulate", "--nodes", "2", "--link", "1gbit",
         "--max-time", "400", "--image", img, "--runtime", runtime, "--",
         "run", "--primitive", primitive, *RUN],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=480)
    finally:
        stop(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


def cluster_left(pid: int) -> list[str]:
    """What the cluster owned by ``pid`` left: namespaces, links, state."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                           timeout=30, check=False).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           timeout=30, check=False).stdout
    left = [ln.split()[0] for ln in netns.splitlines() if ln.startswith(f"fabbench-{pid}-")]
    left += [w for w in links.split() if w.rstrip(":").split("@")[0] in
             (f"fbbr{pid}", f"fbv{pid}n0", f"fbv{pid}n1")]
    return left + [str(p) for p in [Path(f"/run/fabbench/emulate/{pid}")] if p.exists()]


def user_processes_end(deadline_s: float = 20) -> None:
    """Ranks stopped with their cluster may take a moment to be reaped (their PID namespace's
    init goes last); user_dir then checks that nothing of the user is left."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and subprocess.run(
            ["pgrep", "-u", USER], capture_output=True, timeout=10, check=False).returncode == 0:
        time.sleep(0.5)


def check(path: Path, runtime: str, primitive: str) -> Run:
    results = read_results(path)  # validated against the schema
    run, summary = results.records[0], results.records[-1]
    assert summary.kind == "summary" and summary.ok is True, summary
    assert run.ranks == 2 and run.nodes == 2, run.rank_hosts
    assert run.rank_hosts == ["node0", "node1"]
    assert run.transport == TRANSPORT[primitive] and run.interface == "fbnet0"
    assert run.provenance.container == runtime
    assert run.rank_containers == [runtime, runtime]  # every rank, not only rank 0
    big = [c for c in results.of_kind("collective") if c.bytes == SIZE]
    assert len(big) == 1, results.of_kind("collective")
    # the bytes crossed the 1 Gbit/s wire: a loopback or shared-memory path would be far faster
    assert 0 < big[0].busbw_gbyte_s <= 1.05 * LINK_GBYTE_S, big[0]
    return run


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_apptainer_ranks_across_two_nodes(sif: Sif, user_dir: Path, primitive):  # noqa: F811
    # the SIF as apptainer sees it in its root (the user cannot reach root's cache)
    env = clean_env(FABBENCH_APPTAINER=f"{APPTAINER} exec --fuse --cwd {user_dir} -- apptainer")
    res, pid = emulate_in_image("apptainer", sif.path, primitive, user_dir, env)
    try:
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        assert "apptainer exec" in res.stderr  # the launcher line, as emulate printed it
        run = check(user_dir / "r.jsonl", "apptainer", primitive)
        assert run.provenance.container_version == sif.version
        assert (user_dir / "r.jsonl").stat().st_uid == int(subprocess.run(
            ["id", "-u", USER], capture_output=True, text=True, timeout=10).stdout)
    finally:
        assert cluster_left(pid) == []
        user_processes_end()


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_charliecloud_ranks_across_two_nodes(image: ChImage, tmp_path, primitive):  # noqa: F811
    res, pid = emulate_in_image("charliecloud", str(image.dir), primitive, tmp_path,
                                host_env())
    try:
        assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
        assert "ch-run --set-env" in res.stderr
        check(tmp_path / "r.jsonl", "charliecloud", primitive)
    finally:
        assert cluster_left(pid) == []


@pytest.mark.skipif(shutil.which("ch-run") is None, reason="needs ch-run")
def test_a_missing_image_is_refused_before_any_node(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "FABBENCH_CH_RUN"}
    res, pid = emulate_in_image("charliecloud", str(tmp_path / "none.sqfs"), "mpi", tmp_path,
                                env)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        f"fabbench: error: --image {tmp_path / 'none.sqfs'}: no such file or directory"]
    assert cluster_left(pid) == [] and not list(tmp_path.iterdir())


def test_the_image_runs_only_a_run(tmp_path):
    res = subprocess.run([sys.executable, "-m", "fabbench", "emulate", "--image", str(REPO),
                          "--runtime", "podman", "--", "run", "--primitive", "mpi"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "fabbench: error: --runtime must be one of apptainer, charliecloud, not 'podman'"]
