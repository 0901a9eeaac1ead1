"""The collectives' groups in a study's report (the workload's ``study_groups``): a study's
cells of one workload and node count grouped per operation, at the largest size (and dtype)
every cell measured; each cell's row is that point's time over its samples, its bus bandwidth
and that bandwidth's share of the cell's link."""

from __future__ import annotations

from collections.abc import Sequence

from fabbench.results.link import LinkRate, MeasuredCeiling, link_of
from fabbench.units import format_size
from fabbench.workload_spec import StudyCellRecords, StudyGroup, StudyRow
from fabbench.workloads.collectives.record import Collective

__all__ = ["share_pct", "study_groups"]


def share_pct(link: LinkRate | MeasuredCeiling | None, rec: Collective) -> float | None:
    """busbw as a percentage of the link (or the ceiling): None unknown, or a world of one
    rank, which has no busbw (ONE_RANK)."""
    if link is None or rec.ranks == 1:
        return None
    return 100 * link.efficiency(rec.busbw_gbyte_s)


def study_groups(cells: Sequence[StudyCellRecords[Collective]]) -> list[StudyGroup]:
    """Per op (by name): the point at the largest size every cell measured; an op with no size
    every cell measured has no group."""
    groups = []
    for op in sorted({r.op for c in cells for r in c.records}):
        points = {c.id: {(r.bytes, r.dtype): r for r in c.records if r.op == op} for c in cells}
        common = set.intersection(*(set(p) for p in points.values()))
        if not common:
            continue
        size, dtype = max(common)
        rows = {}
        for c in cells:
            r = points[c.id][(size, dtype)]
            rows[c.id] = StudyRow(median=r.time_us.p50, samples=list(r.samples_us or []),
                                  throughput=r.busbw_gbyte_s,
                                  link_pct=share_pct(link_of(c.run) if c.run else None, r),
                                  transport=r.transport)
        groups.append(StudyGroup(what=f"{op} {format_size(size)}", rows=rows))
    return groups
