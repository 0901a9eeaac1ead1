"""The MPI batch loop: which loop a rank takes, how it is built and the checks before use."""

import re
import shutil
import subprocess
import sys

import pytest

from fabbench.comm import batch_loop
from fabbench.errors import RunError, UsageError

needs_mpicc = pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs mpicc")


def test_the_c_loop_is_the_default_and_python_is_asked_for_by_name(monkeypatch):
    monkeypatch.delenv(batch_loop.ENV, raising=False)
    assert batch_loop.wanted() is True
    monkeypatch.setenv(batch_loop.ENV, "python")
    assert batch_loop.wanted() is False
    monkeypatch.setenv(batch_loop.ENV, "fortran")
    with pytest.raises(UsageError, match="FABBENCH_MPI_LOOP='fortran': expected c"):
        batch_loop.wanted()


def test_every_timed_operation_has_a_c_loop():
    from fabbench.workloads.ops import OPS

    assert set(OPS) <= set(batch_loop.OPS)


@needs_mpicc
def test_the_loop_is_built_once_per_source_and_mpicc(tmp_path):
    first = batch_loop.build_with_mpicc(batch_loop.SOURCE, tmp_path, shared=True, what="x")
    again = batch_loop.build_with_mpicc(batch_loop.SOURCE, tmp_path, shared=True, what="x")
    assert first == again and first.suffix == ".so"
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary file left


@needs_mpicc
def test_a_source_mpicc_refuses_is_named_with_the_compilers_error_line(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return nope; }\n")
    with pytest.raises(RunError, match="mpicc could not build the bad loop: .*nope"):
        batch_loop.build_with_mpicc(bad, tmp_path / "out", shared=False, what="the bad loop")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_no_mpicc_and_no_prebuilt_loop_is_one_line_naming_the_way_out(monkeypatch, tmp_path):
    monkeypatch.setattr(batch_loop.shutil, "which", lambda _name: None)
    monkeypatch.setattr(batch_loop, "PREBUILT", tmp_path / "absent.so")
    with pytest.raises(RunError, match="no mpicc to build it.*FABBENCH_MPI_LOOP=python"):
        batch_loop.load(object())


@needs_mpicc
def test_a_loop_compiled_for_another_mpi_is_refused_naming_both(monkeypatch, tmp_path):
    monkeypatch.setenv("FABBENCH_CACHE", str(tmp_path))

    class OtherMPI:
        @staticmethod
        def get_vendor():
            return "MPICH", (4, 2, 0)

    with pytest.raises(RunError, match=r"compiled against Open MPI \d+\.\d+ but mpi4py runs "
                                       r"MPICH 4\.2"):
        batch_loop.load(OtherMPI)


@needs_mpicc
def test_the_module_builds_the_loop_into_a_given_path(tmp_path):
    target = tmp_path / "lib" / "batch_loop.so"
    out = subprocess.run([sys.executable, "-m", "fabbench.comm.batch_loop", str(target)],
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str(target) and target.exists()
    assert [p.name for p in target.parent.iterdir()] == ["batch_loop.so"]


def _this_mpi():
    """An MPI module stand-in naming the MPI of this host's mpicc, as mpi4py would."""
    said = subprocess.run(["mpicc", "--showme:version"], capture_output=True, text=True,
                          timeout=30, check=True).stdout + subprocess.run(
        ["mpicc", "--showme:version"], capture_output=True, text=True, timeout=30).stderr
    found = re.search(r"(Open MPI|MPICH)\D*(\d+)\.(\d+)", said)
    assert found, said

    class ThisMPI:
        @staticmethod
        def get_vendor():
            return found.group(1), (int(found.group(2)), int(found.group(3)), 0)

    return ThisMPI


@needs_mpicc
def test_a_read_only_cache_builds_the_loop_in_a_folder_of_its_own(monkeypatch, tmp_path):
    # an image's build test runs with a read-only home: the loop is built aside and removed
    monkeypatch.setenv("FABBENCH_CACHE", "/proc/fabbench-not-writable")
    monkeypatch.setattr(batch_loop, "PREBUILT", tmp_path / "absent.so")
    monkeypatch.setattr(batch_loop.tempfile, "tempdir", str(tmp_path))
    lib = batch_loop.load(_this_mpi())
    assert lib.fb_mpi_header().decode().startswith(_this_mpi().get_vendor()[0])
    assert list(tmp_path.iterdir()) == []  # nothing left behind


@needs_mpicc
def test_the_environments_own_loop_comes_first_when_it_matches(monkeypatch, tmp_path):
    prebuilt = tmp_path / "batch_loop.so"
    subprocess.run([sys.executable, "-m", "fabbench.comm.batch_loop", str(prebuilt)],
                   capture_output=True, text=True, timeout=120, check=True)
    monkeypatch.setattr(batch_loop, "PREBUILT", prebuilt)

    def no_build(*_a, **_k):
        raise AssertionError("built although the environment has a matching loop")

    monkeypatch.setattr(batch_loop, "build_with_mpicc", no_build)
    assert batch_loop.load(_this_mpi()) is not None
