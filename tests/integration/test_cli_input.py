"""Bad input: one line on stderr, exit code 2, no traceback, results already written intact."""

from pathlib import Path

import pytest

from conftest import fabbench

pytestmark = [pytest.mark.integration, pytest.mark.together]


@pytest.mark.parametrize("args,needle", [
    (["run", "--fabric", "token-ring"], "unknown fabric 'token-ring'"),
    (["run", "--fabric", "ethernet", "--sizes", "12Q"], "bad size '12Q'"),
    (["run", "--fabric", "ethernet", "--ranks", "0"], "ranks must be between"),
    (["run", "--fabric", "ethernet", "--ranks", "many"], "--ranks"),
    (["run", "--fabric", "ethernet", "--primitive", "smoke-signals"], "unknown primitive"),
    (["run", "--fabric", "ethernet", "--ops", "allreduce,scan"], "no operation 'scan'"),
    (["run", "--fabric", "ethernet", "--dtypes", "float16"], "does not support dtype"),
    (["run", "--fabric", "ethernet", "--primitive", "nccl", "--device", "cpu"], "GPU"),
    (["run", "--fabric", "ethernet", "--primitive", "gloo", "--cuda-graph", "on"],
     "--cuda-graph on captures GPU operations in a CUDA graph: it needs --primitive nccl with "
     "--device cuda (not gloo on cpu)"),
    (["run", "--fabric", "ethernet", "--cuda-graph", "always"], "--cuda-graph takes auto"),
    (["run", "--fabric", "infiniband"], "--wire tcp"),
    (["run", "--fabric", "omnipath", "--primitive", "mpi"], "--wire tcp"),
    (["run", "--fabric", "ethernet", "--wire", "tcp"], "no --wire tcp"),
    (["run", "--fabric", "ethernet", "--timeout", "-1"], "timeout"),
    (["run", "--fabric", "ethernet", "--horovod-over", "gloo"], "--horovod-over"),
    (["run", "--no-such-option"], "No such option"),
    (["frobnicate"], "No such command"),
])
def test_bad_input_one_line_exit_2(args, needle):
    p = fabbench(*args, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert needle in lines[0]
    assert "Traceback" not in p.stderr


def test_profile_file_with_a_typo(tmp_path):
    bad = tmp_path / "typo.toml"
    bad.write_text('name = "typo"\n[primitive.mpi]\nmca = { pml = "ob1" }\ntransprot = ["x"]\n')
    p = fabbench("run", "--fabric", str(bad), timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "transprot" in p.stderr


def test_existing_results_are_never_overwritten(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"kind": "run"}\n')
    p = fabbench("run", "--fabric", "ethernet", "--out", str(out), timeout=60)
    assert p.returncode == 2 and "already holds results" in p.stderr
    assert out.read_text() == '{"kind": "run"}\n'


def test_dry_run_prints_exactly_what_runs():
    p = fabbench("run", "--fabric", "omnipath", "--wire", "tcp", "--primitive", "mpi",
                 "--dry-run", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "OMPI_MCA_mtl_ofi_provider_include=tcp;ofi_rxm" in p.stdout
    assert "--mca pml cm" in p.stdout and "mpirun -np 2" in p.stdout
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--dry-run", timeout=60)
    assert "GLOO_SOCKET_IFNAME=lo" in p.stdout and "MASTER_PORT=" in p.stdout


def test_help_is_fast_and_imports_no_comm_library():
    import subprocess
    import sys

    code = ("import sys, fabbench.cli.main as m\n"
            "bad = [x for x in ('torch', 'mpi4py', 'horovod') if x in sys.modules]\n"
            "print(bad)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "[]"
    p = fabbench("--help", timeout=60)
    assert p.returncode == 0 and "run" in p.stdout


RUNS = Path(__file__).parents[1] / "fixtures" / "runs"
PAIRS = Path(__file__).parents[1] / "fixtures" / "pairs" / "local-pairs.jsonl"
TINY = Path(__file__).parents[1] / "fixtures" / "studies" / "tiny.toml"


@pytest.mark.parametrize("args,needle", [
    # an output that cannot be written: one line, no traceback (issue 59, class 3)
    (["floors", "verify", "--floors", "reference", str(PAIRS), "--json", "/proc/fabbench-x"],
     "cannot write --json /proc/fabbench-x: "),
    (["floors", "verify", "--floors", "reference", str(PAIRS), "--prometheus", "{tmp}"],
     "is a directory"),
    (["floors", "verify", "--floors", "reference", str(PAIRS), "--json", "{tmp}/a\nb.json"],
     "control character"),
    (["tune", "{tmp}/file", "--fabric", "ethernet", "--primitive", "mpi"], "is not a directory"),
    (["tune", "{tmp}/new", "--fabric", "ethernet", "--primitive", "mpi", "--deadline", "-1"],
     "--deadline must be"),
    (["tune", "{tmp}/new", "--fabric", "ethernet", "--primitive", "mpi", "--deadline", "nan"],
     "--deadline must be"),
    (["study", "run", str(TINY), "--only", "no-such-cell-*", "--out", "{tmp}/study"],
     "--only matches no cell"),
    (["emulate", "run", "--nodes", "2", "--max-time", "nan", "--", "run"], "--max-time"),
    (["floors", "baseline", str(RUNS / "siteA-ib.jsonl"), "--out", "{tmp}/f.toml", "--spread",
      "inf"], "--spread"),
    # forecast: values whose arithmetic overflows to infinity, or never ends
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--nodes", "1" + "0" * 20],
     "--nodes must be between"),
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--bandwidth", "1e300GB/s"],
     "bad bandwidth"),
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--bandwidth", "1e-300GB/s"],
     "bad bandwidth"),
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--latency", "1e308s"],
     "bad latency"),
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--compression", "1e308"],
     "--compression must be"),
    (["forecast", "--from", str(RUNS / "siteA-train-8.jsonl"), "--backward-fraction",
      "1e-300"], "--backward-fraction must be"),
])
def test_hostile_values_one_line_exit_2(args, needle, tmp_path):
    (tmp_path / "file").write_text("a file\n")
    before = sorted(tmp_path.rglob("*"))
    p = fabbench(*(a.replace("{tmp}", str(tmp_path)) for a in args), timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    assert sorted(tmp_path.rglob("*")) == before  # nothing made: refused before any work
