"""A Plan holds one run's decided options and nothing of its launch; a RunState beside it holds
what the launch knows (picked, skip, resumed, claimed, the scaling baseline), and both reach a
launched rank through its environment."""

from __future__ import annotations

import dataclasses
import json

from fabbench.plan import PLAN_ENV, STATE_ENV, Plan, RunState, rank_env

STATE_FIELDS = {"picked", "skip", "resumed", "claimed", "baseline_samples_per_s"}


def _plan() -> Plan:
    return Plan(fabric="ethernet", primitive="gloo", ops=("allreduce",), sizes=(8, 1024),
                out="r.jsonl", run_id="r", argv=("fabbench", "run"))


def test_a_plan_carries_no_run_time_state():
    assert not STATE_FIELDS & {f.name for f in dataclasses.fields(Plan)}
    assert {f.name for f in dataclasses.fields(RunState)} == STATE_FIELDS


def test_plan_and_state_reach_a_rank_through_its_environment():
    plan = _plan()
    state = RunState(picked=("primitive=mpi (no GPU visible)",), skip=("allreduce/float32/8",),
                     resumed=True, claimed=True, baseline_samples_per_s=12.5)
    env = rank_env(plan, state)
    assert set(env) == {PLAN_ENV, STATE_ENV}
    assert Plan.from_json(env[PLAN_ENV]) == plan
    assert RunState.from_json(env[STATE_ENV]) == state


def test_a_plan_an_older_fabbench_wrote_still_reads():
    """Results files keep the plan of their run (--resume reads it): one written when plans
    carried the run-time state, and a timing knob since removed, read as today's plan."""
    old = json.loads(_plan().to_json())
    old.update(picked=["fabric=ethernet (detected)"], skip=[], resumed=False, claimed=True,
               baseline_samples_per_s=None)
    old["policy"]["stable_rel"] = 0.05
    assert Plan.from_json(json.dumps(old)) == _plan()
