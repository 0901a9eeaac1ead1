"""The image's own checks, one set for every engine that builds it: each test takes the fixture
`image` (an :class:`Image`) that the module importing it defines; `from
integration.image_checks import *` imports the tests (__all__), and pytest collects them in that
module. tests/integration/test_image.py imports them for podman's build (its filesystem mounted,
run under chroot as the image's user), test_docker.py for Docker's (its layers mounted
read-only, run by `docker run`). This file is not a test module itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sh(argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kw)


@dataclass(frozen=True)
class Image:
    tag: str
    rootfs: Path
    work: Path  # the host folder bound at the image's working directory
    env: dict[str, str]
    user: str
    workdir: str
    entrypoint: list[str]

    def run(self, argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
        """Run argv inside the image as `podman run` would: its user, env and working dir."""
        cmd = ["chroot", f"--userspec={self.user}", str(self.rootfs), "/usr/bin/env", "-i",
               *[f"{k}={v}" for k, v in self.env.items()],
               "/bin/sh", "-c", 'cd "$0" && exec "$@"', self.workdir, *argv]
        return sh(cmd, timeout)


def manifest_of(image: Image) -> dict:
    return json.loads((image.rootfs / "etc/fabbench/build.json").read_text())


def results(image: Image) -> list[dict]:
    files = sorted((image.work / "results").glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    assert files, f"no results file under {image.work}/results"
    return [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]


def test_image_config(image: Image):
    assert image.entrypoint == ["fabbench"]
    assert image.user.split(":")[0] not in ("", "0", "root")
    assert "/opt/fabbench/venv/bin" in image.env["PATH"]


def test_build_manifest(image: Image):
    manifest = manifest_of(image)
    assert manifest["schema"] == "fabbench-build/1"
    assert manifest["image"]["flavor"] == "cpu"
    pins = dict(re.findall(r"^([A-Z0-9_]+)=(\S+)$",
                           (ROOT / "containers/versions.env").read_text(), re.M))
    c = manifest["components"]
    for name, pin in (("torch", "TORCH"), ("mpi4py", "MPI4PY"), ("horovod", "HOROVOD")):
        assert c[name]["version"].split("+")[0] == pins[f"{pin}_VERSION"], name
    for name in ("openmpi", "ucx", "libfabric", "psm2", "python", "fabbench", "iperf3"):
        assert c[name]["version"], name
    assert c["openmpi"]["version"].startswith("4.1.")
    assert c["nccl"]["version"] is None  # not in the cpu flavour


def test_horovod_is_built_with_mpi_and_gloo(image: Image):
    """Whether the build reused the setup's wheel or compiled the sdist (the build log says
    which), the image's Horovod has both controllers."""
    res = image.run(["/opt/fabbench/venv/bin/python", "-c", "import horovod.torch as hvd; "
                     "print(hvd.mpi_built(), hvd.gloo_built())"], timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split() == ["True", "True"], res.stdout


def test_the_ceilings_tools_are_in_the_image_and_iperf3_measures(image: Image):
    """A run in the image measures its wire with the tools fabbench.ceiling drives; iperf3
    really measures, on the image's loopback, one second, as the image's user."""
    from fabbench.ceiling.tools import TOOLS

    for tool in TOOLS.values():
        found = image.run(["/bin/sh", "-c", f"command -v {tool.binary}"], timeout=60)
        assert found.returncode == 0, f"{tool.binary} is not in the image"
    port = 20000 + os.getpid() % 20000
    res = image.run(["/bin/sh", "-c",
                     f"timeout 30 iperf3 -s -1 -B 127.0.0.1 -p {port} >/dev/null 2>&1 & "
                     f"sleep 1; timeout 30 iperf3 -c 127.0.0.1 -p {port} -t 1 -J; rc=$?; "
                     "wait; exit $rc"], timeout=120)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    received = json.loads(res.stdout)["end"]["sum_received"]
    assert received["bytes"] > 0 and received["bits_per_second"] > 0


def test_entrypoint_runs_two_mpi_ranks_over_ethernet(image: Image):
    res = image.run([*image.entrypoint, "run", "--fabric", "ethernet", "--ranks", "2",
                     "--sizes", "8,64K", "--budget", "0.05"], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    records = results(image)
    run, summary = records[0], records[-1]
    assert run["kind"] == "run" and run["fabric"] == "ethernet" and run["ranks"] == 2
    assert summary["kind"] == "summary" and summary["ok"] is True
    assert any(r["kind"] == "collective" for r in records)
    # the results file's provenance carries the image's build manifest
    assert run["provenance"]["build"] == manifest_of(image)


def test_sshd_for_the_mpi_operator_with_no_host_key_baked_in(image: Image):
    """containers/sshd.sh: the image carries sshd and fabbench-sshd (an MPIJob worker's
    command, which makes the host keys in the pod: none is in the image, or every container of
    it would share one), sshd's settings for the operator's keys at /root/.ssh, and the client's
    for the operator's *.svc hostfile names (tests/integration/test_k8s_mpijob_ssh.py runs it)."""
    root = image.rootfs
    assert not list((root / "etc/ssh").glob("ssh_host_*")), "host keys baked into the image"
    assert os.access(root / "usr/local/sbin/fabbench-sshd", os.X_OK)
    res = image.run(["/bin/sh", "-c", "ssh-keygen -q -t ed25519 -N '' -f /tmp/hk && "
                     "/usr/sbin/sshd -T -o HostKey=/tmp/hk && echo ---- && "
                     "ssh -G fb-fabbench-worker-0.fb-fabbench.bench.svc && echo ---- && "
                     "ssh -G elsewhere.example"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    server, client, other = (set(part.splitlines()) for part in res.stdout.split("----\n"))
    assert {"port 2222", "strictmodes no", "usepam no", "passwordauthentication no",
            "permitrootlogin without-password"} <= server, res.stdout
    assert {"port 2222", "stricthostkeychecking false", "userknownhostsfile /dev/null",
            "loglevel ERROR"} <= client, res.stdout
    assert "port 22" in other and "stricthostkeychecking false" not in other  # *.svc only


def test_fabbench_env_shows_the_build_manifest(image: Image):
    help_text = image.run([*image.entrypoint, "--help"], timeout=120)
    assert help_text.returncode == 0, help_text.stderr
    assert re.search(r"^\W*env\b", help_text.stdout, re.M), help_text.stdout
    res = image.run([*image.entrypoint, "env", "--json"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["build"] == manifest_of(image)


def apptainer_section(name: str) -> str:
    text = (ROOT / "Apptainer.def").read_text()
    m = re.search(rf"^%{name}\s*\n(.*?)(?=^%\w+|\Z)", text, re.S | re.M)
    assert m, name
    return m.group(1)


def apptainer_run(image: Image, section: str, args: list[str], timeout: float):
    """Run an Apptainer.def section in the image as `apptainer run/test` does: /bin/sh with
    %environment sourced first and the arguments as "$@"."""
    script = apptainer_section("environment") + "\n" + apptainer_section(section)
    return image.run(["/bin/sh", "-c", script, "apptainer", *args], timeout=timeout)


def test_apptainer_runscript_runs_fabbench(image: Image):
    res = apptainer_run(image, "runscript", ["run", "--fabric", "ethernet", "--sizes", "8,64K",
                                             "--budget", "0.05"], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    records = results(image)
    assert records[0]["fabric"] == "ethernet" and records[-1]["ok"] is True


def test_apptainer_self_test(image: Image):
    res = apptainer_run(image, "test", [], timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]
    assert "fabbench self-test passed" in res.stdout


__all__ = [name for name in dir() if name.startswith("test_")]  # the checks, for `import *`
