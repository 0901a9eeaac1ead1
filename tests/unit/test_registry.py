"""The primitive registry: one entry per primitive, refusing duplicates; what the rest of
fabbench decides by a primitive (plan, launcher, render, train engine) reads from it."""

from __future__ import annotations

import pytest

from fabbench.comm import registry
from fabbench.comm.registry import Primitive, Registry
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.plan import Plan
from fabbench.render import Benchmark
from fabbench.render.build import benchmark


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
    ({"launchers": {"x": "ssh"}}, "launchers"), ({"train_engine": "zero"}, "train engine"),
    ({"communicator": "nocolon"}, "module:Class")])
def test_entries_are_validated(bad, message):
    with pytest.raises(UsageError, match=message):
        entry("x", **bad)


def test_horovod_follows_its_controller():
    hvd = registry.get("horovod")
    assert hvd.controllers == ("mpi", "gloo") and registry.HOROVOD_OVER == ("mpi", "gloo")
    assert (hvd.backend(), hvd.launcher(), hvd.render_family()) == ("mpi", "mpirun", "mpi")
    assert (hvd.backend("gloo"), hvd.launcher("gloo")) == ("gloo", "horovodrun")
    assert hvd.render_family("gloo") is None
    assert registry.get("nccl").render_family() == "rendezvous"


def test_plan_render_and_train_read_the_registry():
    plan = Plan(fabric="ethernet", primitive="horovod", horovod_over="gloo", ops=("allreduce",),
                sizes=(8,), out="-", run_id="r")
    assert (plan.backend, plan.launcher) == ("gloo", "horovodrun")
    bench = benchmark(fabric="ethernet", primitive="horovod", gpus_per_node=0)
    assert (bench.backend, bench.launch) == ("mpi", "mpi")
    assert bench.run_args()[5:7] == ["--horovod-over", "mpi"]
    with pytest.raises(UsageError, match="over mpi only"):
        Benchmark(config=RunConfig(fabric="ethernet", primitive="horovod", horovod_over="gloo",
                                   device="cpu"))
    assert {p: registry.get(p).train_engine for p in registry.PRIMITIVES} == {
        "mpi": "mpi", "gloo": "ddp", "nccl": "ddp", "horovod": "horovod"}


def test_one_default_primitive_rule():
    assert registry.default_primitive(True) == ("nccl", "GPUs visible")
    assert registry.default_primitive(False) == ("mpi", "no GPU visible")
