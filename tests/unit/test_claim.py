"""A results file is claimed by one run at a time (results/claim.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fabbench.errors import UsageError
from fabbench.results.claim import claim
from fabbench.results.records import Summary
from fabbench.results.writer import ResultWriter


def test_second_claim_is_refused_while_the_first_holds(tmp_path):
    out = tmp_path / "r.jsonl"
    first = claim(out)
    with pytest.raises(UsageError, match="being written by another run"):
        claim(out)
    first.release()
    assert not out.exists()  # nothing written: no file left behind
    claim(out).release()


def test_claim_across_processes(tmp_path):
    out = tmp_path / "r.jsonl"
    held = claim(out)
    code = ("import sys\nfrom fabbench.results.claim import claim\n"
            "from fabbench.errors import UsageError\n"
            "try:\n    claim(sys.argv[1])\nexcept UsageError as e:\n    print(e); sys.exit(2)")
    p = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                       timeout=60, check=False)
    assert p.returncode == 2 and "being written by another run" in p.stdout
    held.release()


def test_a_file_with_records_is_refused_unless_appending(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text('{"kind":"run"}\n')
    with pytest.raises(UsageError, match="already holds results"):
        claim(out)
    held = claim(out, append=True)
    held.release()
    assert out.read_text() == '{"kind":"run"}\n'  # an append claim never removes records


def test_a_claiming_writer_keeps_what_it_wrote(tmp_path):
    out = tmp_path / "r.jsonl"
    writer = ResultWriter(out, claim=True)
    writer.open()
    with pytest.raises(UsageError):
        ResultWriter(out, claim=True).open()
    writer.write(Summary(run_id="r1", ok=True, counts={}, wall_s=0.5))
    writer.close()
    assert out.read_text() == ('{"kind":"summary","run_id":"r1","ok":true,"counts":{},'
                               '"wall_s":0.5,"error":null}\n')
    with pytest.raises(UsageError, match="already holds results"):
        ResultWriter(out, claim=True).open()
