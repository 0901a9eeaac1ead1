"""Hostile values for `fabbench render` and the chart: one line on stderr, exit 2, nothing
written (render), the chart's schema refusing the same (Helm's own library, Go's regexp), so
that Python and Helm take the same values of every rule (fabbench.value_rules)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, fabbench
from fabbench import value_rules as rules
from fabbench.render import chart

helm_python = pytest.importorskip("helm_python", reason="needs helm-python-sdk (dev extra)")

pytestmark = [pytest.mark.integration, pytest.mark.together]

CHART = REPO / "charts" / "fabbench"
K8S = ["render", "k8s", "--primitive", "mpi"]


@pytest.mark.parametrize("args,needle", [
    ([*K8S, "--iface", "$(touch /tmp/x)"], "--iface must be a network interface name"),
    ([*K8S, "--iface", "eth0\n"], "--iface must be"),
    ([*K8S, "--rdma-device", "mlx5_0;id"], "--rdma-device must be an RDMA device name"),
    ([*K8S, "--results-host-path", "/"], "--results-host-path must be a normalised"),
    ([*K8S, "--results-host-path", "/etc"], "outside the system's directories"),
    ([*K8S, "--results-host-path", "/var/lib/kubelet"], "--results-host-path"),
    ([*K8S, "--results-host-path", "/srv/../etc"], "--results-host-path"),
    ([*K8S, "--results-path", "/results/../etc"], "--results-path"),
    ([*K8S, "--shm-size", "0"], "--shm-size must be a Kubernetes quantity"),
    ([*K8S, "--shm-size", "1GB"], "--shm-size"), ([*K8S, "--shm-size", "1Gi\n"], "--shm-size"),
    ([*K8S, "--node-selector", "gpu=a/b"], "label value"),
    ([*K8S, "--node-selector", "gpu=x\n# y: z"], "label value"),
    ([*K8S, "--node-selector", "bad key=x"], "qualified name"),
    ([*K8S, "--image", "fabbench\n"], "--image must be an image reference"),
    ([*K8S, "--name", "fb\n"], "--name must be a DNS-1123 label"),
    ([*K8S, "--namespace", "ns\n"], "--namespace must be a DNS-1123 label"),
    ([*K8S, "--results-claim", "a..b"], "--results-claim must be a DNS-1123 subdomain"),
    ([*K8S, "--fabbench-command", "fabbench\r"], "--fabbench-command"),
    ([*K8S, "--sizes", " 8:64M"], "--sizes"),
    (["render", "slurm", "--partition", "gpu\n"], "--partition may hold only"),
    (["render", "slurm", "--time", "10\n"], "--time must be a Slurm time"),
    (["render", "slurm", "--name", "fb\n"], "--name must be a DNS-1123 label"),
    (["render", "slurm", "--results-dir", "r\n#SBATCH --x"], "--results-dir"),
    (["render", "slurm", "--runtime", "apptainer", "--image", "x.sif", "--bind", "/a\r"],
     "--bind takes one SRC[:DST] path"),
    (["render", "slurm", "--iface", "$(id)"], "--iface must be"),
])
def test_hostile_values_one_line_exit_2(args, needle, tmp_path):
    p = fabbench(*args, timeout=60, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == "", (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and needle in p.stderr and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("what", ["k8s", "slurm"])
def test_a_profile_path_with_a_newline_never_reaches_a_comment(tmp_path, what):
    profile = tmp_path / "a\ntouch pwned\n.toml"
    profile.write_text((REPO / "src/fabbench/fabrics/profiles/ethernet.toml").read_text())
    p = fabbench("render", what, "--fabric", str(profile), "--primitive", "mpi", timeout=60)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "--fabric must be text without control characters" in p.stderr


@pytest.mark.parametrize("what", ["k8s", "slurm"])
@pytest.mark.parametrize("setting", ['mca = { btl_tcp_if_include = "$(touch /tmp/x)" }',
                                     'mca = { btl = "tcp,self" }\nenv = { X = "a\\nb" }',
                                     'env = { OMPI_MCA_btl = "`id`" }'])
def test_a_profile_file_carries_no_hostile_setting_into_a_job(tmp_path, what, setting):
    profile = tmp_path / "site.toml"
    profile.write_text(f'name = "site"\nhardware = "none"\n[primitive.mpi]\n{setting}\n'
                       'transport = ["tcp"]\n')
    p = fabbench("render", what, "--fabric", str(profile), "--primitive", "mpi", timeout=60)
    assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, p.stderr
    assert "must be" in p.stderr


def _schema_accepts(path: tuple[str, ...], value: object, tmp_path) -> bool:
    """Whether Helm's own validation of a chart whose schema is the committed one, at ``path``
    only (other values left out), takes ``value``."""
    import shutil

    copy = tmp_path / "chart"
    if not copy.exists():
        shutil.copytree(CHART, copy)
    schema = json.loads((CHART / "values.schema.json").read_text())
    at = schema
    for key in path:
        at = at["items"] if key == "[]" else at["properties"][key]
    probe = {"$schema": schema["$schema"], "type": "object",
             "properties": {"probe": at}}
    (copy / "values.schema.json").write_text(json.dumps(probe))
    (copy / "values.yaml").write_text("{}\n")
    (copy / "templates").mkdir(exist_ok=True)
    for t in (copy / "templates").iterdir():
        t.unlink()
    try:
        helm_python.Chart.load(str(copy)).render({"probe": value}, name="fb", namespace="b")
    except helm_python.HelmValuesError:
        return False
    return True


HOSTILE = ["", "x", "\n", "a\n", "$(id)", "`id`", "a b", "a;b", "é", "a\u2028b", "a\x85b",
           "x" * 400, "/", "/etc", "/srv/fabbench", "/var/tmp/x", "/var/lib/kubelet", "/srv/../x",
           "/srv//x", "/srv/x/", "/tmp", "/tmp/x", "1Gi", "0", "1GB", "0 * * * *",
           "* * * * * *", "@hourly", "60 * * * *", "eth0", "mlx5_0", "nvidia.com/gpu",
           "A.b/c", "fabbench", "ghcr.io/a/fb", "Repo/fb", "sha256:" + "a" * 64, "8:64M", "1 M"]


@pytest.mark.parametrize("path,rule,optional",
                         [*((p, r, o) for p, (r, o) in chart._RULES.items()),
                          (("iface",), rules.IFACE, True),
                          (("rdmaDevice",), rules.RDMA_DEVICE, True)],
                         ids=lambda c: ".".join(c) if isinstance(c, tuple) else None)
def test_helm_and_python_take_the_same_values(path, rule, optional, tmp_path):
    for value in HOSTILE + [v + "\n" for v in HOSTILE]:
        python = rule.ok(value) or (optional and value == "")
        assert _schema_accepts(path, value, tmp_path) == python, (path, value)
