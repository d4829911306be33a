"""HTML reports: they open in headless Chromium without JavaScript errors and are not blank; comparisons of
runs side by side; partial runs are marked; nothing is fetched from a network; field extraction is exact.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kvbench.errors import UsageError
from kvbench.report import build_report, default_report_path
from kvbench.report.figures import knee_index, tail_x
from kvbench.report.rundata import dig, load_run, percentile_sets
from tests.test_report_fixtures import assert_report_renders, make_io_run, make_replay_run


def _offline(text: str) -> None:
    assert not re.search(r"<script[^>]+src=", text), "report loads a script from elsewhere"
    assert not re.search(r"<(link|img|iframe)[^>]+(href|src)=['\"]?https?:", text), "report fetches from a network"
    assert "Plotly.newPlot" in text and len(text) > 3_000_000   # plotly.js itself is inlined (~4.6 MB)


def test_replay_report_opens_in_chromium_with_every_section(tmp_path):
    run = make_replay_run(tmp_path, "kv-run")
    out, index = build_report([run], tmp_path / "kv.html")
    text = out.read_text()
    _offline(text)
    assert index["figures"] == ["latency_tail", "throughput_over_time", "hit_ratio_curve", "load_vs_recompute",
                                "break_even", "dwpd_vs_retention"]
    assert index["partial"] == []
    for needle in ("Verdict summary", "l3 break-even n*", "196 tokens", "required DWPD", "needed l3 @ 0.95",
                   "6.1.0-27-amd64", "loop (throttled 500 MB/s)"):
        assert needle in text, needle
    dom = assert_report_renders(out, tmp_path, min_plots=6, screenshot=True)
    assert "load wins above 196 tokens" in dom


def test_comparison_of_two_runs_side_by_side_marks_the_partial_one(tmp_path):
    a = make_io_run(tmp_path, "io-nvme-a", iops=80_000, p50_us=350.0)
    b = make_io_run(tmp_path, "io-nvme-b", iops=17_000, p50_us=1700.0, status="partial", seed=4)
    out, index = build_report([a, b], tmp_path / "cmp.html")
    text = out.read_text()
    _offline(text)
    assert index["partial"] == ["io-nvme-b"]
    assert "class='banner'" in text and "is <b>partial</b>" in text
    # both runs are legend entries of the same figures, and their differing numbers are highlighted
    for run in ("io-nvme-a", "io-nvme-b"):
        assert re.search(run + r" (·|\\u00b7) target0\.read", text), run
    assert text.count("class='differs'") >= 4
    assert_report_renders(out, tmp_path, min_plots=2, screenshot=True)


def test_cli_report_writes_default_path_and_json(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = make_io_run(tmp_path / "results", "io-1")
    b = make_replay_run(tmp_path / "results", "kv-1", analyses=False)
    r = cli("report", a, b, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["report"] == str(default_report_path([a, b])) == "reports/compare-io-1-vs-kv-1.html"
    assert (tmp_path / got["report"]).stat().st_size > 3_000_000
    r = cli("report", tmp_path / "nowhere")
    assert r.exit_code == 2 and "run folder not found" in r.output


def test_malformed_and_missing_files_name_the_file(tmp_path):
    d = make_io_run(tmp_path, "io-bad")
    (d / "summary.json").write_text('{"kind": "io",\n "status": }')
    with pytest.raises(UsageError, match=r"summary.json:2: invalid JSON"):
        load_run(d)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="not a kvbench run folder"):
        load_run(tmp_path / "empty")
    # a killed run: run.json only -> loads as partial
    (d / "summary.json").unlink()
    rd = load_run(d)
    assert rd.partial and rd.status == "partial"


def test_percentile_sets_convert_units_and_name_paths():
    summary = {"lat_us": {"p50": 10, "p99": 30}, "load_time_ms": {"p50": 1.5, "p99": 4},
               "tiers": {"l3": {"read_lat_us": {"p50": 100, "p99.9": 900}, "hit_ratio": 0.2}},
               "fetch_us": {"p90": 3}}                          # no p50: not a percentile set
    got = percentile_sets(summary)
    assert got == {"lat": {"p50": 10.0, "p99": 30.0}, "load_time": {"p50": 1500.0, "p99": 4000.0},
                   "tiers.l3.read_lat": {"p50": 100.0, "p99.9": 900.0}}
    assert dig(summary, "tiers.l3.read_lat_us.p99.9") == 900
    assert dig({"a": [{"b": 1}]}, "a.0.b") == 1


def test_tail_axis_and_knee():
    assert [tail_x(k) for k in ("p50", "p90", "p99", "p99.9", "p99.99")] == pytest.approx([0.30103, 1, 2, 3, 4], abs=1e-5)
    assert tail_x("max") is None
    # a saturating curve: the knee sits where the curve bends, not at either end
    cap = np.geomspace(1, 1e6, 61)
    hr = 0.6 * (1 - np.exp(-cap / 1e3))
    k = knee_index(cap, hr)
    assert 1e3 <= cap[k] <= 1e4
    assert knee_index([1, 2], [0.1, 0.2]) is None


def test_the_chromium_check_catches_a_javascript_error(tmp_path):
    out, _ = build_report([make_io_run(tmp_path, "io-js")], tmp_path / "js.html")
    out.write_text(out.read_text().replace("</body>", "<script>notDefinedAnywhere();</script></body>"))
    with pytest.raises(AssertionError, match="notDefinedAnywhere"):
        assert_report_renders(out, tmp_path, min_plots=1, screenshot=False)
