"""A Rich table of many rows (a comparison of a month of runs: tens of thousands), laid out as
Rich lays it out, byte for byte, without Rich's work per cell.

Rich measures every cell to size the columns, then renders every cell through a Padding and a
Text; that is most of a large `fabbench compare`'s time. Here the columns are sized by Rich from
the few cells that decide them (per column, the widest cell and the one with the longest word:
a column's width depends only on those), and a row whose cell is plain text that fits its
column (no markup, no emoji code, nothing that wraps) is written as Rich writes it: the text
justified in its column, a space either side, unstyled. Every other cell (markup, a style, text
that wraps) is rendered by Rich itself, once per distinct text, and its lines and styles are
kept. The title, header and borders are Rich's own, from a table of the same column widths and
no rows. A table this shape does not cover (row styles, lines between rows, a footer, fixed
widths ...) is rendered by Rich as it is.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import cast

from rich.cells import cell_len, set_cell_size
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style, StyleType
from rich.table import Column, Row, Table

_EMOJI = re.compile(r":\S*:")  # where Rich could read an emoji code (":smile:"); "[": markup
_PAD = (0, 1, 0, 1)  # Rich's default cell padding: a space either side
_Lines = list[str | list[Segment]]  # a cell's lines: unstyled text, or Rich's segments


class LongTable(Table):
    """A rich.table.Table (columns and rows added as to any) that renders its rows fast."""

    def add_row(self, *renderables: RenderableType | None, style: StyleType | None = None,
                end_section: bool = False) -> None:
        """Rich's add_row; a row of one string per column (a comparison's every row) is added
        without Rich's checks of each cell, which a string passes."""
        if style is None and not end_section and len(renderables) == len(self.columns) \
                and all(type(r) is str for r in renderables):
            for column, cell in zip(self.columns, renderables, strict=True):
                column._cells.append(cell)  # type: ignore[arg-type]
            self.rows.append(Row(style=None, end_section=False))
            return
        super().add_row(*renderables, style=style, end_section=end_section)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = self._widths(console, options)
        if widths is None:  # a shape or columns too narrow for text: Rich's own
            yield from super().__rich_console__(console, options)
            return
        head = copy.copy(self)  # no rows, columns of these widths: Rich's title and borders
        head.columns = [replace(c, _cells=[], width=w - 2)
                        for c, w in zip(self.columns, widths, strict=True)]
        head.rows = []
        top = list(Table.__rich_console__(head, console, options))  # title, header, bottom
        yield from top[:-2]
        if self.rows:
            yield from self._body(console, options.update(
                width=sum(widths) + self._extra_width, highlight=self.highlight, height=None),
                widths)
        yield from top[-2:]

    def _widths(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """The columns' widths where this table is laid out here, None where Rich lays it out."""
        if not self._fast_shape(console):
            return None
        widths = self._sizing()._calculate_column_widths(
            console, options.update_width(options.max_width - self._extra_width))
        if min(widths, default=0) < 3 or sum(widths) + self._extra_width > options.max_width:
            return None
        return widths

    def fits(self, console: Console) -> bool:
        """Is every line of this table, printed by ``console`` without colour, one that its
        print would not crop (``console.print(table, crop=False)`` writes the same bytes, without
        Rich measuring each line again: a third of a long comparison's time)?"""
        return console.color_system is None and \
            self._widths(console, console.options) is not None

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        if not self._fast_shape(console):
            return super().__rich_measure__(console, options)
        return Table.__rich_measure__(self._sizing(), console, options)

    def _fast_shape(self, console: Console) -> bool:
        style = console.get_style
        return (self.box is not None and self.show_header and not self.show_footer
                and self.show_edge and not self.show_lines and not self.leading
                and not self.row_styles and self.padding == _PAD and self.pad_edge
                and not self.collapse_padding and not self.expand and self.width is None
                and self.min_width is None and not self.caption and not self.highlight
                and not style(self.style or "") + style(self.border_style or "")
                and all(r.style is None and not r.end_section for r in self.rows)
                and all(not style(c.style or "") and c.width is None and c.min_width is None
                        and c.max_width is None and c.ratio is None and c.vertical == "top"
                        and not c.highlight and all(isinstance(x, str) for x in c._cells)
                        for c in self.columns))

    def _sizing(self) -> Table:
        """This table with, per column, only the cells that decide its width: the same widths."""
        sizing = copy.copy(self)
        sizing.columns = [replace(c, _cells=_deciding(cast(list[str], c._cells)))
                          for c in self.columns]
        sizing.rows = []
        return sizing

    def _body(self, console: Console, options: ConsoleOptions, widths: list[int]
              ) -> Iterator[Segment]:
        """The rows, a segment of text per row (and each styled segment as Rich made it)."""
        box = self.box
        assert box is not None  # _fast_shape
        box = box.substitute(options, safe=console.safe_box if self.safe_box is None
                             else self.safe_box)
        columns = [_Column(c, w, console, options)
                   for c, w in zip(self.columns, widths, strict=True)]
        known = [column.cells for column in columns]  # each column's cells so far, by text
        last = len(self.rows) - 1
        for index, row in enumerate(zip(*(c._cells for c in self.columns), strict=True)):
            edges = ((box.foot_left, box.foot_vertical, box.foot_right) if index == last
                     else (box.mid_left, box.mid_vertical, box.mid_right))
            cells = [done.get(value) or column.cell(value)  # every cell a str: _fast_shape
                     for column, done, value in zip(columns, known, row, strict=True)]
            if all(type(c) is str for c in cells):  # one line of text: the most rows
                yield Segment(f"{edges[0]}{edges[1].join(cells)}{edges[2]}\n")  # type: ignore[arg-type]
                continue
            height = max(1 if type(c) is str else len(c) for c in cells)
            lines = [column.lines(value, cell, height)
                     for column, value, cell in zip(columns, row, cells, strict=True)]
            if not any(column.segments for column in columns):  # every line is text
                yield Segment("".join(f"{edges[0]}{edges[1].join(line)}{edges[2]}\n"
                                      for line in zip(*lines, strict=True)))
            else:
                yield from _styled(edges, lines, height)


def _styled(edges: tuple[str, str, str], lines: list[_Lines], height: int
            ) -> Iterator[Segment]:
    """A row of cells some of whose lines are segments with a style (a console that writes
    colours): the text between them in one segment each."""
    left, divider, right = edges
    text: list[str] = []  # text not yet yielded
    for n in range(height):
        text.append(left)
        for i, cell in enumerate(lines):
            if i:
                text.append(divider)
            piece = cell[n]
            if isinstance(piece, str):
                text.append(piece)
                continue
            for segment in piece:
                if segment.style or segment.control:
                    yield Segment("".join(text))
                    text.clear()
                    yield segment
                else:
                    text.append(segment.text)
        text.append(f"{right}\n")
    yield Segment("".join(text))


class _Column:
    """One column's cells as Rich renders them at its width: a cell of one unstyled line is
    its text (padded to the column), any other the lines of _Lines."""

    def __init__(self, column: Column, width: int, console: Console,
                 options: ConsoleOptions) -> None:
        self.width, self.console, self.blank = width, console, " " * width
        self.justify, self.overflow = column.justify, column.overflow
        self.options = options.update(width=width, justify=column.justify,
                                      no_wrap=column.no_wrap, overflow=column.overflow,
                                      height=None, highlight=column.highlight)
        # the style Rich gives a cell: the column's and the row's (none: _fast_shape)
        self.style = console.get_style(console.get_style(column.style or "")) \
            + console.get_style(Style.null())
        # a console that writes no colours and keeps no record writes a style as nothing
        self.unstyled = console.color_system is None and not console.record
        self.segments = False  # whether a cell has a line of segments (styled, or control)
        self.cells: dict[str, str | _Lines] = {}
        self.rendered: dict[str, list[list[Segment]]] = {}
        self.shaped: dict[tuple[str, int], _Lines] = {}

    def cell(self, value: str) -> str | _Lines:
        done = self.cells.get(value)
        if done is None:
            done = self._plain(value)
            if done is None:
                lines = self._lines(self._render(value))
                done = lines[0] if len(lines) == 1 and type(lines[0]) is str else lines
            self.cells[value] = done
        return done

    def _plain(self, value: str) -> str | None:
        """The cell as Rich writes it when that is its text, justified (cut when it is one
        word too wide for the column), else None."""
        if (self.justify not in ("left", "right") or self.overflow == "ignore"
                or not _plain(value)):  # "ignore": neither wrapped nor justified
            return None
        room = self.width - 2
        size = _width(value)
        if size <= room:
            pad = " " * (room - size)
            return f" {value}{pad} " if self.justify == "left" else f" {pad}{value} "
        if " " in value or self.overflow == "fold":
            return None
        cut = (set_cell_size(value, room - 1) + "…" if self.overflow == "ellipsis"
               else set_cell_size(value, room))
        return f" {cut} "

    def _render(self, value: str) -> list[list[Segment]]:
        done = self.rendered.get(value)
        if done is None:
            done = self.rendered[value] = self.console.render_lines(
                Padding(value, _PAD), self.options, style=self.style)
        return done

    def _lines(self, lines: list[list[Segment]]) -> _Lines:
        out: _Lines = []
        for line in lines:
            if any(s.control or (s.style and not self.unstyled) for s in line):
                out.append(line)
                self.segments = True
            else:
                out.append("".join(s.text for s in line))
        return out

    def lines(self, value: str, cell: str | _Lines, height: int) -> _Lines:
        """The lines of the cell of ``value`` (``cell``) in a row of ``height`` lines (blank
        lines below, as Rich's)."""
        if isinstance(cell, str):
            return [cell, *[self.blank] * (height - 1)]
        done = self.shaped.get((value, height))
        if done is None:
            done = self.shaped[value, height] = self._lines(Segment.set_shape(
                Segment.align_top(self._render(value), self.width, height, self.style),
                self.width, height))
        return done


def _plain(value: str) -> bool:
    """Text Rich writes as it is: no markup, no emoji code, one printable line, no space at
    either end."""
    return ("[" not in value and value.isprintable() and value == value.strip()
            and (":" not in value or not _EMOJI.search(value)))


def _width(text: str) -> int:
    """The cells the text takes (Rich's measure; an ASCII character one)."""
    return len(text) if text.isascii() else cell_len(text)


def _deciding(cells: Sequence[str]) -> list[RenderableType]:
    """The cells that decide a column's width: of the plain ones, the widest and the one with
    the longest word (Rich's measure of a text: its longest word, its longest line); every
    other distinct one (Rich measures those)."""
    widest = longest_word = ""
    width = word = 0
    other: dict[str, None] = {}
    for value in dict.fromkeys(cells):
        if not _plain(value):
            other[value] = None
            continue
        size = _width(value)
        if size > width:
            widest, width = value, size
        longest = max(map(_width, value.split()), default=0)
        if longest > word:
            longest_word, word = value, longest
    return [widest, longest_word, *other]
