"""A workload added from outside fabbench (tests/unit/toy_workload.py, one file: a Workload
subclass with its section, record kind, line, rule, decision, point count, floors' figures,
findings and metric), installed beside fabbench by an entry point in the ``fabbench.workloads``
group that names its class, and nothing of fabbench changed: it is in every table the registry
derives (the --workload choice and its help, the configuration's sections and options, the
record kinds, a study's kinds and metric, the floors' metrics), its plan is decided and checked
by its own methods, and a rank runs it through the registry. Read in a fresh interpreter, as
the registry is read once when fabbench starts (tests/integration/test_workload_package.py runs
the same file on real ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

PROBE = r'''
import json
from types import SimpleNamespace

from fabbench import catalog, config, runner
from fabbench.errors import UsageError
from fabbench.floors.points import WORKLOAD_METRICS
from fabbench.launch.local import wall_limit
from fabbench.report.study.groups import METRIC
from fabbench.study.spec import KINDS
from fabbench.workloads import interface


def plan(**toy):
    c = config.build({"workload": "toy", "fabric": "ethernet", "primitive": "gloo",
                      **{f"toy.{k}": v for k, v in toy.items()}})
    return runner.make_plan(c, local_launch=True)


class Comm:
    size, rank = 2, 0
    calls = []

    def barrier(self):
        self.calls.append("barrier")

    def quiet_barrier(self):
        self.calls.append("quiet")


out = {"names": catalog.NAMES, "sections": {n: s.__name__ for n, s in config.SECTIONS.items()},
       "records": catalog.RECORDS, "kinds": KINDS, "metric": METRIC.get("toy"),
       "floors": WORKLOAD_METRICS.get("toy"), "help": catalog.described(),
       "options": [f.option.flag for f in config.fields() if f.section == "toy"]}
four, state = plan(toy_rounds=4)
out["decided"] = [four.toy.toy_barrier, list(state.picked)]
out["quiet"] = plan(toy_barrier="quiet")[0].toy.toy_barrier
eight, _ = plan(toy_rounds=8)
out["per_round_s"] = (wall_limit(eight) - wall_limit(four)) / 4
sweep = four.collectives  # the sweep a plan holds decided, whose budget a point takes
out["per_point_s"] = sweep.policy.budget_s * 3 + max(four.op_timeout(s) for s in sweep.sizes)
try:
    plan(toy_rounds=101)
except UsageError as exc:
    out["refused"] = str(exc)
(toy,) = interface.load("toy")
ctx = SimpleNamespace(comm=Comm(), plan=four, arm=lambda deadline_s, what: None)
records = list(toy.run(ctx))
out["run"] = [toy.header(None), *(toy.line(r) for r in records)]
out["barriers"] = Comm.calls
out["wrong"] = [toy.wrong(r) for r in records]
slow = [*records[:3], records[3].__class__(run_id="x", round=3, ranks=2, time_us=1e9)]
found = catalog.findings(lambda kind: slow if kind == "toy" else [])
out["findings"] = {n: f.text if f else None for n, f in found.items()}
out["figures"] = [sorted(f.metrics) for f in toy.floor_points(records)]
out["study_own"] = toy.defines("study")
print(json.dumps(out))
'''


def installed(root: Path, entry: str = "toy_workload:ToyWorkload") -> dict[str, str]:
    """An egg-less dist-info in ``root`` declaring the entry point, as pip would leave it; the
    environment that puts it and the toy's file on the path."""
    info = root / "toy_workload-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-workload\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[fabbench.workloads]\ntoy = {entry}\n")
    path = os.pathsep.join(p for p in (str(root), str(HERE), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict:
    env = installed(tmp_path_factory.mktemp("site"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_workload_is_in_every_table_the_registry_derives(probe):
    assert probe["names"] == ["collectives", "train", "halo", "pairs", "replay", "toy", "all"]
    assert probe["sections"]["toy"] == "ToyConfig"
    assert probe["options"] == ["--toy-rounds", "--toy-barrier"]
    assert probe["records"][-1] == "toy" and probe["kinds"][-1] == "toy"
    assert probe["metric"] == "barrier time" and probe["floors"] == ["time"]
    assert "toy (barriers timed one by one)" in probe["help"]


def test_its_plan_is_decided_counted_and_checked_by_its_own_methods(probe):
    assert probe["decided"] == ["plain", ["toy_barrier=plain"]]  # decide: auto on real ranks
    assert probe["quiet"] == "quiet"  # what the user chose is kept
    assert probe["per_round_s"] == pytest.approx(probe["per_point_s"])  # points: its rounds
    assert probe["refused"] == "--toy-rounds 101 is more than 50 per rank"


def test_a_rank_runs_it_through_the_registry_and_its_records_say_what_it_finds(probe):
    assert probe["run"][0] == "#   toy round ranks   barrier us"
    assert [line.split()[:3] for line in probe["run"][1:]] == [
        ["toy-round", str(i), "2"] for i in range(4)]
    assert probe["barriers"] == ["barrier"] * 4 and probe["wrong"] == [False] * 4
    # the registry asks only the workloads that have findings (pairs, toy)
    assert probe["findings"]["pairs"] is None and "collectives" not in probe["findings"]
    assert probe["findings"]["toy"] == ["toy: barrier 3 took 1000000000.0 µs"]
    assert probe["figures"] == [["time"]] and probe["study_own"] is False


def test_an_entry_that_names_a_class_that_is_no_workload_is_an_error_naming_it(tmp_path):
    env = installed(tmp_path, entry="toy_workload:ToyConfig")
    done = subprocess.run([sys.executable, "-c", "import fabbench.catalog"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "the fabbench.workloads entry point 'toy' (toy_workload:ToyConfig, package " \
        "toy-workload) names ToyConfig, not a Workload class" in done.stderr
