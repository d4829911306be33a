"""``kvbench mrc``, ``kvbench trace stats``, ``kvbench trace gen``: JSON fields, one-line errors, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kvbench.analysis.curves.profile import exact_profile
from kvbench.stream.traces import read_trace

from tests.conftest import FIXTURES, REPO


def test_mrc_json_fields(cli):
    r = cli("mrc", "--capacities", "100,1000,5000", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["capacities"] == [100, 1000, 5000] and len(d["hit_ratio"]) == 3
    exact = exact_profile(read_trace("mooncake-sample"))
    assert np.allclose(d["hit_ratio"], exact.hit_ratio([100, 1000, 5000]), atol=1e-12)
    assert d["references"] == 23787 and d["infinite_hit_ratio"] == pytest.approx(exact.infinite_hit_ratio)
    assert d["method"] == "exact" and d["format"] == "mooncake"


def test_mrc_full_curve_bytes_policies_ttl_sample(cli):
    d = json.loads(cli("mrc", "--json", "--points", "20").output)
    assert 5 < len(d["capacities"]) <= 20 and d["hit_ratio"][-1] == pytest.approx(d["infinite_hit_ratio"])
    d = json.loads(cli("mrc", "--unit", "bytes", "--model", "llama-3.1-8b", "--capacities", "64GiB,1TiB",
                       "--policy", "lru,fifo,s3fifo", "--warmup", "0.1", "--json").output)
    assert d["capacities"] == [64 << 30, 1 << 40] and d["capacities_blocks"] == [1024, 16384]
    assert [c["policy"] for c in d["curves"]] == ["lru", "fifo", "s3fifo"]
    assert d["block_bytes"] == 131072 * 512 and d["warmup"] == 0.1
    t = json.loads(cli("mrc", "--ttl", "1m", "--capacities", "20000", "--json").output)
    assert t["ttl_s"] == 60 and t["hit_ratio"][0] < d["hit_ratio"][1]
    s = json.loads(cli("mrc", "--sample", "0.2", "--capacities", "20000", "--json").output)
    assert s["method"] == "shards-fixed-rate" and s["sample_rate"] == 0.2
    s = json.loads(cli("mrc", "--sample-size", "2000", "--capacities", "20000", "--json").output)
    assert s["method"] == "shards-fixed-size" and s["sample_rate"] < 1 and s["streamed"]   # memory: the sample
    w = json.loads(cli("mrc", "--sample-size", "2000", "--capacities", "20000", "--warmup", "0.1",
                       "--json").output)   # warm-up reads the whole trace (it needs the request count)
    assert w["method"] == "shards-fixed-size" and not w["streamed"]


@pytest.mark.parametrize("args,match,code", [
    (["--capacities", "0,100"], "--capacities: 0 is not > 0", 2),
    (["--capacities", "-5"], "is not > 0", 2),
    (["--unit", "bytes", "--capacities", "1GiB"], "needs a model preset", 2),
    (["--format", "parquet"], "unknown trace format 'parquet'", 2),
    (["--policy", "mru"], "unknown policy 'mru'", 2),
    (["nope.jsonl"], "trace not found", 2),
    (["--model", "gpt-9"], "unknown models preset", 2),
])
def test_mrc_errors_are_one_line(cli, args, match, code):
    r = cli("mrc", *args)
    assert r.exit_code == code
    assert match in r.output and r.output.count("\n") == 1 and "Traceback" not in r.output


def test_mrc_malformed_and_empty_trace(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1, -2]}\n')
    r = cli("mrc", bad)
    assert r.exit_code == 2 and "bad.jsonl:2: field 'hash_ids'" in r.output and r.output.count("\n") == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    r = cli("mrc", empty)
    assert r.exit_code == 2 and "empty" in r.output and r.output.count("\n") == 1
    ooo = tmp_path / "ooo.jsonl"
    ooo.write_text('{"timestamp": 5, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n'
                   '{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n')
    r = cli("mrc", ooo)
    assert r.exit_code == 2 and "ooo.jsonl:2" in r.output and "--sort" in r.output
    assert cli("mrc", ooo, "--sort", "--json").exit_code == 0


def test_trace_stats(cli):
    d = json.loads(cli("trace", "stats", "--json").output)
    assert d["requests"] == 1000 and d["block_references"] == 23787 and d["distinct_blocks"] == 19780
    assert d["ids"]["prefix_chained"] and not d["ids"]["chained_by_reader"]
    assert d["reuse_time_s"]["p50"] > 0 and 0 < d["infinite_cache_reuse"] < 1
    d = json.loads(cli("trace", "stats", FIXTURES / "traces" / "lmbench_sample.jsonl", "--json").output)
    assert not d["ids"]["prefix_chained"] and d["ids"]["chained_by_reader"]
    r = cli("trace", "stats")
    assert r.exit_code == 0 and "infinite-cache reuse" in r.output
    d = json.loads(cli("trace", "stats", FIXTURES / "traces" / "bailian_sample.jsonl", "--json").output)
    recs = [json.loads(x) for x in open(FIXTURES / "traces" / "bailian_sample.jsonl")]
    assert d["sessions"]["roots"] == sum(r["parent_chat_id"] == -1 for r in recs)
    assert d["sessions"]["turn"]["max"] == max(r["turn"] for r in recs) and d["block_tokens"] == 16
    assert "conversations" in cli("trace", "stats", FIXTURES / "traces" / "bailian_sample.jsonl").output


def test_trace_gen_roundtrip(cli, tmp_path):
    out = tmp_path / "agent.jsonl.gz"
    r = cli("trace", "gen", "agent", "-o", out, "-n", "80", "--seed", "1", "--arrival", "bursty", "--json",
            "--set", "turns_mean=10")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["requests"] == 80 and d["spec"]["params"]["turns_mean"] == 10 and out.exists()
    assert read_trace(out).n_requests == 80
    r = cli("trace", "gen", "chat", "-o", tmp_path / "x.jsonl", "--set", "turns=3")
    assert r.exit_code == 2 and "--set: unknown parameter 'turns'" in r.output


def test_subprocess_entry(tmp_path):
    """The real entry point: python -m kvbench mrc on the Bailian fixture."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "kvbench", "mrc", str(FIXTURES / "traces" / "bailian_sample.jsonl"),
                        "--capacities", "8,64", "--json"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["format"] == "bailian" and d["block_tokens"] == 16 and len(d["hit_ratio"]) == 2


def test_mrc_sample_size_of_a_key_sampled_stream_is_refused(cli):
    """Streamed or read whole, a key-sampled gen: stream cannot be sampled to a fixed size: one line, exit 2."""
    for extra in ([], ["--warmup", "0.1"]):
        r = cli("mrc", "gen:chat,duration=10m,rate=2,seed=1,sample=0.5", "--sample-size", "100", *extra)
        assert r.exit_code == 2 and "cannot be sampled to a fixed size" in r.output and "Traceback" not in r.output
