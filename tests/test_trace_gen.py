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
