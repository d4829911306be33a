"""kvbench.report.tables: the verdict rows of a run job (coverage and key sampling)."""

from __future__ import annotations

from pathlib import Path

from kvbench.report.rundata import RunData
from kvbench.report.tables import verdict_rows


def test_the_report_gives_the_sampled_replays_rate(tmp_path):
    # a job folder: the whole-trace simulation (not sampled, rate 1) and the key-sampled replay (rate 0.0171)
    sim = RunData(tmp_path / "sim", {}, {"kind": "replay-kv", "sample_rate": 1.0})
    rep = RunData(tmp_path / "rep", {}, {"kind": "replay-kv", "sample_rate": 0.0171})
    job = RunData(tmp_path / "job", {}, {"kind": "run"}, parts={"simulate": sim, "replay": rep})
    line = next(v for _, k, v in verdict_rows(job) if k == "key sampling")
    assert line.startswith("the replay kept a 0.0171 share of the blocks") and "kept 1 " not in line


def test_the_reports_coverage_rows_are_the_timed_replays_not_the_simulations_beside_it():
    """A run job holds the whole-trace dry run (every request 'issued') and the timed replay (1,761 of 13,931): the
    verdict rows state the replay's, as the answer box does (the dry run's part sorts first by its folder name)."""
    sim = RunData(Path("/x/replay-kv-1"), {}, {"kind": "replay-kv", "dry_run": True, "requests": 13931,
                                               "trace_requests": 13931, "requests_issued": 13931,
                                               "replayed_fraction": 1.0})
    rep = RunData(Path("/x/replay-kv-2"), {}, {"kind": "replay-kv", "dry_run": False, "requests": 8192,
                                               "trace_requests": 13931, "requests_issued": 1761,
                                               "replayed_fraction": 1761 / 13931})
    job = RunData(Path("/x"), {}, {"kind": "run"}, parts={"replay-kv-1": sim, "replay-kv-2": rep})
    rows = {k: v for _, k, v in verdict_rows(job)}
    assert rows["requests issued (timed I/O)"] == "1,761" and rows["requests in the trace"] == "13,931"
    assert rows["replayed fraction (issued / in the trace)"] == "0.1264"
    assert rows["requests through the tier simulation"] == "8,192"


def test_a_missing_figure_reads_as_a_word_in_the_report_never_none(tmp_path):
    """A load path with no first byte and no source, a probe with no I/O size, QD, bandwidth or first byte: the
    verdict table says them missing in words; the HTML holds no "None" (it printed "6 GB/s, None")."""
    import html as _html
    import re

    from kvbench.report.tables import fmt, verdict_table

    rd = RunData(tmp_path / "job", {}, {"kind": "run"},
                 analyses={"load_paths": {"tiers": {"l3": {"bandwidth_bytes_per_s": 6e9, "first_byte": None,
                                                           "source": None}}},
                           "probes": [{"name": "l3", "bandwidth_bytes_per_s": None, "first_byte_s": None,
                                       "io_size": None, "qd": None}]})
    rows = {(s, k): v for s, k, v in verdict_rows(rd)}
    assert rows[("load path", "l3: bandwidth, first byte")] == "6 GB/s, first byte unmeasured"
    assert rows[("load path", "l3: source")] == "not stated"
    assert ("tier l3", "probe: bandwidth at —, QD?") in rows
    text = _html.unescape(re.sub(r"<[^>]+>", " ", verdict_table([rd])))
    assert "None" not in text and "first byte unmeasured" in text
    # a lifetime no write spends is said so (a plan's in-memory figure; JSON carries it as the answer's unbounded)
    assert fmt("lifetime_years", float("inf")) == "no writes: unbounded" and fmt("lifetime_years", 4.6) == "4.6 years"


def test_the_answer_box_of_a_store_with_no_writes_says_unbounded_from_the_runs_json(tmp_path):
    """The report reads the answer from the run's summary.json (no infinity in JSON: null): a plan whose store takes
    no writes shows 0 writes and a lifetime "no writes: unbounded", as the terminal does, never n/a or inf."""
    import html as _html
    import json
    import re

    from kvbench.analysis.answer import build_answer, text_table
    from kvbench.metrics.run import to_jsonable
    from kvbench.report.tables import answer_html
    from tests.analysis.test_answer import _check, _plan

    a = build_answer(_plan(write=0.0), _check())
    summary = {"kind": "run", "answer": json.loads(json.dumps(to_jsonable(a.to_json()), allow_nan=False))}
    rd = RunData(tmp_path / "job", {}, summary)
    text = _html.unescape(re.sub(r"<[^>]+>", " ", answer_html([rd])))
    assert "no writes: unbounded (warranty 5 years)" in text and "never rewritten (no writes)" in text
    assert "0 B/s to the store" in text
    assert "None" not in text and "n/a" not in text and "inf" not in text
    assert "no writes: unbounded" in text_table(a)


def test_a_cluster_runs_rows_name_its_warm_up_and_the_stationarity_of_what_it_measured(tmp_path):
    """A cluster summary measured from request 366 of a stationary window: both headline rows; a whole-trace run
    (no measured_from) shows only the verdict, here a trace that is not stationary, whole."""
    warm = RunData(tmp_path / "c1", {}, {"kind": "cluster", "router": "session", "requests": 634,
                                         "measured_from": {"request": 366, "start_s": 100.0},
                                         "stationarity": {"verdict": "stationary", "note": "Measured from 100 s"}})
    rows = {k: v for _, k, v in verdict_rows(warm)}
    assert rows["measured from request (warm-up before it)"] == "366"
    assert rows["stationarity of the span measured"] == "stationary"
    whole = RunData(tmp_path / "c2", {}, {"kind": "cluster", "router": "session", "requests": 1000,
                                          "stationarity": {"verdict": "not stationary: new_block_share 0.9 -> 0.7"}})
    rows = {k: v for _, k, v in verdict_rows(whole)}
    assert "measured from request (warm-up before it)" not in rows
    assert rows["stationarity of the span measured"] == "not stationary: new_block_share 0.9 -> 0.7"
