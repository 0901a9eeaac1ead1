"""An emulated cluster as the rest of fabbench sees it: nodes with a hostname, an address and a
link, and the one way to run a command on a node (inside its network namespace, under its own
hostname). Saved as JSON in the cluster's state directory; FABBENCH_EMULATION names that file
for `fabbench run`, its launchers and its ranks."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from fabbench.emulate.cluster_spec import Link
from fabbench.errors import UsageError

ENV = "FABBENCH_EMULATION"
NODE_IFACE = "fbnet0"  # every node's interface has this name, as a real cluster's eth0 would
STATE_FILE = "cluster.json"


@dataclass(frozen=True, kw_only=True)
class Node:
    index: int
    hostname: str
    netns: str
    address: str
    veth: str  # the switch end of its link (root namespace)
    link: Link


@dataclass(frozen=True, kw_only=True)
class Cluster:
    owner_pid: int
    subnet: str
    bridge: str
    bridge_address: str
    nodes: tuple[Node, ...]
    ranks_per_node: int
    state_dir: str
    standing: bool = False  # made by `emulate up` (stays until `emulate down`)
    iface: str = NODE_IFACE

    def __post_init__(self) -> None:
        if not self.nodes:
            raise UsageError("an emulated cluster needs at least one node")

    @property
    def state_file(self) -> Path:
        return Path(self.state_dir) / STATE_FILE

    @property
    def agent(self) -> Path:
        """Runs a command on a node as ssh would: Open MPI's rsh agent, horovodrun's ssh."""
        return Path(self.state_dir) / "bin" / "ssh"

    @property
    def enter(self) -> Path:
        """Run inside a node's namespace: becomes the node (hostname, hosts, cgroups), execs."""
        return Path(self.state_dir) / "bin" / "enter"

    @property
    def hostfile(self) -> Path:
        return Path(self.state_dir) / "hostfile"

    @property
    def hosts_file(self) -> Path:
        """/etc/hosts as the nodes see it: this host's, then every node's name."""
        return Path(self.state_dir) / "hosts"

    @property
    def ranks(self) -> int:
        return len(self.nodes) * self.ranks_per_node

    def node_of_rank(self, rank: int) -> Node:
        return self.nodes[rank // self.ranks_per_node]

    def on(self, node: int, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` on node ``node``."""
        n = self.nodes[node]
        return ["ip", "netns", "exec", n.netns, "unshare", "--uts", "--", str(self.enter),
                n.hostname, *argv]

    def to_json(self) -> str:
        data = {k: getattr(self, k) for k in ("owner_pid", "subnet", "bridge", "bridge_address",
                                               "ranks_per_node", "state_dir", "standing",
                                               "iface")}
        data["nodes"] = [{"index": n.index, "hostname": n.hostname, "netns": n.netns,
                          "address": n.address, "veth": n.veth,
                          "link": {"rate_bit_s": n.link.rate_bit_s, "delay_us": n.link.delay_us,
                                   "loss_pct": n.link.loss_pct}} for n in self.nodes]
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        data = json.loads(text)
        data["nodes"] = tuple(Node(**{**n, "link": Link(**n["link"])}) for n in data["nodes"])
        return cls(**data)

    def write_files(self) -> None:
        """The state file, the hostfile and the agent (written last: the state file says the
        cluster is ready)."""
        try:
            own = Path("/etc/hosts").read_text()
        except OSError:
            own = "127.0.0.1 localhost\n"
        self.hosts_file.write_text(own.rstrip("\n") + "\n# fabbench emulate\n" + "".join(
            f"{n.address} {n.hostname}\n" for n in self.nodes))
        self.hostfile.write_text("".join(f"{n.address} slots={self.ranks_per_node}\n"
                                         for n in self.nodes))
        self.agent.parent.mkdir(parents=True, exist_ok=True)
        cases = "".join(f"    {n.address}|{n.hostname}) ns={n.netns}; name={n.hostname} ;;\n"
                        for n in self.nodes)
        self.agent.write_text(f"""#!/bin/sh
# fabbench emulate (owner pid {self.owner_pid}): run a command on an emulated node, as ssh
# would: skip ssh's options (before and after the host), take the host, join the rest into one
# command for sh.
host=
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-i|-l|-F|-E|-c|-m|-b) shift 2 ;;
    -*) shift ;;
    *) [ -n "$host" ] && break; host=$1; shift ;;
  esac
done
case "$host" in
{cases}    *) echo "fabbench emulate: no emulated node '$host'" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts -- {shlex.quote(str(self.enter))} "$name" \\
  /bin/sh -c "$*"
""")
        self.agent.chmod(0o755)
        self.enter.write_text(f"""#!/bin/sh
# fabbench emulate (owner pid {self.owner_pid}): become emulated node $1 and run the rest.
# Runs inside the node's network namespace, in the mount namespace `ip netns exec` made (which
# mounted a sysfs showing the node's own interfaces, hiding the host's cgroup mounts).
hostname "$1" || exit 1
mount --bind {shlex.quote(str(self.hosts_file))} /etc/hosts || exit 1
# the host's cgroup mounts again (daemons such as slurmd need them; a node runs without them)
{_cgroup_mounts()}
shift
exec "$@"
""")
        self.enter.chmod(0o755)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, self.state_file)


def _cgroup_mounts() -> str:
    """Shell lines mounting, under the node's fresh /sys, the cgroup file systems the host has
    (cgroup v1 hierarchies on a tmpfs, or one cgroup2)."""
    lines = []
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return ":"
    for ln in mounts:
        dev, where, fstype, opts = ln.split()[:4]
        if not where.startswith("/sys/fs/cgroup") or fstype not in ("tmpfs", "cgroup",
                                                                    "cgroup2"):
            continue
        lines.append(f"mkdir -p {shlex.quote(where)} 2>/dev/null; mount -t {fstype} -o "
                     f"{shlex.quote(opts)} {shlex.quote(dev)} {shlex.quote(where)} "
                     "2>/dev/null")
    return "\n".join(lines) or ":"


def read(path: str | os.PathLike[str]) -> Cluster:
    """The cluster a state file describes, its owner alive or not; a missing or unreadable file
    is a UsageError."""
    try:
        return Cluster.from_json(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"{ENV}={path}: cannot read the emulated cluster: {exc.strerror}") \
            from None
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{ENV}={path}: not an emulated cluster's state file ({exc})") from None


def load(path: str | os.PathLike[str]) -> Cluster:
    """The cluster a state file describes; a missing or stale one is a UsageError."""
    cluster = read(path)
    if not Path(f"/proc/{cluster.owner_pid}").exists():
        raise UsageError(f"{ENV}={path}: the emulated cluster's owner (pid "
                         f"{cluster.owner_pid}) is gone")
    return cluster


def current() -> Cluster | None:
    """The cluster this process runs under (FABBENCH_EMULATION), if any."""
    path = os.environ.get(ENV)
    return load(path) if path else None
