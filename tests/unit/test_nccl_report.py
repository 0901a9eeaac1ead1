"""NCCL's own report, read from log excerpts built from NCCL's format strings
(tests/fixtures/nccl/README.md names the source of every line)."""

from pathlib import Path

import pytest

from fabbench.comm.nccl_report import parse_nccl_log
from fabbench.comm.torchdist import nccl_report
from fabbench.errors import RunError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"

# file -> transport, GPUDirect RDMA use, network connections, of them with GDRDMA, channels,
# link layers
CASES = {
    "ib.log": ("nccl/IB", "off", 4, 0, 2, ["IB"]),
    "ib-gdrdma.log": ("nccl/IB", "on", 4, 4, 4, ["IB"]),
    "ib-gdr-partial.log": ("nccl/IB", "partial", 4, 2, 2, ["IB"]),
    "roce.log": ("nccl/IB", "on", 4, 4, 2, ["RoCE"]),
    "socket.log": ("nccl/Socket", "off", 4, 0, 2, []),
    "aws-ofi-nccl-efa.log": ("nccl/Libfabric/efa", "on", 4, 4, 4, []),
    "aws-ofi-nccl-psm2.log": ("nccl/AWS Libfabric/psm2", "off", 4, 0, 2, []),
    "ibext.log": ("nccl/IBext_v8", "on", 4, 4, 2, []),
    "one-host-p2p-shm.log": ("nccl/P2P/CUMEM/read", None, 0, 0, 2, []),
    "one-rank.log": ("nccl/Socket", None, 0, 0, 32, []),
    # real: NCCL 2.28.9 on an NVIDIA H100 80GB HBM3 (the GPU kit, 2026-11-24)
    "h100-one-rank-real.log": ("nccl/Socket", None, 0, 0, 64, []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture(name):
    transport, gdr, net, gdr_n, channels, layers = CASES[name]
    report = parse_nccl_log((FIXTURES / name).read_text())
    assert report.transport == transport
    assert report.gpudirect == gdr
    assert (report.net_connections, report.gdr_connections) == (net, gdr_n)
    assert report.channels == channels
    assert list(report.link_layers) == layers
    summary = report.summary()
    assert summary["transport"] == transport and summary["gpudirect"] == gdr
    assert summary["lines"] and all("NCCL INFO" in ln for ln in summary["lines"])


def test_every_fixture_has_a_case():
    assert {p.name for p in FIXTURES.glob("*.log")} == set(CASES)


def test_pxn_proxy_and_local_connections_are_told_apart():
    report = parse_nccl_log((FIXTURES / "ib-gdrdma.log").read_text())
    assert report.net_devices == ("IB/0", "IB/1")
    assert report.local == ("P2P/CUMEM/read",)


def test_a_connection_wins_over_the_network_nccl_set_up():
    text = ("h:1:1 [0] NCCL INFO Using network IB\n"
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n")
    assert parse_nccl_log(text).transport == "nccl/Socket"


def test_connections_over_two_networks_are_an_error_not_a_pick():
    text = ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n"
            "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0\n")
    with pytest.raises(RunError, match="several networks"):
        _ = parse_nccl_log(text).transport


def test_lines_of_other_programs_are_not_read():
    text = "Using network IB\nChannel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
    with pytest.raises(RunError, match="did not report"):
        _ = parse_nccl_log(text).transport


def test_report_files_of_one_process(tmp_path):
    log = tmp_path / "nccl.%h.%p"
    (tmp_path / "nccl.host.1").write_text((FIXTURES / "roce.log").read_text())
    assert nccl_report(log).transport == "nccl/IB"
    (tmp_path / "nccl.host.1").write_text("nothing useful\n")
    with pytest.raises(RunError):
        _ = nccl_report(log).transport
    with pytest.raises(RunError, match="NCCL_DEBUG_FILE"):
        nccl_report(None)
