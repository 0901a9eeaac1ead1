"""Interface utilisation during the timed training steps (Zhang et al.): byte counters sampled
in a thread while the steps run."""

from __future__ import annotations

import threading
import time
from typing import Any

NET_INTERVAL_S = 0.1


class NetSampler:
    """Interface byte counters every 0.1 s in a thread (psutil.net_io_counters(pernic=True))."""

    def __init__(self, iface: str | None) -> None:
        import psutil

        self._psutil = psutil
        self.iface = iface
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fabbench-net", daemon=True)

    def _read(self) -> tuple[float, int, int]:
        counters = self._psutil.net_io_counters(pernic=True)
        if self.iface is not None and self.iface in counters:
            c = counters[self.iface]
            return time.perf_counter(), c.bytes_sent, c.bytes_recv
        names = [n for n in counters if n != "lo"]
        return (time.perf_counter(), sum(counters[n].bytes_sent for n in names),
                sum(counters[n].bytes_recv for n in names))

    def _run(self) -> None:
        while not self._stop.wait(NET_INTERVAL_S):
            self.samples.append(self._read())

    def __enter__(self) -> NetSampler:
        self.samples.append(self._read())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.samples.append(self._read())

    def summary(self) -> dict[str, Any]:
        (t0, s0, r0), (t1, s1, r1) = self.samples[0], self.samples[-1]
        elapsed = max(t1 - t0, 1e-9)
        peak = 0.0
        for (ta, sa, ra), (tb, sb, rb) in zip(self.samples, self.samples[1:], strict=False):
            if tb > ta:
                peak = max(peak, max(sb - sa, rb - ra) * 8 / (tb - ta) / 1e9)
        link_gbit_s = None
        if self.iface is not None:
            stats = self._psutil.net_if_stats().get(self.iface)
            if stats is not None and stats.speed > 0:  # Mb/s; 0 when unknown (lo, veth)
                link_gbit_s = stats.speed / 1000
        tx_gbit_s, rx_gbit_s = (s1 - s0) * 8 / elapsed / 1e9, (r1 - r0) * 8 / elapsed / 1e9
        return {"iface": self.iface or "all but lo", "interval_s": NET_INTERVAL_S,
                "samples": len(self.samples), "seconds": round(elapsed, 4),
                "tx_bytes": s1 - s0, "rx_bytes": r1 - r0, "tx_gbit_s": tx_gbit_s,
                "rx_gbit_s": rx_gbit_s, "peak_gbit_s": peak, "link_gbit_s": link_gbit_s,
                "utilization": (max(tx_gbit_s, rx_gbit_s) / link_gbit_s) if link_gbit_s else None,
                "peak_utilization": (peak / link_gbit_s) if link_gbit_s else None}
