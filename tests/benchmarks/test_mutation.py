"""The mutation tool's equivalence table (benchmarks/mutation.py): an EQUIVALENT entry names one site - its line,
its change and which occurrence of that change on the line - so a second site of the same operator on a line is
judged on its own; an entry whose line (or site) is gone is dropped and listed as stale by every mode; saved
results are re-judged against the current table. Nothing is mutated or run here (the sites are walked only)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import mutation as M  # noqa: E402

TOY = "def f(a, b, c):\n    x = a + b + c\n    return x - 1\n"
LINE = "x = a + b + c"


def test_site_keys_number_the_sites_of_one_change_on_one_line():
    # the walk visits an operation's operands first: the inner `a + b` before the outer `(a + b) + c`
    # (occurrences 0 and 1 of "+ -> -" on line 2), the 1 of `x - 1` before its `-`
    assert M.mutants(TOY) == [(2, "+ -> -"), (2, "+ -> -"), (3, "1 -> 2"), (3, "- -> +")]
    assert M.site_keys(TOY) == [(LINE, "+ -> -", 0), (LINE, "+ -> -", 1), ("return x - 1", "1 -> 2", 0),
                                ("return x - 1", "- -> +", 0)]
    assert M.mutate(TOY, 0).splitlines()[1].strip() == "x = a - b + c"
    assert M.mutate(TOY, 1).splitlines()[1].strip() == "x = a + b - c"


def test_an_entry_judges_the_one_site_it_names(monkeypatch):
    """Keyed (line, change) the entry below covered both `+` of the line, and would hide a survivor at the other;
    keyed with its occurrence it judges that site only. (line, "*") still covers a whole line."""
    monkeypatch.setitem(M.EQUIVALENT, "toy", {(LINE, "+ -> -", 1): "the outer sum's",
                                              ("return x - 1", "*"): "every mutant of the return"})
    live, stale = M.equivalents("toy", TOY)
    assert stale == [] and len(live) == 2
    keys = M.site_keys(TOY)
    assert [M.judge(live, *k) for k in keys] == [None, "the outer sum's", "every mutant of the return",
                                                 "every mutant of the return"]
    assert M.judge(live, LINE, "+ -> -", None) is None          # an unknown occurrence is judged by no site entry
    # _each: one reason, several named sites
    assert M._each((LINE, "+ -> -"), (0, 1), "r") == {(LINE, "+ -> -", 0): "r", (LINE, "+ -> -", 1): "r"}


def test_stale_entries_are_dropped_and_named(monkeypatch):
    monkeypatch.setitem(M.EQUIVALENT, "toy", {
        (LINE, "+ -> -", 0): "kept",
        ("x = a + b", "+ -> -", 0): "the line was rewritten",            # gone
        (LINE, "+ -> -", 2): "a third `+` the line never had",         # the line is there, the site is not
        (LINE, "- -> +", 0): "no such change on the line",
        ("y = 2 * x", "*"): "a whole line that is gone",
    })
    live, stale = M.equivalents("toy", TOY)
    assert live == {(LINE, "+ -> -", 0): "kept"}
    assert stale == [(("x = a + b", "+ -> -", 0), "its line is gone"),
                     ((LINE, "+ -> -", 2), "its line has no such site"),
                     ((LINE, "- -> +", 0), "its line has no such site"),
                     (("y = 2 * x", "*"), "its line is gone")]
    assert M._stale_lines("toy.py", stale[:1]) == [
        "    stale EQUIVALENT entry (its line is gone; not used): toy.py: + -> - #0 | x = a + b"]


@pytest.mark.parametrize("key", [(LINE, "+ -> -"), (LINE, "*", 0), (LINE, "+ -> -", "0")])
def test_a_key_that_names_no_one_site_is_refused(monkeypatch, key):
    monkeypatch.setitem(M.EQUIVALENT, "toy", {key: "?"})
    with pytest.raises(SystemExit, match="name one site as \\(line, change, occurrence\\)"):
        M.equivalents("toy", TOY)


def test_every_shipped_entry_is_well_formed():
    """The table as shipped: every key names one site or a whole line (equivalents raises otherwise), and every
    module it lists is one the tool runs."""
    assert set(M.EQUIVALENT) <= set(M.MODULES)
    for name in M.EQUIVALENT:
        M.equivalents(name, (REPO / M.MODULES[name][0]).read_text())


def test_report_rejudges_saved_survivors_by_site(tmp_path, monkeypatch, capsys):
    """units.py's _BINARY line has seven `1 -> 2` sites; its entry names #0 (the "" entry, never read). A saved
    result with #0 and #1 surviving (#1 recorded before occurrences were, by its site index only) reports #1 as a
    survivor and #0 as equivalent; a survivor judged equivalent by an entry since gone is live again; a stale entry
    is listed."""
    source = (REPO / M.MODULES["units"][0]).read_text()
    keys = M.site_keys(source)
    sites = M.mutants(source)
    line = next(t for t, ch, _ in keys if t.startswith("_BINARY = {"))
    k0, k1 = (keys.index((line, "1 -> 2", occ)) for occ in (0, 1))
    lno = sites[k0][0]
    live, _ = M.equivalents("units", source, keys)
    extra = next(k for k, key in enumerate(keys) if key[1] == "+ -> -" and M.judge(live, *key) is None)
    rows = [{"line": lno, "site": k0, "occurrence": 0, "change": "1 -> 2", "source": line, "status": "survived"},
            {"line": lno, "site": k1, "change": "1 -> 2", "source": line, "status": "survived"},
            {"line": sites[extra][0], "site": extra, "occurrence": keys[extra][2], "change": "+ -> -",
             "source": keys[extra][0], "status": "equivalent", "reason": "an entry since removed"}]
    (tmp_path / "units.json").write_text(json.dumps({"module": "kvbench/units.py", "mutants": 10, "killed": 7,
                                                     "timeout": 0, "survivors": rows}))
    monkeypatch.setitem(M.EQUIVALENT, "units", {**M.EQUIVALENT["units"],
                                                ("x = 1 << 99", "<< -> >>", 0): "a line no longer in units.py"})
    assert M.report(["units"], tmp_path) == 0
    out = capsys.readouterr().out.splitlines()
    # 7 killed, 2 live (#1 and the de-listed one), 1 equivalent (#0): 7 / 9
    assert out[1].split() == ["kvbench/units.py", "10", "7", "2", "1", "77.8%"]
    assert out[2] == f"    survived  kvbench/units.py:{lno}: 1 -> 2           | {line[:80]}"
    assert out[3].startswith(f"    survived  kvbench/units.py:{sites[extra][0]}: + -> -")
    assert out[4] == ("    stale EQUIVALENT entry (its line is gone; not used): kvbench/units.py: << -> >> #0 | "
                      "x = 1 << 99")
    assert len(out) == 5


def test_list_numbers_each_site_and_names_stale_entries(monkeypatch, capsys):
    monkeypatch.setitem(M.EQUIVALENT, "units", {**M.EQUIVALENT["units"],
                                                ("x = 1 << 99", "<< -> >>", 0): "a line no longer in units.py"})
    source = (REPO / M.MODULES["units"][0]).read_text()
    lno = next(ln for ln, (t, _, _) in zip((s[0] for s in M.mutants(source)), M.site_keys(source))
               if t.startswith("_BINARY = {"))
    assert M.main(["units", "--list", "--lines", str(lno), "--changes", "^1 -> 2$"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split(" | ")[0] for ln in out[:7]] == [f"kvbench/units.py:{lno}: 1 -> 2 #{k}" for k in range(7)]
    assert out[7:] == ["    stale EQUIVALENT entry (its line is gone; not used): kvbench/units.py: << -> >> #0 | "
                       "x = 1 << 99"]
