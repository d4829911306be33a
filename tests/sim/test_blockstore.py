"""Capacities mean what they say (issue 29, part 6): a tier of X bytes caches X bytes of KV, as the hit-ratio
curve assumes; the store's spare slots are its overhead, sized to the reads in flight and placed on top."""

from __future__ import annotations

import json
import os

import pytest

from kvbench.errors import UsageError
from kvbench.sim.blockstore import capacity_within, fit_store, make_store, spare_slots_for

MiB = 1 << 20
LLAMA_BLOCK = 64 * MiB          # llama-3.1-8b: 131,072 B/token x 512 tokens


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_a_625_gib_dram_tier_caches_10000_llama_blocks_and_its_hit_ratio_is_the_curves(cli, tmp_path):
    s = _json(cli("replay", "kv", "mooncake-synthetic", "--model", "llama-3.1-8b", "--l2", "625GiB", "--dry-run",
                  "--json", "--results", tmp_path))
    l2 = s["tiers"]["l2"]
    assert l2["capacity_blocks"] == 10_000 == 625 * 1024 // 64            # 625 GiB / 64 MiB, nothing held back
    assert l2["footprint_bytes"] == 625 << 30 and "no spare slots" in l2["store"]
    m = _json(cli("mrc", "mooncake-synthetic", "--unit", "bytes", "--model", "llama-3.1-8b", "--capacities",
                  "625GiB", "--json"))
    assert m["capacities_blocks"] == [10_000]
    assert s["hit_ratio"] == m["hit_ratio"][0]                           # both exact LRU: equal, not close
    c = _json(cli("cluster", "mooncake-synthetic", "--model", "llama-3.1-8b", "--nodes", "1", "--router", "random",
                  "--l2", "625GiB", "--dry-run", "--json", "--results", tmp_path))
    assert c["global"]["hit_ratio"] == m["hit_ratio"][0]                 # one node inherits the same cache


@pytest.mark.parametrize("layout", ["slot", "log"])
def test_an_l3_tier_equals_the_curve_at_several_capacities(cli, tmp_path, layout):
    caps = ["200GiB", "1000GiB"]
    m = _json(cli("mrc", "mooncake-synthetic", "--unit", "bytes", "--model", "llama-3.1-8b", "--capacities",
                  ",".join(caps), "--json"))
    for cap, want in zip(caps, m["hit_ratio"]):
        s = _json(cli("replay", "kv", "mooncake-synthetic", "--model", "llama-3.1-8b", "--l3", tmp_path / "s.img",
                      "--l3-capacity", cap, "--layout", layout, "--dry-run", "--json", "--results", tmp_path))
        assert s["tiers"]["l3"]["capacity_blocks"] == int(cap[:-3]) * 1024 // 64
        if layout == "slot":      # the log reclaims whole segments, dropping live blocks: not exactly LRU
            assert s["hit_ratio"] == want
    assert not (tmp_path / "s.img").exists()                                # a dry run touches no target


def test_spare_slots_are_about_the_reads_in_flight():
    # QD32 of 1 MiB chunks over 64 MiB slots: 32 MiB in flight covers ceil(32/64) + 1 = 2 slots
    assert spare_slots_for(32, MiB, 64 * MiB) == 2
    # chunks as large as the slot: every I/O in flight may be a different slot, never more than the depth
    assert spare_slots_for(32, MiB, 256 << 10) == 32 and spare_slots_for(4, MiB, MiB) == 4
    assert spare_slots_for(32, MiB, 40 * MiB) == 2 and spare_slots_for(128, MiB, 40 * MiB) == 5   # ceil(3.2)+1
    assert spare_slots_for(0, MiB, 64 * MiB) == 0                          # nothing asynchronous: none


def test_fit_store_puts_the_overhead_on_top_and_says_so():
    blocks, kw, note = fit_store("slot", 10 * 8192 + 100, 8192, spare_slots=3)
    assert (blocks, kw) == (10, {"spare_slots": 3})
    st = make_store("slot", blocks, 8192, **kw)
    assert st.footprint_bytes == 13 * 8192 and "adds 3 spare slots (24 KiB) on top" in note
    blocks, kw, note = fit_store("log", 5 * 8192, 8192, segment_bytes=2 * 8192)
    st = make_store("log", blocks, 8192, **kw)
    # 5 blocks need 3 segments of 2; one spare segment on top: 8 slots
    assert blocks == 5 and (st.n_segments, st.n_slots) == (4, 8) and "1 spare" in note


@pytest.mark.parametrize("layout", ["slot", "log"])
def test_capacity_within_is_the_largest_cache_whose_store_fits(layout):
    slot, seg, spare = 8192, 4 * 8192, 3
    for limit in range(0, 64 * slot, 1000):
        cap = capacity_within(layout, limit, slot, segment_bytes=seg, spare_slots=spare)
        assert cap % slot == 0

        def footprint(c):
            b, kw, _ = fit_store(layout, c, slot, segment_bytes=seg, spare_slots=spare)
            return make_store(layout, b, slot, **kw).footprint_bytes
        if cap:
            assert footprint(cap) <= limit
        assert cap + slot > limit or footprint(cap + slot) > limit       # one slot more would not fit


def test_a_real_replay_stores_its_spare_slots_on_top_and_a_region_bounds_the_store(cli, tmp_path):
    base = ["replay", "kv", "mooncake-sample", "--model", "llama-3.1-8b", "--max-requests", "2", "--verify", "off",
            "--closed-loop", "--json", "--results", tmp_path / "res"]
    s = _json(cli(*base, "--l3", tmp_path / "a.img", "--l3-capacity", "1GiB", "--qd", "128"))
    # QD128 of 1 MiB chunks over 64 MiB slots: ceil(128/64) + 1 = 3 spare slots on top of the 16-block cache
    assert (s["tiers"]["l3"]["capacity_blocks"], s["tiers"]["l3"]["footprint_bytes"]) == (16, 19 * 64 * MiB)
    assert os.path.getsize(tmp_path / "a.img") == 19 * 64 * MiB
    # a test region: the cache is the region less the spare slots; the store fills the region exactly
    s = _json(cli(*base, "--l3", tmp_path / "b.img", "--l3-region", "1GiB"))
    assert (s["tiers"]["l3"]["capacity_blocks"], s["tiers"]["l3"]["footprint_bytes"]) == (14, 1024 * MiB)
    assert s["tiers"]["l3"]["capacity_bytes"] == 14 * 64 * MiB and os.path.getsize(tmp_path / "b.img") == 1024 * MiB
    r = cli(*base, "--l3", tmp_path / "c.img", "--l3-region", "128MiB")   # 2 slots: both spare, no cache
    assert r.exit_code == 2 and "cannot hold one 64 MiB block and its store's overhead" in r.output
    assert not (tmp_path / "c.img").exists()


def test_a_region_with_key_sampling_is_refused():
    from kvbench.replay.kv import ReplayConfig

    with pytest.raises(UsageError, match="--l3-region with --sample-keys"):
        ReplayConfig(trace="t", model="m", l3="x", l3_region=1 << 30, sample_keys=0.1).validate()
