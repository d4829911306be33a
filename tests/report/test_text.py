"""Terminal tables: one formatter (kvbench.report.text.table) sizes every column to its widest cell with at least
two spaces between columns, so a wide value widens its column instead of running into its neighbour (the cluster
table printed p99 5081.3 and 20,691,484,175 saved tokens as "5081.320,691,484,175": tests/cluster/test_cluster.py
has that case). A walker keeps fixed-width format specs out of the package outside an allow-list of lines that are
not tables."""

from __future__ import annotations

import ast
import re
import string

import pytest

from kvbench.report.text import table


# --- the formatter by hand ---------------------------------------------------------------------------------
def test_each_column_is_as_wide_as_its_widest_cell_with_two_spaces_between():
    lines = table(["name", "n", "rate"], [["a", "1", "10.5"], ["longer-name", "12345", "7"]], "<>>")
    # widths 11 ("longer-name"), 5 ("12345"), 4 ("rate" / "10.5"); right-aligned columns end together
    assert lines == ["name             n  rate",
                     "a                1  10.5",
                     "longer-name  12345     7"]


def test_alignment_per_column_and_indent():
    lines = table(["l", "r"], [["ab", "ab"], ["abcd", "abcd"]], "><", indent="  ")
    assert lines == ["     l  r",
                     "    ab  ab",
                     "  abcd  abcd"]


def test_without_headers_and_no_trailing_blanks():
    # the last column left-aligned: no padding behind it; an empty last cell leaves no gutter either
    assert table(None, [["x", "note"], ["yyy", ""]], "<<") == ["x    note", "yyy"]


def test_a_short_rows_last_cell_runs_free_and_does_not_widen_its_column():
    lines = table(["cap", "hit", "DWPD"], [["1 GiB", "0.500", "3.2"], ["2 GiB", "never fills: no steady state"]],
                  ">>>")
    assert lines == ["  cap    hit  DWPD",
                     "1 GiB  0.500   3.2",
                     "2 GiB  never fills: no steady state"]


def test_an_empty_column_takes_no_width_and_a_short_rows_cells_before_its_last_are_laid_out():
    # a column whose cells are all empty is 0 wide: only its two gutters stay between its neighbours
    assert table(None, [["a", "", "b"]], "<<<") == ["a    b"]
    # a short row's cells before its last count toward their columns' widths ("wide" widens the first column)
    assert table(None, [["wide", "note"], ["b", "c", "d"]], "<<<") == ["wide  note", "b     c  d"]
    # ...and are padded to them, left or right; only the last cell runs free from its column's left edge
    assert table(None, [["aaaa", "b", "c"], ["a", "x"]], "<<<") == ["aaaa  b  c", "a     x"]
    assert table(None, [["aaaa", "bbbb", "c"], ["a", "x"]], "<>>") == ["aaaa  bbbb  c", "a     x"]
    assert table(None, [["aaaa", "bbbb", "cc", "d"], ["a", "x", "y"]], "<<>>") == ["aaaa  bbbb  cc  d",
                                                                                   "a     x     y"]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="2 headers for 3 columns"):
        table(["a", "b"], [], "<<<")
    with pytest.raises(ValueError, match="a row of 3 cells in a table of 2 columns"):
        table(None, [["a", "b", "c"]], "<<")
    with pytest.raises(ValueError, match="one '<' or '>' per column"):
        table(None, [["a"]], "^")
    with pytest.raises(TypeError, match="cells are formatted text"):
        table(None, [["a", 1.5]], "<>")


# --- the walker: no fixed-width format spec lays out columns outside the formatter ---------------------------
# zero fill (``:02d``, ``:#018x``) pads a number's digits, not a column: not counted
_WIDTH = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?(?P<zero>0?)(?P<width>\d+|\{\})")

ALLOWED = {
    # the formatter itself pads with str.ljust / str.rjust
    ("report/text.py", "table"):
        "the one formatter: pads each cell to its column's measured width",
    # streamed rows: each prompt length's timing prints as soon as it is measured, so the widths of the rows still
    # to come are unknown; the literal two-space gutters and unit words ("tokens", "tok/s") between the fixed
    # widths keep an overflowing cell from touching its neighbour
    ("cli/prefill.py", "prefill_cmd.progress"):
        "streamed rows (printed as each length finishes); literal gutters between the widths",
    # live progress lines, not columns: the elapsed time is padded so the line does not jitter as it grows
    ("job.py", "_replay_progress"): "a progress line's elapsed seconds, not a column",
    ("job.py", "_Progress.step"): "a progress line's elapsed seconds, not a column",
}


def _width_spec(spec: str) -> bool:
    m = _WIDTH.match(spec)
    return bool(m and m.group("width")) and not (m.group("zero") and not re.match(r"^.?[<>=^]", spec))


def fixed_widths(tree) -> list[tuple[str, int, str]]:
    """(enclosing function's qualified name, line, spec) of every fixed width: an f-string or ``format()`` spec
    with a width (``:>11``, ``:6.3f``, ``:<{w}``), ``"{:>9}".format``, ``"%-12s" %``, ``.ljust/.rjust/.center``."""
    found = []

    def visit(node, where):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = f"{where}.{node.name}" if where else node.name
        if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
            spec = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.format_spec.values)
            if _width_spec(spec):
                found.append((where, node.lineno, ":" + spec))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("ljust", "rjust", "center"):
                found.append((where, node.lineno, f".{f.attr}()"))
            elif isinstance(f, ast.Attribute) and f.attr == "format" and isinstance(f.value, ast.Constant) \
                    and isinstance(f.value.value, str):
                found.extend((where, node.lineno, ":" + spec) for _, _, spec, _ in
                             string.Formatter().parse(f.value.value) if spec and _width_spec(spec))
            elif isinstance(f, ast.Name) and f.id == "format" and len(node.args) == 2 \
                    and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                    and _width_spec(node.args[1].value):
                found.append((where, node.lineno, ":" + node.args[1].value))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str) and re.search(r"%[-+ #]*[1-9]\d*[sdfgeix]", node.left.value):
            found.append((where, node.lineno, "%N"))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "")
    return found


def test_the_walker_finds_each_kind_of_fixed_width():
    src = '''
def a(x, w):
    s = f"{x:>11}" + f"{x:6.3f}" + f"{x:<{w}}" + f"{x:^5}" + format(x, ">9") + "{:>10}".format(x)
    t = "%-12s" % x + x.ljust(4)
    ok = f"{x:.3f} {x:,} {x:02d} {x:#018x} {x:.1%} {x:g}" + format(x, ".2f") + "{:.1f}".format(x) + "%s" % x
'''
    got = [spec for _, _, spec in fixed_widths(ast.parse(src))]
    assert sorted(got) == sorted([":>11", ":6.3f", ":<{}", ":^5", ":>9", ":>10", "%N", ".ljust()"])
    assert {w for w, _, _ in fixed_widths(ast.parse(src))} == {"a"}


def test_no_fixed_width_layout_outside_the_formatter():
    """Every terminal table goes through kvbench.report.text.table; the allow-list names the lines that are not
    tables, each with its reason."""
    from tests.conftest import REPO, package_asts

    root = REPO / "kvbench"
    seen, bad = set(), []
    for path, tree in package_asts():
        rel = str(path.relative_to(root))
        for where, line, spec in fixed_widths(tree):
            if (rel, where) in ALLOWED:
                seen.add((rel, where))
            else:
                bad.append(f"kvbench/{rel}:{line} ({where}): {spec}")
    assert not bad, "lay these out with kvbench.report.text.table: " + "; ".join(bad)
    assert seen == set(ALLOWED), f"stale allow-list entries: {sorted(set(ALLOWED) - seen)}"
