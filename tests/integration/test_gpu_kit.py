"""The GPU kit (bench/gpu/, issue 25) rehearsed on CPU: `prepare` makes the folder, a fresh
virtual environment that has only what the GPU machine has installs from that folder alone, and
the device command runs every step with --device cpu (no NCCL: those steps say why).

The fresh environment: `python -m venv` (no system site-packages), plus one .pth line naming a
folder of symlinks to the distributions the GPU machine is known to have
(prepare.GPU_MACHINE_HAS: torch, numpy, typer, rich, jinja2, psutil, ...) and to everything they
require, as installed in this project's venv. Torch is not installed again (a 200 MB CPU wheel:
a minute of the 2 cores for nothing the kit provides); fabbench, jsonschema and the rest of what
fabbench needs are in no such folder, so they can only come from the kit, and the test checks
that they are missing before the install. The machine's Python is 3.12 and this one is 3.11: the
rehearsal's kit is made for this interpreter (`prepare --python-version 3.11`), the GPU's for
3.12 (test_prepare_for_the_gpu_machine).

The cuda-mpi step carries the cuda image's Open MPI (tests/integration/test_gpu_kit_cuda.py,
opt-in: make test never builds that image); here its loop, mpi_loop.c built with -DFB_CUDA by
this host's mpicc against the CUDA toolkit of containers/cuda-toolkit.sh, runs as 2 ranks with
the step's own mpirun line and says, in one line and exit 3, that it found no CUDA device."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import REPO, needs_mpirun
from fabbench.results.reader import read_results

pytestmark = [pytest.mark.together, pytest.mark.integration]

KIT = REPO / "bench" / "gpu"
HERE_PY = "{}.{}".format(*sys.version_info[:2])


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"gpukit_{name}", KIT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(KIT))  # osu and peers import cuda_mpi beside them
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(KIT))
    return module


def _prepare_module():
    return _module("prepare")


def _run(argv: list[str], timeout: float, env: dict | None = None
         ) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=REPO, env={**clean, **(env or {})})


def _closure(names) -> dict[str, metadata.Distribution]:
    """The distributions installed here among `names`, and what they require, transitively."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found, todo = {}, list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # scipy, torchvision: not here (no CPU torchvision); fabbench needs neither
        found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def _gpu_machine_stand_in(base: Path, has) -> set[str]:
    """A folder of symlinks to the top-level entries of what the GPU machine has."""
    base.mkdir()
    dists = _closure(has)
    for dist in dists.values():
        for top in {Path(str(f)).parts[0] for f in dist.files or []} - {".."}:
            link = base / top
            if not link.exists():
                link.symlink_to(Path(str(dist.locate_file(top))))
    return set(dists)


def _fresh_venv(where: Path, base: Path) -> Path:
    python = getattr(sys, "_base_executable", None) or shutil.which("python3")
    p = _run([python, "-m", "venv", str(where)], 180)
    assert p.returncode == 0, p.stderr
    site = next(where.glob("lib/python3*/site-packages"))
    (site / "gpu-machine.pth").write_text(f"{base}\n")
    return where / "bin" / "python"


@pytest.mark.timeout(900)
def test_cpu_rehearsal_installs_from_the_kit_and_runs_every_step(tmp_path):
    prepare = _prepare_module()
    kit, out, site = tmp_path / "kit", tmp_path / "out", tmp_path / "site"
    p = _run([sys.executable, str(KIT / "prepare.py"), "--out", str(kit),
              "--python-version", HERE_PY, "--cuda-image", "none", "--mpich", "none"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    assert manifest["python_version"] == HERE_PY and manifest["bytes"] < 64 * 2**20
    assert manifest["cuda_mpi"] == {"included": False, "why": "left out: --cuda-image none"}
    assert manifest["mpich"] == {"included": False, "why": "left out: --mpich none"}
    names = [re.split(r"-\d", w, maxsplit=1)[0].lower() for w in manifest["wheels"]]
    assert "fabbench" in names and "jsonschema" in names and len(names) == len(set(names))

    base = tmp_path / "gpu-machine"
    has = _gpu_machine_stand_in(base, prepare.GPU_MACHINE_HAS)
    assert {"torch", "numpy", "typer", "jinja2"} <= has and "jsonschema" not in has
    python = _fresh_venv(tmp_path / "venv", base)
    before = _run([str(python), "-c", "import torch, numpy, typer, rich, jinja2, psutil\n"
                   "for name in ('fabbench', 'jsonschema'):\n"
                   "    try:\n        __import__(name)\n        print(name, 'importable')\n"
                   "    except ImportError:\n        pass"], 120)
    assert before.returncode == 0 and before.stdout == "", before.stdout + before.stderr

    p = _run(["bash", str(KIT / "run.sh"), "--device", "cpu", "--scale", "tiny",
              "--deadline-s", "400"], 480,
             env={"PYTHON": str(python), "GPUKIT": str(kit), "OUT": str(out),
                  "GPUKIT_SITE": str(site)})
    print(p.stdout)
    summary = json.loads((out / "summary.json").read_text())
    steps = {s["name"]: s for s in summary["steps"]}
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    # at most 8 files, flat, each one the kit names
    files = sorted(out.iterdir())
    assert len(files) <= 8 and all(f.is_file() for f in files), files
    assert {f.name for f in files} <= {"summary.md", "summary.json", "results.jsonl",
                                       "nccl.log", "env.json", "console.log"}
    assert list(steps) == ["install", "env", "cuda-mpi", "cuda-mpich", "osu", "doctor", "nccl",
                           "nccl-tests",
                           "nccl-eager", "graph-probe", "gpudirect-on", "nccl-2-ranks",
                           "fidelity-image",
                           "fidelity-tokens", "train-image", "train-tokens", "gloo-2-ranks"]
    # a kit without the cuda image's bundle says why, and the step says it
    assert steps["cuda-mpi"]["status"] == "skipped"
    assert steps["cuda-mpi"]["reason"] == ("the kit has no cuda-mpi.tar.xz: left out: "
                                           "--cuda-image none")
    assert steps["cuda-mpich"]["status"] == "skipped"
    assert steps["cuda-mpich"]["reason"] == ("the kit has no mpich-cuda.tar.xz: left out: "
                                             "--mpich none")
    assert steps["osu"] == {**steps["osu"], "status": "skipped",
                            "reason": "no GPU on --device cpu: OSU's programs run with -d cuda"}
    # fabbench came from the kit's install, on the venv's Python
    assert steps["install"]["status"] == "ok"
    assert Path(steps["install"]["figures"]["imported_from"]).is_relative_to(site)
    assert steps["install"]["figures"]["executable"] == str(python)
    # no NCCL on CPU: skipped with the reason; the refusal asserted; everything else ran
    for name in ("nccl", "nccl-tests", "nccl-eager", "graph-probe", "nccl-2-ranks"):
        assert steps[name]["status"] == "skipped" and "NCCL" in steps[name]["reason"]
    assert steps["gpudirect-on"]["status"] == "ok"
    # doctor asked about the primitive the kit runs (a CI run asked about mpi, whose mpi4py the
    # kit leaves out, and its smoke test failed unseen behind the step's "ok")
    assert steps["doctor"]["reason"] == "doctor: ready", steps["doctor"]
    assert "--device cuda" in steps["gpudirect-on"]["reason"]
    for name in ("env", "doctor", "fidelity-image", "fidelity-tokens", "train-image",
                 "train-tokens", "gloo-2-ranks"):
        assert steps[name]["status"] == "ok", steps[name]
    for name, model in (("fidelity-image", "resnet50"), ("fidelity-tokens", "gpt-tiny")):
        fid = steps[name]["figures"]
        assert fid["model"] == model and fid["device"] == "cpu" and fid["ratio_mean"] > 0
        assert f"{fid['ratio_mean']:.3f}" in steps[name]["reason"]
    gloo = steps["gloo-2-ranks"]["figures"]["ops"]
    assert set(gloo) == {"allreduce", "broadcast"} and all(o["correct"] for o in gloo.values())
    # every results file kept, one after another, valid against the schema
    results = read_results(out / "results.jsonl")
    runs = results.of_kind("run")
    assert [r.primitive for r in runs] == ["gloo"] * 4
    assert [r.ranks for r in runs] == [1, 1, 2, 2]
    assert all(s.ok for s in results.of_kind("summary"))
    assert len(results.of_kind("train")) == 2
    table = (out / "summary.md").read_text()
    assert all(f"| {name} | {steps[name]['status']} |" in table for name in steps)
    assert "not every step held" not in table.lower()
    console = (out / "console.log").read_text()
    assert "Successfully installed" in console and "fabbench-0.1.0" in console  # pip's log


@pytest.mark.timeout(600)
def _installs_on_cp312(wheel: str) -> bool:
    """A binary wheel CPython 3.12 installs: built for cp312, or for the stable ABI (abi3) of
    a CPython no newer than 3.12 (duckdb's cp312-abi3, jsonschema-rs' cp310-abi3)."""
    python, abi = wheel.split("-")[-3:-1]
    if abi == "abi3":
        return bool(re.fullmatch(r"cp3\d+", python)) and int(python[3:]) <= 12
    return python == "cp312" and abi == "cp312"


def test_prepare_for_the_gpu_machine(tmp_path):
    """The real kit: CPython 3.12 on manylinux x86-64 (its binary wheels come from PyPI)."""
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        pytest.skip("needs PyPI (pypi.org) for the cp312 wheels")
    kit = tmp_path / "kit"
    p = _run([sys.executable, str(KIT / "prepare.py"), "--out", str(kit)], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    manifest = json.loads((kit / "MANIFEST.json").read_text())
    wheels = sorted(w.name for w in kit.glob("*.whl"))
    assert wheels == sorted(manifest["wheels"]) and manifest["python_version"] == "3.12"
    assert sum(f.stat().st_size for f in kit.iterdir()) < 64 * 2**20
    binary = [w for w in wheels if not w.endswith("-none-any.whl")]
    assert binary and all(_installs_on_cp312(w) and "manylinux" in w and "x86_64" in w
                          for w in binary), binary
    names = [re.split(r"-\d", w, maxsplit=1)[0].lower() for w in wheels]
    assert len(names) == len(set(names)) and {"fabbench", "jsonschema", "rpds_py"} <= set(names)


def _toolkit_or_skip(cuda_mpi) -> None:
    """The CUDA toolkit in $FABBENCH_CACHE (installed once from PyPI's wheels)."""
    version = cuda_mpi.pinned("CUDA_VERSION")
    if (cuda_mpi.cache_dir() / f"cuda-{version}" / "version.json").exists():
        return
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        pytest.skip(f"needs PyPI (pypi.org) once for CUDA {version}'s wheels "
                    "(containers/cuda-toolkit.sh)")


@needs_mpirun
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs mpicc (libopenmpi-dev)")
def test_cuda_loop_without_a_gpu_says_so_in_one_line_and_exits_3():
    """The cuda-mpi step's loop and command line, rehearsed with this host's Open MPI: built
    with -DFB_CUDA against CUDA 13's libcudart, 2 ranks over pml ucx find no device; rank 0 says
    so with CUDA's own words, every rank exits 3 after MPI_Finalize, and UCX named the
    transports of the one allreduce the ranks did to agree."""
    cuda_mpi = _module("cuda_mpi")
    _toolkit_or_skip(cuda_mpi)
    loop = cuda_mpi.build_host_loop()
    assert cuda_mpi.build_host_loop() == loop  # cached
    env = {"OMPI_MCA_mpi_yield_when_idle": "1"}
    p = _run(cuda_mpi.mpirun_argv("mpirun", str(loop), "allreduce", [8, 4096]), 120, env=env)
    text = p.stdout + p.stderr
    said = [line for line in text.splitlines() if line.startswith(cuda_mpi.NO_DEVICE)]
    assert p.returncode == cuda_mpi.NO_DEVICE_EXIT, text[-3000:]
    assert len(said) == 1 and len(said[0]) > len(cuda_mpi.NO_DEVICE) + 5, text[-3000:]
    assert cuda_mpi.points(p.stdout) == {}  # nothing measured
    tls = cuda_mpi.transports(text)
    assert tls and all("/" in t for t in tls), text[-3000:]
    # the same program without --cuda: the host-memory loop, both sizes, results checked
    p = _run(["mpirun", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
              "--oversubscribe", "-np", "2", "--mca", "btl", "self,vader", str(loop),
              "sendrecv", "8", "4096"], 120, env=env)
    assert p.returncode == 0 and set(cuda_mpi.points(p.stdout)) == {8, 4096}, p.stderr[-3000:]
    # --cuda in a build without FB_CUDA: refused, exit 2
    from fabbench.fidelity.check import build_c_loop

    p = _run(["mpirun", *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
              "--oversubscribe", "-np", "2", "--mca", "btl", "self,vader", str(build_c_loop()),
              "allreduce", "--cuda", "8"], 120, env=env)
    assert p.returncode == 2 and "--cuda needs a build with -DFB_CUDA" in p.stderr, p.stderr


@needs_mpirun
@pytest.mark.timeout(600)
@pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs mpicc (libopenmpi-dev)")
def test_allreduce_split_on_host_buffers_and_the_coll_components_it_names():
    """The split's host variant and its coll log, with this host's Open MPI (4.1 as the
    image's): the loop on host buffers measures every size; --staged without --cuda is refused;
    coll_base_verbose names the components enabled on MPI_COMM_WORLD, tuned ahead of basic."""
    cuda_mpi = _module("cuda_mpi")
    _toolkit_or_skip(cuda_mpi)
    loop = str(cuda_mpi.build_host_loop())
    env = {"OMPI_MCA_mpi_yield_when_idle": "1"}
    p = _run(cuda_mpi.mpirun_argv("mpirun", loop, "allreduce", [8, 4096], variant="host"), 120,
             env=env)
    assert p.returncode == 0 and set(cuda_mpi.points(p.stdout)) == {8, 4096}, p.stderr[-3000:]
    p = _run([*cuda_mpi.mpirun_prefix("mpirun", 2, None, cuda_mpi.COLL_VERBOSE), loop,
              "allreduce", "8"], 120, env=env)
    selected = cuda_mpi.coll_selected(p.stdout + p.stderr)
    assert p.returncode == 0 and [c for c, _ in selected][:2] == ["tuned", "basic"], selected
    assert "self" not in [c for c, _ in selected]  # MPI_COMM_SELF's, not the world's
    p = _run(cuda_mpi.mpirun_argv("mpirun", loop, "allreduce", [8], variant="host")[:-1]
             + ["--staged", "8"], 120, env=env)
    assert p.returncode == 2 and "usage: mpi_loop" in p.stderr, p.stderr[-3000:]


@needs_mpirun
@pytest.mark.timeout(900)
@pytest.mark.skipif(not os.environ.get("FABBENCH_OSU_SRC"),
                    reason="needs OSU's source: FABBENCH_OSU_SRC names a folder of OSU 7.x "
                           "(fetched, never committed)")
def test_osu_built_against_this_host_mpi_is_read_and_set_beside_the_loop(tmp_path):
    """OSU's three programs built without CUDA against this host's Open MPI (the kit's are
    built with CUDA against the cuda image's): run as the osu step runs them, read by
    fabbench's reader of OSU's tables, and set beside the loop's host figures per size."""
    cuda_mpi, osu = _module("cuda_mpi"), _module("osu")
    made = osu.build(Path(os.environ["FABBENCH_OSU_SRC"]), tmp_path / "kit", None)
    assert made["cuda"] is False and made["version"] and made["bytes"] > 0
    programs = osu.unpack(tmp_path / "kit", tmp_path)
    assert sorted(p.name for p in programs.iterdir()) == sorted([*osu.PROGRAMS, "BUILD.json"])
    env = {"OMPI_MCA_mpi_yield_when_idle": "1"}
    sizes = (8, 4096)
    points = {}
    for program in osu.PROGRAMS:
        p = _run(osu.argv(cuda_mpi.mpirun_prefix("mpirun"), programs / program, sizes, False),
                 120, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        points[program] = osu.figures(p.stdout, tmp_path / f"{program}.txt")
        assert set(points[program]) == {8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}
        assert all(v > 0 for v in points[program].values())
    ours = {}
    for op in ("allreduce", "sendrecv"):
        p = _run(cuda_mpi.mpirun_argv("mpirun", str(cuda_mpi.build_host_loop()), op, sizes,
                                      variant="host"), 120, env=env)
        assert p.returncode == 0, p.stderr[-3000:]
        ours[op] = [{"bytes": b, "p50_us": us, **cuda_mpi.bandwidths(op, b, us, 2)}
                    for b, us in sorted(cuda_mpi.points(p.stdout).items())]
    rows = osu.side_by_side(ours, points)
    assert [(r["program"], r["bytes"]) for r in rows] == [
        (program, size) for program in osu.PROGRAMS for size in sizes]
    for r in rows:
        assert r["ratio"] == round(r["fabbench"] / r["osu"], 4) and r["ratio"] > 0


def test_cuda_mpi_step_without_a_kit_is_skipped_with_the_reason(tmp_path):
    p = _run([sys.executable, str(KIT / "drive.py"), "--out", str(tmp_path / "out"),
              "--device", "cpu", "--scale", "tiny", "--only", "cuda-mpi"], 300)
    assert p.returncode == 0, p.stdout + p.stderr
    steps = {s["name"]: s for s in json.loads((tmp_path / "out" / "summary.json").read_text())[
        "steps"]}
    assert list(steps) == ["install", "env", "cuda-mpi"]
    assert steps["cuda-mpi"]["status"] == "skipped"
    assert steps["cuda-mpi"]["reason"] == "the kit has no cuda-mpi.tar.xz: no --kit"


FAKE_MPIRUN = r"""#!/bin/sh
# a GPU run's transcript, as mpi_loop.c, OSU 7.4, Open MPI 4.1.4 (coll_base_verbose 10) and
# UCX 1.13 (UCX_LOG_LEVEL=info) write it
op=; tls=; sizes=; cuda=; staged=; nocuda=; verbose=; osu=
for a; do
  case $a in
    allreduce|sendrecv) op=$a ;;
    UCX_TLS=*) tls=$a ;;
    --cuda) cuda=1 ;;
    --staged) staged=1 ;;
    ^cuda) nocuda=1 ;;
    coll_base_verbose) verbose=1 ;;
    */osu_*) osu=${a##*/} ;;
    [0-9]*) [ -n "$op" ] && sizes="$sizes $a" ;;
  esac
done
echo "[1795562322.0] [gpu:7:0] ucp_worker.c:1763 UCX  INFO  ep_cfg[0]:" \
  "tag(self/memory0 cuda_copy/cuda cuda_ipc/cuda); " >&2
if [ -n "$osu" ]; then
  echo "[1795562322.0] [gpu:7:0] ucp_worker.c:1763 UCX  INFO  ep_cfg[1]: tag(cuda_ipc/cuda);"
  case $osu in
    osu_latency) title="Latency Test"; column="Avg Latency(us)"; v=10.00 ;;
    osu_bw) title="Bandwidth Test"; column="Bandwidth (MB/s)"; v=400.00 ;;
    osu_allreduce) title="Allreduce Latency Test"; column="Avg Latency(us)"; v=40.00 ;;
  esac
  printf '\n# OSU MPI-CUDA %s v7.4\n# Datatype: MPI_CHAR.\n# Size      %s\n' "$title" "$column"
  for b in 8 16 32 64 128 256 512 1024 2048 4096; do echo "$b $v"; done
  exit 0
fi
[ -n "$cuda" ] && echo "mpi_loop: rank 0 on CUDA device 0 of 1: NVIDIA H100 80GB HBM3;" \
  "MPI CUDA-aware: yes" >&2
if [ -n "$verbose" ]; then
  for pid in 11 12; do
    echo "[gpu:$pid] coll:base:comm_select: new communicator: MPI_COMM_WORLD (cid 0)" >&2
    echo "[gpu:$pid] coll:base:comm_select: selecting       tuned, priority  30, Enabled" >&2
    echo "[gpu:$pid] coll:base:comm_select: selecting        cuda, priority  78, Enabled" >&2
    echo "[gpu:$pid] coll:base:comm_select: new communicator: MPI_COMM_SELF (cid 1)" >&2
    echo "[gpu:$pid] coll:base:comm_select: selecting        self, priority  75, Enabled" >&2
  done
fi
if [ -n "$nocuda" ]; then
  echo "mpirun noticed that process rank 0 with PID 11 on node gpu exited on signal 11" \
    "(Segmentation fault)." >&2; exit 139
fi
if [ "$op" = sendrecv ] && [ -z "$tls" ]; then
  echo "[gpu:7] cuda_ipc_iface.c:123 UCX ERROR cuIpcOpenMemHandle() failed" >&2; exit 1
fi
p50=20.000; [ -n "$staged" ] && p50=15.000; [ -z "$cuda" ] && p50=5.000
for b in $sizes; do echo "$b $p50 25 250"; done
"""


def _fake_bundle(kit: Path) -> None:
    """A kit whose cuda-mpi.tar.xz holds programs that print what a GPU run prints."""
    import tarfile

    top = kit / "src" / "cuda-mpi"
    (top / "fabric" / "bin").mkdir(parents=True)
    programs = {"mpirun": FAKE_MPIRUN,
                "ompi_info": "#!/bin/sh\necho ompi:version:full:4.1.4\n"
                             "echo mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n",
                "ucx_info": "#!/bin/sh\necho '#      Transport: cuda_copy'\n"
                            "echo '#      Transport: cuda_ipc'\n"}
    for name, text in programs.items():
        (top / "fabric" / "bin" / name).write_text(text)
        (top / "fabric" / "bin" / name).chmod(0o755)
    (top / "mpi_loop").write_text("")
    osu = kit / "src" / "osu"
    osu.mkdir()
    for name in ("osu_latency", "osu_bw", "osu_allreduce"):
        (osu / name).write_text("")
    (osu / "BUILD.json").write_text(json.dumps({"version": "7.4", "cuda": True}))
    (top / "MANIFEST.json").write_text(json.dumps({
        "image": "test", "versions": {"openmpi": "4.1.4"}, "needs_versions": {"GLIBC": "2.2.5"}}))
    with tarfile.open(kit / "cuda-mpi.tar.xz", "w:xz") as tar:
        tar.add(top, arcname="cuda-mpi")
    with tarfile.open(kit / "osu.tar.xz", "w:xz") as tar:
        tar.add(osu, arcname="osu")
    (kit / "MANIFEST.json").write_text(json.dumps({
        "python_version": HERE_PY, "bytes": 1, "fabbench_commit": "", "wheels": {},
        "cuda_mpi": {"included": True}}))


def test_cuda_mpi_step_reads_a_gpu_run_and_runs_a_refused_op_again(tmp_path):
    """What the step makes of a GPU run, from a transcript in its programs' formats (no GPU
    here): the figures per size (p50, algbw, busbw), the transports UCX named, the device line;
    an op that fails with UCX's default transports is run again with FALLBACK_TLS, its figures
    kept and the step failed with both lines."""
    cuda_mpi = _module("cuda_mpi")
    _fake_bundle(tmp_path / "kit")
    out = tmp_path / "out"
    p = _run([sys.executable, str(KIT / "drive.py"), "--out", str(out), "--device", "cuda",
              "--scale", "tiny", "--only", "cuda-mpi,osu", "--kit", str(tmp_path / "kit")], 300)
    steps = {s["name"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    step = steps["cuda-mpi"]
    assert p.returncode == 1 and step["status"] == "failed", step  # (env: no GPU either)
    f = step["figures"]
    assert f["openmpi"] == "4.1.4" and f["built_with_cuda"] is True
    assert f["ucx_transports_available"] == ["cuda_copy", "cuda_ipc"]
    assert f["transports"] == ["cuda_copy/cuda", "cuda_ipc/cuda", "self/memory0"]
    assert f["device_line"].endswith("MPI CUDA-aware: yes")
    assert f["sizes"]["allreduce"] == [
        {"bytes": 8, "p50_us": 20.0, "algbw_gbyte_s": 0.0004, "busbw_gbyte_s": 0.0004},
        {"bytes": 4096, "p50_us": 20.0, "algbw_gbyte_s": 0.2048, "busbw_gbyte_s": 0.2048}]
    assert [r["bytes"] for r in f["sizes"]["sendrecv"]] == [8, 4096]
    assert set(f["default_failed"]) == {"sendrecv"}
    assert "cuIpcOpenMemHandle() failed" in f["default_failed"]["sendrecv"]
    assert f"with UCX_TLS={cuda_mpi.FALLBACK_TLS} it ran" in step["reason"]
    assert f"-x UCX_TLS={cuda_mpi.FALLBACK_TLS}" in step["commands"][-1]["argv"]
    # the split: sendrecv needed the fallback, so it runs with the same transports
    split = f["split"]
    assert split["ucx_tls"] == cuda_mpi.FALLBACK_TLS
    assert {v: [r["p50_us"] for r in rows] for v, rows in split["sizes"].items()} == {
        "device": [20.0, 20.0], "staged": [15.0, 15.0], "host": [5.0, 5.0], "no-coll-cuda": []}
    assert set(split["problems"]) == {"no-coll-cuda"}
    assert "exited on signal 11" in split["problems"]["no-coll-cuda"]
    assert split["coll_selected"] == [["cuda", 78], ["tuned", 30]]  # (MPI_COMM_SELF's left out)
    argvs = [c["argv"] for c in step["commands"]]
    assert any("--cuda --staged 8 4096" in a for a in argvs)
    assert any(a.endswith("mpi_loop allreduce 8 4096") for a in argvs)  # host buffers
    assert any("--mca coll ^cuda" in a for a in argvs)
    assert "allreduce at the largest size, p50 us: device 20, staged 15, host 5, " \
        "no-coll-cuda -; coll enabled: cuda 78, tuned 30" in step["reason"]
    # OSU beside it: the cuda-mpi step's figures per size against OSU's, fabbench / OSU
    osu_step = steps["osu"]
    assert osu_step["status"] == "ok", osu_step
    argvs = [c["argv"] for c in osu_step["commands"]]
    assert len(argvs) == 3 and all(f"UCX_TLS={cuda_mpi.FALLBACK_TLS}" in a for a in argvs)
    assert argvs[0].endswith("osu_latency -d cuda -m 8:4096 -i 50 -x 5 D D")
    assert argvs[2].endswith("osu_allreduce -d cuda -m 8:4096 -i 50 -x 5 -T mpi_float")
    assert osu_step["figures"]["transports"]["osu_bw"] == f["transports"]  # (a UCX line on
    # its stdout too: left out of what OSU's reader reads)
    rows = {(r["program"], r["bytes"]): r["ratio"] for r in osu_step["figures"]["beside"]}
    assert rows == {("osu_latency", 8): 2.0, ("osu_latency", 4096): 2.0,
                    ("osu_bw", 8): 0.001, ("osu_bw", 4096): 0.512,
                    ("osu_allreduce", 8): 0.5, ("osu_allreduce", 4096): 0.5}
    table = (out / "summary.md").read_text()
    assert "cuda-mpi:" in table and "| allreduce | 2 | 20.00 | 4096 | 0.2048 | True |" in table
    assert "| 4096 | 20 | 15 | 5 | - |" in table
    assert "| osu_allreduce | 4096 | 20 | 40 | 0.5 |" in table


FAKE_MPIEXEC = r"""#!/bin/sh
# a GPU run's transcript as hydra's mpiexec and mpi_loop.c (built against MPICH 4.0.2) write it:
# sendrecv refused with MPICH's defaults (CUDA IPC), run without IPC
fallback=; cuda=; staged=; op=; sizes=
while [ $# -gt 0 ]; do
  case $1 in
    -genv) [ "$2" = MPIR_CVAR_CH4_IPC_GPU_P2P_THRESHOLD ] && fallback=1; shift 3 ;;
    -launcher|-n) shift 2 ;;
    *) break ;;
  esac
done
op=$2; shift 2
for a; do case $a in --cuda) cuda=1 ;; --staged) staged=1 ;; *) sizes="$sizes $a" ;; esac; done
[ -n "$cuda" ] && echo "mpi_loop: rank 0 on CUDA device 0 of 1: NVIDIA H200; MPI CUDA-aware:" \
  "yes" >&2
if [ "$op" = sendrecv ] && [ -z "$fallback" ]; then
  echo "Abort(15) on node 1: Fatal error in internal_Sendrecv: Other MPI error" >&2; exit 15
fi
p50=30.000; [ -n "$staged" ] && p50=60.000; [ -z "$cuda" ] && p50=5.000
for b in $sizes; do echo "$b $p50 25 250"; done
"""


def test_cuda_mpich_step_reads_a_gpu_run_beside_open_mpi(tmp_path):
    """The cuda-mpich step from a transcript in hydra's and the loop's formats (no GPU here):
    figures per size, sendrecv refused with MPICH's defaults and run again without CUDA IPC
    (the step failed, both lines and the figures kept), the allreduce split (staged, host), and
    summary.md's table of the two MPIs per size beside the cuda-mpi step's."""
    import tarfile

    mpich = _module("mpich")
    kit = tmp_path / "kit"
    _fake_bundle(kit)
    top = kit / "src" / "mpich-cuda"
    (top / "fabric" / "bin").mkdir(parents=True)
    version = "#!/bin/sh\necho 'MPICH Version: 4.0.2'\n" \
              "echo \"MPICH Configure: '--with-cuda=/x'\"\n"
    for name, text in (("mpiexec", FAKE_MPIEXEC), ("mpichversion", version)):
        (top / "fabric" / "bin" / name).write_text(text)
        (top / "fabric" / "bin" / name).chmod(0o755)
    (top / "mpi_loop").write_text("")
    (top / "MANIFEST.json").write_text(json.dumps({
        "mpich": "4.0.2", "cuda": "13.0.3", "cuda_arch": "90",
        "needs_versions": {"GLIBC": "2.2.5"}}))
    with tarfile.open(kit / "mpich-cuda.tar.xz", "w:xz") as tar:
        tar.add(top, arcname="mpich-cuda")
    out = tmp_path / "out"
    p = _run([sys.executable, str(KIT / "drive.py"), "--out", str(out), "--device", "cuda",
              "--scale", "tiny", "--only", "cuda-mpi,cuda-mpich", "--kit", str(kit)], 300)
    steps = {s["name"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    step = steps["cuda-mpich"]
    assert p.returncode == 1 and step["status"] == "failed", step
    f = step["figures"]
    assert f["mpichversion"][0] == "MPICH Version: 4.0.2"
    assert f["device_line"].endswith("MPI CUDA-aware: yes")
    assert f["sizes"]["allreduce"] == [
        {"bytes": 8, "p50_us": 30.0, "algbw_gbyte_s": 0.0003, "busbw_gbyte_s": 0.0003},
        {"bytes": 4096, "p50_us": 30.0, "algbw_gbyte_s": 0.1365, "busbw_gbyte_s": 0.1365}]
    assert set(f["default_failed"]) == {"sendrecv"}
    assert "Fatal error in internal_Sendrecv" in f["default_failed"]["sendrecv"]
    assert "sendrecv without CUDA IPC: it ran" in step["reason"]
    assert f["fallback"] == mpich.FALLBACK_ENV
    argvs = [c["argv"] for c in step["commands"]]
    assert any(a.endswith("mpi_loop sendrecv --cuda 8 4096")
               and "-genv MPIR_CVAR_CH4_IPC_GPU_P2P_THRESHOLD" in a for a in argvs)
    assert all("-launcher fork -n 2 -genv MPIR_CVAR_ENABLE_GPU 1" in a for a in argvs[1:])
    # the split: after the fallback, without IPC too
    assert {v: [r["p50_us"] for r in rows] for v, rows in f["split"].items()} == {
        "device": [30.0, 30.0], "staged": [60.0, 60.0], "host": [5.0, 5.0]}
    table = (out / "summary.md").read_text()
    assert "| bytes | allreduce us Open MPI | MPICH |" in table
    assert "| 4096 | 20 | 30 | 0.2048 | 0.1365 | 20 | 30 | 0.2048 | 0.1365 |" in table
    assert "| 4096 | 30 | 60 | 5 |" in table  # MPICH's split


def test_cuda_mpich_step_without_a_bundle_is_skipped_with_the_reason(tmp_path):
    kit = tmp_path / "kit"
    _fake_bundle(kit)
    out = tmp_path / "out"
    p = _run([sys.executable, str(KIT / "drive.py"), "--out", str(out), "--device", "cpu",
              "--scale", "tiny", "--only", "cuda-mpich", "--kit", str(kit)], 300)
    steps = {s["name"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    assert p.returncode == 0, p.stdout + p.stderr
    assert steps["cuda-mpich"] == {**steps["cuda-mpich"], "status": "skipped",
                                   "reason": "the kit has no mpich-cuda.tar.xz: prepare.py "
                                             "made none"}


@pytest.mark.parametrize("argv, says", [
    (["prepare.py", "--python-version", "3"], "MAJOR.MINOR"),
    (["prepare.py", "--cuda-image", "localhost/no-such-image:x"],
     "--cuda-image localhost/no-such-image:x: "),
    (["prepare.py", "--bogus"], "unrecognized arguments"),
    (["prepare.py", "--mpich", "always"], "argument --mpich: invalid choice: 'always'"),
    (["prepare.py", "--osu", "OUT"], "is not an OSU micro-benchmarks source folder"),
    (["prepare.py", "--osu", "OSU", "--cuda-image", "none"], "--osu needs the cuda image"),
    (["drive.py", "--out", "OUT", "--device", "tpu"], "--device takes cuda or cpu"),
    (["drive.py", "--out", "OUT", "--deadline-s", "5"], "--deadline-s must be"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, argv, says):
    osu = tmp_path / "osu"  # the two files prepare checks an OSU source folder by
    (osu / "c" / "mpi" / "pt2pt" / "standard").mkdir(parents=True)
    (osu / "configure").write_text("")
    (osu / "c" / "mpi" / "pt2pt" / "standard" / "osu_latency.c").write_text("")
    argv = [a.replace("OUT", str(tmp_path / "out")).replace("OSU", str(osu)) for a in argv]
    p = _run([sys.executable, str(KIT / argv[0]), *argv[1:]], 60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert says in p.stderr and p.stdout == ""


def test_device_command_without_a_kit_is_one_line_and_exit_2(tmp_path):
    p = _run(["bash", str(KIT / "run.sh")], 60, env={"GPUKIT": str(tmp_path / "none"),
                                                     "OUT": str(tmp_path / "out")})
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "prepare.py" in p.stderr


def test_documented_device_command_is_under_2000_characters():
    doc = (REPO / "docs" / "gpu-kit.md").read_text()
    commands = re.findall(r"^(bash bench/gpu/run\.sh.*)$", doc, flags=re.M)
    assert commands and all(len(c) < 2000 for c in commands)
