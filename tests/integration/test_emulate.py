"""Emulated nodes (network namespaces, veth, bridge, tc): the bytes cross a shaped wire, the
records say so, the ceiling is measured in the same job, and nothing of fabbench's is left
behind after success, failure, SIGTERM, Ctrl-C or a SIGKILL followed by another emulate."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import fabbench, horovod_available
from fabbench.emulate import cluster as emulated
from fabbench.emulate import net
from fabbench.errors import UsageError
from fabbench.results.reader import read_results
from fabbench.results.records import Record

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

WIRE_GBYTE_S = 0.125  # 1 Gbit/s
SHORT = ["--budget", "0.1", "--min-samples", "3", "--timeout", "60"]


@pytest.fixture(autouse=True)
def _root_and_no_leftovers():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    for tool in ("ip", "tc", "unshare", "iperf3"):
        if shutil.which(tool) is None:  # all in .ci/apt-packages.txt: missing is a failure
            pytest.fail(f"{tool} is not installed (.ci/apt-packages.txt)")
    yield
    # objects whose owner is gone are leftovers (a live owner's are another run's, in use)
    dead = {pid: objs for pid, objs in net.leftovers().items() if not net.alive(pid)}
    assert not dead, f"emulation objects left behind: {dead}"


def _emulate(*args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    return fabbench("emulate", *args, timeout=timeout)


def _records(path: Path) -> list[Record]:
    return read_results(path).records


@pytest.mark.parametrize("primitive", ["mpi", "gloo"])
def test_bytes_cross_a_1gbit_wire(primitive, tmp_path):
    out = tmp_path / "wire.jsonl"
    p = _emulate("--nodes", "2", "--link", "1gbit", "--", "run", "--fabric", "ethernet",
                 "--primitive", primitive, "--ops", "allreduce,sendrecv", "--sizes", "64M",
                 *SHORT, "--ceiling-seconds", "1", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    records = _records(out)
    run = records[0]
    assert run.nodes == 2 and run.ranks == 2
    assert run.interface == "fbnet0"
    assert "fbnet0" in run.profile_env.values()
    assert [x.speed_gbit_s for x in run.emulation.links] == [1.0, 1.0]
    assert run.provenance.host == "node0"
    ceilings = {c.mode: c for c in records if c.kind == "ceiling"}
    assert set(ceilings) == {"one-way", "bidir"}
    for c in ceilings.values():
        assert c.error is None and c.tool == "iperf3"
        assert {c.client.host, c.server.host} == {"node0", "node1"}
        assert 0.01 < c.per_direction_gbit_s <= 1.05, c
    assert len(ceilings["bidir"].directions) == 2
    measured = {(c.op, c.bytes): c for c in records if c.kind == "collective"}
    assert set(measured) == {("allreduce", 64 << 20), ("sendrecv", 64 << 20)}
    for c in measured.values():
        # a shortcut through loopback or shared memory would be ten times the wire
        assert 0 < c.busbw_gbyte_s <= 1.05 * WIRE_GBYTE_S, c
    rep = fabbench("report", str(out), timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert "ceil%" in rep.stdout and "link%" in rep.stdout
    assert "% of the 1 Gb/s link" in rep.stdout and "% of the measured ceiling (iperf3 both " \
        "ways" in rep.stdout


@pytest.mark.parametrize("primitive,slow", [("mpi", True), ("gloo", True), ("mpi", False)],
                         ids=["mpi-node3-slow", "gloo-node3-slow", "mpi-links-equal"])
def test_pairs_name_the_node_with_the_slow_link(primitive, slow, tmp_path):
    # the issue's set-up: 4 nodes at 1 Gbit/s, node 3's link at 250 Mbit/s (bench/
    # pairs_slow_node.py repeats it ten times per primitive)
    out = tmp_path / "pairs.jsonl"
    p = _emulate("--nodes", "4", "--link", "1gbit",
                 *(["--slow-node", "3:250mbit"] if slow else []), "--", "run",
                 "--primitive", primitive, "--workload", "pairs", "--check", "--no-ceiling",
                 "--timeout", "60", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    run = _records(out)[0]
    assert any(x.startswith("pair_schedule=serial") for x in run.picked)  # auto, emulated
    pairs = read_results(out).of_kind("pairs")
    assert {r.schedule for r in pairs} == {"serial"}
    assert all(r.unit == "node" and r.correct for r in pairs)
    assert {(r.a_host, r.b_host) for r in pairs} == {
        (f"node{a}", f"node{b}") for a in range(4) for b in range(a + 1, 4)}
    rep = fabbench("report", str(out), "--json", timeout=120)
    assert rep.returncode == 0, rep.stderr
    (found,) = json.loads(rep.stdout)["findings"]
    assert found["pairs"]["slow"] == ([3] if slow else []), found["pairs"]["text"]
    if slow:  # node 3's pairs cannot beat its link; the others' are well above it
        three = next(n for n in found["pairs"]["nodes"] if n["unit"] == 3)
        assert max(three["bw_gbyte_s"]) <= 1.05 * 0.25 / 8
        assert three["others_min_gbyte_s"] > 1.05 * 0.25 / 8


@pytest.mark.skipif(not horovod_available(), reason="Horovod is not installed")
def test_horovod_over_gloo_across_nodes(tmp_path):
    out = tmp_path / "hvd.jsonl"
    p = _emulate("--nodes", "2", "--link", "10gbit", "--", "run", "--fabric", "ethernet",
                 "--primitive", "horovod", "--horovod-over", "gloo", "--ops", "allreduce",
                 "--sizes", "1M", "--no-ceiling", *SHORT, "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    run = _records(out)[0]
    assert run.nodes == 2 and run.ranks == 2 and run.transport == "gloo/tcp"


def test_bad_input_and_a_failed_command_leave_nothing(tmp_path):
    p = _emulate("--nodes", "2", "--link", "1gbit", "--", "run", "--primitive", "nccl",
                 "--out", str(tmp_path / "x.jsonl"), timeout=120)
    # no GPU visible: refused in one line before any rank starts (runner._refuse_without_gpu)
    assert p.returncode == 2 and "--primitive nccl needs a GPU; no GPU visible" in p.stderr
    p = _emulate("--nodes", "2", "--link", "1gbit", "--", "run", "--primitive", "gloo",
                 "--ranks", "3", timeout=120)
    assert p.returncode == 2 and "more than the emulated cluster's 2 nodes" in p.stderr
    p = _emulate("--nodes", "2", "--link", "1gbit", "--", "run", "--primitive", "gloo",
                 "--iface", "lo", timeout=120)
    assert p.returncode == 2 and "fbnet0" in p.stderr


def test_a_delay_is_netems_and_a_kernel_without_it_says_so_in_one_line():
    p = _emulate("up", "--nodes", "2", "--delay", "50us", timeout=120)
    if p.returncode == 0:  # a kernel with netem: the delay is on both ends of each link
        holder = int(Path(p.stdout.strip().splitlines()[-1].split("=", 1)[1]).parent.name)
        try:
            shown = subprocess.run(["tc", "qdisc", "show", "dev", net.veth_name(holder, 1)],
                                   capture_output=True, text=True, timeout=30, check=True)
            assert "netem" in shown.stdout and "delay 50us" in shown.stdout
        finally:
            assert _emulate("down", "--pid", str(holder), timeout=120).returncode == 0
    else:
        why = ("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): --delay cannot be "
               "emulated here (--link rates and --loss can)")
        assert p.returncode == 2 and p.stderr.strip().splitlines() == [
            f"fabbench: error: emulate up: the cluster could not be made: {why}"]
        p = _emulate("--nodes", "2", "--delay", "50us", "--", "version", timeout=120)
        assert p.returncode == 2 and p.stderr.strip().splitlines() == [
            f"fabbench: error: {why}"]


def _wait_for(path: Path, proc: subprocess.Popen, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while not (path.exists() and path.stat().st_size > 0):
        assert proc.poll() is None, "emulate ended before its run started"
        assert time.monotonic() < end, f"no {path} within {deadline_s} s"
        time.sleep(0.2)


def _start_long_run(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    out = tmp_path / "long.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fabbench", "emulate", "--nodes", "2", "--link", "100mbit", "--",
         "run", "--primitive", "gloo", "--ops", "allreduce", "--sizes", "1M,64M", "--budget",
         "60", "--min-samples", "50", "--no-ceiling", "--out", str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _wait_for(out, proc, 120)
    return proc, out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_tears_down(sig, tmp_path):
    proc, _ = _start_long_run(tmp_path)
    assert net.leftovers(proc.pid), "the cluster should exist while the run goes on"
    os.killpg(proc.pid, sig)  # SIGINT to the group, as Ctrl-C in a terminal
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("emulate did not end within 90 s of the signal")
    assert proc.returncode == 128 + sig, err[-2000:]
    assert "Traceback" not in err
    assert net.leftovers(proc.pid) == {}


def test_what_a_sigkilled_emulate_left_is_removed_by_the_next(tmp_path):
    proc, out = _start_long_run(tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert net.leftovers(proc.pid), "a SIGKILLed emulate cannot clean up"
    p = _emulate("--nodes", "1", "--", "version", timeout=120)
    assert p.returncode == 0, p.stderr
    assert f"stopped emulation (pid {proc.pid})" in p.stderr
    assert net.leftovers(proc.pid) == {}
    # its orphaned `fabbench run` sees its ranks gone and ends by itself
    end = time.monotonic() + 60
    while any(str(out) in c for c in _cmdlines()):
        assert time.monotonic() < end, "the orphaned run did not end"
        time.sleep(0.5)


def _cmdlines() -> list[str]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                found.append((d / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                continue
    return found


def test_standing_cluster_up_down_and_sigkilled_holder():
    p = _emulate("up", "--nodes", "2", "--slow-node", "1:250mbit", timeout=120)
    assert p.returncode == 0, p.stderr
    state = p.stdout.strip().splitlines()[-1].removeprefix("FABBENCH_EMULATION=")
    holder = int(Path(state).parent.name)
    try:
        agent = Path(state).parent / "bin" / "ssh"
        q = subprocess.run([str(agent), "node1", "hostname;", "tc", "qdisc", "show", "dev",
                            "fbnet0"], capture_output=True, text=True, timeout=30, check=False)
        assert q.returncode == 0, q.stderr
        assert q.stdout.startswith("node1\n") and "rate 250Mbit" in q.stdout
        # its link renegotiated while it stands: both ends, and the state file, say the rate
        now = net.set_rate(emulated.load(state), 1, 100_000_000)
        assert [n.link.rate_bit_s for n in emulated.load(state).nodes] == [10**9, 10**8]
        assert now == emulated.load(state)
        q = subprocess.run([str(agent), "node1", "tc", "qdisc", "show", "dev", "fbnet0"],
                           capture_output=True, text=True, timeout=30, check=False)
        switch = subprocess.run(["tc", "qdisc", "show", "dev", now.nodes[1].veth],
                                capture_output=True, text=True, timeout=30, check=False)
        assert "rate 100Mbit" in q.stdout and "rate 100Mbit" in switch.stdout, (q, switch)
        with pytest.raises(UsageError, match="no node 2"):
            net.set_rate(now, 2, 10**8)
        p = _emulate("down", "--pid", str(holder), timeout=120)
        assert p.returncode == 0, p.stderr
        assert net.leftovers(holder) == {}
        p = _emulate("up", "--nodes", "2", timeout=120)
        holder = int(Path(p.stdout.strip().splitlines()[-1].split("=", 1)[1]).parent.name)
        os.kill(holder, signal.SIGKILL)
        p = _emulate("--nodes", "1", "--", "version", timeout=120)
        assert p.returncode == 0 and net.leftovers(holder) == {}
    finally:
        if net.alive(holder):
            os.kill(holder, signal.SIGTERM)


UDP_COUNT = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if sys.argv[1] == "recv":
    s.bind(("0.0.0.0", 47999))
    s.settimeout(1.5)
    print("ready", flush=True)
    got = 0
    try:
        while True:
            s.recv(64)
            got += 1
    except socket.timeout:
        print(got, flush=True)
else:
    for i in range({n}):
        s.sendto(b"x" * 32, (sys.argv[2], 47999))
        time.sleep(0.0002)
"""


def test_a_lossy_link_loses_its_share_both_ways(tmp_path):
    n = 3000
    script = tmp_path / "udp.py"
    script.write_text(UDP_COUNT.replace("{n}", str(n)))
    p = _emulate("up", "--nodes", "2", "--lossy-node", "1:20%", timeout=120)
    assert p.returncode == 0, p.stderr
    state = Path(p.stdout.strip().splitlines()[-1].removeprefix("FABBENCH_EMULATION="))
    holder = int(state.parent.name)
    agent = state.parent / "bin" / "ssh"
    try:
        for src, dst in (("node0", "node1"), ("node1", "node0")):
            receiver = subprocess.Popen([str(agent), dst, sys.executable, str(script), "recv"],
                                        stdout=subprocess.PIPE, text=True)
            try:
                assert receiver.stdout.readline().strip() == "ready"
                send = subprocess.run([str(agent), src, sys.executable, str(script), "send",
                                       dst], capture_output=True, text=True, timeout=60,
                                      check=False)
                assert send.returncode == 0, send.stderr
                got = int(receiver.communicate(timeout=30)[0].strip())
            finally:
                receiver.kill()
            # node 1's link loses 20 % in each direction (binomial sd 0.7 %); node 0's none
            assert 0.12 < 1 - got / n < 0.28, (src, dst, got)
    finally:
        assert _emulate("down", "--pid", str(holder), timeout=120).returncode == 0
    assert net.leftovers(holder) == {}


def test_without_root_it_is_one_line_and_exit_2():
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to drop root")
    p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", "--bounding-set=-all", sys.executable, "-m",
                        "fabbench", "emulate", "--nodes", "2", "--", "version"],
                       capture_output=True, text=True, timeout=120, check=False,
                       env={**os.environ, "HOME": "/tmp"})
    if "Permission denied" in p.stderr and "fabbench" not in p.stderr:
        pytest.skip("this checkout is not readable by an unprivileged user")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "needs root" in p.stderr


@pytest.mark.parametrize("fabric,tool", [("infiniband", "ucx_perftest"),
                                         ("omnipath", "fi_pingpong")])
def test_ceiling_of_ucx_and_ofi_over_tcp(fabric, tool, tmp_path):
    """The fabric's own raw tool measures the ceiling (its TCP transport with --wire tcp)."""
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed (ucx-utils / libfabric-bin, .ci/apt-packages.txt)")
    out = tmp_path / "c.jsonl"
    p = _emulate("--nodes", "2", "--link", "1gbit", "--", "run", "--fabric", fabric, "--wire",
                 "tcp", "--primitive", "mpi", "--ops", "allreduce", "--sizes", "8", *SHORT,
                 "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    (c,) = [r for r in _records(out) if r.kind == "ceiling"]
    assert c.tool == tool and c.error is None, c
    assert 0.01 < c.per_direction_gbit_s <= 1.05, c


def test_down_stops_only_the_cluster_it_is_told_to():
    """On a shared host `emulate down` must not stop somebody else's cluster: it stops the one
    FABBENCH_EMULATION names, or the only one standing, and refuses to guess among several."""
    ups, holders = [], []
    try:
        for _ in range(2):
            p = _emulate("up", "--nodes", "2", timeout=120)
            assert p.returncode == 0, p.stderr[-2000:]
            state = Path(p.stdout.strip().splitlines()[-1].split("=", 1)[1])
            ups.append(state)
            holders.append(int(state.parent.name))
        p = _emulate("down", timeout=120)
        assert p.returncode == 2
        assert p.stderr.strip().splitlines() == [
            f"fabbench: error: 2 emulated clusters stand (holders "
            f"{', '.join(map(str, sorted(holders)))}): name one with --pid, or stop them all "
            "with --all"]
        p = fabbench("emulate", "down", timeout=120, env={"FABBENCH_EMULATION": str(ups[0])})
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip().endswith(f"stopped 1 standing cluster(s) (holders {holders[0]})")
        assert net.alive(holders[1]) and not ups[0].exists()
        p = _emulate("down", timeout=120)  # the only one left
        assert p.returncode == 0 and f"(holders {holders[1]})" in p.stdout
    finally:
        for holder in holders:
            _emulate("down", "--pid", str(holder), timeout=120)
