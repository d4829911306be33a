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
