"""The miniature replay's key sample rate, by hand (kvbench.analysis.curves.miniature).

The trace: 400 one-block requests over blocks 1..400, then the same 400 again. Every second-pass reference has
LRU stack distance 400 (all 400 blocks since its last use, itself included), so the exact curve is 0 below 400
blocks and 400 / 800 = 0.5 from 400 on. Its knee (the point farthest above the chord from (1, 0) to (400, 1) on
normalised axes: h - C / 400) is 0 - 1/400 at one block and 1 - 1 = 0 at 400: 400 blocks. Blocks of 4,096 B fill
one 4,096-B slot each.
"""

from __future__ import annotations

import pytest

from kvbench.analysis.curves.miniature import choose_sample_rate, modelled_bytes
from kvbench.errors import SpecError

from tests.conftest import make_trace

SLOT = 4096


@pytest.fixture(scope="module")
def two_passes():
    keys = list(range(1, 401)) * 2
    return make_trace(list(range(len(keys))), [[k] for k in keys])


def test_modelled_bytes_by_hand():
    # 25 B on 10-B slots at rate 0.5: 2 whole slots (20 B) + half a slot of margin = 25 B, / 0.5 = 50 B; replay kv
    # floors 50 x 0.5 = 25 B to 20 B, the device's whole slots
    assert modelled_bytes(25, 0.5, 10) == 50
    assert modelled_bytes(1, 0.5, 10) == 10          # under one slot: the margin alone, 5 / 0.5
    assert modelled_bytes(0, 0.5, 10) == 0           # nothing to model
    assert modelled_bytes(100, 1.0, 10) == 100       # rate 1: the device itself


def test_a_store_at_the_knee_is_not_sampled(two_passes):
    c = choose_sample_rate(two_passes, block_bytes=SLOT, l3_bytes=400 * SLOT, l2_bytes=8 * SLOT)
    assert (c.rate, c.knee_blocks, c.knee_hit_ratio, c.distinct_blocks, c.store_blocks) == (1.0, 400.0, 0.5, 400, 400)
    assert c.reason.startswith("no key sampling") and (c.modelled_l3_bytes, c.modelled_l2_bytes) == (400 * SLOT, 8 * SLOT)


def test_a_store_at_half_the_knee_samples_half_the_keys(two_passes):
    c = choose_sample_rate(two_passes, block_bytes=SLOT, l3_bytes=200 * SLOT, l2_bytes=8 * SLOT)
    assert (c.rate, c.knee_blocks, c.store_blocks) == (0.5, 400.0, 200)
    # 200 slots + half a slot, / 0.5 = 401 slots; 8.5 / 0.5 = 17
    assert (c.modelled_l3_bytes, c.modelled_l2_bytes) == (401 * SLOT, 17 * SLOT)
    assert c.reason.startswith("key sample rate 0.5 = store 200 blocks / knee 400 blocks")
    assert "noisy" not in c.reason                   # 0.5 x 400 = 200 sampled blocks: exactly enough


def test_a_sample_of_fewer_than_200_blocks_says_it_is_noisy(two_passes):
    c = choose_sample_rate(two_passes, block_bytes=SLOT, l3_bytes=100 * SLOT, l2_bytes=8 * SLOT)
    assert c.rate == 0.25 and "only ~100 distinct blocks are sampled" in c.reason


def test_a_store_without_a_slot_is_refused(two_passes):
    with pytest.raises(SpecError, match="holds no 4,096-byte block slot"):
        choose_sample_rate(two_passes, block_bytes=SLOT, l3_bytes=SLOT - 1, l2_bytes=0)


def test_a_store_of_one_slot_is_a_store(two_passes):
    c = choose_sample_rate(two_passes, block_bytes=SLOT, l3_bytes=SLOT, l2_bytes=0)
    assert c.store_blocks == 1 and 0 < c.rate <= 1 / 400 and "noisy" in c.reason
