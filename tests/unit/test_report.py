"""fabbench report over small recorded results files (tests/fixtures/runs)."""

from __future__ import annotations

import csv
import dataclasses
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fabbench.cli.main import main
from fabbench.errors import UsageError
from fabbench.report import tables
from fabbench.report.runs_report import make_report
from fabbench.results.link import link_of
from fabbench.results.runs import load
from fabbench.workloads.train.record import Train
from unit.test_records import replaced

RESULTS = Path(__file__).parents[1] / "fixtures" / "runs"
SITE_A = RESULTS / "siteA-ib.jsonl"
SITE_B = RESULTS / "siteB-ib.jsonl"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_load_labels_runs_uniquely_and_names_hosts_when_they_differ():
    series = load([SITE_A, SITE_B, SITE_A])
    assert [s.label for s in series] == ["nodeA: infiniband/mpi", "nodeB: infiniband/mpi",
                                         "nodeA: infiniband/mpi #2"]
    assert len(series[0].collectives) == 8 and len(series[0].of_kind(Train)) == 1


def test_a_directory_stands_for_its_results_files():
    series = load([RESULTS])
    assert len(series) == 5
    assert {s.run.ranks for s in series} == {1, 4, 8, 16}
    assert any(s.label.endswith("×8") for s in series)  # ranks differ: they are in the label


def test_nccl_table_has_the_nccl_tests_columns_and_the_link_share():
    (s,) = load([SITE_A])
    text = tables.nccl_table(s, "allreduce")
    header = text.splitlines()[1].split()
    assert header[:10] == ["#", "size", "count", "type", "redop", "root", "time", "algbw",
                           "busbw", "#wrong"]
    row = text.splitlines()[-1].split()
    assert row[:5] == ["16777216", "4194304", "float", "sum", "-1"]
    assert float(row[-2]) == pytest.approx(79.8, abs=0.5)  # link % of 100 Gb/s
    assert header[-1] == "ceil%" and row[-1] == "-"  # no ceiling measured in this run


def test_efficiency_sentence_names_the_link():
    (s,) = load([SITE_A])
    assert link_of(s.run).speed_gbit_s == 100
    line = tables.efficiency_lines([s])[0]
    assert "is 80% of the 100 Gb/s link (mlx5_0 port 1" in line


def test_link_of_ethernet_uses_the_pinned_interface_and_loopback_has_none():
    (s,) = load([SITE_A])
    run = replaced(s.run, fabric="ethernet",
                   profile_env={"OMPI_MCA_btl_tcp_if_include": "eth0"})
    assert link_of(run).speed_gbit_s == 25
    assert link_of(replaced(run, profile_env={"OMPI_MCA_btl_tcp_if_include": "lo"})) is None
    assert link_of(replaced(run, wire="tcp", fabric="infiniband",
                            profile_env={})).speed_gbit_s == 100  # the fastest physical NIC up
    assert link_of(replaced(run, fabric="shm")) is None


def test_unstable_points_are_flagged():
    _, b = load([SITE_A, SITE_B])
    assert tables.unstable_points(b) == ["allreduce 1024 B: median 95% CI ±11% (wider than ±5%)"]


def test_csv_export_has_a_row_per_point_and_a_train_file(tmp_path):
    out = make_report([SITE_A, SITE_B], csv=tmp_path / "all.csv")
    assert [p.name for p in out.written] == ["all.csv", "all-train.csv"]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "all.csv").read_text())))
    assert len(rows) == 16
    assert tuple(rows[0]) == tables.CSV_FIELDS
    big = [r for r in rows if r["op"] == "allreduce" and r["bytes"] == "16777216"]
    assert [float(r["link_pct"]) for r in big] == pytest.approx([79.8, 79.6], abs=1)
    train = list(csv.DictReader(io.StringIO((tmp_path / "all-train.csv").read_text())))
    assert train[0]["model"] == "resnet50" and train[0]["scaling_efficiency"] == "0.91"


def test_a_world_of_one_rank_has_no_share_of_the_link_in_the_csv():
    (s,) = load([SITE_A])
    one = dataclasses.replace(s, collectives=[replaced(c, ranks=1, busbw_gbyte_s=0.0)
                                              for c in s.collectives])
    rows = tables.collective_rows([one])
    assert {r["link_gbit_s"] for r in rows} == {100}  # the link is known
    assert all(r["link_pct"] is None and r["ceiling_pct"] is None for r in rows)  # no bus
    assert all(r["link_pct"] for r in tables.collective_rows([s]) if r["busbw_gbyte_s"])


def test_plots_are_real_images_with_the_series(tmp_path):
    from matplotlib import image

    out = make_report([SITE_A, SITE_B, *sorted(RESULTS.glob("siteA-train-*.jsonl"))],
                      plots_dir=tmp_path)
    names = sorted(p.name for p in out.written)
    assert names == ["busbw.png", "busbw.svg", "latency.png", "latency.svg", "train.png",
                     "train.svg"]
    busbw = (tmp_path / "busbw.svg").read_text()
    for text in ("nodeA: infiniband/mpi ×16", "nodeB: infiniband/mpi ×16", "allreduce",
                 "allgather", "busbw (GB/s)"):
        assert text in busbw
    # site B's noisy 1 KiB allreduce is circled and explained in the legend
    assert busbw.count('id="unstable-nodeB: infiniband/mpi ×16"') == 1
    assert "unstable (not median 95% CI within ±5%)" in busbw
    train = (tmp_path / "train.svg").read_text()
    assert "infiniband/mpi resnet50" in train and "samples/s" in train
    pixels = image.imread(tmp_path / "busbw.png")
    assert pixels.shape[:2] == (390, 840)  # 2 ops side by side, 4.2 x 3.9 in each, 100 dpi
    assert pixels.std() > 0.05  # not a blank image


def test_html_is_one_file_with_embedded_figures(tmp_path):
    make_report([SITE_A, SITE_B], html=tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert html.count('src="data:image/svg+xml;base64,') == 3  # busbw, latency, train
    assert "http://" not in html.replace("http://www.w3.org", "") and "<script" not in html
    assert "80% of the 100 Gb/s link" in html
    assert "1 of 8 points are unstable" in html


def test_cli_report_prints_tables_and_writes_outputs(capsys, tmp_path):
    code, out, err = cli(capsys, "report", str(SITE_A), str(SITE_B), "--csv",
                         str(tmp_path / "x.csv"))
    assert code == 0
    assert "# nodeA: infiniband/mpi: allreduce, 16 ranks on 2 node(s)" in out
    assert f"wrote {tmp_path / 'x.csv'}" in out
    assert "1 of 8 points are unstable" in err


@pytest.mark.parametrize(("content", "message"), [
    ("", "no results records (empty file)"),
    ("hello world\n", "not a fabbench results file (a line is not JSON)"),
    ('{"hello": 1}\n', "not a fabbench results record (no 'kind')"),
    (None, "schema 'fabbench/99' is not one this fabbench reads"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    if content is None:  # a file from a future schema version
        content = SITE_A.read_text().replace('"schema":"fabbench/1"', '"schema":"fabbench/99"')
    bad.write_text(content)
    for command in ("report", "compare"):
        args = [command, str(bad)] + ([str(SITE_A)] if command == "compare" else [])
        code, out, err = cli(capsys, *args)
        assert code == 2
        assert err.count("\n") == 1 and message in err and err.startswith("fabbench: error:")


def test_a_record_that_breaks_the_schema_is_refused(capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(SITE_A.read_text().replace('"busbw_gbps":', '"busbw_gbps":-', 1))
    code, _, err = cli(capsys, "report", str(bad))
    assert code == 2 and "bad.jsonl:2: busbw_gbps" in err  # a fabbench/1 file: its own names


def test_a_truncated_last_line_is_reported_and_the_rest_read(capsys, tmp_path):
    cut = tmp_path / "killed.jsonl"
    text = SITE_A.read_text()
    cut.write_text(text[: text.rindex('{"kind":"summary"') + 20])  # killed mid-write
    code, out, err = cli(capsys, "report", str(cut))
    assert code == 0
    assert "last line is truncated" in err and "has no summary record" in err
    # both ops' largest sizes are still reported
    assert len(re.findall(r"^ +16777216 ", out, re.M)) == 2


def test_missing_path_and_empty_directory(capsys, tmp_path):
    code, _, err = cli(capsys, "report", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "no such file or directory" in err
    code, _, err = cli(capsys, "report", str(tmp_path))
    assert code == 2 and "no results files (*.jsonl)" in err


def test_load_refuses_nothing():
    with pytest.raises(UsageError):
        load([])


def test_help_imports_no_heavy_library():
    """`fabbench --help` (and so every command's start) imports neither plotting nor a
    communication library: they are imported inside the commands that use them."""
    import subprocess
    import sys

    code = ("import sys; from fabbench.cli.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'torch', 'mpi4py', 'horovod') or m == 'fabbench.report.plots')\n"
            "assert not heavy, heavy")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       check=False)
    assert p.returncode == 0 and "Usage" in p.stdout, p.stderr[-2000:]


def test_busbw_as_a_share_of_the_emulated_link_and_the_measured_ceiling(tmp_path):
    from fabbench.results.link import ceiling_of, link_of
    from fabbench.results.records import Ceiling, Run

    run = Run.read({"fabric": "ethernet", "provenance": {"nics": []},
                    "emulation": {"interface": "fbnet0", "links": [
                        {"node": "node0", "speed_gbit_s": 1.0},
                        {"node": "node1", "speed_gbit_s": 0.25}]}})
    link = link_of(run)
    assert link.speed_gbit_s == 0.25 and "node1" in link.what  # the slowest link bounds it
    one = Ceiling.read({"mode": "one-way", "tool": "iperf3", "per_direction_gbit_s": 0.95,
                        "client": {"host": "node0"}, "server": {"host": "node1"},
                        "directions": []})
    both = replaced(one, mode="bidir", per_direction_gbit_s=0.8)
    assert ceiling_of([one]).speed_gbit_s == 0.95
    assert ceiling_of([one, both]).speed_gbit_s == 0.8  # both ways at once when measured
    assert ceiling_of([replaced(both, per_direction_gbit_s=None, error="x")]) is None
    assert ceiling_of([one, both]).efficiency(0.05) == pytest.approx(0.5)


def test_train_halo_and_ceiling_records_are_reported_as_the_run_showed_them(tmp_path):
    # a file of every kind (test_records' examples), and one without its collective: the
    # train and halo lines are the run's own; the ceiling is in the collective table's head when
    # there is one, on its own line when there is none
    from fabbench.results.writer import ResultWriter
    from unit.test_records import examples

    for keep_collective in (True, False):
        path = tmp_path / f"all-{keep_collective}.jsonl"
        writer = ResultWriter(path)
        for kind, record in examples().items():
            if kind != "collective" or keep_collective:
                writer.write(record)
        writer.close()
        text = make_report([path]).text
        assert "train, 2 ranks on 1 node(s)\n#       model ranks" in text
        assert "halo, 2 ranks on 1 node(s)\n#  cells/rank" in text
        assert ("# ceiling iperf3" in text) is not keep_collective
        assert (", ceiling " in text) is keep_collective


def test_busbw_above_the_measured_ceiling_is_called_out_with_the_tools_retransmits(tmp_path):
    import dataclasses

    from fabbench.results.writer import ResultWriter
    from unit.test_records import examples

    made = examples()  # its 1 MiB allreduce moves 2.1 GB/s; its iperf3 ceiling is 0.85 Gbit/s
    ceiling = made["ceiling"]
    for resent, said in ((None, None), (7, "it resent 12 TCP segments")):
        directions = [dataclasses.replace(d, retransmits=resent if i == 0 else 5 if resent
                                          else None) for i, d in enumerate(ceiling.directions)]
        path = tmp_path / f"above-{resent}.jsonl"
        writer = ResultWriter(path)
        for record in (made["run"], made["collective"],
                       dataclasses.replace(ceiling, directions=directions)):
            writer.write(record)
        writer.close()
        text = make_report([path]).text
        assert "of the measured ceiling (iperf3 both ways n0<->n1" in text
        assert "above the ceiling: the raw test was held back by something other than the " \
               "wire" in text
        assert (said in text) if said else ("resent" not in text)


@pytest.mark.parametrize("argv", [["report", str(SITE_A)], ["--help"]])
def test_the_console_report_and_help_import_no_plotting_nor_comm_library(argv):
    """The console report draws nothing and tests nothing: matplotlib (figures), numpy (a
    comparison's statistics), jsonschema (the walk of a refused record), torch, mpi4py and
    Horovod stay unimported; so does everything of them for `fabbench --help`."""
    heavy = ("matplotlib", "numpy", "jsonschema", "torch", "mpi4py", "horovod")
    code = ("import sys\nfrom fabbench.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120)
    assert done.stderr.splitlines()[-1] == "[]", done.stderr
