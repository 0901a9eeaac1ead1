"""Checks for the values that end up in names and directives, each raising a UsageError that
names the option."""

from __future__ import annotations

import re

from fabbench.errors import UsageError

# Kubernetes DNS-1123 label: what Job, Service and Pod names (and the pods' host names) must be.
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes resource names such as "rdma/hca_shared_devices_a" or "nvidia.com/gpu".
RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                           r"[A-Za-z0-9])?$")
# Slurm #SBATCH values are read by sbatch, not by a shell: only plain tokens may reach them.
SLURM_TOKEN = re.compile(r"^[A-Za-z0-9_.+,-]+$")
SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # M, M:S, H:M:S, D-H, D-H:M[:S]
# A name's longest form: the MPI operator names pods "<name>-launcher" and "<name>-worker-<i>",
# an Indexed Job "<name>-<index>-<suffix>"; 52 leaves room for those within 63.
MAX_NAME = 52


def dns1123(value: str, option: str, max_len: int = MAX_NAME) -> str:
    if not isinstance(value, str) or len(value) > max_len or not DNS1123_LABEL.match(value):
        raise UsageError(f"{option} must be a DNS-1123 label (lower-case letters, digits and '-', "
                         f"starting and ending with a letter or digit, at most {max_len} "
                         f"characters), not {value!r}")
    return value


def slurm_token(value: str, option: str) -> str:
    if not SLURM_TOKEN.match(value):
        raise UsageError(f"{option} may hold only letters, digits and '_.+,-', not {value!r}")
    return value


def slurm_time(value: str, option: str = "--time") -> str:
    if not SLURM_TIME.match(value):
        raise UsageError(f"{option} must be a Slurm time (MINUTES, H:M:S, D-H:M:S), not {value!r}")
    return value


def resource_name(value: str, option: str) -> str:
    if len(value) > 253 or not RESOURCE_NAME.match(value):
        raise UsageError(f"{option} must be a Kubernetes resource name such as "
                         f"rdma/hca_shared_devices_a, not {value!r}")
    return value


def positive(value: int, option: str, *, zero: bool = False, most: int = 100000) -> int:
    low = 0 if zero else 1
    if not isinstance(value, int) or not low <= value <= most:
        raise UsageError(f"{option} must be an integer between {low} and {most}, not {value!r}")
    return value
