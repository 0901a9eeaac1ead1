"""`fabbench doctor`: preflight checks for one fabric, each with a verdict and the fix to apply.

Devices and ports, the /dev nodes the libraries open, the GPU, GPUDirect RDMA, memlock,
/dev/shm, the TCP interface, the fabric's libraries and providers (each tool with a timeout),
the launcher, and a 2-rank `fabbench run` smoke test of the transport. Which checks apply comes
from the fabric profile's data, never its name, so a site's copy of a profile gets the same
checks. Everything that reads the host takes ``root``, so the checks run over recorded sysfs
trees in tests."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import re
import resource
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fabbench import procs, runner
from fabbench.comm import primitives
from fabbench.config import RunConfig
from fabbench.errors import FabbenchError, UsageError
from fabbench.fabrics.detect import detect_fabric
from fabbench.fabrics.profile import Profile, Settings, load_profile
from fabbench.launch import launchers
from fabbench.launch.discover import discover
from fabbench.results.reader import read_results
from fabbench.results.records import Run, Summary
from fabbench.sysinfo.gpus import GpuState, gpu_count, gpus_visible, probe
from fabbench.sysinfo.inventory import build_manifest, container_runtime
from fabbench.sysinfo.sysfs import (
    default_route_interface,
    gpudirect_rdma,
    is_omnipath,
    net_devices,
    rdma_ports,
)
from fabbench.units import format_size
from fabbench.workloads.collectives import CollectivesConfig
from fabbench.workloads.collectives.record import Collective

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
SHM_MIN_BYTES = 512 << 20
TOOL_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str  # pass, warn, fail, skip
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class DoctorOptions:
    fabric: str = "auto"
    wire: str = "native"
    primitive: str | None = None
    iface: str | None = None
    rdma_device: str | None = None
    smoke: bool = True
    smoke_timeout_s: float = 30.0
    fidelity: bool = False  # also time fabbench against the bare loops (fabbench.fidelity)
    fidelity_rounds: int = 2
    root: str = "/"


@dataclass
class Report:
    fabric: str
    wire: str
    primitive: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(c.verdict == FAIL for c in self.checks)

    def to_json(self) -> dict[str, object]:
        return {"fabric": self.fabric, "wire": self.wire, "primitive": self.primitive,
                "ok": self.ok, "checks": [c.to_json() for c in self.checks]}


# a command runner: argv -> (exit code, output) or None when the tool is missing
Runner = Callable[[list[str]], "tuple[int, str] | None"]


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[int, str] | None:
    """The doctor's Runner over procs.run_tool: 124 when the tool hangs, 126 when it cannot
    start, as a shell says."""
    r = procs.run_tool(argv, timeout)
    if r is None:
        return None
    if r.timed_out:
        return 124, f"{argv[0]} did not answer within {timeout:.0f} s"
    if r.returncode is None:
        return 126, r.problem
    return r.returncode, r.output


# ---------------------------------------------------------------------------------------------
# devices


def check_devices(profile: Profile, wire: str, root: str = "/",
                  rdma_device: str | None = None) -> list[Check]:
    if profile.hardware == "none" and profile.single_host:
        return [Check("devices", PASS, "shared memory on one host: no network device needed")]
    if profile.hardware != "none" and wire != "native":
        return [Check("devices", SKIP, f"--wire {wire}: the {profile.name} stack runs over TCP, "
                                       "no fabric hardware needed")]
    if profile.hardware == "infiniband":
        return _check_verbs(root, rdma_device)
    if profile.hardware == "omnipath":
        return _check_hfi(root)
    up = [d for d in net_devices(root) if d.pci and d.operstate == "up" and d.kind == "ether"]
    if not up:
        return [Check("devices", WARN, "no physical Ethernet interface is up (only virtual or "
                      "loopback ones)", "ranks on several hosts need a real NIC: check "
                      "`ip link`; inside a container use the host network")]
    text = ", ".join(f"{d.name} {d.speed_mbit_s // 1000 if d.speed_mbit_s else '?'} Gb/s"
                     for d in up)
    return [Check("devices", PASS, f"Ethernet up: {text}")]


def _check_verbs(root: str, wanted: str | None) -> list[Check]:
    ports = [p for p in rdma_ports(root) if not is_omnipath(p)]
    if wanted:
        ports = [p for p in ports if p.device == wanted] or ports
    checks = []
    if not ports:
        checks.append(Check("devices", FAIL, "no InfiniBand/RoCE device under "
                            "/sys/class/infiniband", "load the driver (modprobe mlx5_ib) or, "
                            "without the hardware, run the same stack with --wire tcp"))
    else:
        active = [p for p in ports if p.active]
        shown = "; ".join(f"{p.device}:{p.port} {p.state} {p.rate or '?'} "
                          f"({'RoCE' if p.link_layer == 'Ethernet' else p.link_layer})"
                          for p in ports)
        if active:
            roce = any(p.link_layer == "Ethernet" for p in active)
            checks.append(Check("devices", PASS, f"ports: {shown}",
                                "RoCE: set NCCL_IB_GID_INDEX (usually 3, RoCE v2) in a site "
                                "profile" if roce else None))
        else:
            checks.append(Check("devices", FAIL, f"no port is ACTIVE: {shown}",
                                "check the cable and that a subnet manager runs (opensm / the "
                                "switch's); `ibstat` shows the port state"))
    checks.append(_dev_nodes(root, "infiniband/uverbs*", "/dev/infiniband/uverbs*",
                             "inside a container pass the devices: docker --device "
                             "/dev/infiniband, Apptainer binds /dev by default"))
    return checks


def _check_hfi(root: str) -> list[Check]:
    ports = [p for p in rdma_ports(root) if is_omnipath(p)]
    active = [p for p in ports if p.active]
    if active:
        shown = "; ".join(f"{p.device}:{p.port} {p.state} {p.rate or '?'}" for p in ports)
        checks = [Check("devices", PASS, f"OmniPath ports: {shown}")]
    elif ports:
        checks = [Check("devices", FAIL, "no OmniPath port is ACTIVE: " + "; ".join(
            f"{p.device}:{p.port} {p.state}" for p in ports), "check the cable and that the "
            "fabric manager runs (opafm); `opainfo` shows the port state")]
    else:
        checks = [Check("devices", FAIL, "no hfi1 device under /sys/class/infiniband",
                        "load the hfi1 driver (modprobe hfi1) or run with --wire tcp")]
    checks.append(_dev_nodes(root, "hfi1_*", "/dev/hfi1_*", "inside a container pass the "
                             "device: docker --device /dev/hfi1_0"))
    return checks


def _dev_nodes(root: str, pattern: str, shown: str, fix: str) -> Check:
    found = sorted(p.name for p in Path(root, "dev").glob(pattern))
    if found:
        return Check("device files", PASS, f"{shown}: {', '.join(found)}")
    return Check("device files", FAIL, f"no {shown}: the user-space library cannot open the "
                 "device", fix)


GPU_RUNTIME_FIX = ("run with --nv (Apptainer), --device nvidia.com/gpu=all or --gpus all "
                   "(podman/docker), or the NVIDIA device plugin and a nvidia.com/gpu limit "
                   "(Kubernetes)")
CUDA_TORCH_FIX = ("use fabbench's cuda image, or install a CUDA build of torch "
                  "(pip install torch --index-url https://download.pytorch.org/whl/cu130)")


def image_flavor() -> str | None:
    """The flavour of the fabbench image this runs in (cpu, cuda), None outside one."""
    return ((build_manifest() or {}).get("image") or {}).get("flavor")


def check_gpu(state: GpuState, flavor: str | None, primitive: str) -> Check:
    """GPUs visible and usable by this torch; where none is, what lacks and why. A failure
    only where the primitive moves GPU buffers only (nccl); a warning where the image or torch
    is made for GPUs (CPU ranks still run); else no check of this host (skip)."""
    needs = primitives.get(primitive).gpu_only
    torch = state.torch
    cpu_torch = state.cpu_torch
    if state.visible:
        shown = (f"{state.devices} GPU{'s' if state.devices > 1 else ''} visible"
                 if state.devices else f"{state.torch_devices} GPU(s) visible to torch "
                 "(no /dev/nvidiaN)")
        if torch is None or cpu_torch:
            lacks = "torch does not import" if torch is None else \
                f"torch {torch.version} is a CPU build"
            return Check("GPU", FAIL if needs else WARN, f"{shown}, but {lacks}: the ranks "
                         "cannot use them", CUDA_TORCH_FIX)
        return Check("GPU", PASS, f"{shown}; torch {torch.version} (CUDA {torch.cuda})")
    if flavor != "cuda" and not needs and (torch is None or cpu_torch):
        return Check("GPU", SKIP, f"no GPU visible {state.where}"
                     + (f" (torch {cpu_torch.version} is a CPU build)" if cpu_torch else "")
                     + ": the ranks use CPU buffers")
    lacks, fix = _no_gpu(state)
    if cpu_torch:
        lacks, fix = f"{lacks}; torch {cpu_torch.version} is a CPU build", f"{fix}; " \
            f"{CUDA_TORCH_FIX}"
    what = ("cuda image" if flavor == "cuda" else
            f"CUDA build of torch ({torch.version})" if torch is not None and not cpu_torch else
            None)
    if what:
        return Check("GPU", FAIL if needs else WARN, f"{what}, no GPU visible: {lacks}", fix)
    return Check("GPU", FAIL, f"{primitive} moves GPU buffers only, and no GPU is visible: "
                 f"{lacks}", fix)


def _no_gpu(state: GpuState) -> tuple[str, str]:
    """Why no GPU is visible (the CUDA_VISIBLE_DEVICES, the driver, the devices, in or out of a
    container), and the fix."""
    hidden = state.hidden()
    if hidden is not None:
        return hidden, "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use in it"
    if state.container and not state.driver:
        return ("the host's NVIDIA driver (libcuda.so.1) is not in this container",
                GPU_RUNTIME_FIX)
    if state.container:
        return ("the NVIDIA driver (libcuda.so.1) is in this container but no GPU device "
                "(/dev/nvidiaN) is", f"the runtime bound the driver, not the devices: "
                f"{GPU_RUNTIME_FIX}")
    if not state.driver:
        return ("this host has no NVIDIA driver (libcuda.so.1 does not load) and no "
                "/dev/nvidiaN device", "run on a GPU node (with the NVIDIA driver installed)")
    return ("the NVIDIA driver (libcuda.so.1) loads but this host has no /dev/nvidiaN device",
            "check the driver's kernel module (nvidia-smi says what fails), or run on a GPU "
            "node")


def check_gpudirect(root: str = "/", gpus: bool = False) -> Check:
    if not gpus:
        return Check("GPUDirect RDMA", SKIP, "no GPU visible")
    if gpudirect_rdma(root):
        return Check("GPUDirect RDMA", PASS, "nvidia_peermem (or nv_mem) is loaded")
    return Check("GPUDirect RDMA", WARN, "GPUs but no nvidia_peermem: GPU buffers are staged "
                 "through host memory", "modprobe nvidia_peermem (part of the NVIDIA driver)")


# ---------------------------------------------------------------------------------------------
# limits


def check_memlock(rdma: bool, limit: int | None = None) -> Check:
    """RDMA registers (pins) memory: the locked-memory limit must be unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] if limit is None else limit
    shown = "unlimited" if soft == resource.RLIM_INFINITY else f"{soft >> 10} KiB"
    if soft == resource.RLIM_INFINITY:
        return Check("memlock", PASS, "unlimited")
    if not rdma:
        return Check("memlock", PASS, f"{shown} (only RDMA fabrics need it unlimited)")
    return Check("memlock", FAIL, f"{shown}: RDMA memory registration will fail or be "
                 "capped", "`ulimit -l unlimited` (limits.conf: `* - memlock unlimited`); "
                 "docker run --ulimit memlock=-1 --cap-add IPC_LOCK; Slurm: "
                 "PropagateResourceLimitsExcept=MEMLOCK")


def check_shm(required: bool, path: str = "/dev/shm", size: int | None = None) -> Check:
    """/dev/shm big enough; a failure when shared memory is the fabric (``required``)."""
    if size is None:
        try:
            st = os.statvfs(path)
            size = st.f_frsize * st.f_blocks
        except OSError:
            return Check("/dev/shm", FAIL, f"{path} is missing", "mount a tmpfs on /dev/shm "
                         "(containers: docker run --shm-size=8g)")
    shown = f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size >> 20} MiB"
    if size >= SHM_MIN_BYTES:
        return Check("/dev/shm", PASS, shown)
    verdict = FAIL if required else WARN
    return Check("/dev/shm", verdict, f"{shown}: too small for shared-memory transports and "
                 "NCCL (Docker's default is 64 MB)", "docker run --shm-size=8g (or --ipc=host); "
                 "Kubernetes: an emptyDir with medium: Memory on /dev/shm")


# ---------------------------------------------------------------------------------------------
# interface


def pick_iface(profile: Profile, wire: str, root: str = "/", iface: str | None = None
               ) -> str | None:
    """The interface TCP traffic and the rendezvous use: --iface; IPoIB on RDMA fabrics; else
    the default route's."""
    if iface:
        return iface
    if profile.native(wire):
        ipoib = [d for d in net_devices(root) if d.kind == "infiniband" and d.operstate == "up"]
        if ipoib:
            return ipoib[0].name
    return default_route_interface(root)


def check_iface(name: str | None, root: str = "/",
                addresses: Mapping[str, list[str]] | None = None) -> Check:
    if name is None:
        return Check("interface", FAIL, "no default route and no --iface: no interface for "
                     "TCP traffic and the rendezvous", "give --iface NAME")
    dev = next((d for d in net_devices(root) if d.name == name), None)
    if dev is None:
        return Check("interface", FAIL, f"{name} does not exist",
                     "choose one of `ip -br link` with --iface")
    if addresses is None:
        import psutil

        addresses = {n: [a.address for a in addrs if a.family.name in ("AF_INET", "AF_INET6")]
                     for n, addrs in psutil.net_if_addrs().items()}
    addrs = addresses.get(name, [])
    if not addrs:
        return Check("interface", FAIL, f"{name} has no IP address",
                     f"configure an address on {name} (`ip addr add ... dev {name}`)")
    if dev.operstate not in ("up", "unknown"):
        return Check("interface", WARN, f"{name} is {dev.operstate} ({', '.join(addrs)})",
                     f"ip link set {name} up")
    return Check("interface", PASS, f"{name}: {', '.join(addrs)}"
                 + (f", mtu {dev.mtu}" if dev.mtu else ""))


# ---------------------------------------------------------------------------------------------
# libraries and providers

def ompi_components(mpi: Settings) -> list[str]:
    """The Open MPI components a profile's MPI section selects ("pml: ucx", "btl: tcp"): its
    pml and mtl, and the btl list when it names what to use (not "^..." exclusions)."""
    needs = [f"{fw}: {mpi.mca[fw]}" for fw in ("pml", "mtl") if mpi.mca.get(fw)]
    btl = mpi.mca.get("btl", "")
    if btl and not btl.startswith("^"):
        needs += [f"btl: {b}" for b in btl.split(",") if b.strip() and b.strip() != "self"]
    return needs


def check_libraries(profile: Profile, wire: str, primitive: str,
                    run: Runner = run_tool) -> list[Check]:
    """Open MPI (for primitives over MPI), then UCX and libfabric when the profile's MPI section
    goes through them (pml ucx, mtl ofi) whatever the primitive: they are the fabric's stack."""
    checks = []
    mpi = profile.settings("mpi", wire)
    if primitives.get(primitive).backend() == "mpi":
        out = run(["ompi_info"])
        if out is None:
            checks.append(Check("Open MPI", FAIL, "ompi_info is not on PATH", "install Open "
                                "MPI (apt-get install openmpi-bin) or use the fabbench image"))
        else:
            code, text = out
            version = re.search(r"Open MPI: v?([\d.]+)", text)
            needs = ompi_components(mpi)
            missing = [n for n in needs if not re.search(
                rf"MCA {n.split(':')[0]}: ({n.split(': ')[1]}) ", text)]
            if code != 0 or missing:
                checks.append(Check("Open MPI", FAIL, f"components missing: {', '.join(missing)}"
                                    if missing else f"ompi_info failed ({code})",
                                    "use an Open MPI built with them (the image's is)"))
            else:
                checks.append(Check("Open MPI", PASS, f"{version.group(1) if version else '?'}"
                                    + (f" with {', '.join(needs)}" if needs else "")))
    if mpi.mca.get("pml") == "ucx":
        tls = mpi.env.get("UCX_TLS", "rc")
        checks.append(_check_ucx(tls.split(",")[0].split("_")[0], run))
    if mpi.mca.get("mtl") == "ofi":
        provider = mpi.mca.get("mtl_ofi_provider_include") or mpi.env.get("FI_PROVIDER", "")
        checks.append(_check_ofi(provider.split(";")[0].split(",")[0], run))
    if primitive == "nccl":
        checks.append(Check("NCCL", SKIP, "NCCL's network plugin is checked by the smoke test "
                            "(it reports NET/IB or NET/Socket)"))
    return checks


def check_packages(primitive: str) -> list[Check]:
    """The Python packages the primitive needs beyond fabbench's own dependencies (its
    registry's ``module``: mpi4py, horovod), and those of the primitive it runs over, each
    importable here: without one, every rank fails at its first line."""
    spec = primitives.get(primitive)
    over = spec.backend()
    names = dict.fromkeys(m for m in (spec.module, primitives.get(over).module
                                      if over in primitives.PRIMITIVES else None) if m)
    return [Check(name, PASS, f"{_version(name)}, importable")
            if importlib.util.find_spec(name) is not None else
            Check(name, FAIL, f"the Python package {name} is not installed (the {primitive} "
                  "primitive needs it)", f"pip install {name} (it builds against the MPI on "
                  "PATH), or use the fabbench image, or pick another --primitive")
            for name in names]


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "version unknown"


def _check_ucx(want: str, run: Runner) -> Check:
    """UCX has the transport the profile's UCX_TLS asks for first (rc, tcp, ...)."""
    out = run(["ucx_info", "-d"])
    if out is None:
        return Check("UCX", FAIL, "ucx_info is not on PATH", "install UCX (ucx-utils)")
    transports = sorted(set(re.findall(r"Transport:\s*(\S+)", out[1])))
    if any(t == want or t.startswith(f"{want}_") for t in transports):
        return Check("UCX", PASS, f"transports: {', '.join(transports)}")
    return Check("UCX", FAIL, f"no {want} transport (UCX has: {', '.join(transports) or 'none'})",
                 "UCX needs rdma-core (libibverbs, libmlx5) and the device; `ucx_info -d` "
                 "lists what it sees" if want == "rc" else "build UCX with TCP support")


def _check_ofi(provider: str, run: Runner) -> Check:
    """libfabric has the provider the profile's MPI section selects (psm2, tcp, ...)."""
    out = run(["fi_info", "-p", provider])
    if out is None:
        return Check("libfabric", FAIL, "fi_info is not on PATH", "install libfabric-bin")
    code, text = out
    if code == 0 and re.search(rf"provider:\s*{provider}\b", text):
        return Check("libfabric", PASS, f"provider {provider} available")
    return Check("libfabric", FAIL, f"provider {provider} not available ({text.strip()[:80]})",
                 "PSM2 needs libpsm2 and /dev/hfi1_*; check `fi_info -p psm2`"
                 if provider == "psm2" else "install libfabric with its tcp provider")


# ---------------------------------------------------------------------------------------------
# launcher


def check_launcher(primitive: str, env: Mapping[str, str] | None = None,
                   run: Runner = run_tool) -> Check:
    env = os.environ if env is None else env
    try:
        me = discover(env)
    except UsageError as exc:
        return Check("launcher", FAIL, str(exc), "check the launcher's environment")
    expected = _int(env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS"))
    if me is not None:
        if expected and expected > 1 and me.size == 1:
            return Check("launcher", FAIL, f"{me.origin} says world size 1 but Slurm started "
                         f"{expected} tasks: every rank is 'rank 0 of 1'",
                         "srun --mpi=pmix, and an Open MPI in the image built with the host's "
                         "PMIx (or mpirun inside the allocation)")
        if me.size == 1:
            return Check("launcher", WARN, f"started by {me.origin} with world size 1",
                         "start at least 2 ranks to measure communication")
        return Check("launcher", PASS, f"rank {me.rank} of {me.size} (started by "
                     f"{me.origin}, local rank {me.local_rank})")
    ready = launchers.get(primitives.get(primitive).launcher()).ready(run)
    return Check("launcher", PASS if ready.ok else FAIL, ready.what, ready.fix)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# smoke test


@contextlib.contextmanager
def _quiet(log: Path) -> Iterator[None]:
    """Send this process's and its children's stdout/stderr to a file for a while."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (fd, *saved):
            os.close(f)


def smoke_test(o: DoctorOptions, primitive: str) -> Check:
    """2 local ranks, one allreduce at 8 B and 64 KiB, through `fabbench run` as a library; 1 rank
    for a GPU-only primitive on a host with one GPU (NCCL refuses two ranks on one device)."""
    if discover() is not None:
        return Check("smoke test", SKIP, "inside a launched job: run `fabbench run` itself")
    ranks = 1 if primitives.get(primitive).gpu_only and gpu_count(o.root) == 1 else 2
    alone = " (one GPU: NCCL refuses two ranks on one device)" if ranks == 1 else ""
    with tempfile.TemporaryDirectory(prefix="fabbench-doctor-") as tmp:
        out, log = Path(tmp, "smoke.jsonl"), Path(tmp, "smoke.log")
        try:
            run_config = RunConfig(
                fabric=o.fabric, primitive=primitive, wire=o.wire, ranks=ranks,
                timeout_s=o.smoke_timeout_s, out=str(out), iface=o.iface,
                rdma_device=o.rdma_device, collectives=CollectivesConfig(
                    ops=("allreduce",), sizes="8,64K", budget_s=0.02, min_samples=3,
                    max_samples=20))
            with _quiet(log):
                outcome = runner.run(run_config, ("fabbench", "doctor"))
        except FabbenchError as exc:
            return Check("smoke test", FAIL, str(exc), _tail(log))
        try:
            results = read_results(out)
        except FabbenchError as exc:
            return Check("smoke test", FAIL, f"no results ({exc})", _tail(log))
        run = results.of_kind(Run)[0]
        summary = results.of_kind(Summary)
        transports = sorted({c.transport for c in results.of_kind(Collective)})
        wanted = ", ".join(run.expected_transport or []) or "?"
        if outcome.code != 0 or not summary or not summary[-1].ok:
            error = summary[-1].error if summary else f"exit code {outcome.code}"
            return Check("smoke test", FAIL, f"{ranks}-rank allreduce failed: {error}",
                         _tail(log))
        if run.ranks != ranks:
            return Check("smoke test", FAIL, f"asked for {ranks} ranks, the run had {run.ranks}")
        return Check("smoke test", PASS, f"{ranks} rank{'s' if ranks > 1 else ''}{alone}, "
                     f"allreduce 8 B and 64 KiB over {', '.join(transports)} (the profile "
                     f"accepts {wanted})")


SHARED_MEMORY_FIX = (
    "Apptainer without setuid gives each `apptainer exec` a user namespace of its own, and "
    "ranks of one node in different containers cannot map each other's memory (Apptainer "
    "issues #769, #1583): run a node's ranks in one container (`apptainer run fabbench.sif run "
    "...`, fabbench's own launcher), or start them with `apptainer exec --sharens`, or use "
    "--fabric ethernet between them")


def check_shared_memory_in_apptainer(o: DoctorOptions) -> Check:
    """Inside Apptainer: 2 ranks of this container over shared memory (fabric shm), the
    transport that ran named, or the fix."""
    found = smoke_test(replace(o, fabric="shm", wire="native", iface=None, rdma_device=None),
                       "mpi")
    name = "shared memory between ranks (apptainer)"
    if found.verdict == PASS:
        return Check(name, PASS, found.detail.replace("2 ranks,", "2 ranks of this container,"))
    return Check(name, found.verdict, found.detail,
                 SHARED_MEMORY_FIX if found.verdict == FAIL else found.fix)


FIDELITY_SIZES = (8, 1 << 20, 4 << 20)


def check_fidelity(o: DoctorOptions, fabric: str, primitive: str, gpus: bool) -> Check:
    """fabbench against the bare loop of its library on this host and fabric, alternating: can
    fabbench's numbers be trusted here? (docs/methods.md, "Fidelity")"""
    from fabbench.fidelity import check as fidelity

    if discover() is not None:
        return Check("fidelity", SKIP, "inside a launched job: run `fabbench doctor --fidelity` "
                     "on a node outside one")
    path = fidelity.path_for(fabric, primitive, wire=o.wire,
                             device="cuda" if primitive == "nccl" or gpus else "cpu",
                             c_loop=shutil.which("mpicc") is not None)
    try:
        points = fidelity.compare(path, "allreduce", list(FIDELITY_SIZES),
                                  rounds=o.fidelity_rounds)
    except FabbenchError as exc:
        return Check("fidelity", FAIL, f"could not compare: {exc}")
    judged = [(p, *p.verdict(primitive)) for p in points if p.reference == path.references[0]]
    shown = "; ".join(f"{format_size(p.bytes)} {p.ratio:.3f}" for p, _, _ in judged)
    misses = [p for p, met, _ in judged if met is False]
    what = (f"fabbench / {fidelity.REFERENCES[path.references[0]]} (busbw ratio, median of "
            f"{o.fidelity_rounds} paired rounds): {shown}")
    if not misses:
        return Check("fidelity", PASS, what + f"; within 1+-{fidelity.BAND_REL:g}")
    worst = max(misses, key=lambda p: abs(p.ratio - 1))
    return Check("fidelity", FAIL, what + f"; {format_size(worst.bytes)} is outside the band: "
                 "fabbench's figures on this host carry a host-side artefact",
                 "run on a quiet node (nothing else on its cores) and check again; "
                 "python bench/fidelity.py compares every path (docs/methods.md, Fidelity)")


def _tail(log: Path, lines: int = 3) -> str | None:
    try:
        text = [ln for ln in log.read_text(errors="replace").splitlines()
                if ln.strip() and "mca: base: close" not in ln]
    except OSError:
        return None
    return " | ".join(text[-lines:]) or None


# ---------------------------------------------------------------------------------------------


def doctor(o: DoctorOptions, *, run: Runner = run_tool, env: Mapping[str, str] | None = None,
           addresses: Mapping[str, list[str]] | None = None) -> Report:
    fabric = detect_fabric(o.root) if o.fabric == "auto" else o.fabric
    profile = load_profile(fabric)
    gpus = gpus_visible(o.root)
    primitive = o.primitive or primitives.default_primitive(gpus)[0]
    spec = primitives.get(primitive)
    report = Report(profile.name, o.wire, primitive)
    if o.wire != "native" and o.wire not in profile.wires:
        raise UsageError(f"fabric {profile.name!r} has no --wire {o.wire}")
    report.checks += check_devices(profile, o.wire, o.root, o.rdma_device)
    report.checks.append(check_gpu(probe(env, o.root), image_flavor(), primitive))
    report.checks.append(check_gpudirect(o.root, gpus))
    report.checks.append(check_memlock(profile.native(o.wire)))
    report.checks.append(check_shm(profile.single_host))
    # an interface carries TCP traffic or a rendezvous: always, but for MPI on one host
    if not profile.single_host or not launchers.get(spec.launcher()).mpi:
        report.checks.append(check_iface(pick_iface(profile, o.wire, o.root, o.iface), o.root,
                                         addresses))
    report.checks += check_packages(primitive)
    report.checks += check_libraries(profile, o.wire, primitive, run)
    report.checks.append(check_launcher(primitive, env, run))
    if not o.smoke:
        report.checks.append(Check("smoke test", SKIP, "--no-smoke"))
    elif not report.ok:
        report.checks.append(Check("smoke test", SKIP, "skipped: fix the failures above first"))
    else:
        report.checks.append(smoke_test(o, primitive))
        if container_runtime(env) == "apptainer":
            report.checks.append(check_shared_memory_in_apptainer(o))
    if o.fidelity:
        report.checks.append(check_fidelity(o, fabric, primitive, gpus) if report.ok else Check(
            "fidelity", SKIP, "skipped: fix the failures above first"))
    return report
