"""The MPI batch loop (batch_loop.c): a sample's back-to-back operations run in C.

Through mpi4py every operation costs a Python call, about 1-2 us here, which is as long as a
shared-memory allreduce of a few bytes and 15 % of one of 32 KiB: a figure with it is the
interpreter's, not the library's. The C loop makes the sample's operations one call.

Where the library comes from: the one built into the environment when it was made (``python
-m fabbench.comm.batch_loop`` writes ``<prefix>/lib/fabbench/batch_loop.so``; the images do
this, their runtime stage has no compiler) when it was compiled against the MPI mpi4py loaded;
else built with the ``mpicc`` on PATH into the cache ($FABBENCH_CACHE/mpi-loop, keyed by the
source and mpicc's identity; a folder of the process's own where the cache is read-only). The
MPI it was compiled against must be the one mpi4py loaded (vendor and version), else the run
stops. ``FABBENCH_MPI_LOOP=python`` times through mpi4py calls instead (slower by that call per
operation; the variable is in every run's provenance).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from fabbench.errors import RunError, UsageError

SOURCE = Path(__file__).with_name("batch_loop.c")
PREBUILT = Path(sys.prefix, "lib", "fabbench", "batch_loop.so")
ENV = "FABBENCH_MPI_LOOP"
OPS = {"allreduce": 0, "allgather": 1, "reduce_scatter": 2, "broadcast": 3, "alltoall": 4,
       "sendrecv": 5}


def wanted() -> bool:
    """True: time MPI through the C loop (the default); False: through mpi4py calls."""
    mode = os.environ.get(ENV, "c")
    if mode not in ("c", "python"):
        raise UsageError(f"{ENV}={mode!r}: expected c (the default) or python")
    return mode == "c"


def cache_dir() -> Path:
    return Path(os.environ.get("FABBENCH_CACHE", Path.home() / ".cache" / "fabbench"))


def build_with_mpicc(source: Path, into: Path, *, shared: bool, what: str) -> Path:
    """``source`` compiled by the mpicc on PATH into the folder ``into``, named by the source's
    and mpicc's identity (an existing build is reused; a new one lands by rename, so that ranks
    building at once do not see half a file). ``shared``: a shared library, else a program."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        raise UsageError(f"{what} needs mpicc (Debian: libopenmpi-dev)")
    identity = "".join(subprocess.run([mpicc, flag], capture_output=True, text=True, timeout=30,
                                      check=False).stdout
                       for flag in ("--showme:version", "--showme"))
    key = hashlib.sha256(source.read_bytes() + identity.encode()).hexdigest()[:16]
    out = into / f"{source.stem}-{key}{'.so' if shared else ''}"
    if not out.exists():
        into.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.{os.getpid()}")
        flags = ["-shared", "-fPIC"] if shared else []
        built = subprocess.run([mpicc, "-O2", *flags, "-o", str(tmp), str(source)],
                               capture_output=True, text=True, timeout=300, check=False)
        if built.returncode != 0:
            tmp.unlink(missing_ok=True)
            lines = built.stderr.strip().splitlines() or ["?"]
            said = next((line for line in lines if "error" in line), lines[-1])
            raise RunError(f"mpicc could not build {what}: {said}")
        tmp.replace(out)
    return out


def _open(path: Path) -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise RunError(f"cannot load fabbench's MPI batch loop {path}: {exc}") from None
    lib.fb_mpi_header.restype = ctypes.c_char_p
    args = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    lib.fb_batch.restype = ctypes.c_int
    lib.fb_batch.argtypes = args
    if hasattr(lib, "fb_each"):  # absent from a build of an older source (then not used)
        lib.fb_each.restype = ctypes.c_int
        lib.fb_each.argtypes = (*args, ctypes.POINTER(ctypes.c_double))
    return lib


def _built() -> ctypes.CDLL:
    """Built by this host's mpicc into the cache, or, where the cache cannot be written (a
    read-only home: an image's build test, a locked-down site), into a folder of this process's
    own, removed once the library is loaded."""
    what = "fabbench's MPI batch loop"
    try:
        return _open(build_with_mpicc(SOURCE, cache_dir() / "mpi-loop", shared=True, what=what))
    except OSError:
        tmp = Path(tempfile.mkdtemp(prefix="fabbench-mpi-loop-"))
        try:
            return _open(build_with_mpicc(SOURCE, tmp, shared=True, what=what))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def load(MPI: Any) -> ctypes.CDLL:
    """The loop's library, checked against the MPI that mpi4py loaded (``MPI``): the one built
    into this environment when it matches, else one built by this host's mpicc."""
    mpicc = shutil.which("mpicc") is not None
    if not mpicc and not PREBUILT.exists():
        raise RunError(f"fabbench's MPI batch loop is not built here and there is no mpicc to "
                       f"build it (Debian: libopenmpi-dev); {ENV}=python times through mpi4py "
                       "calls instead, about 1-2 us slower per operation")
    vendor, version = MPI.get_vendor()
    running = f"{vendor} {version[0]}.{version[1]}"
    if PREBUILT.exists():
        lib = _open(PREBUILT)
        current = hasattr(lib, "fb_each")  # built from this source's functions
        if not mpicc:  # the only one there is: it must do
            if not current:
                raise RunError(f"fabbench's MPI batch loop {PREBUILT} was built from an older "
                               f"fabbench and there is no mpicc to rebuild it: run python -m "
                               f"fabbench.comm.batch_loop where one is (or {ENV}=python)")
            return _checked(lib, PREBUILT, running)
        if current and lib.fb_mpi_header().decode() == running:
            return lib
    return _checked(_built(), "built by this host's mpicc", running)


def _checked(lib: ctypes.CDLL, path: Path | str, running: str) -> ctypes.CDLL:
    header = lib.fb_mpi_header().decode()
    if header != running:
        raise RunError(f"fabbench's MPI batch loop ({path}) was compiled against {header} but "
                       f"mpi4py runs {running}: put that MPI's mpicc first on PATH "
                       f"(or {ENV}=python)")
    return lib


class Batched:
    """One MPI operation on fixed buffers: called, it runs once; ``batch(n)`` runs it n times
    back to back in C, ``each(n)`` n times with OSU's protocol. Buffers are numpy arrays or
    (CUDA-aware MPI) torch tensors."""

    def __init__(self, lib: ctypes.CDLL, MPI: Any, comm: Any, op: str, send: Any, recv: Any,
                 *, dest: int = 0, source: int = 0, tag: int = 0) -> None:
        if op not in OPS:
            raise KeyError(op)
        self._lib, self._MPI = lib, MPI
        ref = recv if op == "broadcast" else send
        count = _numel(ref)
        if op == "alltoall":
            count //= comm.Get_size()
        elif op == "reduce_scatter":
            count = _numel(recv)
        self._args = (OPS[op], comm.py2f(), _pointer(send), _pointer(recv), count,
                      _datatype(MPI, ref).py2f(), MPI.SUM.py2f(), dest, source, tag)
        self._keep = (send, recv)  # the pointers stay valid while this lives

    def batch(self, n: int) -> None:
        rc = self._lib.fb_batch(*self._args, n)
        if rc != self._MPI.SUCCESS:
            raise self._MPI.Exception(rc)

    def each(self, n: int) -> float:
        """OSU's protocol: n operations, each timed alone in C with a barrier after it; the
        seconds the operations took, summed (the barriers left out)."""
        spent = ctypes.c_double(0.0)
        rc = self._lib.fb_each(*self._args, n, ctypes.byref(spent))
        if rc != self._MPI.SUCCESS:
            raise self._MPI.Exception(rc)
        return spent.value

    def __call__(self) -> None:
        self.batch(1)


def _numel(buf: Any) -> int:
    return int(buf.numel()) if hasattr(buf, "numel") else int(buf.size)


def _pointer(buf: Any) -> int:
    return int(buf.data_ptr()) if hasattr(buf, "data_ptr") else int(buf.ctypes.data)


def _datatype(MPI: Any, buf: Any) -> Any:
    """The predefined datatype mpi4py itself takes for the buffer's element type (its typecode
    table: a duplicate, as mpi4py.util.dtlib makes, is refused by reductions)."""
    import numpy as np

    dtype = (np.dtype(str(buf.dtype).removeprefix("torch.")) if hasattr(buf, "numel")
             else buf.dtype)
    try:
        return MPI._typedict[dtype.char]
    except KeyError:
        raise UsageError(f"MPI has no datatype for {dtype}") from None


def main(argv: list[str]) -> int:
    """``python -m fabbench.comm.batch_loop [PATH]``: build the loop into PATH (default: this
    environment's lib/fabbench/batch_loop.so), for environments that will have no mpicc."""
    target = Path(argv[0]) if argv else PREBUILT
    built = build_with_mpicc(SOURCE, target.parent, shared=True, what="fabbench's MPI batch loop")
    shutil.copyfile(built, target)
    built.unlink()
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
