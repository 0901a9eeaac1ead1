"""fabbench compare: the statistics (numpy only) and A vs B over recorded results files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fabbench.cli.main import main
from fabbench.report import significance
from fabbench.report.compare import compare, provenance_diff
from fabbench.report.runs_report import make_compare
from fabbench.results.runs import load

RESULTS = Path(__file__).parents[1] / "fixtures" / "runs"
SITE_A = RESULTS / "siteA-ib.jsonl"
SITE_B = RESULTS / "siteB-ib.jsonl"


def test_mann_whitney_matches_the_textbook_normal_approximation():
    u, p = significance.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert u == 0
    # z = (|0 - 12.5| - 0.5) / sqrt(5*5*11/12)
    z = 12 / math.sqrt(25 * 11 / 12)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)))
    assert p == pytest.approx(0.01219, abs=1e-4)


def test_mann_whitney_handles_ties_and_identical_samples():
    assert significance.mann_whitney([1, 1, 1], [1, 1, 1]) == (4.5, 1.0)
    u, p = significance.mann_whitney([1, 2, 2, 3], [2, 3, 3, 4])
    assert u == 3.0 and 0.05 < p < 1  # a ranks 1, 3, 3, 6: ties share their mean rank
    with pytest.raises(ValueError):
        significance.mann_whitney([], [1.0])


def test_mann_whitney_is_symmetric():
    rng = np.random.default_rng(3)
    a, b = rng.normal(10, 1, 20), rng.normal(10.5, 1, 25)
    (u1, p1), (u2, p2) = significance.mann_whitney(a, b), significance.mann_whitney(b, a)
    assert u1 + u2 == pytest.approx(20 * 25) and p1 == pytest.approx(p2)


def test_bootstrap_interval_holds_the_true_ratio_and_is_reproducible():
    rng = np.random.default_rng(4)
    a, b = rng.normal(100, 3, 40), rng.normal(150, 4, 40)
    ratio, low, high = significance.bootstrap_median_ratio(a, b)
    assert low < 1.5 < high and low < ratio < high and high - low < 0.05
    assert significance.bootstrap_median_ratio(a, b) == (ratio, low, high)


def _point(samples):
    s = np.asarray(samples, float)
    return {"time_us": {"p50": float(np.median(s)), "mean": float(s.mean()),
                        "stdev": float(s.std(ddof=1))}, "samples_us": list(s),
            "samples": len(s)}


def _verdict(a, b):
    return significance.compare_samples(a, b, ratio=float(np.median(b) / np.median(a)))


def test_verdicts():
    rng = np.random.default_rng(5)
    base = rng.normal(100, 2, 30)
    assert _verdict(base, rng.normal(80, 2, 30)).verdict == "faster"
    assert _verdict(base, rng.normal(120, 2, 30)).verdict == "slower"
    same = _verdict(base, rng.normal(100, 2, 30))
    assert same.verdict == "same" and same.ci_low < 1 < same.ci_high
    few = significance.compare_samples(base, [90, 91, 92], ratio=0.9)
    assert (few.verdict, few.ratio, few.p_value) == ("too few samples", 0.9, None)
    bare = significance.compare_samples(base, [], ratio=0.5)
    assert (bare.verdict, bare.ratio, bare.ci_low) == ("no samples", 0.5, None)
    assert significance.median_ratio(0.0, 1.0) == math.inf \
        and significance.median_ratio(2.0, 1.0) == 0.5


def test_why_unstable_names_a_wide_interval_few_samples_or_an_unknown_interval():
    # the recorded verdict is the one applied
    assert significance.why_unstable(True, 0.2, 30) is None
    assert significance.why_unstable(False, 0.2, 30) == "median 95% CI ±20% (wider than ±5%)"
    assert significance.why_unstable(False, None, 3) == "only 3 samples"
    assert significance.why_unstable(False, None, 40) == "median 95% CI unknown"


def test_a_few_slow_outliers_leave_the_median_known_and_the_point_stable():
    from fabbench.timing.stats import is_stable, median_ci95_rel

    tail = [100.0 + i % 3 for i in range(40)] + [400.0] * 4
    rel = median_ci95_rel(tail)
    assert np.std(tail) / np.mean(tail) > 0.1 and is_stable(rel)
    assert significance.why_unstable(is_stable(rel), rel, len(tail)) is None
    noisy = np.random.default_rng(6).normal(100, 30, 30)
    assert significance.why_unstable(False, median_ci95_rel(noisy), 30).startswith(
        "median 95% CI ±")


def test_site_b_is_faster_for_large_messages_and_same_where_noisy():
    c = compare(load([SITE_A, SITE_B]))
    by = {(r.op, r.bytes): r for r in c.rows}
    assert len(c.rows) == 8
    big = by["allreduce", 16 << 20].verdict
    assert big.verdict == "faster" and big.ratio == pytest.approx(0.5, abs=0.02)
    noisy = by["allreduce", 1024]
    assert noisy.verdict.verdict == "same" and "B: median 95% CI ±" in noisy.notes
    assert c.train[0].a.samples_per_s["p50"] == 4800 and c.train[0].b is not None


def test_provenance_diff_names_what_differs_and_skips_launcher_noise():
    diff = dict(provenance_diff(load([SITE_A, SITE_B])))
    assert diff["host"] == ["nodeA", "nodeB"]
    assert diff["rdma.mlx5_0:1"][1].startswith("ACTIVE, 200 Gb/sec")
    assert not any("hnp_uri" in key for key in diff)
    assert "versions.openmpi" not in diff  # equal on both


def test_compare_outputs(tmp_path):
    out = make_compare([SITE_A, SITE_B], html=tmp_path / "c.html", csv=tmp_path / "c.csv",
                       plots_dir=tmp_path / "figs")
    html = (tmp_path / "c.html").read_text()
    assert "Comparison against nodeA: infiniband/mpi" in html
    assert html.count('class="l faster"') == 7 and "Provenance that differs" in html
    assert (tmp_path / "figs" / "ratio.svg").read_text().count("nodeB: infiniband/mpi") >= 1
    lines = (tmp_path / "c.csv").read_text().splitlines()
    assert len(lines) == 9 and lines[0].startswith("op,dtype,bytes,ranks,a,b,")
    assert out.comparison is not None


def test_cli_compare(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(SITE_A), str(SITE_B)])
    out, _ = capsys.readouterr()
    assert exit_info.value.code == 0
    assert "nodeB: infiniband/mpi vs nodeA: infiniband/mpi: 7 faster, 1 same" in out
    assert "provenance that differs" in out


def test_cli_compare_writes_its_tables_with_the_cycle_collector_paused(capsys, monkeypatch):
    """The tables of a compare are made and written as its records were read, with Python's
    cycle collector paused (results.reader.collector_paused): it would walk every record read
    (0.1-0.3 s CPU of a compare of 10,000 records, measured); it runs again afterwards."""
    import gc

    from fabbench.report import compare_text

    paused: list[bool] = []
    tables = compare_text.compare_tables
    monkeypatch.setattr(compare_text, "compare_tables",
                        lambda c: paused.append(not gc.isenabled()) or tables(c))
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(SITE_A), str(SITE_B)])
    assert exit_info.value.code == 0 and "7 faster" in capsys.readouterr().out
    assert paused == [True] and gc.isenabled()


def test_compare_needs_two_runs_with_something_in_common(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(SITE_A)])
    assert exit_info.value.code == 2
    assert "compare needs at least two runs" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(RESULTS / "siteA-train-1.jsonl"), str(SITE_B)])
    assert exit_info.value.code == 2 and "nothing to compare" in capsys.readouterr().err


def test_points_timed_under_different_protocols_are_not_compared(tmp_path):
    """A figure under --timing osu and one under batch time different things: no row pairs
    them, and the unmatched note names --timing."""
    import json

    lines = SITE_B.read_text().splitlines()
    osu = tmp_path / "siteB-osu.jsonl"
    osu.write_text("".join(
        json.dumps({**rec, "timing": "osu"} if rec.get("kind") == "collective" else rec) + "\n"
        for rec in map(json.loads, lines)))
    same = compare(load([SITE_A, SITE_B]))
    differ = compare(load([SITE_A, osu]))  # the fixtures' training rows still pair up
    assert same.rows and not same.unmatched
    assert not differ.rows and differ.train
    assert any("--timing" in u for u in differ.unmatched)


def _old_verdict(a, b, ratio):
    """compare_samples as it was written point by point (bae17b7): A's resamples the seeded
    generator's first draw, B's its next, numpy's median of each, numpy's percentiles, and
    Mann-Whitney from average ranks: what the batch must give to the last bit."""
    if len(a) == 0 or len(b) == 0:
        return significance.Verdict(ratio, None, None, None, "no samples")
    if min(len(a), len(b)) < significance.MIN_TEST_SAMPLES:
        return significance.Verdict(ratio, None, None, None, "too few samples")
    x, y = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(significance._SEED)
    ma = np.median(x[rng.integers(0, len(x), (2000, len(x)))], axis=1)
    my = np.median(y[rng.integers(0, len(y), (2000, len(y)))], axis=1)
    low, high = np.percentile(my / ma, [(1 - 0.95) / 2 * 100, 100 - (1 - 0.95) / 2 * 100])
    ratio = float(np.median(y) / np.median(x))
    both = np.concatenate([x, y])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both), float)
    ranks[order] = np.arange(1, len(both) + 1)
    _, inverse, counts = np.unique(both, return_inverse=True, return_counts=True)
    ranks = (np.bincount(inverse, weights=ranks) / counts)[inverse]
    n1, n2, n = len(x), len(y), len(both)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    tie = float((counts ** 3 - counts).sum()) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie))
    p = 1.0 if sigma == 0 else min(1.0, math.erfc(
        max((abs(u1 - n1 * n2 / 2) - 0.5) / sigma, 0.0) / math.sqrt(2)))
    real = p < significance.ALPHA and not low <= 1.0 <= high
    word = ("faster" if ratio < 1 else "slower") if real else "same"
    return significance.Verdict(ratio, float(low), float(high), p, word)


def _samples(rng, n, kind):
    if kind == "equal":
        return [5.0] * n
    values = rng.lognormal(3, rng.uniform(0.01, 1), n)
    return (np.round(values, {"ties": 0, "coarse": -1}.get(kind, 3)) + 1).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_many_points_at_once_give_each_points_verdict_to_the_last_bit(seed):
    """compare_many (every point of a compare at once, those of the same sample counts in one
    array) gives each point the verdict compare_samples gave it alone: the same draws, the same
    floats; A's points shared by many B's as a compare of many runs shares them."""
    rng = np.random.default_rng(seed)
    baselines = [_samples(rng, int(n), kind) for n in rng.integers(0, 45, 40)
                 for kind in [rng.choice(["plain", "ties", "coarse", "equal"])]]
    baselines += [_samples(rng, n, "plain") for n in (200, 257)]  # counts past one byte
    points = []
    for _ in range(300):
        a = baselines[rng.integers(len(baselines))]
        if a and rng.random() < 0.3:
            b = (np.asarray(a) * rng.choice([0.8, 1.0, 1.3])).tolist()  # B is A, or A scaled
        else:
            b = _samples(rng, int(rng.integers(0, 45)), rng.choice(["plain", "ties"]))
        points.append((a, b, float(rng.uniform(0.5, 2))))
    got = significance.compare_many(points)
    assert {v.verdict for v in got} >= {"faster", "slower", "same", "too few samples",
                                        "no samples"}
    for (a, b, ratio), verdict in zip(points, got, strict=True):
        expected = _old_verdict(a, b, ratio)
        assert verdict == expected
        assert [type(v) for v in vars(verdict).values()] \
            == [type(v) for v in vars(expected).values()]
        if expected.p_value is not None:  # tested: Mann-Whitney alone gives the same p
            assert significance.mann_whitney(a, b)[1] == expected.p_value


@pytest.mark.parametrize("cores", [1, 2, 8])
def test_the_arrays_of_points_are_tested_side_by_side_with_the_same_verdicts(cores,
                                                                            monkeypatch):
    """compare_many tests its arrays of points (one per sample counts, at most _ROWS points
    each) on a thread per core, at most _THREADS: each point's verdict is the one it has when
    the arrays are tested one after the other, in its place."""
    import threading

    rng = np.random.default_rng(5)
    baselines = [_samples(rng, n, "plain") for n in (5, 6, 9, 30, 31)]
    points = [(a, _samples(rng, len(a) + int(rng.integers(0, 2)), "ties"), 1.0)
              for _ in range(3 * significance._ROWS) for a in [baselines[rng.integers(5)]]]
    monkeypatch.setattr(significance, "_cores", lambda: 1)
    alone = significance.compare_many(points)
    threads: set[str] = set()
    together = threading.Barrier(min(cores, significance._THREADS), timeout=60)
    rows = significance._bootstrap_rows

    def noted(*args, **kwargs):  # each thread's first array waits for the others' first
        if threading.current_thread().name not in threads:
            threads.add(threading.current_thread().name)
            together.wait()
        return rows(*args, **kwargs)

    monkeypatch.setattr(significance, "_bootstrap_rows", noted)
    monkeypatch.setattr(significance, "_cores", lambda: cores)
    assert significance.compare_many(points) == alone
    assert len(threads) == together.parties


def test_a_baseline_point_of_zero_samples_is_refused_in_one_line(capsys, tmp_path):
    """Samples of 0 us are in the schema; as a time ratio's baseline they would divide by zero
    (before: a ValueError's traceback). One line names the run and the point; exit 2."""
    import json

    records = [json.loads(line) for line in SITE_A.read_text().splitlines()]
    point = next(r for r in records if r.get("kind") == "collective" and r.get("samples_us"))
    point["samples_us"] = [0.0] * len(point["samples_us"])
    zero = tmp_path / "zero.jsonl"
    zero.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", str(zero), str(SITE_B)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1
    assert f"nodeA: infiniband/mpi: {point['op']} {point['bytes']} B" in err \
        and "median of its samples is 0 us" in err
