"""Transport truth for GPUDirect RDMA: what the run asked for (--gpudirect and the profile's
settings), what it got (the library's report, rank by rank), and the verdict."""

from __future__ import annotations

from collections.abc import Sequence

_STATES = ("on", "off", "partial", None)


def outcome(requested: str, verify: str, reported: Sequence[tuple[int, str, str | None]],
            primitive: str) -> tuple[dict[str, str | None], str | None]:
    """The run record's ``gpudirect`` entry, and what is wrong when a rank got other than
    --gpudirect on|off asked for (naming both; None when nothing is). ``reported`` holds
    (rank, host, what the library reported: "on", "off", "partial" or None)."""
    for _, _, state in reported:
        if state not in _STATES:
            raise ValueError(f"unknown GPUDirect state {state!r}")
    states = {state for _, _, state in reported}
    said = states != {None}
    if said:
        obtained = states.pop() if len(states) == 1 else "partial"
        evidence = f"{primitive}'s report of its network connections, every rank"
    elif requested != "auto" and verify == "library":
        obtained = requested
        evidence = (f"enforced by {primitive}'s library: the profile's settings for "
                    f"--gpudirect {requested} make it fail rather than run otherwise")
    else:
        obtained = None
        evidence = (f"not reported by {primitive}'s library" if verify != "report" else
                    "no network connection (ranks on one host, or one rank)")
    record = {"requested": requested, "obtained": obtained, "verify": verify,
              "evidence": evidence}
    if requested != "auto" and (said or verify == "report"):
        for rank, host, state in reported:
            if state == requested or (requested == "off" and state is None):
                continue
            got = ("no network connection, so no GPUDirect RDMA" if state is None else
                   f"GPUDirect RDMA {state}")
            return record, (f"--gpudirect {requested} asked for GPUDirect RDMA {requested} "
                            f"but rank {rank} on {host} got {got} (as {primitive} reports it)")
    return record, None
