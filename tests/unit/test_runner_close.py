"""runner._close_unfinished: a run that ended badly gets a summary saying why, unless rank 0 had
written one; an ok one of this run means the launch failed after every measurement."""

from __future__ import annotations

from types import SimpleNamespace

from fabbench import runner
from fabbench.results.records import Summary
from fabbench.results.writer import ResultWriter


def _file(tmp_path, *summaries: Summary):
    path = tmp_path / "r.jsonl"
    writer = ResultWriter(path)
    for s in summaries:
        writer.write(s)
    writer.close()
    return path


def _summary(run_id: str, ok: bool) -> Summary:
    return Summary(run_id=run_id, ok=ok, counts={}, wall_s=1.0, error=None if ok else "x")


def test_an_ok_summary_of_this_run_means_the_measurements_finished(tmp_path):
    path = _file(tmp_path, _summary("a", True))
    before = path.read_bytes()
    assert runner._close_unfinished(SimpleNamespace(out=str(path), run_id="a"), 205, "") is True
    assert path.read_bytes() == before  # nothing appended after rank 0's summary


def test_a_failed_or_older_summary_is_not_a_finished_run(tmp_path):
    path = _file(tmp_path, _summary("a", False))
    assert runner._close_unfinished(SimpleNamespace(out=str(path), run_id="a"), 1, "") is False
    path = _file(tmp_path, _summary("old", True))
    assert runner._close_unfinished(SimpleNamespace(out=str(path), run_id="a"), 1, "") is False


def test_no_file_is_no_finished_run(tmp_path):
    plan = SimpleNamespace(out=str(tmp_path / "none.jsonl"), run_id="a")
    assert runner._close_unfinished(plan, 1, "") is False
    assert not (tmp_path / "none.jsonl").exists()
