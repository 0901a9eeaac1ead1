"""fabbench doctor: each check over recorded sysfs trees and recorded tool output, the real
tools of this host, and the real CLI without its smoke test (the smoke test starts real ranks:
tests/integration/test_doctor_smoke.py)."""

from __future__ import annotations

import importlib.util
import resource
import shutil
from pathlib import Path

import pytest

from conftest import cli
from fabbench import doctor as d
from fabbench.fabrics.profile import load_profile
from fabbench.sysinfo.inventory import container_runtime, inventory, scheduler, summary_rows

TREES = Path(__file__).parents[1] / "fixtures" / "sysfs"
IB, ROCE, OPA, ETH = (str(TREES / h) for h in ("ib-mlx5", "roce", "opa-hfi1", "eth-only"))
INFINIBAND, OMNIPATH = load_profile("infiniband"), load_profile("omnipath")
ETHERNET, SHM = load_profile("ethernet"), load_profile("shm")

# recorded output of the tools on hosts with the hardware (trimmed to what is parsed)
UCX_INFO_IB = """#      Transport: posix
#      Transport: self
#      Transport: tcp
#      Transport: rc_verbs
#      Transport: rc_mlx5
#      Transport: dc_mlx5
#      Transport: ud_mlx5
"""
FI_INFO_PSM2 = "provider: psm2\n    fabric: psm2\n    domain: hfi1_0\n"


def verdicts(checks):
    return {c.name: c.verdict for c in checks}


def test_devices_on_an_infiniband_host():
    checks = d.check_devices(INFINIBAND, "native", IB)
    assert verdicts(checks) == {"devices": "pass", "device files": "pass"}
    assert "mlx5_0:1 ACTIVE 100 Gb/sec (4X EDR) (InfiniBand)" in checks[0].detail


def test_devices_on_a_roce_host_advise_the_gid_index():
    (ports, files) = d.check_devices(INFINIBAND, "native", ROCE)
    assert ports.verdict == "pass" and "(RoCE)" in ports.detail and "mlx5_1:1 DOWN" in ports.detail
    assert "NCCL_IB_GID_INDEX" in ports.fix and files.verdict == "pass"


def test_devices_on_an_omnipath_host():
    checks = d.check_devices(OMNIPATH, "native", OPA)
    assert verdicts(checks) == {"devices": "pass", "device files": "pass"}
    assert "hfi1_0:1 ACTIVE" in checks[0].detail


def test_devices_missing_for_the_fabric_fail_with_a_fix():
    ib_on_eth = d.check_devices(INFINIBAND, "native", ETH)
    assert verdicts(ib_on_eth) == {"devices": "fail", "device files": "fail"}
    assert "--wire tcp" in ib_on_eth[0].fix and "--device /dev/infiniband" in ib_on_eth[1].fix
    opa_on_ib = d.check_devices(OMNIPATH, "native", IB)
    assert opa_on_ib[0].verdict == "fail" and "modprobe hfi1" in opa_on_ib[0].fix
    assert d.check_devices(INFINIBAND, "tcp", ETH)[0].verdict == "skip"


def test_a_port_that_is_down_fails(tmp_path):
    shutil.copytree(ROCE, tmp_path / "h", symlinks=True)
    state = tmp_path / "h/sys/class/infiniband/mlx5_0/ports/1/state"
    state.write_text("1: DOWN\n")
    (ports, _) = d.check_devices(INFINIBAND, "native", str(tmp_path / "h"))
    assert ports.verdict == "fail" and "subnet manager" in ports.fix


def test_ethernet_and_shm_devices():
    (check,) = d.check_devices(ETHERNET, "native", ETH)
    assert check.verdict == "pass" and "enp65s0f0 25 Gb/s" in check.detail
    assert d.check_devices(SHM, "native", ETH)[0].verdict == "pass"


def test_gpudirect():
    assert d.check_gpudirect(IB, gpus=True).verdict == "pass"
    assert d.check_gpudirect(ROCE, gpus=True).verdict == "warn"
    assert d.check_gpudirect(IB, gpus=False).verdict == "skip"


def test_memlock():
    assert d.check_memlock(rdma=True, limit=resource.RLIM_INFINITY).verdict == "pass"
    capped = d.check_memlock(rdma=True, limit=64 << 10)
    assert capped.verdict == "fail" and "64 KiB" in capped.detail and "IPC_LOCK" in capped.fix
    assert d.check_memlock(rdma=False, limit=64 << 10).verdict == "pass"
    assert d.check_memlock(rdma=False).verdict == "pass"  # this host's real limit


def test_shm():  # required: the fabric is shared memory (single_host, as the shm profile)
    docker_default = d.check_shm(SHM.single_host, size=64 << 20)
    assert docker_default.verdict == "fail" and "--shm-size" in docker_default.fix
    assert d.check_shm(ETHERNET.single_host, size=64 << 20).verdict == "warn"
    assert d.check_shm(SHM.single_host, size=8 << 30).verdict == "pass"
    assert d.check_shm(ETHERNET.single_host, path="/nonexistent/shm").verdict == "fail"


def test_interface_choice_and_address():
    assert d.pick_iface(INFINIBAND, "native", IB) == "ib0"  # IPoIB on an RDMA fabric
    assert d.pick_iface(INFINIBAND, "tcp", IB) == "eno1"
    assert d.pick_iface(ETHERNET, "native", ETH) == "enp65s0f0"
    assert d.pick_iface(ETHERNET, "native", ETH, "eth9") == "eth9"
    ok = d.check_iface("ib0", IB, {"ib0": ["10.1.0.5"]})
    assert ok.verdict == "pass" and "10.1.0.5" in ok.detail and "mtu 2044" in ok.detail
    bare = d.check_iface("ib0", IB, {})
    assert bare.verdict == "fail" and "no IP address" in bare.detail
    assert d.check_iface("eth9", ETH, {}).verdict == "fail"
    assert d.check_iface(None, ETH, {}).verdict == "fail"


def test_libraries_from_recorded_tool_output():
    def tools(argv):
        return {"ucx_info": (0, UCX_INFO_IB), "fi_info": (0, FI_INFO_PSM2)}.get(argv[0])

    (ucx,) = d.check_libraries(INFINIBAND, "native", "gloo", tools)
    assert ucx.verdict == "pass" and "rc_mlx5" in ucx.detail
    (ofi,) = d.check_libraries(OMNIPATH, "native", "gloo", tools)
    assert ofi.verdict == "pass"
    checks = d.check_libraries(INFINIBAND, "native", "mpi", tools)
    assert checks[0].verdict == "fail" and "not on PATH" in checks[0].detail  # no ompi_info


def test_a_primitive_without_its_python_package_fails_with_a_fix(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mpi4py" else real(name, *a))
    (mpi,) = d.check_packages("mpi")
    assert (mpi.name, mpi.verdict) == ("mpi4py", "fail") and "pip install mpi4py" in mpi.fix
    assert "the mpi primitive needs it" in mpi.detail
    horovod = d.check_packages("horovod")  # and mpi4py: Horovod runs over its MPI controller
    assert [c.name for c in horovod] == ["horovod", "mpi4py"] and horovod[1].verdict == "fail"
    assert d.check_packages("gloo") == []


def test_a_tool_that_hangs_is_cut_off():
    code, text = d.run_tool(["sleep", "5"], timeout=0.2)
    assert code == 124 and "did not answer" in text
    assert d.run_tool(["no-such-tool-fabbench"]) is None


@pytest.mark.skipif(shutil.which("ompi_info") is None, reason="Open MPI is not installed")
def test_libraries_on_this_host():
    (ompi,) = d.check_libraries(ETHERNET, "native", "mpi")
    assert ompi.verdict == "pass" and "btl: tcp" in ompi.detail
    if shutil.which("ucx_info"):  # UCX here has TCP only: native IB must fail, tcp wire pass
        assert d.check_libraries(INFINIBAND, "native", "mpi")[1].verdict == "fail"
        assert d.check_libraries(INFINIBAND, "tcp", "mpi")[1].verdict == "pass"


def test_launcher_sanity():
    n_copies = d.check_launcher("mpi", {"SLURM_NTASKS": "4", "SLURM_PROCID": "0",
                                        "SLURM_STEP_ID": "0", "OMPI_COMM_WORLD_RANK": "0",
                                        "OMPI_COMM_WORLD_SIZE": "1"})
    assert n_copies.verdict == "fail" and "rank 0 of 1" in n_copies.detail
    assert "pmix" in n_copies.fix
    good = d.check_launcher("mpi", {"SLURM_NTASKS": "4", "SLURM_PROCID": "2",
                                    "SLURM_STEP_ID": "0", "SLURM_LOCALID": "0"})
    assert good.verdict == "pass" and "rank 2 of 4" in good.detail
    assert d.check_launcher("gloo", {"RANK": "0", "WORLD_SIZE": "1"}).verdict == "warn"
    assert d.check_launcher("gloo", {"RANK": "5", "WORLD_SIZE": "2"}).verdict == "fail"
    assert d.check_launcher("gloo", {}).verdict == "pass"


def test_inventory_runtime_and_scheduler():
    assert container_runtime({"APPTAINER_CONTAINER": "/x.sif"}) == "apptainer"
    assert container_runtime({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    assert container_runtime({"CH_RUNNING": "Weird Al Yankovic"}) == "charliecloud"
    assert scheduler({"SLURM_JOB_ID": "7"}) == "slurm"
    assert scheduler({"PBS_JOBID": "7.pbs"}) == "pbs" and scheduler({}) is None
    inv = inventory()
    rows = dict(summary_rows(inv))
    assert rows["host"].startswith(inv["host"]) and "gpudirect rdma" in rows


def test_cli_doctor_over_a_recorded_tree_fails_with_fixes(capsys):
    code, out, _ = cli(capsys, "doctor", "--fabric", "omnipath", "--root", IB, "--no-smoke")
    assert code == 1
    assert "FAIL  devices" in out and "fix: load the hfi1 driver" in out
    assert "check(s) failed" in out


def test_cli_doctor_auto_detects_the_fabric_of_the_tree(capsys):
    code, out, _ = cli(capsys, "doctor", "--root", OPA, "--no-smoke", "--json")
    import json

    report = json.loads(out)
    assert report["fabric"] == "omnipath"
    assert {c["name"]: c["verdict"] for c in report["checks"]}["devices"] == "pass"
    assert code == (0 if report["ok"] else 1)


def test_cli_env(capsys):
    code, out, _ = cli(capsys, "env", "--json")
    import json

    assert code == 0 and {"host", "nics", "rdma", "versions", "container"} <= set(json.loads(out))
    code, out, _ = cli(capsys, "env")
    assert code == 0 and "gpudirect rdma" in out


def test_unknown_fabric_is_a_usage_error(capsys):
    code, _, err = cli(capsys, "doctor", "--fabric", "nosuch", "--no-smoke")
    assert code == 2 and err.startswith("fabbench: error:")


@pytest.mark.parametrize("devices, visible, count", [
    (["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"], None, 2),
    (["nvidia0", "nvidia1"], "1", 1),
    (["nvidia0", "nvidia1"], "", 0),
    (["nvidia0"], "-1", 0),
    (["nvidiactl"], None, 0),
])
def test_gpu_count_reads_dev_and_cuda_visible_devices(tmp_path, devices, visible, count):
    from fabbench.sysinfo.gpus import gpu_count, gpus_visible

    (tmp_path / "dev").mkdir()
    for name in devices:
        (tmp_path / "dev" / name).touch()
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert gpu_count(tmp_path, env) == count
    assert gpus_visible(tmp_path, env) == (count > 0)


@pytest.mark.parametrize("primitive, gpus, ranks", [("nccl", 1, 1), ("nccl", 2, 2),
                                                    ("mpi", 1, 2), ("gloo", 0, 2)])
def test_smoke_test_takes_one_rank_for_nccl_on_a_host_with_one_gpu(monkeypatch, primitive, gpus,
                                                                   ranks):
    from fabbench.errors import RunError

    asked = []

    def run(config, argv):
        asked.append(config.ranks)
        raise RunError("stopped here by the test")

    monkeypatch.setattr(d, "discover", lambda: None)
    monkeypatch.setattr(d, "gpu_count", lambda root: gpus)
    monkeypatch.setattr(d.runner, "run", run)
    found = d.smoke_test(d.DoctorOptions(), primitive)
    assert asked == [ranks]
    assert found.verdict == d.FAIL and "stopped here by the test" in found.detail
