"""The Linux objects of an emulated cluster: one network namespace per node, a veth from each
node to a bridge, tc shaping on both ends of each veth, loss in each node's firewall; and their
removal.

Every object's name carries fabbench's prefix and the id of the process that owns the cluster
(``fabbench-<pid>-node<i>`` namespaces, ``fbbr<pid>`` bridge, ``fbv<pid>n<i>`` veths, state in
/run/fabbench/emulate/<pid>/), so several clusters can live at once and what a killed owner left
behind is recognised (its pid is gone) and removed by the next one, touching nothing else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import ipaddress
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from fabbench.emulate.cluster import NODE_IFACE, Cluster, Node
from fabbench.emulate.cluster_spec import Emulation, Link
from fabbench.errors import RunError, UsageError
from fabbench.procs import ToolRun, run_tool

STATE_ROOT = Path(os.environ.get("FABBENCH_EMULATE_STATE", "/run/fabbench/emulate"))
RANGE = ipaddress.IPv4Network("198.18.0.0/15")  # RFC 2544: benchmarking
CMD_TIMEOUT_S = 20
_NS = re.compile(r"^fabbench-(\d+)-node\d+$")
_LINK = re.compile(r"^fb(?:br(\d+)|v(\d+)n\d+)$")
_CAP_NET_ADMIN = 12


def ns_name(pid: int, index: int) -> str:
    return f"fabbench-{pid}-node{index}"


def bridge_name(pid: int) -> str:
    return f"fbbr{pid}"


def veth_name(pid: int, index: int) -> str:
    return f"fbv{pid}n{index}"


def _sh(argv: list[str], *, check: bool = True) -> ToolRun:
    p = run_tool(argv, CMD_TIMEOUT_S)
    if p is None:
        raise RunError(f"`{' '.join(argv)}` failed: {argv[0]} is not on PATH")
    if p.timed_out:
        raise RunError(f"`{' '.join(argv)}` did not finish within {CMD_TIMEOUT_S} s")
    if p.returncode is None:
        raise RunError(f"`{' '.join(argv)}` failed: {p.problem}")
    if check and p.returncode != 0:
        raise RunError(f"`{' '.join(argv)}` failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def require_privileges() -> None:
    """Root or CAP_NET_ADMIN, and ip/tc/unshare on PATH; else a UsageError (exit 2)."""
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise UsageError(f"fabbench emulate needs `{tool}` (iproute2 / util-linux); "
                             "it is not on PATH")
    if os.geteuid() == 0:
        return
    caps = 0
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text().splitlines()
        caps = int(next(ln for ln in status if ln.startswith("CapEff:")).split()[1], 16)
    if not caps >> _CAP_NET_ADMIN & 1:
        raise UsageError("fabbench emulate creates network namespaces: it needs root (or "
                         "CAP_NET_ADMIN and CAP_SYS_ADMIN)")


def alive(pid: int) -> bool:
    """Is the process there and not a zombie? (A pid reused by another process counts as
    alive: never remove what might belong to a live run.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """Serialise set-up and sweeping between fabbench processes (bounded wait)."""
    STATE_ROOT.mkdir(parents=True, exist_ok=True)
    with open(STATE_ROOT / ".lock", "w") as f:
        end = time.monotonic() + 120
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise RunError(f"another fabbench emulate held {STATE_ROOT}/.lock for "
                                   "120 s") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _netns_list() -> list[str]:
    p = _sh(["ip", "netns", "list"], check=False)
    return [ln.split()[0] for ln in p.stdout.splitlines() if ln.strip()]


def _links() -> list[str]:
    p = _sh(["ip", "-o", "link", "show"], check=False)
    return [ln.split(":")[1].strip().split("@")[0] for ln in p.stdout.splitlines()
            if ln.count(":") >= 2]


def leftovers(pid: int | None = None) -> dict[int, list[str]]:
    """fabbench's emulation objects on this machine by owner pid (all owners, or one)."""
    found: dict[int, list[str]] = {}
    for ns in _netns_list():
        m = _NS.match(ns)
        if m:
            found.setdefault(int(m.group(1)), []).append(f"netns {ns}")
    for link in _links():
        m = _LINK.match(link)
        if m:
            found.setdefault(int(m.group(1) or m.group(2)), []).append(f"link {link}")
    if STATE_ROOT.is_dir():
        for d in STATE_ROOT.iterdir():
            if d.is_dir() and d.name.isdigit():
                found.setdefault(int(d.name), []).append(f"state {d}")
    return found if pid is None else {pid: found[pid]} if pid in found else {}


def _kill_inside(ns: str) -> None:
    """End every process in one of our namespaces (they were started there by us)."""
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        pids = [int(p) for p in _sh(["ip", "netns", "pids", ns], check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        end = time.monotonic() + grace
        while time.monotonic() < end and any(alive(p) for p in pids):
            time.sleep(0.05)


def teardown(pid: int) -> list[str]:
    """Remove every object of owner ``pid``: processes in its namespaces, the namespaces (their
    veths go with them), its bridge and veths, its state. Returns what could not be removed."""
    failed = []
    for ns in _netns_list():
        m = _NS.match(ns)
        if m and int(m.group(1)) == pid:
            _kill_inside(ns)
            if _sh(["ip", "netns", "delete", ns], check=False).returncode != 0:
                failed.append(f"netns {ns}")
    for link in _links():  # veths went with their namespaces; the bridge remains
        m = _LINK.match(link)
        if m and int(m.group(1) or m.group(2)) == pid \
                and _sh(["ip", "link", "delete", link], check=False).returncode != 0 \
                and link in _links():
            failed.append(f"link {link}")
    shutil.rmtree(STATE_ROOT / str(pid), ignore_errors=True)
    return failed


def sweep_stale() -> list[int]:
    """Remove what emulations whose owner is gone (e.g. SIGKILLed) left behind. Returns their
    pids."""
    removed = []
    with _lock():
        for pid, objects in leftovers().items():
            if alive(pid):
                continue
            print(f"fabbench: emulate: removing what a stopped emulation (pid {pid}) left "
                  f"behind: {', '.join(objects)}", file=sys.stderr)
            failed = teardown(pid)
            if failed:
                raise RunError(f"could not remove {', '.join(failed)} of stopped emulation "
                               f"{pid}")
            removed.append(pid)
    return removed


def _free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of 198.18.0.0/15 no address of this machine's root namespace is in."""
    used = []
    for ln in _sh(["ip", "-o", "-4", "addr", "show"]).stdout.splitlines():
        words = ln.split()
        if "inet" in words:
            used.append(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    for net in RANGE.subnets(new_prefix=24):
        if not any(net.overlaps(u) for u in used):
            return net
    raise RunError("every /24 of 198.18.0.0/15 is in use on this machine")


def _tbf(link: Link) -> list[str]:
    """The tbf qdisc at the link's rate, where _shape puts it: under netem when the link has a
    delay, else at the root."""
    burst = max(32 * 1024, link.rate_bit_s // 8 // 4000)
    where = ["parent", "1:1", "handle", "10:"] if link.delay_us else ["root", "handle", "1:"]
    return [*where, "tbf", "rate", f"{link.rate_bit_s}bit", "burst", str(burst), "latency",
            "50ms"]


def _shape(dev: str, link: Link, ns: str | None) -> None:
    """tbf at the link's rate; netem first when the link has a delay (loss is _drop's)."""
    tc = ["tc"] + (["-n", ns] if ns else [])
    if link.delay_us:
        netem = ["netem", "limit", "100000", "delay", f"{link.delay_us:g}us"]
        p = _sh([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", *netem], check=False)
        if p.returncode != 0 and "kind is unknown" in p.stderr:
            raise UsageError("this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM): --delay "
                             "cannot be emulated here (--link rates and --loss can)")
        if p.returncode != 0:
            raise RunError(f"tc qdisc add dev {dev} netem failed: {p.stderr.strip()}")
    _sh([*tc, "qdisc", "add", "dev", dev, *_tbf(link)])


def set_rate(cluster: Cluster, index: int, rate_bit_s: int) -> Cluster:
    """Node ``index``'s link at a new rate, both ways, while the cluster runs (its delay and
    loss as they were), as a site's link renegotiates or is throttled; the state file says the
    new rate. The cluster as it now is."""
    if not 0 <= index < len(cluster.nodes):
        raise UsageError(f"no node {index}: the emulated cluster's nodes are "
                         f"0..{len(cluster.nodes) - 1}")
    node = cluster.nodes[index]
    link = dataclasses.replace(node.link, rate_bit_s=rate_bit_s)
    require_privileges()
    with _lock():
        for dev, ns in ((node.veth, []), (NODE_IFACE, ["-n", node.netns])):  # as _build's
            _sh(["tc", *ns, "qdisc", "change", "dev", dev, *_tbf(link)])
        nodes = tuple(dataclasses.replace(n, link=link) if n is node else n
                      for n in cluster.nodes)
        changed = dataclasses.replace(cluster, nodes=nodes)
        changed.write_files()
    return changed


def _drop(node: Node, nodes: list[Node]) -> None:
    """Loss, where a wire loses packets: after the sender. Each node's own firewall (in its
    namespace, gone with it) drops at random, as they arrive, the packets that crossed a lossy
    link: its own link's share of everything that comes in, and each other lossy node's share
    of what that node sent. A packet from A to B is so lost with A's link's probability, then
    B's, as netem on both links' egress would lose it; dropping on the way out instead would
    tell the sender (a local drop is an error to TCP, not a loss it must discover)."""
    rules: list[tuple[list[str], float]] = [([], node.link.loss_pct)] if node.link.loss_pct else []
    rules += [(["--source", other.address], other.link.loss_pct) for other in nodes
              if other is not node and other.link.loss_pct]
    if rules and shutil.which("iptables") is None:
        raise RunError("--loss needs iptables (Debian: iptables; .ci/apt-packages.txt)")
    for match, loss_pct in rules:
        _sh(["ip", "netns", "exec", node.netns, "iptables", "-w", "10", "-A", "INPUT",
             "--in-interface", NODE_IFACE, *match, "-m", "statistic", "--mode", "random",
             "--probability", f"{loss_pct / 100:.6f}", "-j", "DROP"])


def build(emulation: Emulation, pid: int | None = None, *, standing: bool = False) -> Cluster:
    """Create the cluster owned by ``pid`` (default: this process). On any failure what was
    made is removed and the error raised."""
    pid = os.getpid() if pid is None else pid
    require_privileges()
    with _lock():
        if leftovers(pid):
            raise RunError(f"emulation objects of pid {pid} already exist")
        try:
            return _build(emulation, pid, standing)
        except BaseException:
            teardown(pid)
            raise


def _build(emulation: Emulation, pid: int, standing: bool) -> Cluster:
    state = STATE_ROOT / str(pid)
    state.mkdir(parents=True)
    net = _free_subnet()
    hosts = list(net.hosts())
    bridge = bridge_name(pid)
    _sh(["ip", "link", "add", bridge, "type", "bridge"])
    _sh(["ip", "addr", "add", f"{hosts[-1]}/{net.prefixlen}", "dev", bridge])
    _sh(["ip", "link", "set", bridge, "up"])
    nodes = []
    for i in range(emulation.nodes):
        ns, veth, link = ns_name(pid, i), veth_name(pid, i), emulation.link_of(i)
        address = str(hosts[i])
        _sh(["ip", "netns", "add", ns])
        _sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", NODE_IFACE, "netns", ns])
        _sh(["ip", "link", "set", veth, "master", bridge, "up"])
        _sh(["ip", "-n", ns, "addr", "add", f"{address}/{net.prefixlen}", "dev", NODE_IFACE])
        _sh(["ip", "-n", ns, "link", "set", NODE_IFACE, "up"])
        _sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        _shape(veth, link, None)        # switch -> node
        _shape(NODE_IFACE, link, ns)    # node -> switch
        nodes.append(Node(index=i, hostname=f"node{i}", netns=ns, address=address, veth=veth,
                          link=link))
    for node in nodes:
        _drop(node, nodes)
    cluster = Cluster(owner_pid=pid, subnet=str(net), bridge=bridge,
                      bridge_address=str(hosts[-1]), nodes=tuple(nodes),
                      ranks_per_node=emulation.ranks_per_node, state_dir=str(state),
                      standing=standing)
    cluster.write_files()
    return cluster
