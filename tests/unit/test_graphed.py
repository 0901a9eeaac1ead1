"""comm.torchdist.Graphed without a GPU: a stand-in for torch's CUDA graph API records what is
captured and replayed."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from fabbench.comm.base import GRAPH_OPS
from fabbench.comm.torchdist import Graphed
from fabbench.errors import RunError


class _Graph:
    def __init__(self, log: list) -> None:
        self.log, self.captured = log, []

    def replay(self) -> None:
        self.log.append(("replay", tuple(self.captured)))


def _torch(log: list, fail: str | None = None) -> SimpleNamespace:
    capturing: list[_Graph] = []

    @contextlib.contextmanager
    def graph(g: _Graph):
        capturing.append(g)
        try:
            if fail:
                raise RuntimeError(f"{fail}\nmore lines")
            yield
        finally:
            capturing.pop()

    def make() -> _Graph:
        return _Graph(log)

    torch = SimpleNamespace(cuda=SimpleNamespace(CUDAGraph=make, graph=graph))
    torch.capturing = capturing
    return torch


def _recording(torch, log: list):
    def call(slot: int):
        def run() -> None:
            if torch.capturing:
                torch.capturing[-1].captured.append(slot)
            else:
                log.append(("eager", slot))
        return run
    return call


def test_a_graph_cycles_through_the_slots_and_is_captured_once_per_batch():
    log: list = []
    torch = _torch(log)
    call = _recording(torch, log)
    g = Graphed(torch, "allgather", [call(0), call(1), call(2)])
    g()
    g.ready(4)
    g.batch(4)
    g.ready(4)  # captured already: nothing new
    g.batch(4)
    assert log == [("eager", 0), ("replay", (0, 1, 2, 0)), ("replay", (0, 1, 2, 0))]
    g.ready(2)
    g.ready(5)  # the warm-up's and the samples' graphs are kept, no more
    assert len(g._graphs) == 2 and set(g._graphs) == {2, 5}


def test_a_batch_beyond_a_graph_replays_full_graphs_then_the_rest():
    """As nccl-tests -n 100 -G k: a graph of GRAPH_OPS operations replayed, each starting at the
    first slot; the batch's rest in a graph of its own; the full graph is kept throughout."""
    log: list = []
    torch = _torch(log)
    g = Graphed(torch, "allgather", [_recording(torch, log)(s) for s in range(3)])
    n = 2 * GRAPH_OPS + 7
    g.ready(n)
    g.batch(n)
    full = tuple(i % 3 for i in range(GRAPH_OPS))
    assert log == [("replay", full), ("replay", full), ("replay", (0, 1, 2, 0, 1, 2, 0))]
    log.clear()
    g.ready(GRAPH_OPS)
    g.batch(GRAPH_OPS)
    assert log == [("replay", full)]
    for k in (GRAPH_OPS + 1, GRAPH_OPS + 2, 3 * GRAPH_OPS + 3):
        g.ready(k)
    assert list(g._graphs) == [GRAPH_OPS, 2, 3]


def test_a_capture_that_fails_fails_the_run_in_torchs_words():
    g = Graphed(_torch([], fail="operation not permitted when stream is capturing"),
                "sendrecv", [lambda: None])
    with pytest.raises(RunError, match="capturing sendrecv in a CUDA graph failed: operation "
                       "not permitted when stream is capturing [(]--cuda-graph off"):
        g.ready(3)


def test_slots_are_what_the_sweeps_largest_message_holds_at_most_a_graphs_operations():
    from fabbench.plan import Plan
    from fabbench.workloads.collectives import Sweep
    from fabbench.workloads.collectives.run import slots

    plan = Plan(fabric="ethernet", primitive="nccl", device="cuda", workload="collectives",
                collectives=Sweep(ops=("allgather",), sizes=(8, 32768, 1 << 26)), out="-",
                run_id="t")
    assert [slots(plan, n) for n in (8, 1 << 20, 1 << 21, 1 << 26)] == [GRAPH_OPS, 64, 32, 1]


def test_under_a_graph_nccls_graph_mixing_is_off_unless_set_and_recorded_as_it_ran():
    from fabbench.comm.base import GRAPH_MIXING_ENV, graph_environment, graph_timing

    env: dict[str, str] = {}
    graph_environment(False, env)
    assert env == {} and graph_timing(False, {GRAPH_MIXING_ENV: "0"}) == {}
    graph_environment(True, env)
    assert env == {GRAPH_MIXING_ENV: "0"}
    assert graph_timing(True, env) == {"graph_ops": GRAPH_OPS, "nccl_graph_mixing": "0"}
    mine = {GRAPH_MIXING_ENV: "1"}  # the user's (or the profile's) value stays
    graph_environment(True, mine)
    assert graph_timing(True, mine)["nccl_graph_mixing"] == "1"
