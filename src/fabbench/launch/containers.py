"""Ranks in an image across the emulated nodes (`fabbench emulate --image IMG --runtime R -- run
...`): the hybrid model of HPC containers. The host's launcher starts one containerised
`fabbench run` per slot, and each one, finding itself launched, is one rank:

- mpi (and Horovod over MPI): the host's mpirun, with the cluster's hostfile and namespace agent,
  runs `RUNTIME ... IMAGE fabbench run ARGS` per slot (launch.runtimes' wrapping); the
  orted on each node is the host's, the rank's Open MPI the image's, and they meet through PMIx
  (the cpu image's Open MPI and PMIx are Debian's, as the host's: see docs/containers.md);
- gloo and nccl: one containerised process per rank on its node, rendezvous over TCP at node 0.

Under Apptainer the ranks run as the user while each node's orted runs as root (it entered the
node's namespaces), so PMIx's own uid check and its shared-memory store would refuse them:
PMIX_MCA_psec=none and PMIX_MCA_gds=hash are set for that launch (on a real cluster orted and
ranks are the same user and need neither).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from fabbench.emulate import session
from fabbench.emulate.cluster import ENV, Cluster
from fabbench.emulate.cluster_spec import Emulation
from fabbench.errors import RunError, UsageError
from fabbench.launch import local, runtimes
from fabbench.launch.launchers import LaunchSpec, ranks_across, schedulable

# the runtime's command, as found on PATH, or as an environment variable gives it (a site's
# `singularity`, or a wrapper that enters the runtime's own root: .ci/apptainer.sh exec)
COMMANDS = {"apptainer": ("apptainer", "FABBENCH_APPTAINER"),
            "charliecloud": ("ch-run", "FABBENCH_CH_RUN")}
RUNTIMES = tuple(COMMANDS)
# orted (root, in the node's namespaces) and apptainer's ranks (the user): see the docstring
APPTAINER_PMIX = {"PMIX_MCA_psec": "none", "PMIX_MCA_gds": "hash"}


def runtime_command(runtime: str) -> list[str]:
    """The words that start RUNTIME here; UsageError when it cannot be found."""
    if runtime not in COMMANDS:
        raise UsageError(f"--runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
    tool, var = COMMANDS[runtime]
    words = shlex.split(os.environ.get(var, "")) or [tool]
    if shutil.which(words[0]) is None:
        raise UsageError(f"--runtime {runtime}: `{words[0]}` is not on PATH (install it, or "
                         f"name the command in {var})")
    return words


def in_image(runtime: str, image: str, workdir: str, argv: list[str]) -> list[str]:
    """``argv`` run in ``image`` by ``runtime`` (launch.runtimes' wrapping, with this
    host's command for the runtime), in ``workdir`` bound into the container."""
    box = runtimes.Container(image=image, results=workdir)
    inside = runtimes.runtime(runtime).wrap(box).results or workdir
    words = runtimes.in_container(runtime, ["env", "-C", inside, *argv], box)
    tool = COMMANDS[runtime][0]
    if words[0] != tool:
        raise AssertionError(f"launch.runtimes' {runtime} starts with {words[0]!r}")
    return [*runtime_command(runtime), *words[1:]]


def _option(argv: list[str], name: str) -> str | None:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def check_image(runtime: str, image: str) -> None:
    """The runtime is known and found, the image exists; UsageError otherwise."""
    runtime_command(runtime)
    # a runtime command of the environment's may see another tree (a root of its own): then
    # the image is its to find
    if not os.environ.get(COMMANDS[runtime][1]) and not Path(image).exists():
        raise UsageError(f"--image {image}: no such file or directory")


def launcher_of(runtime: str, image: str, argv: list[str]) -> str:
    """The host launcher (mpirun, spawn) of `fabbench ARGV` with its ranks in ``image``;
    UsageError for what cannot run so (checked before any node is made)."""
    from fabbench.comm.primitives import REGISTRY

    check_image(runtime, image)
    if not argv or argv[0] != "run":
        raise UsageError("--image runs the ranks of a `run`: give `-- run --primitive ...`")
    if _option(argv, "--ranks") is not None:
        raise UsageError("--ranks: with --image the ranks are the cluster's slots "
                         "(--nodes x --ranks-per-node)")
    primitive = _option(argv, "--primitive")
    if primitive is None or primitive not in REGISTRY:
        raise UsageError("--image: give the run's --primitive after `--` (one of "
                         f"{', '.join(REGISTRY.names())}): it decides the host's launcher")
    launcher = REGISTRY.get(primitive).launcher(_option(argv, "--horovod-over"))
    if not schedulable(launcher):
        raise UsageError(f"--image: {launcher} cannot start containerised ranks (it has its "
                         "own rendezvous); use --horovod-over mpi")
    return launcher


def launch_spec(cluster: Cluster, runtime: str, image: str, argv: list[str]) -> LaunchSpec:
    """The host launcher's commands for `fabbench ARGV` (a `run`) in ``image``, one rank per
    slot of ``cluster``."""
    launcher = launcher_of(runtime, image, argv)
    rank = in_image(runtime, image, os.getcwd(), ["fabbench", *argv])
    # the ranks count the hosts they came up on against this (launch/world.py); the state
    # file is not in the image, so the ranks do not look for it
    env = {"FABBENCH_EXPECT_NODES": str(len(cluster.nodes)), ENV: "",
           **(APPTAINER_PMIX if runtime == "apptainer" else {})}
    return ranks_across(cluster, launcher, rank, env)


def run_in_image(emulation: Emulation, runtime: str, image: str, argv: list[str],
                 max_time_s: float) -> int:
    """Run `fabbench ARGV` (a run) with its ranks in ``image`` (containers.py) against a fresh
    cluster; returns the first failing rank's exit code, or 0."""
    launcher_of(runtime, image, argv)  # bad input: before any namespace is made
    with session.emulated(emulation) as cluster:
        session.describe(cluster)
        spec = launch_spec(cluster, runtime, image, argv)
        print(f"fabbench: emulate: {spec.describe()}", file=sys.stderr, flush=True)
        try:
            code, explained = local.run(spec, max_time_s, cluster.ranks)
        except RunError as exc:
            print(f"fabbench: error: emulate: {exc}", file=sys.stderr)
            return 124
        if explained:
            print(f"fabbench: emulate: {explained}", file=sys.stderr)
        return code
