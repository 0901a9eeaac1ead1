"""Two study directories as two sites (report/study/sites.py, report/study/study_compare.py): the
image first (the same id on both sides, or both ids named), the differing cells with their
intervals, the links from provenance and the slow node. The study directories are made here: a
manifest the study's own writer checks, and the schema-valid fixture runs as the cells' results
files, with the image each side ran put into their provenance."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabbench.report.study.sites import NO_IMAGE, ImageCheck, SiteNetwork, Sites
from fabbench.report.study.study_compare import (
    compare_studies,
    image_line,
    network_lines,
    summary_lines,
)
from fabbench.study import manifest
from fabbench.study.host import Place
from fabbench.study.run import _start_manifest, cell_entry
from fabbench.study.spec import load_study

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
STUDY = """name = "sites"
[matrix]
fabric = ["infiniband"]
primitive = ["mpi"]
workload = ["allreduce"]
nodes = [2]
[workload.allreduce]
kind = "collectives"
sizes = "1K:16M:64"
"""
ID_1 = "0.9.0-cpu-1111aaaa2222"
ID_2 = "0.9.0-cpu-3333bbbb4444"


PAIRS_STUDY = """name = "fleet"
[matrix]
fabric = ["ethernet"]
primitive = ["mpi"]
workload = ["pairs"]
nodes = [1]
[workload.pairs]
kind = "pairs"
sizes = "8,64K"
"""


def study_dir(folder: Path, run_file: str, image: dict | None, spec: str = STUDY) -> Path:
    toml = folder.parent / "sites.toml"
    toml.write_text(spec)
    study = load_study(str(toml))
    (cell,) = study.cells
    entry = dataclasses.replace(cell_entry(cell, ["fabbench", "run"]), status="ok", exit_code=0,
                                attempts=1)
    doc = _start_manifest(study, Place(scheduler="local", nodes=2), [entry])
    (folder / "cells").mkdir(parents=True)
    (folder / "logs").mkdir()
    manifest.write(folder, doc)  # checked against the manifest's schema
    lines = []
    for line in (RUNS / run_file).read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "run" and image is not None:
            record["provenance"]["image"] = image
        lines.append(json.dumps(record))
    (folder / entry.file).write_text("\n".join(lines) + "\n")
    return folder


def image(id_: str) -> dict:
    return {"id": id_, "version": "0.9.0", "flavor": "cpu", "vcs_ref": "abc", "inputs": "x",
            "ref": f"oras://127.0.0.1:5000/fabbench-sif@sha256:{'0' * 64}",
            "ref_source": "FABBENCH_IMAGE_REF", "digest": f"sha256:{'0' * 64}"}


def test_two_different_images_are_said_first_with_both_ids(tmp_path):
    a = study_dir(tmp_path / "A", "siteA-ib.jsonl", image(ID_1))
    b = study_dir(tmp_path / "B", "siteB-ib.jsonl", image(ID_2))
    c = compare_studies(a, b)
    line = image_line(c)
    assert line.startswith("DIFFERENT IMAGES") and ID_1 in line and ID_2 in line
    assert "sites and the images together" in line
    j = c.to_json()
    assert j["image"]["same"] is False and j["image"]["a"] == [ID_1]
    assert j["image"]["b"] == [ID_2]
    # the CLI prints it before anything else, and the page shows it
    html = tmp_path / "c.html"
    p = subprocess.run([sys.executable, "-m", "fabbench", "compare", str(a), str(b), "--html",
                        str(html)], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].startswith("DIFFERENT IMAGES"), p.stdout
    page = html.read_text()
    assert 'class="image differ"' in page and ID_1 in page and ID_2 in page


def test_the_same_image_and_the_differing_cells_with_their_intervals(tmp_path):
    a = study_dir(tmp_path / "A", "siteA-ib.jsonl", image(ID_1))
    b = study_dir(tmp_path / "B", "siteB-ib.jsonl", image(ID_1))
    c = compare_studies(a, b)
    assert c.sites.image.same
    assert image_line(c).startswith(f"same image: both studies ran {ID_1} (pulled as oras://")
    assert c.different, [p.verdict for p in c.pairs]
    lines = summary_lines(c)
    for p in c.different:
        assert any(ln.strip().startswith(f"{p.a.id} ({p.what}): B is") and "95 % CI" in ln
                   for ln in lines), lines
    net = network_lines(c)
    # no emulation in these runs: rank 0's fastest NIC; no ceiling; no pairs cell
    assert net[0].startswith("links")
    assert "no ceiling measured" in net[1]
    assert any("no pairs cell" in ln for ln in net)


def test_runs_outside_an_image_and_one_side_in_one(tmp_path):
    a = study_dir(tmp_path / "A", "siteA-ib.jsonl", None)
    b = study_dir(tmp_path / "B", "siteB-ib.jsonl", None)
    assert image_line(compare_studies(a, b)).startswith("no image: neither study")
    c = study_dir(tmp_path / "C", "siteB-ib.jsonl", image(ID_2))
    line = image_line(compare_studies(a, c))
    assert line.startswith("DIFFERENT IMAGES") and NO_IMAGE in line and ID_2 in line


def test_a_studys_own_report_names_the_slow_node_its_pairs_cell_found(tmp_path):
    """`fabbench report STUDY_DIR` applies the pairs rule to a pairs cell, as `fabbench run` did
    when it ran: the fixture is a real run (fabbench run --workload pairs --ranks 3 --sizes
    8,64K on one host of this project's 2-core machines), whose own verdict named rank 0."""
    from fabbench.report.study.answer import answer
    from fabbench.results.reader import read_results
    from fabbench.workloads.pairs import slow_node as pairs_rule
    from fabbench.workloads.pairs.record import Pairs

    d = study_dir(tmp_path / "fleet", "../pairs/local-pairs.jsonl", None, PAIRS_STUDY)
    verdict = pairs_rule.analyse(read_results(RUNS.parent / "pairs" / "local-pairs.jsonl")
                                 .of_kind(Pairs))
    assert [n.host for n in verdict.slow] == ["vm"]  # what the run itself printed
    a = answer(d, forecast=False)
    assert a.slow == ("vm",) and a.slow_text == tuple(verdict.text)
    assert a.headline[-len(verdict.text):] == list(verdict.text)
    assert a.headline[-1].startswith("slow rank: rank 0 (vm): its 2 pairs move")
    assert a.to_json()["slow"] == ["vm"]
    p = subprocess.run([sys.executable, "-m", "fabbench", "report", str(d)], capture_output=True,
                       text=True, timeout=120, check=False, env={**os.environ, "COLUMNS": "300"})
    assert p.returncode == 0, p.stderr
    assert "• slow rank: rank 0 (vm): its 2 pairs move" in p.stdout, p.stdout


def test_a_study_without_a_pairs_cell_says_nothing_of_a_slow_node(tmp_path):
    from fabbench.report.study.answer import answer

    a = answer(study_dir(tmp_path / "a", "siteA-ib.jsonl", None), forecast=False)
    assert a.slow is None and not any("slow" in line for line in a.headline)


def test_network_lines_name_the_link_difference_and_the_slow_node():
    a = SiteNetwork((("node0", 10.0), ("node1", 10.0)), "emulated links, tc",
                    ("iperf3 one-way node0→node1 9.1 Gbit/s per direction",), (), ("none",))
    b = SiteNetwork((("node0", 1.0), ("node1", 0.25)), "emulated links, tc",
                    ("iperf3 node0→node1: not measured (iperf3 is not installed)",),
                    ("node1",), ("node 1 (node1, rank 1) is slow",))
    lines = Sites(ImageCheck((ID_1,), (ID_1,)), a, b).lines()
    assert lines[0] == ("links differ: A node0-node1 10 Gbit/s (emulated links, tc); B node0 1 "
                        "Gbit/s, node1 0.25 Gbit/s (emulated links, tc)")
    assert "9.1 Gbit/s" in lines[1] and "not installed" in lines[1]
    assert lines[3].startswith("slow node at B: node1")


@pytest.mark.parametrize("which", ["plots", "csv"])
def test_study_compare_refuses_plots_and_csv(tmp_path, which):
    a = study_dir(tmp_path / "A", "siteA-ib.jsonl", None)
    b = study_dir(tmp_path / "B", "siteB-ib.jsonl", None)
    p = subprocess.run([sys.executable, "-m", "fabbench", "compare", str(a), str(b),
                        f"--{which}", str(tmp_path / "x")], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
