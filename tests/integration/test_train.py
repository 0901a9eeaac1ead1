"""Training and halo workloads on real local ranks, through the real CLI: DDP over Gloo, Horovod
over MPI and over Gloo, the mpi engine; scaling 1 -> 2 ranks; gradients compared across ranks."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import fabbench, horovod_available, needs_mpirun

pytestmark = [pytest.mark.integration]
needs_horovod = pytest.mark.skipif(not horovod_available(), reason="needs horovod.torch")

SMALL = ["--workload", "train", "--batch-size", "2", "--steps", "4", "--warmup-steps", "2"]


def _records(path, kind):
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == kind]


def _check_scaling(out):
    runs, trains, summaries = (_records(out, k) for k in ("run", "train", "summary"))
    assert [r["ranks"] for r in runs] == [1, 2]
    assert all(s["ok"] for s in summaries), summaries
    one, two = trains
    for rec in trains:
        assert rec["samples_per_s"]["p50"] > 0 and rec["samples_per_s"]["mean"] > 0
        assert rec["grads_identical"] and rec["params_identical"]
        assert rec["grads_finite_nonzero"]
        assert rec["parameters"] > 0 and rec["grad_bytes"] == 4 * rec["parameters"]
        assert rec["buckets"]["count"] >= 1 and sum(rec["buckets"]["bytes"]) > 0
        assert len(rec["step_ms_samples"]) == 4
    assert one["scaling_efficiency"] is None
    assert two["baseline_samples_per_s"] == one["samples_per_s"]["p50"]
    assert 0 < two["scaling_efficiency"] <= 1.2
    assert two["allreduce_ms"] > 0  # 2 ranks exchange gradients
    # exposed communication is the difference of two medians of 4 steps (full step, compute
    # only): with overlap it may be near 0, and it is never below what the steps' spread allows
    spread = sum(max(two[k]) - min(two[k]) for k in ("step_ms_samples", "compute_ms_samples"))
    assert two["comm_ms"] == pytest.approx(two["step_ms"] - two["compute_ms"])
    assert two["comm_ms"] > -spread, (two["comm_ms"], spread)
    assert two["grads_differ_without_exchange"] is True  # so the equality check means something
    assert two["net"]["iface"] == "lo" and two["net"]["samples"] >= 2
    return one, two


@pytest.mark.timeout(120)
def test_ddp_over_gloo_resnet50_scaling(tmp_path):
    out = tmp_path / "ddp.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", *SMALL, "--model",
                 "resnet50", "--image-size", "32", "--scaling", "1,2", "--out", str(out),
                 timeout=110)
    assert p.returncode == 0, p.stderr[-3000:]
    one, two = _check_scaling(out)
    assert two["parameters"] == 25_557_032 and two["engine"] == "ddp"
    assert two["buckets"]["source"] in ("ddp", "estimated")  # DDP's own report when it has one
    assert "samples/s" in p.stdout and "resnet50" in p.stdout  # the streamed train line


@needs_mpirun
@needs_horovod
@pytest.mark.timeout(120)
@pytest.mark.parametrize("over", ["mpi", "gloo"])
def test_horovod_scaling(tmp_path, over):
    out = tmp_path / f"hvd-{over}.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "horovod", "--horovod-over", over,
                 *SMALL, "--model", "gpt-tiny", "--image-size", "32", "--fusion-mb", "1",
                 "--scaling", "2", "--out", str(out), timeout=110)
    assert p.returncode == 0, p.stderr[-3000:]
    one, two = _check_scaling(out)
    assert two["engine"] == "horovod" and two["buckets"]["cap_mb"] == 1.0
    assert two["transport"] == ("gloo/tcp" if over == "gloo" else "ob1/tcp")


@needs_mpirun
@pytest.mark.timeout(90)
def test_mpi_engine_and_workload_all(tmp_path):
    out = tmp_path / "all.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", "mpi", "--workload", "all",
                 "--ops", "allreduce", "--sizes", "1K,64K", "--model", "gpt-tiny", "--image-size",
                 "16", "--batch-size", "2", "--steps", "3", "--warmup-steps", "1", "--bucket-mb",
                 "1", "--out", str(out), timeout=80)
    assert p.returncode == 0, p.stderr[-3000:]
    kinds = [r["kind"] for r in map(json.loads, out.read_text().splitlines())]
    assert kinds == ["run", "collective", "collective", "train", "summary"]
    (rec,) = _records(out, "train")
    assert rec["engine"] == "mpi" and rec["grads_identical"] and rec["buckets"]["count"] >= 2
    assert rec["samples_per_s"]["p50"] > 0 and rec["allreduce_ms"] > 0


@pytest.mark.timeout(150)
@pytest.mark.parametrize("primitive", ["gloo", "mpi", "horovod"])
def test_halo_exchange_checked_and_timed(tmp_path, primitive):
    if primitive != "gloo" and shutil.which("mpirun") is None:
        pytest.skip("needs Open MPI's mpirun")
    if primitive == "horovod" and not horovod_available():
        pytest.skip("needs horovod.torch")
    out = tmp_path / "halo.jsonl"
    p = fabbench("run", "--fabric", "ethernet", "--primitive", primitive, "--workload", "halo",
                 "--cells-per-rank", "4096", "--halo-iters", "5", "--out", str(out), timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = _records(out, "halo")
    assert rec["correct"] is True and rec["grid"] == [2, 1, 1] and rec["side"] == 16
    assert rec["bytes_per_iter"] == 2 * 18 * 18 * 8 and rec["time_us"]["p50"] > 0


@pytest.mark.parametrize("args,needle", [
    (["--model", "alexnet"], "unknown model 'alexnet'"),
    (["--batch-size", "0"], "batch size must be at least 1"),
    (["--image-size", "100"], "multiple of 32"),
    (["--scaling", "1,two"], "--scaling"),
])
def test_bad_train_input_one_line_exit_2(args, needle):
    p = fabbench("run", "--fabric", "ethernet", "--workload", "train", *args, timeout=60)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr


def test_models_command_lists_reference_counts():
    p = fabbench("models", "--json", timeout=60)
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["resnet50"]["parameters"] == 25_557_032
    assert rows["resnet101"]["parameters"] == 44_549_160
    assert rows["vgg16"]["parameters"] == 138_357_544
