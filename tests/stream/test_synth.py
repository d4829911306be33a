"""The workload model's generator (kvbench/stream/synth.py) at the edges the model tests do not reach: batch
cuts by request count and by block references, the stream's size estimate, the seed's salt, samplers of a
degenerate distribution. (The model's statistics: tests/stream/test_workload.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from kvbench.stream import synth
from kvbench.stream.synth import Generator
from kvbench.stream.workload import WorkloadModel


def _gen(**kw):
    return Generator(WorkloadModel(), duration_s=kw.pop("duration_s", 120.0), rate=kw.pop("rate", 5.0), **kw)


def _cat(batches):
    bs = list(batches)
    return bs, np.concatenate([b.t0 + b.timestamp_s for b in bs]), np.concatenate([b.keys for b in bs])


def test_batches_hold_at_most_the_requests_asked_and_join_into_the_same_stream():
    whole, t, k = _cat(_gen(seed=4).batches())
    assert len(whole) == 1 and len(t) > 100
    parts, t3, k3 = _cat(_gen(seed=4).batches(batch_requests=3))
    assert max(b.n_requests for b in parts) == 3 and len(parts) == -(-len(t) // 3)
    assert np.array_equal(t3, t) and np.array_equal(k3, k)


def test_batches_are_cut_at_the_block_reference_limit(monkeypatch):
    _, t, k = _cat(_gen(seed=4).batches())
    monkeypatch.setattr(synth, "BATCH_REFS", 40)
    parts, t2, k2 = _cat(_gen(seed=4).batches())
    assert np.array_equal(t2, t) and np.array_equal(k2, k)
    for b in parts:      # at most 40 references, unless one request alone holds more
        assert b.keys.size <= 40 or b.n_requests == 1
    assert len(parts) >= k.size // 40


def test_the_stream_size_estimate_is_75_bytes_a_line_and_11_an_id():
    """probe = (requests per session, blocks per request): 5 requests/s x 120 s x (75 + 11 x 4) bytes."""
    g = _gen(probe=(3.0, 4.0))
    assert g.requests_per_session == 3.0 and g.blocks_per_request == 4.0
    assert g.expected_requests == 600.0 and g.expected_bytes == 600.0 * (75 + 11 * 4.0)
    assert _gen(probe=(0.5, 4.0)).requests_per_session == 1.0      # a session makes at least its first request


def test_the_seed_is_the_key_salt_and_defaults_to_zero():
    assert _gen().seed == 0 and _gen().salt == np.uint64(0)
    assert _gen(seed=5).salt == np.uint64(5)


def test_degenerate_samplers_return_the_value_without_a_draw():
    """sigma 0 (lognormal) and mean 1 (geometric counts >= 1) are constants: exact, and no random number is used
    (the next draw is the generator's first)."""
    first = np.random.default_rng(7).random()
    rng = np.random.default_rng(7)
    assert synth._lognormal_median(rng, 5.0, 0.0, 3).tolist() == [5.0, 5.0, 5.0]
    assert synth._geometric(rng, 1.0, 3).tolist() == [1, 1, 1]
    assert rng.random() == first


def test_one_window_emits_every_request_its_sessions_make():
    """120 s at 5 requests/s is one window: the stream is the sessions drawn for it, expanded, in time order -
    none left out (the first included) and none added."""
    g = _gen(seed=2)
    rng = np.random.default_rng([2, 3])                       # the stream's generator, as batches() seeds it
    starts = g._session_starts(rng, {"carry": np.zeros(0), "last": 0.0}, g.duration_s)
    rows = g._expand(rng, starts, np.arange(starts.size, dtype=np.int64), int(round(g.duration_s * 1000.0)))
    want_ms = np.sort(rows.t_ms, kind="stable")
    for size in (1, 7, synth.WINDOW_REQUESTS):
        _, t, _ = _cat(_gen(seed=2).batches(batch_requests=size))
        assert np.array_equal(np.rint(t * 1000.0).astype(np.int64), want_ms)
