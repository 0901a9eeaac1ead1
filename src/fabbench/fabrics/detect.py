"""``--fabric auto`` and the hardware check for fabrics that need devices."""

from __future__ import annotations

import os

from fabbench.errors import UsageError
from fabbench.fabrics.profile import Profile
from fabbench.sysinfo.sysfs import hfi_devices, is_omnipath, rdma_ports


def detect_fabric(root: str | os.PathLike[str] = "/") -> str:
    """omnipath when an active hfi1 port (or /dev/hfi1_*) exists, infiniband when an active
    verbs port (InfiniBand or RoCE) exists, else ethernet."""
    ports = [p for p in rdma_ports(root) if p.active]
    if any(is_omnipath(p) for p in ports) or (not ports and hfi_devices(root)):
        return "omnipath"
    if ports:
        return "infiniband"
    return "ethernet"


def first_active_rdma_device(root: str | os.PathLike[str] = "/") -> str | None:
    for port in rdma_ports(root):
        if port.active and not is_omnipath(port):
            return port.device
    return None


def require_hardware(profile: Profile, wire: str, root: str | os.PathLike[str] = "/") -> None:
    """Refuse a hardware fabric on a host without its devices, unless --wire tcp was given."""
    if profile.hardware == "none" or wire == "tcp":
        return
    ports = [p for p in rdma_ports(root) if p.active]
    if profile.hardware == "omnipath" and not (any(is_omnipath(p) for p in ports)
                                               or hfi_devices(root)):
        raise UsageError(f"fabric {profile.name!r} needs an OmniPath (hfi1) device and this host "
                         "has none; add --wire tcp to run its libfabric/OFI stack over TCP")
    if profile.hardware == "infiniband" and not [p for p in ports if not is_omnipath(p)]:
        raise UsageError(f"fabric {profile.name!r} needs an active InfiniBand/RoCE port and this "
                         "host has none; add --wire tcp to run its UCX stack over TCP")
