"""The bad-input and fault audit of issue 19: each defect it found, reproduced on real files, devices and
processes. Every test here failed before its fix."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[1]


# --- io ------------------------------------------------------------------------------------------------------
def test_io_verify_failure_fails_the_run_and_stands_out_in_the_report(cli, tmp_path):
    target = tmp_path / "v.img"
    r = cli("io", "--target", target, "--size", "8MiB", "--rw", "randread", "--runtime", "0", "--verify", "all",
            "--inject-fault", "corrupt-every=100", "--results", tmp_path / "res", "--json")
    assert r.exit_code == 1 and "kvbench: error: verify:" in r.output
    s = json.loads(r.stdout)
    assert s["status"] == "failed" and s["verify_errors"] == 2048 // 100
    assert json.loads((Path(s["run_dir"]) / "summary.json").read_text())["status"] == "failed"
    out = tmp_path / "r.html"
    assert cli("report", s["run_dir"], "-o", out).exit_code == 0
    html = out.read_text()
    assert "FAIL: 20 of 2048 checked reads returned wrong data" in html and "FAILED" in html


def test_bad_inject_fault_spec_is_refused_before_anything_is_created(cli, tmp_path):
    target = tmp_path / "f.img"
    r = cli("io", "--target", target, "--size", "8MiB", "--inject-fault", "corrupt-evry=10",
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--inject-fault: cannot parse 'corrupt-evry=10'" in r.output
    assert not target.exists() and not (tmp_path / "res").exists()


def test_io_size_smaller_than_bs_names_both(cli, tmp_path):
    r = cli("io", "--target", tmp_path / "s.img", "--size", "64k", "--bs", "1MiB", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--size 65536 is smaller than one --bs 1048576 block" in r.output
    assert "--size 0" not in r.output and not (tmp_path / "s.img").exists()


# --- outputs never replace a user's file --------------------------------------------------------------------
def test_outputs_refuse_files_kvbench_did_not_write_unless_forced(cli, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    r = cli("trace", "gen", "qa", "-n", "5", "-o", notes)
    assert r.exit_code == 2 and f"{notes} exists and was not written by kvbench" in r.output
    assert notes.read_text() == "my notes\n"
    run = json.loads(cli("io", "--target", tmp_path / "t.img", "--size", "4MiB", "--runtime", "0",
                         "--results", tmp_path / "res", "--json").stdout)["run_dir"]
    r = cli("report", run, "-o", notes)
    assert r.exit_code == 2 and "refusing to overwrite" in r.output and notes.read_text() == "my notes\n"
    r = cli("io", "--target", tmp_path / "t.img", "--runtime", "0", "--export-iolog", notes,
            "--results", tmp_path / "res2")
    assert r.exit_code == 2 and notes.read_text() == "my notes\n" and not (tmp_path / "res2").exists()
    # a file kvbench wrote may be rewritten; --force replaces the user's file
    mine = tmp_path / "mine.jsonl"
    assert cli("trace", "gen", "qa", "-n", "5", "-o", mine).exit_code == 0
    assert cli("trace", "gen", "qa", "-n", "7", "-o", mine).exit_code == 0
    assert cli("report", run, "-o", notes, "--force").exit_code == 0 and "<html" in notes.read_text()
    assert cli("report", run, "-o", notes).exit_code == 0           # now kvbench's own file


# --- replay kv ---------------------------------------------------------------------------------------------
def test_replay_kv_json_prints_the_error_object_on_failure(cli, tmp_path):
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l3", tmp_path / "s.img",
            "--json", "--results", tmp_path / "res")
    assert r.exit_code == 2
    obj = json.loads(r.stdout)
    assert obj["status"] == "failed" and obj["kind"] == "replay-kv"
    assert "needs --l3-capacity" in obj["error"] and obj["fix"].startswith("give e.g.")


def test_replay_summary_counts_what_the_tiers_counted(cli, tmp_path):
    """A run cut by --duration: the summary's requests and hits agree with the tier counters."""
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", "640MiB",
            "--closed-loop", "--duration", "0.3s", "--verify", "off", "--json", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    l2 = s["tiers"]["l2"]
    assert s["hit_blocks"] == l2["hit_blocks"] == l2["blocks"]["hit_reads"]
    blocks = l2["blocks"]["hit_reads"] + l2["blocks"]["create_writes"] + l2["blocks"]["promote_writes"]
    assert s["blocks"] == blocks                     # every simulated block is a hit read or a created block
    reqs = (Path(s["run_dir"]) / "requests.csv").read_text().splitlines()
    assert len(reqs) - 1 == s["requests"] and s["requests_not_issued"] <= s["requests"]


def test_replay_capacities_mean_what_they_say(cli, tmp_path):
    """--l2 2GiB allocated a 6 GiB arena and --l3-capacity 8GiB a 12 GiB file: 64 spare 64 MiB slots. A tier of X
    bytes caches X bytes; the L3 store's spare slots (reads in flight at QD32 of 1 MiB chunks: ceil(32 x 1 MiB /
    64 MiB) + 1 = 2) are on top, stated, and in the file; the DRAM arena copies synchronously: none."""
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", "512MiB",
            "--l3", tmp_path / "s.img", "--l3-capacity", "1GiB", "--max-requests", "2", "--verify", "off",
            "--closed-loop", "--json", "--results", tmp_path / "res")
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["tiers"]["l2"]["footprint_bytes"] == 512 * MiB and s["tiers"]["l3"]["footprint_bytes"] == 18 * 64 * MiB
    assert os.path.getsize(tmp_path / "s.img") == 18 * 64 * MiB
    assert (s["tiers"]["l2"]["capacity_blocks"], s["tiers"]["l3"]["capacity_blocks"]) == (8, 16)
    assert "the store adds 2 spare slots (128 MiB) on top" in s["tiers"]["l3"]["store"]
    assert "no spare slots" in s["tiers"]["l2"]["store"]


def test_replay_l2_arena_larger_than_free_memory_is_refused_before_allocation(cli, tmp_path):
    import psutil

    too_big = (psutil.virtual_memory().available // (64 * MiB) + 64) * 64 * MiB
    r = cli("replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--l2", str(too_big),
            "--results", tmp_path / "res")
    assert r.exit_code == 2 and "memory available" in r.output and not (tmp_path / "res").exists()


def test_ctrl_c_during_a_replay_with_l2_is_honoured_promptly(tmp_path):
    """Ctrl-C was honoured only when --duration ran out when an L2 arena ran beside the device."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "replay", "kv", "mooncake-sample", "--model",
                          "llama-3.1-8b", "--l2", "256MiB", "--l3", str(tmp_path / "s.img"), "--l3-capacity",
                          "512MiB", "--closed-loop", "--duration", "120s", "--json",
                          "--results", str(tmp_path / "res")], env=env, cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=open(tmp_path / "err.txt", "w"), text=True)
    try:
        for _ in range(1200):              # wait until the replay runs (targets open, run folder made)
            if list((tmp_path / "res").glob("*/summary.json")):
                break
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=110)       # before the fix: only when --duration (120 s) ran out
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (tmp_path / "err.txt").read_text()[-3000:]
    s = json.loads(out)
    assert s["status"] == "interrupted" and s["elapsed_s"] < 100


# --- check, run, models, traces --------------------------------------------------------------------------
def test_check_refuses_a_profile_and_a_run_of_different_models(cli, tmp_path):
    from tests.analysis.test_recompute import REQUESTS, write_run

    root = write_run(tmp_path / "run", requests=REQUESTS)            # a replay of tiny-gqa
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--run", root)
    assert r.exit_code == 2 and "replayed tiny-gqa but the check would use llama-3.1-8b" in r.output
    assert "give a profile of tiny-gqa" in r.output
    r = cli("check", "--profile", "llama-3.1-8b-h200-trtllm-fp8", "--run", root, "--model", "tiny-gqa", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["model"] == "tiny-gqa"      # chosen on purpose


def test_run_refuses_a_tmpfs_store_and_zero_duration_before_starting(cli, tmp_path):
    if not os.path.isdir("/dev/shm") or os.statvfs("/dev/shm").f_bsize == 0:
        pytest.skip("no /dev/shm")
    from kvbench.metrics.environment import mount_of
    if (mount_of("/dev/shm") or {}).get("fstype") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    r = cli("run", "--l3", "/dev/shm/kvbench-test-l3.bin", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--l3 /dev/shm/kvbench-test-l3.bin would be on tmpfs" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "res").exists()
    r = cli("run", "--duration", "0", "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--duration 0 s must be > 0" in r.output and not (tmp_path / "res").exists()


def test_models_rejects_bad_block_tokens_and_tp_says_how(cli):
    r = cli("models", "--block-tokens", "-1")
    assert r.exit_code == 2 and "-1 is not in the range x>=1" in r.output
    r = cli("models", "--tp", "0")
    assert r.exit_code == 2 and "--tp must be >= 1, not 0 (fix: give --tp 1" in r.output
    assert "fix the preset" not in r.output


def test_trace_errors_name_the_real_problem(cli, tmp_path):
    body = b"".join(json.dumps({"timestamp": i, "input_length": 512, "output_length": 1,
                                "hash_ids": [i]}).encode() + b"\n" for i in range(2000))
    bad = bytearray(gzip.compress(body))
    bad[20:60] = b"\x00" * 40                       # valid magic, broken deflate data
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(bad))
    r = cli("trace", "stats", tmp_path / "bad.jsonl.gz")
    assert r.exit_code == 2 and "corrupt gzip data" in r.output and "internal error" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = cli("trace", "stats", "/dev/null")
    assert r.exit_code == 2 and "/dev/null is not a regular file" in r.output and "not found" not in r.output
    (tmp_path / "o.jsonl").write_text('{"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]}\n'
                                      '{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [2]}\n')
    r = cli("trace", "stats", tmp_path / "o.jsonl")
    assert r.exit_code == 2 and "out-of-order timestamp" in r.output and "--sort" in r.output
    assert "--order keep" not in r.output


def test_replay_whose_device_read_less_than_the_engine_is_not_measured():
    from kvbench.replay.kv import _counters_disagree

    assert _counters_disagree({"device": "vda", "read_bytes": 10 * MiB}, 10 * MiB) is None
    assert _counters_disagree({"device": "vda", "read_bytes": 50 * MiB}, 10 * MiB) is None   # others read too
    assert _counters_disagree(None, 10 * MiB) is None and _counters_disagree({"read_bytes": 0}, 0) is None
    why = _counters_disagree({"device": "loop3", "read_bytes": 200 * MiB}, 85 * 1024 * MiB)
    assert why.startswith("the O_DIRECT bypass check failed: /dev/loop3 read 209,715,200 bytes")
