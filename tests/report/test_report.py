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
from tests.report.helpers import assert_report_renders, make_io_run, make_replay_run


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
    for needle in ("Verdict summary", "l3 break-even n*", "196 tokens", "required DWPD", "SSD store needed (before whole drives) @ 0.95",
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
        assert re.search(run + r" (·|\\u00b7) target 0 read", text), run
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


def test_latency_from_engine_histograms_gives_percentiles_and_a_dense_tail_curve(tmp_path):
    from kvbench.report.rundata import latency_curves, latency_sets

    rd = load_run(make_io_run(tmp_path, "io-h", p50_us=500.0))
    pct = latency_sets(rd)["target0.read"]
    assert pct["p50"] == pytest.approx(500.0, rel=0.03)          # lognormal median, within histogram + sample error
    assert pct["p50"] < pct["p99"] < pct["p99.9"] < pct["max"]
    xs, ys = latency_curves(rd)["target0.read"]
    assert xs[0] == pytest.approx(0.30103) and xs[-1] == pytest.approx(min(5.0, np.log10(200_000)))
    assert all(b >= a for a, b in zip(ys, ys[1:]))                # a tail curve never decreases


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


def test_comparison_of_two_real_io_runs(tmp_path):
    """Two real `kvbench io` runs (4 KiB and 64 KiB random reads on one file) reported side by side."""
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    dirs = []
    for bs in ("4k", "64k"):
        p = subprocess.run([sys.executable, "-m", "kvbench", "io", "--target", str(tmp_path / "t.dat"), "--size", "16MiB",
                            "--rw", "randread", "--bs", bs, "--qd", "8", "--runtime", "1", "--results",
                            str(tmp_path / "results"), "--json"], capture_output=True, text=True, cwd=REPO, env=env,
                           timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
        dirs.append(json.loads(p.stdout)["run_dir"])
    out, index = build_report(dirs, tmp_path / "io-cmp.html")
    assert "latency_tail" in index["figures"] and "throughput_over_time" in index["figures"]
    text = out.read_text()
    names = [__import__("pathlib").Path(d).name for d in dirs]
    assert all(n in text for n in names)
    assert_report_renders(out, tmp_path, min_plots=2, screenshot=False)


def test_prefill_run_shows_points_and_fit(tmp_path):
    d = tmp_path / "prefill-x"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({"kind": "prefill", "command": "kvbench prefill --model tiny-gqa"}))
    n = [64, 256, 1024, 4096]
    fit = {"a": 0.002, "b": 2e-5, "c": 1e-9, "rel_rms": 0.03}
    (d / "summary.json").write_text(json.dumps({
        "kind": "prefill", "status": "complete", "run_dir": str(d), "model": "tiny-gqa", "device": "cpu",
        "tokens_per_s": 40000.0, "reference_tokens": 1024, "fit": fit,
        "points": {"tokens": n, "seconds": [fit["a"] + fit["b"] * x + fit["c"] * x * x for x in n]}}))
    from kvbench.report.figures import prefill_profile

    fig = prefill_profile([load_run(d)])
    assert [t.name for t in fig.data] == ["measured (cpu)", "fit a+bn+cn² (rel rms 3.0%)"]
    assert list(fig.data[0].y) == pytest.approx([1e3 * (0.002 + 2e-5 * x + 1e-9 * x * x) for x in n])
    _, index = build_report([d], tmp_path / "p.html")
    assert index["figures"] == ["prefill_profile"]
    assert "40,000" in (tmp_path / "p.html").read_text()


def test_break_even_curves_from_a_check_result_do_not_extrapolate():
    from kvbench.report.figures import break_even_curves

    n = np.array([100.0, 1000.0, 10_000.0, 1e6])
    check = {"profile": {"fit": {"a": 0.01, "b": 2e-5, "c": 0.0}},
             "tiers": {"l3": {"curve": {"tokens": [100, 10_000], "load_s": [0.002, 0.2]}, "break_even_tokens": 120},
                       "l2": {"bandwidth_bytes_per_s": 1e10, "latency_s": 1e-5}},
             "bytes_per_token": 131072}
    curves, rec = break_even_curves(check, n)
    assert rec == pytest.approx(0.01 + 2e-5 * n)
    l3, nstar = curves["l3"]
    assert nstar == 120 and l3[:3] == pytest.approx([0.002, 0.02, 0.2]) and np.isnan(l3[3])   # log-log interpolation
    assert curves["l2"][0] == pytest.approx(1e-5 + n * 131072 / 1e10)                           # T_load = t0 + n*B/BW


def test_a_moved_job_folder_still_finds_its_step_folders(tmp_path):
    """A job records its steps' folders relative to where it ran; the report finds them after a move."""
    job = tmp_path / "elsewhere" / "run-1"
    job.mkdir(parents=True)
    make_replay_run(job, "replay-kv-1", analyses=False)
    (job / "run.json").write_text(json.dumps({"kind": "run", "command": "kvbench run"}))
    (job / "summary.json").write_text(json.dumps({"kind": "run", "status": "complete", "run_dir": "results/run-1",
                                                  "parts": {"replay": "results/run-1/replay-kv-1"}}))
    rd = load_run(job)
    assert list(rd.parts) == ["replay"] and rd.parts["replay"].kind == "replay-kv"
    _, index = build_report([job], tmp_path / "moved.html")
    assert {"latency_tail", "throughput_over_time"} <= set(index["figures"])


def test_steady_state_figure_marks_tiers_that_do_not_turn_over_hollow(tmp_path):
    """A capacity that fills but does not turn over is a projection no answer uses: its DWPD and residence points
    are hollow, the turned-over ones solid, and a capacity the trace never fills is not drawn at all."""
    from kvbench.report.figures import steady_state_vs_capacity

    rows = [{"capacity_bytes": c * 2 ** 40, "hit_ratio": h, "filled": f, "turned_over": t, "dwpd": d,
             "residence_s": r}
            for c, h, f, t, d, r in ((1, 0.3, True, True, 100.0, 600.0), (2, 0.5, True, True, 40.0, 3000.0),
                                     (3, 0.6, True, False, 20.0, 9000.0), (4, 0.62, False, False, None, None))]
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"kind": "plan", "status": "complete"}))
    (run / "plan.json").write_text(json.dumps({"capacity_curve": rows}))
    fig = steady_state_vs_capacity([load_run(run)])
    dwpd, res = [t for t in fig.data if t.name.endswith(("steady-state DWPD", "residence time"))]
    for t in (dwpd, res):
        assert list(t.x) == [1.0, 2.0, 3.0]
        assert list(t.marker.symbol) == ["circle", "circle", "circle-open"]
    assert list(dwpd.y) == [100.0, 40.0, 20.0]
