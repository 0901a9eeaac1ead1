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

__all__ = ["ByPair", "Ends", "PairsFrame", "Rows", "by_unit", "frame", "median"]


@dataclass(frozen=True)
class Rows:
    """The better record of each pair and dtype at one size: its ends and figure (bandwidth at
    the largest size, p50 time at the smallest), in best_pairs' order."""

    a: np.ndarray
    b: np.ndarray
    v: np.ndarray

    def by_pair(self) -> ByPair:
        """Per pair (a, b): the median of its records' figures (one per dtype)."""
        order = _key_order(self.a, self.b)
        if order is not None:  # one record per pair: its figure, in (a, b) order
            return ByPair(self.a[order], self.b[order], self.v[order])
        order = np.lexsort((self.v, self.b, self.a))
        a, b, v = self.a[order], self.b[order], self.v[order]
        starts = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])])
        counts = np.diff(np.r_[starts, len(v)])
        lo, hi = starts + (counts - 1) // 2, starts + counts // 2
        mid = np.where(counts % 2 == 1, v[lo], (v[lo] + v[hi]) / 2)
        return ByPair(a[starts], b[starts], mid)


def _key_order(a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The order of the rows by (a, b) when no two rows have the same (a, b), else None: a
    bucket per possible key where there are not many more keys than rows (O(n), no sort), a
    sort of the keys where there are."""
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    width = int(b.max()) + 1
    if (int(a.max()) + 1) * width > (1 << 62):
        return None
    key = a.astype(np.int64) * width + b
    size = (int(a.max()) + 1) * width
    if size <= 4 * len(key) + (1 << 20):
        slot = np.full(size, -1, dtype=_index(len(key)))
        slot[key] = np.arange(len(key), dtype=slot.dtype)
        order = slot[slot >= 0]
        return order if len(order) == len(key) else None
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    return None if np.any(ordered[1:] == ordered[:-1]) else order


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

    def ends(self) -> Ends:
        """Each unit's pairs (a pair of a unit with itself counted once)."""
        n = len(self.a)
        owners = np.empty(2 * n, dtype=_narrow(self.a, self.b))
        owners[0::2], owners[1::2] = self.a, self.b
        pair = np.repeat(np.arange(n, dtype=_index(n)), 2)
        two = np.ones(2 * n, dtype=bool)
        two[1::2] = self.a != self.b
        if not two.all():
            owners, pair = owners[two], pair[two]
        # a stable sort by owner keeps each unit's pairs in pair order (a radix sort where
        # the owners fit in 16 bits)
        order = np.argsort(owners, kind="stable")
        owners = owners[order]
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if n else \
            np.zeros(0, dtype=np.int64)
        return Ends(owners[starts], np.r_[starts, len(owners)], pair[order])

    def without(self) -> Without:
        # any order of equal figures leaves the same figures in order, and the same k-th of
        # those left, but for 0.0 and -0.0 (equal, printed apart): a stable sort where a
        # figure is zero, a quicker one elsewhere
        order = np.argsort(self.v, kind="stable" if np.any(self.v == 0) else None)
        place = np.empty(len(order), dtype=_index(len(order)))
        place[order] = np.arange(len(order), dtype=place.dtype)
        return Without(self.v[order], place)


@dataclass(frozen=True)
class Ends:
    """Each unit's pairs: the units in order, and the indices of each one's pairs (in pair
    order) as a slice of one array, ``pair[bounds[j]:bounds[j + 1]]`` for ``units[j]``."""

    units: np.ndarray
    bounds: np.ndarray
    pair: np.ndarray

    def spans(self) -> dict[int, slice]:
        """Per unit, its slice of ``pair``."""
        b = self.bounds.tolist()
        return {u: slice(b[j], b[j + 1]) for j, u in enumerate(self.units.tolist())}


def _narrow(*columns: np.ndarray) -> type[np.integer[Any]]:
    """The narrowest of uint16 and int64 that holds every value of the unit columns (numpy
    sorts 16-bit integers by radix, in linear time)."""
    fits = all(not len(c) or (int(c.min()) >= 0 and int(c.max()) < 1 << 16) for c in columns)
    return np.uint16 if fits else np.int64


def _index(n: int) -> type[np.integer[Any]]:
    """An index type for ``n`` rows: int32 where it holds them."""
    return np.int32 if n < 1 << 31 else np.int64


@dataclass(frozen=True)
class Without:
    """Every pair's figure sorted, and each pair's place in that order: the k-th smallest of
    the pairs without some of them, in a search of their places."""

    ordered: np.ndarray
    place: np.ndarray

    def median(self) -> float:
        """The median of every pair (frame.median of the figures, without sorting again)."""
        return _middle(self.ordered)

    def rest(self, mine: np.ndarray) -> _Rest:
        places = np.sort(self.place[mine])
        return _Rest(self.ordered, places - np.arange(len(places)), places)


@dataclass(frozen=True)
class _Rest:
    ordered: np.ndarray
    shifted: np.ndarray  # the removed places, less the number removed before each
    places: np.ndarray   # the removed places, in order

    def removed_median(self) -> float:
        """The median of the removed pairs' figures (frame.median of them)."""
        return _middle(self.ordered[self.places])

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
    if within is None:  # a radix sort where the owners fit in 16 bits
        order = np.argsort(owners.astype(_narrow(owners), copy=False), kind="stable")
    else:
        order = np.lexsort((within, owners))
    owners = owners[order]
    parts = [c[order] for c in columns]
    units, starts = np.unique(owners, return_index=True)
    ends = np.r_[starts[1:], len(owners)]
    return {int(u): tuple(p[s:e] for p in parts)
            for u, s, e in zip(units, starts, ends, strict=True)}


def median(values: np.ndarray) -> float:
    """statistics.median of an array, to the last bit."""
    return _middle(np.sort(values))


def _middle(v: np.ndarray) -> float:
    """The median of sorted values."""
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
# where no key has two records (every record is its key's best): _UNITS' figures from the
# distinct (unit, host, rank, transport) of each end, a few thousand rows
_ENDS = """SELECT a, a_host, a_rank, transport FROM {rows} GROUP BY ALL
UNION ALL SELECT b, b_host, b_rank, transport FROM {rows} GROUP BY ALL"""


def _of_columns(rows: ColumnRecords) -> PairsFrame:
    made = _of_distinct(rows)
    if made is not None:
        return made
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


def _of_distinct(rows: ColumnRecords) -> PairsFrame | None:
    """The frame where no pair, size and dtype has two records (no pair was rechecked: each
    record is its key's best), from one read of each size's keys and figures in file order;
    None where one has (best_pairs' grouping then picks)."""
    top, size_list, dtypes = rows.sql(
        "SELECT greatest(max(a), max(b)), list(DISTINCT bytes ORDER BY bytes), "
        "list(DISTINCT dtype ORDER BY dtype) FROM {rows}").fetchone() or (None, [], [])
    sizes = tuple(int(x) for x in size_list)
    unit_type = "USMALLINT" if top < 1 << 16 else "INTEGER" if top < 1 << 31 else "BIGINT"
    made: dict[int, Rows] = {}
    for size in sizes:
        value = "bw_gbyte_s" if size == sizes[-1] else "time_us_p50" if size == sizes[0] \
            else "NULL::DOUBLE"
        d = ", list_position(?, dtype) AS d" if len(dtypes) > 1 else ""
        got = rows.sql(
            f"SELECT i, a::{unit_type} AS a, b::{unit_type} AS b, {value} AS v{d} "
            "FROM {rows} WHERE bytes = ?", [list(dtypes), size] if d else [size]).fetchnumpy()
        i = np.asarray(got["i"])
        order = np.argsort(i, kind="stable") if np.any(i[1:] <= i[:-1]) else slice(None)
        a, b = np.asarray(got["a"])[order], np.asarray(got["b"])[order]
        # (a, b, dtype) as (a and dtype, b): a key's two records are two equal pairs
        ad = a if len(dtypes) == 1 else \
            a.astype(np.int64) * len(dtypes) + np.asarray(got["d"], dtype=np.int64)
        if _key_order(ad, b) is None:
            return None
        made[size] = Rows(a, b, np.asarray(got["v"], dtype=np.float64)[order])
    named: dict[int, set[tuple[str, int]]] = {}
    carried: dict[int, set[str]] = {}
    for u, h, k, t in rows.sql(_ENDS).fetchall():
        named.setdefault(int(u), set()).add((str(h), int(k)))
        carried.setdefault(int(u), set()).add(str(t))
    if any(len(n) > 1 for n in named.values()):
        return None  # a unit named by two hosts or ranks: _from_best's rule decides
    first = rows.sql("SELECT unit, dtype FROM {rows} ORDER BY i LIMIT 1").fetchone()
    assert first is not None
    rechecked = rows.sql("SELECT DISTINCT a, b, bytes FROM {rows} WHERE recheck").fetchall()
    return PairsFrame(
        sizes=sizes, big=made[sizes[-1]], small=made[sizes[0]] if len(sizes) > 1 else None,
        where={u: min(named[u]) for u in sorted(named)},
        transports={u: tuple(sorted(carried[u])) for u in sorted(carried)},
        unit=str(first[0]), dtype=str(first[1]),
        rechecked=frozenset((int(a), int(b), int(n)) for a, b, n in rechecked))
