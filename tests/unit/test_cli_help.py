"""`fabbench --help` and every command's --help: they render, each paragraph of a command's
help stays one paragraph (no line break in mid-sentence), and each command shows an example."""

from __future__ import annotations

import pytest
import typer

from conftest import cli
from fabbench.cli.main import app


def commands(group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under a group (Typer's click-style groups have ``commands``)."""
    out = []
    for name, command in sorted(group.commands.items()):
        out.append((*path, name))
        if hasattr(command, "commands"):
            out += commands(command, (*path, name))
    return out


def command_of(path: tuple[str, ...]):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


ALL = commands(typer.main.get_command(app))
# what `fabbench --help` lists: the old spellings kept for a release are hidden
LISTED = [path for path in ALL if not command_of(path).hidden]


def test_every_command_is_listed():
    assert {("run",), ("report",), ("compare",), ("model",), ("env",), ("doctor",),
            ("render", "slurm"), ("render", "k8s")} <= set(ALL)


def test_top_level_help(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = cli(capsys, "--help")
    assert code == 0
    for path in LISTED:
        if len(path) == 1:
            assert f" {path[0]} " in out, path


@pytest.mark.parametrize("path", ALL, ids=" ".join)
def test_command_help_keeps_paragraphs_whole(capsys, monkeypatch, path):
    monkeypatch.setenv("COLUMNS", "2000")  # wide enough that no paragraph needs wrapping
    code, out, err = cli(capsys, *path, "--help")
    assert code == 0 and not err
    lines = [ln.strip() for ln in out.splitlines()]
    help_text = command_of(path).help or ""
    for paragraph in help_text.split("\n\n"):
        plain = paragraph.replace("[bold]", "").replace("[/]", "").strip()
        assert "\n" not in paragraph and plain in lines, (path, plain)
    if not hasattr(command_of(path), "commands") and path != ("version",):
        assert any(ln.startswith("Example: fabbench ") for ln in lines), path


def test_the_command_list_is_grouped_by_what_users_do_in_one_sentence_each(capsys, monkeypatch):
    from fabbench.cli.main import PANELS

    top = [path[0] for path in LISTED if len(path) == 1]
    placed = [name for names in PANELS.values() for name in names]
    assert sorted(placed) == sorted(top)  # every command in exactly one panel
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = cli(capsys, "--help")
    panels = [ln.split("─ ")[1].split(" ─")[0] for ln in out.splitlines() if ln.startswith("╭─ ")]
    assert panels == ["Options", *PANELS]
    for name in top:
        short = command_of((name,)).short_help or command_of((name,)).help
        assert short and short.count(". ") == 0 and len(short) <= 120, (name, short)
