"""On a GPU: NCCL collectives on one rank, ResNet-50 training at 224 px with AMP, and NCCL's own
log lines read back. Marked ``gpu``; skipped with the reason where torch sees no GPU.

Set FABBENCH_NCCL_CAPTURE=<dir> to keep the NCCL lines a run's parser read there, one file per
run named after the NCCL version (for tests/fixtures/nccl/captured/)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import fabbench
from fabbench.comm.nccl_report import parse_nccl_log
from fabbench.results.reader import read_results
from fabbench.results.records import Run
from fabbench.sysinfo.gpus import gpus_visible


def _nvidia_devices() -> int:
    """NVIDIA GPUs this process may use, known without importing torch (collection stays fast);
    a GPU torch cannot use fails the tests, it is not skipped."""
    if not gpus_visible():
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = sum(1 for p in Path("/dev").glob("nvidia*") if p.name[6:].isdigit())
    return min(count, len(visible.split(","))) if visible else count


GPUS = _nvidia_devices()
pytestmark = [
    pytest.mark.integration, pytest.mark.gpu, pytest.mark.together,
    pytest.mark.skipif(GPUS == 0, reason="needs an NVIDIA GPU: none visible on this host "
                                         "(no /dev/nvidia<N>, or CUDA_VISIBLE_DEVICES hides it)"),
]


def _run(tmp_path: Path, *args: str, timeout: float = 900):
    out = tmp_path / "r.jsonl"
    p = fabbench("run", "--out", str(out), *args, timeout=timeout)
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
    results = read_results(out)  # every record validated against the schema
    return results, p


def _keep_nccl_lines(run: Run, name: str) -> None:
    where = os.environ.get("FABBENCH_NCCL_CAPTURE")
    if not where:
        return
    version = run.provenance.versions.nccl or "unknown"
    path = Path(where) / f"nccl-{version}-{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(run.library_report["lines"]) + "\n")


def test_nccl_collectives_one_rank(tmp_path):
    results, _ = _run(tmp_path, "--primitive", "nccl", "--ranks", "1", "--fabric", "ethernet",
                      "--sizes", "8:16M:16", "--check")
    run = results.of_kind("run")[0]
    assert run.device == "cuda" and run.timing_method == "device-synchronize"
    report = run.library_report
    assert run.transport == report["transport"] == "nccl/Socket"
    assert report["network"] == "Socket" and report["channels"] >= 1
    # the lines kept are NCCL's own, and read back to the same report
    again = parse_nccl_log("\n".join(report["lines"]))
    assert again.transport == run.transport and again.channels == report["channels"]
    assert run.gpudirect.requested == "auto"
    collectives = results.of_kind("collective")
    assert collectives and all(r.correct is True for r in collectives)
    assert results.of_kind("summary")[-1].ok is True
    _keep_nccl_lines(run, "one-rank-socket")


def test_gpudirect_off_holds_on_one_rank(tmp_path):
    """One rank has no network connection: --gpudirect off holds (and is recorded as such)."""
    results, _ = _run(tmp_path, "--primitive", "nccl", "--ranks", "1", "--fabric", "ethernet",
                      "--sizes", "1M", "--ops", "allreduce", "--gpudirect", "off")
    run = results.of_kind("run")[0]
    assert run.gpudirect.requested == "off" and run.gpudirect.obtained is None


@pytest.mark.skipif(GPUS < 2, reason="needs two GPUs on this host (NCCL P2P/SHM)")
def test_nccl_two_ranks_one_host(tmp_path):
    results, _ = _run(tmp_path, "--primitive", "nccl", "--ranks", "2", "--fabric", "shm",
                      "--sizes", "8:16M:16", "--check")
    run = results.of_kind("run")[0]
    assert run.transport.startswith(("nccl/P2P", "nccl/SHM"))
    _keep_nccl_lines(run, "two-ranks-one-host")


def test_train_resnet50_224_amp_writes_valid_records(tmp_path):
    results, p = _run(tmp_path, "--primitive", "nccl", "--ranks", "1", "--fabric", "ethernet",
                      "--workload", "train", "--model", "resnet50", "--image-size", "224",
                      "--precision", "fp16", "--batch-size", "32", "--steps", "10",
                      "--warmup-steps", "3", "--timeout", "120")
    train = results.of_kind("train")[0]
    assert train.model == "resnet50" and train.precision == "fp16"
    assert train.samples_per_s["p50"] > 0 and train.grads_identical is True
    run = results.of_kind("run")[0]
    assert run.timing_method == "device-synchronize"
    print(json.dumps({"samples_per_s": train.samples_per_s, "step_ms": train.step_ms}))
    _keep_nccl_lines(run, "train-one-rank")
