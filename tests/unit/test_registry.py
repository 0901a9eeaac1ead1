"""The primitive registry: one entry per primitive, refusing duplicates; what the rest of
fabbench decides by a primitive (plan, launcher, render, train engine) reads from it."""

from __future__ import annotations

import pytest

from fabbench.comm import primitives
from fabbench.comm.primitives import Primitive, Registry
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.plan import Plan
from fabbench.render import Benchmark
from fabbench.render.context import render_family
from fabbench.render.from_options import benchmark
from fabbench.workloads.collectives import Sweep


def entry(name: str, **kw) -> Primitive:
    return Primitive(**{"name": name, "ops": ("allreduce",), "dtypes": ("float32",),
                        "communicator": "m:C", "launchers": {name: "spawn"},
                        "train_engine": "ddp", **kw})


def test_a_name_is_registered_once_and_a_controller_before_its_user():
    reg = Registry()
    reg.add(entry("a"))
    with pytest.raises(UsageError, match="registered twice"):
        reg.add(entry("a"))
    with pytest.raises(UsageError, match="runs over 'zz'"):
        reg.add(entry("b", launchers={"zz": "mpirun"}))
    with pytest.raises(UsageError, match="unknown primitive 'q'"):
        reg.get("q")


@pytest.mark.parametrize("bad,message", [
    ({"ops": ("scan",)}, "unknown operation"), ({"dtypes": ("int8",)}, "unknown dtype"),
    ({"launchers": {}}, "launchers"), ({"train_engine": "zero"}, "train engine"),
    ({"communicator": "nocolon"}, "module:Class")])
def test_entries_are_validated(bad, message):
    with pytest.raises(UsageError, match=message):
        entry("x", **bad)


def test_horovod_follows_its_controller():
    hvd = primitives.get("horovod")
    assert hvd.controllers == ("mpi", "gloo") and primitives.HOROVOD_OVER == ("mpi", "gloo")
    assert (hvd.backend(), hvd.launcher(), render_family(hvd)) == ("mpi", "mpirun", "mpi")
    assert (hvd.backend("gloo"), hvd.launcher("gloo")) == ("gloo", "horovodrun")
    assert render_family(hvd, "gloo") is None
    assert render_family(primitives.get("nccl")) == "rendezvous"


def test_plan_render_and_train_read_the_registry():
    plan = Plan(fabric="ethernet", primitive="horovod", horovod_over="gloo",
                workload="collectives", collectives=Sweep(ops=("allreduce",), sizes=(8,)),
                out="-", run_id="r")
    assert (plan.backend, plan.launcher) == ("gloo", "horovodrun")
    bench = benchmark(fabric="ethernet", primitive="horovod", gpus_per_node=0)
    assert (bench.backend, bench.launch) == ("mpi", "mpi")
    assert bench.run_args()[5:7] == ["--horovod-over", "mpi"]
    with pytest.raises(UsageError, match="over mpi only"):
        Benchmark(config=RunConfig(fabric="ethernet", primitive="horovod", horovod_over="gloo",
                                   device="cpu"))
    assert {p: primitives.get(p).train_engine for p in primitives.PRIMITIVES} == {
        "mpi": "mpi", "gloo": "ddp", "nccl": "ddp", "horovod": "horovod"}


def test_one_default_primitive_rule():
    assert primitives.default_primitive(True) == ("nccl", "GPUs visible")
    assert primitives.default_primitive(False) == ("mpi", "no GPU visible")


def test_gloo_sends_point_to_point_from_host_memory_only():
    # found on an H100 by the GPU kit: torch's Gloo pair wrote a CUDA tensor's device pointer
    # ("writev [127.0.0.1]:24788: Bad address") and the ranks died
    gloo = primitives.get("gloo")
    assert "sendrecv" in gloo.ops_on("cpu") and "sendrecv" not in gloo.ops_on("cuda")
    assert gloo.point_to_point_on("cpu") and not gloo.point_to_point_on("cuda")
    assert primitives.get("nccl").point_to_point_on("cuda")
    assert not primitives.get("nccl").point_to_point_on("cpu")  # GPU buffers only
    with pytest.raises(UsageError, match="gloo cannot sendrecv cuda buffers .* use --device cpu"):
        Plan(fabric="ethernet", primitive="gloo", device="cuda", workload="collectives",
             collectives=Sweep(ops=("sendrecv",), sizes=(8,)), out="-", run_id="r")
    with pytest.raises(UsageError, match="which gloo does not have on cuda buffers: use "
                                         "--primitive mpi or nccl"):
        Plan(fabric="ethernet", primitive="gloo", device="cuda", workload="pairs",
             collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="-", run_id="r")
    with pytest.raises(UsageError, match="host_only_ops must be among its ops"):
        Primitive(name="x", ops=("allreduce",), dtypes=("float32",), communicator="m:C",
                  launchers={"x": "spawn"}, train_engine="ddp", host_only_ops=("sendrecv",))


def test_a_gpu_run_leaves_out_by_default_what_the_primitive_cannot_do_there():
    from fabbench.workloads.collectives import CollectivesConfig

    plan = Plan.of(RunConfig(primitive="gloo", device="cuda",
                             collectives=CollectivesConfig()), fabric="ethernet",
                   primitive="gloo", device="cuda", ranks=2, iface=None, out="-", run_id="r")
    assert "sendrecv" not in plan.collectives.ops and "allreduce" in plan.collectives.ops
