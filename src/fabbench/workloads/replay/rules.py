"""The replay's rules against the plan, applied when the plan is made (before any rank starts,
and again by each rank's plan): the trace read and checked (fabbench.trace.document), its world
against the run's ranks, the primitive, and what would hang the replay rather than fail it (a
rank issuing on a group it is not in, the members of a group issuing different sequences on it,
a send without its receive). Each refusal is one line, a UsageError (exit code 2)."""

from __future__ import annotations

import functools
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from fabbench.comm import primitives
from fabbench.errors import UsageError
from fabbench.trace.document import Trace
from fabbench.workloads.replay.section import ReplayConfig

if TYPE_CHECKING:
    from fabbench.plan import Plan

__all__ = ["RENDERED", "check", "read"]

#: the run id of the plan `fabbench render` checks a job's options with (render.context), made
#: before the job places its ranks (it holds ranks=1): the trace is read and checked then, its
#: world against the ranks by the job's own plan, before the job's ranks start
RENDERED = "render"


def read(path: str) -> tuple[Trace, str]:
    """The trace in ``path``, checked, and its file's sha256; read once per file as it is (a
    plan is checked again each time it is made)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror}") from None
    return _read(str(Path(path).resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _read(path: str, mtime_ns: int, size: int) -> tuple[Trace, str]:
    trace, digest = Trace.read_digest(path)
    _consistent(trace, path)
    return trace, digest


def check(plan: Plan) -> None:
    """The plan's replay, refused in one line where it cannot run as the trace says."""
    options: ReplayConfig = plan.replay
    if not options.trace:
        raise UsageError("--workload replay needs --trace PATH (a fabbench-trace/1 file: "
                         "`fabbench trace` records one, docs/replay.md)")
    spec = primitives.get(plan.primitive)
    if spec.torch_backend is None:
        raise UsageError(f"--workload replay rebuilds the trace's process groups with "
                         f"torch.distributed, which {plan.primitive} is not: use --primitive "
                         "gloo or nccl")
    trace, _ = read(options.trace)
    if plan.run_id == RENDERED:
        return
    if trace.world != plan.ranks:
        raise UsageError(f"trace {options.trace} is of {trace.world} ranks and the run has "
                         f"{plan.ranks}: a replay runs rank r's sequence on rank r, so it needs "
                         f"--ranks {trace.world} (a trace is not scaled to another world)")


def _consistent(trace: Trace, where: str) -> None:
    """What Trace.read leaves to the replay: a trace whose ranks would wait on each other
    forever is refused here, not hung on the ranks."""
    def fail(what: str) -> NoReturn:
        raise UsageError(f"trace {where}: {what}")

    counts = {len(r.steps) for r in trace.ranks}
    if len(counts) != 1 or 0 in counts:
        fail("every rank needs the same number of steps, at least one "
             f"(found {', '.join(str(len(r.steps)) for r in trace.ranks)})")
    members = [set(g.ranks) for g in trace.groups]
    for g, group in enumerate(trace.groups):
        if len(members[g]) != len(group.ranks):
            fail(f"group {g} names a rank twice")
    for step in range(counts.pop()):
        per_group: dict[int, dict[int, list[tuple[object, ...]]]] = {}
        sent: Counter[tuple[int, int, int]] = Counter()
        received: Counter[tuple[int, int, int]] = Counter()
        for r in trace.ranks:
            for op in r.steps[step].ops:
                if r.rank not in members[op.group]:
                    fail(f"rank {r.rank} issues {op.op} on group {op.group}, which it is not in")
                if op.op in ("send", "recv"):
                    peer = op.peer if isinstance(op.peer, int) else -1
                    if peer == r.rank or peer not in members[op.group]:
                        fail(f"rank {r.rank}'s {op.op} names peer {op.peer}, "
                             + ("itself" if peer == r.rank else f"not in group {op.group}"))
                    if op.op == "send":
                        sent[(r.rank, peer, op.bytes)] += 1
                    else:
                        received[(peer, r.rank, op.bytes)] += 1
                    continue
                if op.op in ("broadcast", "reduce") and not 0 <= (op.peer or 0) < len(
                        trace.groups[op.group].ranks):
                    fail(f"a {op.op} on group {op.group} names root {op.peer}, which the "
                         "group has not (a root is the group's rank)")
                per_group.setdefault(op.group, {}).setdefault(r.rank, []).append(
                    (op.op, op.bytes, op.dtype, op.peer))
        for g, seqs in per_group.items():
            first = min(seqs)
            absent = members[g] - set(seqs)
            if absent or any(s != seqs[first] for s in seqs.values()):
                other = min(absent) if absent else \
                    next(r for r, s in sorted(seqs.items()) if s != seqs[first])
                fail(f"step {step + 1}: ranks {first} and {other} issue different collectives "
                     f"on group {g} (the replay would hang)")
        if sent != received:
            a, b, n = next(iter((sent - received) + (received - sent)))
            fail(f"step {step + 1}: {a} -> {b} ({n} bytes): a send without its receive, or a "
                 "receive without its send (the replay would hang)")

