"""Results through a pod's log (launch/results_log.py, `fabbench from-log`): rank 0's file
between markers, read back out of `kubectl logs` output with whatever the log added around and
before it, every record checked; a block cut short, mixed, or holding a bad record is refused in
one line with exit code 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from conftest import cli
from fabbench.errors import UsageError
from fabbench.launch import results_log
from fabbench.launch.results_log import blocks, emit, from_log

RUN = Path(__file__).parents[1] / "fixtures" / "runs" / "siteA-ib.jsonl"


def logged(path: Path = RUN, prefix: str = "") -> str:
    """A pod's log: other output, then the block rank 0 writes, then more."""
    out = io.StringIO()
    count = emit(path, out)
    assert count == len(path.read_text().splitlines())
    block = "".join(prefix + line + "\n" for line in out.getvalue().splitlines())
    return (f"{prefix}fabbench: rank 0: iface=eth0 (holds ...)\n"
            f"{prefix}allreduce 8 B ...\n{block}{prefix}fabbench: rank 0: wrote it\n")


def test_a_log_gives_back_the_file_byte_for_byte(tmp_path):
    written = from_log(logged(), tmp_path / "r.jsonl")
    assert written == [(tmp_path / "r.jsonl", len(RUN.read_text().splitlines()))]
    assert (tmp_path / "r.jsonl").read_bytes() == RUN.read_bytes()
    assert list(tmp_path.iterdir()) == [tmp_path / "r.jsonl"]  # no temporary file left


@pytest.mark.parametrize("prefix", ["[pod/fb-fabbench-0-x7k2p/fabbench] ", "[1,0]<stdout>:"])
def test_a_prefix_the_log_added_is_taken_off(tmp_path, prefix):
    """kubectl logs --prefix; mpirun --tag-output (an MPIJob launcher's log)."""
    from_log(logged(prefix=prefix), tmp_path / "r.jsonl")
    assert (tmp_path / "r.jsonl").read_bytes() == RUN.read_bytes()


def test_without_out_the_file_gets_its_own_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from_log(logged())
    assert (tmp_path / RUN.name).read_bytes() == RUN.read_bytes()


def test_several_files_go_to_a_directory(tmp_path):
    other = tmp_path / "siteB.jsonl"
    other.write_text(RUN.read_text())
    log = logged() + logged(other)
    with pytest.raises(UsageError, match=r"holds 2 results files \(siteA-ib.jsonl, siteB.jsonl"
                       r"\): --out must be a directory"):
        from_log(log, tmp_path / "one.jsonl")
    (tmp_path / "out").mkdir()
    paths = [p for p, _ in from_log(log, tmp_path / "out")]
    assert paths == [tmp_path / "out" / RUN.name, tmp_path / "out" / "siteB.jsonl"]
    with pytest.raises(UsageError, match="holds the results file siteA-ib.jsonl twice"):
        from_log(logged() + logged(), tmp_path / "out")


def test_a_log_without_results_says_where_they_are():
    with pytest.raises(UsageError, match=r"no fabbench results in the log .*FABBENCH_RESULTS_"
                       r"TO_LOG=1.*--tail=-1"):
        from_log("fabbench: rank 0: done\n")


def test_a_cut_block_is_refused():
    """The kubelet rotated the log, or rank 0 was killed while writing it."""
    cut = "\n".join(logged().splitlines()[:5]) + "\n"
    with pytest.raises(UsageError, match=r"log line 3: the results block of siteA-ib.jsonl has "
                       "no end line"):
        blocks(cut)


def test_a_lost_or_foreign_line_is_refused():
    lines = logged().splitlines()
    del lines[4]
    with pytest.raises(UsageError, match="do not match its end line"):
        blocks("\n".join(lines))
    lines = logged().splitlines()
    lines[4] = lines[4].replace('"', "'", 2)
    with pytest.raises(UsageError, match="do not match its end line"):
        blocks("\n".join(lines))
    broken = logged().splitlines()
    broken[4] += "a warning"  # another process's bytes inside a line of the file
    with pytest.raises(UsageError, match="do not match its end line"):
        blocks("\n".join(broken))


@pytest.mark.parametrize("prefix", ["", "[1,0]<stdout>:"])
def test_other_processes_lines_in_the_block_are_passed_over(prefix):
    """The lines other ranks, mpirun or ssh write while rank 0 writes its block (mpirun carries
    them all to the launcher's log, untagged or tagged as theirs) are not the file's: the
    block is read whole."""
    mixed = logged(prefix=prefix).splitlines()
    mixed.insert(4, "Warning: Permanently added 'fb-worker-1' (ED25519) to the known hosts.")
    mixed.insert(6, "[1,1]<stdout>:fabbench: rank 1: done")
    (got,) = blocks("\n".join(mixed))
    (want,) = blocks(logged(prefix=prefix))
    assert got.lines == want.lines and got.name == want.name
    assert len(got.lines) == len(RUN.read_text().splitlines())


def test_every_record_is_checked_and_named_by_its_log_line(tmp_path):
    records = [json.loads(line) for line in RUN.read_text().splitlines()]
    records[1]["bytes"] = "many"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    with pytest.raises(UsageError, match=r"^log line 5: results file bad.jsonl, record 2: "
                       r"bytes: 'many' is not of type 'integer'$"):
        from_log(logged(bad), tmp_path / "r.jsonl")
    assert not (tmp_path / "r.jsonl").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_a_format_this_fabbench_does_not_read():
    log = logged().replace("fabbench-results/1", "fabbench-results/9", 1)
    with pytest.raises(UsageError, match="format 'fabbench-results/9'"):
        blocks(log)


def test_the_switch(monkeypatch):
    assert results_log.wanted({}) is False and results_log.wanted({results_log.ENV: "1"})
    with pytest.raises(UsageError, match="FABBENCH_RESULTS_TO_LOG takes 1"):
        results_log.wanted({results_log.ENV: "yes"})


def test_the_command(capsys, tmp_path, monkeypatch):
    log = tmp_path / "launcher.log"
    log.write_text(logged())
    code, out, err = cli(capsys, "from-log", str(log), "-o", str(tmp_path / "r.jsonl"))
    assert code == 0 and err == ""
    assert out == f"wrote {tmp_path / 'r.jsonl'} ({len(RUN.read_text().splitlines())} records)\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("nothing here\n"))
    code, out, err = cli(capsys, "from-log", "-")
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("fabbench: error: no fabbench results in the log")
    code, _, err = cli(capsys, "from-log", str(tmp_path / "missing.log"))
    assert code == 2 and err.startswith("fabbench: error: cannot read the log ")
