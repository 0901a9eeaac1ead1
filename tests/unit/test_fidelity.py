"""The fidelity check's pure parts: the loops' output, the band, the paths."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from fabbench.errors import RunError, UsageError
from fabbench.fidelity import check
from fabbench.fidelity.check import FidelityPoint


def test_loop_output_is_read_with_and_without_a_launcher_prefix():
    text = ("some banner\n8 1.250 25 1000\n[0]<stdout>:1048576 812.500 25 6\n"
            "262144 12 25 40\nnot 1 2 3\n")
    assert check.parse_loop_output(text) == {8: 1.25, 1048576: 812.5, 262144: 12.0}


@pytest.mark.parametrize(("size", "ref", "fb", "met"), [
    (1 << 20, 100.0, 103.0, True),   # 0.971: inside
    (1 << 20, 100.0, 97.1, True),    # 1.030: inside
    (1 << 20, 100.0, 104.0, False),  # slower
    (1 << 20, 100.0, 96.0, False),   # faster is as wrong as slower
    (256 << 10, 100.0, 110.0, False),
])
def test_the_band_is_two_sided_at_large_sizes(size, ref, fb, met):
    assert FidelityPoint("p", "allreduce", size, "c", ref, fb).verdict("mpi")[0] is met


def test_small_sizes_are_judged_by_added_time_for_mpi_and_by_ratio_for_the_others():
    assert FidelityPoint("p", "allreduce", 8, "c", 5.0, 6.9).verdict("mpi")[0] is True
    assert FidelityPoint("p", "allreduce", 8, "c", 5.0, 7.5).verdict("mpi")[0] is False
    assert FidelityPoint("p", "allreduce", 8, "c", 5.0, 2.5).verdict("mpi")[0] is False
    assert FidelityPoint("p", "allreduce", 8, "torch", 100.0, 104.0).verdict("gloo")[0] is True
    assert FidelityPoint("p", "allreduce", 8, "torch", 100.0, 106.0).verdict("gloo")[0] is False
    assert FidelityPoint("p", "allreduce", 64 << 10, "c", 100.0, 200.0).verdict("mpi")[0] is None


def test_ratio_is_busbw_fabbench_over_reference():
    p = FidelityPoint("p", "allreduce", 1 << 20, "c", 100.0, 200.0)
    assert p.ratio == 0.5 and p.added_us == 100.0


def test_paths_by_name():
    assert [p.label for p in check.paths("mpi-tcp,gloo-tcp")] == ["mpi-tcp", "gloo-tcp"]
    assert len(check.paths("all")) == len(check.PATHS)
    with pytest.raises(UsageError, match="unknown fidelity path 'ib'"):
        check.paths("ib")


def test_every_path_names_known_references_and_a_fabric_profile():
    from fabbench.fabrics import load_profile

    for path in check.PATHS.values():
        assert path.references and set(path.references) <= set(check.REFERENCES)
        profile = load_profile(path.fabric)
        assert path.wire == "native" or path.wire in profile.wires


def test_a_site_path_takes_its_references_from_the_primitive():
    assert check.path_for("ethernet", "mpi").references == ("c", "mpi4py")
    assert check.path_for("ethernet", "mpi", c_loop=False).references == ("mpi4py",)
    assert check.path_for("infiniband", "nccl", device="cuda").references == ("torch",)
    with pytest.raises(UsageError, match="no reference loop for mpi on GPU"):
        check.path_for("infiniband", "mpi", device="cuda")


def test_the_python_loop_refuses_bad_arguments_in_one_line():
    p = subprocess.run([sys.executable, str(check.PY_LOOP), "nccl", "allreduce", "8"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "usage" in p.stderr


def test_the_python_loop_imports_nothing_of_fabbench():
    tree = ast.parse(check.PY_LOOP.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names and not any(n.split(".")[0] == "fabbench" for n in names)


def test_compare_alternates_the_order_and_judges_the_median_of_paired_ratios(monkeypatch):
    order: list[str] = []
    times = {"c": iter([12.0, 10.0, 11.0, 12.0]), "osu": iter([9.0, 11.0, 9.0]),
             "fabbench": iter([10.0, 12.5, 10.0])}

    def side(name):
        def run(*_args, **_kw):
            order.append(name)
            return {1 << 20: next(times[name])}
        return run

    monkeypatch.setattr(check, "run_reference", lambda path, ref, *a: side(ref)())
    monkeypatch.setattr(check, "run_fabbench", side("fabbench"))
    path = check.paths("mpi-tcp")[0]
    points = check.compare(path, "allreduce", [1 << 20], rounds=3, references=("c",),
                           others={"osu": side("osu")}, again=False)
    assert order == ["c", "osu", "fabbench", "fabbench", "osu", "c", "c", "osu", "fabbench"]
    c, osu = points
    # rounds pair c with fabbench as 12/10, 10/12.5, 11/10: the median ratio is 1.1, the one
    # a lone slow or fast round cannot move; best-of would give 10/10
    assert (c.reference, c.ratio, c.spread) == ("c", 1.1, (0.8, 1.2))
    assert (c.ref_us, c.fabbench_us) == (11.0, 10.0)
    assert (osu.reference, round(osu.ratio, 3)) == ("osu", 0.9)


def test_compare_again_runs_the_first_reference_twice_a_round_for_the_noise_floor(monkeypatch):
    seq = iter([10.0, 10.0, 11.0, 11.0, 10.0, 9.0])  # c, fabbench, again; again, fabbench, c

    monkeypatch.setattr(check, "run_reference", lambda *a: {8: next(seq)})
    monkeypatch.setattr(check, "run_fabbench", lambda *a: {8: next(seq)})
    path = check.paths("mpi-tcp")[0]
    points = check.compare(path, "allreduce", [8], rounds=2, references=("c",), again=True)
    assert [p.reference for p in points] == ["c", check.AGAIN]
    aa = points[1]
    assert aa.ratios == (10.0 / 11.0, 9.0 / 11.0)


def test_osu_average_is_the_mean_over_ranks_of_each_ranks_mean():
    """OSU's Avg Latency from a --timing osu record: rank means (equal batches), then their
    mean; not the slowest rank's p50 fabbench's table shows."""
    from types import SimpleNamespace

    rec = SimpleNamespace(op="allreduce", bytes=1024,
                          rank_samples_us=[[10.0, 12.0, 14.0], [8.0, 8.0, 11.0]])
    assert check.osu_average_us(rec) == pytest.approx((12.0 + 9.0) / 2)
    with pytest.raises(RunError, match="no per-rank samples"):
        check.osu_average_us(SimpleNamespace(op="allreduce", bytes=8, rank_samples_us=[[], []]))


def test_beside_osu_every_side_runs_osus_ladder_of_sizes():
    # osu_allreduce -m 32768:4194304 runs 32 KiB doubled up to 4 MiB
    assert check.osu_ladder([32768, 262144, 4194304]) == [32768 << k for k in range(8)]
    # a size off the ladder is still run (OSU reports no figure there)
    assert check.osu_ladder([8, 100]) == [8, 16, 32, 64, 100]
    assert check.osu_ladder([1 << 20]) == [1 << 20]
