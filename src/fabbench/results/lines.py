"""Each measurement record as the console shows it: the line a run streams as it measures, and
`fabbench report` prints again from the file (train, halo and ceiling records; collectives have
the nccl-tests table of report/tables.py, pairs theirs in workloads/pairs.py)."""

from __future__ import annotations

from typing import Any

TRAIN_HEADER = (f"#{'model':>12} {'ranks':>5} {'batch':>6} {'samples/s':>12} {'±ci95':>8} "
                f"{'step ms':>10} {'compute ms':>10} {'comm ms':>9} {'eff':>6} {'grads':>7}  "
                "engine")


def _num(rec: dict[str, Any], key: str, spec: str, width: int) -> str:
    """A field as the table shows it; "-" where a file (an older one) does not have it."""
    value = rec.get(key)
    if isinstance(value, dict):
        value = value.get("p50")
    return f"{'-' if value is None else format(value, spec):>{width}}"


def _check(value: bool | None, good: str, bad: str, width: int) -> str:
    return f"{'-' if value is None else good if value else bad:>{width}}"


def train(rec: dict[str, Any]) -> str:
    engine = "/".join(x for x in (rec.get("engine"), rec.get("transport")) if x) or "-"
    return (f" {rec['model']:>12} {rec['ranks']:>5} {rec['batch_per_rank']:>6} "
            f"{rec['samples_per_s']['p50']:>12.2f} {_num(rec['samples_per_s'], 'ci95', '.2f', 8)} "
            f"{rec['step_ms']:>10.2f} {_num(rec, 'compute_ms', '.2f', 10)} "
            f"{rec['comm_ms']:>9.2f} {_num(rec, 'scaling_efficiency', '.3f', 6)} "
            f"{_check(rec.get('grads_identical'), 'ok', 'DIFFER', 7)}  {engine}")


HALO_HEADER = (f"#{'cells/rank':>12} {'grid':>9} {'ranks':>5} {'iter us':>11} {'exch us':>11} "
               f"{'bytes/iter':>11} {'GB/s':>8} {'check':>6}  transport")


def halo(rec: dict[str, Any]) -> str:
    grid = "x".join(str(d) for d in rec.get("grid", ())) or "-"
    return (f" {rec['cells_per_rank']:>12} {grid:>9} {rec['ranks']:>5} "
            f"{rec['time_us']['p50']:>11.2f} {_num(rec, 'exchange_us', '.2f', 11)} "
            f"{rec['bytes_per_iter']:>11} {_num(rec, 'exchange_gbyte_s', '.3f', 8)} "
            f"{_check(rec.get('correct'), 'ok', 'WRONG', 6)}  {rec.get('transport', '-')}")


def ceiling(record: dict[str, Any]) -> str:
    """One line for the console."""
    where = f"{record['client']['host']} <-> {record['server']['host']}"
    if record["error"]:
        return f"# ceiling {record['tool']} {record['mode']} {where}: not measured: " \
               f"{record['error']}"
    rates = " + ".join(f"{d['gbit_s']:.3f}" for d in record["directions"])
    return f"# ceiling {record['tool']} {record['mode']} {where}: {rates} Gbit/s"
