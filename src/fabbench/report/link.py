"""The link a run's bytes crossed, from its provenance, and busbw as a share of that link.

infiniband (native wire): the rate of the RDMA port the profile named (UCX_NET_DEVICES /
NCCL_IB_HCA), else the fastest active non-OmniPath port. omnipath: the fastest active hfi1 port.
ethernet and every TCP wire: the speed of the interface the profile pinned (btl_tcp_if_include,
NCCL/GLOO_SOCKET_IFNAME), else the fastest physical interface that is up. shm and loopback have
no link: efficiency is not computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

_IFACE_KEYS = ("OMPI_MCA_btl_tcp_if_include", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
_HCA_KEYS = ("UCX_NET_DEVICES", "NCCL_IB_HCA")


@dataclass(frozen=True)
class Link:
    gbps: float  # line rate, Gb/s (1e9 bits)
    what: str    # e.g. "mlx5_0 port 1 (100 Gb/sec (4X EDR))"

    def efficiency(self, busbw_gbps: float) -> float:
        """busbw (GB/s) over the line rate: a fraction."""
        return busbw_gbps * 8 / self.gbps


def _profile_value(run: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    env = {**run["provenance"].get("env", {}), **(run.get("profile_env") or {})}
    for key in keys:
        if env.get(key):
            return env[key].split(",")[0].split(":")[0].lstrip("=")
    return None


def link_of(run: dict[str, Any]) -> Link | None:
    emulated = run.get("emulation")
    if emulated:  # the shaped links: a collective over all nodes runs at the slowest one's
        slowest = min(emulated["links"], key=lambda x: x["speed_gbit_s"])
        return Link(slowest["speed_gbit_s"],
                    f"emulated {emulated['interface']} of {slowest['node']} "
                    f"({slowest['speed_gbit_s']:g} Gb/s, tc)")
    fabric = Path(run["fabric"]).stem
    prov = run["provenance"]
    rdma = [p for p in prov.get("rdma", []) if p.get("active") and p.get("rate_gbps")]
    if run.get("wire", "native") == "native":
        if fabric == "omnipath":
            hfi = [p for p in rdma if p["device"].startswith("hfi1") or p.get("driver") == "hfi1"]
            return _fastest_port(hfi)
        if fabric == "infiniband":
            ib = [p for p in rdma if not (p["device"].startswith("hfi1")
                                          or p.get("driver") == "hfi1")]
            named = _profile_value(run, _HCA_KEYS)
            chosen = [p for p in ib if p["device"] == named] or ib
            return _fastest_port(chosen)
    if fabric == "shm":
        return None
    nics = prov.get("nics", [])
    named = _profile_value(run, _IFACE_KEYS)
    if named:
        nic = next((n for n in nics if n["name"] == named), None)
        if nic is None or nic.get("kind") == "loopback" or not nic.get("speed_mbps"):
            return None
        return Link(nic["speed_mbps"] / 1000, f"{nic['name']} ({nic['speed_mbps']} Mb/s)")
    up = [n for n in nics if n.get("pci") and n.get("speed_mbps") and n.get("operstate") == "up"]
    if not up:
        return None
    nic = max(up, key=lambda n: n["speed_mbps"])
    return Link(nic["speed_mbps"] / 1000, f"{nic['name']} ({nic['speed_mbps']} Mb/s)")


@dataclass(frozen=True)
class Ceiling:
    """The wire's practical ceiling measured in the run, per direction."""

    gbps: float  # Gb/s (1e9 bits) per direction
    what: str    # e.g. "iperf3 both ways node0<->node1"

    def efficiency(self, busbw_gbps: float) -> float:
        return busbw_gbps * 8 / self.gbps


def ceiling_of(ceilings: list[dict[str, Any]]) -> Ceiling | None:
    """The ceiling busbw is held against: both directions at once when measured (a ring
    allreduce and a bidirectional sendrecv load both), else one direction."""
    done = {c["mode"]: c for c in ceilings if c.get("per_direction_gbit_s")}
    c = done.get("bidir") or done.get("one-way")
    if c is None:
        return None
    ways = "both ways" if c["mode"] == "bidir" else "one way"
    return Ceiling(c["per_direction_gbit_s"], f"{c['tool']} {ways} {c['client']['host']}<->"
                   f"{c['server']['host']}, {c['per_direction_gbit_s']:.3g} Gb/s per direction")


def _fastest_port(ports: list[dict[str, Any]]) -> Link | None:
    if not ports:
        return None
    p = max(ports, key=lambda p: p["rate_gbps"])
    return Link(float(p["rate_gbps"]), f"{p['device']} port {p['port']} ({p['rate']})")


def format_gbps(gbps: float) -> str:
    return f"{gbps:g} Gb/s"
