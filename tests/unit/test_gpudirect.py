"""--gpudirect: the profiles' data, the plan's checks, and the verdict on what a run got."""

import pytest

from fabbench.errors import UsageError
from fabbench.fabrics.profile import load_profile, parse_profile
from fabbench.launch.gpudirect import outcome
from fabbench.plan import Plan
from fabbench.workloads.collectives import Sweep


def test_on_and_off_add_the_profile_settings_over_the_section():
    ib = load_profile("infiniband")
    auto = ib.settings("nccl")
    on, off = ib.settings("nccl", "native", "on"), ib.settings("nccl", "native", "off")
    assert auto.gpudirect == "auto" and "NCCL_NET_GDR_LEVEL" not in auto.env
    assert on.env["NCCL_NET_GDR_LEVEL"] == "SYS" and off.env["NCCL_NET_GDR_LEVEL"] == "LOC"
    assert on.env["NCCL_NET"] == "IB" and on.transport == auto.transport
    assert on.gpudirect_verify == "report"
    mpi = ib.settings("mpi", "native", "on")
    assert mpi.env["UCX_IB_GPU_DIRECT_RDMA"] == "yes" and "cuda_copy" in mpi.env["UCX_TLS"]
    assert mpi.gpudirect_verify == "library" and dict(mpi.mca) == dict(ib.settings("mpi").mca)
    # the placeholders of the section still fill in
    assert on.resolve({"rdma_device": "mlx5_1"}).env["NCCL_IB_HCA"] == "mlx5_1"
    assert on.resolve({"rdma_device": "mlx5_1"}).gpudirect == "on"


@pytest.mark.parametrize("fabric,primitive,wire", [
    ("ethernet", "nccl", "native"), ("shm", "nccl", "native"), ("omnipath", "nccl", "native"),
    ("infiniband", "gloo", "native"), ("infiniband", "nccl", "tcp")])
def test_on_where_the_profile_has_no_gpudirect_is_refused_by_name(fabric, primitive, wire):
    profile = load_profile(fabric)
    with pytest.raises(UsageError, match=f"no GPUDirect for {primitive}"):
        profile.settings(primitive, wire, "on")
    assert profile.settings(primitive, wire, "off").env == profile.settings(primitive, wire).env


def test_bad_gpudirect_tables_are_refused():
    base = {"name": "x", "primitive": {"nccl": {"transport": ["nccl/IB"], "gpudirect": {}}}}
    table = base["primitive"]["nccl"]
    for bad, message in [({}, "verify"), ({"verify": "trust"}, "verify"),
                         ({"verify": "report"}, "needs an on or off"),
                         ({"verify": "report", "sometimes": {}}, "unknown key"),
                         ({"verify": "report", "on": {"transport": "x"}}, "key 'transport'"),
                         ({"verify": "report", "on": {"env": {"A B": "1"}}}, "bad name")]:
        table["gpudirect"] = bad
        with pytest.raises(UsageError, match=message):
            parse_profile(base, "x.toml")
    table["gpudirect"] = {"verify": "none", "on": {"env": {"X_GDR": 1}}}
    assert parse_profile(base, "x.toml").settings("nccl", "native", "on").env["X_GDR"] == "1"
    with pytest.raises(UsageError, match="--gpudirect takes"):
        parse_profile(base, "x.toml").settings("nccl", "native", "yes")


def plan(**kw):
    return Plan(**{"fabric": "infiniband", "primitive": "nccl", "device": "cuda",
                   "workload": "collectives",
                   "collectives": Sweep(ops=("allreduce",), sizes=(8,)), "out": "-",
                   "run_id": "t", **kw})


def test_plan_needs_gpu_buffers_and_a_known_mode():
    assert plan(gpudirect="on").gpudirect == "on"
    with pytest.raises(UsageError, match="needs --device cuda"):
        plan(primitive="mpi", device="cpu", gpudirect="off")
    with pytest.raises(UsageError, match="--gpudirect takes"):
        plan(gpudirect="maybe")
    assert Plan.read(plan(gpudirect="off").to_json()).gpudirect == "off"


REPORTED_ON = [(0, "n1", "on"), (1, "n2", "on")]


@pytest.mark.parametrize("requested,verify,reported,obtained,problem", [
    ("on", "report", REPORTED_ON, "on", None),
    ("off", "report", [(0, "n1", "off"), (1, "n2", "off")], "off", None),
    ("on", "report", [(0, "n1", "on"), (1, "n2", "off")], "partial",
     "GPUDirect RDMA on but rank 1 on n2 got GPUDirect RDMA off"),
    ("off", "report", REPORTED_ON, "on", "RDMA off but rank 0 on n1 got GPUDirect RDMA on"),
    ("on", "report", [(0, "n1", "partial")], "partial", "rank 0 on n1 got GPUDirect RDMA partial"),
    ("on", "report", [(0, "n1", None)], None, "rank 0 on n1 got no network connection"),
    ("off", "report", [(0, "n1", None)], None, None),
    # a library that does not report: enforced by its settings, or not known
    ("on", "library", [(0, "n1", None)], "on", None),
    ("on", "none", [(0, "n1", None)], None, None),
    # auto: whatever the library did, recorded
    ("auto", "report", [(0, "n1", "on"), (1, "n2", "off")], "partial", None),
    ("auto", "library", [(0, "n1", None)], None, None),
    # a report wins even where the profile has no gpudirect table (verify none)
    ("off", "none", REPORTED_ON, "on", "RDMA off but rank 0 on n1 got GPUDirect RDMA on"),
])
def test_verdict(requested, verify, reported, obtained, problem):
    record, found = outcome(requested, verify, reported, "nccl")
    assert record["requested"] == requested and record["obtained"] == obtained
    assert record["verify"] == verify and record["evidence"]
    if problem is None:
        assert found is None
    else:
        assert problem in found and f"--gpudirect {requested}" in found
