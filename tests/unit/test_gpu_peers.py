"""bench/gpu/peers.py, the GPU kit's nccl-tests side, on nccl-tests' real output (H200)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "nccl-tests"


@pytest.fixture(scope="module")
def peers():
    sys.path.insert(0, str(REPO / "bench" / "gpu"))  # peers imports cuda_mpi beside it
    try:
        spec = importlib.util.spec_from_file_location("gpukit_peers", REPO / "bench" / "gpu"
                                                      / "peers.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(REPO / "bench" / "gpu"))


def test_every_size_line_is_read_with_both_columns(peers):
    points = peers.parse((FIXTURES / "h200-all_gather-graph.txt").read_text())
    assert sorted(points) == [0] + [2**k for k in range(4, 31)]  # 8 B of floats on 1 rank: 0
    assert points[16777216] == {"out_us": 10.01, "out_busbw": 0.0, "in_us": 0.01,
                                "in_busbw": 0.0}
    assert points[1073741824]["out_us"] == 790.64
    eager = peers.parse((FIXTURES / "h200-sendrecv-eager.txt").read_text())
    assert len(eager) == 28 and eager[8]["out_us"] == 9.56


def test_an_algbw_in_exponent_form_is_read(peers):
    # nccl-tests prints a figure wider than its column as 1e+06 (getFloatStr)
    line = ("     8388608       2097152     float    none      -1     6.08  1378.8    0.00       "
            "0     0.01   1e+06    0.00       0\n")
    assert peers.parse(line) == {8388608: {"out_us": 6.08, "out_busbw": 0.0, "in_us": 0.01,
                                           "in_busbw": 0.0}}


def test_fabbench_beside_nccl_tests_takes_torchs_column(peers):
    points = peers.parse((FIXTURES / "h200-all_reduce-graph.txt").read_text())
    rows = peers.side_by_side({1048576: 0.0132, 67108864: 33.7}, points, "out")
    assert [r["bytes"] for r in rows] == [1048576, 67108864]
    assert rows[1]["nccl_tests_us"] == points[67108864]["out_us"]
    assert rows[1]["ratio"] == round(33.7 / points[67108864]["out_us"], 4)
    # in place, one rank: nothing moves and nccl-tests prints 0.00-0.01 us, its resolution
    inplace = peers.side_by_side({1048576: 0.0132}, points, "in")
    assert inplace[0]["ratio"] is None and inplace[0]["below_resolution"]


def test_the_build_refuses_a_folder_that_is_not_nccl_tests(peers, tmp_path):
    with pytest.raises(peers.BuildError, match="not an nccl-tests source folder"):
        peers.build(tmp_path, tmp_path)


def test_nccl_tests_captures_as_many_operations_per_graph_as_fabbench(peers):
    from fabbench.comm.base import GRAPH_OPS

    argv = peers.argv(Path("all_gather_perf"), (8, 1 << 30), graph=True)
    assert argv[argv.index("-n") + 1] == str(GRAPH_OPS) and "-G" in argv
