"""A study cell's row for the train workload's group (the workload's ``study``): its record at
the cell's full rank count, grouped by the network it trained."""

from __future__ import annotations

from collections.abc import Sequence

from fabbench.workload_spec import StudyRow
from fabbench.workloads.train.record import Train

__all__ = ["largest", "study_row"]


def largest(records: Sequence[Train]) -> Train | None:
    """The record at the largest rank count (a --scaling file holds one per count)."""
    if not records:
        return None
    return max(records, key=lambda t: t.ranks)


def study_row(records: Sequence[Train]) -> StudyRow | None:
    """The step time of the full-size record over its steps, its samples/s, the share of the
    step its exposed communication took, and its scaling efficiency."""
    rec = largest(records)
    if rec is None:
        return None
    step = rec.step_ms
    share = rec.comm_fraction
    if share is None and step > 0 and rec.compute_ms is not None:
        share = max(0.0, step - rec.compute_ms) / step
    return StudyRow(median=step, samples=list(rec.step_ms_samples or []), what=rec.model,
                    throughput=rec.samples_per_s["p50"], comm_share=share,
                    scaling=rec.scaling_efficiency, transport=rec.transport or "?")
