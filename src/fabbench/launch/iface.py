"""The network interface of a rank's TCP traffic when none is given (--iface, the chart's
``iface``): each rank finds its own, as nobody knows a pod's interface names in advance. The
first rule that answers, in order:

  1. the interface holding this host's source address on the route to the rendezvous peer,
     which is the address the kernel itself picks to reach it: MASTER_ADDR (torch's rendezvous;
     the chart's ``<job>-0.<job>``, which may resolve only once that pod has an address: it is
     waited for), else mpirun's own host (OMPI_MCA_orte_hnp_uri, in every rank mpirun starts);
  2. the interface of the IPv4 default route;
  3. the one interface that is up besides loopback (an emulated node's fbnet0, which has no
     default route).

Every answer says which rule gave it and why the ones before it did not (the run record's
``picked``, and a line on the rank's stderr); when none answers the name is None and the reason
says what was tried. What the host has is taken through small functions given as arguments, so
that the rules are tested without the host's network.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fabbench.sysinfo.sysfs import default_route_interface, net_devices

#: Seconds between two lookups of a peer's name that does not resolve yet.
RETRY_S = 0.5

Lookup = Callable[[str], list[str]]            # a name -> its addresses ([] : not resolved)
SourceOf = Callable[[str], str | None]         # a peer's address -> this host's source address
Addresses = Callable[[], Mapping[str, list[str]]]  # interface -> its addresses


@dataclass(frozen=True)
class Picked:
    """The interface found (None: none) and how, in words."""

    name: str | None
    why: str

    def note(self) -> str:
        """The run record's ``picked`` entry."""
        return f"iface={self.name} ({self.why})"


def lookup(host: str) -> list[str]:
    """The addresses a name resolves to, IPv4 first; [] when it does not resolve (yet)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError):
        return []
    ordered = sorted(found, key=lambda a: a[0] != socket.AF_INET)
    return list(dict.fromkeys(str(a[4][0]) for a in ordered))


def source_address(peer: str) -> str | None:
    """This host's address on the route to ``peer``, as the kernel picks it (a UDP socket's
    connect sends nothing); None when no route reaches it."""
    family = socket.AF_INET6 if ":" in peer else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((peer, 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


def host_addresses() -> dict[str, list[str]]:
    """Every interface's IPv4 and IPv6 addresses."""
    import psutil

    return {name: [a.address for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)]
            for name, addrs in psutil.net_if_addrs().items()}


def holder(address: str, addresses: Mapping[str, list[str]]) -> str | None:
    """The interface holding ``address`` (an IPv6 address's %scope ignored)."""
    want = ipaddress.ip_address(address.split("%")[0])
    for name, addrs in addresses.items():
        for a in addrs:
            try:
                if ipaddress.ip_address(a.split("%")[0]) == want:
                    return name
            except ValueError:
                continue
    return None


def hnp_address(uri: str) -> str | None:
    """The first address of mpirun's contact URI (OMPI_MCA_orte_hnp_uri, Open MPI 4:
    ``JOBID.VPID;tcp://ADDR[,ADDR...]:PORT;tcp6://[ADDR]:PORT``); None when it has none."""
    for part in uri.split(";")[1:]:
        scheme, sep, rest = part.partition("://")
        if not sep or scheme not in ("tcp", "tcp6"):
            continue
        first = rest.rpartition(":")[0].split(",")[0].strip("[]")
        try:
            return str(ipaddress.ip_address(first))
        except ValueError:
            continue
    return None


def _peer(env: Mapping[str, str]) -> tuple[str, str] | None:
    """(what it is, its name or address): the rendezvous peer this rank's job names."""
    if env.get("MASTER_ADDR"):
        return f"MASTER_ADDR {env['MASTER_ADDR']}", env["MASTER_ADDR"]
    address = hnp_address(env.get("OMPI_MCA_orte_hnp_uri", ""))
    if address is not None:
        return "mpirun's host (OMPI_MCA_orte_hnp_uri)", address
    return None


def _by_peer(what: str, name: str, wait_s: float, resolve: Lookup, source_of: SourceOf,
             addresses: Addresses, sleep: Callable[[float], None],
             clock: Callable[[], float]) -> tuple[str | None, str]:
    """(interface, why) of rule 1; the interface None when it does not answer."""
    end = clock() + wait_s
    found = resolve(name)
    while not found and clock() < end:
        sleep(RETRY_S)
        found = resolve(name)
    if not found:
        return None, f"{what} did not resolve within {wait_s:g} s"
    peer = found[0]
    source = source_of(peer)
    if source is None:
        return None, f"no route to {what} ({peer})"
    iface = holder(source, addresses())
    if iface is None:
        return None, f"no interface holds {source}, the source address towards {what}"
    at = "" if peer == name else f" = {peer}"
    return iface, f"holds {source}, the source address of the route to {what}{at}"


def pick_interface(env: Mapping[str, str] | None = None, *, wait_s: float = 60.0,
                   root: str | os.PathLike[str] = "/", resolve: Lookup = lookup,
                   source_of: SourceOf = source_address, addresses: Addresses = host_addresses,
                   sleep: Callable[[float], None] = time.sleep,
                   clock: Callable[[], float] = time.monotonic) -> Picked:
    """This rank's interface by the module's rules (``wait_s``: how long a peer's name may take
    to resolve); its name None when no rule answers, and the reason then says what was tried."""
    env = os.environ if env is None else env
    tried = []
    peer = _peer(env)
    if peer is not None:
        iface, why = _by_peer(*peer, wait_s, resolve, source_of, addresses, sleep, clock)
        if iface is not None:
            return Picked(iface, why)
        tried.append(why)
    else:
        tried.append("no rendezvous peer named (MASTER_ADDR, OMPI_MCA_orte_hnp_uri)")
    default = default_route_interface(root)
    if default is not None:
        return Picked(default, "the default route's; " + "; ".join(tried))
    tried.append("no default route")
    up = [d.name for d in net_devices(root) if d.operstate == "up" and d.kind != "loopback"]
    if len(up) == 1:
        return Picked(up[0], "the only interface up besides loopback; " + "; ".join(tried))
    tried.append(f"interfaces up besides loopback: {', '.join(up) or 'none'}")
    return Picked(None, "; ".join(tried))

