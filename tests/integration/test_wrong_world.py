"""Wrong worlds fail at start-up, on every rank, with one line, and write nothing.

The ways a hybrid launch goes wrong, reproduced as a new user meets them: a launcher fabbench did
not know (hydra's PMI_RANK/PMI_SIZE), MPI ranks that come up as singletons under a launcher of
two, two processes that claim one rank, two runs on one --out, and srun without the PMI the MPI
needs (Open MPI's own explanation must reach the user: it used to be swallowed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import needs_mpirun
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.integration, needs_mpirun]

TINY = ["--fabric", "ethernet", "--sizes", "8", "--ops", "allreduce", "--budget", "0.02",
        "--timeout", "20", "--iface", "lo"]
# variables of outer launchers the test itself may run under (never under pytest-xdist here)
LAUNCHER_VARS = ("OMPI_", "PMIX_", "PMI_", "SLURM_", "MV2_", "HOROVOD_", "RANK", "WORLD_SIZE",
                 "LOCAL_RANK", "MASTER_", "JOB_COMPLETION_INDEX", "FABBENCH_WORLD_SIZE",
                 "FABBENCH_EXPECT_NODES")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
    return {**env, **extra}


def ranks_by_hand(envs: list[dict[str, str]], args: list[str], cwd: Path,
                  timeout: float = 120) -> list[subprocess.CompletedProcess]:
    """Start one `fabbench run` per environment at once, as a launcher would; wait for all."""
    procs = [subprocess.Popen([sys.executable, "-m", "fabbench", "run", *args],
                              env=clean_env(**e), cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for e in envs]
    done = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"a rank did not end within {timeout} s")
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def one_line_failure(p: subprocess.CompletedProcess, *needles: str) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode != 0, p.stderr
    assert len(lines) == 1, p.stderr  # one line: no traceback, no second story
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("family", [
    {"rank": "PMI_RANK", "size": "PMI_SIZE", "name": "hydra/PMI"},
    {"rank": "RANK", "size": "WORLD_SIZE", "name": "torchrun"},
    {"rank": "MV2_COMM_WORLD_RANK", "size": "MV2_COMM_WORLD_SIZE", "name": "mvapich"},
])
def test_mpi_singletons_under_a_launcher_of_two(tmp_path, family):
    """Each process's MPI_Init finds no process manager it speaks and makes a world of one
    ('rank 0 of 1'): every rank says so, and there is no results file."""
    envs = [{family["rank"]: str(r), family["size"]: "2"} for r in (0, 1)]
    for p in ranks_by_hand(envs, [*TINY, "--primitive", "mpi", "--out", "r.jsonl"], tmp_path):
        one_line_failure(p, "announced 2 ranks", f"({family['name']})", "world of 1",
                         "singleton")
    assert not (tmp_path / "r.jsonl").exists()


def test_hydra_variables_make_ranks_not_two_launches(tmp_path):
    """PMI_RANK/PMI_SIZE used to be unknown: each process launched a 2-rank run of its own and
    one file held two interleaved runs, both "ok". Now each is one rank of one world."""
    args = [*TINY, "--primitive", "gloo", "--out", "r.jsonl"]
    for p in ranks_by_hand([{"PMI_RANK": str(r), "PMI_SIZE": "2"} for r in (0, 1)], args,
                           tmp_path):
        one_line_failure(p, "MASTER_ADDR and MASTER_PORT")  # hydra gives no rendezvous
    assert not (tmp_path / "r.jsonl").exists()
    port = str(29400 + os.getpid() % 500)
    ps = ranks_by_hand([{"PMI_RANK": str(r), "PMI_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                         "MASTER_PORT": port} for r in (0, 1)], args, tmp_path)
    assert [p.returncode for p in ps] == [0, 0], ps[0].stderr + ps[1].stderr
    records = read_results(tmp_path / "r.jsonl").records
    assert [r.kind for r in records].count("run") == 1  # one run, not two interleaved
    assert records[0].ranks == 2 and records[-1].ok is True


def test_two_processes_claiming_one_rank(tmp_path):
    port = str(29900 + os.getpid() % 90)
    envs = [{"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": port}] * 2
    for p in ranks_by_hand(envs, [*TINY, "--primitive", "gloo", "--out", "r.jsonl"], tmp_path):
        one_line_failure(p, "2 processes claim rank 0 of 2", "none claims rank 1")
    assert not (tmp_path / "r.jsonl").exists()


def test_a_rank_that_cannot_be_placed_launches_nothing(tmp_path):
    p = subprocess.run([sys.executable, "-m", "fabbench", "run", *TINY, "--primitive", "mpi",
                        "--out", "r.jsonl"], env=clean_env(PMIX_RANK="1"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2
    one_line_failure(p, "PMIX_RANK=1", "cannot place this rank")
    assert not (tmp_path / "r.jsonl").exists()


def test_two_runs_on_one_out(tmp_path):
    """The second run starts while the first holds the file: it is refused at once (exit 2, one
    line), and the file holds the first run alone."""
    args = [*TINY, "--primitive", "gloo", "--sizes", "8,1K,64K,256K", "--out", "r.jsonl"]
    first = subprocess.Popen([sys.executable, "-m", "fabbench", "run", *args], env=clean_env(),
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        end = time.monotonic() + 60
        while not (tmp_path / "r.jsonl").exists() and first.poll() is None:
            assert time.monotonic() < end, "the first run never claimed its file"
            time.sleep(0.01)
        second = subprocess.run([sys.executable, "-m", "fabbench", "run", *args],
                                env=clean_env(), cwd=tmp_path, capture_output=True, text=True,
                                timeout=120, check=False)
        _, err = first.communicate(timeout=240)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    assert second.returncode == 2
    one_line_failure(second, "r.jsonl is being written by another run")
    records = read_results(tmp_path / "r.jsonl").records
    assert [r.kind for r in records].count("run") == 1 and records[-1].ok is True


@pytest.fixture(scope="module")
def one_host_slurm() -> Iterator[dict[str, str]]:
    from integration.test_slurm import slurm_cluster  # the one-host Slurm of .ci/slurm/start.sh

    yield from slurm_cluster("one")


@pytest.mark.needs_root
def test_srun_without_pmi_shows_the_mpi_message(one_host_slurm, tmp_path):
    """Open MPI's MPI_Init aborts when srun gives it no PMI; its explanation reaches the user
    (fabbench's capture of fd 2 around MPI_Init used to eat it), then one line from fabbench per
    rank, and no results file."""
    p = subprocess.run(["srun", "-n", "2", "--mpi=none", "--kill-on-bad-exit=0", sys.executable,
                        "-m", "fabbench", "run", *TINY, "--primitive", "mpi", "--out",
                        "r.jsonl"], env=clean_env(SLURM_CONF=one_host_slurm["SLURM_CONF"]),
                       cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    assert p.returncode != 0
    assert "direct launched using \"srun\"" in p.stderr, p.stderr[-3000:]
    assert "An error occurred in MPI_Init" in p.stderr
    ours = [ln for ln in p.stderr.splitlines() if ln.startswith("fabbench: error:")]
    assert len(ours) == 2 and all("ended this process while it started" in ln for ln in ours)
    assert not (tmp_path / "r.jsonl").exists()


# ---- the job's nodes against the hosts its ranks came up on ------------------------------------

def test_a_hostfile_of_two_nodes_run_on_one_host(tmp_path):
    """mpirun maps one rank on each of two hostfile nodes, but its agent starts both on this host
    (the MPI Operator's failure, mpi-operator #731: all ranks on the launcher, "success"). Every
    rank stops with one line naming both counts, and nothing is written."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("127.0.0.2 slots=1\n127.0.0.3 slots=1\n")
    agent = tmp_path / "agent"  # `AGENT HOST CMD...`: runs CMD here, whatever HOST it is given
    agent.write_text("#!/bin/sh\nshift\nexec sh -c \"$*\"\n")
    agent.chmod(0o755)
    p = subprocess.run(
        ["mpirun", "-np", "2", "--hostfile", str(hostfile), "--mca", "plm_rsh_agent", str(agent),
         "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
         "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo",
         "--mca", "oob_tcp_if_include", "lo", "--tag-output",
         # two orteds on one host: hwloc's shared topology file segfaulted one of them (CI)
         "--mca", "rtc", "^hwloc",
         sys.executable, "-m", "fabbench", "run", *TINY, "--primitive", "mpi",
         "--out", "r.jsonl"], env=clean_env(), cwd=tmp_path, capture_output=True, text=True,
        timeout=180, check=False)
    assert p.returncode != 0
    # one line from each rank (mpirun's tagged output may put the two on one line of its own)
    ours = re.findall(r"(\[1,\d\]<stderr>):fabbench: error: ([^\n\[]*)", p.stdout + p.stderr)
    assert sorted(tag for tag, _ in ours) == ["[1,0]<stderr>", "[1,1]<stderr>"], \
        p.stdout + p.stderr
    for _, line in ours:
        assert ("the job announced 2 nodes (OMPI_MCA_orte_num_nodes=2, mpirun's map) but its "
                "2 ranks came up on 1 host") in line
    assert not (tmp_path / "r.jsonl").exists()


def test_expected_nodes_said_explicitly(tmp_path):
    """A job that says FABBENCH_EXPECT_NODES=2 (a rendered job may) and launches both ranks here."""
    port = str(29700 + os.getpid() % 90)
    envs = [{"PMI_RANK": str(r), "PMI_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": port, "FABBENCH_EXPECT_NODES": "2"} for r in (0, 1)]
    for p in ranks_by_hand(envs, [*TINY, "--primitive", "gloo", "--out", "r.jsonl"], tmp_path):
        one_line_failure(p, "the job announced 2 nodes (FABBENCH_EXPECT_NODES=2, said "
                            "explicitly) but its 2 ranks came up on 1 host")
    assert not (tmp_path / "r.jsonl").exists()


def test_a_bad_expected_node_count_launches_nothing(tmp_path):
    p = subprocess.run([sys.executable, "-m", "fabbench", "run", *TINY, "--primitive", "gloo",
                        "--out", "r.jsonl"], env=clean_env(FABBENCH_EXPECT_NODES="two"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2
    one_line_failure(p, "FABBENCH_EXPECT_NODES='two' is not a node count")
    assert not (tmp_path / "r.jsonl").exists()
