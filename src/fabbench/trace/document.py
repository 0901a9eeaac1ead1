"""A recorded job's communication, as fabbench replays it: the process groups, and for each rank
its steps, each step the operations the rank issued in order, with the compute time before
each one and what the job's own operation took. Written and read as one JSON document,
``fabbench-trace/1`` (docs/replay.md); PyTorch's execution traces are read into it
(fabbench.trace.et).

A trace that does not hold together (a field missing or of the wrong type, an operation
fabbench has no name for, a group that names a rank outside the world, a rank missing) is
refused in one line naming the file and what is wrong, a UsageError (exit code 2)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn, cast

from fabbench.errors import UsageError

FORMAT = "fabbench-trace/1"
#: the operations a trace may hold, fabbench's names (fabbench.comm.primitives.ALL_OPS, and the
#: point-to-point halves a job issues one at a time)
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall", "reduce", "barrier",
       "send", "recv")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool")
#: the operations that name a root (broadcast, reduce) or a peer (send, recv): ``TraceOp.peer``
ROOTED = ("broadcast", "reduce", "send", "recv")

#: the operations whose whole array S (nccl-tests' size, methods.md) is the group's size times
#: the rank's own buffer (``TraceOp.bytes``); every other operation's S is its buffer
WHOLE = ("allgather", "reduce_scatter")


def whole_bytes(op: str, nbytes: int, group_size: int) -> int:
    """S of an operation of ``nbytes`` (``TraceOp.bytes``) over a group of ``group_size``."""
    return nbytes * group_size if op in WHOLE else nbytes


def merged(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (start, end) spans merged where they overlap or touch, sorted."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def covered(spans: Sequence[tuple[float, float]]) -> float:
    """How long at least one of the (start, end) spans was running: a step's ``comm_us``, the
    time at least one of its operations was in flight (together they count once)."""
    return sum(b - a for a, b in merged(spans))


@dataclass(frozen=True)
class TraceGroup:
    """A process group of the job: its index (0: every rank), its ranks (global ranks, in the
    group's order) and the name the job gave it, if any."""

    id: int
    ranks: tuple[int, ...]
    name: str = ""


@dataclass(frozen=True)
class TraceOp:
    """One operation a rank issued. ``bytes``: the bytes of the rank's own buffer as fabbench's
    collectives count them (the input of allreduce, broadcast, reduce, alltoall and the
    point-to-point halves; each rank's part of allgather's output, reduce_scatter's output
    part); ``peer``: the root (broadcast, reduce, a group rank) or the other rank (send, recv,
    a global rank); ``gap_us``: the compute time on the issuing thread from the end of the rank's
    previous operation (or the step's start) to this one's start; ``dur_us``: how long the job's
    own operation took, issue to completion (None: the trace does not say)."""

    op: str
    group: int
    bytes: int
    dtype: str = "float32"
    peer: int | None = None
    async_op: bool = False
    gap_us: float = 0.0
    dur_us: float | None = None


@dataclass(frozen=True)
class TraceStep:
    """One training step of one rank: its operations in the order the rank issued them, its
    wall time and the communication time the job itself saw in it (None: not recorded), and
    ``tail_us``: the compute on the issuing thread after its last operation to the step's end
    (the optimizer's step, say), less the waits on its asynchronous operations (0: none, or
    not recorded)."""

    ops: tuple[TraceOp, ...]
    wall_us: float | None = None
    comm_us: float | None = None
    tail_us: float = 0.0

    @property
    def compute_us(self) -> float:
        """The step's compute on the issuing thread: its operations' gaps and its tail."""
        return sum(o.gap_us for o in self.ops) + self.tail_us


@dataclass(frozen=True)
class RankTrace:
    rank: int
    steps: tuple[TraceStep, ...]


@dataclass(frozen=True)
class Trace:
    """A job's communication: ``world`` ranks, its ``groups`` (``groups[0]`` every rank), each
    rank's steps (``ranks[r]`` is rank r's), and where it came from (``source``: what recorded
    it, the files, the library versions, free-form strings)."""

    world: int
    groups: tuple[TraceGroup, ...]
    ranks: tuple[RankTrace, ...]
    source: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "world": self.world, "source": dict(self.source),
                "groups": [asdict(g) | {"ranks": list(g.ranks)} for g in self.groups],
                "ranks": [{"rank": r.rank, "steps": [
                    {"ops": [_op_json(o) for o in s.ops], "wall_us": s.wall_us,
                     "comm_us": s.comm_us, "tail_us": s.tail_us} for s in r.steps]}
                    for r in self.ranks]}

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def read(cls, path: str | Path) -> Trace:
        """The trace in ``path`` (fabbench-trace/1), checked; one line on what is wrong."""
        return cls.read_digest(path)[0]

    @classmethod
    def read_digest(cls, path: str | Path) -> tuple[Trace, str]:
        """The trace in ``path``, checked, and the sha256 of the file's bytes, read once."""
        raw = cls.raw(path)
        return cls.parse(raw, str(path)), hashlib.sha256(raw).hexdigest()

    @staticmethod
    def raw(path: str | Path) -> bytes:
        """The bytes of a trace file; one line when it cannot be read."""
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read trace {path}: {exc.strerror}") from None

    @classmethod
    def parse(cls, raw: bytes, where: str) -> Trace:
        """The trace of a file's bytes, checked; one line on what is wrong."""
        try:
            data = json.loads(raw.decode())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"trace {where} is not JSON (truncated?): {exc}") from None
        return cls.of(data, where)

    @classmethod
    def of(cls, data: Any, where: str = "trace") -> Trace:
        """The trace of a parsed fabbench-trace/1 document, checked."""
        r = _Checks(where)
        doc = r.obj(data, "the document")
        if doc.get("format") != FORMAT:
            r.fail(f"format {doc.get('format')!r}, not {FORMAT!r}")
        world = r.integer(doc, "world", 1)
        groups = tuple(TraceGroup(id=r.integer(g, "id", 0), ranks=tuple(
            r.int_in(x, "a group's rank", 0, world - 1) for x in r.items(g, "ranks")),
            name=r.text(g, "name", "")) for g in map(r.obj_in, r.items(doc, "groups")))
        if not groups or set(groups[0].ranks) != set(range(world)):
            r.fail("groups[0] must hold every rank of the world")
        if [g.id for g in groups] != list(range(len(groups))):
            r.fail("the groups' ids must be 0, 1, ... in order")
        ranks = []
        for i, rank in enumerate(map(r.obj_in, r.items(doc, "ranks"))):
            if r.integer(rank, "rank", 0) != i:
                r.fail(f"ranks[{i}] is rank {rank['rank']}: the ranks must come in order")
            steps = tuple(TraceStep(
                ops=tuple(_op(r, o, groups) for o in map(r.obj_in, r.items(s, "ops"))),
                wall_us=r.time(s, "wall_us"), comm_us=r.time(s, "comm_us"),
                tail_us=r.time(s, "tail_us") or 0.0)
                for s in map(r.obj_in, r.items(rank, "steps")))
            ranks.append(RankTrace(rank=i, steps=steps))
        if len(ranks) != world:
            r.fail(f"{len(ranks)} ranks' steps for a world of {world}")
        source = doc.get("source", {})
        if not isinstance(source, dict) or not all(isinstance(v, str) for v in source.values()):
            r.fail("source must be an object of strings")
        return cls(world=world, groups=groups, ranks=tuple(ranks), source=source)


def _op_json(o: TraceOp) -> dict[str, Any]:
    return {k: v for k, v in asdict(o).items() if v is not None or k == "dur_us"}


def _op(r: _Checks, o: Mapping[str, Any], groups: Sequence[TraceGroup]) -> TraceOp:
    name = r.text(o, "op")
    if name not in OPS:
        r.fail(f"unknown operation {name!r} (fabbench replays: {', '.join(OPS)})")
    group = r.int_in(o.get("group"), "an operation's group", 0, len(groups) - 1)
    dtype = r.text(o, "dtype", "float32")
    if dtype not in DTYPES:
        r.fail(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    peer = o.get("peer")
    if name in ROOTED and not isinstance(peer, int):
        r.fail(f"a {name} needs its peer (root or rank)")
    async_op = o.get("async_op", False)
    if not isinstance(async_op, bool):
        r.fail("async_op must be true or false")
    return TraceOp(op=name, group=group, bytes=r.integer(o, "bytes", 0), dtype=dtype,
              peer=peer if name in ROOTED else None, async_op=async_op,
              gap_us=r.time(o, "gap_us") or 0.0, dur_us=r.time(o, "dur_us"))


class _Checks:
    """The checks of one document, each failing in one line that names it."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, what: str) -> NoReturn:
        raise UsageError(f"trace {self.where}: {what}")

    def obj(self, value: Any, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(f"{what} must be a JSON object")
        return cast(dict[str, Any], value)

    def obj_in(self, value: Any) -> dict[str, Any]:
        return self.obj(value, "an entry")

    def items(self, o: Mapping[str, Any], key: str) -> list[Any]:
        value = o.get(key)
        if not isinstance(value, list):
            self.fail(f"{key!r} must be a list")
        return value

    def text(self, o: Mapping[str, Any], key: str, default: str | None = None) -> str:
        value = o.get(key, default)
        if not isinstance(value, str):
            self.fail(f"{key!r} must be a string")
        return value

    def integer(self, o: Mapping[str, Any], key: str, least: int) -> int:
        return self.int_in(o.get(key), repr(key), least)

    def int_in(self, value: Any, what: str, least: int, most: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < least or (
                most is not None and value > most):
            self.fail(f"{what} must be an integer from {least}"
                      + (f" to {most}" if most is not None else "") + f", not {value!r}")
        return value

    def time(self, o: Mapping[str, Any], key: str) -> float | None:
        value = o.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value) or value < 0:
            self.fail(f"{key!r} must be a finite number of microseconds >= 0, not {value!r}")
        return float(value)
