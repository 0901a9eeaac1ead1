"""The fabric environment of rendered jobs, taken from the fabric profiles (one source of truth).

A profile value with a placeholder ("{iface}", "{rdma_device}") is filled in when the user gave
the value (--iface, --rdma-device); otherwise the variable is left out of the rendered file and
each rank fills it in itself at start (``fabbench run`` applies its profile before any
communication library starts: the default route's interface, the first active RDMA port).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabbench.fabrics.profile import Profile, load_profile

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class FabricEnv:
    profile: Profile
    backend: str  # the profile section: mpi, gloo or nccl
    env: dict[str, str]  # every variable, MCA parameters as OMPI_MCA_*
    mca: dict[str, str]  # the MCA parameters alone (mpirun --mca)
    deferred: tuple[str, ...]  # variables left to the ranks (a placeholder without a value)


def fill(text: str, values: dict[str, str | None]) -> str | None:
    """The text with its placeholders filled in, or None when one has no value."""
    missing = [m for m in _PLACEHOLDER.findall(text) if values.get(m) is None]
    if missing:
        return None
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), text)


def fabric_env(fabric: str, backend: str, wire: str, *, gpudirect: str = "auto",
               iface: str | None, rdma_device: str | None) -> FabricEnv:
    profile = load_profile(fabric)
    settings = profile.settings(backend, wire, gpudirect)
    values = {"iface": iface, "rdma_device": rdma_device}
    env, mca, deferred = {}, {}, []
    for key, raw in settings.env.items():
        value = fill(raw, values)
        if value is None:
            deferred.append(key)
        else:
            env[key] = value
    for key, raw in settings.mca.items():
        value = fill(raw, values)
        if value is None:
            deferred.append(f"OMPI_MCA_{key}")
        else:
            mca[key] = value
            env[f"OMPI_MCA_{key}"] = value
    return FabricEnv(profile, backend, env, mca, tuple(deferred))
