"""A new workload added as one class (issues 33, 45, 61): a package in a temporary folder holds
tests/unit/toy_workload.py, a Workload subclass (its options section, its record kind with its
own schema, its line, its metric, its rule against the plan, its floors), registered and named
in the ``fabbench.workloads`` entry-point group, and nothing of fabbench is changed. Its rule
refuses a run in one line; the floors make a baseline of its run and judge the run by it.
With the folder on PYTHONPATH, the workload is in ``fabbench run --help`` (its choice and its
own option panel) and in a study's keys (accepted for its kind, refused for another); it runs on
real ranks (gloo, two local processes) and writes its records, the summary counting them;
``fabbench report`` shows them with the package's lines; a study of it runs, its manifest names
its kind and the study's report ranks its cell by the class's metric. Without the package, a
file holding its records is one line, exit code 2; a package whose entry point names nothing
usable is an error naming the entry point."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import fabbench

pytestmark = [pytest.mark.together, pytest.mark.integration, pytest.mark.timeout(300)]

# the toy workload, one file (a Workload subclass with all it declares), which the unit test
# installs beside fabbench too
TOY = Path(__file__).resolve().parents[1] / "unit" / "toy_workload.py"

STUDY = '''
name = "toy"
description = "the toy workload, two ranks"
[matrix]
fabric = ["ethernet"]
primitive = ["gloo"]
workload = ["t"]
[run]
ranks_per_node = 2
timeout = 30
[workload.t]
kind = "{kind}"
toy_rounds = 2
'''


def package(root: Path, entry: str = "toy_fabbench:ToyWorkload") -> dict[str, str]:
    """The toy package installed in ``root`` (its modules and an egg-less dist-info with the
    entry point, as pip would leave them): the environment that puts it on the path."""
    (root / "toy_fabbench").mkdir(parents=True)
    (root / "toy_fabbench" / "__init__.py").write_text(TOY.read_text())
    info = root / "toy_fabbench-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-fabbench\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[fabbench.workloads]\ntoy = {entry}\n")
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path}


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> dict[str, str]:
    return package(tmp_path_factory.mktemp("site"))


def test_run_help_lists_the_workload_and_its_options(toy):
    out = fabbench("run", "--help", env={**toy, "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    assert "toy (barriers timed one by one)" in out.stdout
    assert "Toy workload" in out.stdout and "--toy-rounds" in out.stdout
    plain = fabbench("run", "--help", env={"COLUMNS": "200"})
    assert "--toy-rounds" not in plain.stdout and "toy (" not in plain.stdout


def test_the_workload_runs_writes_its_records_and_the_report_shows_them(toy, tmp_path):
    out_file = tmp_path / "toy.jsonl"
    run = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--workload", "toy",
                   "--toy-rounds", "4", "--out", str(out_file), "--timeout", "30", env=toy)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "toy-round" in run.stdout
    records = [json.loads(line) for line in out_file.read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds == ["run"] + ["toy"] * 4 + ["summary"]
    toys = records[1:5]
    assert [r["round"] for r in toys] == [0, 1, 2, 3]
    assert all(r["ranks"] == 2 and r["time_us"] > 0 for r in toys)
    summary = records[-1]
    assert summary["ok"] and summary["counts"]["toy"] == 4
    assert records[0]["plan"]["workload"] == "toy" and records[0]["plan"]["toy"] == {
        "toy_rounds": 4, "toy_barrier": "plain"}  # its decide: auto, on real ranks

    report = fabbench("report", str(out_file), env=toy)
    assert report.returncode == 0, report.stderr
    assert "toy, 2 ranks on 1 node(s)" in report.stdout
    assert report.stdout.count("toy-round") == 4

    # the acceptance floors take its figures: a baseline of the run, then the run judged by it
    floors = tmp_path / "toy.toml"
    made = fabbench("floors", "baseline", str(out_file), "--out", str(floors), env=toy)
    assert made.returncode == 0, made.stderr
    assert 'workload = "toy"' in floors.read_text() and 'metric = "time"' in floors.read_text()
    judged = fabbench("floors", "verify", "--floors", str(floors), str(out_file), "--json",
                      str(tmp_path / "verdict.json"), env=toy)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert [(r["status"], r["metric"]) for r in verdict["rules"]] == [("pass", "time")], verdict

    # without the package, its records are not this fabbench's: one line, exit code 2
    alone = fabbench("report", str(out_file))
    assert alone.returncode == 2
    assert "'toy' is not a record kind this fabbench knows" in alone.stderr
    assert "Traceback" not in alone.stderr and len(alone.stderr.strip().splitlines()) == 1


def test_its_rule_against_the_plan_refuses_in_one_line(toy, tmp_path):
    out = fabbench("run", "--fabric", "ethernet", "--primitive", "gloo", "--workload", "toy",
                   "--toy-rounds", "101", "--out", str(tmp_path / "t.jsonl"), env=toy)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--toy-rounds 101 is more than 50 per rank" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "t.jsonl").exists()


def test_a_study_takes_its_keys_for_its_kind_only_and_runs_it(toy, tmp_path):
    study = tmp_path / "toy.toml"
    study.write_text(STUDY.format(kind="collectives"))
    wrong = fabbench("study", "show", str(study), env=toy)
    assert wrong.returncode == 2
    assert "'toy_rounds' is an option of toy workloads, not of a collectives workload" in \
        wrong.stderr
    study.write_text(STUDY.format(kind="toy"))
    done = fabbench("study", "run", str(study), "--out", str(tmp_path / "study"), env=toy,
                    timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "study" / "study.json").read_text())
    (cell,) = manifest["cells"]
    assert cell["kind"] == "toy" and cell["status"] == "ok"
    assert "--toy-rounds" in cell["argv"]
    # the study's report ranks the cell by the class's metric: the median of its records' figure
    report = fabbench("report", str(tmp_path / "study"), env=toy, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "t on 1 node: barrier time" in report.stdout and "gloo/tcp" in report.stdout


def test_an_entry_point_that_names_no_workload_class_is_an_error_naming_it(tmp_path):
    env = package(tmp_path, entry="toy_fabbench:ToyConfig")
    out = fabbench("run", "--help", env=env)
    assert out.returncode != 0
    assert "the fabbench.workloads entry point 'toy' (toy_fabbench:ToyConfig, package " \
        "toy-fabbench) names ToyConfig, not a Workload class" in out.stderr
