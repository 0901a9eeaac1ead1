"""Commands that moved (issue 45): `floors verify|baseline|label-nodes`, `forecast`, `emulate
run|up|down`. Each old spelling still runs the same command, is hidden from `fabbench --help`,
and its help's first line says where it went."""

from __future__ import annotations

import inspect

import pytest
import typer

from conftest import cli
from fabbench.cli.emulate import old_spelling
from fabbench.cli.main import app
from fabbench.cli.options import ALIASES_UNTIL

MOVED = {"verify": ("floors", "verify"), "baseline": ("floors", "baseline"),
         "label-nodes": ("floors", "label-nodes"), "model": ("forecast",)}


def _command(*path: str):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def test_the_hidden_commands_are_exactly_the_old_spellings():
    top = typer.main.get_command(app).commands
    assert {name for name, c in top.items() if c.hidden} == set(MOVED)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_spelling_runs_the_new_command_and_says_where_it_went(capsys, monkeypatch, old):
    new = MOVED[old]
    assert inspect.unwrap(_command(old).callback) is inspect.unwrap(_command(*new).callback)
    monkeypatch.setenv("COLUMNS", "2000")
    code, out, err = cli(capsys, old, "--help")
    said = f"Now `fabbench {' '.join(new)}`; this spelling goes in fabbench {ALIASES_UNTIL}."
    assert code == 0 and not err and said in [ln.strip() for ln in out.splitlines()]
    _, listed, _ = cli(capsys, "--help")
    assert f" {old} " not in listed and f" {new[0]} " in listed


def test_the_old_emulate_spelling_runs_emulate_run():
    assert old_spelling(["emulate", "--nodes", "2", "--", "run"]) == [
        "emulate", "run", "--nodes", "2", "--", "run"]
    for kept in (["emulate", "up", "--nodes", "2"], ["emulate", "down"], ["emulate", "--help"],
                 ["emulate"], ["run", "--nodes", "2"]):
        assert old_spelling(kept) == kept


@pytest.mark.parametrize("word", ["up", "down"])
def test_emulate_up_after_the_options_is_refused_in_one_line(capsys, word):
    code, out, err = cli(capsys, "emulate", "--nodes", "2", word)
    assert code == 2 and not out
    assert err.strip() == (f"fabbench: error: the word goes first: `fabbench emulate {word} "
                           "--nodes ...`")


def test_the_old_verify_spelling_judges_as_the_new_one(capsys, tmp_path):
    results = tmp_path / "none.jsonl"
    results.write_text("")
    old = cli(capsys, "verify", "--floors", "reference", str(results))
    new = cli(capsys, "floors", "verify", "--floors", "reference", str(results))
    assert old == new and old[0] == 2 and "empty file" in old[2]
