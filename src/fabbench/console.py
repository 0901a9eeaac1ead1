"""Everything printed for people while a run goes: the streamed nccl-tests-style lines."""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from rich.console import Console

HEADER = (f"#{'op':>15} {'size':>10} {'count':>11} {'type':>9} {'p50 us':>11} {'algbw':>8} "
          f"{'busbw':>8} {'#wrong':>7}  transport")
UNITS = (f"#{'':>15} {'(B)':>10} {'(elements)':>11} {'':>9} {'':>11} {'(GB/s)':>8} "
         f"{'(GB/s)':>8} {'':>7}")


# what the console, the report and the floors say of a world of one rank, whose busbw is 0
NO_BUS = "one rank: nothing crosses a bus between ranks"
ONE_RANK = (f"{NO_BUS}, so no busbw (-); algbw is the call's own rate (an in-place operation may "
            "copy nothing)")


class _Times(Protocol):
    @property
    def p50(self) -> float: ...


class StreamedPoint(Protocol):
    """What a streamed line shows of a collective's point: a results.records.Collective (which
    the console, a lower layer, does not import)."""

    @property
    def op(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def count(self) -> int | None: ...
    @property
    def dtype(self) -> str: ...
    @property
    def ranks(self) -> int: ...
    @property
    def transport(self) -> str: ...
    @property
    def time_us(self) -> _Times: ...
    @property
    def algbw_gbyte_s(self) -> float: ...
    @property
    def busbw_gbyte_s(self) -> float: ...
    @property
    def wrong(self) -> int | None: ...


def line(rec: StreamedPoint) -> str:
    wrong = "N/A" if rec.wrong is None else str(rec.wrong)
    busbw = "-" if rec.ranks == 1 else f"{rec.busbw_gbyte_s:.3f}"
    return (f" {rec.op:>15} {rec.bytes:>10} {rec.count:>11} {rec.dtype:>9} "
            f"{rec.time_us.p50:>11.2f} {rec.algbw_gbyte_s:>8.3f} {busbw:>8} "
            f"{wrong:>7}  {rec.transport}")


class _GpuDirect(Protocol):
    @property
    def requested(self) -> str: ...
    @property
    def obtained(self) -> str | None: ...
    @property
    def evidence(self) -> str: ...


class RunHead(Protocol):
    """What the header shows of a run: a results.records.Run (which the console, a lower
    layer, does not import)."""

    @property
    def run_id(self) -> str: ...
    @property
    def fabric(self) -> str: ...
    @property
    def wire(self) -> str | None: ...
    @property
    def primitive(self) -> str: ...
    @property
    def ranks(self) -> int: ...
    @property
    def nodes(self) -> int: ...
    @property
    def device(self) -> str | None: ...
    @property
    def timing_method(self) -> str | None: ...
    @property
    def gpudirect(self) -> _GpuDirect | None: ...


def stream_header(run: RunHead, out: TextIO = sys.stdout) -> None:
    print(f"# fabbench {run.run_id}: fabric {run.fabric} (wire {run.wire}), "
          f"primitive {run.primitive}, {run.ranks} ranks on {run.nodes} node(s)", file=out)
    gdr = run.gpudirect
    if run.device == "cuda" and gdr:
        got = gdr.obtained or "not reported"
        print(f"# GPUDirect RDMA: asked {gdr.requested}, got {got} ({gdr.evidence}); "
              f"timing: {run.timing_method}", file=out)
    if run.ranks == 1:
        print(f"# {ONE_RANK}", file=out)
    print(HEADER, file=out)
    print(UNITS, file=out, flush=True)


def console(stderr: bool = False) -> Console:
    # at least 120 columns when piped, so that tables are not squeezed into 80
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else max(probe.width, 120)
    return Console(stderr=stderr, highlight=False, width=width)
