"""Zhang et al.'s what-if: the bucket timeline by hand, their qualitative claims with their
inputs, and train records (with and without a bucket schedule) as profiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.scaling import whatif
from fabbench.scaling.predict import ModelOptions, build
from fabbench.workloads.train.record import Train

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
G = 1e9 / 8  # 1 Gb/s in bytes/s


def test_bucket_formula_by_hand():
    # S = 100 MB over 4 nodes at 10 Gb/s: each half moves 100e6·8·3/4 / 10e9 = 60 ms
    assert whatif.bucket_comm_s(100e6, 4, 10 * G) == pytest.approx(0.120)
    assert whatif.bucket_comm_s(100e6, 4, 10 * G, compression=4) == pytest.approx(0.030)
    # t_add(S/N) (N−1) times: 3 · 25 MB · 1e-10 s/B = 7.5 ms; α (N−1) per half
    assert whatif.bucket_comm_s(100e6, 4, 10 * G, add_s_per_byte=1e-10) == pytest.approx(0.1275)
    assert whatif.bucket_comm_s(100e6, 4, 10 * G, alpha_s=1e-3) == pytest.approx(0.126)
    assert whatif.bucket_comm_s(100e6, 1, 10 * G) == 0


def test_timeline_by_hand():
    # backward 10 ms; buckets ready at 4 and 10 ms, each 3 ms on the wire at these numbers
    prof = whatif.TrainProfile(model="m", iteration_s=0.020, backward_s=0.010, buckets=(
        whatif.Bucket(nbytes=7.5e6, ready_s=0.004), whatif.Bucket(nbytes=7.5e6, ready_s=0.010)))
    bw = 7.5e6 * 2 * (1 / 2) / 0.003  # 2 nodes: 2·S/2/BW = 3 ms
    p = whatif.predict(prof, 2, bw)
    assert p.comm_s == pytest.approx(0.006)
    assert p.overhead_s == pytest.approx(0.003)       # only the last bucket sticks out
    assert p.scaling == pytest.approx(0.020 / 0.023)
    # a slower link: the first bucket ends at 4 + 9 = 13 ms, the second at 22 ms
    p = whatif.predict(prof, 2, bw / 3)
    assert p.overhead_s == pytest.approx(0.012)


def test_flushed_buckets_follow_zhang_5ms_64mb():
    bs = whatif.flushed_buckets(102.2e6, 0.0648)
    assert len(bs) == 13 and sum(b.nbytes for b in bs) == pytest.approx(102.2e6)
    assert bs[0].ready_s == pytest.approx(0.005) and bs[-1].ready_s == pytest.approx(0.0648)
    # a fast producer hits the 64 MB cap first
    assert max(b.nbytes for b in whatif.flushed_buckets(1e9, 0.010)) == pytest.approx(64e6)


@pytest.mark.parametrize("model", ["resnet50", "resnet101", "vgg16"])
def test_zhang_100gbit_needs_no_compression(model):
    p = whatif.predict(whatif.reference_profile(model), 8, 100 * G)
    assert p.scaling > 0.95


def test_zhang_10gbit_compression_2_to_5_brings_near_linear():
    prof = whatif.reference_profile("resnet50")
    plain = whatif.predict(prof, 8, 10 * G).scaling
    c2 = whatif.predict(prof, 8, 10 * G, compression=2).scaling
    c5 = whatif.predict(prof, 8, 10 * G, compression=5).scaling
    assert plain < 0.7            # the network is the bottleneck at 10 Gb/s
    assert c2 > 0.85 and c5 > 0.95
    assert plain < c2 < c5


def test_scaling_falls_with_nodes_and_rises_with_bandwidth():
    prof = whatif.reference_profile("vgg16")
    by_nodes = [whatif.predict(prof, n, 25 * G).scaling for n in (1, 2, 8, 64)]
    assert by_nodes[0] == 1 and by_nodes == sorted(by_nodes, reverse=True)
    by_bw = [whatif.predict(prof, 8, b * G).scaling for b in (1, 10, 25, 100)]
    assert by_bw == sorted(by_bw)


def test_record_with_buckets_and_no_ready_times_is_spread_and_said():
    rec = Train.read({"model": "resnet50", "parameters": 25557032, "compute_ms": 100.0,
                      "step_ms": 120.0, "comm_ms": 20.0, "grad_bytes": 102228128,
                      "buckets": {"count": 3, "bytes": [1 << 20, 50_000_000, 51_179_552]},
                      "batch_per_rank": 32, "ranks": 2})
    prof = whatif.profile_from_record(rec, backward_fraction=0.5)
    assert prof.iteration_s == pytest.approx(0.1) and prof.backward_s == pytest.approx(0.05)
    assert [b.nbytes for b in prof.buckets] == list(rec.buckets.bytes)
    assert prof.buckets[-1].ready_s == pytest.approx(0.05)
    assert prof.buckets[0].ready_s == pytest.approx(0.05 * (1 << 20) / sum(rec.buckets.bytes))
    assert any("spread uniformly" in n for n in prof.notes)


def test_record_with_ready_times_uses_them():
    rec = Train.read({"model": "m", "parameters": 10, "compute_ms": 10.0, "step_ms": 12.0,
                      "comm_ms": 2.0, "backward_ms": 6.0, "grad_bytes": 40,  # a newer writer's
                      "buckets": {"count": 2, "bytes": [20, 20], "ready_ms": [2.0, 6.0]}})
    prof = whatif.profile_from_record(rec)
    assert [b.ready_s for b in prof.buckets] == pytest.approx([0.002, 0.006])
    assert prof.backward_s == pytest.approx(0.006) and not prof.notes


def test_bad_profile_refused():
    with pytest.raises(UsageError):
        whatif.TrainProfile(model="m", iteration_s=0.01, backward_s=0.02,
                            buckets=(whatif.Bucket(nbytes=1, ready_s=0),))
    with pytest.raises(UsageError, match="compression"):
        whatif.bucket_comm_s(1e6, 4, G, compression=0.5)


def test_build_from_train_fixture_only():
    ans = build([FIXTURES / "siteA-train-8.jsonl"], ModelOptions(nodes=64, bandwidth="100Gbit"))
    (w,) = ans.train
    assert w.model == "resnet50" and w.grad_bytes == pytest.approx(4 * 25557032)
    by_bw = {round(p.bandwidth_gbit_s): p.scaling for p in w.by_bandwidth}
    assert set(by_bw) == {1, 10, 25, 100} and by_bw[100] > 0.95 > by_bw[1]
    assert [p.nodes for p in w.by_nodes] == [1, 2, 4, 8, 16, 32, 64]
    assert any("Zhang" in a for a in ans.assumptions)


def test_build_hierarchy_with_intra_bandwidth():
    ans = build([FIXTURES / "siteA-ib.jsonl"], ModelOptions(
        nodes=8, ranks_per_node=8, bandwidth="100Gbit", intra_bandwidth="100GB/s"))
    h = ans.hierarchical
    assert h is not None and h.bottleneck == "inter-node"
    row = h.rows[-1]
    assert row.time_us == pytest.approx(max(row.intra_us, row.inter_us))
    assert row.best_split_us <= row.time_us


def test_build_refuses_bad_options():
    with pytest.raises(UsageError, match="bandwidth"):
        ModelOptions(bandwidth="fast")
    with pytest.raises(UsageError, match="nodes"):
        ModelOptions(nodes=0)
    with pytest.raises(UsageError, match="compression"):
        ModelOptions(compression=0.5)


def test_the_jobs_measured_ceiling_is_the_network_when_nothing_is_fitted(tmp_path):
    """A train-only file with a ceiling record: the what-if runs at what the wire delivered,
    not at the link's nominal rate."""
    lines = (FIXTURES / "siteA-train-1.jsonl").read_text().splitlines()
    ceiling = {"kind": "ceiling", "run_id": "siteA-train-1", "tool": "iperf3", "mode": "bidir",
               "interface": "ib0", "client": {"rank": 0, "host": "nodeA"},
               "server": {"rank": 1, "host": "nodeB"}, "seconds": 2.0,
               "directions": [{"from": "nodeA", "to": "nodeB", "gbit_s": 40.0}],
               "per_direction_gbit_s": 40.0, "error": None}
    path = tmp_path / "with-ceiling.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(ceiling), *lines[1:]]) + "\n")
    answer = build([path], ModelOptions(nodes=4))
    assert answer.bandwidth_bytes_per_s == pytest.approx(40e9 / 8)
    assert "ceiling measured in the job" in answer.assumptions[0]
    plain = build([FIXTURES / "siteA-train-1.jsonl"], ModelOptions(nodes=4))
    assert plain.bandwidth_bytes_per_s != pytest.approx(40e9 / 8)
