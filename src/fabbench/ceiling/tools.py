"""Raw transport tools, by name: how to start each one's server and client, and how to read its
result. Each measurement is one direction or both at once ("bidir"); rates are Gbit/s (1e9 bit/s)
per direction, as the tool itself reports them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from fabbench.errors import RunError


@dataclass(frozen=True, kw_only=True)
class Direction:
    sender: str  # "client" or "server"
    gbit_s: float
    retransmits: int | None = None


@dataclass(frozen=True, kw_only=True)
class Tool:
    name: str
    binary: str
    modes: tuple[str, ...]  # "one-way", "bidir"
    server: Callable[[str, int], list[str]]  # (own address, port) -> argv
    client: Callable[[str, int, float, str], list[str]]  # (server address, port, s, mode)
    parse: Callable[[str, str], list[Direction]]  # (stdout, mode) -> directions
    tcp_env: dict[str, str] | None = None  # how the tool runs on TCP (--wire tcp)
    ready: str = ""  # a line the server prints once it listens ("" : wait a moment)


TOOLS: dict[str, Tool] = {}


def register(tool: Tool) -> None:
    if tool.name in TOOLS:
        raise ValueError(f"ceiling tool {tool.name!r} registered twice")
    TOOLS[tool.name] = tool


def _iperf3_parse(out: str, mode: str) -> list[Direction]:
    try:
        doc = json.loads(out)
    except ValueError as exc:
        raise RunError(f"iperf3 wrote no result ({exc}): {out[-300:]}") from None
    if isinstance(doc, dict) and doc.get("error"):  # iperf3 -J reports its failures here
        raise RunError(f"iperf3: {doc['error']}")
    sums = [("sum_received", "sum_sent", "client")]
    if mode == "bidir":
        sums.append(("sum_received_bidir_reverse", "sum_sent_bidir_reverse", "server"))
    try:
        end = doc["end"]
        return [Direction(sender=sender, gbit_s=end[received]["bits_per_second"] / 1e9,
                          retransmits=end[sent].get("retransmits"))
                for received, sent, sender in sums]
    except (KeyError, TypeError) as exc:
        raise RunError(f"iperf3's result has no {exc} ({mode}): {out[-300:]}") from None


register(Tool(
    name="iperf3", binary="iperf3", modes=("one-way", "bidir"),
    server=lambda addr, port: ["iperf3", "-s", "-B", addr, "-p", str(port), "--forceflush"],
    client=lambda addr, port, secs, mode: ["iperf3", "-c", addr, "-p", str(port), "-J",
                                           "-t", f"{secs:g}",
                                           *(["--bidir"] if mode == "bidir" else [])],
    parse=_iperf3_parse, ready="Server listening"))

def _ucx_parse(out: str, mode: str) -> list[Direction]:
    """ucx_perftest's "Final:" row: iterations, latency (typical, avg, overall) in usec,
    bandwidth (average, overall) in MB/s, message rate."""
    rows = [ln.split() for ln in out.splitlines() if ln.strip().startswith("Final:")]
    if not rows or len(rows[-1]) < 7:
        raise RunError(f"ucx_perftest wrote no result: {out[-300:]}")
    mb_s = float(rows[-1][6])  # overall bandwidth, MB/s (2^20 bytes)
    return [Direction(sender="client", gbit_s=mb_s * 2**20 * 8 / 1e9)]


register(Tool(
    name="ucx_perftest", binary="ucx_perftest", modes=("one-way",),
    server=lambda addr, port: ["ucx_perftest", "-p", str(port)],
    client=lambda addr, port, secs, mode: ["ucx_perftest", addr, "-p", str(port), "-t",
                                           "tag_bw", "-s", "1048576", "-n", "200",
                                           "-w", "20"],
    parse=_ucx_parse, tcp_env={"UCX_TLS": "tcp,self"}))


def _fi_parse(out: str, mode: str) -> list[Direction]:
    """fi_pingpong's table: bytes, #sent, #ack, total, time, MB/sec, usec/xfer, Mxfers/sec."""
    rows = [ln.split() for ln in out.splitlines() if ln.split() and ln.split()[0][0].isdigit()]
    if not rows:
        raise RunError(f"fi_pingpong wrote no result: {out[-300:]}")
    return [Direction(sender="client", gbit_s=float(rows[-1][5]) * 1e6 * 8 / 1e9)]


register(Tool(
    name="fi_pingpong", binary="fi_pingpong", modes=("one-way",),
    server=lambda addr, port: ["fi_pingpong", "-e", "rdm", "-B", str(port), "-S", "1048576",
                               "-I", "200"],
    client=lambda addr, port, secs, mode: ["fi_pingpong", "-e", "rdm", "-P", str(port),
                                           "-S", "1048576", "-I", "200", addr],
    parse=_fi_parse, tcp_env={"FI_PROVIDER": "tcp;ofi_rxm"}))


def tool_for(hardware: str) -> str:
    """The tool that measures a fabric's wire the way its primitives use it: iperf3 (TCP) for
    ethernet, ucx_perftest for InfiniBand (UCX), fi_pingpong for OmniPath (libfabric/OFI).
    Over --wire tcp the UCX and OFI tools run on their TCP transports."""
    return {"none": "iperf3", "infiniband": "ucx_perftest", "omnipath": "fi_pingpong"}[hardware]
