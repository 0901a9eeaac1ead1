"""`fabbench --help` and every command's --help: they render, each paragraph of a command's
help stays one paragraph (no line break in mid-sentence), each command's help opens with one
sentence and ends with examples (its epilog) whose options all exist."""

from __future__ import annotations

import shlex

import pytest
import typer
from rich.text import Text

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


def example_commands(path: tuple[str, ...]) -> list[list[str]]:
    """The fabbench command lines of a command's examples (its epilog), as the shell splits
    them: each fabbench command of a pipeline or an && list, without its redirection, and the
    command `fabbench emulate run` runs (after its `--`)."""
    epilog = Text.from_markup(command_of(path).epilog or "").plain
    out = []
    for line in epilog.splitlines():
        assert line.startswith("Example: fabbench ") or line.startswith("Example: kubectl "), line
        words = shlex.split(line.removeprefix("Example: ").partition(" # ")[0])
        while words:
            end = next((i for i, w in enumerate(words) if w in ("|", "&&")), len(words))
            command, words = words[:end], words[end + 1:]
            if ">" in command:
                command = command[:command.index(">")]
            if command[0] == "fabbench":
                out.append(command[1:])
                if command[1:3] == ["emulate", "run"]:
                    out.append(command[command.index("--") + 1:])
    return out


@pytest.mark.parametrize("path", [(), *LISTED], ids=lambda path: " ".join(path) or "fabbench")
def test_each_help_opens_with_one_sentence_and_its_examples_parse(path):
    first = (command_of(path).help or "").split("\n\n")[0]
    assert first.endswith(".") and first.count(". ") == 0 and len(first) <= 90, first
    assert 1 <= len((command_of(path).epilog or "").splitlines()) <= 3, path
    for words in example_commands(path):
        command = typer.main.get_command(app)
        name = ["fabbench"]
        while hasattr(command, "commands"):
            name.append(words[0])
            command, words = command.commands[words[0]], words[1:]
        # parsing checks every option and argument, and converts each value; nothing runs
        command.make_context(" ".join(name), list(words))
