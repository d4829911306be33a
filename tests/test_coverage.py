"""Coverage that is true (issue 29, part 5): requests issued over the requests in the trace, said as such, and the
key-sampled replay's rate in the report."""

from __future__ import annotations

import json
from pathlib import Path

from kvbench.replay.kv import coverage_line, replayed_fraction
from kvbench.report.rundata import RunData
from kvbench.report.tables import verdict_rows


def test_coverage_is_requests_issued_over_requests_in_the_trace():
    assert coverage_line(1182, 3993, 60) == "1,182 of 3,993 requests replayed (30%) in 60 s"
    assert replayed_fraction(1182, 3993) == 1182 / 3993
    assert coverage_line(3, 3993) == "3 of 3,993 requests replayed (<1%)" and replayed_fraction(0, 0) is None


def test_a_replay_of_part_of_the_trace_says_how_much(cli, tmp_path):
    from kvbench.stream.traces import read_trace

    tr = read_trace("mooncake-sample")
    base = ["replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "16MiB", "--l3", tmp_path / "s.img",
            "--l3-capacity", "64MiB", "--json", "--results", tmp_path]
    # open loop for 1 s of trace time (an open-loop replay takes it in real time): only the requests arriving in
    # it (8 of the sample's 1,000) are simulated, the trace has more
    r = cli(*base, "--duration", "1s")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    arrived = int((tr.timestamp_s < 1.0).sum())
    assert s["trace_requests"] == tr.n_requests > s["requests"] == arrived > 0
    assert s["requests_issued"] == s["requests"] - s["requests_not_issued"]
    assert s["replayed_fraction"] == s["requests_issued"] / tr.n_requests < 1       # not simulated / simulated
    on_disk = json.loads((Path(s["run_dir"]) / "summary.json").read_text())
    assert on_disk["replayed_fraction"] == s["replayed_fraction"]
    # --max-requests N: the trace asked for is its first N requests
    s = json.loads(cli(*base, "--max-requests", "7", "--closed-loop").stdout)
    assert s["trace_requests"] == 7 and s["replayed_fraction"] == s["requests_issued"] / 7


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
