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


# mutation survivors: the stores' bookkeeping by hand (the replay tests above see it only through a whole run)

def test_slot_bytes_round_up_to_the_alignment():
    from kvbench.sim.blockstore import slot_bytes_for

    assert [slot_bytes_for(b) for b in (1, 4095, 4096, 4097, 8192)] == [4096, 4096, 4096, 8192, 8192]
    assert slot_bytes_for(513, align=512) == 1024 and slot_bytes_for(512, align=512) == 512


def test_slot_store_hands_out_slots_in_fifo_order_and_trims_freed_ones():
    from kvbench.errors import SpecError
    from kvbench.sim.blockstore import SlotStore, describe

    with pytest.raises(SpecError, match="capacity below one block"):
        SlotStore(0, 4096)
    assert SlotStore(3, 4096, spare_slots=-2).n_slots == 3                # a negative spare counts as none
    st = make_store("slot", 3, 4096, spare_slots=2)
    assert (st.capacity_blocks, st.n_slots, st.footprint_bytes, st.used) == (3, 5, 5 * 4096, 0)
    assert describe(st) == "slot store: 5 slots of 4 KiB, footprint 20 KiB"
    assert [st.alloc(k) for k in range(10, 15)] == [(s, [], []) for s in range(5)]
    assert st.used == 5
    with pytest.raises(RuntimeError, match="slot store full"):
        st.alloc(99)
    assert st.free(2) == [] and st.free(0) == [] and st.used == 3         # no trim: nothing to trim
    assert st.alloc(20)[0] == 2 and st.alloc(21)[0] == 0                  # freed slots come back in FIFO order
    assert st.used == 5
    tr = make_store("slot", 1, 4096, trim=True)
    assert tr.alloc(1) == (0, [], []) and tr.free(0) == [(0, 1)] and tr.used == 0


def test_log_store_appends_seals_reclaims_the_oldest_and_frees_dead_segments():
    from kvbench.errors import SpecError
    from kvbench.sim.blockstore import LogStore, describe

    with pytest.raises(SpecError, match="capacity below one block"):
        LogStore(0, 4096)
    # 5 blocks in segments of 2 slots: ceil(5/2) = 3 segments + 1 spare = 4 segments, 8 slots
    st = make_store("log", 5, 4096, segment_bytes=2 * 4096, spare_segments=1, trim=True)
    assert (st.segment_slots, st.n_segments, st.n_slots, st.footprint_bytes) == (2, 4, 8, 8 * 4096)
    assert describe(st) == "log store: 8 slots of 4 KiB, footprint 32 KiB"
    assert LogStore(5, 4096, segment_bytes=2 * 4096, spare_segments=0).n_segments == 4   # one spare at least
    assert LogStore(3, 4096, segment_bytes=100).segment_slots == 1                      # a segment of one slot
    # keys 10..17 fill segments 0, 1, 2, 3 in order (0, 1, 2 sealed as the head moves on)
    assert [st.alloc(k) for k in range(10, 18)] == [(s, [], []) for s in range(8)]
    assert st.used == 8 and st.seg_live.tolist() == [2, 2, 2, 2] and list(st._sealed) == [0, 1, 2]
    # no free segment: the oldest sealed one (0) is reclaimed, its live keys dropped, its range trimmed
    assert st.alloc(18) == (0, [10, 11], [(0, 2)])
    assert (st.used, st.reclaimed_segments, st.dropped_blocks) == (7, 1, 2)
    assert st.seg_live.tolist() == [1, 2, 2, 2] and list(st._sealed) == [1, 2, 3]
    assert st.slot_live.tolist() == [True, False] + [True] * 6
    # segment 1 (sealed) dies block by block: trimmed and free once its last block dies
    assert st.free(2) == [] and st.used == 6 and st.seg_live[1] == 1
    assert st.free(2) == [] and st.used == 6                          # a dead slot again: nothing
    assert st.free(3) == [(2, 2)] and st.used == 5 and list(st._sealed) == [2, 3]
    assert st.alloc(19) == (1, [], [])                                # the head (0) has room left
    assert st.alloc(20) == (2, [], [])                                # head full: the free segment 1 next
    assert list(st._sealed) == [2, 3, 0] and st.seg_live.tolist() == [2, 1, 2, 2]
    # the head's blocks all die while it is the head: no trim yet, then free (and trimmed) when it moves on
    assert st.free(2) == [] and st.seg_live[1] == 0 and list(st._sealed) == [2, 3, 0]
    assert st.alloc(21) == (3, [], []) and st.free(3) == [] and st.seg_live[1] == 0
    assert st.alloc(22) == (2, [], [(2, 2)])                          # segment 1 freed, trimmed, taken again
    assert st.reclaimed_segments == 1 and st.used == 7 and list(st._sealed) == [2, 3, 0]
    # without trim the same reclaim gives no ranges
    nt = make_store("log", 1, 4096, segment_bytes=4096)              # 1 segment of 1 slot + 1 spare
    assert [nt.alloc(k) for k in (1, 2, 3)] == [(0, [], []), (1, [], []), (0, [1], [])]
    assert nt.free(1) == [] and nt.used == 1 and nt.dropped_blocks == 1


def test_fit_store_notes_and_unknown_layouts():
    from kvbench.errors import SpecError

    _, kw, note = fit_store("slot", 10 * 8192, 8192)
    assert kw == {"spare_slots": 0} and note == ("the cache holds 10 blocks (80 KiB); no spare slots (no read is in "
                                                 "flight when a slot is reused)")
    assert fit_store("slot", 10 * 8192, 8192, spare_slots=-4)[1] == {"spare_slots": 0}
    _, kw, note = fit_store("slot", 10 * 8192, 8192, spare_slots=1)
    assert note == ("the cache holds 10 blocks (80 KiB); the store adds 1 spare slot (8 KiB) on top for reads in "
                    "flight: footprint 88 KiB")
    blocks, kw, note = fit_store("log", 5 * 8192, 8192, segment_bytes=2 * 8192)
    assert (blocks, kw) == (5, {"segment_bytes": 2 * 8192, "spare_segments": 1})
    assert note == ("the cache holds 5 blocks (40 KiB); the log store adds 24 KiB on top (whole segments of 16 KiB, "
                    "1 spare): footprint 64 KiB")
    assert fit_store("log", 4 * 8192, 8192, segment_bytes=100)[1] == {"segment_bytes": 8192, "spare_segments": 1}
    with pytest.raises(SpecError, match="unknown block-store layout 'ring'"):
        make_store("ring", 4, 4096)


def test_capacity_within_by_hand():
    # slot: 10 slots less 3 spare; log: 10 slots in segments of 4 = 2 whole segments, 1 spare: 1 segment cached
    assert capacity_within("slot", 10 * 4096 + 5, 4096, spare_slots=3) == 7 * 4096
    assert capacity_within("slot", 10 * 4096, 4096, spare_slots=-3) == 10 * 4096
    assert capacity_within("slot", 2 * 4096, 4096, spare_slots=3) == 0
    assert capacity_within("log", 10 * 4096, 4096, segment_bytes=4 * 4096) == 4 * 4096
    assert capacity_within("log", 3 * 4096, 4096, segment_bytes=100) == 2 * 4096   # segments of one slot
    assert capacity_within("log", 3 * 4096, 4096, segment_bytes=4 * 4096) == 0
    assert capacity_within("log", 64 << 20, 4096) == 0 and capacity_within("log", 128 << 20, 4096) == 64 << 20


def test_spare_slots_edges():
    assert spare_slots_for(-1, MiB, MiB) == 0
    assert spare_slots_for(1, MiB, 64 * MiB) == 1                 # ceil(1/64) + 1 = 2, capped at the depth 1
    assert spare_slots_for(2, 4 * MiB, MiB) == 2                  # an I/O larger than a slot counts as one slot
    assert spare_slots_for(64, MiB, 64 * MiB) == 2                # ceil(64/64) + 1 exactly


def test_store_defaults():
    from kvbench.sim.blockstore import LogStore, SlotStore

    assert not SlotStore(1, 4096).trim_enabled and SlotStore(1, 4096).n_slots == 1
    d = LogStore(3, 4096)                                   # 64 MiB segments, one spare, no trim
    assert (d.segment_slots, d.n_segments, d.trim_enabled) == (16384, 2, False)
    assert fit_store("log", 1 << 30, 4096)[1] == {"segment_bytes": 64 << 20, "spare_segments": 1}
    assert not make_store("log", 3, 4096).trim_enabled
    # a segment that is not a whole number of slots holds the whole slots it can: 6000 B = 1 slot of 4 KiB
    assert capacity_within("log", 10 * 4096, 4096, segment_bytes=6000) == 9 * 4096
    assert LogStore(3, 4096, segment_bytes=9000).segment_slots == 2
