"""What the terminal and the JSON contracts say (issue 20): stable JSON shapes (mrc's ``curves``, check's
top-level ``verdict``), units that cannot be misread (--ttl, io --runtime, Engram windows), honest sources
(Zipf streams), and kvbench run's replay progress and first-byte notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.replay.test_engram import tiny_preset  # noqa: F401 - fixture

from kvbench.cli.run import _replay_progress, first_byte_notes
from kvbench.qualify.probe import TierProbe
from kvbench.replay.kv import LiveProgress


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


@pytest.mark.parametrize("policies", ["lru", "fifo", "lru,fifo,s3fifo"])
def test_mrc_json_always_has_one_curve_per_policy(cli, policies):
    d = _json(cli("mrc", "mooncake-sample", "--policy", policies, "--capacities", "100,1000", "--json"))
    assert [c["policy"] for c in d["curves"]] == policies.split(",")
    assert d["curves"][0]["hit_ratio"] == d["hit_ratio"]          # the top level is the first policy's curve
    assert d["refs_per_s"] is None or d["refs_per_s"] > 0


def test_check_json_has_a_top_level_verdict(cli):
    d = _json(cli("check", "--recompute-tokens-per-s", "9200", "--model", "deepseek-v3",
                  "--tier", "fast=13GB/s,80us", "--tier", "slow=0.05GB/s,50ms", "--json"))
    v = d["verdict"]
    # fast: 70,272 B/token at 13 GB/s = 5.4 us/token against 109 us/token recompute -> loads from n* on
    assert v["tiers"] == {"fast": "load", "slow": "recompute"} and v["decision"] == "load"
    assert v["best_tier"] == "fast" and v["break_even_tokens"] == d["tiers"]["fast"]["break_even_tokens"]
    assert v["lines"] == [d["tiers"]["fast"]["verdict"], d["tiers"]["slow"]["verdict"]]
    d = _json(cli("check", "--recompute-tokens-per-s", "9200", "--model", "deepseek-v3",
                  "--tier", "slow=0.05GB/s,50ms", "--json"))
    assert d["verdict"]["decision"] == "recompute" and d["verdict"]["best_tier"] is None


@pytest.mark.parametrize("cmd", [["mrc", "mooncake-sample"], ["replay", "kv", "mooncake-sample", "--model",
                                                               "tiny-gqa", "--l2", "1GiB", "--dry-run"]])
def test_ttl_without_a_unit_is_refused_with_one_line(cli, cmd, tmp_path):
    r = cli(*cmd, "--ttl", "10", "--results", tmp_path) if cmd[0] == "replay" else cli(*cmd, "--ttl", "10")
    assert r.exit_code == 2
    assert "--ttl 10: give a unit, e.g. 10s, 10m or 10h" in r.output and "Traceback" not in r.output
    ok = cli(*cmd, "--ttl", "10m", "--results", tmp_path) if cmd[0] == "replay" else cli(*cmd, "--ttl", "10m")
    assert ok.exit_code == 0, ok.output


def test_io_help_states_the_runtime_unit(cli):
    out = " ".join(cli("io", "--help").output.split())
    assert "[default: 10s]" in out


def test_engram_windows_and_zipf_source_read_unambiguously(cli, tiny_preset, tmp_path):  # noqa: F811
    r = cli("replay", "engram", "--preset", tiny_preset, "--zipf", 1.1, "--tokens", 4096, "--batch", 4,
            "--seq-len", 256, "--layer-us", 57, "--dram", "8KiB", "--dry-run", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    tokens = next(ln for ln in r.output.splitlines() if ln.startswith("tokens"))
    assert "synthetic Zipf(1.1)" in tokens and " via " not in tokens
    window = next(ln for ln in r.output.splitlines() if ln.startswith("window"))
    assert "Engram layer 1:" in window and "Engram layer 2:" in window and ", " not in window.split(":", 1)[1]
    assert window.count(" us") == 2


def test_run_progress_line_reads_the_live_progress_file(tmp_path):
    job = tmp_path / "run-1"
    job.mkdir()
    assert "starting" in _replay_progress(job, 3.0, 60.0)
    rep = job / "replay-kv-1"
    rep.mkdir()
    assert "simulating the first window" in _replay_progress(job, 9.0, 60.0)
    live = LiveProgress(rep, trace_requests=4000)
    live.window(1000, 1000, 2000)                    # 1,000 done, a window of 1,000 requests / 2,000 I/Os
    live.on_second("dev")({"interval_s": 1.0, "iops": 1000.0, "bw_bytes_per_s": 2e9})   # half the window
    live.write(force=True)
    d = json.loads((rep / "progress.json").read_text())
    assert d["requests_done"] == 1500 and d["trace_requests"] == 4000 and d["bytes"]["dev"] == 2e9
    d["seconds"] = 10.0                               # fix the clock: 1,500 requests in 10 s, 2.5k left
    (rep / "progress.json").write_text(json.dumps(d))
    line = _replay_progress(job, 20.0, 60.0)
    assert "1,500 / 4,000 requests (38%)" in line and "store (L3) 0.20 GB/s" in line
    assert "ETA 17 s (trace at this rate)" in line                        # 2,500 / 150 per s < 50 s budget
    assert "ETA 15 s (time budget)" in _replay_progress(job, 20.0, 25.0)
    assert "time budget used" in _replay_progress(job, 20.0, 10.0)
    assert "first window" not in line


def test_first_byte_difference_between_probe_and_check_is_named():
    probe = TierProbe("l3", path="/var/tmp/s", first_byte_s=40e-6, bandwidth_bytes_per_s=2e9, io_size=1 << 20, qd=32,
                      first_byte_lat_us={}, bandwidth_lat_us={})
    same = {"l3": {"latency_s": 41e-6, "source": "given"}}
    assert first_byte_notes([probe], same) == []
    notes = first_byte_notes([probe], {"l3": {"latency_s": 9.11e-3, "source": "fit to l3's load times"}})
    assert len(notes) == 1
    assert "probe 40 us" in notes[0] and "QD1" in notes[0] and "9.11 ms" in notes[0] and "queueing" in notes[0]


def test_live_progress_survives_an_unwritable_folder(tmp_path):
    live = LiveProgress(tmp_path / "gone", trace_requests=10)
    live.window(0, 10, 10)                            # the folder does not exist: no exception, no file
    assert not (tmp_path / "gone").exists()


def test_io_names_its_default_scratch_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("io", "--runtime", "0", "--size", "4MiB", "--bs", "64k", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    scratch = Path(tmp_path / "res" / "io-scratch.dat").resolve()
    assert f"scratch file {scratch}" in r.output and f"rm {scratch}" in r.output
