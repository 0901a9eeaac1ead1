"""A large file's checked columns kept for its next read (results.column_cache): the next read
of the same file scans them instead of reading the file; a file changed in any way since (in
place, its size and modification time kept) is read again; a folder that cannot be written is
said to be one; a kept file that is not ours, or removed, is read past."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabbench.results import column_cache, columns, reader
from fabbench.results.runs import split_runs
from fabbench.workloads.pairs.floors import floor_figures
from unit.test_columns import _file


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    """These files are kept, whatever their size, and as soon as they are written."""
    monkeypatch.setattr(column_cache, "MIN_ROWS", 1)
    monkeypatch.setattr(column_cache, "_SETTLED_NS", 0)


def _figures(records) -> list:
    return [(f.node, dict(f.metrics), f.evidence) for f in floor_figures(records)]


def _read(path: Path, monkeypatch, *, kept: bool) -> list:
    """The floors' figures of the file's first run, read as columns; ``kept``: from the kept
    columns (DuckDB does not read the file), else from the file."""
    def refused(*args):
        raise AssertionError("read the file, not the kept columns")

    with monkeypatch.context() as m:
        if kept:
            m.setattr(columns, "load", refused)
        rows = split_runs(path)[0].of_kind("pairs")
    assert isinstance(rows, columns.ColumnRecords)
    return _figures(rows)


def _records(path: Path) -> list:
    return _figures(reader.read_results(path).of_kind("pairs"))


def test_the_next_read_scans_the_kept_columns(tmp_path, monkeypatch):
    path = _file(tmp_path, slow=3)
    first = _read(path, monkeypatch, kept=False)
    assert column_cache.where(path) == tmp_path / ".p.jsonl.fabbench-columns.parquet"
    assert column_cache.where(path).is_file()
    assert _read(path, monkeypatch, kept=True) == first == _records(path)


def test_a_file_changed_in_place_keeping_its_size_and_time_is_read_again(tmp_path, monkeypatch):
    path = _file(tmp_path, slow=3)
    before = _read(path, monkeypatch, kept=False)
    stat, text = path.stat(), path.read_bytes()
    at = text.rindex(b'"bw_gbyte_s":') + len(b'"bw_gbyte_s":')  # a pair's at the largest size
    digit = text[at:at + 1]
    changed = text[:at] + (b"9" if digit != b"9" else b"1") + text[at + 1:]
    with path.open("r+b") as f:  # in place: the same inode, the same size
        f.write(changed)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same modification time
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    after = _read(path, monkeypatch, kept=False)
    assert after == _records(path) != before


def test_a_file_changed_just_before_its_read_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(column_cache, "_SETTLED_NS", 60 * 10**9)
    path = _file(tmp_path)
    _read(path, monkeypatch, kept=False)
    assert not column_cache.where(path).exists()


def test_kept_columns_that_are_not_ours_or_removed_are_read_past(tmp_path, monkeypatch):
    path = _file(tmp_path)
    first = _read(path, monkeypatch, kept=False)
    kept = column_cache.where(path)
    kept.write_bytes(b"not parquet")
    made = reader.read_results(path, columnar=True)
    (said,) = made.warnings
    assert said.startswith(f"{path}: its kept columns {kept} could not be read (")
    assert said.endswith("); the file is read again")
    assert _read(path, monkeypatch, kept=True) == first  # written again
    kept.unlink()
    assert _read(path, monkeypatch, kept=False) == first


def test_a_folder_that_cannot_be_written(tmp_path, monkeypatch):
    """Beside the file where its folder is writable; else under FABBENCH_CACHE; else nowhere,
    and the read says so."""
    path = _file(tmp_path)
    real = os.access
    monkeypatch.setattr(column_cache.os, "access",
                        lambda p, mode: False if Path(p) == tmp_path else real(p, mode))
    cache = tmp_path / "cache"
    monkeypatch.setenv("FABBENCH_CACHE", str(cache))
    first = _read(path, monkeypatch, kept=False)
    (kept,) = (cache / "columns").iterdir()
    assert kept.name.endswith(".fabbench-columns.parquet")
    assert _read(path, monkeypatch, kept=True) == first
    monkeypatch.delenv("FABBENCH_CACHE")
    made = reader.read_results(path, columnar=True)
    assert made.warnings == [f"{path}: its checked columns are not kept for the next read "
                             "(its folder is not writable and FABBENCH_CACHE is not set)"]
    assert not (tmp_path / ".p.jsonl.fabbench-columns.parquet").exists()


def test_a_small_file_is_not_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(column_cache, "MIN_ROWS", 100_000)
    path = _file(tmp_path)
    _read(path, monkeypatch, kept=False)
    assert not column_cache.where(path).exists()
