"""The acceptance floors' figures of the pairs, node by node: each node's median over its pairs
(bandwidth at the largest size, latency at the smallest), with its figure with each other node
and, in the evidence, the slowest of its pairs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fabbench.workload_spec import FloorFigures
from fabbench.workloads.pairs.record import Pairs

__all__ = ["EVIDENCE", "floor_figures"]


def floor_figures(records: Sequence[Pairs]) -> Iterator[FloorFigures]:
    """Per node: the median of its pairs' p50 bandwidth at the largest size (and latency at
    the smallest), with each pair's figure in the evidence (the slowest EVIDENCE of them where
    a node has more)."""
    if not records:
        return
    from fabbench.workloads.pairs import frame  # numpy: with pairs records only

    f = frame.frame(records)  # a rechecked pair by its better figure
    assert f is not None
    big = f.sizes[-1]
    bw = _ends(f.big)
    lat = _ends(f.small) if f.small is not None else {}
    host = {u: h for u, (h, _) in f.where.items()}
    for unit, (others, figures) in bw.items():
        metrics = {"bw": frame.median(figures)}
        if unit in lat:
            metrics["time"] = frame.median(lat[unit][1])
        peers = _Peers(host, others, figures)
        yield FloorFigures(op="sendrecv", bytes=big, dtype=f.dtype,
                           transport=", ".join(f.transports[unit]), node=f.where[unit][0],
                           metrics=metrics, peers=peers,
                           evidence=f"median of {len(figures)} pairs at {big} B "
                                    f"(GB/s: {peers.listed()})")


# a node's evidence lists this many of its pairs at most (the slowest), not a 4,096-node
# check's 4,095
EVIDENCE = 32


def _ends(rows: Any) -> dict[int, tuple[Any, Any]]:
    """Per unit (in order): the other end and the figure of each of its records, as records
    list them (each record counts for both its ends)."""
    import numpy as np

    from fabbench.workloads.pairs.frame import by_unit

    found = by_unit(np.concatenate([rows.a, rows.b]), np.concatenate([rows.b, rows.a]),
                    np.concatenate([rows.v, rows.v]))
    return {u: (others, values) for u, (others, values) in found.items()}


class _Peers(Mapping[str, float]):
    """A node's figure with each other node (by host; a later record's figure wins), made into
    a dict only when read (the judge reads a failed node's)."""

    def __init__(self, host: Mapping[int, str], others: Any, figures: Any):
        self._host, self._others, self._figures = host, others, figures
        self._made: dict[str, float] | None = None

    def _dict(self) -> dict[str, float]:
        if self._made is None:
            self._made = dict(self._pairs(slice(None)))
        return self._made

    def _pairs(self, which: Any) -> list[tuple[str, float]]:
        """(host, figure) of the pairs ``which`` selects, in their order."""
        host = self._host
        return [(host[o], v) for o, v in zip(self._others[which].tolist(),
                                             self._figures[which].tolist(), strict=True)]

    def __getitem__(self, host: str) -> float:
        return self._dict()[host]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def listed(self) -> str:
        """Each pair's host and figure, by host; the slowest EVIDENCE where there are more
        (of equal figures, the first in pair order)."""
        figures = self._figures
        if len(figures) <= EVIDENCE:
            return ", ".join(f"{host} {v:.3g}" for host, v in sorted(self._pairs(slice(None))))
        import numpy as np

        # the EVIDENCE-th smallest, in linear time: every pair below it and the first of
        # those equal to it, as a stable sort's first EVIDENCE would take
        cut = np.partition(figures, EVIDENCE - 1)[EVIDENCE - 1]
        below = np.flatnonzero(figures < cut)
        at = np.flatnonzero(figures == cut)[:EVIDENCE - len(below)]
        slowest = sorted(self._pairs(np.concatenate([below, at])))
        return (f"the slowest {EVIDENCE} of {len(figures)}: "
                + ", ".join(f"{host} {v:.3g}" for host, v in slowest))
