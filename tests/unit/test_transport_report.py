"""Parsing the libraries' own reports (text recorded from real runs on this machine)."""

import os
import shutil
import subprocess

import pytest

from fabbench.comm.mpi import (
    DIRECT_LAUNCH_ENV,
    REPORT_ENV,
    LibraryReport,
    direct_launch_env,
    parse_ompi_transport,
)
from fabbench.errors import RunError

OB1_TCP = """\
[vm:06173] select: initializing btl component tcp
[vm:06173] btl:tcp: using ipv4 interface eth0
[vm:06173] select: init of component tcp returned success
[vm:06173] select: initializing btl component self
[vm:06173] select: init of component self returned success
[vm:06336] selected ob1 best priority 20
[vm:06336] select: component ob1 selected
"""
OB1_VADER = OB1_TCP.replace("tcp", "vader")
UCX_TCP = """\
[vm:06358] selected ucx best priority 51
[vm:06358] select: component ucx selected
[1.2] [vm:6608 :0] ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 tcp/lo tcp/eth0)
[1.2] [vm:6608 :0] ucp_worker.c:1763 UCX  INFO    ep_cfg[1]: tag(tcp/lo tcp/eth0)
"""
UCX_IB = """\
[n1:1] selected ucx best priority 51
[1.2] [n1:1 :0] ucp_worker.c:1763 UCX INFO ep_cfg[0]: tag(self/memory cma/memory rc_mlx5/mlx5_0:1)
[1.2] [n1:1 :0] ucp_worker.c:1763 UCX INFO ep_cfg[1]: tag(rc_mlx5/mlx5_0:1 sysv/memory)
"""
OFI_TCP = """\
[vm:06380] mca:base:select:(  mtl) Selected component [ofi]
[vm:06625] ../../ompi/mca/mtl/ofi/mtl_ofi_component.c:337: mtl:ofi:prov: tcp;ofi_rxm
[vm:06380] select: component ofi selected
[vm:06380] selected cm best priority 25
[vm:06380] select: component cm selected
"""
PSM2 = """\
[n:1] mca:base:select:(  mtl) Selected component [psm2]
[n:1] selected cm best priority 30
"""


@pytest.mark.parametrize("text,transport", [
    (OB1_TCP, "ob1/tcp"), (OB1_VADER, "ob1/vader"), (UCX_TCP, "ucx/tcp"),
    (UCX_IB, "ucx/cma+rc_mlx5+sysv"), (OFI_TCP, "cm/ofi/tcp;ofi_rxm"), (PSM2, "cm/psm2"),
])
def test_open_mpi_report(text, transport):
    assert parse_ompi_transport(text) == transport


@pytest.mark.parametrize("text", ["", "selected ob1 best priority 20\n",
                                  "selected ucx best priority 51\n",
                                  "selected cm best priority 25\n"])
def test_incomplete_report_is_an_error_not_a_guess(text):
    with pytest.raises(RunError):
        parse_ompi_transport(text)


def test_gloo_interfaces_from_real_sockets():
    import socket

    from fabbench.comm.torchdist import gloo_interfaces

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname(), timeout=5)
    peer, _ = server.accept()
    try:
        assert "lo" in gloo_interfaces(store_port=1)
        # connections of the rendezvous store do not count
        assert gloo_interfaces(store_port=server.getsockname()[1]) == set()
    finally:
        for s in (client, peer, server):
            s.close()


def test_the_report_gives_the_environment_back(monkeypatch):
    """Its UCX log file lives in a folder close() removes: a program run afterwards must not
    inherit it (`ucx_info -v`, for the provenance, aborted in UCX's start: ucx version None)."""
    monkeypatch.setenv("UCX_LOG_LEVEL", "warn")
    monkeypatch.delenv("UCX_LOG_FILE", raising=False)
    for k in REPORT_ENV:
        if k != "UCX_LOG_LEVEL":
            monkeypatch.delenv(k, raising=False)
    report = LibraryReport()
    assert os.environ["UCX_LOG_LEVEL"] == "info" and os.environ["UCX_LOG_FILE"]
    report.close()
    assert os.environ["UCX_LOG_LEVEL"] == "warn"
    assert not {"UCX_LOG_FILE", "OMPI_MCA_pml_base_verbose"} & set(os.environ)
    if shutil.which("ucx_info"):
        p = subprocess.run(["ucx_info", "-v"], capture_output=True, text=True, timeout=30,
                           check=False)
        assert p.returncode == 0 and "version" in p.stdout.lower(), p.stderr


def test_a_direct_launch_fences_once_after_add_procs_unless_the_site_says_otherwise():
    srun = {"PMIX_RANK": "0", "SLURM_STEP_ID": "0"}
    assert direct_launch_env(srun) == DIRECT_LAUNCH_ENV == {
        "OMPI_MCA_pmix_base_async_modex": "1", "OMPI_MCA_pmix_base_collect_data": "0"}
    site = {**srun, "OMPI_MCA_pmix_base_collect_data": "1"}
    assert direct_launch_env(site) == {"OMPI_MCA_pmix_base_async_modex": "1"}
    mpirun = {"PMIX_RANK": "0", "OMPI_MCA_orte_hnp_uri": "1.0;tcp://198.18.0.1:1"}
    assert direct_launch_env(mpirun) == {} and direct_launch_env({}) == {}
