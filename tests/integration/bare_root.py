"""A root that holds a GPU kit bundle and nothing else but what a bare GPU machine has (this
host's glibc, libstdc++, libgcc_s and libz; /proc, /sys, /dev and /dev/shm bound in), for
running a bundle's programs under chroot as the lent machine would: used by test_gpu_kit_cuda
(Open MPI's bundle) and test_gpu_kit_mpich (MPICH's). Not a test module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# what the bare root borrows from this host (and /bin/false): the GPU machine has its own of each
HOST_LIBS = ("ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0",
             "libdl.so.2", "librt.so.1", "libutil.so.1", "libresolv.so.2", "libanl.so.1",
             "libstdc++.so.6", "libgcc_s.so.1", "libz.so.1")
MULTIARCH = Path("/lib/x86_64-linux-gnu")
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"  # (the bare root's PATH is not the host's)


def run(argv: list[str], timeout: float, env: dict | None = None, **kw
        ) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                          env=env if env is not None else dict(os.environ), **kw)


@contextmanager
def bare_root(root: Path, stubs: Path) -> Iterator[Path]:
    """ROOT made bare (the caller unpacks its bundle into it), the driver's link-time stubs
    (STUBS: containers/cuda-toolkit.sh's) in /stubs, a folder of their own that only a
    loader's listing puts on its path; the binds undone on the way out."""
    lib = root / MULTIARCH.relative_to("/")
    lib.mkdir(parents=True)
    for name in HOST_LIBS:
        if (MULTIARCH / name).exists():
            shutil.copy2((MULTIARCH / name).resolve(), lib / name)
    (root / "stubs").mkdir()
    for name in ("libcuda.so", "libnvidia-ml.so"):
        shutil.copy2(stubs / name, root / "stubs" / f"{name}.1")
    (root / "bin").mkdir()
    shutil.copy2(shutil.which("false"), root / "bin" / "false")  # mpirun's agent (coreutils)
    (root / "lib64").mkdir()
    shutil.copy2(Path("/lib64/ld-linux-x86-64.so.2").resolve(),
                 root / "lib64" / "ld-linux-x86-64.so.2")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/nonexistent\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    (root / "etc" / "hosts").write_text(f"127.0.0.1 localhost {os.uname().nodename}\n")
    for d in ("proc", "sys", "dev", "tmp", "root"):
        (root / d).mkdir()
    (root / "tmp").chmod(0o1777)
    done: list[Path] = []
    try:
        for source, target in (("/proc", "proc"), ("/sys", "sys"), ("/dev", "dev"),
                               ("/dev/shm", "dev/shm")):
            res = run(["mount", "--bind", source, str(root / target)], 60)
            assert res.returncode == 0, f"mount {source}: {res.stderr}"
            done.append(root / target)
        yield root
    finally:
        for where in reversed(done):
            run(["umount", "-l", str(where)], 60)


def resolves(root: Path, inside: str, env: dict[str, str], prefixes: tuple[str, ...]) -> str:
    """The loader's listing of INSIDE (a path in ROOT) under ENV; asserts every library is
    found, each under one of PREFIXES (the bundle's, the stubs', the host's libc)."""
    p = run([CHROOT, str(root), "/lib64/ld-linux-x86-64.so.2", "--list", inside], 60, env=env)
    assert p.returncode == 0 and "not found" not in p.stdout, (inside, p.stdout, p.stderr)
    for line in p.stdout.splitlines():
        where = line.split("=>")[-1].split("(")[0].strip()
        assert where.startswith(prefixes) or "=>" not in line, (inside, line)
    return p.stdout


def drive_step(kit: Path, out: Path, name: str) -> tuple[dict, str]:
    """The kit's drive.py (bench/gpu, beside KIT's sources) run for its step NAME alone on
    --device cpu with KIT: asserts it exits 0; the step's entry of summary.json and summary.md."""
    drive = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "drive.py"
    p = run([sys.executable, str(drive), "--out", str(out), "--device", "cpu", "--scale",
             "tiny", "--only", name, "--kit", str(kit)], 600)
    steps = {s["name"]: s for s in json.loads((out / "summary.json").read_text())["steps"]}
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    return steps[name], (out / "summary.md").read_text()
