"""A Plan holds one run's decided options and nothing of its launch; a RunState beside it holds
what the launch knows (picked, skip, resumed, claimed, the scaling baseline), and both reach a
launched rank through its environment."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fabbench import catalog
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.plan import PLAN_ENV, STATE_ENV, Plan, RunState, rank_env
from fabbench.workloads.collectives import Sweep
from fabbench.workloads.halo.section import HaloConfig
from fabbench.workloads.pairs.section import PairsConfig
from fabbench.workloads.train import TrainConfig

STATE_FIELDS = {"picked", "skip", "resumed", "claimed", "baseline_samples_per_s"}


def _plan() -> Plan:
    return Plan(fabric="ethernet", primitive="gloo", workload="collectives",
                collectives=Sweep(ops=("allreduce",), sizes=(8, 1024)), out="r.jsonl",
                run_id="r", argv=("fabbench", "run"))


def test_a_plan_carries_no_run_time_state():
    assert not STATE_FIELDS & {f.name for f in dataclasses.fields(Plan)}
    assert {f.name for f in dataclasses.fields(RunState)} == STATE_FIELDS


def test_plan_and_state_reach_a_rank_through_its_environment():
    plan = _plan()
    state = RunState(picked=("primitive=mpi (no GPU visible)",), skip=("allreduce/float32/8",),
                     resumed=True, claimed=True, baseline_samples_per_s=12.5)
    env = rank_env(plan, state)
    assert set(env) == {PLAN_ENV, STATE_ENV}
    assert Plan.read(json.loads(env[PLAN_ENV])) == plan
    assert RunState.read(json.loads(env[STATE_ENV])) == state


def test_a_plan_an_older_fabbench_wrote_still_reads():
    """Results files keep the plan of their run (--resume reads it): one written when plans
    carried the run-time state, and a timing knob since removed, read as today's plan."""
    old = json.loads(json.dumps(_plan().to_json()))
    old.update(picked=["fabric=ethernet (detected)"], skip=[], resumed=False, claimed=True,
               baseline_samples_per_s=None)
    old["policy"]["stable_rel"] = 0.05
    assert Plan.read(old) == _plan()


# a train+halo plan as fabbench wrote it into its run records up to e27af91: the train and halo
# options flat beside the common ones
FLAT_PLAN = (
    '{"fabric": "ethernet", "primitive": "gloo", "horovod_over": null, "wire": "native", '
    '"ranks": 2, "workload": "all", "ops": ["allreduce"], "sizes": [8, 1024], "dtypes": '
    '["float32"], "check": false, "device": "cpu", "gpudirect": "auto", "timeout_s": 30.0, '
    '"policy": {"budget_s": 0.1, "min_samples": 5, "max_samples": 200, "samples_target": 20, '
    '"max_batch": 1000, "warmup_s": 0.02, "patience": 3.0, "protocol": "batch"}, "out": '
    '"r.jsonl", "iface": null, "rdma_device": null, "run_id": "r", "argv": ["fabbench", "run"], '
    '"model": "gpt-tiny", "batch_size": 4, "image_size": 64, "steps": 10, "warmup_steps": 2, '
    '"bucket_mb": 5.0, "fusion_mb": null, "precision": "bf16", "scaling": [1, 2], "ceiling": '
    'null, "ceiling_s": 2.0, "pair_schedule": "rounds", "cells_per_rank": 4096, '
    '"halo_iters": 30}')


def test_a_flat_plan_an_older_fabbench_wrote_reads_into_its_sections():
    plan = Plan.read(json.loads(FLAT_PLAN))
    assert plan.train == TrainConfig(model="gpt-tiny", batch_size=4, image_size=64, steps=10,
                                     warmup_steps=2, bucket_mb=5.0, precision="bf16",
                                     scaling=(1, 2))
    assert plan.halo == HaloConfig(cells_per_rank=4096, halo_iters=30)
    # the pairs' schedule, decided, was a field of the plan; it is the pairs section's now
    assert plan.pairs == PairsConfig(pair_schedule="rounds") and "pair_schedule" not in \
        plan.to_json() and plan.to_json()["pairs"] == {"pair_schedule": "rounds"}
    assert (plan.workload, plan.collectives.sizes, plan.argv) == ("all", (8, 1024),
                                                                ("fabbench", "run"))
    assert Plan.read(plan.to_json()) == plan
    # its "no scaling series" was []; today's is None
    no_series = json.loads(FLAT_PLAN) | {"scaling": []}
    assert Plan.read(no_series).train.scaling is None


def test_the_sweep_is_a_section_of_the_plan_and_sits_in_its_json_as_its_fields_did():
    """Plan has no field of the collectives' sweep: it holds their section decided, and its JSON
    (a run record's plan) has the sweep's fields where they were, key for key."""
    assert not {"ops", "sizes", "dtypes", "check", "policy"} & \
        {f.name for f in dataclasses.fields(Plan)}
    plan = Plan.read(json.loads(FLAT_PLAN))
    assert plan.collectives == Sweep(ops=("allreduce",), sizes=(8, 1024))
    sections = ("pair_schedule", "cells_per_rank", "halo_iters", *TrainConfig.__annotations__)
    old = [k for k in json.loads(FLAT_PLAN) if k not in sections]
    assert list(plan.to_json())[:len(old)] == old


def test_a_plan_holds_the_train_and_halo_sections_of_its_configuration():
    c = RunConfig(workload="all", train=TrainConfig(model="gpt-tiny", scaling=(4, 2)),
                  halo=HaloConfig(halo_iters=7))
    decided = {"train": catalog.WORKLOADS["train"].decide(c.train, False)[0]}
    plan = Plan.of(c, fabric="ethernet", primitive="gloo", device="cpu", ranks=2, iface=None,
                   out="r.jsonl", run_id="r", decided=decided)
    # the scaling series as train's spec decides it: the counts sorted, 1 added
    assert plan.train == dataclasses.replace(c.train, scaling=(1, 2, 4)) and plan.halo == c.halo
    assert plan.to_json()["halo"] == {"cells_per_rank": 64**3, "halo_iters": 7}


def _decided(args: list[str], primitive: str, device: str) -> Plan:
    return Plan.of(RunConfig.from_argv(args), fabric="ethernet", primitive=primitive,
                   device=device, ranks=1, iface=None, out="r.jsonl", run_id="r")


def test_cuda_graph_auto_is_on_for_nccl_batches_only():
    assert _decided([], "nccl", "cuda").collectives.policy.cuda_graph
    assert not _decided(["--cuda-graph", "off"], "nccl", "cuda").collectives.policy.cuda_graph
    assert not _decided(["--timing", "osu"], "nccl", "cuda").collectives.policy.cuda_graph
    assert not _decided([], "gloo", "cuda").collectives.policy.cuda_graph
    assert not _decided([], "mpi", "cpu").collectives.policy.cuda_graph
    assert _decided(["--cuda-graph", "on"], "nccl", "cuda").collectives.policy.cuda_graph
    for args, primitive, device in ((["--cuda-graph", "on"], "gloo", "cuda"),
                                    (["--cuda-graph", "on"], "mpi", "cpu"),
                                    (["--cuda-graph", "on", "--timing", "osu"], "nccl", "cuda")):
        with pytest.raises(UsageError, match="--cuda-graph on"):
            _decided(args, primitive, device)
