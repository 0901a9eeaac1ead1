"""The train workload is a package like the halo's and the pairs' (issue 61): what is its own
(options, rule, record, console line, scaling series, study row, floors' figures) lives in
fabbench.workloads.train, and the rest of fabbench asks its class instead of naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabbench import catalog, runner
from fabbench.config import RunConfig
from fabbench.errors import UsageError
from fabbench.floors.rules import parse
from fabbench.plan import Plan
from fabbench.report.study.cells import StudyCell
from fabbench.report.study.groups import SCALING, all_groups
from fabbench.results.records import Run
from fabbench.results.runs import Series
from fabbench.study.manifest import CellEntry
from fabbench.workloads.train import TrainConfig
from fabbench.workloads.train.record import Train
from fabbench.workloads.train.scaling import SERIES

SRC = Path(__file__).resolve().parents[2] / "src" / "fabbench"
# "all" (collectives then train) in the catalog; the fabbench/1 field names of a train record in
# the results contract's history
NAMED_BY = {"catalog.py", "results/__init__.py"}


def test_train_is_named_as_a_string_only_in_its_package_and_two_modules():
    named = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
             if '"train"' in p.read_text() and "workloads/train" not in str(p)}
    assert named <= NAMED_BY, sorted(named - NAMED_BY)


def _plan(workload: str, scaling: tuple[int, ...] | None) -> Plan:
    c = RunConfig(workload=workload, train=TrainConfig(model="gpt-tiny", scaling=scaling))
    train, _ = catalog.WORKLOADS["train"].decide(c.train, False)
    return Plan.of(c, fabric="ethernet", primitive="gloo", device="cpu", ranks=2, iface=None,
                   out="r.jsonl", run_id="r", decided={"train": train})


def _train(ranks: int, samples_per_s: float, scaling: float | None = None) -> Train:
    return Train.read({"model": "gpt-tiny", "ranks": ranks, "step_ms": 100.0, "comm_ms": 10.0,
                       "compute_ms": 90.0, "parameters": 1, "batch_per_rank": 2,
                       "scaling_efficiency": scaling,
                       "samples_per_s": {"p50": samples_per_s, "mean": samples_per_s,
                                         "ci95": 0.0}})


def test_the_runner_launches_the_series_the_spec_declares():
    spec, counts = runner._series(_plan("all", (4, 2))) or (None, ())
    assert spec is catalog.WORKLOADS["train"] and counts == (1, 2, 4)
    assert runner._series(_plan("train", None)) is None
    with pytest.raises(UsageError, match=r"^--scaling is for --workload train \(or all\)$"):
        runner._series(_plan("collectives", (2,)))
    # the later launches compare with the 1-rank launch's last record
    assert SERIES.baseline([_train(1, 10.0), _train(1, 12.0)]) == 12.0
    assert SERIES.baseline([]) is None


def _cell(nodes: int, rec: Train) -> StudyCell:
    axes = {"workload": "gpt", "nodes": nodes, "fabric": "ethernet", "primitive": "gloo",
            "gpudirect": "auto", "link": None}
    entry = CellEntry(id=f"gpt-n{nodes}", axes=axes, kind="train", options={}, argv=[],
                      file=f"cells/gpt-n{nodes}.jsonl", log=None)
    series = Series(path=Path("x"), run=Run.read({}), others={"train": [rec]})
    return StudyCell(entry, [series], f"n{nodes}")


def test_a_train_study_row_takes_its_scaling_from_the_one_node_cell_when_it_has_none():
    groups = all_groups([_cell(1, _train(2, 100.0)), _cell(2, _train(4, 150.0)),
                         _cell(4, _train(8, 200.0, scaling=0.9))])
    assert [(g.kind, g.what, g.nodes) for g in groups] == [
        ("train", "gpt-tiny", 1), ("train", "gpt-tiny", 2), ("train", "gpt-tiny", 4)]
    (one,), (two,), (four,) = (g.rows for g in groups)
    assert one.scaling is None and two.scaling == pytest.approx(0.75)
    assert four.scaling == 0.9  # the record's own
    assert {n: n == "train" for n in catalog.METRICS} == SCALING


def _floors(**rule: object) -> None:
    parse({"format": "fabbench-floors/1",
           "rule": [{"id": "r", "source": "test", "at_least": 1.0, "unit": "samples/s",
                     **rule}]}, Path("f.toml"))


def test_a_train_rule_names_any_network_and_no_size():
    _floors(workload="train", op="gpt-tiny", metric="samples_per_s")
    with pytest.raises(UsageError, match="a train rule matches no size; leave size out"):
        _floors(workload="train", metric="samples_per_s", size="1M")
    with pytest.raises(UsageError, match="unknown op 'gpt-tiny' for a halo rule"):
        _floors(workload="halo", op="gpt-tiny", metric="time")
    with pytest.raises(UsageError, match="unknown op 'gpt-tiny' for a collectives rule"):
        _floors(workload="collectives", op="gpt-tiny", metric="busbw")
