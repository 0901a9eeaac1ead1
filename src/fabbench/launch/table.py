"""The launcher table: how ranks are started × where they run → argv and environment.

Every launch command fabbench composes is composed here, and nowhere else:

    how (the primitive's launcher, comm.primitives) where
    mpirun      mpirun with the profile's MCA        host: -np N on this host
                parameters on its command line       nodes: a hostfile of the emulated nodes and an
                                                     rsh agent that enters a node's namespace
                                                     slurm: srun --mpi=pmix (PMIx, no mpirun)
                                                     kubernetes: the MPI operator's mpirun over the
                                                     hostfile it writes
    spawn       one process per rank, a TCP          host/nodes: RANK, WORLD_SIZE, LOCAL_RANK,
                rendezvous (MASTER_ADDR/PORT), as    MASTER_ADDR (node 0), MASTER_PORT per rank
                torchrun's environment               slurm: srun + MASTER_ADDR/PORT (the port rule)
                                                     kubernetes: an Indexed Job, torchrun in a pod
                                                     of several ranks
    horovodrun  horovodrun --gloo                    host, nodes (schedulers cannot start it)

and around a rank's command the container runtime (RUNTIMES: apptainer, charliecloud, pyxis,
none). A new launcher is one entry of TABLE; a new container runtime one entry of RUNTIMES.

Words of a command are plain strings (quoted for their target when written out) or ``Shell``
text (a shell variable, a Kubernetes $(VAR)), which is placed as it is. A line someone else fills
in too (the Helm chart cannot call Python) is a ``Line``, words with {name} placeholders and
``Each`` groups; the chart reads the Kubernetes lines (PODS) from files/launchers.yaml, which
fabbench.render.chart generates from them.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from fabbench.comm.primitives import RENDER_FAMILY
from fabbench.errors import UsageError
from fabbench.plan import PLAN_ENV, STATE_ENV, Plan, RunState, rank_env

if TYPE_CHECKING:
    from fabbench.emulate.cluster import Cluster
    from fabbench.launch.settings import Resolved

RANK_MODULE = (sys.executable, "-m", "fabbench.launch.rank")
# horovodrun --gloo prefixes every line of rank N's stdout with "[N]<stdout>:"; it has no
# option to turn that off
HOROVODRUN_PREFIX = r"^\[\d+\]<stdout>:"
HOROVODRUN = (sys.executable, "-m", "fabbench.launch.horovodrun")
HOSTFILE_K8S = "/etc/mpi/hostfile"  # where the MPI operator mounts the hostfile it writes


class Shell(str):
    """Text already in its target's syntax ("$results_dir", "$(MASTER_PORT)"): never quoted."""


def shell_line(words: Sequence[str]) -> str:
    """``words`` as one line of bash: literals quoted, Shell text as it is."""
    return " ".join(w if isinstance(w, Shell) else shlex.quote(w) for w in words)


# --- lines with placeholders ----------------------------------------------------------------
@dataclass(frozen=True)
class Each:
    """Words written once per item of one of a line's lists: ``mca`` (an MCA parameter: {key},
    {value}) or ``exports`` (a variable exported to every rank: {key})."""

    items: str
    words: tuple[str, ...]


Line = tuple[str | Each, ...]  # words with {name} placeholders, and Each groups
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _fill_word(word: str, values: Mapping[str, object]) -> str:
    text = _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), word)
    return Shell(text) if isinstance(word, Shell) else text


def fill(line: Line, values: Mapping[str, object],
         lists: Mapping[str, Sequence[Mapping[str, str]]] = MappingProxyType({})) -> list[str]:
    """``line``'s words with {name} filled from ``values``, each Each group once per item of
    ``lists[group.items]`` (filled from the item); Shell words stay Shell."""
    out: list[str] = []
    for part in line:
        if isinstance(part, Each):
            for item in lists.get(part.items, ()):
                out += [_fill_word(w, item) for w in part.words]
        else:
            out.append(_fill_word(part, values))
    return out


# --- the port rule --------------------------------------------------------------------------
# A job on a shared first node gets its own ten ports; its benchmarks (or the study's cells,
# which run one after the other) take them in turn.
PORT_BASE, PORT_JOBS, PORTS_PER_JOB = 20000, 4000, 10
# A Kubernetes job's pods have a network of their own: its one launch rendezvous at torch's
# usual port (`fabbench render k8s`, and the chart's masterPort, generated from it).
RENDEZVOUS_PORT = 29500


def rendezvous_port(job_id: int, index: int) -> int:
    """The rendezvous port of the ``index``-th launch of scheduler job ``job_id``."""
    return PORT_BASE + (job_id % PORT_JOBS) * PORTS_PER_JOB + index % PORTS_PER_JOB


def rendezvous_port_shell(job_var: str) -> Shell:
    """rendezvous_port(job, 0) as bash arithmetic on the variable ``job_var`` (a rendered
    script adds the launch's index)."""
    return Shell(f"{PORT_BASE} + ({job_var} % {PORT_JOBS}) * {PORTS_PER_JOB}")


def free_port() -> int:
    """A port free now on this host (a local launch's rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous_env(*, rank: int, world: int, local_rank: int, local_world: int, addr: str,
                   port: int | str) -> dict[str, str]:
    """The environment of one spawned rank (torchrun's variables)."""
    return {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "RANK": str(rank),
            "WORLD_SIZE": str(world), "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_world)}


# --- what a launch is ----------------------------------------------------------------------
@dataclass
class LaunchSpec:
    """What will be run: one command per process group, each with its environment additions."""

    commands: list[list[str]]
    env: list[dict[str, str]] = field(default_factory=list)
    # what a launcher puts before each line of a rank's stdout (horovodrun's "[0]<stdout>:"),
    # taken off so that the user reads the table as a directly started rank prints it
    stdout_prefix: str | None = None

    def describe(self) -> str:
        lines = []
        for argv, env in zip(self.commands, self.env, strict=True):
            shown = {k: v for k, v in env.items() if k not in (PLAN_ENV, STATE_ENV)}
            prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(shown.items()))
            lines.append(f"{prefix} {shlex.join(argv)}".strip())
        return "\n".join(lines)


def _as_root() -> list[str]:
    return ["--allow-run-as-root"] if os.geteuid() == 0 else []


def mpirun_settings(resolved: Resolved, payload: Mapping[str, str]) -> list[str]:
    """mpirun's options that carry the profile: root's permission, MCA parameters, and the
    environment variables exported to every rank: the profile's and the ``payload``'s (the
    plan and run state, and what the caller forwards)."""
    argv = _as_root()
    for key, value in resolved.settings.mca.items():
        argv += ["--mca", key, value]
    for key in sorted({*resolved.settings.env, *payload}):
        argv += ["-x", key]
    return argv


def _lists(mca: Mapping[str, str], exports: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """A line's Each lists: the MCA parameters ({key}, {value}) and exports ({key}), in order."""
    return {"mca": [{"key": k, "value": v} for k, v in mca.items()],
            "exports": [{"key": k} for k in exports]}


def mpirun_hostfile_line(*, per_node: bool = False, as_root: bool = False) -> Line:
    """mpirun over a hostfile someone else wrote (the MPI operator's): {hostfile}, {ranks},
    with ``per_node`` {per_node} ranks on each host (else as the hostfile's slots say), the
    MCA parameters and the exported variables (-x) in the order given."""
    return ("mpirun", "--hostfile", "{hostfile}", "-np", "{ranks}",
            *(("--map-by", "ppr:{per_node}:node") if per_node else ()), "--bind-to", "none",
            *(_as_root() if as_root else ()), Each("mca", ("--mca", "{key}", "{value}")),
            Each("exports", ("-x", "{key}")))


def mpirun_over_hostfile(hostfile: str, ranks: int, *, per_node: int | None = None,
                         mca: Mapping[str, str] = MappingProxyType({}),
                         exports: Sequence[str] = (), as_root: bool = False) -> list[str]:
    """mpirun_hostfile_line filled in: ``per_node`` ranks on each host (None: as the
    hostfile's slots say), ``mca`` parameters and ``exports`` (-x) in the order given."""
    return fill(mpirun_hostfile_line(per_node=per_node is not None, as_root=as_root),
                {"hostfile": hostfile, "ranks": ranks, "per_node": per_node},
                _lists(mca, exports))


def srun(nodes: int, per_node: int, launcher: str) -> list[str]:
    """An srun step of ``per_node`` tasks on each of ``nodes`` nodes; PMIx for MPI ranks."""
    argv = ["srun", "--kill-on-bad-exit=1", f"--nodes={nodes}", f"--ntasks-per-node={per_node}"]
    return [*argv, "--mpi=pmix"] if launcher == "mpirun" else argv


# torchrun starting {per_node} ranks of one of {nodes} pods of an Indexed Job (its node rank and
# the rendezvous from the pod's environment, Kubernetes' $(VAR)); the rank command follows
TORCHRUN_LINE: Line = (
    "torchrun", "--no-python", "--nnodes={nodes}", "--nproc-per-node={per_node}",
    Shell("--node-rank=$(FABBENCH_NODE_RANK)"), Shell("--master-addr=$(MASTER_ADDR)"),
    Shell("--master-port=$(MASTER_PORT)"))


def torchrun(nodes: int, per_node: int) -> list[str]:
    """TORCHRUN_LINE filled in."""
    return fill(TORCHRUN_LINE, {"nodes": nodes, "per_node": per_node})


# --- Kubernetes: how a pod starts the ranks (also the chart's, files/launchers.yaml) --------
@dataclass(frozen=True, kw_only=True)
class PodLaunch:
    """The line a pod runs before the program ({hostfile}, {ranks}, {nodes}, {per_node}, the
    lists ``mca`` and ``exports``); ``bare_when_one``: a pod of one rank runs the program
    itself."""

    line: Line
    bare_when_one: bool = False


# render family (comm.primitives.RENDER_FAMILY) -> the pod launch: an MPIJob's launcher pod runs
# mpirun over the operator's hostfile; an Indexed Job's pod runs torchrun for several ranks
PODS: Mapping[str, PodLaunch] = MappingProxyType({
    "mpi": PodLaunch(line=mpirun_hostfile_line()),
    "rendezvous": PodLaunch(line=TORCHRUN_LINE, bare_when_one=True)})


def pod_launch(family: str, *, nodes: int, per_node: int, program: Sequence[str],
               mca: Mapping[str, str] = MappingProxyType({}),
               exports: Sequence[str] = ()) -> list[str]:
    """What a pod of a Kubernetes job of render family ``family`` runs: the ranks of ``nodes``
    pods of ``per_node`` ranks each running ``program``, with ``mca`` parameters and ``exports``
    passed to every rank, in name order (as the chart's templates range over them), where the
    launcher takes them (mpirun)."""
    pod = PODS[family]
    if pod.bare_when_one and per_node == 1:
        return list(program)
    return [*fill(pod.line, {"hostfile": HOSTFILE_K8S, "ranks": nodes * per_node,
                             "nodes": nodes, "per_node": per_node},
                  _lists(dict(sorted(mca.items())), sorted(exports))), *program]


def _horovodrun(plan: Plan, hosts: str, iface: str | None, program: Sequence[str]) -> list[str]:
    """horovodrun --gloo starting ``program`` on HOSTS (host:slots,...), through
    launch/horovodrun.py (a failed rank said in one line, not a traceback of horovodrun's)."""
    argv = [*HOROVODRUN, "--gloo", "-np", str(plan.ranks), "-H", hosts,
            "--start-timeout", str(int(plan.timeout_s))]
    if iface:
        argv += ["--network-interfaces", iface]
    return [*argv, *program]


# --- this host and emulated nodes: the rows of the table fabbench starts itself -------------
@dataclass(frozen=True, kw_only=True)
class Where:
    """Where fabbench starts ranks itself: this host (cluster None) or an emulated cluster."""

    cluster: Cluster | None = None


# (plan, its profile settings, where, the program each rank runs, the environment every rank
# gets: its plan and run state, and what the caller forwards) -> what to start
Builder = Callable[["Plan", "Resolved", Where, Sequence[str], Mapping[str, str]], LaunchSpec]


def _mpirun(plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
            payload: Mapping[str, str]) -> LaunchSpec:
    env = {**resolved.settings.env, **payload}
    cluster = where.cluster
    if cluster is None:
        argv = ["mpirun", "-np", str(plan.ranks), "--oversubscribe", "--bind-to", "none"]
        return LaunchSpec([[*argv, *mpirun_settings(resolved, payload), *program]], [env])
    return LaunchSpec([cluster.on(0, [*mpirun_across(cluster, plan.ranks),
                                      *mpirun_settings(resolved, payload), *program])], [env])


def mpirun_across(cluster: Cluster, ranks: int) -> list[str]:
    """mpirun over an emulated cluster's hostfile, reaching the nodes through its agent (run on
    node 0); also emulate's launch of containerised ranks (launch/containers.py)."""
    return ["mpirun", "-np", str(ranks), "--hostfile", str(cluster.hostfile),
            "--bind-to", "none", "--oversubscribe",
            "--mca", "plm_rsh_agent", str(cluster.agent),
            "--mca", "plm_rsh_no_tree_spawn", "1",
            "--mca", "oob_tcp_if_include", cluster.iface,
            "--mca", "mpi_yield_when_idle", "1"]  # more ranks than cores


def _horovod(plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
             payload: Mapping[str, str]) -> LaunchSpec:
    env = {**resolved.env(), **payload}
    cluster = where.cluster
    if cluster is None:
        return LaunchSpec([_horovodrun(plan, f"localhost:{plan.ranks}", plan.iface, program)],
                          [env], stdout_prefix=HOROVODRUN_PREFIX)
    hosts = ",".join(f"{n.address}:{cluster.ranks_per_node}" for n in cluster.nodes)
    # horovodrun reaches the nodes through the agent, found as its "ssh" on PATH
    path = f"{cluster.agent.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    return LaunchSpec([cluster.on(0, _horovodrun(plan, hosts, cluster.iface, program))],
                      [{**env, "PATH": path}], stdout_prefix=HOROVODRUN_PREFIX)


def _spawn(plan: Plan, resolved: Resolved, where: Where, program: Sequence[str],
           payload: Mapping[str, str]) -> LaunchSpec:
    return _spawned(where.cluster, plan.ranks, program, {**resolved.env(), **payload})


def _spawned(cluster: Cluster | None, ranks: int, program: Sequence[str],
             env: Mapping[str, str]) -> LaunchSpec:
    """One process per rank, each with ``env`` and its rendezvous (node 0, a free port)."""
    port = free_port()
    commands, envs = [], []
    for rank in range(ranks):
        if cluster is None:
            commands.append(list(program))
            local_rank, local_world, addr = rank, ranks, "127.0.0.1"
        else:
            rpn = cluster.ranks_per_node
            commands.append(cluster.on(cluster.node_of_rank(rank).index, list(program)))
            local_rank, local_world, addr = rank % rpn, rpn, cluster.nodes[0].address
        envs.append({**env, **rendezvous_env(rank=rank, world=ranks, local_rank=local_rank,
                                             local_world=local_world, addr=addr, port=port)})
    return LaunchSpec(commands, envs)


def ranks_across(cluster: Cluster, launcher: str, program: Sequence[str],
                 env: Mapping[str, str]) -> LaunchSpec:
    """``program`` in every slot of ``cluster``, started from this host by ``launcher`` (mpirun
    over the cluster's hostfile and agent, exporting ``env``; or a spawn, the rendezvous at
    node 0), with ``env`` and no profile of fabbench's: emulate's containerised ranks
    (launch/containers.py), whose own fabbench applies the profile inside the image."""
    if launcher == "mpirun":
        exports = [w for key in sorted(env) for w in ("-x", key)]
        return LaunchSpec([cluster.on(0, [*mpirun_across(cluster, cluster.ranks), *_as_root(),
                                          *exports, *program])], [dict(env)])
    if launcher == "spawn":
        return _spawned(cluster, cluster.ranks, program, env)
    raise UsageError(f"{launcher} cannot start ranks across an emulated cluster from outside "
                     "its own rendezvous")


# how (comm.primitives' launcher of the primitive) -> its builder for this host and emulated nodes
TABLE: Mapping[str, Builder] = MappingProxyType({
    "mpirun": _mpirun, "spawn": _spawn, "horovodrun": _horovod})


def launch_spec(plan: Plan, resolved: Resolved, program: Sequence[str] = RANK_MODULE,
                state: RunState | None = None,
                forward: Mapping[str, str] = MappingProxyType({})) -> LaunchSpec:
    """The ranks of ``plan`` (and its launch's ``state``; None: a fresh launch's) on this host,
    or across the emulated cluster this process runs under, each running ``program``:
    fabbench's rank module, or (the fidelity check) a reference loop started exactly as
    fabbench's ranks are. ``forward``: variables every rank gets besides the plan's, on other
    (emulated) nodes too (mpirun exports them with -x)."""
    from fabbench import emulate

    return TABLE[plan.launcher](plan, resolved, Where(cluster=emulate.current()), program,
                                {**forward, **rank_env(plan, state or RunState())})


# --- schedulers: the study's launch of one cell inside an allocation -----------------------
def scheduled(scheduler: str, launcher: str, *, nodes: int, per_node: int,
              program: Sequence[str], master_addr: str, port: int, hostfile: str | None = None,
              forward: Mapping[str, str] = MappingProxyType({})
              ) -> tuple[list[str], dict[str, str]]:
    """The launch of ``program`` in a Slurm allocation ("slurm": an srun step) or in an MPI
    operator's launcher pod ("mpijob": mpirun over the workers' hostfile), and the environment
    it adds (the rendezvous of spawned ranks at ``master_addr``:``port``, then ``forward``:
    variables every rank gets, which mpirun exports with -x).

    Raises UsageError for a launcher a scheduler cannot start (horovodrun)."""
    if not schedulable(launcher):
        raise UsageError(f"{launcher} has its own rendezvous: {scheduler} cannot start it")
    env = {} if launcher == "mpirun" else {"MASTER_ADDR": master_addr, "MASTER_PORT": str(port)}
    env.update(forward)
    if scheduler == "mpijob":
        if hostfile is None:
            raise UsageError("an MPIJob launch needs the operator's hostfile")
        return [*mpirun_over_hostfile(hostfile, nodes * per_node, per_node=per_node,
                                      exports=list(env), as_root=True),
                *program], env
    if scheduler == "slurm":
        return [*srun(nodes, per_node, launcher), *program], env
    raise UsageError(f"unknown scheduler {scheduler!r}")


def schedulable(launcher: str) -> bool:
    """Can a scheduler (Slurm, Kubernetes) start ranks of this launcher's kind? (comm.primitives'
    RENDER_FAMILY: how it renders them, PMIx/an MPIJob or a rendezvous)."""
    return launcher in RENDER_FAMILY


# --- container runtimes around a rank's command ---------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Container:
    """What a rank's container needs: the image, the host paths bound into it (SRC or SRC:DST),
    the host directory the results are written to, and whether it sees the node's GPUs."""

    image: str
    results: str  # a path, or Shell text naming one ('"$results_dir"')
    binds: tuple[str, ...] = ()
    gpus: bool = False


@dataclass(frozen=True, kw_only=True)
class Wrapped:
    """A runtime's words around a rank command, and what the caller must know of them."""

    words: tuple[str, ...]         # placed before the rank's command (pyxis: srun's options)
    results: str | None = None     # where the results directory is inside; None: same path
    notes: tuple[str, ...] = ()    # what a reader of the launch must know (binds left out)
    gpu_note: str | None = None    # a step the site does once for GPUs (said, not done)


@dataclass(frozen=True, kw_only=True)
class Runtime:
    """A container runtime: how it wraps a rank command. ``launcher_options``: its words are
    options of the launcher (srun's, for pyxis), not a command of their own."""

    name: str
    wrap: Callable[[Container], Wrapped]
    launcher_options: bool = False


def _inner(word: str) -> str:
    """The text of a word as it reads inside double quotes."""
    if isinstance(word, Shell):
        if not (len(word) >= 2 and word[0] == word[-1] == '"'):
            raise ValueError(f"a Shell path must be double-quoted, not {word!r}")
        return word[1:-1]
    return "".join("\\" + c if c in '\\"$`' else c for c in word)


def _pair(src: str, dst: str) -> str:
    """SRC:DST as one word (double-quoted when a part is shell text)."""
    if isinstance(src, Shell) or isinstance(dst, Shell):
        return Shell(f'"{_inner(src)}:{_inner(dst)}"')
    return f"{src}:{dst}"


def _joined(*parts: str) -> Shell:
    """Parts glued into one bash word: literals quoted each, shell text as it is."""
    return Shell("".join(p if isinstance(p, Shell) else shlex.quote(p) for p in parts))


def _apptainer(c: Container) -> Wrapped:
    words = ["apptainer", "exec", *(["--nv"] if c.gpus else []), "--bind", c.results]
    for bind in c.binds:
        words += ["--bind", bind]
    return Wrapped(words=(*words, c.image))


CH_SHARED = ("/dev", "/proc", "/sys")  # ch-run binds these from the host itself
CH_RESULTS = "/mnt/0"  # one of the ten mount points Charliecloud images carry


def _shared_by_ch_run(bind: str) -> bool:
    src, _, dst = bind.partition(":")
    return all(any(p == top or p.startswith(top + "/") for top in CH_SHARED)
               for p in (src, dst or src))


def _charliecloud(c: Container) -> Wrapped:
    """ch-run cannot bind over /dev, /proc or /sys (it shares the host's), and a bind's
    destination must exist in a read-only image: the results go to /mnt/0."""
    words = ["ch-run", "--set-env", "-b", _pair(c.results, CH_RESULTS)]
    for bind in c.binds:
        if not _shared_by_ch_run(bind):
            words += ["-b", bind]
    shared = [b for b in c.binds if _shared_by_ch_run(b)]
    return Wrapped(words=(*words, c.image, "--"), results=CH_RESULTS,
                   notes=(f"No bind for {', '.join(shared)}: ch-run shares the host's /dev, "
                          "/proc and /sys.",) if shared else (),
                   gpu_note="GPUs: inject the host's NVIDIA libraries into the image once first "
                            "(ch-fromhost --nvidia IMAGE)." if c.gpus else None)


def _pyxis(c: Container) -> Wrapped:
    mounts = [b if ":" in b else f"{b}:{b}" for b in c.binds]  # pyxis takes SRC:DST
    return Wrapped(words=(
        _joined("--container-image=", c.image),
        _joined("--container-mounts=", _pair(c.results, c.results),
                *(part for m in mounts for part in (",", m)))))


RUNTIMES: Mapping[str, Runtime] = MappingProxyType({
    "apptainer": Runtime(name="apptainer", wrap=_apptainer),
    "charliecloud": Runtime(name="charliecloud", wrap=_charliecloud),
    "pyxis": Runtime(name="pyxis", wrap=_pyxis, launcher_options=True),
    "none": Runtime(name="none", wrap=lambda c: Wrapped(words=())),  # fabbench on the nodes
})


def runtime(name: str) -> Runtime:
    """The container runtime of this name (UsageError naming the known ones)."""
    if name not in RUNTIMES:
        raise UsageError(f"unknown container runtime {name!r} (known: {', '.join(RUNTIMES)})")
    return RUNTIMES[name]


def in_container(name: str, command: Sequence[str], container: Container) -> list[str]:
    """``command`` run in ``container`` by runtime ``name`` (a runtime of launcher options,
    pyxis, has no command of its own: refused here). The caller maps a results path inside
    the container through ``runtime(name).wrap(container).results``."""
    rt = runtime(name)
    if rt.launcher_options:
        raise UsageError(f"{name} is a launcher's option set (srun), not a command")
    return [*rt.wrap(container).words, *command]
