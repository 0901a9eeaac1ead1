"""What NCCL says it did, read from its own log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET).

Read from NCCL's INFO lines: the network module (``Using network IB|Socket|<plugin>``), each
connection's path (``via NET/<name>/...[/GDRDMA]``, ``via P2P/...``, ``via SHM/...``), the HCAs
and their link layer (``NET/IB : Using ...``), the OFI plugin's provider and the channel count.
tests/fixtures/nccl/README names the NCCL and aws-ofi-nccl source line and version of each."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabbench.errors import RunError

# "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" (the net name may hold spaces:
# "AWS Libfabric"); the device may carry "(<proxy rank>)" (PXN).
_NET = re.compile(r"Channel (\d+)/\d+ : \d+\[\d+\] -> \d+\[\d+\] \[(send|receive)\] "
                  r"via NET/(.+?)/(\d+)(?:\(\d+\))?(/GDRDMA)?(?:\(PCI\))?(?:/Shared)?\s*$")
_LOCAL = re.compile(r"Channel (\d+)(?:/\d+)? : \d+\[\d+\] -> \d+\[\d+\] via (P2P|SHM)/([^\s]+"
                    r"(?: pointer)?)")
_USING = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_IB_DEVS = re.compile(r"NET/IB ?: Using((?: \[\d+\][^\s;]+)+)")
_IB_DEV = re.compile(r"\[\d+\]([^:\s]+):\d+(?::[\d:]*)?/(IB|RoCE|UNSPECIFIED)")
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([^\s,]+)")
_CHANNELS = re.compile(r"NCCL INFO (\d+) coll channels,")
_NCCL_LINE = re.compile(r"NCCL (?:INFO|WARN)")


@dataclass(frozen=True, kw_only=True)
class NcclReport:
    """One process's NCCL log, read."""

    network: str | None  # "Using network ..."
    net_connections: int  # "via NET/..." lines (send and receive)
    gdr_connections: int  # of those, with /GDRDMA
    net_devices: tuple[str, ...] = ()  # "<net>/<dev>" of the NET connections
    local: tuple[str, ...] = ()  # "P2P/CUMEM/read", "SHM/direct", ... (one host)
    link_layers: tuple[str, ...] = ()  # IB or RoCE, from the "NET/IB : Using" line
    ofi_provider: str | None = None
    channels: int | None = None  # "<n> coll channels", else the distinct channel ids seen
    lines: tuple[str, ...] = field(default=(), repr=False)  # the lines that said all this

    @property
    def net_name(self) -> str | None:
        """The network of the connections (else of "Using network")."""
        names = {d.rsplit("/", 1)[0] for d in self.net_devices}
        if len(names) > 1:
            raise RunError(f"NCCL reported connections over several networks: "
                           f"{', '.join(sorted(names))}")
        return next(iter(names), self.network)

    @property
    def transport(self) -> str:
        """"nccl/IB", "nccl/Socket", "nccl/Libfabric/efa", "nccl/P2P/CUMEM", "nccl/SHM/direct".

        A network connection wins over local ones; with none (one rank, or every peer on this
        host with P2P/SHM), "Using network" names the network NCCL set up."""
        if self.net_connections:
            name = self.net_name
        elif self.local:
            return "nccl/" + self.local[0]
        else:
            name = self.network
        if name is None:
            raise RunError("NCCL did not report its transport (no \"Using network\" line and "
                           "no channel connection in its INIT/NET log)")
        plugin = self.ofi_provider and "Libfabric" in name  # aws-ofi-nccl, not a fallback
        return f"nccl/{name}" + (f"/{self.ofi_provider}" if plugin else "")

    @property
    def gpudirect(self) -> str | None:
        """"on": every network connection uses GPUDirect RDMA; "off": none does; "partial";
        None when there is no network connection (GPUDirect RDMA does not apply)."""
        if not self.net_connections:
            return None
        if self.gdr_connections == self.net_connections:
            return "on"
        return "off" if self.gdr_connections == 0 else "partial"

    def summary(self) -> dict[str, object]:
        """What the run record keeps."""
        return {"network": self.network, "transport": self.transport,
                "gpudirect": self.gpudirect, "net_connections": self.net_connections,
                "gdr_connections": self.gdr_connections, "channels": self.channels,
                "link_layers": list(self.link_layers), "ofi_provider": self.ofi_provider,
                "lines": list(self.lines[:64])}


def parse_nccl_log(text: str) -> NcclReport:
    network = None
    net = gdr = 0
    devices: dict[str, None] = {}
    local: dict[str, None] = {}
    layers: dict[str, None] = {}
    provider = None
    channels = None
    channel_ids: set[int] = set()
    kept = []
    for line in text.splitlines():
        if not _NCCL_LINE.search(line):
            continue
        line = line.rstrip()
        if m := _NET.search(line):
            net += 1
            gdr += m.group(5) is not None
            devices[f"{m.group(3)}/{m.group(4)}"] = None
            channel_ids.add(int(m.group(1)))
        elif m := _LOCAL.search(line):
            local[f"{m.group(2)}/{m.group(3).replace(' ', '_')}"] = None
            channel_ids.add(int(m.group(1)))
        elif m := _USING.search(line):
            network = m.group(1)
        elif m := _IB_DEVS.search(line):
            for dev in _IB_DEV.finditer(m.group(1)):
                layers[dev.group(2)] = None
        elif m := _OFI_PROVIDER.search(line):
            provider = m.group(1)
        elif m := _CHANNELS.search(line):
            channels = int(m.group(1))
        else:
            continue
        kept.append(line)
    if channels is None and channel_ids:
        channels = len(channel_ids)
    return NcclReport(network=network, net_connections=net, gdr_connections=gdr,
                      net_devices=tuple(devices), local=tuple(local), link_layers=tuple(layers),
                      ofi_provider=provider, channels=channels, lines=tuple(kept))
