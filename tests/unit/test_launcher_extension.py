"""A launcher added through the public extension point alone (``launch.launchers.register``):
one class, in this file, and nothing else of fabbench edited. fabbench then places a rank it
started (discover, world), builds its argv for a local run and a Slurm step (launch.schedulers),
and asks it the doctor's question; a second launcher of its name is refused, and it is gone after
the test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from fabbench.errors import UsageError
from fabbench.launch import launchers, schedulers
from fabbench.launch.discover import discover
from fabbench.launch.launchers import Launcher, LaunchSpec, RankVars, Ready, Where, register
from fabbench.launch.launchers.srun import Srun
from fabbench.launch.schedulers import Place
from fabbench.launch.settings import resolve
from fabbench.launch.world import node_name
from fabbench.plan import Plan
from fabbench.workloads.collectives import Sweep

PROGRAM = ["prog", "--flag"]


@pytest.fixture
def toyrun():
    with launchers.REGISTRY.scoped():

        @register
        class Toyrun(Launcher):
            """A launcher that sets TOY_* in its ranks and meets them at TOY_ADDR."""

            name = "toyrun"
            rank_vars = RankVars("TOY_RANK", "TOY_SIZE", "TOY_LOCAL_RANK")
            node_name_var = "TOY_NODE"
            render_family = "rendezvous"

            def local(self, plan: Plan, resolved, where: Where, program: Sequence[str],
                      payload: Mapping[str, str]) -> LaunchSpec:
                return LaunchSpec([["toyrun", "-n", str(plan.ranks), *program]],
                                  [{**resolved.env(), **payload}])

            def slurm(self, nodes: int, per_node: int) -> list[str]:
                return Srun.step(nodes, per_node)

            def rendezvous(self, addr: str, port: int) -> dict[str, str]:
                return {"TOY_ADDR": f"{addr}:{port}"}

            def ready(self, run) -> Ready:
                out = run(["toyrun", "--version"])
                return Ready(out is not None and out[0] == 0, "toyrun starts local ranks")

        yield Toyrun
    assert "toyrun" not in launchers.REGISTRY


def test_a_rank_it_started_is_placed(toyrun):
    env = {"TOY_RANK": "1", "TOY_SIZE": "2", "TOY_LOCAL_RANK": "1", "TOY_NODE": "n7"}
    me = discover(env)
    assert (me.rank, me.size, me.local_rank, me.origin) == (1, 2, 1, "toyrun")
    assert me.announced == "TOY_RANK=1, TOY_SIZE=2 (toyrun)"
    assert node_name(me, env) == "n7"
    with pytest.raises(UsageError, match="TOY_RANK=0 says toyrun started this process"):
        discover({"TOY_RANK": "0"})


def test_its_argv_here_and_in_slurm_and_its_doctor_check(toyrun):
    plan = Plan(fabric="ethernet", primitive="gloo", workload="collectives",
                collectives=Sweep(ops=("allreduce",), sizes=(8,)), out="r.jsonl", run_id="r",
                ranks=3)
    spec = launchers.get("toyrun").local(plan, resolve(plan), Where(), PROGRAM, {"A": "1"})
    assert spec.commands == [["toyrun", "-n", "3", *PROGRAM]] and spec.env[0]["A"] == "1"
    assert launchers.schedulable("toyrun")
    argv, env = schedulers.get("slurm").launch(
        Place(scheduler="slurm", nodes=2, master_addr="n1"), launchers.get("toyrun"), nodes=2,
        per_node=4, program=PROGRAM, port=20011, forward={})
    assert argv == ["srun", "--kill-on-bad-exit=1", "--nodes=2", "--ntasks-per-node=4",
                    *PROGRAM]
    assert env == {"TOY_ADDR": "n1:20011"}
    assert launchers.get("toyrun").ready(lambda argv: (0, "toyrun 1.0")).ok
    assert not launchers.get("toyrun").ready(lambda argv: None).ok


def test_a_second_launcher_of_its_name_is_refused(toyrun):
    with pytest.raises(UsageError, match="launcher 'toyrun' is registered twice"):
        register(type("Again", (Launcher,), {"name": "toyrun"}))
