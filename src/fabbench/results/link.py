"""The link a run's bytes crossed, from its provenance, and busbw as a share of that link.

Where the speed is read is the fabric profile's data ([link] of fabbench.fabrics.profile), never
the fabric's name: the run record carries it (``profile_link``); a record written before it did
takes it from the profile of that name on this host's search path, and, for a fabric no profile
here knows, reads the interface.
  rdma (native wire): the rate of the active port of the profile's hardware kind (verbs ports
      for infiniband, hfi1 ports for omnipath) that a ``device_env`` variable names (e.g.
      UCX_NET_DEVICES / NCCL_IB_HCA), else the fastest such port;
  nic, and every TCP wire: the speed of the interface an ``iface_env`` variable pinned
      (btl_tcp_if_include, NCCL/GLOO_SOCKET_IFNAME), else the fastest physical interface up;
  none (one host, shared memory) and loopback: no link, efficiency is not computed.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabbench.errors import UsageError
from fabbench.fabrics.profile import LinkSpec, load_profile
from fabbench.results.records import Ceiling, Nic, Port, Run


@dataclass(frozen=True)
class LinkRate:
    """The line rate of the link a run's bytes crossed, and where it was read."""

    speed_gbit_s: float  # line rate, Gbit/s (1e9 bits per second)
    what: str    # e.g. "mlx5_0 port 1 (100 Gb/sec (4X EDR))"

    def efficiency(self, busbw_gbyte_s: float) -> float:
        """busbw (GB/s) over the line rate: a fraction."""
        return busbw_gbyte_s * 8 / self.speed_gbit_s


def link_spec(run: Run) -> tuple[str, LinkSpec]:
    """(hardware kind, link spec) of the run's fabric profile."""
    recorded = run.profile_link
    if recorded:
        return recorded.hardware, LinkSpec(speed_from=recorded.speed_from,
                                           device_env=tuple(recorded.device_env),
                                           iface_env=tuple(recorded.iface_env))
    try:
        profile = load_profile(run.fabric)
    except UsageError:  # a site profile this host does not have: the interface it used
        return "none", LinkSpec(speed_from="nic")
    return profile.hardware, profile.link


def _profile_value(run: Run, keys: tuple[str, ...]) -> str | None:
    env = {**run.provenance.env, **(run.profile_env or {})}
    for key in keys:
        if env.get(key):
            return env[key].split(",")[0].split(":")[0].lstrip("=")
    return None


def _is_hfi(port: Port) -> bool:
    return port.device.startswith("hfi1") or port.driver == "hfi1"


def link_of(run: Run) -> LinkRate | None:
    emulated = run.emulation
    if emulated:  # the shaped links: a collective over all nodes runs at the slowest one's
        slowest = min(emulated.links or (), key=lambda x: x.speed_gbit_s or 0.0)
        return LinkRate(slowest.speed_gbit_s or 0.0,
                    f"emulated {emulated.interface} of {slowest.node} "
                    f"({slowest.speed_gbit_s:g} Gb/s, tc)")
    hardware, spec = link_spec(run)
    prov = run.provenance
    if spec.speed_from == "none":
        return None
    if spec.speed_from == "rdma" and run.wire in (None, "native"):  # None: fabbench/1
        rdma = [p for p in prov.rdma if p.active and p.rate_gbit_s
                and _is_hfi(p) == (hardware == "omnipath")]
        named = _profile_value(run, spec.device_env) if spec.device_env else None
        return _fastest_port([p for p in rdma if p.device == named] or rdma)
    named = _profile_value(run, spec.iface_env)
    if named:
        nic = next((n for n in prov.nics if n.name == named), None)
        return None if nic is None else _nic_link(nic)
    up = [link for n in prov.nics if n.pci and n.operstate == "up" and (link := _nic_link(n))]
    return max(up, key=lambda link: link.speed_gbit_s, default=None)


def _nic_link(nic: Nic) -> LinkRate | None:
    """An interface's line rate, where it tells one (a loopback's is no link)."""
    if nic.kind == "loopback" or not nic.speed_mbit_s:
        return None
    return LinkRate(nic.speed_mbit_s / 1000, f"{nic.name} ({nic.speed_mbit_s} Mb/s)")


@dataclass(frozen=True)
class MeasuredCeiling:
    """The wire's practical ceiling measured in the run, per direction."""

    speed_gbit_s: float  # Gbit/s (1e9 bits per second) per direction
    what: str            # e.g. "iperf3 both ways node0<->node1"
    retransmits: int | None = None  # TCP segments the tool resent (None: it does not say)

    def efficiency(self, busbw_gbyte_s: float) -> float:
        return busbw_gbyte_s * 8 / self.speed_gbit_s


def ceiling_of(ceilings: list[Ceiling]) -> MeasuredCeiling | None:
    """The ceiling busbw is held against: both directions at once when measured (a ring
    allreduce and a bidirectional sendrecv load both), else one direction."""
    done = {c.mode: c for c in ceilings if c.per_direction_gbit_s}
    c = done.get("bidir") or done.get("one-way")
    if c is None or c.per_direction_gbit_s is None:
        return None
    ways = "both ways" if c.mode == "bidir" else "one way"
    resent = [d.retransmits for d in c.directions if d.retransmits is not None]
    return MeasuredCeiling(c.per_direction_gbit_s, f"{c.tool} {ways} {c.client.host}<->"
                           f"{c.server.host}, {c.per_direction_gbit_s:.3g} Gb/s per direction",
                           sum(resent) if resent else None)


def _fastest_port(ports: list[Port]) -> LinkRate | None:
    """The fastest of ports that all have a rate."""
    if not ports:
        return None
    p = max(ports, key=lambda p: p.rate_gbit_s or 0.0)
    return LinkRate(float(p.rate_gbit_s or 0.0), f"{p.device} port {p.port} ({p.rate})")


def format_gbit_s(gbit_s: float) -> str:
    return f"{gbit_s:g} Gb/s"
