"""fabbench.catalog and workloads.interface: the registered workloads and the tables derived
from them, names, the one sequence ("all"), loading by name, refusals."""

from __future__ import annotations

import pytest

from fabbench import catalog as names
from fabbench.errors import UsageError
from fabbench.workload_base import Workload
from fabbench.workload_spec import StudyMetric
from fabbench.workloads import interface
from fabbench.workloads.collectives.workload import CollectivesWorkload
from fabbench.workloads.halo.section import HaloConfig
from fabbench.workloads.halo.workload import HaloWorkload
from fabbench.workloads.pairs.workload import PairsWorkload
from fabbench.workloads.replay.workload import ReplayWorkload
from fabbench.workloads.train.workload import TrainWorkload


def test_names_and_parts():
    assert names.NAMES == ("collectives", "train", "halo", "pairs", "replay", "all")
    assert names.parts("all") == ("collectives", "train")
    assert names.parts("halo") == ("halo",)
    assert names.runs("all", "train") and not names.runs("halo", "train")
    with pytest.raises(UsageError, match="unknown workload 'nope'"):
        names.parts("nope")


def test_load_gives_each_part_in_order():
    loaded = interface.load("all")
    assert [w.name for w in loaded] == ["collectives", "train"]
    for name in ("collectives", "train", "halo", "pairs", "replay"):
        (workload,) = interface.load(name)
        assert workload.name == name
        for method in ("prepare", "run", "header", "line", "wrong"):
            assert callable(getattr(workload, method))


def test_the_registry_imports_no_workload_until_asked():
    import subprocess
    import sys

    code = ("import sys, fabbench.workloads.interface; "
            "print([m for m in ('fabbench.workloads.collectives.run', "
            "'fabbench.workloads.train.run', 'fabbench.workloads.train.engines', "
            "'fabbench.workloads.halo.exchange', 'torch') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


# The tables derived from the registry, against what each module spelled out by hand before
# (issue 33): the refactor that derived them changed no record and no line of output.
def test_the_rank_counts_the_same_kinds_in_the_same_order():
    from fabbench.launch.rank import MEASURED

    assert MEASURED == ("collective", "train", "halo", "ceiling", "pairs", "replay")
    assert names.RECORDS == ("collective", "train", "halo", "pairs", "replay")


def test_the_study_report_tables_are_the_ones_it_had():
    from fabbench.report.study import answer_text, groups, study_html, study_plots

    assert groups.METRIC == {"train": "step time", "halo": "iteration time",
                             "collectives": "time", "replay": "step time"}
    assert groups.UNIT == {"train": "ms", "halo": "µs", "collectives": "µs", "replay": "µs"}
    assert groups.THROUGHPUT == {"train": "samples/s (all ranks)", "halo": "exchange GB/s",
                                 "collectives": "busbw GB/s",
                                 "replay": "bytes per step / step time (GB/s)"}
    assert groups.THROUGHPUT_SHORT == {"train": "samples/s", "halo": "GB/s",
                                       "collectives": "busbw GB/s", "replay": "GB/s"}
    for module in (study_html, study_plots, answer_text):  # no copy of its own left
        assert not {"_UNIT", "_UNITS", "_THROUGH"} & set(vars(module))


def test_a_study_takes_the_same_workload_kinds():
    from fabbench.study.spec import KINDS

    assert KINDS == ("collectives", "train", "halo", "pairs", "replay")
    # every workload one class, the registered instance of its package's workload.py
    assert [type(w) for w in names.WORKLOADS.values()] == [
        CollectivesWorkload, TrainWorkload, HaloWorkload, PairsWorkload, ReplayWorkload]


def test_every_workload_writes_a_known_record_kind():
    from fabbench.results.records import KINDS

    for spec in names.WORKLOADS.values():
        assert spec.record in KINDS, spec.name


def _toy(name: str = "toy", summary: str = "a toy",
         section: type | None = None) -> Workload[object]:
    """A workload class declaring ``name`` (writing "toy" records), made: not registered."""
    declared = {"name": name, "summary": summary, "record": "toy", "section": section}
    return type("Toy", (Workload,), declared)()


def test_the_registry_refuses_a_name_twice_and_a_bad_declaration():
    toy = _toy()
    with pytest.raises(ValueError, match="'toy' registered twice"):
        names._registry(toy, _toy())
    with pytest.raises(ValueError, match="'all' registered twice"):
        names._registry(_toy("all"))
    with pytest.raises(ValueError, match="'toy' and 'other' both write 'toy' records"):
        names._registry(toy, _toy("other"))
    with pytest.raises(ValueError, match="Toy.name must match"):
        _toy("Toy")
    with pytest.raises(ValueError, match="summary must not be empty"):
        _toy(summary=" ")
    with pytest.raises(ValueError, match="section must be a dataclass"):
        _toy(section=dict)
    with pytest.raises(ValueError, match="unit must not be empty"):
        StudyMetric(name="time", unit="", value="t", throughput="GB/s", throughput_short="GB/s")


def test_the_configuration_sections_are_the_specs_sections():
    from fabbench.config import SECTIONS, RunConfig

    assert list(SECTIONS) == ["collectives", "train", "halo", "pairs", "replay"]
    for name, spec in names.WORKLOADS.items():
        assert SECTIONS[name] is spec.section
        assert isinstance(getattr(RunConfig(), name), spec.section)
    with pytest.raises(TypeError, match="no field nope"):
        RunConfig(nope=1)
    with pytest.raises(TypeError, match="train section is a TrainConfig, not HaloConfig"):
        RunConfig(train=HaloConfig())


def test_the_workload_help_names_every_workload_with_its_summary():
    text = names.described()
    for name, spec in names.WORKLOADS.items():
        assert f"{name} ({spec.summary})" in text
    assert text.endswith("or all (collectives then train).")


def test_outside_their_package_only_the_all_sequence_and_the_default_name_the_collectives():
    """Issue 61: the collectives are a package like the others; a module outside it asks the
    registry (or the package's class, CollectivesWorkload.name), never spells the kind, save the
    "all" sequence (catalog.py) and the --workload default (config.py). 17 modules did before."""
    from pathlib import Path

    import fabbench

    src = Path(fabbench.__file__).parent
    package = src / "workloads" / "collectives"
    holding = sorted(p.relative_to(src).as_posix() for p in src.rglob("*.py")
                     if package not in p.parents and '"collectives"' in p.read_text())
    assert holding == ["catalog.py", "config.py"]


def test_the_collectives_resume_skips_the_points_of_its_run_only():
    from fabbench.plan import Plan
    from fabbench.results.records import Record
    from fabbench.workloads.collectives import Collective, Sweep
    from fabbench.workloads.collectives.resume import measured

    def plan(workload: str) -> Plan:
        return Plan(fabric="ethernet", primitive="gloo", workload=workload, out="x",
                    run_id="r", collectives=Sweep(ops=("allreduce",), sizes=(8,)))

    points = [Collective.read({"run_id": run, "op": "allreduce", "dtype": "float32",
                               "bytes": n}) for run, n in (("r", 8), ("old", 16), ("r", 64))]
    other: list[Record] = [Record.read({"run_id": "r"})]
    assert measured(plan("collectives"), [*points, *other]) == (
        "allreduce/float32/8", "allreduce/float32/64")
    with pytest.raises(UsageError, match="--resume continues collectives sweeps only"):
        measured(plan("halo"), points)


def test_the_registry_takes_a_registered_class_and_refuses_anything_else():
    """An entry names a Workload class that its module registered: the registered instance is
    the workload; an unregistered class, or anything else, is an error naming the entry."""
    assert names.admitted(HaloWorkload, "e") is names.WORKLOADS["halo"]

    class Unregistered(Workload[object]):
        name, summary, record = "unregistered", "a toy", "unregistered"

    with pytest.raises(ValueError, match="e names Unregistered, a Workload class that is not "
                                         "registered"):
        names.admitted(Unregistered, "e")
    with pytest.raises(ValueError, match="e names HaloConfig, not a Workload class"):
        names.admitted(HaloConfig(), "e")


def test_a_class_defines_the_hooks_it_overrides():
    hooks = ("check", "study", "study_groups", "floor_points", "points", "findings", "decide")
    defined = {name: [h for h in hooks if w.defines(h)] for name, w in names.WORKLOADS.items()}
    assert defined == {"collectives": ["study_groups", "floor_points"],
                       "train": ["check", "study", "floor_points", "decide"],
                       "halo": ["check", "study", "floor_points"],
                       "pairs": ["check", "floor_points", "points", "findings", "decide"],
                       "replay": ["check", "study", "points", "findings", "decide"]}
    coll, train = names.WORKLOADS["collectives"], names.WORKLOADS["train"]
    assert coll.floors is not None and coll.report_lines is False and coll.series is None
    assert train.report_lines is True and train.series is not None


def test_a_class_is_checked_when_it_is_made():
    class Bad(Workload[object]):
        name, summary, record = "Bad", "a toy", "bad"

    with pytest.raises(ValueError, match="Bad.name must match"):
        Bad()


def _sweep_cell(name: str, points: list[tuple[str, int]]) -> object:
    """A study cell of the collectives on one node with the points (op, bytes) measured."""
    from pathlib import Path

    from fabbench.report.study.cells import StudyCell
    from fabbench.results.records import Run
    from fabbench.results.runs import Series
    from fabbench.study.manifest import CellEntry
    from fabbench.workloads.collectives import Collective

    axes = {"workload": "sweep", "nodes": 1, "fabric": "ethernet", "primitive": name,
            "gpudirect": "auto", "link": None}
    entry = CellEntry(id=name, axes=axes, kind="collectives", options={}, argv=[],
                      file=f"cells/{name}.jsonl", log=None)
    records = [Collective.read({"op": op, "bytes": n, "dtype": "float32", "ranks": 2,
                                "transport": "tcp", "time_us": {"p50": n / 8},
                                "samples_us": [n / 8], "busbw_gbyte_s": 1.0})
               for op, n in points]
    run = Run.read({"fabric": "ethernet", "ranks": 2, "emulation": {  # a 16 Gb/s link
        "interface": "eth0", "links": [{"node": "n0", "speed_gbit_s": 16.0}]}})
    return StudyCell(entry, [Series(path=Path("x"), run=run, collectives=records)],
                     name)


def test_a_workload_s_own_study_groups_replace_its_cell_by_cell_group():
    """The collectives make their groups (study_groups: per operation, at the largest size
    every cell measured) and are not ranked cell by cell besides: the report's groups are the
    class's. Fails where cell_groups also takes a workload with study_groups (a "collectives"
    group of metric rows), or where the report does not ask the class."""
    from fabbench.report.study.groups import all_groups

    gloo = _sweep_cell("gloo", [("allreduce", 8), ("allreduce", 64), ("broadcast", 8)])
    mpi = _sweep_cell("mpi", [("allreduce", 8), ("allreduce", 64), ("allreduce", 1024)])
    groups = all_groups([gloo, mpi])
    assert [(g.kind, g.what, g.nodes) for g in groups] == [("collectives", "allreduce 64", 1)]
    assert [(r.cell.id, r.median, r.transport, r.link_pct) for r in groups[0].rows] == [
        ("gloo", 8.0, "tcp", 50.0), ("mpi", 8.0, "tcp", 50.0)]  # 1 GB/s of 16 Gb/s
