"""Emulated clusters without root: option parsing, the cluster's state file, the commands that
enter a node, the launch across nodes, and the ceiling tools' parsers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fabbench.ceiling.tools import TOOLS, tool_for
from fabbench.emulate.cluster import Cluster, Node
from fabbench.emulate.cluster_spec import (
    Link,
    format_rate,
    make_emulation,
    parse_delay,
    parse_loss,
    parse_rate,
)
from fabbench.errors import RunError, UsageError
from fabbench.results import records


@pytest.mark.parametrize(("text", "rate"), [("1gbit", 10**9), ("250mbit", 250 * 10**6),
                                            ("100kbit", 10**5), ("2.5Gbit", 25 * 10**8)])
def test_rates_are_tc_units(text, rate):
    assert parse_rate(text) == rate
    assert parse_rate(format_rate(rate)) == rate


@pytest.mark.parametrize("text", ["1gb", "fast", "-1gbit", "0gbit", "1000tbit", "1 gigabit", ""])
def test_bad_rates_are_refused(text):
    with pytest.raises(UsageError, match="bad link rate"):
        parse_rate(text)


def test_delay_and_loss():
    assert parse_delay("50us") == 50.0
    assert parse_delay("1.5ms") == 1500.0
    assert parse_delay("0") == 0.0
    assert parse_loss("0.1%") == 0.1
    for bad in ("50", "5 min", "-1ms", "11s"):
        with pytest.raises(UsageError):
            parse_delay(bad)
    for bad in ("100%", "abc", "-1%"):
        with pytest.raises(UsageError):
            parse_loss(bad)


def test_one_node_slower_or_lossy():
    e = make_emulation(nodes=4, link="1gbit", slow_nodes=("3:250mbit",), lossy_nodes=("1:1%",))
    assert [e.link_of(i).rate_bit_s for i in range(4)] == [10**9] * 3 + [250 * 10**6]
    assert [e.link_of(i).loss_pct for i in range(4)] == [0, 1.0, 0, 0]
    with pytest.raises(UsageError, match="node 4 does not exist"):
        make_emulation(nodes=4, link="1gbit", slow_nodes=("4:250mbit",))
    with pytest.raises(UsageError, match="NODE:VALUE"):
        make_emulation(nodes=4, link="1gbit", slow_nodes=("250mbit",))
    with pytest.raises(UsageError, match="--nodes"):
        make_emulation(nodes=0, link="1gbit")


def _cluster(tmp_path, rpn=1) -> Cluster:
    link = Link(rate_bit_s=10**9)
    nodes = tuple(Node(index=i, hostname=f"node{i}", netns=f"fabbench-7-node{i}",
                       address=f"198.18.0.{i + 1}", veth=f"fbv7n{i}", link=link)
                  for i in range(2))
    return Cluster(owner_pid=os.getpid(), subnet="198.18.0.0/24", bridge="fbbr7",
                   bridge_address="198.18.0.254", nodes=nodes, ranks_per_node=rpn,
                   state_dir=str(tmp_path))


def test_state_file_round_trip_and_record(tmp_path):
    c = _cluster(tmp_path, rpn=2)
    c.write_files()
    again = Cluster.from_json(c.state_file.read_text())
    assert again == c
    assert c.hostfile.read_text() == "198.18.0.1 slots=2\n198.18.0.2 slots=2\n"
    assert "198.18.0.2 node1" in c.hosts_file.read_text()
    rec = records.EmulatedCluster.of_cluster(c).to_json()
    assert rec["nodes"] == 2 and rec["interface"] == "fbnet0"
    assert rec["links"][1] == {"node": "node1", "address": "198.18.0.2", "speed_gbit_s": 1.0,
                               "delay_us": 0.0, "loss_pct": 0.0}
    assert [c.node_of_rank(r).index for r in range(4)] == [0, 0, 1, 1]
    argv = c.on(1, ["echo", "hi"])
    assert argv[:4] == ["ip", "netns", "exec", "fabbench-7-node1"]
    assert argv[-4:] == [str(c.enter), "node1", "echo", "hi"]


def test_agent_refuses_unknown_hosts(tmp_path):
    c = _cluster(tmp_path)
    c.write_files()
    p = subprocess.run([str(c.agent), "-o", "StrictHostKeyChecking=no", "10.0.0.1", "true"],
                       capture_output=True, text=True, timeout=10, check=False)
    assert p.returncode == 255 and "no emulated node '10.0.0.1'" in p.stderr


def test_launch_across_nodes(tmp_path, monkeypatch):
    from fabbench.config import RunConfig
    from fabbench.emulate.cluster import ENV
    from fabbench.runner import dry_run

    c = _cluster(tmp_path)
    c.write_files()
    monkeypatch.setenv(ENV, str(c.state_file))
    for var in ("OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID", "HOROVOD_RANK"):
        monkeypatch.delenv(var, raising=False)
    text = dry_run(RunConfig(fabric="ethernet", primitive="mpi"))
    assert "btl_tcp_if_include=fbnet0" in text
    assert "--hostfile" in text and "plm_rsh_agent" in text and "mpi_yield_when_idle 1" in text
    assert "fabbench-7-node0" in text and "on 2 emulated nodes" in text
    text = dry_run(RunConfig(fabric="ethernet", primitive="gloo"))
    assert "GLOO_SOCKET_IFNAME=fbnet0" in text
    assert text.count("MASTER_ADDR=198.18.0.1") == 2 and "fabbench-7-node1" in text
    with pytest.raises(UsageError, match="nodes' interface"):
        dry_run(RunConfig(fabric="ethernet", primitive="gloo", iface="lo"))
    with pytest.raises(UsageError, match="more than the emulated cluster"):
        dry_run(RunConfig(fabric="ethernet", primitive="gloo", ranks=3))


def test_iperf3_results_are_read_per_direction():
    end = {"sum_sent": {"bits_per_second": 9.6e8, "retransmits": 3},
           "sum_received": {"bits_per_second": 9.5e8},
           "sum_sent_bidir_reverse": {"bits_per_second": 8.6e8, "retransmits": 1},
           "sum_received_bidir_reverse": {"bits_per_second": 8.5e8}}
    d = TOOLS["iperf3"].parse(json.dumps({"end": end}), "bidir")
    assert [(x.sender, x.gbit_s, x.retransmits) for x in d] == [("client", 0.95, 3),
                                                              ("server", 0.85, 1)]
    assert tool_for("none") == "iperf3" and tool_for("omnipath") == "fi_pingpong"


def test_iperf3_failures_are_its_own_words_not_a_key_error():
    # iperf3 -J reports a failed test in "error" beside a partial "end" without the sums
    failed = {"start": {}, "end": {}, "error": "unable to connect to server: Connection refused"}
    with pytest.raises(RunError, match="iperf3: unable to connect to server"):
        TOOLS["iperf3"].parse(json.dumps(failed), "bidir")
    one_way = {"sum_sent": {"bits_per_second": 9.6e8}, "sum_received": {"bits_per_second": 9e8}}
    with pytest.raises(RunError, match="sum_received_bidir_reverse"):
        TOOLS["iperf3"].parse(json.dumps({"end": one_way}), "bidir")
    with pytest.raises(RunError, match="no result"):
        TOOLS["iperf3"].parse("iperf3: error - the server is busy", "one-way")


def test_emulate_refuses_bad_options_in_one_line():
    for args in (["--link", "fast"], ["--loss", "200%"], ["--slow-node", "9:1gbit"]):
        p = subprocess.run([sys.executable, "-m", "fabbench", "emulate", *args, "--", "run"],
                           capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("fabbench: error:"), p.stderr


def test_ceiling_tools_leave_the_ranks_report_logs_alone(monkeypatch):
    from fabbench.ceiling import measure

    monkeypatch.setenv("UCX_LOG_FILE", "/gone/ucx.log")
    monkeypatch.setenv("UCX_TLS", "tcp")
    env = measure._tool_env()
    assert "UCX_LOG_FILE" not in env and env["UCX_TLS"] == "tcp"
    out = "Waiting\n[n1:1] sys.c:372 failed to open '/x' for writing\nUCX  ERROR bad thing\n"
    assert measure._first_error(out) == "UCX  ERROR bad thing"
    assert measure._first_error("only line\n") == "only line"


def test_ucx_perftest_and_fi_pingpong_outputs_are_read():
    ucx = "[thread 0]  42  2.7 24492.7 24492.7  40.83  40.83  41  41\n" \
          "Final:     200  2.469 121696.268 47100.755  8.22  21.23  8  21\n"
    (d,) = TOOLS["ucx_perftest"].parse(ucx, "one-way")
    assert d.gbit_s == pytest.approx(21.23 * 2**20 * 8 / 1e9)
    fi = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" \
         "1m      200     =200     400m        4.05s    103.57    10124.51    0.00\n"
    (d,) = TOOLS["fi_pingpong"].parse(fi, "one-way")
    assert d.gbit_s == pytest.approx(103.57 * 8e6 / 1e9)
