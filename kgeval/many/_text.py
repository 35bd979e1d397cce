"""The plain-text tables of a many-graph run (:meth:`kgeval.many.ManyGraphs.to_text`): short two-line headers (each
metric over its pessimistic and realistic columns), and -- where a width is given and the table is wider -- the
columns wrapped into parts that each fit it, the row names repeated at the left of every part. Every value of the
table is printed (4 decimals); the full-precision numbers are those of ``ManyGraphs.table`` (``--json``, ``--csv``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

__all__ = ["Block", "text_table"]

#: the gap between two columns
GAP = "  "


@dataclass(frozen=True)
class Block:
    """Columns printed side by side under one title (``""``: none) and never wrapped apart: (header, column of the
    frame) pairs, all of one ``kind``: ``"label"`` (left-aligned text), ``"number"`` (4 decimals) or ``"count"``
    (an integer); numbers and counts right-aligned, NaN as ``NaN``."""

    title: str
    columns: tuple[tuple[str, str], ...]
    kind: Literal["label", "number", "count"] = "number"

    def cells(self, frame: pd.DataFrame) -> list[list[str]]:
        """Each column's header and cells, as text."""
        return [[header, *(_text(value, self.kind) for value in frame[column])] for header, column in self.columns]


def metric_blocks(metrics: Sequence[tuple[str, str]]) -> list[Block]:
    """One block per (title, column prefix) of a metric: its ``_pessimistic`` and ``_realistic`` columns, headed
    ``pess`` and ``real``."""
    return [Block(title, (("pess", f"{prefix}_pessimistic"), ("real", f"{prefix}_realistic")))
            for title, prefix in metrics]  # fmt: skip


def text_table(frame: pd.DataFrame, key: Block, blocks: Sequence[Block], width: int | None = None) -> str:
    """``frame`` as text: the ``key`` block (the row names) then ``blocks``, two header lines (the blocks' titles,
    the columns' headers) above one line per row. With ``width``, the blocks are wrapped into parts of at most
    ``width`` characters per line, each part led by the key block and separated by a blank line (a part holds one
    block at least, however narrow ``width`` is); without, one part. Lines carry no trailing spaces, and a part
    whose blocks have no title has no title line."""
    key_cells = _aligned(key, frame)
    rendered = [_aligned(block, frame) for block in blocks]
    parts: list[list[list[str]]] = []
    used = 0
    for lines in rendered:
        size = len(GAP) + len(lines[0])
        if parts and (width is None or used + size <= width):
            parts[-1].append(lines)
            used += size
        else:
            parts.append([lines])
            used = len(key_cells[0]) + size
    texts = []
    for part in parts:
        rows = [GAP.join([key_cells[i], *(lines[i] for lines in part)]).rstrip() for i in range(len(key_cells))]
        texts.append("\n".join(rows[1:] if not rows[0] else rows))  # a part without titles: no blank line
    return "\n\n".join(texts)


def _aligned(block: Block, frame: pd.DataFrame) -> list[str]:
    """The block's lines (title, headers, rows), every line of one width: each column as wide as its widest cell,
    the title centred over the block."""
    columns = block.cells(frame)
    widths = [max(len(cell) for cell in column) for column in columns]
    body = [
        GAP.join(cell.ljust(w) if block.kind == "label" else cell.rjust(w) for cell, w in zip(row, widths, strict=True))
        for row in zip(*columns, strict=True)
    ]
    size = max(len(body[0]), len(block.title))
    body = [line.ljust(size) if block.kind == "label" else line.rjust(size) for line in body]
    return [block.title.center(size), *body]


def _text(value: Any, kind: str) -> str:
    """A cell of a column of ``kind`` (:class:`Block`) as text: NaN as ``NaN``, a number with 4 decimals, a count
    as an integer, a label as it is."""
    if kind == "label":
        return str(value)
    if value is None or math.isnan(value):
        return "NaN"
    return f"{value:.4f}" if kind == "number" else str(int(value))
