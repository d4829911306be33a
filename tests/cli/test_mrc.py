"""``kvbench mrc``: the command on hand-made traces."""

from __future__ import annotations

import json

import numpy as np
from tests.conftest import TTL_S, TTL_HITS, TTL_REFS


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
