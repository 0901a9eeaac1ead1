"""No command overwrites a file (docs/cli.md): every output option of every command, found in
the command tree itself, is pointed at an unrelated file, at one of the command's inputs, at a
symlink to one, at a directory, at a file nowhere writable and under a folder that cannot be;
each is refused in one line with exit code 2 before any work (no rank starts), and every file
under the test's folder is byte for byte what it was, with nothing added.

The CLI runs in this process (results.output_files refuses before anything is launched; a rank
started by mistake would show as a test that hangs past its timeout)."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, cli

pytestmark = [pytest.mark.integration, pytest.mark.together]

FIXTURES = REPO / "tests" / "fixtures"
OUTPUT_NAMES = {"--out", "-o", "--html", "--csv", "--json", "--prometheus", "--plots"}
PROFILES = REPO / "src" / "fabbench" / "fabrics" / "profiles"


@dataclass(frozen=True)
class Case:
    """How to exercise one output: its command line with the output at OUT, the input the
    cases aim at, and whether the command makes the output's missing folders (`run --out
    results/x.jsonl`, a study's or a tune's directory: refused only where none can be made)."""

    argv: Callable[[Path, str], list[str]]  # (the inputs' folder, the output) -> argv
    target: str                              # the input, in the inputs' folder
    makes_folders: bool = False


def _log(folder: Path) -> None:
    from fabbench.launch.results_log import emit

    text = io.StringIO()
    emit(folder / "siteA-ib.jsonl", text)
    (folder / "launcher.log").write_text("other output\n" + text.getvalue())


A, B = "siteA-ib.jsonl", "siteB-ib.jsonl"
CASES: dict[tuple[str, str], Case] = {
    ("run", "--out"): Case(lambda d, o: ["run", "--fabric", str(d / "eth.toml"), "--primitive",
                                         "mpi", "--ranks", "2", "--out", o], "eth.toml",
                          makes_folders=True),
    **{(cmd, flag): Case(lambda d, o, cmd=cmd, flag=flag: [cmd, str(d / A), str(d / B), flag, o],
                         A)
       for cmd in ("report", "compare") for flag in ("--html", "--csv", "--plots")},
    ("floors verify", "--json"): Case(lambda d, o: ["floors", "verify", "--floors",
                                                    str(d / "f.toml"), str(d / A), "--json", o],
                                      A),
    ("floors verify", "--prometheus"): Case(
        lambda d, o: ["floors", "verify", "--floors", str(d / "f.toml"), str(d / A),
                      "--prometheus", o], "f.toml"),
    ("floors baseline", "--out"): Case(lambda d, o: ["floors", "baseline", str(d / A), "--out",
                                                     o], A),
    ("from-log", "--out"): Case(lambda d, o: ["from-log", str(d / "launcher.log"), "--out", o],
                                "launcher.log"),
    ("study run", "--out"): Case(lambda d, o: ["study", "run", str(d / "tiny.toml"), "--out", o],
                                 "tiny.toml", makes_folders=True),
    ("tune", "DIRECTORY"): Case(lambda d, o: ["tune", o, "--fabric", str(d / "eth.toml"),
                                              "--primitive", "mpi", "--quick"], "eth.toml",
                                makes_folders=True),
    # a recording's directory: refused unless new or empty, before the command runs
    ("trace", "--out"): Case(lambda d, o: ["trace", "--out", o, "--", "cat", str(d / "eth.toml")],
                             "eth.toml", makes_folders=True),
    # tune's launches write under its directory: --out (a run option) is refused whatever it is
    ("tune", "--out"): Case(lambda d, o: ["tune", str(d / "tune"), "--fabric", str(d / "eth.toml"),
                                          "--primitive", "mpi", "--quick", "--out", o], "eth.toml"),
}


def _outputs_in_the_tree() -> set[tuple[str, str]]:
    """(command, option) of every visible command's output: an option named as outputs are
    that takes a value, and an argument named DIRECTORY (tune's)."""
    from fabbench.cli.main import _command

    found: set[tuple[str, str]] = set()

    def walk(group, path: tuple[str, ...]) -> None:
        for name, command in group.commands.items():
            if command.hidden:  # an old spelling: the same function as its new one
                continue
            if hasattr(command, "commands"):  # a group of commands
                walk(command, (*path, name))
                continue
            for p in command.params:
                kind = p.param_type_name  # click's: "option" or "argument"
                if kind == "option" and not p.is_flag and set(p.opts) & OUTPUT_NAMES:
                    found.add((" ".join((*path, name)), p.opts[0]))
                elif kind == "argument" and p.name == "directory":
                    found.add((" ".join((*path, name)), "DIRECTORY"))

    walk(_command(), ())
    return found


def test_every_output_of_every_command_is_exercised_here():
    """A new output option fails here until it has its Case (and so its refusals)."""
    assert _outputs_in_the_tree() == set(CASES)


def _files(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, a link's target, a folder as such."""
    out: dict[str, str] = {}
    for where, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            p = Path(where, name)
            key = str(p.relative_to(root))
            if p.is_symlink():
                out[key] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[key] = "folder"
            else:
                out[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("outputs-safe")
    for name in (A, B):
        shutil.copy(FIXTURES / "runs" / name, d / name)
    shutil.copy(PROFILES / "ethernet.toml", d / "eth.toml")
    shutil.copy(REPO / "src" / "fabbench" / "floors" / "reference.toml", d / "f.toml")
    shutil.copy(FIXTURES / "studies" / "tiny.toml", d / "tiny.toml")
    _log(d)
    (d / "unrelated.txt").write_text("a file of the user's\n")
    (d / "unrelated.jsonl").write_text((FIXTURES / "runs" / A).read_text())
    (d / "busy").mkdir()
    (d / "busy" / "notes.txt").write_text("kept\n")
    (d / "busy" / A).write_text("not the log's\n")  # from-log -o DIR writes DIR/<its name>
    for figure in ("busbw.png", "busbw.svg", "ratio.svg", "ratio.png"):
        (d / "busy" / figure).write_text("the user's figure\n")
    return d


def _aims(d: Path, case: Case) -> dict[str, str]:
    os.symlink(d / case.target, d / "link")
    aims = {"an unrelated file": str(d / "unrelated.txt"),
            "an unrelated results file": str(d / "unrelated.jsonl"),
            "its input": str(d / case.target), "a symlink to its input": str(d / "link"),
            "a directory": str(d / "busy"), "a file nowhere writable": "/proc/fabbench-x",
            "under a folder that cannot be made": str(d / "unrelated.txt" / "sub" / "x")}
    if not case.makes_folders:
        aims["under a missing folder"] = str(d / "missing" / "x")
    return aims


@pytest.mark.parametrize("key", sorted(CASES), ids=" ".join)
def test_no_output_overwrites_anything(key, inputs, tmp_path, capsys):
    case = CASES[key]
    d = tmp_path / "in"
    shutil.copytree(inputs, d, symlinks=True)
    aims = _aims(d, case)
    before = _files(tmp_path)
    for what, out in aims.items():
        code, _, err = cli(capsys, *case.argv(d, out))
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (what, code, err)
        assert lines[0].startswith("fabbench: error: ") and "Traceback" not in err, (what, err)
        assert _files(tmp_path) == before, what
