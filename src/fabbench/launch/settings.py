"""Turn a plan and its fabric profile into the environment and MCA parameters of the ranks."""

from __future__ import annotations

import os
from dataclasses import dataclass

from fabbench.fabrics import Profile, Settings, load_profile, require_hardware
from fabbench.fabrics.detect import detect_fabric, first_active_rdma_device
from fabbench.plan import Plan
from fabbench.sysinfo.sysfs import default_route_interface


@dataclass(frozen=True)
class Resolved:
    profile: Profile
    settings: Settings  # placeholders filled in

    def env(self) -> dict[str, str]:
        """Everything the ranks need set, MCA parameters as OMPI_MCA_* variables."""
        env = dict(self.settings.env)
        env.update({f"OMPI_MCA_{k}": v for k, v in self.settings.mca.items()})
        return env


def resolve_fabric(name: str) -> str:
    return detect_fabric() if name == "auto" else name


def resolve(plan: Plan, *, check_hardware: bool = True) -> Resolved:
    """Load the plan's profile, check the hardware is there, fill in interface and device."""
    profile = load_profile(resolve_fabric(plan.fabric))
    if check_hardware:
        require_hardware(profile, plan.wire)
    values = {"iface": plan.iface or default_route_interface(),
              "rdma_device": plan.rdma_device or first_active_rdma_device()}
    return Resolved(profile, profile.settings(plan.backend, plan.wire, plan.gpudirect)
                    .resolve(values))


def apply(resolved: Resolved) -> None:
    """Set the profile's variables in this process, before any communication library starts."""
    os.environ.update(resolved.env())
