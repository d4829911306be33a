"""Engram hashing and presets: hand-computed indices for a tiny vocabulary, primes, multipliers, rows per token."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import SpecError
from kvbench.stream.engram import (EngramHasher, EngramSpec, engram_from_dict, is_prime, layer_multipliers,
                                   load_engram, table_primes)


def tiny(layers=(0,), rows=(10, 12), pad_id=0) -> EngramSpec:
    return EngramSpec(name="tiny", layer_ids=tuple(layers), max_ngram=3, heads_per_order=2, rows_per_head=rows,
                      dims_per_head=8, dtype="bf16", pad_id=pad_id)


def test_is_prime_matches_sieve():
    n = 20000
    sieve = np.ones(n, dtype=bool)
    sieve[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = False
    assert [i for i in range(n) if is_prime(i)] == list(np.flatnonzero(sieve))
    assert is_prime(2262401) == bool(all(2262401 % d for d in range(2, 1505)))


def test_primes_distinct_and_searched_upward():
    # order 2 target 10: next primes after 9 -> 11, 13; order 3 target 12: 13 is taken -> 17, 19
    assert table_primes(tiny()).tolist() == [[[11, 13], [17, 19]]]
    # a second layer may not reuse any prime of the first
    assert table_primes(tiny(layers=(0, 1))).tolist() == [[[11, 13], [17, 19]], [[23, 29], [31, 37]]]


def test_hash_indices_hand_computed():
    h = EngramHasher.build(tiny(), vocab_size=10, pad_id=0, multipliers=[[3, 5, 7]])
    # tables: [11, 13] (order 2), [17, 19] (order 3) -> first rows 0, 11, 24, 41
    assert h.base.tolist() == [[0, 11, 24, 41]]
    rows = h.rows(np.array([4, 7, 2]))
    # t=0: mix2 = 4*3 ^ pad*5 = 12 -> 12%11=1, 12%13=12; mix3 = 12 ^ pad*7 = 12 -> 12, 12
    # t=1: mix2 = 7*3 ^ 4*5 = 21 ^ 20 = 1 -> 1, 1; mix3 = 1 ^ 0 = 1 -> 1, 1
    # t=2: mix2 = 2*3 ^ 7*5 = 6 ^ 35 = 37 -> 4, 11; mix3 = 37 ^ 4*7 = 37 ^ 28 = 57 -> 57%17=6, 57%19=0
    assert rows.tolist() == [[[1, 11 + 12, 24 + 12, 41 + 12]],
                             [[1, 11 + 1, 24 + 1, 41 + 1]],
                             [[4, 11 + 11, 24 + 6, 41 + 0]]]


def test_padding_uses_pad_id_per_sequence():
    h = EngramHasher.build(tiny(), vocab_size=10, pad_id=3, multipliers=[[3, 5, 7]])
    r = h.rows(np.array([4]))
    # mix2 = 12 ^ 3*5 = 12 ^ 15 = 3 -> 3, 3; mix3 = 3 ^ 3*7 = 3 ^ 21 = 22 -> 22%17=5, 22%19=3
    assert r.tolist() == [[[3, 11 + 3, 24 + 5, 41 + 3]]]
    # a [S, T] batch pads each sequence at its own start: equal to hashing each sequence alone
    seqs = np.array([[4, 7, 2, 9], [1, 1, 5, 0]])
    both = h.rows(seqs)
    assert np.array_equal(both[0], h.rows(seqs[0])) and np.array_equal(both[1], h.rows(seqs[1]))
    assert not np.array_equal(both[1], h.rows(seqs.ravel())[4:])   # not a continuation of sequence 0


def test_multipliers_follow_the_reference_rule():
    m = layer_multipliers((1, 15), 3, 99092, seed=0)
    assert m.shape == (2, 3) and np.all(m % 2 == 1) and np.all(m > 0)
    half = (np.iinfo(np.int64).max // 99092) // 2
    g = np.random.default_rng(0 + 10007 * 15)
    assert m[1].tolist() == (g.integers(0, half, size=3, dtype=np.int64) * 2 + 1).tolist()
    assert np.all(m < 2 * half + 1)          # token * multiplier cannot overflow int64
    with pytest.raises(SpecError):
        EngramHasher.build(tiny(), 10, 0, multipliers=[[2, 5, 7]])


def test_presets_rows_per_token_and_sizes():
    e27 = load_engram("engram-27b")
    assert e27.rows_per_token == 32 and e27.row_bytes == 160 and e27.bytes_per_token == 5120
    h27 = EngramHasher.build(e27, 99092, 2)
    assert len(set(h27.primes.ravel().tolist())) == 32                 # distinct primes per (layer, order, head)
    assert np.all(h27.primes >= 2262400) and np.all(h27.primes < 2262400 + 2000)
    assert 5.7e9 < h27.total_rows * e27.dims_per_head < 5.85e9       # paper: 5.7B parameters
    e40 = load_engram("engram-40b")
    assert e40.rows_per_token == 32
    assert 18.4e9 < EngramHasher.build(e40, 99092, 2).total_rows * 80 < 18.6e9
    v41 = load_engram("deepseek-v4.1-engram")
    assert v41.rows_per_token == 48 and v41.row_bytes == 264 and v41.bytes_per_token == 12672


def test_rows_fall_inside_their_head_tables():
    spec = load_engram("engram-27b")
    h = EngramHasher.build(spec, 99092, 2)
    ids = np.random.default_rng(0).integers(0, 99092, size=(4, 512))
    r = h.rows(ids)
    sizes = h.table_sizes
    assert r.shape == (4, 512, 2, 16)
    assert np.all(r >= h.base) and np.all(r < h.base + sizes)
    with pytest.raises(SpecError):
        h.rows(np.array([99092]))


def test_bad_presets(tmp_path):
    with pytest.raises(SpecError, match="unknown engram preset 'nope'"):
        load_engram("nope")
    with pytest.raises(SpecError, match="unknown engram field"):
        engram_from_dict({"layer_ids": [1], "max_ngram": 3, "heads_per_order": 8, "rows_per_head": 10,
                          "dims_per_head": 8, "colour": "red"}, name="x", path="x.toml")
    with pytest.raises(SpecError, match="rows_per_head has 1 entries for 2 orders"):
        engram_from_dict({"layer_ids": [1], "max_ngram": 3, "heads_per_order": 8, "rows_per_head": [10],
                          "dims_per_head": 8}, name="x", path="x.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("layer_ids = [1]\nmax_ngram = 1\nheads_per_order = 8\nrows_per_head = []\ndims_per_head = 8\n")
    with pytest.raises(SpecError, match="max_ngram must be >= 2"):
        load_engram(str(bad))


def test_scaled_spec():
    s = load_engram("engram-27b").scaled(0.01)
    assert s.rows_per_head == (22624, 22624) and s.scale == pytest.approx(0.01) and s.rows_per_token == 32
    with pytest.raises(SpecError):
        s.scaled(0)


def test_deepseek_v41_tables_match_the_published_row_counts():
    # engram_num_embeddings of DeepSeek-V4.1-Flash's config.json: 24 head tables per layer targeting 16M rows each
    v41 = load_engram("deepseek-v4.1-engram")
    assert v41.layer_ids == (1, 14) and v41.rows_per_token == 2 * 3 * 8
    sizes = EngramHasher.build(v41, 99092, 2).table_sizes.sum(axis=1)
    assert sizes.tolist() == [384_006_168, 384_016_682]
