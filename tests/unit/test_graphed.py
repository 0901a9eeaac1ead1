"""comm.torchdist.Graphed without a GPU: a stand-in for torch's CUDA graph API records what is
captured and replayed."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

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


def test_a_graph_cycles_through_the_slots_and_is_captured_once_per_batch():
    log: list = []
    torch = _torch(log)

    def call(slot: int):
        def run() -> None:
            if torch.capturing:
                torch.capturing[-1].captured.append(slot)
            else:
                log.append(("eager", slot))
        return run

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


def test_a_capture_that_fails_fails_the_run_in_torchs_words():
    g = Graphed(_torch([], fail="operation not permitted when stream is capturing"),
                "sendrecv", [lambda: None])
    with pytest.raises(RunError, match="capturing sendrecv in a CUDA graph failed: operation "
                       "not permitted when stream is capturing [(]--cuda-graph off"):
        g.ready(3)
