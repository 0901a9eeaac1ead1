"""results.output_files: a file a command writes at a path its user named is new, or refused before
any work; it never replaces a file (fabbench's own Prometheus textfile excepted), nor one of the
inputs by any of its names, and it is never half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabbench.errors import UsageError
from fabbench.results import output_files

OWN = "# fabbench test: replaced on each write"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "r.jsonl").write_text('{"kind": "run"}\n')
    (tmp_path / "notes.txt").write_text("mine\n")
    os.symlink(tmp_path / "r.jsonl", tmp_path / "soft.jsonl")
    os.link(tmp_path / "r.jsonl", tmp_path / "hard.jsonl")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    (tmp_path / "sub").mkdir()
    return tmp_path


def _refused(match: str, *args, **kwargs) -> None:
    with pytest.raises(UsageError, match=match):
        output_files.check(*args, **kwargs)


def test_an_input_is_refused_by_any_of_its_names(folder):
    inputs = [folder / "r.jsonl"]
    for name in ("r.jsonl", "soft.jsonl", "hard.jsonl", "sub/../r.jsonl"):
        _refused("is one of the inputs", "--html", folder / name, inputs)
    # a symlink given as the input, the file it names as the output
    _refused("is one of the inputs", "--csv", folder / "r.jsonl", [folder / "soft.jsonl"])


def test_a_file_the_command_would_read_from_an_input_directory_is_refused(folder):
    _refused("in the input directory", "--json", folder / "sub" / "new.jsonl", [folder])
    assert output_files.check("--json", folder / "sub" / "v.json", [folder]).path.name == "v.json"


@pytest.mark.parametrize("name,match", [
    ("notes.txt", "exists: fabbench never overwrites a file"),
    ("dangling", "exists"),  # a link to nothing: writing through it would create its target
    ("sub", "is a directory"),
    ("gone/x.html", "no folder"),
    ("notes.txt/x.html", "is not a folder"),
    ("a\nb.html", "control character"),
    ("tab\there", "control character"),
])
def test_what_is_refused_before_any_work(folder, name, match):
    _refused(match, "--html", folder / name)


def test_a_folder_that_cannot_be_written_is_refused_with_the_systems_reason():
    _refused("cannot write --json /proc/fabbench-x: ", "--json", Path("/proc/fabbench-x"))


def test_a_new_file_is_written_whole_and_nothing_else_is_left(folder):
    before = sorted(p.name for p in folder.iterdir())
    out = output_files.check("--csv", folder / "t.csv", [folder / "r.jsonl"])
    assert output_files.write(out, "a,b\n") == folder / "t.csv"
    assert (folder / "t.csv").read_text() == "a,b\n"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*before, "t.csv"])
    umask = os.umask(0)
    os.umask(umask)
    assert (folder / "t.csv").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_file_that_appears_after_the_check_is_not_clobbered(folder):
    out = output_files.check("--html", folder / "late.html")
    (folder / "late.html").write_text("someone else's\n")
    with pytest.raises(UsageError, match="appeared while fabbench worked"):
        output_files.write(out, "<html>")
    assert (folder / "late.html").read_text() == "someone else's\n"
    assert not [p for p in folder.iterdir() if p.name.startswith(".late.html")]


def test_its_own_file_is_replaced_and_only_its_own(folder):
    own = folder / "f.prom"
    own.write_text(OWN + "\nold 1\n")
    out = output_files.check("--prometheus", own, [folder / "r.jsonl"], own=OWN)
    output_files.write(out, OWN + "\nnew 1\n")
    assert own.read_text() == OWN + "\nnew 1\n"
    (folder / "other.prom").write_text("# HELP node_x\nnode_x 1\n")
    _refused("exists", "--prometheus", folder / "other.prom", own=OWN)
    # the header further down, or a link to a file of its own: not its own
    (folder / "late.prom").write_text("x 1\n" + OWN + "\n")
    _refused("exists", "--prometheus", folder / "late.prom", own=OWN)
    os.symlink(own, folder / "link.prom")
    _refused("exists", "--prometheus", folder / "link.prom", own=OWN)
    # one of the inputs, even one that carries the header
    _refused("is one of the inputs", "--prometheus", own, [own], own=OWN)


def test_several_outputs_are_checked_together_and_written_all_or_none(folder):
    with pytest.raises(UsageError, match="--csv .* is --html too"):
        output_files.check_all([("--html", folder / "a"), ("--csv", folder / "a")])
    a, b = output_files.check_all([("--html", folder / "a"), ("--csv", folder / "b"),
                              ("--json", None)])
    (folder / "b").write_text("meanwhile\n")
    with pytest.raises(UsageError, match="exists"):
        output_files.write_all([(a, "A"), (b, "B")])
    assert not (folder / "a").exists() and (folder / "b").read_text() == "meanwhile\n"


def test_a_folder_of_figures_is_made_and_no_figure_replaced(folder):
    figs = output_files.check_folder("--plots", folder / "figs")
    assert not (folder / "figs").exists()  # made when the figures are written
    output_files.write_all([(output_files.into(figs, "a.svg"), "<svg/>")])
    with pytest.raises(UsageError, match="a.svg exists"):
        output_files.write_all([(output_files.into(figs, "b.svg"), "b"),
                                (output_files.into(figs, "a.svg"), "")])
    assert (folder / "figs" / "a.svg").read_text() == "<svg/>"
    assert not (folder / "figs" / "b.svg").exists()
    with pytest.raises(UsageError, match="is not a folder"):
        output_files.check_folder("--plots", folder / "notes.txt")
    with pytest.raises(UsageError, match="no folder"):
        output_files.check_folder("--plots", folder / "gone" / "figs")
