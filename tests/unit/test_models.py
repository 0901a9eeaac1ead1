"""Models: parameter counts equal the published ones, a forward/backward runs on CPU, and the
train/halo options are validated once, in the Plan."""

from __future__ import annotations

import pytest
import torch

from fabbench.errors import UsageError
from fabbench.networks import MODELS, build, get, parameter_count
from fabbench.networks.models import ModelSpec
from fabbench.plan import Plan
from fabbench.workloads.collectives import Sweep
from fabbench.workloads.halo.section import HaloConfig
from fabbench.workloads.train import TrainConfig


@pytest.mark.parametrize("name,count", [("resnet50", 25_557_032), ("resnet101", 44_549_160),
                                        ("vgg16", 138_357_544), ("gpt-small", 124_439_808)])
def test_parameter_counts_equal_the_references(name, count):
    assert parameter_count(name) == count == MODELS[name].reference_parameters


# one model per family and class: resnet101 is resnet50's ResNet class with more blocks (its
# shape is checked by its parameter count above); its forward/backward costs seconds of CPU more
@pytest.mark.parametrize("name,batch,size", [("resnet50", 2, 32), ("vgg16", 1, 32),
                                             ("gpt-tiny", 2, 16)])
def test_forward_backward_on_cpu(name, batch, size):
    torch.manual_seed(0)
    model = build(name)
    if MODELS[name].family == "image":
        x = torch.randn(batch, 3, size, size)
        out = model(x)
        assert out.shape == (batch, 1000)
    else:
        x = torch.randint(0, MODELS[name].kwargs["vocab"], (batch, size))
        out = model(x)
        assert out.shape == (batch, size, MODELS[name].kwargs["vocab"])
    out.float().pow(2).mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    del model, out, grads


def test_registry_refuses_duplicates_and_unknown_names():
    with pytest.raises(ValueError, match="twice"):
        MODELS.add(ModelSpec(name="resnet50", family="image", builder="x:y"))
    with pytest.raises(UsageError, match="unknown model 'alexnet'"):
        get("alexnet")


def _plan(workload="train", train=None, halo=None, **kw):
    """A plan of ``workload`` whose train and halo sections have the fields given."""
    return Plan(fabric="ethernet", primitive="gloo",
                collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="x", run_id="r",
                workload=workload, train=TrainConfig(**train or {}),
                halo=HaloConfig(**halo or {}), **kw)


@pytest.mark.parametrize("kw,needle", [
    ({"train": {"model": "alexnet"}}, "unknown model 'alexnet'"),
    ({"train": {"batch_size": 0}}, "batch size must be at least 1"),
    ({"train": {"image_size": 100}}, "multiple of 32"),
    ({"train": {"image_size": 16}}, "too small"),
    ({"train": {"model": "gpt-tiny", "image_size": 512}}, "context"),
    ({"train": {"batch_size": 1, "image_size": 32}}, "batch norm"),
    ({"train": {"steps": 1}}, "steps"),
    ({"train": {"precision": "fp8"}}, "unknown precision"),
    ({"train": {"precision": "fp16"}}, "--device cuda"),
    ({"train": {"fusion_mb": 8.0}}, "--primitive horovod"),
    ({"workload": "halo", "halo": {"cells_per_rank": 1}}, "cells per rank"),
    ({"workload": "mining"}, "unknown workload"),
])
def test_bad_train_options_are_usage_errors(kw, needle):
    with pytest.raises(UsageError, match=needle):
        _plan(**kw)


def test_plan_round_trips_with_train_fields():
    plan = _plan(train={"model": "gpt-tiny", "batch_size": 2, "image_size": 32,
                        "scaling": (1, 2)})
    assert Plan.read(plan.to_json()) == plan
    assert plan.train.input_size == 32 and _plan().train.input_size == 224


def test_bucket_plan_and_process_grid():
    from fabbench.workloads.halo.grid import bytes_per_iter, process_grid
    from fabbench.workloads.train.buckets import bucket_plan

    assert bucket_plan([4, 4, 4, 4], 8) == [8, 8]
    assert bucket_plan([10, 1, 1], 4, first_cap_bytes=1) == [1, 1, 10]
    assert process_grid(2) == (2, 1, 1) and process_grid(8) == (2, 2, 2)
    assert process_grid(12) == (3, 2, 2)
    assert bytes_per_iter(4, (2, 1, 1)) == 2 * 36 * 8 and bytes_per_iter(4, (1, 1, 1)) == 0
