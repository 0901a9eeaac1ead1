"""report.long_table: a table of many rows written as Rich writes a Table of the same cells,
byte for byte, on consoles of every width and colour system, without Rich's work per cell."""

from __future__ import annotations

import io
import random

import pytest
from rich import box
from rich.console import Console
from rich.table import Table

from fabbench.report.long_table import LongTable

# cells of every kind the fast path must tell apart: plain text that fits or wraps, one word
# to cut, markup, emoji codes, wide and combining characters, spaces at an end, tabs, newlines
CELLS = ["a", "ethernet/mpi #2", "0.345–2.848", "1", "same", "[green]same[/]", "[red]slower[/]",
         "A: median 95% CI ±118% (wider than ±5%); B: median 95% CI ±46% (wider than ±5%)",
         "", " lead", "trail ", "x  y", ":smile:", "a:b:c", "日本語テキスト", "ab日本語",
         "[bold]b[/] and more text", "\\[not markup]", "tab\there", "two\nlines",
         "averylongwordwithoutanyspacethatmustbecut", "ﬁ", "e\u0301", "0.030–114.655", "€—…",
         "[yellow]too few samples[/]"]


def _cell(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.45:
        return rng.choice(CELLS)
    if pick < 0.8:
        return f"{rng.uniform(0, 1e5):.{rng.randint(0, 4)}f}"
    return " ".join(rng.choice(["word", "longerword", "x", "±5%", "–"])
                    for _ in range(rng.randint(1, 8)))


def _tables(rng: random.Random) -> tuple[Table, LongTable]:
    columns = [dict(header=rng.choice(["B", "size B", "A p50 µs", "95% CI", "notes", "x"]),
                    justify=rng.choice(["left", "right", "left", "right", "center"]),
                    no_wrap=rng.random() < 0.1,
                    overflow=rng.choice(["ellipsis", "ellipsis", "crop", "fold", "ignore"]))
               for _ in range(rng.randint(1, 10))]
    rows = [[_cell(rng) for _ in columns] for _ in range(rng.randint(0, 25))]
    options = dict(title=rng.choice(["t", "allreduce: time ratio vs A (p50; < 1 is faster)",
                                     None]), title_justify=rng.choice(["left", "center"]))
    if rng.random() < 0.2:
        options["box"] = rng.choice([box.SIMPLE, box.ROUNDED, box.ASCII, box.MINIMAL])
    if rng.random() < 0.05:
        options["show_lines"] = True  # a shape the fast path leaves to Rich
    made = []
    for kind in (Table, LongTable):
        table = kind(**options)
        for column in columns:
            table.add_column(column["header"], justify=column["justify"],
                             no_wrap=column["no_wrap"], overflow=column["overflow"])
        for row in rows:
            table.add_row(*row)
        made.append(table)
    return made[0], made[1]  # type: ignore[return-value]


def _written(table: Table, width: int, colours: str | None, record: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=colours, record=record,
                      force_terminal=colours is not None, highlight=False,
                      legacy_windows=False)
    console.print(table)
    return out.getvalue() + (console.export_html() if record else "")


@pytest.mark.parametrize("seed", range(6))
def test_a_long_table_is_written_as_rich_writes_the_table(seed):
    rng = random.Random(seed)
    for _ in range(40):
        table, long_table = _tables(rng)
        width = rng.choice([20, 40, 60, 80, 120, 150, 200])
        colours = rng.choice([None, "standard", "256", "truecolor"])
        record = rng.random() < 0.2
        assert _written(long_table, width, colours, record) \
            == _written(table, width, colours, record)


def test_plain_cells_are_not_rendered_by_rich_one_by_one(monkeypatch):
    """The fast path is the one taken for a comparison's table: Rich renders each distinct
    cell that is not plain text that fits (here the verdicts, and a note that wraps) once."""
    calls = []
    render_lines = Console.render_lines

    def counted(self, renderable, *args, **kwargs):
        calls.append(renderable)
        return render_lines(self, renderable, *args, **kwargs)

    table = LongTable(title="allreduce: time ratio vs A", title_justify="left")
    for name in ("B", "size B", "B/A", "verdict", "notes"):
        table.add_column(name, justify="left" if name in ("B", "verdict", "notes") else "right")
    for i in range(500):
        table.add_row(f"run {i % 7}", str(8 << (i % 20)), f"{1 + i / 1000:.3f}",
                      "[dim]same[/]" if i % 3 else "[green]faster[/]",
                      "A: median 95% CI ±118% (wider than ±5%)" if i % 5 == 0 else "")
    monkeypatch.setattr(Console, "render_lines", counted)
    text = _written(table, 60, None, False)
    assert text.count("\n") > 500 and "faster" in text
    assert len(calls) < 30  # header cells, two verdicts and a note: not 2,500 cells


@pytest.mark.parametrize("seed", range(6))
def test_a_table_that_fits_is_written_the_same_uncropped(seed):
    """Where fits() says so, print(crop=False) (what compare does: Rich measures no line) writes
    the bytes Rich's Table writes cropped; fits() says so for most of these tables."""
    rng = random.Random(100 + seed)
    fitted = 0
    for _ in range(40):
        table, long_table = _tables(rng)
        width = rng.choice([20, 40, 60, 80, 120, 150, 200])
        out = io.StringIO()
        console = Console(file=out, width=width, highlight=False, legacy_windows=False)
        if long_table.fits(console):
            fitted += 1
            console.print(long_table, crop=False)
            assert out.getvalue() == _written(table, width, None, False)
    assert fitted >= 10
    crowded = LongTable()  # too many columns for 20: Rich's lines are wider, and cropped
    for name in "abcdefghijklmno":
        crowded.add_column(name)
    crowded.add_row(*"abcdefghijklmno")
    assert not crowded.fits(Console(file=io.StringIO(), width=20))
    coloured = Console(file=io.StringIO(), width=200, force_terminal=True,
                       color_system="standard")
    assert not _tables(rng)[1].fits(coloured)  # colours: Rich's cropping, as before
