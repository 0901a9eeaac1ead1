"""Network and RDMA inventory read from a sysfs tree.

Everything takes ``root`` (default "/") so detection is tested over recorded trees of real hosts
(a Mellanox InfiniBand host, a RoCE host, an OmniPath host, an Ethernet-only host).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True, kw_only=True)
class NetDevice:
    name: str
    operstate: str | None
    speed_mbit_s: int | None  # None when the kernel does not know (loopback, virtual, down)
    mtu: int | None
    kind: str  # "ether", "infiniband" (IPoIB), "loopback", "other"
    pci: bool  # backed by a physical device

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class RdmaPort:
    device: str  # e.g. mlx5_0, hfi1_0
    port: int
    state: str | None  # "ACTIVE", "DOWN", ...
    rate: str | None  # e.g. "100 Gb/sec (4X EDR)"
    link_layer: str | None  # "InfiniBand" or "Ethernet" (RoCE)
    driver: str | None

    @property
    def active(self) -> bool:
        return (self.state or "").upper().endswith("ACTIVE")

    @property
    def rate_gbit_s(self) -> float | None:
        try:
            return float((self.rate or "").split()[0])
        except (ValueError, IndexError):
            return None

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "active": self.active, "rate_gbit_s": self.rate_gbit_s}


_ARPHRD = {"1": "ether", "32": "infiniband", "772": "loopback"}


def net_devices(root: str | os.PathLike[str] = "/") -> list[NetDevice]:
    base = Path(root, "sys/class/net")
    devices = []
    for entry in sorted(base.iterdir()) if base.is_dir() else []:
        speed = _read(entry / "speed")
        mtu = _read(entry / "mtu")
        devices.append(NetDevice(
            name=entry.name,
            operstate=_read(entry / "operstate"),
            speed_mbit_s=int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0
            else None,
            mtu=int(mtu) if mtu and mtu.isdigit() else None,
            kind=_ARPHRD.get(_read(entry / "type") or "", "other"),
            pci=(entry / "device").exists(),
        ))
    return devices


def rdma_ports(root: str | os.PathLike[str] = "/") -> list[RdmaPort]:
    base = Path(root, "sys/class/infiniband")
    ports = []
    for dev in sorted(base.iterdir()) if base.is_dir() else []:
        driver_link = dev / "device" / "driver"
        driver = os.path.basename(os.readlink(driver_link)) if driver_link.is_symlink() else None
        for port in sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []:
            state = _read(port / "state")
            ports.append(RdmaPort(
                device=dev.name,
                port=int(port.name) if port.name.isdigit() else 0,
                state=state.split(":", 1)[-1].strip() if state else None,
                rate=_read(port / "rate"),
                link_layer=_read(port / "link_layer"),
                driver=driver,
            ))
    return ports


def is_omnipath(port: RdmaPort) -> bool:
    return port.device.startswith("hfi1") or port.driver == "hfi1"


def hfi_devices(root: str | os.PathLike[str] = "/") -> list[str]:
    dev = Path(root, "dev")
    return sorted(p.name for p in dev.glob("hfi1_*")) if dev.is_dir() else []


def gpudirect_rdma(root: str | os.PathLike[str] = "/") -> bool:
    """GPUDirect RDMA is possible when the peer-memory module is loaded (docs/fabrics.md)."""
    return Path(root, "sys/module/nvidia_peermem").exists() or Path(
        root, "sys/kernel/mm/memory_peers/nv_mem").exists()


def default_route_interface(root: str | os.PathLike[str] = "/") -> str | None:
    """The interface of the IPv4 default route, from /proc/net/route."""
    text = _read(Path(root, "proc/net/route")) or ""
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 2 and fields[1] == "00000000":
            return fields[0]
    return None
