"""The chart's health check judging a 1,024-node pairs check within the judge's default memory
limit (issue 60). The judge container of the check's pod, as Helm renders it with the chart's
defaults (its command, arguments, environment, mounts and memory limit, read from the manifest),
is run here as the kubelet would run it on index 0's pod: its $(VAR)s expanded, its environment's
field and resource references filled in (FABBENCH_MEMORY_LIMIT: the limit in bytes), each of its
mounts a folder of the test (the paths the words name moved there: the floors from the rendered
ConfigMap, the results file where the arguments say rank 0 wrote it), fabbench this checkout's,
`fabbench floors label-nodes` talking to a stand-in Kubernetes API on loopback, and the whole
step (the script, verify, label-nodes) in a memory cgroup whose hard limit is the container's
(integration.memory_cgroup). The results: 1,047,552 pairs records of 1,024 nodes made from a real
run's (integration.pairs_at_scale), one node's pairs slow. It must end with the verdict (that
node failed, every other passed, each labelled so) and no process OOM-killed."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from integration import pairs_at_scale
from integration.memory_cgroup import NoMemoryCgroup, Ran, run_limited
from integration.test_k8s_health_check import FLOORS, _k8s_expand, by_kind, judge_of, pod_of
from integration.test_k8s_helm import render_chart
from unit.test_labels import api_server

pytestmark = [pytest.mark.integration, pytest.mark.needs_root]

NODES = 1024
SLOW = pairs_at_scale.host(517)
DEADLINE_S = 600
VALUES = {"primitive": "gloo", "nodes": NODES,
          "healthCheck": {"enabled": True, "floors": FLOORS}}
JOB = "fb-fabbench-all-29000000"  # the check's Job, as the CronJob names it
# what the kubelet gives a container's fieldRef on index 0's pod of that Job
FIELDS = {"metadata.annotations['batch.kubernetes.io/job-completion-index']": "0",
          "metadata.labels['batch.kubernetes.io/job-name']": JOB}
_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
MIB = 2**20


def quantity_bytes(quantity: str | int) -> int:
    """A memory quantity (Kubernetes') in bytes, rounded up as the downward API rounds it."""
    found = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(quantity))
    assert found, quantity
    return math.ceil(Decimal(found[1]) * _UNITS[found[2]])


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("pairs-at-scale") / "pairs.jsonl"
    try:
        assert pairs_at_scale.write(path, NODES, slow=SLOW) == NODES * (NODES - 1)  # 2 sizes
        yield path
    finally:
        path.unlink(missing_ok=True)


def container_env(container: dict) -> dict[str, str]:
    """The container's environment as the kubelet makes it on index 0's pod."""
    env: dict[str, str] = {}
    for entry in container["env"]:
        name, source = entry["name"], entry.get("valueFrom")
        if source is None:
            env[name] = _k8s_expand(entry["value"], env)
        elif "fieldRef" in source:
            env[name] = FIELDS[source["fieldRef"]["fieldPath"]]
        else:
            ref = source["resourceFieldRef"]
            assert ref["containerName"] == container["name"], ref
            kind, resource = ref["resource"].split(".")
            amount = quantity_bytes(container["resources"][kind][resource])
            env[name] = str(math.ceil(amount / quantity_bytes(ref.get("divisor", 1))))
    return env


def moved(word: str, places: dict[str, Path]) -> str:
    """A word with each mount path it names (whole path components) moved to its folder, in
    one pass (a folder's own path is not moved again)."""
    mounts = "|".join(re.escape(m) for m in sorted(places, key=len, reverse=True))
    return re.sub(rf"(?<![\w./-])(?:{mounts})(?![\w.-])", lambda m: str(places[m[0]]), word)


def run_judge(folder: Path, values: dict, results: Path, api: str) -> tuple[Ran, int, Path]:
    """The rendered check's judge run on index 0 over ``results``, under its memory limit: what
    it did, the limit in bytes, and where its /tmp is."""
    manifests = by_kind(render_chart(values))
    (cron,) = manifests["CronJob"]
    judge, pod = judge_of(cron), pod_of(cron)
    volumes = {v["name"]: v for v in pod["volumes"]}
    maps = {m["metadata"]["name"]: m["data"] for m in manifests["ConfigMap"]}
    places = {}
    for mount in judge["volumeMounts"]:
        place = places[mount["mountPath"]] = folder / mount["name"]
        place.mkdir()
        for key, text in maps.get(volumes[mount["name"]].get("configMap", {}).get("name"),
                                  {}).items():
            (place / key).write_text(text)
    env = container_env(judge)
    argv = [moved(_k8s_expand(w, env), places) for w in [*judge["command"], *judge["args"]]]
    out = Path(argv[-2])  # the script's arguments: FABBENCH OUT PREFIX
    assert out.parent == places[values.get("results", {}).get("path", "/results")], argv
    os.link(results, out)  # where rank 0 wrote it (the same file system: no copy)
    limit = int(env["FABBENCH_MEMORY_LIMIT"])
    assert limit == quantity_bytes(judge["resources"]["limits"]["memory"])
    bin_dir = str(Path(sys.executable).parent)  # the image's fabbench: this checkout's
    env = {k: moved(v, places) for k, v in env.items()} | {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FABBENCH_KUBE_API": api,  # the stand-in API (label-nodes' --api)
        **{k: os.environ[k] for k in ("PYTHONPATH", "LANG") if k in os.environ}}
    try:
        ran = run_limited(argv, env, limit, cwd=folder, deadline_s=DEADLINE_S,
                          name="fabbench-judge")
    except NoMemoryCgroup as exc:  # a pod's limit is its cgroup's; RLIMIT_AS is not that
        pytest.skip(f"no memory cgroup to hold the judge to its limit: {exc}")
    finally:
        out.unlink()
    return ran, limit, places["/tmp"]


def within_limit(ran: Ran, limit: int) -> str:
    """The figures; AssertionError naming the OOM kill when the kernel ended a process of the
    step for going past the limit, or the deadline when it ran out."""
    figures = (f"peak RSS {ran.max_rss / MIB:.0f} MiB (its largest process), the cgroup's peak "
               f"{'?' if ran.peak is None else f'{ran.peak / MIB:.0f}'} MiB with page cache, "
               f"{ran.seconds:.1f} s, under a limit of {limit} B ({limit / MIB:.0f} MiB)")
    tail = f"exit {ran.code}; stderr: {ran.err[-1500:]!r}"
    assert not ran.oom_kills, (f"the judging step was OOM-killed: the kernel's OOM killer ended "
                               f"{ran.oom_kills} process(es) of it for going past the judge's "
                               f"memory limit; {figures}; {tail}")
    assert not ran.timed_out, f"the judging step ran past {DEADLINE_S} s; {figures}; {tail}"
    return figures


def test_the_check_judges_1024_nodes_within_the_judges_default_memory_limit(tmp_path,
                                                                             pairs_file):
    """The default limit judges 1,024 nodes: the slow node failed and was labelled so, the 1,023
    others passed and were, verify's exit code (1: a floor failed) the check's, nothing killed."""
    nodes: dict[str, dict] = {}
    with api_server(nodes=nodes) as (api, _):
        ran, limit, tmp = run_judge(tmp_path, VALUES, pairs_file, api)
    figures = within_limit(ran, limit)
    print(f"judged {NODES} nodes: {figures}")
    assert ran.code == 1, f"exit {ran.code}, not 1 (a floor failed); {ran.err[-1500:]}"
    verdict = json.loads((tmp / "verdict.json").read_text())
    statuses = {n["node"]: n["status"] for n in verdict["nodes"]}
    assert statuses == {pairs_at_scale.host(i): "fail" if pairs_at_scale.host(i) == SLOW
                        else "pass" for i in range(NODES)}
    labels = {name: n["metadata"]["labels"]["fabbench.dev/verdict"] for name, n in nodes.items()}
    assert labels == {name: {"fail": "fail", "pass": "pass"}[s] for name, s in statuses.items()}
    assert f"failed node(s): {SLOW}" in ran.out


def test_a_judge_past_its_limit_fails_naming_the_oom_kill(tmp_path, pairs_file):
    """The check above is no formality: with a limit below what the interpreter alone holds,
    the kernel ends the step and the check fails, saying so."""
    values = {**VALUES, "healthCheck": {**VALUES["healthCheck"], "judgeResources": {
        "requests": {"memory": "16Mi"}, "limits": {"memory": "16Mi"}}}}
    with api_server() as (api, _):
        ran, limit, _ = run_judge(tmp_path, values, pairs_file, api)
    assert limit == 16 * MIB
    with pytest.raises(AssertionError, match="the judging step was OOM-killed"):
        within_limit(ran, limit)
    assert ran.code == 128 + 9  # verify's SIGKILL, the script's exit code
