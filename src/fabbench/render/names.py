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
# An image reference as container runtimes parse it (the distribution project's grammar):
# [domain[:port]/]path[:tag][@algorithm:hex]; a sha256 digest is 64 lower-case hex digits.
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN = rf"{_LABEL}(?:\.{_LABEL})*"
IMAGE_REFERENCE = re.compile(
    rf"^(?:{_DOMAIN}(?::[0-9]+)?/)?{_PATH}(?:/{_PATH})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    r"(?:@(?P<algorithm>[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*):(?P<hex>[0-9a-fA-F]{32,}))?$")
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


def image_reference(value: str, option: str) -> str:
    """A reference a registry can serve: the grammar above, and a sha256 digest of 64 lower-case
    hex digits (what a registry names a manifest by)."""
    m = IMAGE_REFERENCE.match(value) if isinstance(value, str) and len(value) <= 4096 else None
    first = value.split("/")[0] if m and "/" in value else ""
    # a first component is a registry only with a '.' or ':' or as localhost, else a path
    hostless = first and not ({".", ":"} & set(first) or first == "localhost")
    if m is None or (hostless and not re.fullmatch(_PATH, first)) or (
            m["algorithm"] == "sha256" and not re.fullmatch(r"[0-9a-f]{64}", m["hex"])):
        raise UsageError(f"{option} must be an image reference such as "
                         f"registry.example.org/fabbench:0.1.0-cpu or REPO@sha256:<64 hex digits>, "
                         f"not {value!r}")
    return value
