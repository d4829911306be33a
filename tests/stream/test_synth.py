"""The workload model's generator (kvbench/stream/synth.py) at the edges the model tests do not reach: batch
cuts by request count and by block references, the stream's size estimate, the seed's salt, samplers of a
degenerate distribution. (The model's statistics: tests/stream/test_workload.py.)"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kvbench.stream import synth
from kvbench.stream.synth import Generator
from kvbench.stream.workload import Arrivals, WorkloadModel


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
    starts = g._session_starts(rng, g.arrival_state(), g.duration_s)
    rows = g._expand(rng, starts, np.arange(starts.size, dtype=np.int64), int(round(g.duration_s * 1000.0)))
    want_ms = np.sort(rows.t_ms, kind="stable")
    for size in (1, 7, synth.WINDOW_REQUESTS):
        _, t, _ = _cat(_gen(seed=2).batches(batch_requests=size))
        assert np.array_equal(np.rint(t * 1000.0).astype(np.int64), want_ms)


def test_gen_duration_is_the_stated_one_else_the_checked_one_else_a_day():
    from kvbench.stream.synth import gen_duration, parse_gen
    from kvbench.stream.workload import Calibration

    checked = replace(WorkloadModel(), calibration=Calibration(gen_duration_s=1234.0))
    assert parse_gen("gen:m.toml").duration_s is None                 # unstated until a model is read
    assert gen_duration(None, checked) == 1234.0
    assert gen_duration(60.0, checked) == 60.0
    assert gen_duration(None, WorkloadModel()) == 86_400.0             # no calibration
    assert gen_duration(None, replace(WorkloadModel(), calibration=Calibration())) == 86_400.0   # none checked


# --- mutation survivors (issue 34 part 4, second pass) ----------------------------------------------------------
import math  # noqa: E402

from kvbench.stream.workload import Arrivals, Prompts, Sessions  # noqa: E402


def _one_turn(**prompts):
    """Sessions of one request, fixed lengths (sigma 0: no draws), no returns; 64-token blocks."""
    return WorkloadModel(block_tokens=64, sessions=Sessions(turns_mean=1.0, think_sigma=0.0),
                         prompts=Prompts(**{"system_probability": 0.0, "first_user_tokens": 100.0,
                                            "first_user_sigma": 0.0, "user_sigma": 0.0, "output_tokens": 10.0,
                                            "output_sigma": 0.0, **prompts}))


def test_a_system_prompt_with_its_own_first_messages_draws_them():
    """Two prompts (64 and 128 tokens, equal weights), every session using one: prompt 0's sessions write their
    own first message (300 tokens, sigma 0), prompt 1's the pooled one (100): prompts of 364 and 228 tokens."""
    m = _one_turn(system_probability=1.0, system_prompts=2, system_prompt_tokens=(64.0, 128.0),
                  system_prompt_weights=(1.0, 1.0), system_user_tokens=(300.0, 0.0), system_user_sigma=(0.0, 0.0))
    g = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rows = g._expand(np.random.default_rng(4), np.zeros(40), np.arange(40, dtype=np.int64), None)
    assert set(rows.system.tolist()) == {0, 1}
    assert rows.prompt[rows.system == 0].tolist() == [364] * int(np.sum(rows.system == 0))
    assert rows.prompt[rows.system == 1].tolist() == [228] * int(np.sum(rows.system == 1))
    both = replace(m, prompts=replace(m.prompts, system_user_tokens=(300.0, 50.0), system_user_sigma=(0.0, 0.0)))
    rows = Generator(both, duration_s=60.0, seed=0, probe=(1.0, 2.0))._expand(
        np.random.default_rng(4), np.zeros(40), np.arange(40, dtype=np.int64), None)
    assert sorted(set(rows.prompt.tolist())) == [178, 364]


def test_a_batch_holds_65536_requests_by_default():
    """40 s at 2,000 requests/s is one window of ~80,000 requests (a window is 65,536 / rate, at least 60 s):
    the default batch holds 65,536 of them."""
    g = Generator(_one_turn(), duration_s=40.0, rate=2000.0, seed=1, probe=(1.0, 2.0))
    b = next(g.batches())
    assert b.n_requests == 65_536 == synth.WINDOW_REQUESTS


def test_session_ids_run_on_across_windows(monkeypatch):
    """Windows of 8 requests (8 / 2 per s = 4 s, raised to the 60 s floor) over 600 s: 10 windows; the sessions
    of each are numbered on from the last window's, 0, 1, 2, ... (their keys: own blocks, never another's)."""
    monkeypatch.setattr(synth, "WINDOW_REQUESTS", 8)
    uids = []
    expand = Generator._expand

    def spy(self, rng, start_s, uid, horizon_ms):
        uids.append(uid.copy())
        return expand(self, rng, start_s, uid, horizon_ms)
    monkeypatch.setattr(Generator, "_expand", spy)
    g = Generator(_one_turn(), duration_s=600.0, rate=2.0, seed=3, probe=(1.0, 2.0))
    bs = list(g.batches())
    assert len(uids) == 10 and min(u.size for u in uids) > 0
    allu = np.concatenate(uids)
    assert allu.tolist() == list(range(allu.size))
    keys = np.concatenate([b.keys for b in bs])
    assert np.unique(keys).size == keys.size == 2 * sum(b.n_requests for b in bs)   # 100 tokens: 2 own blocks


def test_a_certain_system_prompt_and_no_returns_draw_nothing_but_the_prompt_choice():
    """One system prompt taken with probability 1, no returns, one turn, fixed lengths: expanding 10 sessions
    draws only the prompt choice, one stratified set of 10 (a permutation of the strata, then 10 uniforms inside
    them), so the generator's next draw is the one after those."""
    m = _one_turn(system_probability=1.0, system_prompts=1, system_tokens=128.0, system_sigma=0.0)
    g = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rng = np.random.default_rng(9)
    rows = g._expand(rng, np.zeros(10), np.arange(10, dtype=np.int64), None)
    assert rows.system.tolist() == [0] * 10 and rows.prompt.tolist() == [228] * 10
    ref = np.random.default_rng(9)
    ref.permutation(10), ref.random(10)
    assert rng.random() == ref.random()


def test_a_key_sample_of_rate_one_is_the_whole_stream(tmp_path):
    """gen:...,sample=1 streams the unsampled requests as they are (not marked key-sampled)."""
    from kvbench.stream.workload import to_toml

    p = tmp_path / "m.toml"
    p.write_text(to_toml(_one_turn()))
    whole = list(synth.iter_generated(f"gen:{p},duration=60,rate=2"))
    one = list(synth.iter_generated(f"gen:{p},duration=60,rate=2,sample=1"))
    assert len(one) == len(whole) == 1 and one[0].extras == whole[0].extras == {}
    assert np.array_equal(one[0].keys, whole[0].keys) and one[0].n_requests > 60


def _window(seed_rng, cv: float, n: int, k: float) -> np.ndarray:
    """One rate window by hand: n unit-mean gaps (exponential, or lognormal of CV ``cv``: sigma^2 = ln(1 + cv^2),
    mu = -sigma^2 / 2), their running sums scaled so the last is ``k``."""
    s2 = math.log(1.0 + cv * cv)
    gaps = seed_rng.exponential(1.0, n) if cv == 1.0 else seed_rng.lognormal(-s2 / 2.0, math.sqrt(s2), n)
    ops = np.cumsum(gaps)
    return ops * (k / ops[-1])


@pytest.mark.parametrize("cv", [1.0, 2.0])
def test_session_starts_are_the_running_sums_of_the_gaps_across_calls(cv):
    """A flat rate of 4 sessions a second (one request each), a model not fitted: operational time is 4 x t and
    the rate window is a day, 345,600 sessions. The starts are the running sums of the window's 345,600 gaps
    scaled to sum to 345,600, however the draws are cut: drawn to 50 s, then on to 100 s (the state carries
    the drawn starts past 50 s), they are the sums below 400, / 4."""
    m = WorkloadModel(arrivals=Arrivals(rate=4.0, burstiness=cv))
    g = Generator(m, duration_s=100.0, seed=0, probe=(1.0, 2.0))
    assert g.hold_sessions == 345_600.0
    rng = np.random.default_rng(11)
    state = g.arrival_state()
    got = np.concatenate([g._session_starts(rng, state, 50.0), g._session_starts(rng, state, 100.0)])
    ops = _window(np.random.default_rng(11), cv, 345_600, 345_600.0)
    want = ops[ops < 400.0] / 4.0
    assert got.size == want.size > 100 and np.allclose(got, want, rtol=0, atol=1e-9)


@pytest.mark.parametrize("cv", [1.0, 6.9])
def test_each_rate_window_of_a_fitted_model_holds_the_sessions_its_rate_states(cv):
    """A model fitted on 1,000 s at 2 sessions a second (one request each): its rate window is 2,000 sessions,
    1,000 s. Over 10 windows the starts are the windows drawn one after the other (each the running sums of
    2,000 gaps scaled to end at its end), so every 1,000 s holds exactly 2,000 sessions, the last one at its
    end: at CV 6.9 a renewal process left free would hold 2,000 +- 310 (6.9 x sqrt(2,000))."""
    m = WorkloadModel(arrivals=Arrivals(rate=2.0, burstiness=cv), fitted_span_s=1000.0)
    g = Generator(m, duration_s=10_000.0, seed=0, probe=(1.0, 2.0))
    assert g.hold_sessions == 2000.0
    got = g._session_starts(np.random.default_rng(3), g.arrival_state(), 10_000.0 + 1.0)
    oracle = np.random.default_rng(3)
    want = np.concatenate([b * 2000.0 + _window(oracle, cv, 2000, 2000.0) for b in range(10)]) / 2.0
    assert got.size == want.size == 20_000 and np.allclose(got, want, rtol=0, atol=1e-6)
    counts = np.bincount(np.ceil(got / 1000.0).astype(np.int64) - 1)
    assert counts.tolist() == [2000] * 10
    assert np.allclose(got[1999::2000], np.arange(1000.0, 10_001.0, 1000.0), rtol=0, atol=1e-6)


def test_a_rate_window_of_a_fractional_count_keeps_the_running_count_rounded():
    """A window of 1,500.5 sessions: window b holds round((b+1) x 1,500.5) - round(b x 1,500.5) sessions, so
    the first b windows hold round(b x 1,500.5) (half to even): 1,500, 3,001, 4,502 (4,501.5 rounds to 4,502)."""
    m = WorkloadModel(arrivals=Arrivals(rate=1.5005), fitted_span_s=1000.0)
    g = Generator(m, duration_s=3000.0, seed=0, probe=(1.0, 2.0))
    assert g.hold_sessions == pytest.approx(1500.5)
    got = g._session_starts(np.random.default_rng(0), g.arrival_state(), 3001.0)
    assert [int(np.count_nonzero(got <= t + 1e-6)) for t in (1000.0, 2000.0, 3000.0)] == [1500, 3001, 4502]


@pytest.mark.parametrize("rate, span, held", [(0.01, 1000.0, 1024.0), (1000.0, 86_400.0 * 7, float(1 << 20)),
                                              (0.5, 0.0, 43_200.0)])
def test_the_rate_window_holds_1024_sessions_at_least_and_2_to_the_20_at_most(rate, span, held):
    """The window is the fitted span's sessions (a day's when not fitted), at least 1,024 (a few sessions a
    window would space them regularly) and at most 2^20 (drawn at once)."""
    m = WorkloadModel(arrivals=Arrivals(rate=rate), fitted_span_s=span)
    assert Generator(m, duration_s=10.0, seed=0, probe=(1.0, 2.0)).hold_sessions == held


def test_sessions_start_up_to_the_end_of_a_span_that_is_not_whole_minutes():
    """100 s at 10 sessions a second: the intensity grid (a point a minute) reaches past 100 s, so sessions start
    in the last 40 s too (about 400 of them; the last within a second of the end)."""
    g = Generator(WorkloadModel(arrivals=Arrivals(rate=10.0)), duration_s=100.0, seed=1, probe=(1.0, 2.0))
    starts = g._session_starts(np.random.default_rng(1), g.arrival_state(), 100.0)
    assert starts.max() > 99.0 and np.count_nonzero(starts >= 60.0) > 300


def test_a_sessions_shared_prefix_is_its_system_prompt_and_its_own_document():
    """Two documents of different drawn lengths, every session attaching one, one system prompt of 128 tokens
    taken by every session: each session's shared prefix is 128 + the length of its own document."""
    m = _one_turn(system_probability=1.0, system_prompts=1, system_tokens=128.0, system_sigma=0.0,
                  document_probability=1.0, documents=2, document_tokens=500.0, document_sigma=1.0)
    g = Generator(m, duration_s=60.0, seed=3, probe=(1.0, 2.0))
    assert g.doc_len.size == 2 and g.doc_len[0] != g.doc_len[1]
    rows = g._expand(np.random.default_rng(4), np.zeros(200), np.arange(200, dtype=np.int64), None)
    assert set(rows.doc.tolist()) == {0, 1}
    assert rows.shared_len.tolist() == (128 + g.doc_len[rows.doc]).tolist()


def test_sampler_edges_by_hand():
    """A lognormal mean's draws are floored at 0 unless told (a 0.4-token mean rounds to 0); a median of 0.5 s
    is a median (only <= 0 is none)."""
    rng = np.random.default_rng(1)
    assert synth._lognormal_mean(rng, 0.4, 0.0, 3).tolist() == [0, 0, 0]
    assert synth._lognormal_mean(rng, 0.4, 0.0, 3, lo=1).tolist() == [1, 1, 1]
    assert synth._lognormal_median(rng, 0.5, 0.0, 2).tolist() == [0.5, 0.5]
    assert synth._lognormal_median(rng, 0.0, 1.0, 2).tolist() == [0.0, 0.0]


def test_weekend_intensity_of_factor_two_by_hand():
    """Weekends at twice the weekday rate, from Monday 00:00: mean 1 over the week, so weekdays 7/9 and weekends
    14/9."""
    m = WorkloadModel(arrivals=Arrivals(weekend_factor=2.0))
    got = synth.intensity(m, np.array([0.0, 4.5 * 86_400.0, 5.5 * 86_400.0, 6.5 * 86_400.0]))
    assert got.tolist() == pytest.approx([7 / 9, 7 / 9, 14 / 9, 14 / 9])


def test_a_stream_of_exactly_the_most_requests_is_allowed():
    m = WorkloadModel()
    g = Generator(m, duration_s=1e5, rate=1e5, probe=(1.0, 2.0))
    assert g.expected_requests == synth.MAX_REQUESTS
    with pytest.raises(Exception, match="kvbench generates at most"):
        Generator(m, duration_s=1e5 + 1.0, rate=1e5, probe=(1.0, 2.0))


def test_a_request_at_the_horizon_is_past_the_stream():
    """One-request sessions starting at 59.999 s and 60 s of a 60 s stream (horizon 60,000 ms): the first is
    kept, the second is not."""
    g = Generator(_one_turn(), duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rows = g._expand(np.random.default_rng(0), np.array([59.999, 60.0]), np.arange(2, dtype=np.int64), 60_000)
    assert rows.t_ms.tolist() == [59_999]


def test_the_first_session_starts_one_gap_after_zero():
    """One-request sessions at a flat 4 a second over 100 s: the stream's requests are at the running sums of
    the stream generator's first gaps (its first draws, a day's rate window of them scaled to sum to it) / 4,
    in ms."""
    g = Generator(_one_turn(), duration_s=100.0, rate=4.0, seed=5, probe=(1.0, 2.0))
    b = list(g.batches())
    t_ms = np.rint(np.concatenate([x.t0 + x.timestamp_s for x in b]) * 1000.0).astype(np.int64)
    ops = _window(np.random.default_rng([5, 3]), 1.0, 345_600, 345_600.0)    # a day's window at 4 a second
    assert t_ms.tolist() == np.rint(ops[ops < 400.0] / 4.0 * 1000.0).astype(np.int64).tolist()


def test_is_gen_only_for_a_gen_argument():
    assert synth.is_gen("gen:chat") and not synth.is_gen("trace.jsonl") and not synth.is_gen(None)


def test_a_default_batch_holds_at_most_2_to_the_22_references():
    """One-request sessions of 2,048 x 64 + 10 tokens (2,049 blocks of 64; the context limit raised to 2^20) at 50
    a second for 50 s: about 2,500 requests, over the 4,194,304 references a batch holds, so the first batch is
    cut at 4,194,304 // 2,049 = 2,047 requests."""
    from dataclasses import replace

    m = _one_turn(first_user_tokens=2048 * 64 + 10.0)
    m = replace(m, sessions=replace(m.sessions, max_context_tokens=1 << 20))
    b = next(Generator(m, duration_s=50.0, rate=50.0, seed=1, probe=(1.0, 2049.0)).batches())
    assert b.n_requests == 2047 and b.keys.size == 2047 * 2049 <= 1 << 22


def test_any_positive_finite_duration_is_a_stream():
    assert Generator(WorkloadModel(), duration_s=0.5, probe=(1.0, 2.0)).duration_s == 0.5
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(Exception, match="duration must be > 0 s"):
            Generator(WorkloadModel(), duration_s=bad, probe=(1.0, 2.0))


def test_a_session_without_a_system_prompt_is_its_own_text_only():
    g = Generator(_one_turn(), duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rows = g._expand(np.random.default_rng(2), np.zeros(5), np.arange(5, dtype=np.int64), None)
    assert rows.system.tolist() == [-1] * 5 and rows.system_len.tolist() == [0] * 5
    assert rows.shared_len.tolist() == [0] * 5 and rows.prompt.tolist() == [100] * 5


def test_a_system_prompts_own_first_messages_have_its_mean():
    """A prompt's own first-message length: lognormal of mean 1,000 tokens and sigma 1 (mu = ln 1000 - 1/2):
    20,000 sessions average 1,000 within 4% (the draws' sd is 1,000 sqrt(e - 1) = 1,311: 0.9% for the mean)."""
    m = _one_turn(system_probability=1.0, system_prompts=1, system_tokens=128.0, system_sigma=0.0,
                  system_user_tokens=(1000.0,), system_user_sigma=(1.0,))
    g = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rows = g._expand(np.random.default_rng(3), np.zeros(20_000), np.arange(20_000, dtype=np.int64), None)
    own = rows.prompt - 128
    assert own.mean() == pytest.approx(1000.0, rel=0.04) and own.min() >= 1


def test_a_batch_is_cut_before_the_reference_limit_one_request_at_least(monkeypatch):
    """Two-block requests: a limit of 3 references cuts after each request (2 + 2 > 3); a limit of 1, which no
    request fits, still emits one request a batch."""
    for limit in (3, 1):
        monkeypatch.setattr(synth, "BATCH_REFS", limit)
        bs = list(Generator(_one_turn(), duration_s=30.0, rate=2.0, seed=1, probe=(1.0, 2.0)).batches())
        assert len(bs) > 20 and all(b.n_requests == 1 and b.keys.size == 2 for b in bs)


def test_gen_meta_states_the_models_rate_unless_given_and_write_stream_its_span(tmp_path):
    m = WorkloadModel(arrivals=Arrivals(rate=3.0))
    assert synth.gen_meta(synth.parse_gen("gen:m.toml"), m)["rate"] == 3.0
    assert synth.gen_meta(synth.parse_gen("gen:m.toml,rate=5"), m)["rate"] == 5.0
    bs = list(Generator(_one_turn(), duration_s=30.0, rate=2.0, seed=1, probe=(1.0, 2.0)).batches(batch_requests=7))
    out = synth.write_stream(bs, tmp_path / "g.jsonl")
    last = float(np.rint(bs[-1].timestamp_s[-1] * 1000.0)) / 1000.0
    assert out["requests"] == sum(b.n_requests for b in bs) and out["span_s"] == last > 25.0


def test_prompt_less_sessions_and_each_prompts_sessions_draw_their_own_quantiles():
    """Half the sessions prompt-less, two prompts (64 and 128 tokens): prompt-less sessions draw bare_user_quantiles
    (500, 500: every draw 500 tokens), prompt 0's sessions their row (300, 300): 364; prompt 1's row is zeros: its
    system_user_tokens (50, sigma 0): 178, or without them the pooled first message (100): 228. A row (0, 640)
    draws uniformly: 4,000 sessions average 64 + 320 within 20 (the draws' sd is 640 / sqrt 12 = 185)."""
    m = _one_turn(system_probability=0.5, system_prompts=2, system_prompt_tokens=(64.0, 128.0),
                  system_prompt_weights=(1.0, 1.0), system_user_tokens=(0.0, 50.0), system_user_sigma=(0.0, 0.0),
                  system_user_quantiles=(300.0, 300.0, 0.0, 0.0), bare_user_quantiles=(500.0, 500.0))

    def rows_of(model, n=60):
        return Generator(model, duration_s=60.0, seed=0, probe=(1.0, 2.0))._expand(
            np.random.default_rng(4), np.zeros(n), np.arange(n, dtype=np.int64), None)
    rows = rows_of(m)
    assert set(rows.system.tolist()) == {-1, 0, 1}
    for k, want in ((-1, 500), (0, 364), (1, 178)):
        assert rows.prompt[rows.system == k].tolist() == [want] * int(np.sum(rows.system == k))
    pooled = rows_of(replace(m, prompts=replace(m.prompts, system_user_tokens=(), system_user_sigma=())))
    assert set(pooled.prompt[pooled.system == 1].tolist()) == {228}
    no_bare = rows_of(replace(m, prompts=replace(m.prompts, bare_user_quantiles=())))
    assert set(no_bare.prompt[no_bare.system < 0].tolist()) == {100}
    wide = rows_of(replace(m, prompts=replace(m.prompts, system_user_quantiles=(0.0, 640.0, 0.0, 0.0))), 4000)
    own0 = wide.prompt[wide.system == 0]
    assert own0.min() >= 65 and own0.max() <= 704 and abs(own0.mean() - 384.0) < 20.0


def test_bare_user_lognormal_mean_without_quantiles():
    """bare_user_tokens 1,000, sigma 0, no quantiles: every prompt-less session's first message is 1,000 tokens;
    a mean of 0 leaves them to the pooled first message (100)."""
    m = _one_turn(bare_user_tokens=1000.0, bare_user_sigma=0.0)
    rows = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))._expand(
        np.random.default_rng(1), np.zeros(20), np.arange(20, dtype=np.int64), None)
    assert rows.prompt.tolist() == [1000] * 20


def _expand_rows(model, n, seed=4):
    return Generator(model, duration_s=60.0, seed=seed, probe=(1.0, 2.0))._expand(
        np.random.default_rng(seed), np.zeros(n), np.arange(n, dtype=np.int64), None)


def test_only_prompt_less_sessions_draw_the_bare_lengths():
    """Prompt 0 (64 tokens) has neither a row nor its own lognormal: its sessions keep the pooled first message
    (100) although bare_user_quantiles (500, 500) is set: prompts of 164, and 500 for the prompt-less ones; prompt 1's
    row (1, 1) is a measured row (a 1-token first message: 128 + 1), not an empty one."""
    m = _one_turn(system_probability=0.5, system_prompts=2, system_prompt_tokens=(64.0, 128.0),
                  system_prompt_weights=(1.0, 1.0), system_user_quantiles=(0.0, 0.0, 1.0, 1.0),
                  bare_user_quantiles=(500.0, 500.0))
    rows = _expand_rows(m, 80)
    assert set(rows.system.tolist()) == {-1, 0, 1}
    for k, want in ((-1, 500), (0, 164), (1, 129)):
        assert set(rows.prompt[rows.system == k].tolist()) == {want}


def test_small_own_lengths_are_drawn_and_floored_at_one_token():
    """Lengths below a token still count as stated: bare_user_tokens 1 (sigma 0) gives 1-token first messages, a
    bare row (0, 0) the floor of 1 token, a prompt's own lognormal of mean 0.5 (sigma 0) rounds to 0 and is floored
    at 1, and a prompt row (0, 1) draws 0 or 1 token, floored at 1: every prompt is its shared part + 1."""
    for bare in ({"bare_user_tokens": 1.0, "bare_user_sigma": 0.0}, {"bare_user_quantiles": (0.0, 0.0)}):
        m = _one_turn(system_probability=0.5, system_prompts=2, system_prompt_tokens=(64.0, 128.0),
                      system_prompt_weights=(1.0, 1.0), system_user_tokens=(0.5, 0.0),
                      system_user_sigma=(0.0, 0.0), system_user_quantiles=(0.0, 0.0, 0.0, 1.0), **bare)
        rows = _expand_rows(m, 80)
        assert set(rows.system.tolist()) == {-1, 0, 1}
        for k, want in ((-1, 1), (0, 65), (1, 129)):
            assert set(rows.prompt[rows.system == k].tolist()) == {want}, (bare, k)


def test_a_prompt_row_of_several_quantiles_interpolates_between_them():
    """A row (0, 100, 1000) over 8,000 sessions: half the draws fall in [0, 100], half in [100, 1000], linear in
    each: mean (50 + 550) / 2 = 300 (sd of the draws ~290: within 15), median 100 within 10, none above 1000;
    follow-up turns (3 per visit) keep the user_tokens lengths (25): each prompt grows by 25 + 10 of output."""
    m = _one_turn(system_probability=1.0, system_prompts=1, system_prompt_tokens=(64.0,),
                  system_prompt_weights=(1.0,), system_user_quantiles=(0.0, 100.0, 1000.0), user_tokens=25.0)
    rows = _expand_rows(m, 8000)
    own = rows.prompt - 64
    assert own.max() <= 1000 and abs(own.mean() - 300.0) < 15.0 and abs(np.median(own) - 100.0) < 10.0
    assert (own[own <= 100].size / own.size) == pytest.approx(0.5, abs=0.03)
    turns = replace(m, sessions=replace(m.sessions, turns_mean=3.0, think_time_s=1.0))
    rows = _expand_rows(turns, 400)
    first = np.r_[True, rows.session[1:] != rows.session[:-1]]
    step = np.diff(rows.prompt)[~first[1:]]
    assert step.size > 100 and set(step.tolist()) == {35}


# --- stratified draws (Latin hypercube sampling within a batch of sessions) ------------------------------------
def test_strata_put_one_uniform_in_each_stratum_in_random_order():
    rng = np.random.default_rng(3)
    u = synth._strata(rng, 1000)
    assert u.shape == (1000,) and u.min() >= 0.0 and u.max() < 1.0
    assert np.sort(np.floor(u * 1000).astype(int)).tolist() == list(range(1000))    # one in each [i/n, (i+1)/n)
    assert not np.all(np.diff(u) > 0)                                                # not in stratum order
    assert synth._strata(rng, 0).size == 0
    # (n - 1 + r) / n rounds to 1.0 for r near 1 at large n: kept below 1 (the inverse CDFs take log(1 - u))
    class Top:
        def permutation(self, n):
            return np.arange(n)[::-1]

        def random(self, n):
            return np.full(n, 1.0 - 2.0 ** -53)
    assert synth._strata(Top(), 7).max() < 1.0


def test_norm_ppf_matches_the_standard_librarys_normal_quantile():
    from statistics import NormalDist

    u = np.concatenate([np.linspace(1e-10, 1 - 1e-10, 4001), [1e-300, 0.02425, 0.02424, 1 - 0.02425, 0.5]])
    ref = np.array([NormalDist().inv_cdf(x) for x in u])
    x = synth.norm_ppf(u)
    assert np.max(np.abs(x - ref) / np.maximum(1.0, np.abs(ref))) < 2e-9
    assert synth.norm_ppf(np.array([0.0]))[0] < -37 and np.isfinite(synth.norm_ppf(np.array([1.0]))[0])


def test_geometric_counts_follow_their_law_by_inverse_cdf():
    """Mean 4: P(K = k) = (3/4)^(k-1) / 4; 40,000 stratified draws hold each k's share to within 2/n of the
    law's (k's interval of u holds the strata wholly inside it and at most one cut at each end; a free draw
    strays by ~0.0009 at k = 8), and their mean is 4."""
    rng = np.random.default_rng(1)
    n = 40_000
    k = synth._geometric(rng, 4.0, n)
    assert k.min() == 1
    for v in range(1, 12):
        law = 0.75 ** (v - 1) * 0.25
        assert abs(np.mean(k == v) - law) <= 2.0 / n, v
    assert k.mean() == pytest.approx(4.0, rel=2e-3)


def test_a_batch_holds_the_models_proportions_not_a_random_samples():
    """1,000 sessions, a system prompt with probability 0.3 and two prompts weighted 3:1: the batch holds 300
    sessions with a prompt (a free draw: sd 14.5), 225 and 75 of them on each (stratified uniforms below
    0.3 are exactly 300 of 1,000; below 0.75 of the weights' CDF, 750); one-turn first messages from quantiles
    hold the quantile grid's mass in each of its 4 cells (250 each)."""
    m = _one_turn(system_probability=0.3, system_prompts=2, system_prompt_tokens=(64.0, 128.0),
                  system_prompt_weights=(3.0, 1.0), first_user_quantiles=(1000.0, 2000.0, 3000.0, 4000.0, 5000.0))
    g = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))
    for seed in range(5):
        rows = g._expand(np.random.default_rng(seed), np.zeros(1000), np.arange(1000, dtype=np.int64), None)
        held = rows.system >= 0
        assert held.sum() == 300
        # the prompt choice is drawn for every session (its strata over all 1,000), the share with a prompt apart:
        # the 300 kept are a random subset of a 750:250 split, so within a few sd of 225:75, never exact
        assert abs(int((rows.system == 0).sum()) - 225) < 40
        user = (rows.prompt - rows.system_len).astype(np.int64)
        cells = np.bincount(np.clip((user - 1000) // 1000, 0, 3), minlength=4)
        assert np.all(np.abs(cells - 250) <= 1), cells


def test_zipf_cdf_by_hand_and_lengths_may_be_zero_by_default():
    """Zipf s = 1 over 4 prompts: weights 1, 1/2, 1/3, 1/4 (sum 25/12): CDF 12/25, 18/25, 22/25, 1; s = 0 is
    uniform. A length law that puts its mass at 0 (later messages that add nothing, measured quantiles of 0)
    gives 0 tokens unless a floor is asked for (first messages: lo=1)."""
    np.testing.assert_allclose(synth._zipf_cdf(4, 1.0), [12 / 25, 18 / 25, 22 / 25, 1.0], rtol=1e-15)
    np.testing.assert_allclose(synth._zipf_cdf(4, 0.0), [0.25, 0.5, 0.75, 1.0], rtol=1e-15)
    rng = np.random.default_rng(0)
    assert synth._lengths(rng, 0.0, 0.0, (0.0, 0.0, 0.0), 5).tolist() == [0] * 5
    assert synth._lengths(rng, 0.0, 0.0, (0.0, 0.0, 0.0), 5, lo=1).tolist() == [1] * 5


def test_a_document_adds_its_length_to_the_shared_prefix_and_a_first_message_is_at_least_one_token():
    """Every session takes the one 128-token system prompt and the one 256-token document (probability 1), its
    first message a law of all zeros: the shared prefix is 128 + 256 tokens and the prompt 385 (a first message
    is at least 1 token). Without the document (probability 0): 129."""
    m = _one_turn(system_probability=1.0, system_prompts=1, system_tokens=128.0, system_sigma=0.0,
                  document_probability=1.0, documents=1, document_tokens=256.0, document_sigma=0.0,
                  first_user_quantiles=(0.0, 0.0, 0.0))
    g = Generator(m, duration_s=60.0, seed=0, probe=(1.0, 2.0))
    rows = g._expand(np.random.default_rng(2), np.zeros(20), np.arange(20, dtype=np.int64), None)
    assert rows.doc.tolist() == [0] * 20 and rows.shared_len.tolist() == [384] * 20
    assert rows.prompt.tolist() == [385] * 20
    bare = Generator(replace(m, prompts=replace(m.prompts, document_probability=0.0)), duration_s=60.0, seed=0,
                     probe=(1.0, 2.0))
    rows = bare._expand(np.random.default_rng(2), np.zeros(20), np.arange(20, dtype=np.int64), None)
    assert rows.doc.tolist() == [-1] * 20 and rows.shared_len.tolist() == [128] * 20 and rows.prompt.tolist() == [129] * 20
    # half the sessions attach it (stratified: exactly 10 of 20): the others' shared prefix is the prompt's alone
    half = Generator(replace(m, prompts=replace(m.prompts, document_probability=0.5)), duration_s=60.0, seed=0,
                     probe=(1.0, 2.0))
    rows = half._expand(np.random.default_rng(2), np.zeros(20), np.arange(20, dtype=np.int64), None)
    has = rows.doc == 0
    assert has.sum() == 10 and set(rows.doc[~has].tolist()) == {-1}
    assert rows.shared_len[has].tolist() == [384] * 10 and rows.shared_len[~has].tolist() == [128] * 10


def test_the_key_sample_a_gen_argument_carries_and_the_commands_that_refuse_it():
    """gen_sample_rate: sample=F below 1 is a key sample; none, sample=1 and a trace file are whole streams.
    require_whole_stream refuses only a key sample, in one line naming the command, the rate and why."""
    from kvbench.errors import UsageError
    from kvbench.stream.synth import gen_sample_rate, require_whole_stream

    assert gen_sample_rate("gen:chat,duration=1h,sample=0.25") == 0.25
    assert gen_sample_rate("gen:chat,duration=1h,sample=1") is None
    assert gen_sample_rate("gen:chat,duration=1h") is None and gen_sample_rate("trace.jsonl") is None
    assert gen_sample_rate("mooncake-sample") is None
    for whole in ("gen:chat,duration=1h", "gen:chat,sample=1", "trace.jsonl"):
        require_whole_stream(whole, "cmd", "why")
    with pytest.raises(UsageError) as e:
        require_whole_stream("gen:chat,sample=0.25", "trace fit", "sessions need whole prefixes")
    assert str(e.value).splitlines()[0] == (
        "trace fit needs the whole stream: gen:chat,sample=0.25 is a key sample at rate 0.25 (sessions need whole "
        "prefixes) (fix: drop sample= from the gen: argument (a shorter duration or a lower rate keeps it small))")
