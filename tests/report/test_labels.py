"""Reports read at a glance (issue 20): human names and units on every figure, a caption per figure, decision
marks (n* or "never", the knee, capacities used), IOPS shown, no raw column names and no exponent notation,
comparison rows for the I/O pattern; checked on the DOM headless Chromium rendered."""

from __future__ import annotations

import html
import json
import re

import pytest

from kvbench.report import build_report
from kvbench.report.figures import CAPTIONS, FIGURES, caption
from kvbench.report.labels import human, log_ticks, plain_number, us_label
from tests.report.helpers import make_io_run, make_replay_run, open_in_chromium

RAW_NAME = re.compile(r"\b[a-z0-9]+(?:_[a-z0-9]+)*_(?:per_s|bytes)\b")
EXPONENT = re.compile(r"\b\d+(?:\.\d+)?e[+-]?\d+\b", re.I)


def _visible_text(dom: str) -> str:
    """What a reader sees: the DOM without scripts and styles, tags removed, entities decoded."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", "\n", body))


def _figure_dom(dom: str, anchor: str) -> str:
    start = dom.index(f'id="fig-{anchor}"')
    nxt = dom.find('id="fig-', start + 10)
    return dom[start: nxt if nxt > 0 else len(dom)]


def _ticks(fig_dom: str) -> list[str]:
    return [html.unescape(t) for t in re.findall(r'class="[xy]\d?tick"[^>]*>\s*<text[^>]*>(.*?)</text>', fig_dom, re.S)]


def _table_cells(dom: str) -> list[str]:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", body, re.S)]


def _edit(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d))


def test_labels_are_words_with_units():
    assert human("l3_read_bw_bytes_per_s") == "L3 read bandwidth"
    assert human("l3_read_iops") == "L3 read IOPS"
    assert human("target0.read") == "target 0 read"
    assert human("tiers.l3.read_lat") == "L3 read latency"
    assert human("load_time") == "per-request load time"
    assert plain_number(51840.0) == "51,840" and plain_number(0.0001234) == "0.0001234"
    assert plain_number(2.5e-7) == "0.00000025" and plain_number(123456.7) == "123,457"
    vals, text = log_ticks(30, 9000, us_label)            # one tick beyond each end for plotly's padding
    assert vals == [20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
    assert text[0] == "20 us" and text[-1] == "10 ms"       # every label carries its magnitude, minor ones too
    vals, _ = log_ticks(79, 199, us_label)                # less than a decade: finer steps, still labelled
    assert [v for v in vals if 79 <= v <= 199] == [100, 150]
    vals, _ = log_ticks(1e-3, 1e4, us_label)
    assert vals == [10.0 ** e for e in range(-3, 5)]          # wide spans: decades only


def test_every_figure_has_a_caption():
    for _title, builder in FIGURES:
        assert builder.__name__ in CAPTIONS, builder.__name__
        assert len(caption(builder)) > 30


def test_replay_report_reads_at_a_glance_in_chromium(tmp_path):
    run = make_replay_run(tmp_path, "kv-run")
    # a key-sampled replay (modelled capacities), a tier where loading never wins, TTFT saved below zero
    _edit(run / "summary.json", lambda d: (d.update(sample_rate=0.05, notes=["l3 first byte: probe 40 us vs check "
                                                                         "9.11 ms (queueing under load)"]),
                                           d["tiers"]["l3"].update(simulated_capacity_bytes=16 * 2**30 * 0.05)))

    def check(d):
        d["max_tokens"] = 1 << 20
        d["tiers"]["l4"] = {"break_even_tokens": None, "verdict": "recompute wins", "bw_bytes_per_s": 1e8,
                            "latency_us": 50_000.0}
        d["run"] = {"hits": {"wins_fraction": 0.41, "ttft_saved_s": {"p50": -0.0123, "p99": 0.2}}}
    _edit(run / "check.json", check)
    out, index = build_report([run], tmp_path / "kv.html")
    dom, errors, _ = open_in_chromium(out, tmp_path, screenshot=False)
    assert not errors
    seen = _visible_text(dom)
    assert not RAW_NAME.findall(seen), sorted(set(RAW_NAME.findall(seen)))[:10]
    cells = _table_cells(dom)
    assert not [c for c in cells if EXPONENT.search(c)], [c for c in cells if EXPONENT.search(c)][:5]
    for anchor in index["figures"]:            # a caption under every heading
        assert re.search(rf"id=\"{anchor}\">.*?</h2><p class=\"caption\">[^<]{{30,}}</p>", dom, re.S), anchor
    # break-even: n* marked for the tiers that have one, "never" said for the one that has none
    be = _figure_dom(dom, "break_even")
    assert "n*=196" in be and "n* = 196 tokens" in be
    assert "loading never wins up to 1,048,576 tokens" in be
    assert "prefix length n (tokens, log)" in be
    # log axes: every tick label is a full value (no bare minor "2" or "5"), times carry their unit
    for anchor in ("break_even", "load_vs_recompute", "latency_tail"):
        ticks = _ticks(_figure_dom(dom, anchor))
        assert ticks, anchor
        assert not [t for t in ticks if re.fullmatch(r"[2-9]", t.strip())], (anchor, ticks)
    assert any(t.endswith(("us", "ms", " s")) for t in _ticks(_figure_dom(dom, "latency_tail")))
    # bandwidth and IOPS over time: both panels, human legend names
    tp = _figure_dom(dom, "throughput_over_time")
    for needle in ("IOPS (I/Os completed per second)", "L3 read IOPS", "L3 write bandwidth", "L2 read bandwidth"):
        assert needle in tp, needle
    # the verdict table: plain-language groups, modelled sizes labelled, negative TTFT explained
    for needle in ("load vs recompute", "capacity used (modelled full size)", "capacity on the device (key sample)",
                   "key sampling", "TTFT saved below zero", "l2 used (modelled full size)",
                   "l3 first byte: probe 40 us vs check 9.11 ms"):
        assert needle in seen, needle
    assert "inequality" not in " ".join(c for c in cells if len(c) < 40)


def test_io_comparison_shows_pattern_rows_and_plain_numbers(tmp_path):
    a = make_io_run(tmp_path, "io-4k", iops=51_840)
    b = make_io_run(tmp_path, "io-128k", iops=9_000, seed=3)
    _edit(b / "run.json", lambda d: d["config"].update(bs=131072, qd=8, rw="read"))
    out, _ = build_report([a, b], tmp_path / "cmp.html")
    dom, errors, _ = open_in_chromium(out, tmp_path, screenshot=False)
    assert not errors
    rows = re.findall(r"<tr( class=\"differs\")?><th class=\"sec\">measured</th><th>([^<]+)</th>(.*?)</tr>", dom, re.S)
    by_label = {label: (bool(diff), _table_cells(cells)) for diff, label, cells in rows}
    assert by_label["pattern"] == (True, ["randread", "read"])
    assert by_label["block size"] == (True, ["4 KiB", "128 KiB"])
    assert by_label["queue depth per worker"] == (True, ["32", "8"])
    cells = _table_cells(dom)
    assert not [c for c in cells if EXPONENT.search(c)]
    assert not RAW_NAME.findall(_visible_text(dom))


@pytest.mark.parametrize("key", ["l2_read_bw_bytes_per_s", "read_bytes_per_s", "bw_bytes_per_s", "write_bytes"])
def test_no_raw_name_survives_humanising(key):
    assert not RAW_NAME.search(human(key))
