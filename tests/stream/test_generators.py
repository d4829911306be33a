"""Trace generators: seeded, Mooncake-valid, prefix-chained, and the kinds differ the way they claim."""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.errors import UsageError
from kvbench.stream.generators import KINDS, GenSpec, generate, override_params, write_trace
from kvbench.stream.stats import prefix_chaining, trace_stats
from kvbench.stream.traces import read_trace


def _read(tmp_path, recs, name="g.jsonl"):
    return read_trace(write_trace(recs, tmp_path / name))


def test_seeded_and_mooncake_valid(tmp_path):
    a = generate(GenSpec("chat", requests=300, seed=3))
    assert a == generate(GenSpec("chat", requests=300, seed=3))
    assert a != generate(GenSpec("chat", requests=300, seed=4))
    assert len(a) == 300 and set(a[0]) == {"timestamp", "input_length", "output_length", "hash_ids"}
    assert all(len(r["hash_ids"]) == -(-r["input_length"] // 512) for r in a)
    assert all(x["timestamp"] <= y["timestamp"] for x, y in zip(a, a[1:]))
    t = _read(tmp_path, a)
    assert t.fmt == "mooncake" and t.n_requests == 300
    # gzip output reads back the same
    g = read_trace(write_trace(a, tmp_path / "g.jsonl.gz"))
    assert np.array_equal(g.keys, t.keys)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_ids_are_prefix_chained(tmp_path, kind):
    t = _read(tmp_path, generate(GenSpec(kind, requests=200, seed=1, block_tokens=64)))
    chk = prefix_chaining(t)
    assert chk["prefix_chained"] and chk["repeated_ids_within_requests"] == 0


def test_kinds_order_by_reuse(tmp_path):
    reuse = {k: trace_stats(_read(tmp_path, generate(GenSpec(k, requests=400, seed=2)), f"{k}.jsonl"))
             ["infinite_cache_reuse"] for k in KINDS}
    assert reuse["agent"] > 0.9 and reuse["agent"] > reuse["docqa"] > reuse["chat"] > reuse["qa"]
    assert reuse["qa"] < 0.4


def test_followup_turns_extend_the_previous_prompt(tmp_path):
    recs = generate(GenSpec("agent", requests=50, seed=0))
    ids = {tuple(r["hash_ids"]) for r in recs}
    # most requests share their first full blocks with an earlier, shorter prompt of the same session
    extended = sum(any(len(o) < len(r["hash_ids"]) and tuple(r["hash_ids"][:len(o) - 1]) == o[:-1] for o in ids)
                   for r in recs)
    assert extended > 25


def test_arrivals_rate_and_burstiness(tmp_path):
    po = _read(tmp_path, generate(GenSpec("qa", requests=4000, rate=5.0, seed=1)), "p.jsonl")
    bu = _read(tmp_path, generate(GenSpec("qa", requests=4000, rate=5.0, seed=1, arrival="bursty",
                                          burstiness=4.0)), "b.jsonl")
    sp, sb = trace_stats(po), trace_stats(bu)
    assert sp["arrival_rate_per_s"] == pytest.approx(5.0, rel=0.1)
    assert sp["interarrival_s"]["cv"] == pytest.approx(1.0, abs=0.15)      # Poisson: CV 1 (ms rounding)
    assert sb["interarrival_s"]["cv"] > 2.5                                  # bursty: CV ~4


def test_bad_specs():
    with pytest.raises(UsageError, match="unknown trace kind"):
        generate(GenSpec("video"))
    with pytest.raises(UsageError, match="rate must be > 0"):
        generate(GenSpec("chat", rate=0))
    with pytest.raises(UsageError, match="burstiness"):
        generate(GenSpec("chat", arrival="bursty", burstiness=0.5))
    with pytest.raises(UsageError, match="unknown generator parameter"):
        override_params("chat", turns=3)
    assert override_params("chat", turns_mean=9).turns_mean == 9


def _keys_by_numpy(prompt, system, system_len, shared_len, doc, session, bt, salt):
    """The generator's block keys as array operations (the form the compiled kernel replaced): block i of a
    request of p tokens ends at (i + 1) * bt; kind 1 system prompt, 2 shared document, 3 history, 4 new tokens."""
    from kvbench.stream.chain import mix

    nb = -(-prompt.astype(np.int64) // bt)
    offsets = np.zeros(len(prompt) + 1, dtype=np.int64)
    np.cumsum(nb, out=offsets[1:])
    r = np.repeat(np.arange(len(prompt)), nb)
    i = np.arange(int(offsets[-1]), dtype=np.int64) - offsets[:-1][r]
    end = (i + 1) * bt
    p = prompt[r].astype(np.int64)
    s = system[r].astype(np.int64)
    kind = np.where(end <= system_len[r], 1, np.where(end <= shared_len[r], 2, np.where(end <= p, 3, 4)))
    owner = np.where(kind == 1, s, np.where(kind == 2, s * np.int64(1 << 32) + doc[r], session[r]))
    k = mix(np.full(i.size, salt, dtype=np.uint64) ^ kind.astype(np.uint64), owner.astype(np.uint64))
    k = mix(k, i.astype(np.uint64))
    k = mix(k, np.where(kind == 4, p, 0).astype(np.uint64))
    return k & np.uint64((1 << 63) - 1), offsets


@pytest.mark.parametrize("bt", [1, 16, 512])
def test_compiled_block_keys_equal_the_array_form(bt):
    """The compiled key kernel against the array form, on requests at every boundary: empty prompts, prompts of
    exactly k blocks, system prompt and document ending inside, at and past the prompt, large ids."""
    from kvbench.stream.synth import KEY_MASK
    from kvbench.stream.synth_kernel import block_keys

    rng = np.random.default_rng(bt)
    n = 400
    prompt = rng.integers(0, 40 * bt, n).astype(np.int32)
    prompt[:5] = [0, bt, 2 * bt, bt - 1 if bt > 1 else 1, 3 * bt + 1]
    system_len = rng.integers(0, 20 * bt, n).astype(np.int32)
    system_len[5:10] = prompt[5:10]                         # the system prompt is the whole prompt
    shared_len = (system_len + rng.integers(0, 20 * bt, n)).astype(np.int32)
    shared_len[10:15] = system_len[10:15]                   # no document
    system = rng.integers(0, 2**31 - 1, n).astype(np.int32)
    doc = rng.integers(0, 2**31 - 1, n).astype(np.int32)
    session = rng.integers(0, 2**62, n).astype(np.int64)
    salt = np.uint64(0xFFFF_FFFF_FFFF_FFF1)
    keys, offsets = block_keys(prompt, system, system_len, shared_len, doc, session, bt, salt, KEY_MASK)
    want_keys, want_offsets = _keys_by_numpy(prompt, system, system_len, shared_len, doc, session, bt, salt)
    assert np.array_equal(offsets, want_offsets)
    assert keys.dtype == np.uint64 and np.array_equal(keys, want_keys)
