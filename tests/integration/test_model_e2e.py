"""`fabbench model` on a real 2-rank run: sane fits and predictions; bad input is one line, 2."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import fabbench

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if shutil.which("mpirun") is None:
        pytest.skip("Open MPI's mpirun is not installed (.ci/apt-packages.txt: openmpi-bin)")
    path = tmp_path_factory.mktemp("model") / "shm.jsonl"
    p = fabbench("run", "--fabric", "shm", "--ops", "allreduce", "--sizes", "8:4M",
                 "--budget", "0.03", "--out", str(path), timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    return path


def test_model_from_a_real_run(results):
    p = fabbench("model", "--from", str(results), "--nodes", "16", "--bandwidth", "25Gbit")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "not measurements" in p.stdout and "Model assumptions" in p.stdout
    assert "allreduce at 16 nodes" in p.stdout and "25 Gb/s" in p.stdout
    j = fabbench("model", "--from", str(results), "--nodes", "16", "--bandwidth", "25Gbit",
                 "--json")
    assert j.returncode == 0, j.stderr[-2000:]
    ans = json.loads(j.stdout)
    (fit,) = ans["fits"]
    assert fit["op"] == "allreduce" and fit["ranks"] == 2 and fit["points"] == 20
    assert fit["beta_s_per_byte"] > 0 and fit["alpha_us"] >= 0
    ratio = fit["bandwidth_gbyte_s"] / fit["busbw_at_max_gbyte_s"]
    assert 0.1 < ratio < 10, fit
    assert ans["ranks"] == 16 and ans["bandwidth_bytes_per_s"] == pytest.approx(3.125e9)
    big = ans["allreduce"][-1]
    assert 0 < big["busbw_gbyte_s"] <= 3.125 * 1.0001  # α only adds time
    # with no per-message latency, a ring at the largest size runs at line rate (3.125 GB/s);
    # the fitted α is left out because on a busy host a small message's time is scheduling
    z = json.loads(fabbench("model", "--from", str(results), "--nodes", "16", "--bandwidth",
                            "25Gbit", "--latency", "0us", "--json").stdout)
    assert z["allreduce"][-1]["busbw_gbyte_s"] == pytest.approx(3.125, rel=1e-3)
    # without --bandwidth the fitted bandwidth is the network
    d = json.loads(fabbench("model", "--from", str(results), "--json").stdout)
    assert d["bandwidth_bytes_per_s"] == pytest.approx(fit["bandwidth_gbyte_s"] * 1e9)


def _one_line_error(p, text):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fabbench: error:"), p.stderr
    assert text in lines[0] and "Traceback" not in p.stderr


def test_bad_input_is_one_line_exit_2(results, tmp_path):
    _one_line_error(fabbench("model", "--from", str(tmp_path / "nope.jsonl")),
                    "no such file")
    empty = tmp_path / "empty.jsonl"
    lines = results.read_text().splitlines()
    empty.write_text("\n".join([lines[0], lines[-1]]) + "\n")  # run + summary only
    _one_line_error(fabbench("model", "--from", str(empty)),
                    "no collective, train or replay records")
    _one_line_error(fabbench("model", "--from", str(results), "--bandwidth", "fast"),
                    "bad bandwidth 'fast'")
