"""launch.runtimes: each container runtime wraps a rank command as the Slurm template did, and
says what it leaves out and what GPUs need."""

from __future__ import annotations

import pytest

from fabbench.errors import UsageError
from fabbench.launch import runtimes
from fabbench.launch.runtimes import Container
from fabbench.launch.words import Shell, shell_line

RESULTS = Shell('"$results_dir"')
BINDS = ("/dev/infiniband", "/opt/site:/site", "/sys/class/infiniband")


@pytest.mark.parametrize("name, gpus, line, results", [
    ("none", False, "", None),
    ("apptainer", True, "apptainer exec --nv --bind \"$results_dir\" --bind /dev/infiniband "
     "--bind /opt/site:/site --bind /sys/class/infiniband 'img#1'", None),
    ("charliecloud", False, "ch-run --set-env -b \"$results_dir:/mnt/0\" -b /opt/site:/site "
     "'img#1' --", "/mnt/0"),
    ("pyxis", False, "--container-image='img#1' --container-mounts=\"$results_dir:$results_dir\""
     ",/dev/infiniband:/dev/infiniband,/opt/site:/site,"
     "/sys/class/infiniband:/sys/class/infiniband", None),
])
def test_runtimes_wrap_as_the_slurm_template_did(name, gpus, line, results):
    wrapped = runtimes.runtime(name).wrap(Container(image="img#1", results=RESULTS, binds=BINDS,
                                                 gpus=gpus))
    assert shell_line(wrapped.words) == line
    assert wrapped.results == results


def test_charliecloud_says_what_it_shares_and_what_gpus_need():
    wrapped = runtimes.runtime("charliecloud").wrap(
        Container(image="i", results="/r", binds=BINDS, gpus=True))
    assert wrapped.notes == ("No bind for /dev/infiniband, /sys/class/infiniband: ch-run shares "
                             "the host's /dev, /proc and /sys.",)
    assert "ch-fromhost --nvidia" in (wrapped.gpu_note or "")
    assert wrapped.words[:4] == ("ch-run", "--set-env", "-b", "/r:/mnt/0")


def test_in_container_for_a_plain_path_and_the_refusals():
    argv = runtimes.in_container("apptainer", ["fabbench", "run"],
                                 Container(image="f.sif", results="/home/u/out"))
    assert argv == ["apptainer", "exec", "--bind", "/home/u/out", "f.sif", "fabbench", "run"]
    with pytest.raises(UsageError, match="srun"):
        runtimes.in_container("pyxis", ["x"], Container(image="i", results="/r"))
    with pytest.raises(UsageError, match="unknown container runtime 'docker'"):
        runtimes.runtime("docker")
