"""README behaviours that had no test: check --kv-dtype, io --arrival poisson, replay kv --no-promote,
replay engram --mode prefill, ftl --gc/--page-size, mrc --field/--time-unit, qualify --drive and
--skip-precondition, Ctrl-C during a replay. Expected values are computed by hand in each docstring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, write_mooncake

BLOCK = 262144                       # tiny-gqa: 512 B/token x 512-token blocks


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_check_kv_dtype_halves_the_bytes_and_moves_n_star(cli):
    """llama-3.1-8b KV at fp8 is 65,536 B/token (bf16: 131,072). Recompute 10k tok/s saves 1e-4 s/token; a
    1 GB/s, 1 ms tier loads fp8 KV at 6.5536e-5 s/token: wins when 1e-4 n > 1e-3 + 6.5536e-5 n, i.e.
    n > 29.02 -> n* = 30. At bf16 it loads at 1.31e-4 s/token > 1e-4: never."""
    args = ["check", "--recompute-tokens-per-s", "10000", "--model", "llama-3.1-8b", "--tier", "t=1GB/s,1ms",
            "--json"]
    fp8 = _json(cli(*args, "--kv-dtype", "fp8"))
    assert fp8["bytes_per_token"] == 65536 and fp8["kv_dtype"] == "fp8"
    assert fp8["tiers"]["t"]["break_even_tokens"] == 30
    bf16 = _json(cli(*args))
    assert bf16["bytes_per_token"] == 131072 and bf16["tiers"]["t"]["break_even_tokens"] is None
    r = cli(*args, "--kv-dtype", "fp7")
    assert r.exit_code == 2 and "fp7" in r.output and r.output.count("\n") == 1


def test_io_poisson_arrivals_are_exponential_not_uniform(cli, tmp_path):
    """Open loop at 2000/s for 0.5 s: 1,000 I/Os either way. Uniform gaps are all 500 us (coefficient of
    variation 0); Poisson gaps are exponential (CV 1, mean 500 us). The run follows the plan: never early."""
    from kvbench.engine.microbench import IoSpec, build_plan

    cv = {}
    for arrival in ("uniform", "poisson"):
        plan, loop = build_plan(IoSpec(target="x", rate_iops=2000, runtime_s=0.5, arrival=arrival, seed=3), 4 << 20)
        gaps = np.diff(plan["issue_ns"]).astype(np.float64)
        assert len(plan) == 1000 and not loop and plan["issue_ns"][0] == 0
        assert gaps.mean() == pytest.approx(500_000, rel=0.1)
        cv[arrival] = gaps.std() / gaps.mean()
        s = _json(cli("io", "--target", tmp_path / "p.dat", "--size", "4MiB", "--rate_iops", "2000", "--arrival",
                      arrival, "--runtime", "0.5s", "--seed", "3", "--qd", "8", "--json", "--results",
                      tmp_path / "res"))
        assert s["pacing"] == "open" and s["ios"] == 1000 and s["issue_lag_us"]["n"] == 1000
        assert s["issue_lag_us"]["mean_us"] >= 0                   # never early (signed mean)
    assert cv["uniform"] < 1e-3 and 0.85 < cv["poisson"] < 1.15


_trace = write_mooncake             # Mooncake lines from (timestamp_ms, hash_ids) (tests/conftest.py)


def test_replay_no_promote_leaves_l3_hits_in_l3(cli, tmp_path):
    """L2 holds 1 block, L3 4, write-through. [1] [2] [1] [1]: the 3rd request finds block 1 only in L3.
    Promoting copies it up (1 promote write into L2, the 4th request hits L2); --no-promote leaves it (the
    4th request reads L3 again)."""
    tr = _trace(tmp_path / "t.jsonl", [(0, [1]), (1000, [2]), (2000, [1]), (3000, [1])])
    base = ["replay", "kv", tr, "--model", "tiny-gqa", "--l2", str(BLOCK), "--l3", tmp_path / "s.store",
            "--l3-capacity", str(4 * BLOCK), "--dry-run", "--json", "--results", tmp_path / "res"]
    up = _json(cli(*base))
    stay = _json(cli(*base, "--no-promote"))
    assert (up["tiers"]["l2"]["blocks"]["promote_writes"], up["tiers"]["l2"]["hit_blocks"],
            up["tiers"]["l3"]["hit_blocks"]) == (1, 1, 1)
    assert (stay["tiers"]["l2"]["blocks"]["promote_writes"], stay["tiers"]["l2"]["hit_blocks"],
            stay["tiers"]["l3"]["hit_blocks"]) == (0, 0, 2)
    assert up["hit_blocks"] == stay["hit_blocks"] == 2


def test_replay_engram_prefill_mode_steps_chunks(cli, tmp_path):
    """8,192 tokens over a batch of 4: decode steps one token per sequence (2,048 steps of 4 x 32 = 128 row
    lookups); prefill --chunk 16 steps 16 tokens per sequence (128 steps of up to 4 x 16 x 32 = 2,048 rows)."""
    base = ["replay", "engram", "--preset", "engram-27b", "--zipf", "1.0", "--tokenizer", "utf8-bytes",
            "--tokens", "8192", "--batch", "4", "--seq-len", "64", "--dram", "1MiB", "--dry-run", "--json",
            "--results", tmp_path]
    dec = _json(cli(*base))
    pre = _json(cli(*base, "--mode", "prefill", "--chunk", "16"))
    assert dec["steps"] == 2048 and pre["steps"] == 128
    assert dec["rows_per_step"] <= 128 and pre["rows_per_step"] <= 2048
    assert pre["rows_per_step"] > 15 * dec["rows_per_step"]        # 16x the tokens per step, few repeats


def test_ftl_gc_and_page_size_options(cli):
    """64 MiB at 16 KiB pages = 4,096 user pages; op 0.2 -> 4,915 pages -> 153 blocks of 32 pages. Two
    passes of uniform writes, half of them warm-up: 4,096 pages measured. FIFO GC copies more than greedy."""
    out = {}
    for gc in ("greedy", "fifo"):
        d = _json(cli("ftl", "--capacity", "64MiB", "--page-size", "16KiB", "--gc", gc, "--block-pages", "32",
                      "--op", "0.2", "--writes", "2x", "--json"))
        assert (d["gc"], d["page_size"], d["blocks"], d["block_pages"]) == (gc, 16384, 153, 32)
        assert d["measured"]["host_pages"] == 4096 and d["host_bytes"] == 4096 * 16384
        assert d["effective_op"] == 153 * 32 / 4096 - 1
        out[gc] = d["waf"]
    assert 1.0 < out["greedy"] < out["fifo"]
    r = cli("ftl", "--capacity", "64MiB", "--page-size", "1000")
    assert r.exit_code == 2 and "512" in r.output


def test_mrc_field_mapping_and_time_unit(cli, tmp_path):
    """A CSV trace with its own column names and millisecond times. Block 7 is reused after exactly 8,000 ms
    and block 9 after 9,000 ms: with --ttl 8s the first is a hit, the second a miss (1 hit of 5 references
    at capacity 10). Read as seconds (the default), both gaps are hours long: no hit."""
    p = tmp_path / "t.csv"
    p.write_text("t_ms,blocks,n_in,n_out\n0,7,512,1\n0,9,512,1\n8000,7,512,1\n9000,9,512,1\n9001,11,512,1\n")
    base = ["mrc", p, "--format", "csv", "--field", "timestamp=t_ms", "--field", "hash_ids=blocks",
            "--field", "input_length=n_in", "--field", "output_length=n_out", "--block-tokens", "512", "--capacities", "10", "--ttl", "8s",
            "--json"]
    ms = _json(cli(*base, "--time-unit", "ms"))
    assert ms["references"] == 5 and ms["hit_ratio"] == [1 / 5]
    s = _json(cli(*base, "--time-unit", "s"))
    assert s["hit_ratio"] == [0.0]


def test_replay_ctrl_c_writes_results_and_exits_130(tmp_path):
    """SIGINT during an open-loop replay on a file: exit 130, summary 'interrupted', requests.csv holds the
    requests that ran and no more."""
    store = Path("/var/tmp") / f"kvbench-ctrlc-{os.getpid()}"
    store.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "replay", "kv", "mooncake-sample", "--model", "tiny-gqa",
                          "--l3", str(store / "s.store"), "--l3-capacity", "32MiB", "--speed", "1", "--json",
                          "--results", str(tmp_path / "res")], cwd=REPO, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        summary = None
        for _ in range(600):                   # until the replay has started (its first partial summary)
            found = list((tmp_path / "res").glob("replay-kv-*/summary.json"))
            if found:
                summary = found[0]
                break
            assert p.poll() is None, p.communicate()
            time.sleep(0.1)
        assert summary is not None, "no partial summary appeared"
        time.sleep(3)                          # let it issue a few requests (at speed 1 the trace lasts 272 s)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
        for f in store.iterdir():
            f.unlink()
        store.rmdir()
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    s = json.loads(summary.read_text())
    # the summary counts the simulated windows whole (as the tier counters do); requests_not_issued did not run
    assert s["status"] == "interrupted" and s["requests"] - s.get("requests_not_issued", 0) < 1000
    csv = summary.parent / "requests.csv"
    if s["requests"]:
        assert len(csv.read_text().splitlines()) == s["requests"] + 1
    else:                                      # stopped before any request: nothing claimed, nothing written
        assert not csv.exists() or len(csv.read_text().splitlines()) <= 1


QUAL = """
name = "tiny-drive"
[drive]
rated_iops = 1e12
[precondition]
fill_passes = 1
fill_bs = "128k"
bs = "4k"
qd = 8
round_s = 0.2
max_rounds = 5
min_rounds = 5
[[workload]]
name = "reads"
kind = "io"
rw = "randread"
bs = "4k"
qd = 4
runtime = 0.3
[[criterion]]
name = "steady state reached"
workload = "precondition"
metric = "steady_state.reached"
equals = true
[[criterion]]
name = "read IOPS at the drive's rating"
workload = "reads"
metric = "iops"
min = "drive.rated_iops"
"""


def test_qualify_drive_override_and_skip_precondition(cli, tmp_path, monkeypatch):
    """--skip-precondition runs no precondition steps (its criterion is skipped, listed apart); --drive
    replaces the profile's drive facts that thresholds name (rated_iops 1e12 fails, 1 passes)."""
    monkeypatch.chdir(tmp_path)
    prof = tmp_path / "q.toml"
    prof.write_text(QUAL)
    args = ["qualify", prof, "--target", tmp_path / "d.img", "--size", "16MiB", "--skip-precondition", "--json",
            "-o", tmp_path / "q.html"]
    r = cli(*args, "--drive", "rated_iops=1")
    assert r.exit_code == 0, r.output                      # a skipped criterion is listed, not failed
    s = json.loads(r.stdout)
    assert "precondition" not in s["parts"] and "reads" in s["parts"]
    q = json.loads((tmp_path / s["run_dir"] / "qualify.json").read_text())
    verdict = {c["name"]: c for c in q["criteria"]}
    assert verdict["read IOPS at the drive's rating"]["passed"] is True
    assert verdict["read IOPS at the drive's rating"]["threshold"] == 1.0
    assert verdict["steady state reached"]["outcome"] == "skipped" and s["verdict"] == "pass"
    assert q["drive"]["rated_iops"] == 1.0
    r = cli(*args)                                          # the profile's own rating (1e12 IOPS): fails too
    q = json.loads((tmp_path / json.loads(r.stdout)["run_dir"] / "qualify.json").read_text())
    assert {c["name"]: c["passed"] for c in q["criteria"]}["read IOPS at the drive's rating"] is False
    r = cli(*args, "--drive", "rated_iops")
    assert r.exit_code == 2 and "KEY=VALUE" in r.output


def test_shipped_profile_dwpd_criterion_follows_drive_override():
    """kv-cache-offload judges the plan's required DWPD against drive.rated_dwpd (1.0 in the profile): a
    workload needing 2 DWPD fails as shipped and passes with --drive rated_dwpd=3."""
    from kvbench.qualify.criteria import evaluate
    from kvbench.qualify.profile import load_qualify_profile

    p = load_qualify_profile("kv-cache-offload")
    crit = [c for c in p.criteria if c.threshold == "drive.rated_dwpd"]
    assert len(crit) == 1 and p.drive["rated_dwpd"] == 1.0
    results = {crit[0].workload: {"deployment": {"dwpd_rating_equivalent_per_drive": 2.0}}}
    assert evaluate(crit, results, p.drive)[0].passed is False
    assert evaluate(crit, results, {**p.drive, "rated_dwpd": 3.0})[0].passed is True
    assert p.precondition is not None and p.precondition.max_range == 0.2     # what --skip-precondition skips
