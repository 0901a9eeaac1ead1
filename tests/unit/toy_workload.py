"""A workload added from outside fabbench, in one file, as docs/architecture.md's "A new
workload" says (a package splits the same parts into workload.py, section.py, record.py and
line.py): barriers timed one by one. Its options section, its record kind with its own schema,
its console line, its rule against the plan, what it decides of its section, its point count,
its floors' figures, its findings and a study metric; registered with ``@register`` and named
by an entry point in the ``fabbench.workloads`` group. tests/unit/test_workload_package.py
installs it beside fabbench and reads what fabbench makes of it;
tests/integration/test_workload_package.py installs it as a package and runs it on real
ranks."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from typing import Any

from fabbench.errors import UsageError
from fabbench.option_fields import INT, TEXT, at_least, option, validate
from fabbench.results.records import Record, kind
from fabbench.workload_base import Workload, register
from fabbench.workload_spec import Findings, FloorFigures, StudyMetric, WorkloadFloors

BARRIERS = ("auto", "plain", "quiet")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyConfig:
    """``--workload toy``: barriers timed one by one."""

    toy_rounds: int = option(3, INT, "--toy-rounds", "Barriers to time.",
                             check=at_least(1, "--toy-rounds"))
    toy_barrier: str = option("auto", TEXT, "--toy-barrier", "plain, quiet (the communicator's "
                              "barrier that does not spin) or auto (quiet on an emulated "
                              "cluster).", choices=BARRIERS)

    def __post_init__(self) -> None:
        validate(self)


@kind("toy", schema={
    "type": "object", "additionalProperties": False,
    "required": ["round", "ranks", "time_us"],
    "properties": {"kind": {}, "run_id": {}, "round": {"type": "integer", "minimum": 0},
                   "ranks": {"type": "integer", "minimum": 1},
                   "time_us": {"type": "number", "minimum": 0}}})
@dataclasses.dataclass(frozen=True, kw_only=True)
class ToyRecord(Record):
    round: int
    ranks: int
    time_us: float


@register
class ToyWorkload(Workload[ToyRecord]):
    """One record per barrier."""

    name = "toy"
    summary = "barriers timed one by one"
    record = "toy"
    section = ToyConfig
    metric = StudyMetric(name="barrier time", unit="µs", value="time_us",
                         throughput="barriers/s", throughput_short="barriers/s")
    floors = WorkloadFloors(metrics=("time",), baseline="time", rule_op=False)

    def run(self, ctx: Any) -> Iterator[ToyRecord]:
        options: ToyConfig = ctx.plan.toy
        wait = ctx.comm.quiet_barrier if options.toy_barrier == "quiet" else ctx.comm.barrier
        for i in range(options.toy_rounds):
            ctx.arm(ctx.plan.timeout_s, "a toy barrier")
            start = time.perf_counter()
            wait()
            yield ToyRecord(run_id=ctx.plan.run_id, round=i, ranks=ctx.comm.size,
                            time_us=(time.perf_counter() - start) * 1e6)

    def header(self, run: Any) -> str:
        return "#   toy round ranks   barrier us"

    def line(self, record: ToyRecord) -> str:
        return f"  toy-round {record.round:>3} {record.ranks:>5} {record.time_us:>12.1f}"

    def check(self, plan: Any) -> None:
        if plan.toy.toy_rounds > plan.ranks * 50:
            raise UsageError(f"--toy-rounds {plan.toy.toy_rounds} is more than 50 per rank")

    def decide(self, section: ToyConfig, emulated: bool) -> tuple[ToyConfig, str | None]:
        if section.toy_barrier != "auto":
            return section, None
        barrier = "quiet" if emulated else "plain"
        return dataclasses.replace(section, toy_barrier=barrier), f"toy_barrier={barrier}"

    def points(self, plan: Any) -> int:
        return int(plan.toy.toy_rounds)

    def floor_points(self, records: Sequence[ToyRecord]) -> Iterator[FloorFigures]:
        """The run's median barrier time."""
        if records:
            times = sorted(r.time_us for r in records)
            yield FloorFigures(metrics={"time": times[len(times) // 2]}, ranks=records[0].ranks,
                               evidence=f"median of {len(times)} barriers")

    def findings(self, records: Sequence[ToyRecord]) -> Findings | None:
        """The slowest barrier, when one took ten times the median."""
        times = sorted(r.time_us for r in records)
        slowest = max(records, key=lambda r: r.time_us, default=None)
        if slowest is None or slowest.time_us < 10 * times[len(times) // 2]:
            return None
        text = f"toy: barrier {slowest.round} took {slowest.time_us:.1f} µs"
        return Findings(heading="toy, the slowest barrier", table=f"{text}\n", text=(text,),
                        json={"round": slowest.round, "time_us": slowest.time_us})
