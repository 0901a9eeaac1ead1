"""Checks for the values that end up in names and directives, each raising a UsageError that
names the option. The rules themselves are fabbench.value_rules' (the chart's schema holds the
same)."""

from __future__ import annotations

from fabbench import value_rules as rules
from fabbench.errors import UsageError

MAX_NAME = rules.MAX_NAME


def dns1123(value: str, option: str, max_len: int = MAX_NAME) -> str:
    return rules.dns_label(max_len).check(value, option)


def slurm_token(value: str, option: str) -> str:
    if not rules.SLURM_TOKEN.ok(value):
        raise UsageError(f"{option} may hold only letters, digits and '_.+,-', not {value!r}")
    return value


def slurm_time(value: str, option: str = "--time") -> str:
    return rules.SLURM_TIME.check(value, option)


def resource_name(value: str, option: str) -> str:
    if not rules.QUALIFIED_NAME.ok(value):
        raise UsageError(f"{option} must be a Kubernetes resource name such as "
                         f"rdma/hca_shared_devices_a, not {value!r}")
    return value


def positive(value: int, option: str, *, zero: bool = False, most: int = 100000) -> int:
    low = 0 if zero else 1
    if not isinstance(value, int) or not low <= value <= most:
        raise UsageError(f"{option} must be an integer between {low} and {most}, not {value!r}")
    return value


def image_reference(value: str, option: str) -> str:
    """A reference a registry can serve (value_rules.IMAGE_REFERENCE)."""
    return rules.IMAGE_REFERENCE.check(value, option)
