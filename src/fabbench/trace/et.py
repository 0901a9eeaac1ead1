"""PyTorch's execution traces read as they are into a fabbench trace (fabbench-trace/1).

Per rank: the execution trace JSON ``torch.profiler.ExecutionTraceObserver`` writes (schema
``1.x-chakra.*``, what PARAM's comm replay and Chakra read), optionally the Kineto chrome trace
of the same rank and run (``export_chrome_trace``), joined on the record-function id (the ET
node's ``rf_id`` attribute, Kineto's "Record function id"), and optionally the groups file
`fabbench trace` wrote (rank_hook). Each ``c10d::`` operation becomes a TraceOp (names: OPS
below; bytes: elements x element size of the rank's own buffer, as document.TraceOp counts).

What is measured (Kineto only; an ET alone has no times, and gives gap_us 0 and no dur_us):
``dur_us`` runs from the op's start on the issuing thread to its completion: the later of the
c10d call's end and the end of the backend's own annotation of the work (gloo's worker-thread
``gloo:all_reduce`` ...), so an async op's transfer is counted; with NCCL it is the CPU call
only (the GPU kernel is not joined: untested). ``gap_us`` runs from the moment the issuing
thread was free of the previous op (an async op's call returned; a blocking op completed) or
the step's start, to this op's start: compute, plus any wait on earlier async ops the trace
does not show (gloo's Work.wait has no annotation). A step's ``wall_us`` runs from the end of
the previous step (the trace's start for the first) to the end of its optimizer step (or
ProfilerStep); its ``comm_us`` is the time at least one of its operations was in flight (the
union of their [start, start + dur_us]).

Steps: ``ProfilerStep#N`` annotations when the trace has them (ops outside any are left out);
else each ``Optimizer.step#...`` ends a step (ops after the last one form a last step); else
one step. Process groups: from `fabbench trace`'s annotations; else from ``record_param_comms``
nodes' group names (NCCL; untested here); else every operation is read as on group 0, said in
a warning, and refused where the ranks' sequences of collectives disagree."""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fabbench.errors import UsageError
from fabbench.trace.document import (
    OPS,
    RankTrace,
    Trace,
    TraceGroup,
    TraceOp,
    TraceStep,
    covered,
    merged,
)

#: c10d's operators (torch.ops.c10d) and the operation fabbench replays for each
C10D = {"allreduce_": "allreduce", "allreduce_coalesced_": "allreduce",
        "allgather_": "allgather", "_allgather_base_": "allgather",
        "allgather_into_tensor_coalesced_": "allgather", "allgather_coalesced_": "allgather",
        "reduce_scatter_": "reduce_scatter", "_reduce_scatter_base_": "reduce_scatter",
        "reduce_scatter_tensor_coalesced_": "reduce_scatter", "broadcast_": "broadcast",
        "reduce_": "reduce", "alltoall_": "alltoall", "alltoall_base_": "alltoall",
        "barrier": "barrier", "monitored_barrier_": "barrier", "send": "send", "recv_": "recv"}
#: c10d operators that move no data between ranks
NOT_COMM = ("check_for_nan",)
#: the buffer whose bytes count (document.TraceOp): the output part for reduce_scatter
OUTPUT_COUNTS = ("reduce_scatter",)
DTYPE_OF = {"float": "float32", "double": "float64", "c10::Half": "float16", "half": "float16",
            "c10::BFloat16": "bfloat16", "signed char": "int8", "unsigned char": "uint8",
            "int": "int32", "long int": "int64", "long": "int64", "bool": "bool"}
SCHEMA = re.compile(r"^1\.\d+\.\d+-chakra\.")
#: GROUP_MARK parsed (traces recorded before the call's name was added have none)
GROUP_NAME = re.compile(r"^## fabbench group (-?\d+)(?: (\w+))? ##$")
#: the torch.distributed calls whose point-to-point operations are async
ASYNC_CALLS = ("isend", "irecv", "batch_isend_irecv")
STEP_MARK = re.compile(r"^ProfilerStep#(\d+)$")
WORKER = re.compile(r"^(gloo|nccl|mpi|ucc):")
#: a step: the node it starts after (None: the trace's start), the node that ends it (None:
#: the last operation) and the ids of its operations
_Span = tuple[dict[str, Any] | None, dict[str, Any] | None, set[int]]


@dataclass(frozen=True)
class RankFiles:
    """One rank's files: its execution trace, its Kineto trace (None: no times) and the
    groups file `fabbench trace` wrote (None: a plain execution trace)."""

    et: Path
    kineto: Path | None = None
    groups: Path | None = None


@dataclass(frozen=True)
class Reading:
    """A trace read from execution traces, and what the reader had to assume (one line each)."""

    trace: Trace
    warnings: tuple[str, ...]


def files_in(directory: Path) -> list[RankFiles]:
    """The rank files `fabbench trace` writes in a directory: et-R.json, kineto-R.json and
    groups-R.json for R = 0, 1, ... (each may be gzipped, .json.gz; a missing rank refused)."""
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory of rank files")

    def of(kind: str) -> dict[int, Path]:
        return {int(m.group(1)): p for p in directory.iterdir()
                if (m := re.fullmatch(kind + r"-(\d+)\.json(\.gz)?", p.name))}

    ets, kinetos, groups = of("et"), of("kineto"), of("groups")
    if not ets:
        raise UsageError(f"no execution traces (et-R.json) in {directory}")
    if sorted(ets) != list(range(len(ets))):
        raise UsageError(f"{directory}: execution traces of ranks {sorted(ets)}, not 0 to "
                         f"{len(ets) - 1}")
    return [RankFiles(ets[r], kinetos.get(r), groups.get(r)) for r in sorted(ets)]


def read(files: Sequence[RankFiles], source: Mapping[str, str] | None = None) -> Reading:
    """The trace of these ranks' files (``files[r]`` is rank r's), checked; one line on
    what is wrong (UsageError)."""
    world = len(files)
    ranks = [_Rank.load(f) for f in files]
    recorded = [r.recorded is not None for r in ranks]
    warnings: list[str] = []
    if any(recorded) and not all(recorded):
        raise UsageError("some ranks have fabbench's groups file and some not: give every "
                         "rank's, or none")
    timed = [f.kineto is not None for f in files]
    if any(timed) and not all(timed):
        raise UsageError("some ranks have a Kineto trace and some not: give every rank's, or "
                         "none")
    if all(recorded):
        groups = _recorded_groups(ranks, world)
        how = "recorded by fabbench trace"
    elif any(r.param_groups for r in ranks):
        groups = _param_groups(ranks, world)
        how = "record_param_comms group names"
    else:
        groups = (TraceGroup(id=0, ranks=tuple(range(world)), name="default"),)
        how = "none in the trace: every operation read as on group 0"
        warnings.append(f"{files[0].et}: the execution trace does not say which process group "
                        "each operation used; every operation is read as on group 0 (record "
                        "with `fabbench trace -- COMMAND` to know)")
    rank_traces = tuple(RankTrace(rank=i, steps=r.steps(groups, i, warnings))
                        for i, r in enumerate(ranks))
    _check_sequences(rank_traces, groups)
    facts = {"reader": "fabbench.trace.et", "schema": ranks[0].schema,
             "execution_traces": ", ".join(str(f.et) for f in files),
             "kineto_traces": ", ".join(str(f.kineto) for f in files if f.kineto),
             "timing": "kineto" if all(timed) else "none (execution trace without Kineto)",
             "steps": ranks[0].step_rule, "groups": how}
    trace = Trace(world=world, groups=groups, ranks=rank_traces,
                  source=facts | dict(source or {}))
    return Reading(trace=Trace.of(trace.to_json(), "read"), warnings=tuple(warnings))


def _recorded_groups(ranks: Sequence[_Rank], world: int) -> tuple[TraceGroup, ...]:
    lists = [r.recorded["groups"] for r in ranks if r.recorded]
    if any(g != lists[0] for g in lists):
        raise UsageError("the ranks' groups files disagree on the job's process groups")
    return tuple(TraceGroup(id=i, ranks=tuple(_ranks_of(g, world)), name=str(g.get("name", "")))
                 for i, g in enumerate(lists[0]))


def _ranks_of(group: Any, world: int) -> list[int]:
    ranks = group.get("ranks") if isinstance(group, dict) else None
    if not isinstance(ranks, list) or not all(isinstance(r, int) and 0 <= r < world
                                              for r in ranks):
        raise UsageError(f"a process group of ranks {ranks!r} in a world of {world}")
    return ranks


def _param_groups(ranks: Sequence[_Rank], world: int) -> tuple[TraceGroup, ...]:
    """The groups record_param_comms names (pg_name '0', '1', ...), from the ET's
    ``## process_group:init ##`` node (an empty ranks list: every rank)."""
    configs = ranks[0].pg_configs
    if not configs:
        raise UsageError("record_param_comms nodes name process groups, but the trace has no "
                         "'## process_group:init ##' node listing them")
    groups = [TraceGroup(id=0, ranks=tuple(range(world)), name="default")]
    for name in sorted(configs, key=int):
        if name != "0":
            groups.append(TraceGroup(id=len(groups), ranks=tuple(configs[name] or range(world)),
                                     name=f"pg {name}"))
    return tuple(groups)


def _check_sequences(ranks: Sequence[RankTrace], groups: Sequence[TraceGroup]) -> None:
    """Every member of a group issues the same sequence of collectives on it (else no replay
    can: it would hang); point-to-point operations are matched by their peers, not here."""
    for group in groups:
        sequences = {r: [o.op for s in ranks[r].steps for o in s.ops
                         if o.group == group.id and o.op not in ("send", "recv")]
                     for r in group.ranks}
        first = sequences[group.ranks[0]]
        for rank, seq in sequences.items():
            if seq != first:
                at = next((i for i, (a, b) in enumerate(zip(first, seq, strict=False))
                           if a != b), min(len(first), len(seq)))
                raise UsageError(
                    f"ranks {group.ranks[0]} and {rank} disagree on the collectives of group "
                    f"{group.id} (at operation {at}: {len(first)} and {len(seq)} operations)"
                    + ("; a plain execution trace is read as all on group 0: record the job "
                       "with `fabbench trace -- COMMAND`" if len(groups) == 1 else ""))


class _Rank:
    """One rank's execution trace (and Kineto trace, groups file), parsed."""

    def __init__(self, files: RankFiles, doc: dict[str, Any],
                 kineto: _Kineto | None,
                 recorded: dict[str, Any] | None) -> None:
        self.files, self.recorded = files, recorded
        self.kineto = kineto.by_rf if kineto else None
        self.busy = kineto.busy if kineto else {}
        self.schema = str(doc["schema"])
        self.nodes: dict[int, dict[str, Any]] = {}
        self.attrs: dict[int, dict[str, Any]] = {}
        for node in doc["nodes"]:
            if not (isinstance(node, dict) and isinstance(node.get("id"), int)
                    and isinstance(node.get("name"), str)):
                self._fail("a node without its id or name")
            self.nodes[node["id"]] = node
            attrs = node.get("attrs", [])
            self.attrs[node["id"]] = {str(a.get("name")): a.get("value") for a in attrs
                                      if isinstance(a, dict)}
        self.rf = {i: a.get("rf_id") for i, a in self.attrs.items()}
        self.children: dict[int, list[int]] = {}
        for node in self.nodes.values():
            parent = node.get("ctrl_deps")
            if isinstance(parent, int) and parent != node["id"]:
                self.children.setdefault(parent, []).append(node["id"])
        self.pg_configs: dict[str, list[int]] = {}
        self.param_groups = False
        for node in self.nodes.values():
            if "process_group:init" in node["name"]:
                self.pg_configs = _pg_configs(node)
            elif node["name"] == "record_param_comms":
                self.param_groups = True
        self.step_rule = "one step (no ProfilerStep or Optimizer.step in the trace)"

    @classmethod
    def load(cls, files: RankFiles) -> _Rank:
        doc = _json(files.et, "execution trace")
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str) or \
                not SCHEMA.match(doc["schema"]):
            schema = doc.get("schema") if isinstance(doc, dict) else None
            raise UsageError(f"{files.et}: not a PyTorch execution trace (schema {schema!r}, "
                             "expected 1.x-chakra.*)")
        if not isinstance(doc.get("nodes"), list):
            raise UsageError(f"{files.et}: execution trace without its 'nodes' list")
        if "finish_ts" not in doc:
            raise UsageError(f"{files.et}: execution trace without 'finish_ts': the observer "
                             "did not finish it (truncated?)")
        kineto = _Kineto.load(files.kineto) if files.kineto else None
        recorded = None
        if files.groups:
            recorded = _json(files.groups, "groups file")
            if not isinstance(recorded, dict) or not isinstance(recorded.get("groups"), list):
                raise UsageError(f"{files.groups}: not a fabbench trace groups file")
            if recorded.get("stopped"):
                raise UsageError(f"{files.groups}: {recorded['stopped']}, so fabbench trace "
                                 "stopped recording there: read the job's own traces with "
                                 "`fabbench trace --read`")
        return cls(files, doc, kineto, recorded)

    def _fail(self, what: str) -> NoReturn:
        raise UsageError(f"{self.files.et}: {what}")

    def _ancestors(self, node_id: int) -> list[dict[str, Any]]:
        out, seen = [], set()
        parent = self.nodes[node_id].get("ctrl_deps")
        while isinstance(parent, int) and parent in self.nodes and parent not in seen:
            seen.add(parent)
            out.append(self.nodes[parent])
            parent = self.nodes[parent].get("ctrl_deps")
        return out

    def _subtree(self, node_id: int) -> set[int]:
        """The node and every node under it (by ctrl_deps)."""
        found, todo = set(), [node_id]
        while todo:
            current = todo.pop()
            if current not in found:
                found.add(current)
                todo += self.children.get(current, [])
        return found

    def _order(self, node: dict[str, Any]) -> int:
        rf = self.rf.get(node["id"])
        return rf if isinstance(rf, int) else node["id"]

    def steps(self, groups: Sequence[TraceGroup], rank: int,
              warnings: list[str]) -> tuple[TraceStep, ...]:
        comm = self._comm_nodes()
        ops = [(node, self._op(node, groups, rank, warnings)) for node in comm]
        spans = self._split(comm)
        steps = []
        for start, end, members in spans:
            chosen = [(n, o) for n, o in ops if n["id"] in members]
            steps.append(self._timed(chosen, start, end))
        return tuple(steps)

    def _comm_nodes(self) -> list[dict[str, Any]]:
        """The communication operations, outermost only, in issue order; an unknown one
        refused."""
        found = []
        for node in self.nodes.values():
            name = node["name"]
            if name.startswith("_c10d_functional::"):
                self._fail(f"functional collective {name} (torch.compile, DTensor): not read "
                           "by fabbench yet")
            if not name.startswith("c10d::"):
                continue
            op = name.removeprefix("c10d::")
            if op in NOT_COMM:
                continue
            if op not in C10D:
                self._fail(f"unknown communication operation {name} (fabbench replays: "
                           f"{', '.join(OPS)})")
            if any(a["name"].startswith("c10d::") for a in self._ancestors(node["id"])):
                continue
            found.append(node)
        return sorted(found, key=self._order)

    def _op(self, node: dict[str, Any], groups: Sequence[TraceGroup], rank: int,
            warnings: list[str]) -> TraceOp:
        op = C10D[node["name"].removeprefix("c10d::")]
        args = _arguments(node, self.attrs[node["id"]].get("op_schema"))
        if args is None:
            self._fail(f"{node['name']} (node {node['id']}) without its op_schema")
        where = f"{self.files.et}: {node['name']}"
        tensors = [t for name, (value, kind) in args.items()
                   if ("output" in name.lower()) == (op in OUTPUT_COUNTS) and "Tensor" in kind
                   for t in _tensors(value, kind, where)]
        if op in OUTPUT_COUNTS and not tensors:
            tensors = [t for _, (v, k) in args.items() if "Tensor" in k
                       for t in _tensors(v, k, where)]
        dtype = tensors[0][0] if tensors else "float32"
        size = sum(numel * width for _, numel, width in tensors) if op != "barrier" else 0
        group = self._group(node, groups, rank, warnings)
        peer = None
        for key in ("root_rank", "rootRank", "dstRank", "srcRank", "dst", "src"):
            if key in args and isinstance(args[key][0], int):
                peer = args[key][0]
        if op in ("send", "recv") and peer is not None:
            members = groups[group].ranks
            if not 0 <= peer < len(members):
                self._fail(f"{node['name']} to group rank {peer} of a group of {len(members)}")
            peer = members[peer]
        async_op = any(isinstance(args[k][0], bool) and args[k][0]
                       for k in ("async_op", "asyncOp") if k in args) or \
            self._call(node) in ASYNC_CALLS
        return TraceOp(op=op, group=group, bytes=size, dtype=dtype, peer=peer,
                       async_op=async_op)

    def _call(self, node: dict[str, Any]) -> str:
        """The job's own torch.distributed call that issued the op, as `fabbench trace` marked
        it: the outermost mark (``send`` calls ``isend`` and waits; "": no mark)."""
        marks = [m for a in self._ancestors(node["id"]) if self.recorded is not None
                 and (m := GROUP_NAME.match(a["name"]))]
        return (marks[-1].group(2) or "") if marks else ""

    def _group(self, node: dict[str, Any], groups: Sequence[TraceGroup], rank: int,
               warnings: list[str]) -> int:
        for ancestor in self._ancestors(node["id"]) if self.recorded is not None else []:
            mark = GROUP_NAME.match(ancestor["name"])
            if mark:
                index = int(mark.group(1))
                if not 0 <= index < len(groups):
                    self._fail(f"{node['name']} on a process group fabbench did not see "
                               "created")
                return index
        if self.recorded is not None:
            ddp = self.recorded.get("ddp_groups") or []
            if len(ddp) > 1:
                self._fail(f"{node['name']} issued outside torch.distributed's Python calls, "
                           f"with DDP modules on groups {ddp}: its group cannot be told")
            if ddp:
                return int(ddp[0])
            note = (f"rank {rank}: operations issued outside torch.distributed's Python calls "
                    "(no DDP module) are read as on group 0")
            if note not in warnings:
                warnings.append(note)
            return 0
        for child in map(self.nodes.__getitem__, self.children.get(node["id"], [])):
            if child["name"] == "record_param_comms":
                name = _param_group_name(child)
                if name is not None and name in self.pg_configs:
                    ordered = sorted(self.pg_configs, key=int)
                    return 0 if name == "0" else 1 + [n for n in ordered if n != "0"].index(name)
        return 0

    def _split(self, comm: Sequence[dict[str, Any]]) -> list[_Span]:
        """The steps: (start node or None, end node or None, the comm node ids in it)."""
        marks = [n for n in self.nodes.values() if STEP_MARK.match(n["name"])]
        if marks:
            self.step_rule = "ProfilerStep#N annotations (operations outside them left out)"
            steps: list[_Span] = []
            for mark in sorted(marks, key=self._order):
                inside = {n["id"] for n in comm} & self._subtree(mark["id"])
                steps.append((mark, mark, inside))
            if steps and not steps[-1][2]:
                steps.pop()  # the step the profiler opened after the last one, never run
            return steps
        optimizer = [n for n in self.nodes.values() if n["name"].startswith("Optimizer.step#")
                     and not any(a["name"].startswith("Optimizer.step#")
                                 for a in self._ancestors(n["id"]))]
        if not optimizer:
            return [(None, None, {n["id"] for n in comm})]
        self.step_rule = "each Optimizer.step ends a step (operations after the last: a step)"
        steps = []
        left: list[dict[str, Any]] = list(comm)
        previous: dict[str, Any] | None = None
        for step in sorted(optimizer, key=self._order):
            last = max(self._order(self.nodes[i]) for i in self._subtree(step["id"]))
            inside = {n["id"] for n in left if self._order(n) <= last}
            left = [n for n in left if n["id"] not in inside]
            steps.append((previous, step, inside))
            previous = step
        if left:
            steps.append((previous, None, {n["id"] for n in left}))
        return steps

    def _event(self, node: dict[str, Any] | None) -> dict[str, Any] | None:
        """The Kineto event of an ET node (None: none, or no Kineto trace)."""
        if node is None or self.kineto is None:
            return None
        events = self.kineto.get(self.rf.get(node["id"]) or -1)
        named = [e for e in events or [] if e.get("name") == node["name"]]
        return named[0] if named else None

    def _timed(self, chosen: Sequence[tuple[dict[str, Any], TraceOp]],
               start: dict[str, Any] | None, end: dict[str, Any] | None) -> TraceStep:
        """The step's operations with their times, its wall and communication time."""
        if self.kineto is None:
            return TraceStep(ops=tuple(o for _, o in chosen))
        begin = self._step_start(start)
        finish = self._end(self._event(end)) if end is not None else None
        ops, free = [], begin
        spans: list[tuple[float, float]] = []
        in_flight: list[tuple[float, float]] = []  # earlier async ops: [start, completion]
        busy: Sequence[tuple[float, float]] = []  # the issuing thread's recorded ops
        for node, op in chosen:
            event = self._event(node)
            if event is None:
                self._fail(f"{node['name']} (rf_id {self.rf.get(node['id'])}) is not in "
                           f"{self.files.kineto}: the Kineto trace does not cover it "
                           "(another run's, or another window of the profiler)")
            ts, call_end = float(event["ts"]), self._end(event)
            done = max([call_end] + [self._end(w) for w in self._workers(node)])
            busy = self.busy.get(event.get("tid"), [])
            waited = _idle(free, ts, in_flight, busy)
            ops.append(TraceOp(op=op.op, group=op.group, bytes=op.bytes, dtype=op.dtype,
                               peer=op.peer, async_op=op.async_op,
                               gap_us=round(max(0.0, ts - free - waited), 3),
                               dur_us=round(done - ts, 3)))
            free = call_end if op.async_op else done
            if op.async_op:
                in_flight.append((ts, done))
            spans.append((ts, done))
        tail = 0.0
        if finish is None:
            finish = max((d for _, d in spans), default=begin)
        elif ops:  # the optimizer's compute after the last op, its waits on async ops left out
            tail = max(0.0, finish - free - _idle(free, finish, in_flight, busy))
        return TraceStep(ops=tuple(ops), wall_us=round(max(0.0, finish - begin), 3),
                         comm_us=round(covered(spans), 3), tail_us=round(tail, 3))

    def _step_start(self, start: dict[str, Any] | None) -> float:
        if start is not None and STEP_MARK.match(start["name"]):
            event = self._event(start)
            return float(event["ts"]) if event else 0.0
        if start is not None:
            event = self._event(start)
            if event is not None:
                return self._end(event)
        assert self.kineto is not None
        return min(float(e["ts"]) for events in self.kineto.values() for e in events)

    def _workers(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The backend's annotations of the op's work (gloo's worker thread): record-function
        ids after the op's and before the next op's own."""
        assert self.kineto is not None
        rf = self.rf.get(node["id"])
        if not isinstance(rf, int):
            return []
        found = []
        for later in range(rf + 1, rf + 64):
            events = self.kineto.get(later, [])
            if any(e.get("name", "").startswith("c10d::") for e in events):
                break
            found += [e for e in events if WORKER.match(e.get("name", ""))]
        return found

    @staticmethod
    def _end(event: dict[str, Any] | None) -> float:
        return float(event["ts"]) + float(event.get("dur", 0.0)) if event else 0.0


def _json(path: Path, what: str) -> Any:
    try:
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else \
            path.read_text()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read {what} {path}: {reason}") from None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        cut = isinstance(exc, json.JSONDecodeError) and exc.pos >= len(text.rstrip())
        raise UsageError(f"{what} {path} is " + (
            "truncated (it ends before its JSON does)" if cut else f"not JSON ({exc})")) \
            from None


class _Kineto:
    """A Kineto trace: its events by record-function id, and each thread's busy time (the
    union of its events' spans, sorted)."""

    def __init__(self, by_rf: dict[int, list[dict[str, Any]]],
                 busy: dict[Any, list[tuple[float, float]]]) -> None:
        self.by_rf, self.busy = by_rf, busy

    @classmethod
    def load(cls, path: Path) -> _Kineto:
        doc = _json(path, "Kineto trace")
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise UsageError(f"{path}: not a Kineto chrome trace (no traceEvents list)")
        by_rf: dict[int, list[dict[str, Any]]] = {}
        spans: dict[Any, list[tuple[float, float]]] = {}
        for event in events:
            if not (isinstance(event, dict) and event.get("ph") == "X"
                    and isinstance(event.get("ts"), (int, float))):
                continue
            rf = (event.get("args") or {}).get("Record function id")
            if isinstance(rf, int):
                by_rf.setdefault(rf, []).append(event)
            if event.get("cat") in ("cpu_op", "user_annotation"):
                start = float(event["ts"])
                spans.setdefault(event.get("tid"), []).append(
                    (start, start + float(event.get("dur", 0.0))))
        return cls(by_rf, {tid: merged(s) for tid, s in spans.items()})


def _idle(lo: float, hi: float, in_flight: Sequence[tuple[float, float]],
          busy: Sequence[tuple[float, float]]) -> float:
    """The time in [lo, hi] during which an earlier async op was in flight and the issuing
    thread ran no recorded op: taken as the thread waiting on that op (gloo's Work.wait has
    no annotation of its own), not compute."""
    windows = merged([(max(a, lo), min(b, hi)) for a, b in in_flight if min(b, hi) > max(a, lo)])
    total = 0.0
    for a, b in windows:
        total += b - a
        first = bisect.bisect_left(busy, (a, a)) - 1
        for x, y in busy[max(first, 0):]:
            if x >= b:
                break
            total -= max(0.0, min(b, y) - max(a, x))
    return total


def _pg_configs(node: dict[str, Any]) -> dict[str, list[int]]:
    values = (node.get("inputs") or {}).get("values") or []
    try:
        configs = json.loads(values[0])
        return {str(c["pg_name"]): list(c.get("ranks") or []) for c in configs
                if str(c.get("pg_name", "")).isdecimal()}
    except (IndexError, TypeError, KeyError, json.JSONDecodeError):
        return {}


def _param_group_name(node: dict[str, Any]) -> str | None:
    """The process group's name in a record_param_comms node (its inputs: [..., req,
    (pg_name, pg_desc), ...]; PARAM's reading)."""
    values = (node.get("inputs") or {}).get("values") or []
    for value in values[:4]:
        if isinstance(value, list) and value and isinstance(value[0], str) and \
                value[0].isdecimal():
            return str(value[0])
    return None


def _arguments(node: dict[str, Any], schema: Any) -> dict[str, tuple[Any, str]] | None:
    """The op's arguments by name (from its op_schema): (value, type)."""
    if not isinstance(schema, str) or "(" not in schema:
        return None
    inside = schema[schema.index("(") + 1:schema.rindex(") ->") if ") ->" in schema else None]
    names = [part.split("=")[0].split()[-1] for part in _top_level(inside) if part.strip()]
    inputs = node.get("inputs") or {}
    values, types = inputs.get("values") or [], inputs.get("types") or []
    return {name: (values[i], str(types[i]) if i < len(types) else "")
            for i, name in enumerate(names) if i < len(values)}


def _top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "([" and 1 or (-1 if char in ")]" else 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def _tensors(value: Any, kind: str, where: str) -> list[tuple[str, int, int]]:
    """The tensors in an ET value: (dtype, elements, element size) each. A tensor is
    [id, storage id, offset, elements, element size, device]."""
    match = re.search(r"Tensor\(([^)]*)\)", kind)
    dtype = DTYPE_OF.get(match.group(1), "") if match else ""
    found: list[tuple[str, int, int]] = []

    def walk(v: Any) -> None:
        if isinstance(v, list) and len(v) == 6 and isinstance(v[3], int) and \
                isinstance(v[4], int) and isinstance(v[5], str):
            found.append((dtype, v[3], v[4]))
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    if found and not dtype:
        raise UsageError(f"{where}: a tensor of type {kind!r}: fabbench replays "
                         f"{', '.join(sorted(set(DTYPE_OF.values())))}")
    return found
