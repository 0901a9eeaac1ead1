"""Measure the ceiling inside a run, before the collectives: rank 0 is the client, the first
rank on another host runs the server; every rank takes part in the few gathers that order it.
Rank 0 gets the ``ceiling`` records (one per mode: one way, both ways at once)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from fabbench.ceiling.tools import TOOLS, Tool
from fabbench.comm.base import Communicator
from fabbench.errors import RunError
from fabbench.procs import run_tool, stop_groups
from fabbench.results import records

SERVER_START_S = 10.0


def _address(iface: str | None) -> str | None:
    """This process's IPv4 address on the interface (None: no such interface or address)."""
    if not iface:
        return None
    import psutil

    for a in psutil.net_if_addrs().get(iface, []):
        if a.family == socket.AF_INET:
            return a.address
    return None


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        port: int = s.getsockname()[1]  # typeshed's address is Any: (host, port) for AF_INET
        return port


def _start_server(tool: Tool, address: str, env: dict[str, str]) -> tuple[subprocess.Popen[str],
                                                                          int, str | None]:
    port = _free_port(address)
    proc = subprocess.Popen(tool.server(address, port), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    assert proc.stdout is not None  # stdout=PIPE
    if not tool.ready:
        time.sleep(1.0)
        return proc, port, None if proc.poll() is None else _first_error(proc.stdout.read())
    end = time.monotonic() + SERVER_START_S
    seen = []
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < end and proc.poll() is None:
        chunk = proc.stdout.readline()
        if chunk:
            seen.append(chunk)
            if tool.ready in chunk:
                return proc, port, None
        else:
            time.sleep(0.05)
    return proc, port, _first_error("".join(seen)) or f"{tool.name} server did not start"


# what the communicators set for their own transport report (comm/mpi.py, comm/torchdist.py):
# log files of this rank that a tool must not write to (UCX aborts when its log file is gone)
_REPORT_VARS = ("UCX_LOG_FILE", "UCX_LOG_LEVEL", "NCCL_DEBUG_FILE", "NCCL_DEBUG",
                "NCCL_DEBUG_SUBSYS")


def _tool_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _REPORT_VARS}


def _first_error(text: str) -> str:
    """The line of a tool's output that says what went wrong (else its first line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if "error" in ln.lower()] or lines
    return said[0][:300] if said else ""


def measure(comm: Communicator, hosts: list[str], *, tool_name: str, wire: str,
            iface: str | None, seconds: float, arm: Callable[[float, str], None],
            run_id: str) -> list[records.Ceiling]:
    """The ceiling records (on rank 0; other ranks get []). Ranks on one host only: []."""
    me = comm.rank
    others = [r for r, h in enumerate(hosts) if h != hosts[0]]
    if not others:
        return []
    server_rank = others[0]
    tool = TOOLS[tool_name]
    env = {**_tool_env(), **((tool.tcp_env or {}) if wire == "tcp" else {})}
    arm(SERVER_START_S + 30, f"starting the {tool.name} server for the ceiling")
    address = _address(iface) if me in (0, server_rank) else None
    missing = shutil.which(tool.binary) is None if me in (0, server_rank) else False
    proc, port, error = None, 0, None
    if me == server_rank and address and not missing:
        proc, port, error = _start_server(tool, address, env)
    info = comm.gather_objects((address, port, missing, error))
    found: list[records.Ceiling] = []
    try:
        problem = _problem(info, server_rank, tool, iface)
        for mode in tool.modes:
            arm(seconds * 3 + 30, f"{tool.name} {mode} between {hosts[0]} and "
                                  f"{hosts[server_rank]}")
            if me == 0:
                found.append(records.Ceiling(
                    run_id=run_id, **_one(tool, mode, info[0][0], info[server_rank][0],
                                          info[server_rank][1], seconds, env, hosts,
                                          server_rank, iface, problem)))
            # the server stays up until the client is done; the ranks that wait keep no core
            # busy (an MPI rank's Barrier polls, and would take CPU from the tool)
            comm.quiet_barrier()
            if problem:
                break
    finally:
        stop_groups([proc])
    return found


def _problem(info: list[tuple[str | None, int, bool, str | None]], server_rank: int, tool: Tool,
             iface: str | None) -> str | None:
    for rank in (0, server_rank):
        address, _, missing, error = info[rank]
        if missing:
            return f"{tool.binary} is not installed on the host of rank {rank}"
        if address is None:
            return f"rank {rank}'s host has no IPv4 address on interface {iface!r}"
        if error:
            return f"{tool.name} server failed: {error.strip()}"
    return None


def _one(tool: Tool, mode: str, client_addr: str, server_addr: str, port: int, seconds: float,
         env: dict[str, str], hosts: list[str], server_rank: int, iface: str | None,
         problem: str | None) -> dict[str, Any]:
    """The fields of one ceiling record (results.records.Ceiling)."""
    record: dict[str, Any] = {
        "tool": tool.name, "mode": mode, "interface": iface,
        "client": records.Endpoint(rank=0, host=hosts[0], address=client_addr),
        "server": records.Endpoint(rank=server_rank, host=hosts[server_rank],
                                   address=server_addr),
        "seconds": seconds, "directions": [], "per_direction_gbit_s": None, "error": problem}
    if problem:
        return record
    argv = tool.client(server_addr, port, seconds, mode)
    p = run_tool(argv, seconds * 3 + 20, env=env)
    if p is None:
        record["error"] = f"{tool.binary} is not installed on the host of rank 0"
        return record
    if p.timed_out:
        record["error"] = f"{tool.name} client did not finish within {seconds * 3 + 20:.0f} s"
        return record
    if p.returncode is None:
        record["error"] = f"{tool.name} client could not start: {p.problem}"
        return record
    if p.returncode != 0:
        record["error"] = (f"{' '.join(argv)} exited with {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip()[-300:]}")
        return record
    try:
        directions = tool.parse(p.stdout, mode)
    except RunError as exc:
        record["error"] = str(exc)
        return record
    record["directions"] = [records.CeilingDirection(
        from_=hosts[0] if d.sender == "client" else hosts[server_rank],
        to=hosts[server_rank] if d.sender == "client" else hosts[0],
        gbit_s=round(d.gbit_s, 6), retransmits=d.retransmits) for d in directions]
    record["per_direction_gbit_s"] = round(sum(d.gbit_s for d in directions)
                                           / len(directions), 6)
    return record
