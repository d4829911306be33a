"""``kvbench mrc``: the command on hand-made traces."""

from __future__ import annotations

import json

import numpy as np
from tests.conftest import TTL_S, TTL_HITS, TTL_REFS
import pytest


# A reuse gap exactly at the retention time is a hit, just over it a miss: the TTL boundary trace, tests/conftest.py
TTL_BLOCK = 262144                       # tiny-gqa: 512 B/token x 512-token blocks


def test_mrc_and_replay_dry_run_keep_a_block_idle_exactly_the_ttl(cli, ttl_trace_file, tmp_path):
    r = cli("mrc", ttl_trace_file, "--ttl", "8s", "--capacities", "2,100", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["hit_ratio"] == [TTL_HITS / TTL_REFS, TTL_HITS / TTL_REFS] and d["ttl_s"] == TTL_S
    r = cli("replay", "kv", ttl_trace_file, "--model", "tiny-gqa", "--l2", str(100 * TTL_BLOCK), "--ttl", "8s",
            "--dry-run", "--json", "--results", tmp_path)
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    assert s["hit_blocks"] == TTL_HITS and s["blocks"] == TTL_REFS
    rows = np.loadtxt(s["run_dir"] + "/requests.csv", delimiter=",", skiprows=1, usecols=3, ndmin=1)
    assert rows.tolist() == [0, 2, 0, 1]


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


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


def _stdout_json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout[r.stdout.index("{"):])


@pytest.mark.parametrize("policies", ["lru", "fifo", "lru,fifo,s3fifo"])
def test_mrc_json_always_has_one_curve_per_policy(cli, policies):
    d = _stdout_json(cli("mrc", "mooncake-sample", "--policy", policies, "--capacities", "100,1000", "--json"))
    assert [c["policy"] for c in d["curves"]] == policies.split(",")
    assert d["curves"][0]["hit_ratio"] == d["hit_ratio"]          # the top level is the first policy's curve
    assert d["refs_per_s"] is None or d["refs_per_s"] > 0


def test_mrc_warm_up_by_time_or_fraction(cli, tmp_path):
    """Requests one a second touching blocks 1 2 1 1 3 2: --warmup 2.5s warms with r0..r2, as --warmup 0.5 does:
    of r3..r5, r3 hits at 1 block (d 1) and r5 at 3 (d 3): 1/3 and 2/3. A bare number of 1 or more is a
    fraction out of range: one line naming the option and the unit that makes it a time."""
    p = tmp_path / "t.jsonl"
    p.write_text("".join(json.dumps({"timestamp": t * 1000, "input_length": 512, "output_length": 1,
                                     "hash_ids": [b]}) + "\n" for t, b in enumerate([1, 2, 1, 1, 3, 2])))
    by_time = _json(cli("mrc", p, "--capacities", "1,3", "--warmup", "2.5s", "--json"))
    by_share = _json(cli("mrc", p, "--capacities", "1,3", "--warmup", "0.5", "--json"))
    assert by_time["hit_ratio"] == by_share["hit_ratio"] == pytest.approx([1 / 3, 2 / 3])
    r = cli("mrc", p, "--warmup", "2")
    assert r.exit_code != 0 and "--warmup 2s" in r.output and r.output.strip().count("\n") == 0, r.output
