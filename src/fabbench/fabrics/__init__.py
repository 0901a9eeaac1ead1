"""Fabric profiles: data files that say how each primitive is made to use a fabric."""

from fabbench.fabrics.detect import detect_fabric, require_hardware
from fabbench.fabrics.profile import Profile, Settings, available_profiles, load_profile

__all__ = ["Profile", "Settings", "available_profiles", "detect_fabric", "load_profile",
           "require_hardware"]
