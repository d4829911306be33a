"""Terminal tables: one layout for every column table the CLI prints (cluster, plan, check, models, mrc, trace
stats, replay engram, the answer box, the fixed-capacity sweep), so that a wide value widens its column instead
of running into its neighbour. Cells arrive already formatted (their wording and number formats are the
caller's); this module only measures and pads. tests/report/test_text.py walks the package: a fixed-width
format spec (``:>11``) laying out a column outside this module fails it, bar an allow-list of lines that are not
tables.
"""

from __future__ import annotations

from collections.abc import Sequence

GAP = "  "            # the least space between two columns


def table(headers: Sequence[str] | None, rows: Sequence[Sequence[str]], align: str, *,
          indent: str = "") -> list[str]:
    """The lines of a table: each column as wide as its widest cell (header included), ``GAP`` (two spaces)
    between columns, each cell aligned by its column's character in ``align`` (``<`` left, ``>`` right).

    ``headers`` is None for a table without a header line. A row shorter than the table lays its cells out in
    the first columns and its last cell runs free from its column's left edge (a note such as "never fills"
    in place of figures): that cell is not counted in the column's width. Trailing blanks are dropped, so an
    empty last cell leaves no gutter behind.
    """
    n = len(align)
    if any(a not in "<>" for a in align):
        raise ValueError(f"align {align!r}: one '<' or '>' per column")
    if headers is not None and len(headers) != n:
        raise ValueError(f"{len(headers)} headers for {n} columns (align {align!r})")
    body = [list(r) for r in rows]
    for r in body:
        if len(r) > n:
            raise ValueError(f"a row of {len(r)} cells in a table of {n} columns: {r!r}")
        for c in r:
            if not isinstance(c, str):
                raise TypeError(f"cell {c!r} is a {type(c).__name__}: cells are formatted text")
    lines = ([list(headers)] if headers is not None else []) + body
    width = [0] * n
    for r in lines:
        sized = r if len(r) == n else r[:-1]           # a short row's last cell runs free
        for i, c in enumerate(sized):
            width[i] = max(width[i], len(c))
    out = []
    for r in lines:
        free = len(r) < n
        cells = []
        for i, c in enumerate(r):
            if free and i == len(r) - 1:
                cells.append(c)
            else:
                cells.append(c.ljust(width[i]) if align[i] == "<" else c.rjust(width[i]))
        out.append((indent + GAP.join(cells)).rstrip())
    return out
