"""Turn a plan and its fabric profile into the environment and MCA parameters of the ranks."""

from __future__ import annotations

import os
from dataclasses import dataclass

from fabbench.errors import UsageError
from fabbench.fabrics import Profile, Settings, load_profile, require_hardware
from fabbench.fabrics.detect import detect_fabric, first_active_rdma_device
from fabbench.launch.iface import Picked, pick_interface
from fabbench.plan import Plan


@dataclass(frozen=True)
class Resolved:
    profile: Profile
    settings: Settings  # placeholders filled in
    iface: Picked | None = None  # the interface this rank found, when the plan names none

    def env(self) -> dict[str, str]:
        """Everything the ranks need set, MCA parameters as OMPI_MCA_* variables."""
        env = dict(self.settings.env)
        env.update({f"OMPI_MCA_{k}": v for k, v in self.settings.mca.items()})
        return env


def resolve_fabric(name: str) -> str:
    return detect_fabric() if name == "auto" else name


def resolve(plan: Plan, *, check_hardware: bool = True) -> Resolved:
    """Load the plan's profile, check the hardware is there, fill in interface and device. An
    interface the plan does not name is found here (launch.iface, a peer's name waited for as
    long as the rendezvous would wait); a profile that needs one when none is found is refused,
    saying what was tried."""
    profile = load_profile(resolve_fabric(plan.fabric))
    if check_hardware:
        require_hardware(profile, plan.wire)
    settings = profile.settings(plan.backend, plan.wire, plan.gpudirect)
    picked = None if plan.iface else pick_interface(wait_s=2 * plan.timeout_s)
    if picked is not None and picked.name is None and _needs(settings, "iface"):
        raise UsageError(f"the fabric profile needs a network interface ({{iface}}) and none "
                         f"was found ({picked.why}): give --iface")
    values = {"iface": plan.iface or (picked.name if picked else None),
              "rdma_device": plan.rdma_device or first_active_rdma_device()}
    return Resolved(profile, settings.resolve(values), picked)


def _needs(settings: Settings, placeholder: str) -> bool:
    mark = "{" + placeholder + "}"
    return any(mark in v for v in (*settings.env.values(), *settings.mca.values()))


def apply(resolved: Resolved) -> None:
    """Set the profile's variables in this process, before any communication library starts."""
    os.environ.update(resolved.env())
