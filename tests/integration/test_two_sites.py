"""Two sites, one image (issue 24, part 4): two emulated sites that differ as real sites do (A: 4
nodes at 10 Gbit/s; B: 4 nodes at 1 Gbit/s, node3's link at 250 Mbit/s) each pull the same SIF
by digest from the TLS registry on loopback (.ci/pull.sh, signature verified) and run the same
study with its ranks in that image (`fabbench emulate ... --image SIF --runtime apptainer --
study run`). `fabbench compare siteA siteB` must say first that both ran the same image, then
name the cells that differ with their 95 % intervals, the link difference and B's slow node;
its HTML is opened in Chromium.

Apptainer runs the pulled SIF, as a site would (the product's way: publish, pull by digest, run
from the image); as in test_containers_across_nodes.py it is sid's Apptainer entered through
.ci/apptainer.sh, as the unprivileged user, while the study and each cell's emulated cluster
are root's. The registry and the published image are the session's (conftest.py), shared with
test_registry.py. After the test, passed or failed: every cluster removed (each cell's
`fabbench emulate` tears its own down), no process of the user left, the pulls removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CHROMIUM, chromium_screenshot
from fabbench.emulate import net
from fabbench.emulate.site import SITE_ENV, Site
from fabbench.results.reader import read_results
from integration.oci_registry import REGISTRY_BIN
from integration.test_apptainer import APPTAINER, USER, clean_env
from integration.test_containers_across_nodes import user_processes_end
from integration.test_registry import user_dir  # noqa: F401  (fixture)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.needs_root,
    pytest.mark.timeout(5400 + 2400 + 1800),  # a cold publish (image and SIF build) first
    pytest.mark.skipif(not Path(REGISTRY_BIN).exists(),
                       reason="needs docker-registry (.ci/apt-packages.txt)"),
    *[pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool} ({why})")
      for tool, why in (("openssl", "the registry's certificate, the signing keys"),
                        ("podman", "builds the image"), ("skopeo", "publish pushes it"),
                        ("runc", "publish tests the image with podman"),
                        ("debootstrap", "the sid root of Apptainer"),
                        ("mpirun", "the host launcher of the ranks in the image"))],
]

# the same study at both sites: an allreduce whose size shows 10 against 1 Gbit/s (and the
# 250 Mbit/s link), and the pairs that find the slow node; the ranks talk over the nodes' fbnet0
STUDY = """name = "two-sites"
description = "the same image at two sites"

[matrix]
fabric = ["ethernet"]
primitive = ["mpi"]
workload = ["allreduce", "pairs"]
nodes = [4]

[run]
ranks_per_node = 1
iface = "fbnet0"
timeout = 60
deadline = 300

[workload.allreduce]
kind = "collectives"
ops = "allreduce"
sizes = "8,4M"
budget = 0.2
min_samples = 8

[workload.pairs]
kind = "pairs"
sizes = "8,4M"
budget = 0.3
"""
SITES = {"siteA": ["--link", "10gbit"],
         "siteB": ["--link", "1gbit", "--slow-node", "3:250mbit"]}


def site_study(site: str, sif: Path, ref: str, work: Path) -> subprocess.CompletedProcess:
    """`fabbench emulate --nodes 4 LINKS --image SIF --runtime apptainer -- study run` in WORK.
    The umask lets the ranks (the user) write into the folders the study (root) makes."""
    env = clean_env(FABBENCH_APPTAINER=f"{APPTAINER} exec --fuse --cwd {work} -- apptainer",
                    FABBENCH_IMAGE_REF=ref)  # a SIF knows no registry: the launcher says
    return subprocess.run(
        [sys.executable, "-m", "fabbench", "emulate", "--nodes", "4", *SITES[site],
         "--max-time", "900", "--image", str(sif), "--runtime", "apptainer", "--",
         "study", "run", "two-sites.toml", "--out", site],
        cwd=work, env=env, capture_output=True, text=True, timeout=960, check=False, umask=0)


def stale_clusters(before: set[int]) -> dict[int, list[str]]:
    """Emulation objects whose owner is gone and that were not there before."""
    return {pid: what for pid, what in net.leftovers().items()
            if pid not in before and not net.alive(pid)}


def test_two_sites_one_image(published, user_dir, tmp_path):  # noqa: F811
    work = user_dir  # in the Apptainer user's home, owned by the user (the ranks write there)
    reg = published.registry
    digest = published.sif.split("@")[1]
    (work / "two-sites.toml").write_text(STUDY)
    before = set(net.leftovers())
    t0 = time.monotonic()
    try:
        for site in SITES:
            pulled = work / f"{site}-pull"
            pulled.mkdir()
            shutil.chown(pulled, USER, USER)
            sif = pulled / "fabbench.sif"
            got = subprocess.run(
                [str(Path(APPTAINER).parent / "pull.sh"), "apptainer", published.sif, str(sif),
                 "--cert-dir", str(reg.cert_dir), "--verify-key",
                 str(published.keys / "key-pub.pem")],
                capture_output=True, text=True, timeout=900, check=False, env=clean_env())
            assert got.returncode == 0, got.stderr[-3000:]
            res = site_study(site, sif, published.sif, work)
            assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
            doc = json.loads((work / site / "study.json").read_text())
            assert [c["status"] for c in doc["cells"]] == ["ok", "ok"], doc["cells"]
            for cell in doc["cells"]:
                assert "--image" in cell["argv"] and str(sif) in cell["argv"]
                run = read_results(work / site / cell["file"]).records[0]
                assert run.nodes == 4 and run.provenance.container == "apptainer"
                image = run.provenance.image
                assert image.id == published.image_id and image.digest == digest, image
                # the ranks in the image do not see the cluster: its shape is in the run's
                # provenance as the site's launch set it
                e = Site.from_json(run.provenance.env[SITE_ENV]).emulation
                links = [e.link_of(i).rate_bit_s / 1e9 for i in range(4)]
                assert links == ([10.0] * 4 if site == "siteA" else [1.0, 1.0, 1.0, 0.25])
        print(f"two sites: {time.monotonic() - t0:.0f} s for two pulls and two studies")

        html = tmp_path / "compare.html"
        p = subprocess.run([sys.executable, "-m", "fabbench", "compare", "siteA", "siteB",
                            "--html", str(html)], cwd=work, capture_output=True, text=True,
                           timeout=300, check=False, env={**os.environ, "COLUMNS": "200"})
        assert p.returncode == 0, p.stderr
        print(p.stdout)
        out = p.stdout.splitlines()
        # first of all: the same image, named by its id
        assert out[0].startswith(f"same image: both studies ran {published.image_id} "
                                 f"(pulled as {published.sif})"), out[0]
        # the allreduce cell differs: B slower, with its interval
        assert re.search(r"allreduce-ethernet-mpi-n4 \(allreduce 4M\): B is [\d.]+ % slower "
                         r"\(95 % CI \+[\d.]+ … \+[\d.]+ %, p = ", p.stdout), p.stdout
        assert re.search(r"^links differ: A node0-node3 10 Gbit/s \(emulated links, tc[^)]*\); "
                         r"B node0-node2 1 Gbit/s, node3 0.25 Gbit/s \(emulated links, tc",
                         p.stdout, re.M), p.stdout
        assert any(ln.startswith("measured ceilings: A ") for ln in out), p.stdout
        assert any(ln.startswith("slow node at B: node3") for ln in out), p.stdout
        assert any(ln.startswith("no slow node at A") for ln in out), p.stdout

        j = json.loads(subprocess.run(
            [sys.executable, "-m", "fabbench", "compare", "siteA", "siteB", "--json"],
            cwd=work, capture_output=True, text=True, timeout=300, check=True).stdout)
        assert j["image"]["same"] and j["image"]["a"] == [published.image_id]
        assert "allreduce-ethernet-mpi-n4: allreduce 4M" in j["different"]
        assert j["network"]["b"]["slow"] == ["node3"] and j["network"]["a"]["slow"] == []

        # the page in a real browser: it renders (no console error), and what the browser
        # built holds the image line first and the network lines
        if not Path(CHROMIUM).exists():
            pytest.skip("chromium is not installed (.ci/apt-packages.txt: chromium)")
        shot, log = chromium_screenshot(html, tmp_path, height=1400)
        assert not re.findall(r"CONSOLE.*|Uncaught.*|Failed to load resource.*", log)
        assert shot.stat().st_size > 10_000
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={tmp_path / 'chromium-dom'}", "--dump-dom",
             html.resolve().as_uri()], capture_output=True, text=True, timeout=120,
            check=False)
        assert dom.returncode == 0, dom.stderr[-2000:]
        body = dom.stdout
        first = re.search(r'<p id="image" class="image">(.*?)</p>', body)
        assert first and first.group(1).startswith("same image: both studies ran "
                                                   f"{published.image_id}"), body[:3000]
        assert body.index('id="image"') < body.index('id="cells"')
        assert "slow node at B: node3" in body and "links differ" in body
        assert re.search(r"allreduce 4M</td>.*?class=\"l slower\">slower", body, re.S)
    finally:
        user_processes_end()
        assert stale_clusters(before) == {}
