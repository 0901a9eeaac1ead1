"""An emulated site for a study (emulate/site.py): each cell's launch carries the site's links
for the cell's nodes and its image; the study sees the site's nodes; what cannot run is
refused with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fabbench.emulate.cluster_spec import make_emulation
from fabbench.emulate.session import describe_links
from fabbench.emulate.site import SITE_ENV, Site, current
from fabbench.errors import UsageError

SITE_B = make_emulation(nodes=4, link="1gbit", slow_nodes=("3:250mbit",), lossy_nodes=("2:1%",))


def test_a_cell_gets_the_sites_links_for_its_nodes():
    site = Site(emulation=SITE_B, image="/x/fb.sif", runtime="apptainer")
    run = ["run", "--primitive", "mpi", "--out", "d/cells/c.jsonl"]
    four = site.cell_argv(nodes=4, ranks_per_node=1, max_time_s=120, run=run)
    assert four == ["emulate", "run", "--nodes", "4", "--link", "1gbit", "--lossy-node", "2:1%",
                    "--slow-node", "3:250mbit", "--ranks-per-node", "1", "--max-time", "120",
                    "--image", "/x/fb.sif", "--runtime", "apptainer", "--", *run]
    # a 2-node cell takes the first two nodes: neither the slow nor the lossy one
    two = site.cell_argv(nodes=2, ranks_per_node=2, max_time_s=60, run=run)
    assert "--slow-node" not in two and "--lossy-node" not in two and "--image" in two
    with pytest.raises(UsageError, match="5-node cell on an emulated site of 4"):
        site.cell_argv(nodes=5, ranks_per_node=1, max_time_s=60, run=run)


def test_a_site_without_an_image_and_with_delay():
    e = make_emulation(nodes=2, link="10gbit", delay="50us", loss="0.5%")
    argv = Site(emulation=e).cell_argv(nodes=2, ranks_per_node=1, max_time_s=9, run=["run"])
    assert argv == ["emulate", "run", "--nodes", "2", "--link", "10gbit", "--delay", "50us",
                    "--loss", "0.5%", "--ranks-per-node", "1", "--max-time", "9", "--", "run"]


def test_the_site_round_trips_through_its_variable(monkeypatch):
    site = Site(emulation=SITE_B, image="fb.sif", runtime="charliecloud")
    monkeypatch.setenv(SITE_ENV, site.to_json())
    assert current() == site
    monkeypatch.setenv(SITE_ENV, "{}")
    with pytest.raises(UsageError, match=f"{SITE_ENV} is not an emulated site"):
        current()
    monkeypatch.delenv(SITE_ENV)
    assert current() is None
    with pytest.raises(UsageError, match="go together"):
        Site(emulation=SITE_B, image="fb.sif")


def test_why_not():
    site = Site(emulation=SITE_B)
    assert site.why_not(4, None) is None
    assert site.why_not(8, None) == "needs 8 nodes; the emulated site has 4"
    assert "its own link (1gbit)" in site.why_not(2, "1gbit")


def test_describe_links_joins_runs_of_equal_rates():
    assert describe_links(SITE_B) == "node0-2 1 Gbit/s, node3 0.25 Gbit/s"
    assert describe_links(make_emulation(nodes=1, link="10gbit")) == "node0 10 Gbit/s"


def test_the_study_sees_the_sites_nodes_and_launches_through_emulate(monkeypatch, tmp_path):
    from fabbench.study.host import Host, detect_place, why_not
    from fabbench.study.run import command
    from fabbench.study.spec import load_study

    toml = tmp_path / "s.toml"
    toml.write_text('name = "s"\n[matrix]\nfabric = ["ethernet"]\nprimitive = ["mpi"]\n'
                    'workload = ["allreduce"]\nnodes = [4, 8]\n[workload.allreduce]\n'
                    'kind = "collectives"\nsizes = "8,1K"\n')
    study = load_study(str(toml))
    site = Site(emulation=SITE_B, image="fb.sif", runtime="apptainer")
    monkeypatch.setenv(SITE_ENV, site.to_json())
    place = detect_place()
    assert place.nodes == 4 and place.hostnames == ("node0", "node1", "node2", "node3")
    four, eight = study.cells
    host = Host(gpus=False, root=True, mpirun=True, modules=frozenset())
    assert why_not(eight, host, place) == "needs 8 nodes; the emulated site has 4"
    argv, env = command(four, tmp_path / "c.jsonl", place, 0)
    assert argv[1:6] == ["-m", "fabbench", "emulate", "run", "--nodes"] and env == {}
    assert argv[argv.index("--slow-node") + 1] == "3:250mbit"
    assert argv[argv.index("--") + 1:][:1] == ["run"] and "--image" in argv


def test_emulate_refuses_a_study_with_ranks_per_node_or_a_missing_image(tmp_path):
    for extra, said in ((["--ranks-per-node", "2"], "a study's cells set their own ranks"),
                        (["--image", str(tmp_path / "no.sif"), "--runtime", "charliecloud"],
                         "")):
        p = subprocess.run([sys.executable, "-m", "fabbench", "emulate", "--nodes", "2",
                            *extra, "--", "study", "run", "quick", "--out",
                            str(tmp_path / "o")], capture_output=True, text=True, timeout=60,
                           check=False, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and said in lines[0], p.stderr
    assert not Path(tmp_path / "o").exists()
