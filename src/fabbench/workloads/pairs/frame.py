"""One run's pairs records as arrays: the better figure of each pair, size and dtype
(pairs.record.best_pairs) in best_pairs' order, made from Python records (a small file) or by
SQL from the columns DuckDB read (results.columns: a 1,024-node check's million records), so
that slow_node's rule and the floors' figures are one computation over numpy arrays whichever
way the records were read. The order statistics that the rule needs per node ("the median of the
pairs without it") come from one sort of every pair (``without``), not from a list per node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabbench.results.columns import ColumnRecords
from fabbench.workloads.pairs.record import Pairs, best_pairs

__all__ = ["ByPair", "PairsFrame", "Rows", "by_unit", "frame", "median"]


@dataclass(frozen=True)
class Rows:
    """The better record of each pair and dtype at one size: its ends and figure (bandwidth at
    the largest size, p50 time at the smallest), in best_pairs' order."""

    a: np.ndarray
    b: np.ndarray
    v: np.ndarray

    def by_pair(self) -> ByPair:
        """Per pair (a, b): the median of its records' figures (one per dtype)."""
        order = np.lexsort((self.v, self.b, self.a))
        a, b, v = self.a[order], self.b[order], self.v[order]
        starts = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
        counts = np.diff(np.r_[starts, len(v)])
        lo, hi = starts + (counts - 1) // 2, starts + counts // 2
        mid = np.where(counts % 2 == 1, v[lo], (v[lo] + v[hi]) / 2)
        return ByPair(a[starts], b[starts], mid)


@dataclass(frozen=True)
class PairsFrame:
    """One run's pairs records after best_pairs: the largest size's bandwidths, the smallest
    size's times (where the run has two sizes or more), each unit's host and rank and its
    pairs' transports, and what the first record says."""

    sizes: tuple[int, ...]
    big: Rows                       # bandwidth (GB/s) at the largest size
    small: Rows | None              # p50 time (µs) at the smallest, if not the largest
    where: dict[int, tuple[str, int]]   # unit -> (host, rank)
    transports: dict[int, tuple[str, ...]]  # unit -> its pairs' transports, sorted
    unit: str                       # "node" or "rank", as the first record says
    dtype: str                      # the first record's
    rechecked: frozenset[tuple[int, int, int]]  # (a, b, bytes) of a record marked recheck


@dataclass(frozen=True)
class ByPair:
    """One figure per pair, the pairs in (a, b) order; what each unit's share of them is,
    and the order statistics of the pairs without it."""

    a: np.ndarray
    b: np.ndarray
    v: np.ndarray

    def __len__(self) -> int:
        return len(self.v)

    def members(self) -> dict[int, np.ndarray]:
        """Per unit, the indices of its pairs (in pair order)."""
        two = self.a != self.b
        index = np.concatenate([np.arange(len(self.a)), np.flatnonzero(two)])
        found = by_unit(np.concatenate([self.a, self.b[two]]), index, within=index)
        return {u: mine for u, (mine,) in found.items()}

    def without(self) -> Without:
        order = np.argsort(self.v, kind="stable")
        place = np.empty(len(order), dtype=np.int64)
        place[order] = np.arange(len(order))
        return Without(self.v[order], place)


@dataclass(frozen=True)
class Without:
    """Every pair's figure sorted, and each pair's place in that order: the k-th smallest of
    the pairs without some of them, in a search of their places."""

    ordered: np.ndarray
    place: np.ndarray

    def rest(self, mine: np.ndarray) -> _Rest:
        places = np.sort(self.place[mine])
        return _Rest(self.ordered, places - np.arange(len(places)))


@dataclass(frozen=True)
class _Rest:
    ordered: np.ndarray
    shifted: np.ndarray  # the removed places, less the number removed before each

    def __len__(self) -> int:
        return len(self.ordered) - len(self.shifted)

    def kth(self, k: int) -> float:
        """The k-th smallest (0-based) of the pairs left."""
        return float(self.ordered[k + int(np.searchsorted(self.shifted, k, side="right"))])

    def median(self) -> float:
        n = len(self)
        if n % 2:
            return self.kth(n // 2)
        return (self.kth(n // 2 - 1) + self.kth(n // 2)) / 2


def by_unit(owners: np.ndarray, *columns: np.ndarray,
            within: np.ndarray | None = None) -> dict[int, tuple[np.ndarray, ...]]:
    """``columns`` split by their owner unit (units in order), each unit's rows in the order of
    ``within`` (None: as given)."""
    order = np.argsort(owners, kind="stable") if within is None else np.lexsort((within, owners))
    owners = owners[order]
    parts = [c[order] for c in columns]
    units, starts = np.unique(owners, return_index=True)
    ends = np.r_[starts[1:], len(owners)]
    return {int(u): tuple(p[s:e] for p in parts)
            for u, s, e in zip(units, starts, ends, strict=True)}


def median(values: np.ndarray) -> float:
    """statistics.median of an array, to the last bit."""
    v = np.sort(values)
    n = len(v)
    return float(v[n // 2]) if n % 2 else (float(v[n // 2 - 1]) + float(v[n // 2])) / 2


def frame(records: Sequence[Any]) -> PairsFrame | None:
    """The run's pairs records as arrays; None when it has none (made once per run read as
    columns: the report's findings and its floors' points read the same)."""
    if not records:
        return None
    if isinstance(records, ColumnRecords):
        made = records.derived.get("pairs.frame")
        if made is None:
            made = records.derived["pairs.frame"] = _of_columns(records)
        assert isinstance(made, PairsFrame)
        return made
    return _of_records(records)


def _of_records(records: Sequence[Pairs]) -> PairsFrame:
    best = best_pairs(records)
    sizes = tuple(sorted({r.bytes for r in best}))
    where: dict[int, tuple[str, int]] = {}
    transports: dict[int, set[str]] = {}
    for r in best:
        where[r.a] = (r.a_host, r.a_rank)
        where[r.b] = (r.b_host, r.b_rank)
        for unit in (r.a, r.b):
            transports.setdefault(unit, set()).add(r.transport)

    def rows(size: int, bw: bool) -> Rows:
        at = [(r.a, r.b, i) for i, r in enumerate(best) if r.bytes == size]
        return Rows(np.array([x[0] for x in at], dtype=np.int64),
                    np.array([x[1] for x in at], dtype=np.int64),
                    np.array([best[i].bw_gbyte_s if bw else best[i].time_us.p50
                              for *_, i in at], dtype=np.float64))

    return PairsFrame(
        sizes=sizes, big=rows(sizes[-1], True),
        small=rows(sizes[0], False) if len(sizes) > 1 else None,
        where=dict(sorted(where.items())),
        transports={u: tuple(sorted(t)) for u, t in sorted(transports.items())},
        unit=best[0].unit, dtype=best[0].dtype,
        rechecked=frozenset((r.a, r.b, r.bytes) for r in records if r.recheck))


# best_pairs in SQL, once per run into a table: per pair, size and dtype, the record with the
# highest bandwidth, the first of equals (file order: i), and where its key first appears. A key
# of one record (all of them, but where a pair was rechecked) is that record: only the keys of
# two records or more are grouped for their pick
_BEST = """
CREATE TEMP TABLE {best} AS
WITH d AS (SELECT a, b, bytes, dtype, min(i) AS first FROM {rows}
           GROUP BY a, b, bytes, dtype HAVING count(*) > 1),
m AS (SELECT a, b, bytes, dtype, max_by(bw_gbyte_s, [bw_gbyte_s, -i::DOUBLE]) AS bw,
             max_by(time_us_p50, [bw_gbyte_s, -i::DOUBLE]) AS p50,
             max_by(transport, [bw_gbyte_s, -i::DOUBLE]) AS transport,
             max_by(unit, [bw_gbyte_s, -i::DOUBLE]) AS unit
      FROM {rows} SEMI JOIN d USING (a, b, bytes, dtype)
      GROUP BY a, b, bytes, dtype)
SELECT a, b, bytes, dtype, i AS first, bw_gbyte_s AS bw, time_us_p50 AS p50, transport, unit
FROM {rows} ANTI JOIN d USING (a, b, bytes, dtype)
UNION ALL
SELECT a, b, bytes, dtype, first, bw, p50, transport, unit FROM d JOIN m USING (a, b, bytes, dtype)
"""
# each unit's host and rank (one each, or the records are read the Python way) and the
# transports of its better records
_UNITS = """
WITH ends AS (SELECT a AS u, a_host AS h, a_rank AS k FROM {rows}
              UNION ALL SELECT b, b_host, b_rank FROM {rows}),
named AS (SELECT u, min(h) AS h, min(h) = max(h) AS one_h, min(k) AS k, min(k) = max(k) AS one_k
          FROM ends GROUP BY u),
carried AS (SELECT u, list(transport ORDER BY transport) AS ts
            FROM (SELECT a AS u, transport FROM {best} UNION SELECT b, transport FROM {best})
            GROUP BY u)
SELECT u, h, one_h, k, one_k, ts FROM named JOIN carried USING (u) ORDER BY u
"""


def _of_columns(rows: ColumnRecords) -> PairsFrame:
    best = f"fb_best_{id(rows)}"
    rows.sql(_BEST.replace("{best}", best))
    try:
        return _from_best(rows, best)
    finally:
        rows.sql(f"DROP TABLE IF EXISTS {best}")


def _from_best(rows: ColumnRecords, best: str) -> PairsFrame:
    units = rows.sql(_UNITS.replace("{best}", best)).fetchall()
    if not all(one_h and one_k for _, _, one_h, _, one_k, _ in units):
        # a unit named by two hosts or ranks: which one holds is best_pairs' order's
        return _of_records(list(rows))  # type: ignore[arg-type]
    sizes = tuple(int(x[0]) for x in rows.sql(
        f"SELECT DISTINCT bytes FROM {best} ORDER BY 1").fetchall())

    def at(size: int, value: str) -> Rows:
        got = rows.sql(f"SELECT a, b, {value} AS v FROM {best} WHERE bytes = ? ORDER BY first",
                       [size]).fetchnumpy()
        return Rows(np.asarray(got["a"], dtype=np.int64), np.asarray(got["b"], dtype=np.int64),
                    np.asarray(got["v"], dtype=np.float64))

    first = rows.sql(f"SELECT unit, dtype FROM {best} ORDER BY first LIMIT 1").fetchone()
    assert first is not None
    rechecked = rows.sql("SELECT DISTINCT a, b, bytes FROM {rows} WHERE recheck").fetchall()
    return PairsFrame(
        sizes=sizes, big=at(sizes[-1], "bw"),
        small=at(sizes[0], "p50") if len(sizes) > 1 else None,
        where={int(u): (str(h), int(k)) for u, h, _, k, _, _ in units},
        transports={int(u): tuple(ts) for u, *_, ts in units},
        unit=str(first[0]), dtype=str(first[1]),
        rechecked=frozenset((int(a), int(b), int(n)) for a, b, n in rechecked))
