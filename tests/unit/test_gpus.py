"""Where a run needs a GPU and none is visible (sysinfo.gpus): the one line that says why, in a
container and on a host; `fabbench run` refusing with it before any rank starts, through the
real CLI; and the doctor's GPU check. The probe's parts that ask this machine (the driver, torch)
are replaced; /dev and the container marks are recorded trees, read by the real code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cli
from fabbench import doctor as d
from fabbench import runner
from fabbench.errors import UsageError
from fabbench.sysinfo import gpus
from fabbench.sysinfo.gpus import GpuState, TorchBuild

CUDA_TORCH = TorchBuild("2.13.0+cu130", "13.0")
CPU_TORCH = TorchBuild("2.13.0+cpu", None)
APPTAINER = {"APPTAINER_CONTAINER": "/scratch/fabbench.sif"}
PODMAN = ("run/.containerenv", 'engine="podman-4.3.1"\n')
ETH_TREE = str(Path(__file__).parents[1] / "fixtures" / "sysfs" / "eth-only")


def tree(tmp_path, *devices: str, marks: tuple[tuple[str, str], ...] = ()) -> str:
    """A recorded root: /dev with these device nodes, and container marks (path, text)."""
    (tmp_path / "dev").mkdir(parents=True)
    for name in devices:
        (tmp_path / "dev" / name).touch()
    for path, text in marks:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return str(tmp_path)


@pytest.fixture
def machine(monkeypatch):
    """Set what this process's driver and torch say (nothing is loaded or imported)."""

    def set_(*, driver: bool = False, torch: TorchBuild | None = CUDA_TORCH,
             torch_devices: int = 0) -> None:
        monkeypatch.setattr(gpus, "cuda_driver", lambda: driver)
        monkeypatch.setattr(gpus, "torch_build", lambda: torch)
        monkeypatch.setattr(gpus, "torch_device_count", lambda: torch_devices)

    return set_


@pytest.mark.parametrize("env, marks, driver, torch, line", [
    # the cuda image in Apptainer without --nv, in podman without the toolkit's device
    (APPTAINER, (), False, CUDA_TORCH, "no GPU visible in this container: run it with --nv"),
    ({}, (PODMAN,), True, CUDA_TORCH,
     "no GPU visible in this container: run it with --device nvidia.com/gpu=all (the NVIDIA "
     "container toolkit's CDI)"),
    ({"KUBERNETES_SERVICE_HOST": "198.19.128.1"}, (), False, None,
     "no GPU visible in this container: give its pod a nvidia.com/gpu limit (the NVIDIA device "
     "plugin)"),
    # the cpu image: --nv alone would not do
    ({"CH_RUNNING": "Weird Al Yankovic"}, (), False, CPU_TORCH,
     "no GPU visible in this container, and its torch (2.13.0+cpu) is a CPU build: use "
     "fabbench's cuda image and run it with --nv / the NVIDIA container toolkit"),
    ({}, ((".dockerenv", ""),), False, CPU_TORCH,
     "no GPU visible in this container, and its torch (2.13.0+cpu) is a CPU build: use "
     "fabbench's cuda image and run it with --gpus all (the NVIDIA container toolkit)"),
    ({}, ((".dockerenv", ""),), False, CUDA_TORCH,
     "no GPU visible in this container: run it with --gpus all (the NVIDIA container toolkit)"),
    # on the host
    ({}, (), False, CPU_TORCH,
     "no GPU visible on this host (no /dev/nvidiaN device), and torch 2.13.0+cpu is a CPU "
     "build (torch.version.cuda is None)"),
    ({}, (), False, CUDA_TORCH,
     "no GPU visible on this host: no NVIDIA driver (libcuda.so.1 does not load) and no "
     "/dev/nvidiaN device for torch 2.13.0+cu130 (a CUDA 13.0 build)"),
    ({}, (), True, CUDA_TORCH,
     "no GPU visible on this host: the NVIDIA driver (libcuda.so.1) loads, but there is no "
     "/dev/nvidiaN device and torch 2.13.0+cu130 (CUDA 13.0) finds none"),
    ({}, (), False, None,
     "no GPU visible on this host (no /dev/nvidiaN device), and torch does not import here"),
])
def test_why_no_gpu_is_visible(tmp_path, machine, env, marks, driver, torch, line):
    machine(driver=driver, torch=torch)
    state = gpus.probe(env, tree(tmp_path, "nvidiactl", marks=marks))
    assert not state.visible and state.why_not() == line


def test_cuda_visible_devices_hiding_every_gpu_is_said_first(tmp_path, machine):
    machine(driver=True)
    root = tree(tmp_path, "nvidia0", "nvidia1")
    state = gpus.probe({"CUDA_VISIBLE_DEVICES": ""}, root)
    assert state.why_not() == "CUDA_VISIBLE_DEVICES='' hides the 2 GPUs of this host"
    assert gpus.probe({**APPTAINER, "CUDA_VISIBLE_DEVICES": "-1"}, root).why_not() == \
        "CUDA_VISIBLE_DEVICES='-1' hides the 2 GPUs of this container"


def test_a_gpu_torch_finds_without_dev_nvidia_is_visible(tmp_path, machine):
    """WSL (/dev/dxg), Jetson: no /dev/nvidiaN, yet a CUDA torch with the driver finds GPUs;
    torch is asked only there."""
    machine(driver=True, torch_devices=1)
    root = tree(tmp_path, "dxg")
    assert gpus.probe({}, root).visible
    gpus.require_gpu("--primitive nccl", {}, root)  # no refusal
    machine(driver=False, torch_devices=1)  # no driver: torch is not asked
    assert not gpus.probe({}, root).visible


def test_require_gpu_refuses_in_one_line_and_asks_torch_only_without_dev_nvidia(
        tmp_path, machine, monkeypatch):
    machine(driver=False)
    with pytest.raises(UsageError) as refused:
        gpus.require_gpu("--device cuda", APPTAINER, tree(tmp_path / "a"))
    assert str(refused.value) == ("--device cuda needs a GPU; no GPU visible in this container: "
                                  "run it with --nv")
    assert refused.value.exit_code == 2

    def torch_build():
        raise AssertionError("torch imported where /dev shows a GPU")

    monkeypatch.setattr(gpus, "torch_build", torch_build)
    gpus.require_gpu("--primitive nccl", {}, tree(tmp_path / "b", "nvidia0"))


# ---------------------------------------------------------------------------------------------
# fabbench run: refused before any rank starts, in one line, exit code 2


@pytest.fixture
def no_gpu_here(monkeypatch, machine):
    """This host as one without a GPU (whatever it has), its ranks never started."""

    def set_(runtime: str | None, torch: TorchBuild | None = CUDA_TORCH) -> None:
        machine(torch=torch)
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.setattr(gpus, "gpu_devices", lambda root="/": 0)
        monkeypatch.setattr(gpus, "container_runtime", lambda env=None, root="/": runtime)
        monkeypatch.setattr(runner, "discover", lambda: None)

    def launched(*args, **kwargs):
        raise AssertionError("ranks were launched")

    monkeypatch.setattr(runner, "resolve", launched)
    monkeypatch.setattr(runner, "_launch", launched)
    return set_


@pytest.mark.parametrize("args, what", [
    (("--primitive", "nccl"), "--primitive nccl"),
    (("--primitive", "gloo", "--device", "cuda"), "--device cuda"),
    (("--primitive", "gloo", "--device", "cuda", "--workload", "train", "--model", "resnet50"),
     "--device cuda"),
])
def test_run_refuses_in_a_container_without_a_gpu(capsys, no_gpu_here, tmp_path, args, what):
    no_gpu_here("apptainer")
    out = tmp_path / "r.jsonl"
    code, stdout, err = cli(capsys, "run", "--fabric", "ethernet", *args, "--out", str(out))
    assert code == 2 and stdout == "" and not out.exists()
    assert err.splitlines() == [
        f"fabbench: error: {what} needs a GPU; no GPU visible in this container: run it with "
        "--nv"]


def test_run_refuses_on_a_host_without_a_gpu_saying_why(capsys, no_gpu_here, tmp_path):
    no_gpu_here(None, torch=CPU_TORCH)
    code, _, err = cli(capsys, "run", "--fabric", "ethernet", "--primitive", "nccl", "--out",
                       str(tmp_path / "r.jsonl"))
    assert code == 2 and err.splitlines() == [
        "fabbench: error: --primitive nccl needs a GPU; no GPU visible on this host (no "
        "/dev/nvidiaN device), and torch 2.13.0+cpu is a CPU build (torch.version.cuda is None)"]


def test_a_rank_of_a_launched_job_leaves_it_to_its_communicator(monkeypatch, no_gpu_here):
    """Inside a job the communicator asks, after its library's own checks (an MPI that is not
    CUDA-aware says so first): the launcher's refusal is for the ranks it would start."""
    no_gpu_here("apptainer")
    monkeypatch.setattr(runner, "discover", lambda: object())
    monkeypatch.setattr(runner, "announced_nodes", lambda me: None)
    monkeypatch.setattr(runner, "run_rank", lambda plan, state, me, judge: 7)
    from fabbench.config import RunConfig

    outcome = runner.run(RunConfig(fabric="ethernet", primitive="nccl"))
    assert outcome.code == 7 and not outcome.launched


# ---------------------------------------------------------------------------------------------
# fabbench doctor


def state(**kw) -> GpuState:
    return GpuState(**{"devices": 0, "present": 0, "hidden_by": None, "driver": False,
                       "torch": CUDA_TORCH, "torch_devices": 0, "container": None, **kw})


def test_doctor_in_the_cuda_image_without_the_driver_says_what_to_run_it_with():
    check = d.check_gpu(state(container="apptainer"), "cuda", "mpi")
    assert (check.name, check.verdict) == ("GPU", d.WARN)  # CPU ranks still run
    assert check.detail == ("cuda image, no GPU visible: the host's NVIDIA driver (libcuda.so.1) "
                            "is not in this container")
    assert check.fix == ("run with --nv (Apptainer), --device nvidia.com/gpu=all or --gpus all "
                         "(podman/docker), or the NVIDIA device plugin and a nvidia.com/gpu "
                         "limit (Kubernetes)")
    assert d.check_gpu(state(container="apptainer"), "cuda", "nccl").verdict == d.FAIL


def test_doctor_in_the_cuda_image_with_the_driver_but_no_device():
    check = d.check_gpu(state(container="podman", driver=True), "cuda", "mpi")
    assert check.verdict == d.WARN and check.detail == (
        "cuda image, no GPU visible: the NVIDIA driver (libcuda.so.1) is in this container but "
        "no GPU device (/dev/nvidiaN) is")
    assert check.fix.startswith("the runtime bound the driver, not the devices: run with --nv")


@pytest.mark.parametrize("kw, detail, fix", [
    ({}, "CUDA build of torch (2.13.0+cu130), no GPU visible: this host has no NVIDIA driver "
     "(libcuda.so.1 does not load) and no /dev/nvidiaN device", "run on a GPU node"),
    ({"driver": True}, "CUDA build of torch (2.13.0+cu130), no GPU visible: the NVIDIA driver "
     "(libcuda.so.1) loads but this host has no /dev/nvidiaN device", "nvidia-smi"),
    ({"present": 2, "hidden_by": "", "driver": True}, "CUDA build of torch (2.13.0+cu130), no "
     "GPU visible: CUDA_VISIBLE_DEVICES='' hides the 2 GPUs of this host",
     "unset CUDA_VISIBLE_DEVICES"),
])
def test_doctor_with_a_cuda_torch_on_a_host_without_a_gpu(kw, detail, fix):
    check = d.check_gpu(state(**kw), None, "gloo")
    assert check.verdict == d.WARN and check.detail == detail and fix in check.fix


def test_doctor_on_a_cpu_node_skips_and_fails_only_what_needs_a_gpu():
    cpu = state(torch=CPU_TORCH)
    check = d.check_gpu(cpu, "cpu", "mpi")
    assert check.verdict == d.SKIP and check.detail == (
        "no GPU visible on this host (torch 2.13.0+cpu is a CPU build): the ranks use CPU "
        "buffers")
    assert d.check_gpu(state(torch=None), None, "gloo").verdict == d.SKIP
    nccl = d.check_gpu(state(torch=CPU_TORCH, container="docker"), "cpu", "nccl")
    assert nccl.verdict == d.FAIL and nccl.detail.startswith(
        "nccl moves GPU buffers only, and no GPU is visible: the host's NVIDIA driver")
    assert "use fabbench's cuda image" in nccl.fix


def test_doctor_with_gpus():
    check = d.check_gpu(state(devices=4, present=4, driver=True), "cuda", "nccl")
    assert check.verdict == d.PASS and check.detail == "4 GPUs visible; torch 2.13.0+cu130 " \
        "(CUDA 13.0)"
    cpu = d.check_gpu(state(devices=1, present=1, driver=True, torch=CPU_TORCH), "cpu", "nccl")
    assert cpu.verdict == d.FAIL and cpu.detail == ("1 GPU visible, but torch 2.13.0+cpu is a "
                                                    "CPU build: the ranks cannot use them")
    assert d.check_gpu(state(devices=1, present=1, torch=CPU_TORCH), "cpu", "mpi").verdict == \
        d.WARN


def test_cli_doctor_json_carries_the_gpu_check(capsys, monkeypatch, machine, tmp_path):
    machine(driver=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(d, "image_flavor", lambda: "cuda")
    monkeypatch.setattr(gpus, "container_runtime", lambda env=None, root="/": "apptainer")
    code, out, _ = cli(capsys, "doctor", "--fabric", "ethernet", "--root", ETH_TREE, "--no-smoke",
                       "--json")
    report = json.loads(out)
    (gpu,) = [c for c in report["checks"] if c["name"] == "GPU"]
    assert gpu["verdict"] == "warn" and gpu["detail"].startswith("cuda image, no GPU visible: "
                                                                 "the host's NVIDIA driver")
    assert "--nv (Apptainer)" in gpu["fix"]
    assert code == (0 if report["ok"] else 1)


def test_image_flavor_from_the_build_manifest(monkeypatch, tmp_path):
    from fabbench.sysinfo import inventory

    manifest = tmp_path / "build.json"
    manifest.write_text(json.dumps({"image": {"flavor": "cuda"}}))
    monkeypatch.setattr(inventory, "BUILD_MANIFEST", manifest)
    assert d.image_flavor() == "cuda"
    monkeypatch.setattr(inventory, "BUILD_MANIFEST", tmp_path / "none.json")
    assert d.image_flavor() is None
