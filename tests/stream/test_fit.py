"""trace fit -> trace gen reproduces the trace's steady write rate (DWPD) and hit ratio at every capacity.

The reference here is a plain OrderedDict LRU run over the source and the generated traces (not
kvbench.analysis.curves.residence, which the fit's own error uses): for capacity C, the steady window is the requests
arriving strictly after the first eviction, W(C) = the window's misses / its references x the trace's mean
references per second (DESIGN.md "Steady state"), counted where the tier turned over (>= C misses in the window).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest

from kvbench.stream.fit import calibrate_demand, fit_and_score, gen_check, generate_like, starts_cold
from kvbench.stream.synth import Generator
from kvbench.stream.traces import Trace, read_trace
from kvbench.stream.workload import (Arrivals, Calibration, Prompts, Sessions, WorkloadModel, model_from_dict,
                                     to_toml)

HELD_OUT = range(32)        # generated traces scored here: seeds neither the calibration (1000+) nor the fit's uses
CAPS = (16, 256, 1024, 2048, 4096, 6000)


def lru_steady(trace: Trace, caps) -> dict:
    """Exact LRU per capacity: whole-trace hit ratio, steady write rate (blocks/s) and whether it turned over."""
    keys = trace.keys[trace.touch_order()].tolist()
    req_of = np.repeat(np.arange(trace.n_requests), trace.blocks_per_request)
    t = trace.timestamp_s
    t0 = float(t.min())
    busy = np.flatnonzero(trace.blocks_per_request > 0)
    demand = trace.blocks_per_request[t > t0].sum() / (float(t[busy[-1]]) - t0)
    out = {"hit": [], "w": [], "turned_over": []}
    for c in caps:
        lru: OrderedDict = OrderedDict()
        hit = np.zeros(len(keys), dtype=bool)
        fill_req = None
        for i, k in enumerate(keys):
            if k in lru:
                lru.move_to_end(k)
                hit[i] = True
            else:
                lru[k] = None
                if len(lru) > c:
                    lru.popitem(last=False)
                    if fill_req is None:
                        fill_req = req_of[i]
        out["hit"].append(hit.mean())
        if fill_req is None:
            out["w"].append(np.nan)
            out["turned_over"].append(False)
            continue
        window = t[req_of] > t[fill_req]            # references of requests arriving strictly after the fill
        misses = int((~hit & window).sum())
        out["w"].append(misses / max(1, int(window.sum())) * demand)
        out["turned_over"].append(misses >= c)
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def sample_fit():
    tr = read_trace("mooncake-sample")
    res, good = fit_and_score(tr, seeds=1)
    return tr, res, good


def test_calibrated_model_reproduces_dwpd_and_hit_ratio(sample_fit, cli, tmp_path):
    """What a user does: trace fit, then trace gen of the model file at its default duration (the one the fit's
    gen check measured: 63 spans of the trace, ~64,000 requests), read back from the file. Each generated trace's
    write rate within 5% of the trace's at every capacity both turn over, its hit-ratio MAE within 0.02 (measured
    by benchmarks/fit_dwpd.py over seeds 100-111: per trace max 2.8% on average, the worst 4.1%)."""
    tr, res, _ = sample_fit
    src = lru_steady(tr, CAPS)
    c = res.model.calibration
    k = c.gen_duration_s / tr.duration_s            # whole spans, ~64,000 requests at the model's rate (63 here)
    assert k == pytest.approx(round(k)) and 60 <= k <= 66
    model_file = tmp_path / "m.toml"
    model_file.write_text(to_toml(res.model))
    for seed in (100, 101):
        out = tmp_path / f"g{seed}.jsonl"
        r = cli("trace", "gen", "--model-file", model_file, "-o", out, "--seed", seed, "--json")
        assert r.exit_code == 0, r.output
        g = lru_steady(read_trace(str(out)), CAPS)
        ok = src["turned_over"] & g["turned_over"]
        assert ok.sum() == len(CAPS)
        rel = g["w"][ok] / src["w"][ok] - 1.0
        assert np.abs(rel).max() <= 0.05, (seed, rel)
        assert np.abs(g["hit"] - src["hit"]).mean() <= 0.02


@pytest.mark.slow
def test_traces_as_long_as_the_source_stray_by_its_own_noise(sample_fit):
    """Traces of the source's own length (1,000 requests) from the model: their mean write rate near the trace's
    (the model's long-run rate is centred on the long traces trace gen writes: measured over these 32 seeds
    within 4.2%), while one of them strays by ~5-10% (heavy-tailed prompts, Poisson arrivals): the sampling noise
    the source itself carries, which the fit reports (``source_noise_max``)."""
    tr, res, _ = sample_fit
    src = lru_steady(tr, CAPS)
    cold = starts_cold(tr)
    gens = [lru_steady(generate_like(res.model, tr, s, cold), CAPS) for s in HELD_OUT]
    ok = src["turned_over"] & np.all([g["turned_over"] for g in gens], axis=0)
    assert ok.sum() >= 5                                          # the curve, not one point
    w = np.array([g["w"] for g in gens])[:, ok]
    rel_mean = np.mean(w, axis=0) / src["w"][ok] - 1.0
    # the model's write rate at the source's length (mean of the generated traces) within 5% at every capacity
    assert np.abs(rel_mean).max() <= 0.05, rel_mean
    # hit ratio: mean absolute error over the capacities within 0.02, for the model (the generated traces' mean
    # curve) and for the median generated trace (measured per trace: 0.003-0.038, 4 of 32 above 0.02)
    hits = np.array([g["hit"] for g in gens])
    assert np.abs(hits.mean(axis=0) - src["hit"]).mean() <= 0.02
    assert np.median(np.abs(hits - src["hit"]).mean(axis=1)) <= 0.02
    # one generated trace of 1,000 requests carries ~10% sampling noise in its references (heavy-tailed prompts,
    # Poisson arrivals), which no model removes: measured per-trace max errors over these 32 seeds 2.5-21.1%,
    # median 6.0% (the model's mean: within 2.5%). The bounds asserted are those, not 5%.
    per_seed = np.abs(w / src["w"][ok] - 1.0).max(axis=1)
    assert np.median(per_seed) <= 0.08 and per_seed.max() <= 0.25, per_seed


def test_calibration_recorded_in_the_model_file(sample_fit):
    _, res, good = sample_fit
    c = res.model.calibration
    assert c is not None and c.calibrated and c.seeds == 64 and c.first_seed == 1000
    assert c.dwpd_error_max_before is not None and c.dwpd_error_max_after == good["dwpd_error_max"]
    # the gen check: trace gen's traces at the default duration (seed 0, the fixture's one seed), recorded
    g = good["gen_check"]
    assert c.gen_duration_s == g["duration_s"] and c.gen_seeds == 1 and c.first_gen_seed == 0
    assert c.gen_dwpd_error_max == g["dwpd_error_max"] <= 0.05 and c.gen_curve_mae <= 0.02
    assert 0 < c.source_noise_max == good["source_noise"]["max_error_median"]
    assert c.gen_goal == g["goal"]["verdict"] == "met" and g["goal"]["share"] == 1.0     # the one trace within
    assert good["source_noise"]["exact_model"]["sources"] == 16                          # scored beside it
    assert good["before_calibration"]["dwpd_error_max"] == c.dwpd_error_max_before
    assert 0.5 < c.rate_factor < 2.0 and 0.5 < c.length_factor < 2.0
    # the trace starts cold: the long run's rate is centred on the generated duration (x1.005 since the
    # generator holds each rate window's count; x0.98 before), a factor, not None (no rate would centre it)
    assert c.gen_rate_factor is not None and 0.95 < c.gen_rate_factor < 1.05
    # the goals are met at the measured turns and think time: the reuse search stops at its first point
    assert c.turns_factor == 1.0 and c.think_factor == 1.0
    assert res.observed["calibration"]["reuse_search"]["evaluations"] == 1
    import tomllib

    back = model_from_dict(tomllib.loads(to_toml(res.model)), "m.toml")
    assert back.calibration == replace(c, **{k: round(v, 6) for k, v in vars(c).items()
                                             if isinstance(v, float)})
    with pytest.raises(Exception, match="unknown parameter calibration.nope"):
        model_from_dict({"calibration": {"nope": 1}}, "m.toml")


def test_calibration_recovers_a_known_demand_error():
    # a trace from a known model; the model given to the calibration has half the rate and half the own-text
    # lengths: it must find factors of about 2 (no shared prefixes, so blocks per request ~ length)
    known = WorkloadModel(block_tokens=64, arrivals=Arrivals(rate=4.0),
                          sessions=Sessions(turns_mean=2.0, think_time_s=20.0, max_context_tokens=1 << 20),
                          prompts=Prompts(system_probability=0.0, first_user_tokens=2000.0, first_user_sigma=0.3,
                                          user_tokens=300.0, user_sigma=0.3, output_tokens=100.0,
                                          output_sigma=0.3, append_output=False))
    tr = Trace.concat(list(Generator(known, duration_s=1800.0, seed=5).batches()))
    off = replace(known, arrivals=replace(known.arrivals, rate=2.0),
                  prompts=replace(known.prompts, first_user_tokens=1000.0, user_tokens=150.0))
    m, info = calibrate_demand(tr, off, seeds=8)
    assert info["rate_factor"] == pytest.approx(2.0, rel=0.05)
    assert info["length_factor"] == pytest.approx(2.0, rel=0.05)
    assert abs(info["requests_ratio"] - 1) <= 0.01 and abs(info["demand_per_request_ratio"] - 1) <= 0.01
    assert m.arrivals.rate == pytest.approx(2.0 * info["rate_factor"])


def test_cli_prints_the_calibration(cli, tmp_path):
    out = tmp_path / "m.toml"
    r = cli("trace", "fit", "mooncake-sample", "-o", str(out), "--seeds", "1")
    assert r.exit_code == 0, r.output
    assert "calibrated rate x" in r.output and "(demand, 64 generated traces from seed 1000)" in r.output
    assert "DWPD error mean" in r.output and "(reuse search)" in r.output
    assert f"gen check  kvbench trace gen --model-file {out} (default duration 4.7" in r.output
    assert "h), --seed 0: DWPD error per trace mean" in r.output
    assert "\ngen goal   met (every trace within 5% at every capacity, curve MAE within 0.02)\n" in r.output
    assert "\ngen noise  a trace of the source's length drawn from the model strays up to " in r.output
    text = out.read_text()
    assert "[calibration]" in text and "calibrated = true" in text and "dwpd_error_max_before" in text
    assert "# Gen check: kvbench trace gen --model-file" in text and "gen_duration_s = " in text
    assert "# Gen goal: met (every trace" in text and "# Gen noise: a trace of the source's length" in text
    assert 'gen_goal = "met"' in text


def test_generator_probe_passed_equals_its_own():
    # a calibration passes one probe to many seeds' generators: given a generator's own probe, another generator
    # of the same model and seed writes the same requests
    m = WorkloadModel(arrivals=Arrivals(rate=3.0), sessions=Sessions(turns_mean=3.0, think_time_s=10.0))
    a = Generator(m, duration_s=600.0, seed=7)
    b = Generator(m, duration_s=600.0, seed=7, probe=a.probe)
    ta, tb = Trace.concat(list(a.batches())), Trace.concat(list(b.batches()))
    assert a.probe == b.probe and ta.n_requests == tb.n_requests > 100
    assert np.array_equal(ta.keys, tb.keys) and np.array_equal(ta.timestamp_s, tb.timestamp_s)


def test_cli_no_calibrate_keeps_the_structural_fit(cli, tmp_path):
    out = tmp_path / "m.toml"
    r = cli("trace", "fit", "mooncake-sample", "-o", str(out), "--seeds", "1", "--no-calibrate")
    assert r.exit_code == 0, r.output
    assert "calibrated" not in r.output and "[calibration]" not in out.read_text()
    assert "fit DWPD" in r.output


# --- mutation survivors (issue 34 part 4): fit_model's estimates on hand-built traces, its helpers -----------
from types import SimpleNamespace  # noqa: E402

from kvbench.errors import SpecError  # noqa: E402
from kvbench.stream import fit as fit_mod  # noqa: E402
from tests.conftest import make_trace  # noqa: E402


def _sessions_trace(sessions):
    """sessions: (start s, [follow-up gaps s]) -> a trace where session i's requests are [1000 i + 1], then
    [1000 i + 1, 1000 i + 2], ... (each turn extends the previous prompt by one block), in time order."""
    rows = []
    for i, (t0, gaps) in enumerate(sessions):
        t = t0
        rows.append((t, [1000 * i + 1]))
        for j, g in enumerate(gaps):
            t += g
            rows.append((t, [1000 * i + 1 + b for b in range(j + 2)]))
    rows.sort(key=lambda r: r[0])
    return make_trace([r[0] for r in rows], [r[1] for r in rows])


def _warned(res, param):
    return any(w.startswith(param + ":") for w in res.warnings)


def test_ten_follow_ups_are_enough_to_fit_think_time_and_user_tokens():
    """10 sessions 3,000 s apart, each with one follow-up 2^k s later (k = 0..9): exactly MIN_SAMPLES think
    times. Median think time = the geometric mean 2^4.5 = 22.63 s, sigma = ln 2 x std(0..9) = 0.6931 x 2.8723;
    each follow-up adds one 512-token block: user tokens 512, appended. No shared prefix: no system prompt."""
    res = fit_mod.fit_model(_sessions_trace([(3000.0 * k, [2.0 ** k]) for k in range(10)]))
    s, p = res.model.sessions, res.model.prompts
    assert res.observed["follow_ups"] == 10 and res.observed["returns"] == 0
    assert s.think_time_s == pytest.approx(2 ** 4.5) and s.think_sigma == pytest.approx(np.log(2) * np.sqrt(99 / 12))
    assert not _warned(res, "sessions.think_time_s")
    assert p.user_tokens == 512.0 and p.append_output and not _warned(res, "prompts.user_tokens")
    assert p.system_tokens == 0.0 and res.observed["system_prompts_seen"] == 0
    assert res.model.name == "fit-hand"                        # the trace's file stem (path "hand")
    assert fit_mod.fit_model(_sessions_trace([(3000.0 * k, [2.0 ** k]) for k in range(10)]),
                             name="mine").model.name == "mine"


def test_a_turn_more_than_half_an_hour_later_is_a_return():
    res = fit_mod.fit_model(_sessions_trace([(0.0, [1700.0]), (100.0, [2000.0])]))
    assert res.observed["follow_ups"] == 2 and res.observed["returns"] == 1 and res.observed["visits"] == 3


def test_a_first_block_sessions_share_is_a_system_prompt():
    """Sessions [7, 1], [7, 2], [7, 3] (prefix-chained): block 7 is shared by 3 sessions: one system prompt of
    depth 1, written as (1 + 0.5) x 512 = 768 tokens. Two sessions sharing it are one too (weight 2)."""
    from tests.conftest import chained_trace

    c = chained_trace([[7, 1], [7, 2], [7, 3]])
    t = make_trace([0.0, 10.0, 20.0], [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(3)])
    res = fit_mod.fit_model(t)
    assert res.observed["system_prompts_seen"] == 1
    assert res.model.prompts.system_prompt_tokens == (768.0,) and res.model.prompts.system_prompts == 1
    two = make_trace([0.0, 10.0], [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(2)])
    two_fit = fit_mod.fit_model(two)
    assert two_fit.observed["system_prompts_seen"] == 1 and two_fit.model.prompts.system_prompt_weights == (2.0,)
    assert two_fit.observed["documents_seen"] == 0


def test_every_shared_first_block_is_a_system_prompt_and_only_what_lies_deeper_a_document():
    """P = [7, 8, 9] starts 2 of 7 sessions (depth 3: 3.5 x 512 = 1,792 tokens); Q = [5] starts 4 (the founder
    [5, 1], then [5, 2] and [5, 3, 4, 10] share 1 block, [5, 3, 4, 11] shares 3: Q's depth is 1, 768 tokens, and
    [5, 3, 4, 11] attaches a document of 2 blocks + half a block = 1,280 tokens, seen by 2 sessions); [20, 21]
    shares nothing. Two system prompts by weight (Q 4, P 2), probability 6/7; one document, probability 2/7 (the
    rule before took groups under max(3, 2% of the sessions) for documents: P was one)."""
    from tests.conftest import chained_trace

    rows = [[7, 8, 9, 1], [5, 1], [7, 8, 9, 2], [5, 2], [5, 3, 4, 10], [5, 3, 4, 11], [20, 21]]
    c = chained_trace(rows)
    t = make_trace([100.0 * i for i in range(len(rows))],
                   [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(len(rows))])
    res = fit_mod.fit_model(t)
    p = res.model.prompts
    assert res.observed["sessions_sharing_a_prefix"] == 4
    assert res.observed["system_prompts_seen"] == 2 and p.system_prompts == 2
    assert p.system_prompt_tokens == (768.0, 1792.0) and p.system_prompt_weights == (4.0, 2.0)
    assert p.system_probability == pytest.approx(6 / 7)
    assert res.observed["documents_seen"] == 1 and p.documents == 1
    assert p.document_probability == pytest.approx(2 / 7) and p.document_tokens == 1280.0


def test_a_prompt_with_ten_sessions_keeps_their_first_messages():
    """P = [7] starts 11 sessions (its founder [7, 1] and 10 that share it), Q = [5] 2, and 10 sessions share
    nothing; every request holds 1,024 input tokens. P's and Q's sessions, founders included, write 1,024 - 1.5 x
    512 = 256 own tokens: P (10 or more sessions) keeps them (sigma 0); Q (under MIN_SAMPLES) draws the pooled
    first message, fitted on the rest: Q's 2 x 256 and 10 x 1,024, mean 896, sigma ln 4 x std(2 x 0, 10 x 1) =
    1.3863 x sqrt(10/12 x 2/12). With 9 of P's sessions only, no prompt keeps its own."""
    from tests.conftest import chained_trace

    rows = [[7, 1], [5, 1], [5, 2]] + [[200 + k, 1] for k in range(10)] + [[7, 100 + k] for k in range(10)]
    c = chained_trace(rows)
    t = make_trace([100.0 * i for i in range(len(rows))],
                   [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(len(rows))],
                   tokens=[1024] * len(rows))
    m = fit_mod.fit_model(t).model
    p = m.prompts
    assert p.system_prompt_tokens == (768.0, 768.0) and p.system_prompt_weights == (11.0, 2.0)
    assert p.system_user_tokens == (256.0, 0.0) and p.system_user_sigma == (0.0, 0.0)
    assert p.first_user_tokens == pytest.approx(896.0)
    assert p.first_user_sigma == pytest.approx(np.log(4) * np.sqrt(10 / 12 * 2 / 12))
    scaled = fit_mod.scale_model(m, 1.0, 0.5).prompts
    assert scaled.system_user_tokens == (128.0, 0.0) and scaled.system_user_sigma == (0.0, 0.0)
    assert fit_mod.fit_model(t.take(np.arange(len(rows) - 2))).model.prompts.system_user_tokens == ()


def test_requests_all_at_one_instant_cannot_be_fitted():
    with pytest.raises(SpecError, match="at least two requests at different times"):
        fit_mod.fit_model(make_trace([5.0, 5.0, 5.0], [[1], [2], [3]]))


def test_burstiness_of_evenly_spaced_starts_half_a_second_apart_is_the_floor():
    """12 sessions 0.5 s apart: the gaps' CV is ~0 (mean below 1 s), so burstiness is its floor 0.2, fitted."""
    res = fit_mod.fit_model(make_trace(0.5 * np.arange(12), [[k + 1] for k in range(12)]))
    assert res.model.arrivals.burstiness == 0.2 and not _warned(res, "arrivals.burstiness")


def test_lognormal_fit_of_two_samples_and_quantiles_to_a_tenth():
    mean, sigma = fit_mod._lognormal_fit(np.array([1.0, np.e ** 2]))
    assert mean == pytest.approx((1 + np.e ** 2) / 2) and sigma == pytest.approx(1.0)   # logs 0 and 2: std 1
    assert fit_mod._lognormal_fit(np.array([3.0])) == (3.0, 0.0)
    x = 0.123 * np.arange(21)                  # 21 samples: the 21 quantiles are the samples themselves
    # the last: the top segment's two samples average 19.5 x 0.123, so its end is 2 x 2.3985 - 2.337 = 2.46
    assert fit_mod._quantiles(x) == tuple(round(0.123 * k, 1) for k in range(21))
    assert fit_mod._quantiles(x[:9]) == ()


def test_days_covered_counts_ten_minute_steps_from_the_first_request():
    """1970-01-04 (day 3, a Sunday) 23:59:59.5: the 600 s trace's one step lies on the weekend."""
    tr = SimpleNamespace(t0=4 * 86_400.0 - 0.5, duration_s=600.0)
    assert fit_mod._days_covered(tr, weekend=True) == 600.0 / 86_400.0
    assert fit_mod._days_covered(tr, weekend=False) == 0.0


def _hourly_starts(per_hour, span_s):
    """Session starts: per_hour(h) starts spread evenly over each hour h of day the span covers (start 00:00)."""
    out = []
    for h0 in range(int(np.ceil(span_s / 3600.0))):
        n = per_hour(h0 % 24)
        out.extend(h0 * 3600.0 + (np.arange(n) + 0.5) * 3600.0 / n)
    return np.array(out)


def test_diurnal_amplitude_and_peak_of_a_cosine_day_seen_one_and_a_half_times():
    """Rate 1 + 0.5 cos(theta_h - 2 pi 15 / 24) per hour h (theta_h = 2 pi (h + 0.5) / 24): the first harmonic is
    0.5 e^(-i 2 pi 15 / 24), so amplitude 0.5, peak 15:00. Over 36 h hours 0-11 are seen twice: the counts are
    divided by each hour's exposure (otherwise those hours would look twice as busy)."""
    def per_hour(h):
        return int(round(1000 * (1 + 0.5 * np.cos(2 * np.pi * (h + 0.5) / 24 - 2 * np.pi * 15 / 24))))

    amp, peak = fit_mod._diurnal(_hourly_starts(per_hour, 36 * 3600.0), 36 * 3600.0, 0.0)
    assert amp == pytest.approx(0.5, abs=2e-3) and peak == pytest.approx(15.0, abs=0.02)


def test_flat_arrivals_have_no_daily_cycle_even_where_an_hour_is_unseen():
    """22 h from 00:00: hours 22 and 23 are never exposed; a flat rate over the other 22 hours has amplitude 0."""
    amp, _ = fit_mod._diurnal(_hourly_starts(lambda h: 100, 22 * 3600.0), 22 * 3600.0, 0.0)
    assert amp == pytest.approx(0.0, abs=1e-9)


def test_starts_cold_looks_at_the_first_twenty_requests():
    """37 sessions starting 1 s apart, 3 follow-ups (the first is request 21, index 20): 3 of 40 requests continue
    (0.075); none of the first 20 do, under half of 0.075: the trace starts cold. Had it looked at 21 requests
    it would see 1/21 = 0.048, above 0.0375."""
    tr = _sessions_trace([(float(i), [19.5] if i == 0 else [29.2] if i == 1 else [31.3] if i == 2 else [])
                          for i in range(37)])
    assert tr.n_requests == 40
    from kvbench.stream.sessions import recover_sessions

    assert np.flatnonzero(~recover_sessions(tr).first).tolist() == [20, 32, 36]
    assert starts_cold(tr)


# --- the gen check (what trace gen of a fitted model writes, against the trace) ---------------------------------
def _random_trace(seed=0, n=300, keys=60):
    """``n`` requests one second apart, each of 3 distinct keys drawn from ``keys``: every small capacity turns
    over."""
    rng = np.random.default_rng(seed)
    return make_trace(np.arange(n, dtype=np.float64), [list(rng.choice(keys, 3, replace=False) + 1) for _ in range(n)])


def test_gen_check_of_the_trace_itself_and_of_it_at_half_speed():
    """A trace against itself: no error. The same requests at half the speed (timestamps x 2): the same misses
    after the same fills, half the demand, so W(C) is half at every capacity: error exactly 0.5 (signed -0.5) and
    the hit-ratio curve the same. Both together: the traces' mean W is 0.75 of the trace's."""
    tr = _random_trace()
    slow = replace(tr, timestamp_s=tr.timestamp_s * 2.0)
    same = gen_check(tr, None, 600.0, seeds=1, seed=7, traces=[tr])
    assert same["dwpd_error_mean"] == 0.0 and same["dwpd_error_max"] == 0.0 and same["curve_mae"] == 0.0
    assert same["demand_ratio"] == 1.0 and same["per_trace"][0]["seed"] == 7 and same["first_seed"] == 7
    half = gen_check(tr, None, 600.0, seeds=1, traces=[slow])
    assert half["dwpd_error_mean"] == pytest.approx(0.5) and half["dwpd_error_max"] == pytest.approx(0.5)
    assert half["dwpd_error_of_seed_mean"]["signed_mean"] == pytest.approx(-0.5)
    assert half["demand_ratio"] == pytest.approx(0.5) and half["curve_mae"] == 0.0
    both = gen_check(tr, None, 600.0, seeds=2, traces=[tr, slow])
    assert both["dwpd_error_max"] == pytest.approx(0.25) and both["dwpd_error_worst"] == pytest.approx(0.5)
    assert both["dwpd_error_of_seed_mean"]["max"] == pytest.approx(0.25)
    assert np.allclose(both["signed_error_of_seed_mean"], -0.25) and both["seeds"] == 2
    assert both["dwpd_error_of_seed_mean"]["points"] == len(both["capacities_blocks"]) > 3


def test_gen_duration_is_whole_spans_of_about_64000_requests():
    from types import SimpleNamespace

    def d(n, span):
        return fit_mod.gen_duration(SimpleNamespace(n_requests=n, duration_s=span))
    assert d(1000, 272.5) == 64 * 272.5                 # ceil(64,000 / 1,000)
    assert d(1931, 86_245.0) == 34 * 86_245.0           # ceil(33.14)
    assert d(3993, 1022.0) == 17 * 1022.0
    assert d(40_000, 50.0) == 100.0                     # ceil(1.6)
    assert d(90_000, 50.0) == 50.0 and d(64_000, 50.0) == 50.0      # at least the span
    assert d(10, 5.0) == 256 * 5.0                      # at most 256 spans
    # at a model's long-run rate (the Mooncake synthetic trace's, x2.4): 9.57 req/s x 1,022 s a span -> 7 spans
    assert fit_mod.gen_duration(SimpleNamespace(n_requests=3993, duration_s=1022.0), 9.57) == 7 * 1022.0


def _fake_checks(monkeypatch, results):
    """gen_check replaced: returns ``results`` in turn (seed-mean signed errors, then the seed mean's max)."""
    calls = []

    def fake(trace, model, duration_s, seeds=3, seed=0, traces=None):
        calls.append((model.arrivals.rate, duration_s, seeds, seed))
        e = np.asarray(results[len(calls) - 1])
        return {"signed_error_of_seed_mean": e.tolist(), "duration_s": duration_s,
                "dwpd_error_of_seed_mean": {"max": float(np.abs(e).max())}}
    monkeypatch.setattr(fit_mod, "gen_check", fake)
    return calls


def test_long_run_centres_a_cold_traces_errors_by_the_rate(monkeypatch):
    """A cold-started trace over 100 s, a model of 10 requests/s: the default duration is 64 spans. The long run writes
    +10% at one capacity and +2% at another: the rate / 1.06 centres them (+3.8%, -3.8%: within the goal); the
    checks run on 3 traces from seed 3000 + the fit's seed."""
    from types import SimpleNamespace

    tr = SimpleNamespace(n_requests=1000, duration_s=100.0)
    m = WorkloadModel(arrivals=Arrivals(rate=10.6))
    calls = _fake_checks(monkeypatch, [[0.10, 0.02], [0.1 / 1.06 + 1 / 1.06 - 1, 1.02 / 1.06 - 1]])
    out, dur, f, chk = fit_mod.long_run(tr, m, seed=7, cold=True)
    assert dur == 6100.0 and f == pytest.approx(1 / 1.06) and out.arrivals.rate == pytest.approx(10.0)
    assert calls == [(10.6, 6100.0, 3, 3007), (pytest.approx(10.0), 6100.0, 3, 3007)]     # ceil(64,000 / 1,060)
    assert set(chk) == {"before", "after"}


def test_long_run_of_a_cold_trace_it_cannot_centre_keeps_the_span(monkeypatch):
    """The long run writes +91% to +159% of the trace's W(C) (the Mooncake synthetic trace): 2.59 / 1.91 is wider
    than 1.05 / 0.95, no rate centres it within 5%: the trace's span and the model as calibrated, one check.
    A spread of +10% to 0% can be centred (1.1 < 1.1053), but the check after the rate still misses by 8%:
    the span too; by exactly 5%: the long duration."""
    from types import SimpleNamespace

    tr = SimpleNamespace(n_requests=1000, duration_s=100.0)
    m = WorkloadModel(arrivals=Arrivals(rate=10.0))
    calls = _fake_checks(monkeypatch, [[0.91, 1.59]])
    out, dur, f, chk = fit_mod.long_run(tr, m, cold=True)
    assert out is m and dur == 100.0 and f is None and set(chk) == {"before"} and len(calls) == 1
    calls = _fake_checks(monkeypatch, [[0.1, 0.0], [-0.08, 0.02]])
    out, dur, f, chk = fit_mod.long_run(tr, m, cold=True)
    assert out is m and dur == 100.0 and f is None and chk["after"]["dwpd_error_of_seed_mean"]["max"] == 0.08
    assert len(calls) == 2
    _fake_checks(monkeypatch, [[0.1, 0.0], [-0.05, 0.05]])
    assert fit_mod.long_run(tr, m, cold=True)[1] == 6400.0
    # a spread just wider than the goal's: 1.106 / 1.0 > 1.1053
    calls = _fake_checks(monkeypatch, [[0.106, 0.0]])
    assert fit_mod.long_run(tr, m, cold=True)[1] == 100.0 and len(calls) == 1


def test_long_run_of_a_running_services_window_is_centred_once_on_eight_traces(monkeypatch):
    """A trace that does not start cold, 100 s at 10 requests/s: 64 spans (6,400 s). Its long run is checked on
    GEN_RATE_SEEDS_WARM = 8 traces from seed 3000 + the fit's seed, not 3 (a window's demand is a noisy measure
    of the rate); +1% and +5%: the rate / ((2 + 0.01 + 0.05) / 2) = / 1.03 (+/-1.94%), no check after it. A
    spread no rate centres within 5% (+0% and +10.6%: 1.106 > 1.05 / 0.95) or a capacity that writes nothing
    (-100%): the model as calibrated, at the long duration (not the span: the span is a cold start of a
    window calibrated warm). A model of 64,000 requests a span or more: the span, no check."""
    from types import SimpleNamespace

    tr = SimpleNamespace(n_requests=1000, duration_s=100.0)
    m = WorkloadModel(arrivals=Arrivals(rate=10.0))
    calls = _fake_checks(monkeypatch, [[0.01, 0.05]])
    out, dur, f, chk = fit_mod.long_run(tr, m, seed=5, cold=False)
    assert dur == 6400.0 and f == pytest.approx(1 / 1.03) and out.arrivals.rate == pytest.approx(10.0 / 1.03)
    assert calls == [(10.0, 6400.0, 8, 3005)] and set(chk) == {"before"}
    assert (1.0 + 0.05) / 1.03 - 1.0 == pytest.approx(-((1.0 + 0.01) / 1.03 - 1.0))    # centred: +/-1.94%
    for err in ([0.0, 0.106], [-1.0]):
        calls = _fake_checks(monkeypatch, [err])
        out, dur, f, chk = fit_mod.long_run(tr, m, seed=5, cold=False)
        assert (out, dur, f) == (m, 6400.0, None) and set(chk) == {"before"} and len(calls) == 1
    calls = _fake_checks(monkeypatch, [])
    busy = WorkloadModel(arrivals=Arrivals(rate=640.0))             # 64,000 requests a span
    assert fit_mod.long_run(tr, busy, cold=False) == (busy, 100.0, None, None) and calls == []
    assert fit_mod.long_run(tr, busy, cold=True) == (busy, 100.0, None, None) and calls == []


def _calibrated_model_file(tmp_path, **cal):
    m = WorkloadModel(arrivals=Arrivals(rate=0.05), sessions=Sessions(turns_mean=1.0),
                      prompts=Prompts(system_probability=0.0), calibration=Calibration(**cal))
    p = tmp_path / "m.toml"
    p.write_text(to_toml(m))
    return p


def test_trace_gen_of_a_fitted_model_defaults_to_its_checked_duration(cli, tmp_path):
    p = _calibrated_model_file(tmp_path, gen_duration_s=90.0, source_noise_max=0.07)
    import json

    r = cli("trace", "gen", "--model-file", p, "-o", tmp_path / "a.jsonl", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["duration_s"] == 90.0
    r = cli("trace", "gen", "--model-file", p, "-o", tmp_path / "b.jsonl", "--duration", "30s")
    assert "note: trace fit checked this model's DWPD on 1.5 min (its default here); a shorter trace's steady " \
           "write rate is noisier (one trace of the source's length strays up to 7%)" in r.output
    r = cli("trace", "gen", "--model-file", p, "-o", tmp_path / "c.jsonl", "--duration", "3m")
    assert "a longer one carries the model's long run beyond what the check measured" in r.output
    r = cli("trace", "gen", "--model-file", p, "-o", tmp_path / "d.jsonl", "--duration", "90s")
    assert "note:" not in r.output
    # a model with no gen check: a day, no note
    q = _calibrated_model_file(tmp_path, rate_factor=1.0)
    r = cli("trace", "gen", "--model-file", q, "-o", tmp_path / "e.jsonl", "--json")
    assert json.loads(r.output)["duration_s"] == 86_400.0


# --- mutation survivors (issue 34 part 4, second pass): the weekly fit on two weeks of Unix-clock trace -------
MONDAY = 1_704_067_200.0        # 2024-01-01 00:00 UTC, a Monday: 19,723 days after Thursday 1970-01-01
DAY = 86_400.0


def _unix_sessions(starts, end, t0=MONDAY):
    """One-request sessions at ``starts`` (s from t0); the first session comes back at ``end`` (a return, not a
    session start), so the trace spans exactly ``end`` seconds."""
    sess = [(s, []) for s in starts]
    sess[0] = (starts[0], [end - starts[0]])
    return replace(_sessions_trace(sess), t0=float(t0))


def test_weekend_factor_of_two_unix_weeks_by_hand():
    """Two weeks from Monday 00:00: a session at every weekday's midnight (10 in 10 weekdays: 1.0 a day), one on
    Saturday noon of week 1 and one on Sunday noon of week 2 (2 in 4 weekend days: 0.5 a day). The 10-min grid
    over [0, 14 d) puts 1,440 steps on weekdays and 576 on weekends: 10.0 and 4.0 days. Weekend factor
    0.5 / 1.0 = 0.5; the trace starts Monday 00:00, weekday 0, hour 0."""
    starts = [d * DAY for d in range(14) if d % 7 < 5] + [5 * DAY + 43_200.0, 13 * DAY + 43_200.0]
    tr = _unix_sessions(sorted(starts), 14 * DAY)
    assert tr.duration_s == 14 * DAY
    assert fit_mod._days_covered(tr, weekend=False) == 10.0 and fit_mod._days_covered(tr, weekend=True) == 4.0
    res = fit_mod.fit_model(tr)
    a = res.model.arrivals
    assert res.observed["sessions"] == 12 and res.observed["absolute_clock"]
    assert a.weekend_factor == 0.5 and not _warned(res, "arrivals.weekend_factor")
    assert a.start_weekday == 0 and a.start_hour == 0.0


def test_weekly_fit_starts_at_thirteen_days_and_a_weekday_only_trace_keeps_factor_one():
    """Weekday sessions only (Mon-Fri midnights of two weeks), spanning exactly 13 days (to Sunday 00:00 of week
    2): the weekly fit runs (13 days is enough) and finds no weekend session; a factor of 0 is no answer, so the
    default 1 stays (without a warning: the span was enough)."""
    starts = [d * DAY for d in range(13) if d % 7 < 5]
    tr = _unix_sessions(starts, 13 * DAY)
    res = fit_mod.fit_model(tr)
    assert tr.duration_s == 13 * DAY and res.observed["sessions"] == 10
    assert res.model.arrivals.weekend_factor == 1.0 and not _warned(res, "arrivals.weekend_factor")
    # a few seconds short of 13 days: not fitted, the default kept with a warning
    short = _unix_sessions(starts, 13 * DAY - 5.0)
    assert _warned(fit_mod.fit_model(short), "arrivals.weekend_factor")


def test_a_weekend_only_trace_keeps_factor_one():
    """Sessions on the Saturdays and Sundays of three weekends from Saturday 2023-12-30 00:00 (weekday 5): no
    weekday session, so no weekday rate to divide by; the default 1 stays."""
    starts = [d * DAY for d in (0, 1, 7, 8, 14)]
    res = fit_mod.fit_model(_unix_sessions(starts, 15 * DAY, t0=MONDAY - 2 * DAY))
    assert res.model.arrivals.start_weekday == 5
    assert res.model.arrivals.weekend_factor == 1.0 and not _warned(res, "arrivals.weekend_factor")


def test_weekly_fit_needs_unix_time_stamps_and_two_weeks():
    """The hand-computed two weeks above on a relative clock (t0 = 0): no weekday is known, the default stays
    with a warning naming the relative clock; a single Unix-clock day is too short."""
    starts = [d * DAY for d in range(14) if d % 7 < 5] + [5 * DAY + 43_200.0, 13 * DAY + 43_200.0]
    res = fit_mod.fit_model(_unix_sessions(sorted(starts), 14 * DAY, t0=0.0))
    assert res.model.arrivals.weekend_factor == 1.0
    assert any(w.startswith("arrivals.weekend_factor:") and "on a relative clock" in w for w in res.warnings)
    day = fit_mod.fit_model(_unix_sessions([0.0, 3600.0, 7200.0], DAY, t0=MONDAY + 13.5 * 3600.0))
    assert _warned(day, "arrivals.weekend_factor") and day.model.arrivals.weekend_factor == 1.0
    assert day.model.arrivals.start_hour == 13.5 and day.model.arrivals.start_weekday == 0     # Monday 13:30


# --- generate_like's warm-up: a window of a running service is generated after a warm-up cut from the stream --
def _warm_model(weekday=5, **sessions):
    return WorkloadModel(block_tokens=64,
                         arrivals=Arrivals(rate=0.05, diurnal_amplitude=0.8, peak_hour=23.0, weekend_factor=0.2,
                                           start_hour=0.0, start_weekday=weekday),
                         sessions=Sessions(**sessions),
                         prompts=Prompts(system_probability=0.0, first_user_tokens=100.0, user_tokens=50.0))


def _cut(model, warm, span, seed, probe):
    """The oracle: the model's stream over warm + span seconds, its first ``warm`` seconds dropped."""
    g = Trace.concat(list(Generator(model, duration_s=warm + span + 1e-3, seed=seed, probe=probe).batches()))
    t = g.t0 + g.timestamp_s
    keep = np.flatnonzero(t >= warm)
    return t[keep] - warm, g.take(keep)


def test_generate_like_warms_up_and_turns_the_clock_back_by_the_warm_up():
    """Warm-up = turns x think time x e^(2 think sigma) + return time x e^(return sigma) = 2 x 10 e + 100 e^0.5
    = 219.24 s; the model starts Saturday 00:00, so the generator starts 219.24 s earlier: Friday (4),
    23.939 h. The window is that stream from 219.24 s on, re-based to 0."""
    import math

    m = _warm_model(turns_mean=2.0, think_time_s=10.0, think_sigma=0.5, return_probability=0.5,
                    return_time_s=100.0, return_sigma=0.5)
    warm = 20.0 * math.e + 100.0 * math.exp(0.5)
    shifted = replace(m, arrivals=replace(m.arrivals, start_hour=24.0 - warm / 3600.0, start_weekday=4))
    probe = (2.0, 3.0)
    tr = make_trace([0.0, 7200.0], [[1], [2]])
    want_t, want = _cut(shifted, warm, 7200.0, 7, probe)
    g = fit_mod.generate_like(m, tr, seed=7, cold=False, probe=probe)
    assert g.n_requests == want.n_requests > 100 and g.t0 == 0.0 and g.meta["cold"] is False
    assert np.array_equal(g.timestamp_s, want_t) and np.array_equal(g.keys, want.keys)
    assert g.path == f"generated from {m.name} (seed 7)"


def test_generate_like_warm_up_is_capped_at_two_days_and_a_cold_trace_has_none():
    """A return time of 10^6 s makes the warm-up 2 days exactly: the same hour, two weekdays back (Thursday).
    Without returns the warm-up is turns x think x e^(2 sigma) = 3 x 40 x e^0 = 120 s. cold=True: no warm-up,
    the model's own stream."""
    probe = (2.0, 3.0)
    tr = make_trace([0.0, 3600.0], [[1], [2]])
    m = _warm_model(turns_mean=2.0, think_time_s=10.0, think_sigma=0.0, return_probability=0.5,
                    return_time_s=1e6, return_sigma=0.0)
    want_t, want = _cut(replace(m, arrivals=replace(m.arrivals, start_weekday=3)), 2 * DAY, 3600.0, 2, probe)
    g = fit_mod.generate_like(m, tr, seed=2, cold=False, probe=probe)
    assert g.n_requests == want.n_requests > 50 and np.array_equal(g.timestamp_s, want_t)
    m2 = _warm_model(turns_mean=3.0, think_time_s=40.0, think_sigma=0.0)
    shifted = replace(m2, arrivals=replace(m2.arrivals, start_hour=24.0 - 120.0 / 3600.0, start_weekday=4))
    want_t, _ = _cut(shifted, 120.0, 3600.0, 2, probe)
    assert np.array_equal(fit_mod.generate_like(m2, tr, seed=2, cold=False, probe=probe).timestamp_s, want_t)
    want_t, _ = _cut(m2, 0.0, 3600.0, 2, probe)
    g = fit_mod.generate_like(m2, tr, seed=2, cold=True, probe=probe)
    assert np.array_equal(g.timestamp_s, want_t) and g.meta["cold"] is True


def test_model_probe_is_the_seed_zero_generators_probe():
    m = WorkloadModel()
    assert fit_mod.model_probe(m) == Generator(m, duration_s=1.0, seed=0).probe
    assert fit_mod.model_probe(m) != Generator(m, duration_s=1.0, seed=1).probe


# --- the calibration searches on a stand-in generator (fast; the real ones: the slow tests above) -------------
def _stand_in(monkeypatch, calls, true_rate=2.0, true_length=300.0, per_seed=0.1):
    """Generated 'traces' whose request count is 10 x rate / ``true_rate`` (seeds spread +-``per_seed`` around
    their mean) and whose blocks per request are 4 sqrt(first-message tokens / ``true_length``); demand is the
    references / 100 s. The trace: 10 requests of 4 blocks. So the requests ratio is rate factor / 2 and the
    blocks-per-request ratio sqrt(length factor x 100 / 300) for a model of 100 first-message tokens."""
    def many(model, trace, seeds, cold):
        seeds = list(seeds)
        calls.append((model.arrivals.rate, model.prompts.first_user_tokens, seeds, cold))
        mid = (seeds[0] + seeds[-1]) / 2
        for s in seeds:
            n = 10 * model.arrivals.rate / true_rate * (1 + per_seed * (s - mid))
            b = 4.0 * math.sqrt(model.prompts.first_user_tokens / true_length)
            yield SimpleNamespace(n_requests=n, timestamp_s=None, blocks_per_request=np.array([n * b]))
    from kvbench.analysis.curves import residence

    monkeypatch.setattr(residence, "mean_demand", lambda times, refs: float(np.sum(refs)) / 100.0)
    monkeypatch.setattr(fit_mod, "_generate_many", many)
    return make_trace(np.arange(10.0), [[1, 2, 3, 4]] * 10)


import math  # noqa: E402


def test_calibrate_demand_fixed_point_on_the_rate_and_secant_on_the_length(monkeypatch):
    """By hand from (1, 1): requests ratio 0.5, blocks ratio sqrt(1/3) = 0.5774. The rate's fixed point gives
    rate x 2 (then exact); the length's first step is 1 / 0.5774 = sqrt 3 (ratio (sqrt 3 / 3)^0.5 = 0.7598),
    then secant steps through (1, 4 x 0.5774) and (sqrt 3, 4 x 0.7598) toward 4 blocks per request: 2.6955,
    then 2.9625, whose ratio 0.99372 is within 1%: four steps, the last kept."""
    calls = []
    tr = _stand_in(monkeypatch, calls)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    out, info = fit_mod.calibrate_demand(tr, m, seeds=8, cold=False)
    st = info["steps"]
    assert [s["rate_factor"] for s in st] == [1.0, 2.0, 2.0, 2.0]
    assert [s["requests_ratio"] for s in st] == [0.5, 1.0, 1.0, 1.0]
    r0, r1 = math.sqrt(1 / 3), (math.sqrt(3) / 3) ** 0.5
    assert st[0]["length_factor"] == 1.0 and st[0]["demand_per_request_ratio"] == pytest.approx(r0, rel=1e-12)
    assert st[1]["length_factor"] == pytest.approx(math.sqrt(3), rel=1e-12)
    assert st[1]["demand_per_request_ratio"] == pytest.approx(r1, rel=1e-12)
    l2 = math.sqrt(3) + (4 - 4 * r1) * (math.sqrt(3) - 1) / (4 * r1 - 4 * r0)
    assert st[2]["length_factor"] == pytest.approx(l2, rel=1e-12) == pytest.approx(2.69548385, rel=1e-8)
    r2 = math.sqrt(l2 / 3)
    l3 = l2 + (4 - 4 * r2) * (l2 - math.sqrt(3)) / (4 * r2 - 4 * r1)
    assert st[3]["length_factor"] == pytest.approx(l3, rel=1e-12) == pytest.approx(2.9624548, rel=1e-7)
    assert info["rate_factor"] == 2.0 and info["length_factor"] == st[3]["length_factor"]
    assert info["demand_per_request_ratio"] == pytest.approx(math.sqrt(l3 / 3), rel=1e-12)
    assert info["seeds"] == 8 and info["first_seed"] == 1000
    assert all(c[2] == list(range(1000, 1008)) and c[3] is False for c in calls) and len(calls) == 4
    assert out.arrivals.rate == 2.0 and out.prompts.first_user_tokens == pytest.approx(100.0 * l3, rel=1e-12)


def test_calibrate_demand_brackets_from_above_and_clips_the_start(monkeypatch):
    """Start (4, 20): the length factor is clipped to 8. Requests ratio 2 and blocks ratio sqrt(8 / 3) > 1: both
    factors are upper brackets; rate 4 / 2 = 2, length 8 / sqrt(8/3) = sqrt 24; then a secant step between
    (8, 4 sqrt(8/3)) and (sqrt 24, 4 (sqrt 24 / 3)^0.5). Seeds default to calibration_seeds: 64 for a
    10-request trace (64,000 / 10, at most 64), from seed + 1000."""
    calls = []
    tr = _stand_in(monkeypatch, calls)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    _, info = fit_mod.calibrate_demand(tr, m, seed=5, cold=True, start=(4.0, 20.0))
    st = info["steps"]
    assert (st[0]["rate_factor"], st[0]["length_factor"], st[0]["requests_ratio"]) == (4.0, 8.0, 2.0)
    assert (st[1]["rate_factor"], st[1]["requests_ratio"]) == (2.0, 1.0)
    assert st[1]["length_factor"] == pytest.approx(math.sqrt(24.0), rel=1e-12)
    b0, b1 = 4 * math.sqrt(8 / 3), 4 * (math.sqrt(24.0) / 3) ** 0.5
    l2 = math.sqrt(24.0) + (4 - b1) * (math.sqrt(24.0) - 8) / (b1 - b0)
    assert st[2]["length_factor"] == pytest.approx(l2, rel=1e-12)
    assert info["seeds"] == 64 and info["first_seed"] == 1005
    assert calls[0][2] == list(range(1005, 1069)) and calls[0][3] is True


def test_calibrate_demand_keeps_the_first_of_equally_bad_steps(monkeypatch):
    """Blocks per request that no length factor changes (2 against the trace's 4): the ratio stays 0.5, the
    secant has no slope, so each step is the fixed point inside the bracket: 2, 4, then 8 is the bracket's end,
    so the geometric midpoints sqrt(4 x 8), sqrt(sqrt 32 x 8), ... All 8 steps are equally bad (0.5): the first,
    (1, 1), is kept. (8 requests, demand = references / 64 s: every ratio is exact in binary.)"""
    from kvbench.analysis.curves import residence

    monkeypatch.setattr(residence, "mean_demand", lambda times, refs: float(np.sum(refs)) / 64.0)
    monkeypatch.setattr(fit_mod, "_generate_many", lambda model, trace, seeds, cold: (
        SimpleNamespace(n_requests=8 * model.arrivals.rate / 2.0, timestamp_s=None,
                        blocks_per_request=np.array([2.0 * 8 * model.arrivals.rate / 2.0])) for _ in seeds))
    tr = make_trace(np.arange(8.0), [[1, 2, 3, 4]] * 8)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    out, info = fit_mod.calibrate_demand(tr, m, seeds=4, cold=False)
    lengths = [s["length_factor"] for s in info["steps"]]
    s32 = math.sqrt(32.0)
    assert len(lengths) == 8 and lengths[:3] == [1.0, 2.0, 4.0]
    assert lengths[3] == pytest.approx(s32, rel=1e-12) and lengths[4] == pytest.approx(math.sqrt(s32 * 8), rel=1e-12)
    assert all(s["demand_per_request_ratio"] == 0.5 for s in info["steps"])
    assert (info["rate_factor"], info["length_factor"], info["requests_ratio"]) == (1.0, 1.0, 0.5)
    assert out == m


def test_calibrate_demand_counts_a_seed_without_requests_and_a_nan_demand_as_nothing(monkeypatch):
    """Two seeds: the first yields no trace (None), or a trace whose demand is NaN; the second 5 requests
    (rate 1, true rate 2) of 4 sqrt(1/3) blocks. Requests ratio: (0 + 5) / 2 / 10 = 0.25, or (5 + 5) / 2 / 10 =
    0.5; blocks ratio: demand (0 + 5 b / 100) / 2 / 0.4 over the requests ratio."""
    calls = []
    tr = _stand_in(monkeypatch, calls)
    b = 4 * math.sqrt(1 / 3)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    for first, r_n in ((None, 0.25), (SimpleNamespace(n_requests=5.0, timestamp_s=None,
                                                       blocks_per_request=np.array([np.nan])), 0.5)):
        monkeypatch.setattr(fit_mod, "_generate_many", lambda model, trace, seeds, cold, first=first: iter([
            first, SimpleNamespace(n_requests=5.0, timestamp_s=None, blocks_per_request=np.array([5.0 * b]))]))
        _, info = fit_mod.calibrate_demand(tr, m, seeds=2, cold=False)
        s = info["steps"][0]
        assert s["requests_ratio"] == r_n
        assert s["demand_per_request_ratio"] == pytest.approx(5 * b / 100 / 2 / 0.4 / r_n, rel=1e-12)
    # no seed generates a request: both ratios are floored at 0.001 (the next rate factor is then x 1000)
    monkeypatch.setattr(fit_mod, "_generate_many", lambda model, trace, seeds, cold: iter([None, None]))
    _, info = fit_mod.calibrate_demand(tr, m, seeds=2, cold=False)
    assert info["steps"][0]["requests_ratio"] == 0.001 and info["steps"][0]["demand_per_request_ratio"] == 0.001
    assert info["steps"][1]["rate_factor"] == 1000.0


def test_calibrate_demand_of_a_trace_without_blocks_scales_the_rate_only(monkeypatch):
    calls = []
    _stand_in(monkeypatch, calls)
    tr = make_trace(np.arange(10.0), [[]] * 10)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    _, info = fit_mod.calibrate_demand(tr, m, seeds=1, cold=False)
    assert [s["demand_per_request_ratio"] for s in info["steps"]] == [1.0, 1.0]
    assert info["rate_factor"] == 2.0 and info["length_factor"] == 1.0 and info["seeds"] == 1


def test_inside_a_bracket_or_its_midpoint():
    assert fit_mod._inside(3.0, [1.0, 5.0]) == 3.0
    assert fit_mod._inside(1.0, [1.0, 4.0]) == 2.0 and fit_mod._inside(4.0, [1.0, 4.0]) == 2.0   # ends: sqrt(1 x 4)
    assert fit_mod._inside(2.0, [3.0, math.inf]) == 6.0                                        # open above: x 2
    assert fit_mod._inside(-1.0, [0.0, 6.0]) == 3.0                                            # from 0: / 2


def _reuse_stand_ins(monkeypatch, objective):
    """calibrate_reuse with calibrate_demand replaced by the identity (factors: the model's turns and think time,
    so each call's start shows the previous call's point) and the scorer by ``objective(turns, think)``."""
    demand_calls, scorer = [], {}

    def demand(trace, model, seed=0, seeds=None, cold=None, tick=None, start=(1.0, 1.0), lengths=True):
        demand_calls.append((model.sessions.turns_mean, model.sessions.think_time_s, seed, seeds, cold, start))
        return model, {"rate_factor": model.sessions.turns_mean, "length_factor": model.sessions.think_time_s}

    class Scorer:
        def __init__(self, trace, seeds, seed, cold):
            scorer.update(seeds=seeds, seed=seed, cold=cold)

        def __call__(self, m):
            return objective(m.sessions.turns_mean, m.sessions.think_time_s)
    monkeypatch.setattr(fit_mod, "calibrate_demand", demand)
    monkeypatch.setattr(fit_mod, "_Scorer", Scorer)
    return demand_calls, scorer


def test_calibrate_reuse_golden_section_along_both_then_turns_alone(monkeypatch):
    """Objective 1.5 + 4 (ln tf - ln 2)^2 + 3 (ln kf - ln 3)^2 on the factors tf, kf of turns 2 and think 10 s.
    Pass 1, along (1, 1) in log factors within [ln 0.5, ln 8]: the golden points c = ln 8 - g ln 16 (x1.44179)
    and e = ln 0.5 + g ln 16 (x2.77432), g = (sqrt 5 - 1) / 2; f(c) > f(e), so the bracket keeps [c, ln 8] and
    adds x4.15753; then [c, 4.15753] adds x2.16064, then x1.85131; the best, x2.16064 on both (objective 1.847 from
    7.043 at the start), is taken. Pass 2, along turns alone from there: the same two golden points x1.44179 and
    x2.77432 (the bracket is the turns range again), then x0.96211 and x1.85131 (the fifth point, x2.16064, is
    pass 1's: not evaluated again); nothing better, so the gain (>= 1) ends the search: 10 evaluations. Each
    calibrate_demand starts from the previous one's factors; 16 seeds for 4,000 requests, the scorer's from
    seed + 2000."""
    calls, scorer = _reuse_stand_ins(monkeypatch, lambda turns, think: 1.5 + 4 * math.log(turns / 4.0) ** 2
                                     + 3 * math.log(think / 30.0) ** 2)
    m = WorkloadModel(sessions=Sessions(turns_mean=2.0, think_time_s=10.0))
    out, info = fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, seed=3, cold=False)
    tf = [c[0] / 2.0 for c in calls]
    kf = [c[1] / 10.0 for c in calls]
    assert tf == pytest.approx([1.0, 1.44179, 2.77432, 4.15753, 2.16064, 1.85131, 1.44179, 2.77432, 0.96211,
                                1.85131], abs=1e-5)
    assert kf == pytest.approx([1.0, 1.44179, 2.77432, 4.15753, 2.16064, 1.85131] + [2.16064] * 4, abs=1e-5)
    g = (math.sqrt(5.0) - 1.0) / 2.0
    assert tf[1] == pytest.approx(8.0 / 16.0 ** g, rel=1e-12) and tf[2] == pytest.approx(0.5 * 16.0 ** g, rel=1e-12)
    assert [c[5] for c in calls] == [(1.0, 1.0)] + [(c[0], c[1]) for c in calls[:-1]]
    assert {(c[2], c[3], c[4]) for c in calls} == {(3, 16, False)} and scorer == {"seeds": 16, "seed": 2003,
                                                                                   "cold": False}
    assert info["turns_factor"] == info["think_factor"] == 2.160636            # rounded to 6 decimals
    assert info["evaluations"] == 10 and info["objective"] == pytest.approx(
        1.5 + 4 * math.log(2.160636 / 2) ** 2 + 3 * math.log(2.160636 / 3) ** 2, rel=1e-5)
    assert info["objective_start"] == pytest.approx(1.5 + 4 * math.log(2) ** 2 + 3 * math.log(3) ** 2, rel=1e-12)
    assert info["seeds"] == 16 and info["first_seed"] == 2003
    assert out.sessions.turns_mean == pytest.approx(4.321272) and out.sessions.think_time_s == pytest.approx(21.60636)


def test_calibrate_reuse_stops_at_the_goal_and_when_a_line_search_gains_nothing(monkeypatch):
    """An objective of 1 (the goals met) at the measured point: one evaluation. A flat 1.5: the first line search
    (two golden points and three more) finds nothing better, gain 1 > 0.9: 6 evaluations, the measured point
    kept (the first of equals)."""
    calls, _ = _reuse_stand_ins(monkeypatch, lambda turns, think: 1.0)
    m = WorkloadModel(sessions=Sessions(turns_mean=2.0, think_time_s=10.0))
    out, info = fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, cold=False)
    assert info["evaluations"] == 1 and len(calls) == 1 and out == m
    calls, _ = _reuse_stand_ins(monkeypatch, lambda turns, think: 1.5)
    out, info = fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, cold=False)
    assert info["evaluations"] == 6 and (info["turns_factor"], info["think_factor"]) == (1.0, 1.0) and out == m
    assert info["first_seed"] == 2000


def test_search_seeds_are_64000_requests_within_8_and_32():
    assert [fit_mod._search_seeds(SimpleNamespace(n_requests=n)) for n in (4000, 1000, 10_000, 0)] == [16, 32, 8, 32]


def test_with_sessions_scales_turns_and_think_time_turns_at_least_one():
    m = WorkloadModel(sessions=Sessions(turns_mean=1.5, think_time_s=10.0))
    assert (fit_mod.with_sessions(m, 0.5, 3.0).sessions.turns_mean, fit_mod.with_sessions(m, 0.5, 3.0).sessions.think_time_s) == (1.0, 30.0)
    assert fit_mod.with_sessions(m, 2.0, 0.5).sessions.turns_mean == 3.0


def _score_stand_ins(monkeypatch, ticks_each=1, curve=None):
    """fit_and_score with its scoring and calibrations replaced: goodness_over_seeds ticks ``seeds`` x
    ``ticks_each`` times and reports a curve MAE (``curve(model)``), each calibration ticks once, and the scorer
    rates a model with length quantiles 3, without 2 (so the lognormal lengths are kept)."""
    seen = {"goodness": [], "demand": [], "reuse": []}

    def goodness(trace, model, seeds=3, seed=0, tick=None):
        seen["goodness"].append((seeds, seed, bool(model.prompts.first_user_quantiles)))
        for _ in range(max(1, seeds) * ticks_each):
            if tick is not None:
                tick()
        mae = curve(model) if curve is not None else 0.01
        return {"curve_mae": mae, "curve_max_error": 0.03, "dwpd_error_mean": 0.01, "dwpd_error_max": 0.02,
                "dwpd_signed_mean": -0.1, "dwpd_error_of_seed_mean": None}

    def demand(trace, model, seed=0, seeds=None, cold=None, tick=None, start=(1.0, 1.0), lengths=True):
        seen["demand"].append((seed, seeds))
        if tick is not None:
            tick()
        return model, {"rate_factor": 1.25, "length_factor": 0.75, "seeds": 64, "first_seed": 1000 + seed}

    def reuse(trace, model, seed=0, cold=None, tick=None, lengths=True):
        seen["reuse"].append(seed)
        if tick is not None:
            tick()
        return model, {"turns_factor": 2.0, "think_factor": 3.0}

    class Scorer:
        def __init__(self, trace, seeds, seed, cold):
            pass

        def both(self, m):
            return 0.0, 3.0 if m.prompts.first_user_quantiles else 2.0
    gen = {"seeds": 3, "dwpd_error_mean": 0.01, "dwpd_error_max": 0.02, "dwpd_error_worst": 0.03, "curve_mae": 0.01,
           "per_trace": [{"dwpd_error_max": e} for e in (0.01, 0.02, 0.03)]}
    for name, f in (("goodness_over_seeds", goodness), ("calibrate_demand", demand), ("calibrate_reuse", reuse),
                    ("_Scorer", Scorer), ("long_run", lambda trace, model, seed=0, cold=None: (model, 7200.0, None,
                                                                                                None)),
                    ("gen_check", lambda trace, model, duration, seeds=3, seed=0: gen),
                    ("source_noise", lambda trace, model, seed=0, cold=None, gen=None: None)):
        monkeypatch.setattr(fit_mod, name, f)
    return seen


def _ten_follow_ups():
    return _sessions_trace([(3000.0 * k, [2.0 ** k]) for k in range(10)])


def test_fit_and_score_progress_counts_to_its_announced_total(monkeypatch):
    """Two length representations (10 follow-ups: measured quantiles, and lognormals), 3 seeds (the default),
    calibrated (the default): each representation is scored on 3 traces and calibrated in up to 8 steps (11 x 2),
    then the reuse search's 2 + 3 passes x (3 + 3) evaluations, 8 demand steps, 3 traces scored, 3 gen-check
    traces and 2 more steps (the long run, the source's noise): 22 + 36 = 58. The stand-ins tick 3 + 1 per
    representation, then 1 (reuse) + 1 (demand) + 3 (scores), fit_and_score itself 1 + 3 + 1: 18; the bar is then
    filled to 58."""
    seen = _score_stand_ins(monkeypatch)
    calls = []
    res, good = fit_mod.fit_and_score(_ten_follow_ups(), progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, 58) and calls[1:-1] == [(k, 58) for k in range(1, 19)] and calls[-1] == (58, 58)
    assert seen["goodness"] == [(3, 0, True), (3, 0, False), (3, 0, False)]     # both, then the kept lognormal
    assert seen["demand"] == [(0, 32), (0, 32), (0, None)] and seen["reuse"] == [0]
    assert res.observed["length_distributions"] == "lognormal"
    assert res.observed["score_by_lengths"] == {"empirical": 3.0, "lognormal": 2.0}
    c = res.model.calibration
    assert (c.rate_factor, c.length_factor, c.turns_factor, c.think_factor, c.seeds, c.first_seed) == \
        (1.25, 0.75, 2.0, 3.0, 64, 1000)
    assert res.observed["calibration"]["reuse_search"] == {"turns_factor": 2.0, "think_factor": 3.0}
    assert good["before_calibration"]["dwpd_error_max"] == 0.02 and good["before_calibration"]["curve_mae"] == 0.01


def test_fit_and_score_progress_without_calibration_and_past_its_total(monkeypatch):
    """calibrate=False, seeds 2, seed 5: 2 traces per representation, total 4, reached by the ticks (no extra
    fill); the representation with the lower score (curve MAE / 0.02 here, above DWPD error 0.02 / 0.05: 0.5 lognormal, 1.5 measured) kept.
    Stand-ins ticking 3 times a trace overrun the total: the total shown grows with the count."""
    _score_stand_ins(monkeypatch, curve=lambda m: 0.03 if m.prompts.first_user_quantiles else 0.01)
    calls = []
    res, good = fit_mod.fit_and_score(_ten_follow_ups(), seeds=2, seed=5, calibrate=False,
                                      progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    assert res.model.calibration is None and res.observed["length_distributions"] == "lognormal"
    assert res.observed["score_by_lengths"] == {"empirical": pytest.approx(1.5), "lognormal": pytest.approx(0.5)}
    _score_stand_ins(monkeypatch, ticks_each=3)
    calls = []
    fit_mod.fit_and_score(_ten_follow_ups(), seeds=1, calibrate=False, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 2), (1, 2), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]


def test_dwpd_error_where_both_tiers_turn_over_by_hand():
    """Original: keys 1..10 in a loop, one a second: an LRU of C < 10 blocks misses every reference (W = 1
    block/s) and one of 10 or more never evicts. Generated: 1, 2, 1, 3, 1, 4, 1, 5 in a loop: C = 1 misses all
    (W = 1), C = 2..4 hit every other reference (key 1: W = 0.5), C >= 5 never evict. Both turn over at C = 1..4:
    relative errors 0, 0.5, 0.5, 0.5 (the generated writes half); mean 0.375, max 0.5, signed mean -0.375."""
    o = make_trace(np.arange(100.0), [[1 + i % 10] for i in range(100)])
    pat = [1, 2, 1, 3, 1, 4, 1, 5]
    g = make_trace(np.arange(160.0), [[pat[i % 8]] for i in range(160)])
    caps = np.arange(1.0, 13.0)
    assert fit_mod.dwpd_error(o, g, caps) == {"dwpd_error_mean": 0.375, "dwpd_error_max": 0.5, "dwpd_points": 4,
                                              "dwpd_signed_mean": -0.375}
    assert fit_mod.dwpd_error(g, o, caps) == {"dwpd_error_mean": 0.75, "dwpd_error_max": 1.0, "dwpd_points": 4,
                                              "dwpd_signed_mean": 0.75}
    assert fit_mod.dwpd_error(o, o, np.array([20.0, 30.0])) == {"dwpd_error_mean": None, "dwpd_error_max": None,
                                                                "dwpd_points": 0, "dwpd_signed_mean": None}


def test_goodness_over_seeds_means_worsts_and_the_seed_mean_write_rate(monkeypatch):
    """The trace: keys 1..10 in a loop (W = 1 block/s at C = 1..9, which turn over; capacities 1..10). Two seeds'
    goodness (stand-ins): curve MAE 0.01 and 0.03 (mean 0.02, worst 0.03); the DWPD errors and the KS distance
    of the second seed are None (not counted); their write rates 1.5 and 0.7 (0.9 at C = 1), the second not
    turned over at C = 9: the seeds' mean W is 1.1 (1.2 at C = 1) at C = 1..8, errors 0.2 and 7 x 0.1."""
    o = make_trace(np.arange(100.0), [[1 + i % 10] for i in range(100)])
    caps = np.arange(1.0, 11.0)
    seen = []

    def goodness(trace, model, seed=0, cold=None, common_caps=None):
        seen.append((seed, cold, common_caps.tolist()))
        first = seed == 7
        w = np.full(10, 1.5) if first else np.r_[0.9, np.full(9, 0.7)]
        turned = np.ones(10, bool) if first else np.r_[np.ones(8, bool), False, True]
        return {"curve_mae": 0.01 if first else 0.03, "curve_max_error": 0.05 if first else 0.07,
                "dwpd_error_mean": 0.1 if first else None, "dwpd_error_max": 0.2 if first else None,
                "dwpd_signed_mean": -0.1 if first else None, "reuse_time_ks": 0.3 if first else None,
                "capacity_range_blocks": [1.0, 10.0 + seed], "curve": {"seed": seed}, "seed": seed,
                "common": {"write_blocks_per_s": w, "turned_over": turned}}
    monkeypatch.setattr(fit_mod, "goodness", goodness)
    ticks = []
    out = fit_mod.goodness_over_seeds(o, WorkloadModel(), seeds=2, seed=7, tick=lambda: ticks.append(1))
    assert [s[0] for s in seen] == [7, 8] and all(s[2] == caps.tolist() for s in seen) and len(ticks) == 2
    assert out["curve_mae"] == pytest.approx(0.02) and out["curve_max_error"] == pytest.approx(0.06)
    assert (out["dwpd_error_mean"], out["dwpd_error_max"], out["dwpd_signed_mean"]) == (0.1, 0.2, -0.1)
    assert out["reuse_time_ks"] == 0.3 and out["worst"] == {"curve_mae": 0.03, "curve_max_error": 0.07,
                                                            "reuse_time_ks": 0.3}
    e = out["dwpd_error_of_seed_mean"]
    assert e["points"] == 8 and e["max"] == pytest.approx(0.2) and e["mean"] == pytest.approx(0.9 / 8)
    assert e["signed_mean"] == pytest.approx(0.9 / 8)
    assert out["capacity_range_blocks"] == [1.0, 17.0] and out["curve"] == {"seed": 7}
    assert [s["seed"] for s in out["seeds"]] == [7, 8] and "curve" not in out["seeds"][0]
    assert out["cold_start"] is False and all(s[1] is False for s in seen)
    # every seed None: None; no capacity turned over in every trace: no seed-mean error
    monkeypatch.setattr(fit_mod, "goodness", lambda trace, model, seed=0, cold=None, common_caps=None: {
        **goodness(trace, model, 8, cold, common_caps), "common": {"write_blocks_per_s": np.ones(10),
                                                                   "turned_over": np.zeros(10, bool)}})
    out = fit_mod.goodness_over_seeds(o, WorkloadModel(), seeds=0)
    assert out["dwpd_error_mean"] is None and out["reuse_time_ks"] is None and out["worst"]["reuse_time_ks"] is None
    assert out["dwpd_error_of_seed_mean"] is None and len(out["seeds"]) == 1


def _loop(n, gap, k=10):
    """n one-block requests ``gap`` s apart cycling over keys 1..k."""
    return make_trace(gap * np.arange(float(n)), [[1 + i % k] for i in range(n)])


def test_scorer_on_the_seeds_mean_write_rate_and_on_each_traces_own(monkeypatch):
    """The trace: 100 requests over keys 1..10 a second apart (W = 1 at C = 1..9; LRU hit ratio 0 below 10
    blocks, 90/100 at 10). Generated: the same at 0.5 s and 2 s (W = 2 and 0.5, the same hit ratios), and its
    first 15 requests (W = 1; after the first eviction at reference C + 1, 14 - C misses: turned over for
    C <= 7; hit ratio 5/15 at 10 blocks). Capacities where all turned over: 1..7. The seeds' mean W is 7/6: error
    1/6, / 5% = 3.33; each trace's own worst errors 1, 0.5, 0: mean 0.5, / 5% = 10. The curve MAE (0.0567 / 3,
    / 0.02 = 0.94) is below both."""
    gs = [_loop(100, 0.5), _loop(100, 2.0), _loop(15, 1.0)]
    seen = []

    def many(model, trace, seeds, cold):
        seen.append((list(seeds), cold))
        return iter(gs)
    monkeypatch.setattr(fit_mod, "_generate_many", many)
    s = fit_mod._Scorer(_loop(100, 1.0), 3, 2005, False)
    assert s.caps.tolist() == list(range(1, 11)) and s.hit.tolist() == [0.0] * 9 + [0.9]
    both = s.both(WorkloadModel())
    assert both == (pytest.approx(10 / 3), pytest.approx(10.0)) and s(WorkloadModel()) == both[0]
    assert seen == [([2005, 2006, 2007], False)] * 2
    # no capacity turned over in all (one block 20 times never evicts): the curve alone, hit ratio 19/20 at every
    # capacity (its cold reference is a miss also above its one distinct block) against 0 (x 9) and 0.9: MAE
    # (9 x 0.95 + 0.05) / 10 = 0.86, / 0.02 = 43
    gs[:] = [make_trace(np.arange(20.0), [[1]] * 20)]
    assert s.both(WorkloadModel()) == (pytest.approx(43.0), pytest.approx(43.0))
    # capacities the generated traces turn over and the trace does not are not compared: the trace 1, 2, 1, 3,
    # 1, 4, 1, 5 in a loop (160 requests a second apart) turns over at C = 1..4 only (W 1, 0.5, 0.5, 0.5); the
    # generated loop of 10 keys at 0.5 s (W = 2) at 1..9: errors 1, 3, 3, 3, / 5% = 60, above the curve MAE
    # (capacities 1..5, its 5 blocks: hit ratios 0, 79/160 x 3 and 155/160 against 0: 0.49, / 0.02 = 24.5)
    pat = [1, 2, 1, 3, 1, 4, 1, 5]
    s2 = fit_mod._Scorer(make_trace(np.arange(160.0), [[pat[i % 8]] for i in range(160)]), 1, 0, False)
    gs[:] = [_loop(100, 0.5)]
    assert s2.both(WorkloadModel()) == (pytest.approx(60.0), pytest.approx(60.0))
    # a seed with no request: infinitely bad
    gs[:] = [None]
    assert s.both(WorkloadModel()) == (math.inf, math.inf)


def test_scorer_hit_ratios_of_a_one_reference_trace():
    """A cold reference is a miss at every capacity, also above the trace's distinct blocks (the capacity grid
    reaches 2 blocks for one): one block read twice hits 1/2 at 1 and 2 blocks (not 2/2 at 2: the bug this found,
    the cold reference's stack distance distinct + 1 = 2 counted as a hit); a lone reference never hits."""
    s = fit_mod._Scorer(make_trace([0.0], [[1]]), 1, 0, True)
    assert s.caps.tolist() == [1.0, 2.0] and s.hit.tolist() == [0.0, 0.0]
    s = fit_mod._Scorer(make_trace([0.0, 1.0], [[1], [1]]), 1, 0, True)
    assert s.hit.tolist() == [0.5, 0.5]


def test_generate_like_turns_monday_back_to_sunday_and_refuses_an_empty_window():
    """A 120 s warm-up before Monday 00:00 starts the generator on Sunday (6) at 23:58; a model whose rate puts no
    request in the window is refused."""
    probe = (2.0, 3.0)
    tr = make_trace([0.0, 3600.0], [[1], [2]])
    m = _warm_model(weekday=0, turns_mean=3.0, think_time_s=40.0, think_sigma=0.0)
    shifted = replace(m, arrivals=replace(m.arrivals, start_hour=24.0 - 120.0 / 3600.0, start_weekday=6))
    want_t, _ = _cut(shifted, 120.0, 3600.0, 4, probe)
    assert np.array_equal(fit_mod.generate_like(m, tr, seed=4, cold=False, probe=probe).timestamp_s, want_t)
    none = replace(m, arrivals=replace(m.arrivals, rate=1e-9))
    with pytest.raises(SpecError, match="generated no requests"):
        fit_mod.generate_like(none, tr, seed=4, cold=True, probe=probe)


def test_operational_time_by_hand():
    """Weekends at 0.5 of weekdays, from Monday 00:00: intensity 7/6 on weekdays and 7/12 on weekends (mean 1 over
    the week). Integrated by trapezoids on a 60 s grid: 5 days of 7/6 less half a step at Saturday 00:00 (the grid
    point there is the weekend's: (7/6 - 7/12) x 60 / 2 = 17.5 s), then a day of 7/12."""
    m = WorkloadModel(arrivals=Arrivals(weekend_factor=0.5))
    got = fit_mod._operational_time(m, np.array([0.0, 5 * DAY, 6 * DAY]))
    assert got.tolist() == pytest.approx([0.0, 5 * DAY * 7 / 6 - 17.5, 5 * DAY * 7 / 6 - 17.5 + DAY * 7 / 12],
                                         rel=1e-12)
    assert fit_mod._operational_time(m, np.zeros(0)).size == 0


def test_a_day_with_100_sessions_fits_a_daily_cycle_99_do_not():
    starts = np.arange(100) * (DAY / 99)
    res = fit_mod.fit_model(make_trace(starts, [[k + 1] for k in range(100)]))
    assert not _warned(res, "arrivals.diurnal_amplitude") and res.observed["sessions"] == 100
    res = fit_mod.fit_model(make_trace(starts[:99] * 99 / 98, [[k + 1] for k in range(99)]))
    assert any(w.startswith("arrivals.diurnal_amplitude:") and "99 sessions recovered" in w for w in res.warnings)


def test_a_turn_exactly_half_an_hour_later_is_a_think_time():
    res = fit_mod.fit_model(_sessions_trace([(0.0, [1800.0]), (100.0, [1800.5])]))
    assert res.observed["returns"] == 1 and res.observed["visits"] == 3


def test_system_prompt_share_and_no_documents_by_hand():
    """Sessions [7, 1], [7, 2], [7, 3] and [9, 4]: block 7 is a system prompt of 3 of 4 sessions (probability
    0.75); no session goes deeper than it, so no document (probability 0, 0 tokens)."""
    from tests.conftest import chained_trace

    c = chained_trace([[7, 1], [7, 2], [7, 3], [9, 4]])
    t = make_trace([0.0, 10.0, 20.0, 30.0], [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(4)])
    res = fit_mod.fit_model(t)
    p = res.model.prompts
    assert res.observed["system_prompts_seen"] == 1 and p.system_probability == 0.75
    assert res.observed["documents_seen"] == 0 and p.documents == 0
    assert p.document_probability == 0.0 and p.document_tokens == 0.0


def test_follow_ups_that_add_nothing_have_zero_user_tokens():
    """10 sessions whose one follow-up re-sends the same one-block prompt: growth 0, user tokens 0."""
    rows = []
    for k in range(10):
        rows += [(3000.0 * k, [k + 1]), (3000.0 * k + 5.0, [k + 1])]
    res = fit_mod.fit_model(make_trace([r[0] for r in rows], [r[1] for r in rows]))
    assert res.observed["follow_ups"] == 10 and res.model.prompts.user_tokens == 0.0
    assert res.model.prompts.append_output           # growth - the previous output: median 0, >= 0: appended


def test_calibration_seeds_are_64000_requests_within_8_and_64():
    assert [fit_mod.calibration_seeds(SimpleNamespace(n_requests=n)) for n in (4000, 100_000, 10, 0)] == \
        [16, 8, 64, 64]


def test_goodness_over_seeds_defaults_to_three_seeds_from_zero(monkeypatch):
    seen = []

    def goodness(trace, model, seed=0, cold=None, common_caps=None):
        seen.append(seed)
        return {"curve_mae": 0.0, "curve_max_error": 0.0, "dwpd_error_mean": None, "dwpd_error_max": None,
                "dwpd_signed_mean": None, "reuse_time_ks": None, "capacity_range_blocks": [1.0, 2.0], "curve": {},
                "common": {"write_blocks_per_s": np.ones(10), "turned_over": np.ones(10, bool)}}
    monkeypatch.setattr(fit_mod, "goodness", goodness)
    fit_mod.goodness_over_seeds(_loop(100, 1.0), WorkloadModel())
    assert seen == [0, 1, 2]


def test_source_noise_of_two_draws_a_trace_and_it_at_half_speed(monkeypatch):
    """The model 'draws' the trace itself and the trace at half speed: W and W / 2, mean 0.75 W, so each draw is
    1/3 off their mean at every capacity (+1/3, -1/3): median and 90th percentile of the max errors 1/3, the 95%
    half-width 1.96 x sd(+1/3, -1/3; ddof 1) = 1.96 x sqrt(2) / 3. The draws are the calibration's kind
    (``generate_like`` over the trace's span, seeds from the one given)."""
    tr = _random_trace(seed=3)
    slow = replace(tr, timestamp_s=tr.timestamp_s * 2.0)
    seen = []

    def fake(model, trace, seeds, cold):
        seen.extend(seeds)
        yield from (tr, slow)
    monkeypatch.setattr(fit_mod, "_generate_many", fake)
    n = fit_mod.source_noise(tr, None, seeds=2, seed=4000, cold=True)
    assert seen == [4000, 4001] and n["seeds"] == 2 and n["first_seed"] == 4000
    assert fit_mod.source_noise(tr, None, seeds=2, cold=True)["first_seed"] == 0 and seen[2:] == [0, 1]
    assert n["max_error_median"] == pytest.approx(1 / 3) and n["max_error_p90"] == pytest.approx(1 / 3)
    assert n["band95_median"] == pytest.approx(1.96 * np.sqrt(2) / 3)

    def none(model, trace, seeds, cold):
        yield None
    monkeypatch.setattr(fit_mod, "_generate_many", none)
    assert fit_mod.source_noise(tr, None, seeds=2, cold=True) is None      # a model generating no request


def test_lognormal_and_median_fits_drop_non_positive_samples():
    assert fit_mod._lognormal_fit(np.array([0.0, -1.0, 2.0])) == (2.0, 0.0)
    assert fit_mod._lognormal_fit(np.zeros(3)) == (0.0, 0.0)
    med, sigma = fit_mod._median_fit(np.array([1.0, np.e ** 2, 0.0]))      # logs 0 and 2: median e, std 1
    assert med == pytest.approx(np.e) and sigma == pytest.approx(1.0)
    assert fit_mod._median_fit(np.array([5.0])) == (pytest.approx(5.0), 0.0)


def test_zipf_exponent_by_hand():
    """counts 1000 / r^1.5 (r = 1..5): exponent 1.5; 1000, 10, 1 falls faster than r^-4: clipped to 4; fewer than
    3 items or all equal: the default."""
    assert fit_mod._zipf_exponent(1000.0 / np.arange(1, 6) ** 1.5, 0.7) == pytest.approx(1.5)
    assert fit_mod._zipf_exponent(np.array([1.0, 10.0, 1000.0]), 0.7) == 4.0
    assert fit_mod._zipf_exponent(np.array([5.0, 2.0]), 0.7) == 0.7
    assert fit_mod._zipf_exponent(np.array([3.0, 3.0, 3.0]), 0.7) == 0.7
    assert fit_mod._zipf_exponent(np.array([1.0, 2.0, 3.0, 3.0]), 0.7) == pytest.approx(
        -np.polyfit(np.log([1, 2, 3, 4]), np.log([3.0, 3.0, 2.0, 1.0]), 1)[0])
    # the largest two equal, the smallest not: fitted (ln 3 at ranks 1, 2 and ln 1 at rank 3: least-squares slope
    # Sxy / Sxx = -0.5508 / 0.6173)
    assert fit_mod._zipf_exponent(np.array([1.0, 3.0, 3.0]), 0.7) == pytest.approx(
        -np.polyfit(np.log([1, 2, 3]), np.log([3.0, 3.0, 1.0]), 1)[0]) == pytest.approx(0.8923, abs=1e-4)


def test_goodness_capacities_run_from_one_block():
    """The curve is compared at log-spaced capacities from 1 block to the larger working set (here 10 blocks:
    1..10 at 64 points, rounded and deduplicated)."""
    m = WorkloadModel(block_tokens=512, arrivals=Arrivals(rate=1.0),
                      prompts=Prompts(system_probability=0.0, first_user_tokens=400.0, first_user_sigma=0.0,
                                      output_tokens=1.0, output_sigma=0.0))
    g = fit_mod.goodness(_loop(100, 1.0), m, seed=0, cold=True)
    caps = g["curve"]["capacities_blocks"]
    assert caps[0] == 1.0 and caps == sorted(set(caps)) and g["capacity_range_blocks"][0] == 1.0


def test_context_limit_is_the_longest_prompt_rounded_up_to_a_power_of_two_at_least_8192():
    def fit(tokens, bt=512):
        return fit_mod.fit_model(make_trace([0.0, 1.0], [[1], [2]], tokens=tokens, block_tokens=bt)).model
    assert fit([20_000, 100]).sessions.max_context_tokens == 32_768
    assert fit([1000, 100]).sessions.max_context_tokens == 8192
    assert fit([100, 100], bt=16_384).sessions.max_context_tokens == 16_384


def test_document_probability_is_at_most_one_when_documents_nest():
    """2 groups of five sessions [g, 1, 2, 3, 4, 5], [g, 7], [g, 1, 8], [g, 1, 2, 8], [g, 1, 2, 3, 8] (ids chained by
    prefix; 10 first requests): block g is a system prompt (its sharers show depths 1, 2, 3, 4: the first of the
    equally common, 1); the last three go deeper, each to a document of its own (the founder's first 2, 3, 4
    blocks). Each document counts its sessions and the one that showed it first: (3 + 3) per 5 sessions = 1.2,
    read as probability 1."""
    from tests.conftest import chained_trace

    prompts = [p for g in range(2) for p in ([1000 + g, 1, 2, 3, 4, 5], [1000 + g, 7], [1000 + g, 1, 8],
                                            [1000 + g, 1, 2, 8], [1000 + g, 1, 2, 3, 8])]
    c = chained_trace(prompts)
    t = make_trace(np.arange(10.0) * 10.0, [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]]))
                                           for i in range(10)])
    res = fit_mod.fit_model(t)
    assert res.observed["system_prompts_seen"] == 2 and res.observed["documents_seen"] == 6
    assert res.model.prompts.system_prompt_tokens == (768.0, 768.0)
    assert res.model.prompts.document_probability == 1.0


def test_fit_and_score_progress_with_one_seed_and_the_cold_trace_warning(monkeypatch):
    """seeds = 1, calibrated: (1 + 8) x 2 + 2 + 18 + 8 + 2 x 1 + 2 = 50; the stand-ins and fit_and_score tick
    1 + 1 twice, then 1 + 1 + 1 (long run) + 1 + 1 (one gen-check trace) + 1 (noise): 10, then the fill. A trace
    that starts cold, for which the long run keeps the trace's span: the warning names the long run's errors."""
    _score_stand_ins(monkeypatch)
    calls = []
    fit_mod.fit_and_score(_ten_follow_ups(), seeds=1, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(k, 50) for k in range(11)] + [(50, 50)]
    monkeypatch.setattr(fit_mod, "starts_cold", lambda trace: True)
    check = {"before": {"signed_error_of_seed_mean": [0.82, 1.4], "duration_s": 86_400.0}}
    for gdur, warned in ((None, True), (7200.0, False)):
        monkeypatch.setattr(fit_mod, "long_run", lambda trace, model, seed=0, cold=None, gdur=gdur: (
            model, float(trace.duration_s) if gdur is None else gdur, None, check))
        res, _ = fit_mod.fit_and_score(_ten_follow_ups(), seeds=1)
        w = [x for x in res.warnings if x.startswith("trace gen defaults to the trace's span")]
        assert bool(w) == warned
        assert not w or "writes +82% to +140% of the trace's W(C)" in w[0]


def test_long_run_centres_one_capacity_and_gives_up_at_a_zero_rate(monkeypatch):
    """A cold trace whose default duration is longer than its span: the long run's check at one capacity errs
    +10%: the rate is divided by (2 + 0.1 + 0.1) / 2 = 1.1 and, the check after it within 5%, kept. An error of
    -100% (nothing written) has no rate to centre it: the span and the model as they were. A spread of exactly
    the goal's is centred."""
    checks = []

    def gen_check(trace, model, duration, seeds=3, seed=0):
        checks.append((model.arrivals.rate, duration, seeds, seed))
        return {"signed_error_of_seed_mean": err, "dwpd_error_of_seed_mean": {"max": 0.01}}
    monkeypatch.setattr(fit_mod, "gen_check", gen_check)
    tr = _loop(100, 1.0)                  # 99 s at 1 request/s: 647 spans would hold 64,000; 256 at most
    m = WorkloadModel(arrivals=Arrivals(rate=1.0))
    err = [0.1]
    out, dur, factor, chk = fit_mod.long_run(tr, m, seed=2, cold=True)
    assert dur == 256 * 99.0 and factor == pytest.approx(1 / 1.1) and out.arrivals.rate == pytest.approx(1 / 1.1)
    assert checks == [(1.0, dur, 3, 3002), (pytest.approx(1 / 1.1), dur, 3, 3002)] and set(chk) == {"before", "after"}
    err = [-1.0]
    out, dur, factor, chk = fit_mod.long_run(tr, m, seed=2, cold=True)
    assert (out, dur, factor) == (m, 99.0, None) and set(chk) == {"before"}
    # a long run writing 10% less: the rate is raised (divided by 0.9)
    err = [-0.1]
    out, dur, factor, chk = fit_mod.long_run(tr, m, seed=2, cold=True)
    assert factor == pytest.approx(1 / 0.9) and out.arrivals.rate == pytest.approx(1 / 0.9)
    # a spread exactly the goal's (1 + max = (1 + min) x 1.05 / 0.95) is still centred: rate / ((1 + 1.0526) / 2)
    g = fit_mod.DWPD_GOAL
    err = [0.0, (1.0 + 0.0) * (1.0 + g) / (1.0 - g) - 1.0]
    out, dur, factor, chk = fit_mod.long_run(tr, m, seed=2, cold=True)
    assert dur == 256 * 99.0 and factor == pytest.approx(2.0 / (2.0 + err[1])) and set(chk) == {"before", "after"}


def test_source_noise_by_hand_with_the_cold_start_given(monkeypatch):
    """Two drawn traces of the source's loop at 0.5 s and 2 s (W 2 and 0.5 at C = 1..9): their mean 1.25, errors
    +0.6 and -0.6 at every capacity: max error median and 90th percentile 0.6, 95% band 1.96 x 0.8485 (the sd of
    +-0.6 with ddof 1). The cold start given (True) is the one the draws use, though the trace does not start
    cold."""
    seen = []

    def many(model, trace, seeds, cold):
        seen.append((list(seeds), cold))
        return iter([_loop(100, 0.5), _loop(100, 2.0)])
    monkeypatch.setattr(fit_mod, "_generate_many", many)
    tr = _loop(100, 1.0)
    assert not starts_cold(tr)
    out = fit_mod.source_noise(tr, WorkloadModel(), seeds=2, seed=7, cold=True)
    assert seen == [([7, 8], True)]
    assert out["seeds"] == 2 and out["first_seed"] == 7
    assert out["max_error_median"] == pytest.approx(0.6) and out["max_error_p90"] == pytest.approx(0.6)
    assert out["band95_median"] == pytest.approx(1.96 * 0.6 * math.sqrt(2))


def test_sessions_all_starting_at_one_instant_keep_the_default_burstiness():
    """11 sessions at t = 0 (10 gaps of 0 s; the first comes back 10 s later so the trace has a span): no CV to
    measure, the default kept with a warning."""
    res = fit_mod.fit_model(_sessions_trace([(0.0, [10.0])] + [(0.0, [])] * 10))
    assert res.observed["sessions"] == 11
    assert res.model.arrivals.burstiness == 1.0 and _warned(res, "arrivals.burstiness")


def test_ten_returns_seen_in_a_short_window_are_extrapolated_nine_are_not():
    """Sessions a minute apart, each back an hour later (a 1.2-1.3 h trace, under the 6 h returns need): 10 returns
    seen are enough for the censored fit, 9 are not (the defaults, with warnings)."""
    ten = fit_mod.fit_model(_sessions_trace([(60.0 * k, [3600.0]) for k in range(10)]))
    assert ten.observed["returns_fit"]["returns"] == 10
    assert any(w.startswith("sessions.return_*: extrapolated") for w in ten.warnings)
    assert not _warned(ten, "sessions.return_probability")
    nine = fit_mod.fit_model(_sessions_trace([(60.0 * k, [3600.0]) for k in range(9)]))
    assert _warned(nine, "sessions.return_probability") and nine.model.sessions.return_probability == 0.0


def test_follow_ups_at_the_same_instant_are_a_millisecond_of_think_time():
    res = fit_mod.fit_model(_sessions_trace([(3000.0 * k, [0.0]) for k in range(10)]))
    assert res.observed["follow_ups"] == 10
    assert res.model.sessions.think_time_s == pytest.approx(1e-3) and res.model.sessions.think_sigma == 0.0
    p = res.model.prompts                                  # no shared first block: no system prompt
    assert (p.system_prompts, p.system_probability, p.system_tokens, p.system_sigma) == (1, 0.0, 0.0, 0.0)


def test_calibrate_reuse_runs_all_three_line_searches(monkeypatch):
    """Objective 1.2 + 5 (ln tf - ln 6)^2 + 5 (ln kf - ln 0.6)^2: turns and think pull apart, so each line search
    gains more than 10%. Pass 1 along (1, 1) ends at x1.85131 on both; pass 2 along turns reaches x6.23038; pass
    3 along think from there: the golden points of [0.5, 8] (x1.44179, x2.77432), then x0.96211, x0.74929,
    x0.64202: 16 evaluations, the last point the best."""
    calls, _ = _reuse_stand_ins(monkeypatch, lambda turns, think: 1.2 + 5 * math.log(turns / 12.0) ** 2
                                + 5 * math.log(think / 6.0) ** 2)
    m = WorkloadModel(sessions=Sessions(turns_mean=2.0, think_time_s=10.0))
    _, info = fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, cold=False)
    tf = [c[0] / 2.0 for c in calls]
    kf = [c[1] / 10.0 for c in calls]
    assert info["evaluations"] == 16 and (info["turns_factor"], info["think_factor"]) == (6.23038, 0.642015)
    assert tf[11:] == pytest.approx([6.23038] * 5, abs=1e-5)
    assert kf[11:] == pytest.approx([1.44179, 2.77432, 0.96211, 0.74929, 0.64202], abs=1e-5)


def test_score_is_the_worse_of_dwpd_and_curve_against_their_goals():
    assert fit_mod._score({"curve_mae": 0.01, "dwpd_error_max": 0.1}) == pytest.approx(2.0)     # 0.1 / 5%
    assert fit_mod._score({"curve_mae": 0.03, "dwpd_error_max": None}) == pytest.approx(1.5)    # 0.03 / 0.02


def test_calibration_records_the_long_runs_rate_factor(monkeypatch):
    """The demand calibration's rate x 1.25, then the long run's x 0.5: the model file states x 0.625."""
    _score_stand_ins(monkeypatch)
    monkeypatch.setattr(fit_mod, "long_run", lambda trace, model, seed=0, cold=None: (model, 7200.0, 0.5, None))
    res, _ = fit_mod.fit_and_score(_ten_follow_ups(), seeds=1)
    assert res.model.calibration.rate_factor == 0.625 and res.model.calibration.gen_rate_factor == 0.5


def test_gen_check_compares_only_capacities_the_trace_turned_over():
    """The trace 1, 2, 1, 3, 1, 4, 1, 5 in a loop turns over at C = 1..4 of its capacities 1..5; a loop of 10 keys
    at 0.5 s turns over at all five: 4 points, W 2 against 1, 0.5, 0.5, 0.5: errors 1, 3, 3, 3."""
    pat = [1, 2, 1, 3, 1, 4, 1, 5]
    o = make_trace(np.arange(160.0), [[pat[i % 8]] for i in range(160)])
    out = fit_mod.gen_check(o, WorkloadModel(), 80.0, seeds=1, traces=[_loop(100, 0.5)])
    p = out["per_trace"][0]
    assert p["points"] == 4 and p["dwpd_error_max"] == pytest.approx(3.0) and p["dwpd_error_mean"] == pytest.approx(2.5)
    assert out["capacities_blocks"] == [1.0, 2.0, 3.0, 4.0]


def test_document_zipf_from_each_documents_sharers_plus_the_one_that_showed_it():
    """Under system prompt 7 (12 sessions with nothing else shared make its depth 1), documents [100, 101],
    [200, 201], [300, 301] attached by 4, 3 and 2 sessions: 3, 2 and 1 of them share it with an earlier one, so the
    counts are 4, 3, 2: exponent = -slope of ln(4, 3, 2) on ln(1, 2, 3) = 0.3752 / 0.6173."""
    from tests.conftest import chained_trace

    own = iter(range(1000, 2000))
    prompts = [[7, next(own)] for _ in range(12)]
    for doc, n in ((100, 4), (200, 3), (300, 2)):
        prompts += [[7, doc, doc + 1, next(own)] for _ in range(n)]
    c = chained_trace(prompts)
    t = make_trace(np.arange(len(prompts)) * 10.0, [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]]))
                                                    for i in range(len(prompts))])
    res = fit_mod.fit_model(t)
    assert res.observed["documents_seen"] == 3 and res.model.prompts.documents == 3
    assert res.model.prompts.document_zipf == pytest.approx(
        -np.polyfit(np.log([1, 2, 3]), np.log([4.0, 3.0, 2.0]), 1)[0]) == pytest.approx(0.6077, abs=1e-4)


def test_ten_returns_in_a_long_trace_fit_the_return_time_nine_do_not():
    """Sessions a minute apart, each back 6.5 h later (a trace over the 6 h returns need): 10 returns fit the
    return time (their median 23,400 s, sigma 0), 9 keep the default with a warning."""
    ten = fit_mod.fit_model(_sessions_trace([(60.0 * k, [23_400.0]) for k in range(10)]))
    assert ten.observed["returns"] == 10 and ten.model.sessions.return_time_s == pytest.approx(23_400.0)
    assert ten.model.sessions.return_sigma == 0.0 and not _warned(ten, "sessions.return_time_s")
    nine = fit_mod.fit_model(_sessions_trace([(60.0 * k, [23_400.0]) for k in range(9)]))
    assert _warned(nine, "sessions.return_time_s") and nine.model.sessions.return_time_s == 21_600.0


def test_gen_check_counts_a_generated_traces_cold_references_as_misses_above_its_distinct_blocks():
    """The hit-ratio MAE on the source's capacity grid (1..10 blocks here) of a generated trace with fewer
    distinct blocks (4): its 4 cold references miss at every capacity, 5..10 included. By hand: the source
    (keys 1..10 in a cycle, 100 one-block requests) hits 0 below 10 blocks and 90/100 at 10; the generated one
    (keys 1..4 cycled) 0 below 4 and 96/100 from 4 on: MAE = (6 x 0.96 + 0.06) / 10 = 0.582 (counting the cold
    references as hits from 5 blocks on gave 0.606)."""
    src = make_trace(np.arange(100.0), [[k % 10 + 1] for k in range(100)])
    gen = make_trace(np.arange(100.0), [[k % 4 + 1] for k in range(100)])
    g = gen_check(src, None, 600.0, seeds=1, traces=[gen])
    assert g["curve_mae"] == pytest.approx(0.582)


# --- lengths in the ids' units; first messages by population (issue 31 part 3) -------------------------------
def _chained(rows, tokens=None, block_tokens=512):
    from tests.conftest import chained_trace

    c = chained_trace(rows)
    return make_trace([100.0 * i for i in range(len(rows))],
                      [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(len(rows))],
                      tokens=tokens, block_tokens=block_tokens)


def test_tokens_match_ids_on_nine_in_ten_requests():
    """32-token blocks, 10 one-id requests: 32 stated tokens is ceil(32 / 32) = 1 id, 33 is 2. Nine of ten
    matching is the threshold (0.9); eight is not."""
    rows = [[k] for k in range(1, 11)]
    assert fit_mod.tokens_match_ids(_chained(rows, [32] * 9 + [33], block_tokens=32))
    assert not fit_mod.tokens_match_ids(_chained(rows, [32] * 8 + [33, 33], block_tokens=32))
    assert fit_mod.tokens_match_ids(_chained(rows, [1] * 10, block_tokens=32))          # ceil(1 / 32) = 1


def test_own_lengths_are_measured_in_ids_where_the_stated_tokens_disagree():
    """10 sessions sharing nothing, session k (1..10) of k ids of 32 tokens stated as 50 tokens per id
    (ceil(50 k / 32) is never k): the first messages are (k - 1/2) x 32 tokens, 16, 48, .., 304: mean 160,
    quantiles 16 + 14.4 i (positions 9 i / 20), the top end 2 x 304 - 289.6 = 318.4. Stated as 32 per id, the
    stated tokens are kept: 32 k, mean 176."""
    rows = [[100 * k + j for j in range(k)] for k in range(1, 11)]
    res = fit_mod.fit_model(_chained(rows, [50 * k for k in range(1, 11)], block_tokens=32))
    p = res.model.prompts
    assert res.observed["lengths_in"] == "ids"
    assert p.first_user_tokens == pytest.approx(160.0)
    assert p.first_user_quantiles == pytest.approx([16 + 14.4 * i for i in range(20)] + [318.4])
    same = fit_mod.fit_model(_chained(rows, [32 * k for k in range(1, 11)], block_tokens=32))
    assert same.observed["lengths_in"] == "tokens" and same.model.prompts.first_user_tokens == pytest.approx(176.0)
    assert res.observed["first_messages"] == "pooled"            # no shared prompt: no population to split


def _populations_trace(tokens_per_id=600):
    """P = [7] starts 11 sessions ([7, 1, 1] its founder, 10 sharing it), Q = [5] 6 and R = [6] 4 (rare: under
    MIN_SAMPLES each), and 10 sessions share nothing, the k-th (0..9) of k + 1 ids. 512-token ids stated as
    ``tokens_per_id`` tokens each (600: never ceil(600 n / 512) = n ids, so lengths are measured in ids)."""
    rows = ([[7, 1, 1]] + [[7, 100 + k, 1] for k in range(10)] + [[5, 1]] + [[5, 100 + k] for k in range(5)]
            + [[6, 1, 1]] + [[6, 100 + k, 1] for k in range(3)]
            + [[200 + k] + [300 + j for j in range(k)] for k in range(10)])
    return _chained(rows, [tokens_per_id * len(r) for r in rows])


def test_first_messages_by_population_where_lengths_are_measured_in_ids():
    """In ids, (n - 1/2) x 512 less the prompt's (depth + 1/2) x 512: P's sessions (3 ids) write 512 own tokens,
    Q's (2 ids) 0 (written 1), R's (3 ids) 512, the prompt-less 256 + 512 k. By population: the prompt-less
    sessions' own: mean 2,560, shape std(ln(k + 1/2)), quantiles 256 + 230.4 i (positions 9 i / 20), the top end
    2 x 4,864 - 4,633.6 = 5,094.4; P's (11 sessions) a row of 21 quantiles, all 512, the rare Q and R rows of
    zeros; the pooled first message is Q's and R's only: 6 x 1 and 4 x 512, mean 205.4, shape ln 512 x sqrt(0.6 x
    0.4)."""
    res = fit_mod.fit_model(_populations_trace())
    p = res.model.prompts
    assert res.observed["lengths_in"] == "ids" and res.observed["first_messages"] == "by population"
    assert p.system_prompt_weights == (11.0, 6.0, 4.0) and p.system_probability == pytest.approx(21 / 31)
    assert p.bare_user_tokens == pytest.approx(2560.0)
    assert p.bare_user_sigma == pytest.approx(np.log(np.arange(10) + 0.5).std())
    assert p.bare_user_quantiles == pytest.approx([256 + 230.4 * i for i in range(20)] + [5094.4])
    assert p.system_user_quantiles == (512.0,) * 21 + (0.0,) * 42
    assert p.system_user_tokens == (512.0, 0.0, 0.0)
    assert p.first_user_tokens == pytest.approx(205.4)
    assert p.first_user_sigma == pytest.approx(np.log(512) * np.sqrt(0.24))
    scaled = fit_mod.scale_model(res.model, 1.0, 0.5).prompts
    assert scaled.bare_user_tokens == pytest.approx(1280.0) and scaled.bare_user_quantiles[0] == pytest.approx(128.0)
    assert scaled.system_user_quantiles == (256.0,) * 21 + (0.0,) * 42


def test_first_messages_pooled_as_before_where_the_stated_tokens_agree_with_the_ids():
    """The same sessions stated at 512 tokens per id: own tokens are the stated ones less the prompt's, P's 768,
    Q's 256, R's 768, the prompt-less 512 (k + 1); pooled as before: no bare_user_* or rows, P keeps its
    lognormal (768), the first message is Q's, R's and the prompt-less together: (1,536 + 3,072 + 28,160) / 20."""
    res = fit_mod.fit_model(_populations_trace(512))
    p = res.model.prompts
    assert res.observed["lengths_in"] == "tokens" and res.observed["first_messages"] == "pooled"
    assert p.bare_user_tokens == 0.0 and p.bare_user_quantiles == () and p.system_user_quantiles == ()
    assert p.system_user_tokens == (768.0, 0.0, 0.0) and p.first_user_tokens == pytest.approx(1638.4)


def test_prompt_less_sessions_stay_pooled_under_ten_rare_prompt_sessions():
    """Without R's 4 sessions only Q's 6 would be left in the pooled first message: the prompt-less sessions
    stay in it (no bare_user_*; mean (6 x 1 + 25,600) / 16), P keeps its row."""
    rows = ([[7, 1, 1]] + [[7, 100 + k, 1] for k in range(10)] + [[5, 1]] + [[5, 100 + k] for k in range(5)]
            + [[200 + k] + [300 + j for j in range(k)] for k in range(10)])
    res = fit_mod.fit_model(_chained(rows, [600 * len(r) for r in rows]))
    p = res.model.prompts
    assert p.bare_user_tokens == 0.0 and p.bare_user_quantiles == ()
    assert p.first_user_tokens == pytest.approx((6 + 25_600) / 16)
    assert p.system_user_quantiles == (512.0,) * 21 + (0.0,) * 21
    assert res.observed["first_messages"] == "by population"


def test_calibrate_demand_without_lengths_scales_the_rate_only(monkeypatch):
    """lengths=False from (1, 1.5): requests ratio 0.5, so rate x 2 (then exact) and the length factor stays 1.5
    (blocks ratio sqrt(1.5 / 3) = 0.7071 reported, not chased): two steps, the second within 1% on requests."""
    calls = []
    tr = _stand_in(monkeypatch, calls)
    m = WorkloadModel(arrivals=Arrivals(rate=1.0), prompts=Prompts(first_user_tokens=100.0))
    out, info = fit_mod.calibrate_demand(tr, m, seeds=8, cold=False, start=(1.0, 1.5), lengths=False)
    assert [(s["rate_factor"], s["length_factor"]) for s in info["steps"]] == [(1.0, 1.5), (2.0, 1.5)]
    assert info["length_factor"] == 1.5 and info["requests_ratio"] == 1.0
    assert info["demand_per_request_ratio"] == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert out.arrivals.rate == 2.0 and out.prompts.first_user_tokens == pytest.approx(150.0)


def test_a_trace_whose_tokens_disagree_with_its_ids_is_calibrated_by_population_on_the_rate(monkeypatch):
    """The populations trace stated at 600 tokens per 512-token id: lengths in ids, so every demand calibration
    (the two length candidates, measured and lognormal, then after the reuse search) and the reuse search get
    lengths=False; stated at 512 per id, lengths=True."""
    seen = []
    _score_stand_ins(monkeypatch)

    def demand(trace, model, seed=0, seeds=None, cold=None, tick=None, start=(1.0, 1.0), lengths=True):
        seen.append(("demand", lengths))
        return model, {"rate_factor": 1.0, "length_factor": 1.0, "seeds": 64, "first_seed": 1000 + seed}

    def reuse(trace, model, seed=0, cold=None, tick=None, lengths=True):
        seen.append(("reuse", lengths))
        return model, {"turns_factor": 1.0, "think_factor": 1.0}
    monkeypatch.setattr(fit_mod, "calibrate_demand", demand)
    monkeypatch.setattr(fit_mod, "calibrate_reuse", reuse)
    res, _ = fit_mod.fit_and_score(_populations_trace())
    assert res.observed["lengths_in"] == "ids" and res.observed["first_messages"] == "by population"
    assert set(res.observed["score_by_lengths"]) == {"empirical", "lognormal"}
    assert seen == [("demand", False)] * 2 + [("reuse", False), ("demand", False)]
    seen.clear()
    res, _ = fit_mod.fit_and_score(_populations_trace(512))
    assert res.observed["first_messages"] == "pooled"
    assert seen == [("demand", True)] * 2 + [("reuse", True), ("demand", True)]


# --- mutation of 6c53a13 / f3b58e3 (lengths in ids, first messages by population, the warm long run) ----------
def test_tokens_match_ids_of_no_requests_and_of_one_that_disagrees():
    """No requests: nothing disagrees, the stated tokens are kept. One request of one 512-token id stated as 600
    tokens (ceil(600 / 512) = 2 ids, not 1): 0 of 1 agree, below 0.9."""
    assert fit_mod.tokens_match_ids(make_trace([], []))
    assert not fit_mod.tokens_match_ids(make_trace([0.0], [[1]], tokens=[600]))
    assert fit_mod.tokens_match_ids(make_trace([0.0], [[1]], tokens=[512]))


def test_pooled_first_messages_have_no_bare_shape():
    """Stated tokens agreeing with the ids (512 per id): first messages pooled, so the prompt-less sessions get
    no lognormal of their own, its mean and its shape both 0 (the generator draws them from the pooled one)."""
    p = fit_mod.fit_model(_populations_trace(512)).model.prompts
    assert (p.bare_user_tokens, p.bare_user_sigma, p.bare_user_quantiles) == (0.0, 0.0, ())


def test_a_prompt_less_sessions_follow_up_is_not_a_first_message():
    """The populations trace with one follow-up to the last prompt-less session (its 10 ids and one more, 100 s
    later; that session's first request stated as 5,200 tokens, 10 whole ids, so the 10 ids reused are all of
    it, and ceil(5,200 / 512) = 11 still disagrees): that follow-up is a later turn, not a prompt-less first
    message, so the prompt-less sessions' own text is still the 10 first requests' 256 + 512 k (mean 2,560;
    counting the follow-up's (11 - 1/2) x 512 = 5,376 would give 30,976 / 11 = 2,816)."""
    rows = ([[7, 1, 1]] + [[7, 100 + k, 1] for k in range(10)] + [[5, 1]] + [[5, 100 + k] for k in range(5)]
            + [[6, 1, 1]] + [[6, 100 + k, 1] for k in range(3)]
            + [[200 + k] + [300 + j for j in range(k)] for k in range(10)]
            + [[209] + [300 + j for j in range(9)] + [400]])
    tokens = [600 * len(r) for r in rows]
    tokens[30] = 5200
    res = fit_mod.fit_model(_chained(rows, tokens))
    p = res.model.prompts
    assert res.observed["follow_ups"] == 1 and res.observed["first_messages"] == "by population"
    assert p.bare_user_tokens == pytest.approx(2560.0)
    assert p.bare_user_quantiles == pytest.approx([256 + 230.4 * i for i in range(20)] + [5094.4])


def test_user_quantiles_of_exactly_ten_follow_ups_and_of_follow_ups_adding_nothing():
    """Ten follow-ups (MIN_SAMPLES) each adding one 512-token block: 21 quantiles of 512. Ten that re-send the
    same prompt (growth 0): 21 quantiles of 0."""
    p = fit_mod.fit_model(_sessions_trace([(3000.0 * k, [2.0 ** k]) for k in range(10)])).model.prompts
    assert p.user_quantiles == (512.0,) * 21
    rows = []
    for k in range(10):
        rows += [(3000.0 * k, [k + 1]), (3000.0 * k + 5.0, [k + 1])]
    p = fit_mod.fit_model(make_trace([r[0] for r in rows], [r[1] for r in rows])).model.prompts
    assert p.user_quantiles == (0.0,) * 21


def test_calibrate_reuse_passes_lengths_to_every_demand_calibration(monkeypatch):
    """calibrate_reuse scales lengths by default (lengths=True to calibrate_demand) and passes lengths=False on;
    the objective is met at the measured point: one demand calibration each."""
    seen = []

    def demand(trace, model, seed=0, seeds=None, cold=None, tick=None, start=(1.0, 1.0), lengths=True):
        seen.append(lengths)
        return model, {"rate_factor": 1.0, "length_factor": 1.0}

    class Scorer:
        def __init__(self, trace, seeds, seed, cold):
            pass

        def __call__(self, m):
            return 1.0
    monkeypatch.setattr(fit_mod, "calibrate_demand", demand)
    monkeypatch.setattr(fit_mod, "_Scorer", Scorer)
    m = WorkloadModel(sessions=Sessions(turns_mean=2.0, think_time_s=10.0))
    fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, cold=False)
    assert seen == [True]
    fit_mod.calibrate_reuse(SimpleNamespace(n_requests=4000), m, cold=False, lengths=False)
    assert seen == [True, False]


def test_long_run_of_two_spans_is_checked_and_of_no_span_is_not(monkeypatch):
    """A window of 100 s at 400 requests/s: 40,000 a span, ceil(1.6) = 2 spans (200 s) is longer than the span:
    checked on 8 traces from seed 3000 (+1% and +5%: rate / 1.03). A trace of no span: 256 spans of 0 s are 0 s,
    no longer than the span: no check."""
    calls = _fake_checks(monkeypatch, [[0.01, 0.05]])
    m = WorkloadModel(arrivals=Arrivals(rate=400.0))
    out, dur, f, chk = fit_mod.long_run(SimpleNamespace(n_requests=1000, duration_s=100.0), m, cold=False)
    assert dur == 200.0 and f == pytest.approx(1 / 1.03) and calls == [(400.0, 200.0, 8, 3000)]
    calls = _fake_checks(monkeypatch, [])
    assert fit_mod.long_run(SimpleNamespace(n_requests=5, duration_s=0.0), m, cold=True) == (m, 0.0, None, None)
    assert calls == []


def test_the_measured_quantiles_are_kept_where_they_meet_the_goals_even_when_a_lognormal_scores_nearer(monkeypatch):
    """Scores (the worse of curve MAE / 0.02 and DWPD error / 0.05; the stand-ins' DWPD error 0.02 is 0.4): the
    quantiles 0.018 / 0.02 = 0.9, the lognormal 0.01 / 0.02 = 0.5. Both meet the goals (<= 1): the quantiles are
    kept, the lognormal's nearer score notwithstanding; at 0.03 (1.5, a miss) the nearer lognormal is (the test
    above)."""
    _score_stand_ins(monkeypatch, curve=lambda m: 0.018 if m.prompts.first_user_quantiles else 0.01)
    res, _ = fit_mod.fit_and_score(_ten_follow_ups(), seeds=2, seed=5, calibrate=False)
    assert res.observed["score_by_lengths"] == {"empirical": pytest.approx(0.9), "lognormal": pytest.approx(0.5)}
    assert res.observed["length_distributions"] == "empirical" and res.model.prompts.first_user_quantiles


def test_fit_names_the_sessions_whose_turns_and_returns_no_key_can_show():
    """Three sessions at 512-token blocks: A (blocks 1, 2), B (1, 3: block 1 is now common), C (block 1 and 100
    tokens more: its only full block is common). C's next turn would share only block 1 with it, so it would read
    as a new session: 1 of 3 sessions is blind, above the 5% the fit warns at. With C holding a block of its own
    (1, 4) none is, and no warning."""
    from kvbench.stream.fit import fit_model
    from tests.conftest import make_trace

    blind = make_trace([0.0, 10.0, 20.0], [[1, 2], [1, 3], [1]], tokens=[1100, 1100, 612])
    res = fit_model(blind)
    assert res.observed["sessions"] == 3
    assert res.observed["sessions_without_own_block"] == pytest.approx(1 / 3)
    assert any(w.startswith("sessions: 33% of the sessions recovered hold no full 512-token block of their own")
               for w in res.warnings)
    seen = fit_model(make_trace([0.0, 10.0, 20.0], [[1, 2], [1, 3], [1, 4]], tokens=[1100, 1100, 1100]))
    assert seen.observed["sessions_without_own_block"] == 0.0
    assert not any(w.startswith("sessions: ") for w in seen.warnings)
    # conversation ids link C's turns whatever its blocks: nothing is blind
    from dataclasses import replace as _replace

    named = _replace(blind, extras={**blind.extras, "chat_id": np.array([1, 2, 3]),
                                    "parent_chat_id": np.array([-1, -1, -1])})
    ids = fit_model(named)
    assert ids.observed["sessions_without_own_block"] == 0.0
    assert not any(w.startswith("sessions: ") for w in ids.warnings)
    # the warning starts at 5%: 1 blind session of 20 (the other 19 each with a block of its own) is warned of
    blocks = [[1, 2], [1, 3], [1]] + [[1, 10 + k] for k in range(17)]
    edge = fit_model(make_trace([10.0 * i for i in range(20)], blocks, tokens=[1100, 1100, 612] + [1100] * 17))
    assert edge.observed["sessions"] == 20 and edge.observed["sessions_without_own_block"] == 0.05
    assert any(w.startswith("sessions: 5% of the sessions recovered") for w in edge.warnings)


# --- what an exact model would score on the gen check -----------------------------------------------------------

def _gen_of(rows):
    """A gen_check result holding only what exact_model_score reads: each trace's W(C) and turnover."""
    return {"per_trace": [{"write_blocks_per_s": w, "turned_over": ok} for w, ok in rows]}


def test_exact_model_score_by_hand():
    """Two draws as sources (W 1, 1, 1 and 2, 2, 2; the second did not turn over at the third capacity), three
    generated traces. Pairs and their max errors over the capacities both turned over:
    source 1: (1.04, 1.04, 1.04) 0.04 in; (1.0, 1.2, 0.9) 0.2 out; (0.97, 1.0, -, turned over only at the first
    two) 0.03 in. Source 2 (first two capacities): 1.04/2 -> 0.48 out; (1.0, 1.2) -> 0.5 out; (0.97, 1.0) ->
    0.515 out. Share 2 of 6; by source 2/3 and 0; median max error of (0.04, 0.2, 0.03, 0.48, 0.5, 0.515) =
    (0.2 + 0.48) / 2."""
    gen = _gen_of([([1.04, 1.04, 1.04], [True, True, True]), ([1.0, 1.2, 0.9], [True, True, True]),
                   ([0.97, 1.0, 5.0], [True, True, False])])
    ex = fit_mod.exact_model_score(np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]),
                                   np.array([[True, True, True], [True, True, False]]), gen)
    assert ex["pairs"] == 6 and ex["sources"] == 2
    assert ex["within_goal_share"] == pytest.approx(2 / 6)
    assert ex["within_goal_share_by_source"] == pytest.approx([2 / 3, 0.0])
    assert ex["max_error_median"] == pytest.approx((0.2 + 0.48) / 2)


def test_exact_model_score_skips_pairs_with_no_capacity_in_common_and_is_none_without_any():
    """A source that turned over nowhere is no source (it neither scores nor counts); a trace that shares no
    capacity with a source is no pair of it; with no pair at all, None."""
    gen = _gen_of([([1.04, 1.0], [True, False]), ([1.0, 1.0], [False, True])])
    ex = fit_mod.exact_model_score(np.array([[1.0, 9.0], [1.0, 1.0]]), np.array([[False, False], [True, False]]), gen)
    assert ex["pairs"] == 1 and ex["sources"] == 1 and ex["within_goal_share_by_source"] == [1.0]
    assert fit_mod.exact_model_score(np.array([[1.0, 1.0]]), np.array([[False, True]]),
                                     _gen_of([([1.0, 1.0], [True, False])])) is None


def test_source_noise_scores_the_gen_check_as_if_the_trace_were_each_draw(monkeypatch):
    """The draws: the trace and it at half speed (W and W / 2 at every capacity they turn over). The check's one
    trace is the trace itself: against the first draw no error (within), against the second +100% (out): share
    1/2, by draw (1, 0)."""
    tr = _random_trace(seed=3)
    slow = replace(tr, timestamp_s=tr.timestamp_s * 2.0)
    monkeypatch.setattr(fit_mod, "_generate_many", lambda model, trace, seeds, cold: iter([tr, slow]))
    g = gen_check(tr, None, 600.0, seeds=1, traces=[tr])
    assert len(g["per_trace"][0]["write_blocks_per_s"]) == len(g["grid_blocks"]) >= len(g["capacities_blocks"])
    n = fit_mod.source_noise(tr, None, seeds=2, cold=True, gen=g)
    ex = n["exact_model"]
    assert ex["sources"] == 2 and ex["within_goal_share"] == 0.5 and ex["within_goal_share_by_source"] == [1.0, 0.0]
    assert ex["max_error_median"] == pytest.approx(0.5)       # errors 0 and 1
    assert "exact_model" not in fit_mod.source_noise(tr, None, seeds=2, cold=True)


def _verdict_gen(errors, mae=0.01, spread=None):
    return {"seeds": len(errors), "curve_mae": mae, "within_goal_of_their_mean": spread,
            "per_trace": [{"dwpd_error_max": e} for e in errors]}


def test_gen_verdict_met_unattainable_and_each_way_to_miss():
    """Four traces, one within 5% (share 1/4); the exact model's draws score (0, 0.25, 0.5, 0.75): the trace's
    1/4 is no better than on 2 of 4 draws (rank 0.5) and no draw has every trace within: unattainable. Each
    condition broken in turn is a miss: an exact model meeting it on half its draws (2 of 4; 1 of 4 is still under
    half); the trace scoring worse than 95% of the draws (rank under 5%; at 1 of 20 it is not); the curve off its
    goal; no exact model at all. All traces within: met, whatever the draws. The traces' spread about their mean
    is a figure, not a condition."""
    ex = {"within_goal_share_by_source": [0.0, 0.25, 0.5, 0.75]}
    g = _verdict_gen([0.04, 0.06, 0.07, 0.08], spread=3)
    v = fit_mod.gen_verdict(g, ex)
    assert v == {"verdict": "unattainable", "share": 0.25, "rank": 0.5, "draws": 4, "draws_meeting": 0}
    one = fit_mod.gen_verdict(g, {"within_goal_share_by_source": [0.0, 0.25, 0.5, 1.0]})
    assert one["draws_meeting"] == 1 and one["verdict"] == "unattainable"
    half = fit_mod.gen_verdict(g, {"within_goal_share_by_source": [0.0, 0.25, 1.0, 1.0]})
    assert half["draws_meeting"] == 2 and half["verdict"] == "missed"
    worse = fit_mod.gen_verdict(_verdict_gen([0.06, 0.06, 0.07, 0.08], spread=3), ex)
    assert worse["share"] == 0.0 and worse["rank"] == 0.25 and worse["verdict"] == "unattainable"
    assert fit_mod.gen_verdict(_verdict_gen([0.06] * 4, spread=3),
                               {"within_goal_share_by_source": [0.25] * 20})["verdict"] == "missed"  # rank 0
    assert fit_mod.gen_verdict(_verdict_gen([0.06] * 4, spread=3),
                               {"within_goal_share_by_source": [0.0] + [0.25] * 19})["verdict"] == "unattainable"
    assert fit_mod.gen_verdict(dict(g, curve_mae=0.021), ex)["verdict"] == "missed"
    assert fit_mod.gen_verdict(dict(g, within_goal_of_their_mean=4), ex)["verdict"] == "unattainable"
    assert fit_mod.gen_verdict(g, None) == {"verdict": "missed", "share": 0.25}
    assert fit_mod.gen_verdict(_verdict_gen([0.01, 0.05, 0.02], spread=1), ex) == {"verdict": "met", "share": 1.0}
    assert fit_mod.gen_verdict(_verdict_gen([0.01, 0.05], mae=0.021), None)["verdict"] == "missed"


def test_gen_check_counts_the_traces_within_the_goal_of_their_own_mean():
    """The trace with itself and at half speed: their mean W is 0.75 of it, each 1/3 off: none within 5%; the
    trace twice and at 1.02x the speed (W x 1/1.02): mean (2 + 1/1.02) / 3, the slow one 1.3% off, all within;
    one trace alone is its own mean."""
    tr = _random_trace()
    slow = replace(tr, timestamp_s=tr.timestamp_s * 2.0)
    assert gen_check(tr, None, 600.0, seeds=2, traces=[tr, slow])["within_goal_of_their_mean"] == 0
    near = replace(tr, timestamp_s=tr.timestamp_s * 1.02)
    assert gen_check(tr, None, 600.0, seeds=3, traces=[tr, tr, near])["within_goal_of_their_mean"] == 3
    assert gen_check(tr, None, 600.0, seeds=1, traces=[slow])["within_goal_of_their_mean"] == 1


def test_the_gen_check_line_names_what_an_exact_model_would_score():
    """A missed goal with the exact model's score: the verdict and why on the goal line; the traces' spread, the
    draws' shares and the trace's rank on the noise line; a met goal says none of it."""
    from kvbench.cli.trace_cmds import _gen_lines

    g = dict(_verdict_gen([0.04, 0.06, 0.07, 0.08], spread=3), first_seed=0, duration_s=1022.0,
             dwpd_error_mean=0.03, dwpd_error_max=0.06, dwpd_error_worst=0.08)
    noise = {"seeds": 4, "max_error_median": 0.043, "max_error_p90": 0.071,
             "exact_model": {"within_goal_share": 0.375, "within_goal_share_by_source": [0.0, 0.25, 0.5, 0.75],
                             "max_error_median": 0.069, "pairs": 16, "sources": 4}}

    def lines(g=g, noise=noise, **ex):
        if ex:
            noise = dict(noise, exact_model=dict(noise["exact_model"], **ex))
        return dict(_gen_lines(g, noise, "m.toml"))
    out = lines()
    assert out["gen goal"] == ("not attainable on a source this short (every trace within 5% at every capacity, "
                               "curve MAE within 0.02): the fit comes as close as an exact model does")
    assert out["gen noise"] == (
        "a trace of the source's length drawn from the model strays up to 4.3% from the model's W(C) (median of 4 "
        "draws; 90th percentile 7.1%); these traces' own spread leaves 3 of 4 within 5% of their mean W(C) (a model "
        "whose mean were the trace's exactly would find about as many within); were the trace exactly one of the "
        "model's draws, 38% of the check's traces would be within 5% at every capacity (0%-75% by draw, every trace "
        "on 0 of 4 draws; median max error 6.9%); on the trace 25%, no better than on 50% of the draws")
    worse = lines(g=dict(g, per_trace=[{"dwpd_error_max": 0.06}] * 4), within_goal_share_by_source=[0.25] * 4)
    assert worse["gen goal"].endswith(": the model misses, not only the source's length")
    assert worse["gen noise"].endswith("on the trace 0%, no better than on 0% of the draws")
    most = lines(within_goal_share_by_source=[0.0, 1.0])
    assert most["gen goal"].endswith(": an exact model meets it on most sources like this one: the model misses")
    assert lines(g=dict(g, curve_mae=0.03))["gen goal"].endswith(": the hit-ratio curve misses its goal")
    met = lines(g=_verdict_gen([0.01] * 4, spread=4) | {"first_seed": 0, "duration_s": 60.0, "dwpd_error_mean": 0.01,
                                                        "dwpd_error_max": 0.01, "dwpd_error_worst": 0.01})
    assert met["gen goal"].startswith("met (") and met["gen noise"].endswith("90th percentile 7.1%)")


def test_a_model_file_reads_its_gen_goal_and_refuses_another_word(tmp_path):
    from kvbench.stream.workload import load_model_file

    for word in ("met", "unattainable", "missed"):
        p = tmp_path / f"{word}.toml"
        p.write_text(f'[calibration]\ngen_goal = "{word}"\n')
        assert load_model_file(p).calibration.gen_goal == word
    p = tmp_path / "bad.toml"
    p.write_text('[calibration]\ngen_goal = "fine"\n')
    with pytest.raises(SpecError, match="gen_goal = 'fine' is not one of met, unattainable, missed"):
        load_model_file(p)
    p.write_text("[calibration]\ngen_goal = 1\n")
    with pytest.raises(SpecError, match="gen_goal = 1 is not a str"):
        load_model_file(p)


def test_fit_and_score_scores_the_exact_model_on_its_noise_draws_and_records_the_verdict(monkeypatch):
    """The source's noise is drawn from seed + NOISE_SEED_OFFSET (5 + 4000) and handed the gen check, whose verdict
    (here from the exact model the stand-in returns: 1 of 3 traces within, unattainable) is kept beside it and in
    the model's calibration."""
    _score_stand_ins(monkeypatch)
    gen = {"seeds": 3, "dwpd_error_mean": 0.05, "dwpd_error_max": 0.07, "dwpd_error_worst": 0.09, "curve_mae": 0.01,
           "within_goal_of_their_mean": 2, "per_trace": [{"dwpd_error_max": e} for e in (0.04, 0.08, 0.09)]}
    got = []

    def noise(trace, model, seed=0, cold=None, gen=None):
        got.append((seed, gen))
        return {"max_error_median": 0.04, "exact_model": {"within_goal_share_by_source": [0.0, 1 / 3, 2 / 3]}}
    monkeypatch.setattr(fit_mod, "gen_check", lambda trace, model, duration, seeds=3, seed=0: gen)
    monkeypatch.setattr(fit_mod, "source_noise", noise)
    res, good = fit_mod.fit_and_score(_ten_follow_ups(), seed=5)
    assert got == [(4005, gen)]
    assert good["gen_check"]["goal"] == {"verdict": "unattainable", "share": 1 / 3, "rank": 2 / 3, "draws": 3,
                                         "draws_meeting": 0}
    assert res.model.calibration.gen_goal == "unattainable"


def test_gen_verdict_at_the_curve_goal_and_with_no_trace_scored():
    """A curve MAE exactly at its goal (0.02) is within it (met; unattainable); a check whose traces shared no
    capacity with the trace scores a share of 0 (every draw scores no worse: rank 1)."""
    assert fit_mod.gen_verdict(_verdict_gen([0.01, 0.02], mae=0.02), None)["verdict"] == "met"
    ex = {"within_goal_share_by_source": [0.0, 0.5]}
    assert fit_mod.gen_verdict(_verdict_gen([0.04, 0.07], mae=0.02, spread=1), ex)["verdict"] == "unattainable"
    none = fit_mod.gen_verdict(_verdict_gen([None, None], spread=1), ex)
    assert none["share"] == 0.0 and none["rank"] == 0.5


def test_source_noise_takes_each_draw_as_a_source_only_where_it_turned_over(monkeypatch):
    """Draws: a random trace of 300 requests and its first 60, which turns over at fewer of the grid's capacities
    (it still writes at the larger ones, W 17-54% off the whole trace's there). The noise is measured where both
    turned over; the check's one trace is the whole trace: against itself no error, against the 60-request draw
    the max error over the capacities that draw turned over, not those it only wrote at (by hand from the two
    steady curves)."""
    from kvbench.analysis.curves.residence import steady_curve

    full, head = _random_trace(), _random_trace(n=60)
    monkeypatch.setattr(fit_mod, "_generate_many", lambda model, trace, seeds, cold: iter([full, head]))
    g = gen_check(full, None, 100.0, seeds=1, traces=[full])
    caps = np.asarray(g["grid_blocks"])
    wf, wh = (steady_curve(t, block_bytes=1).at(caps) for t in (full, head))
    both = wf["turned_over"] & wh["turned_over"]
    assert both.sum() >= 10 and (wh["write_blocks_per_s"][~wh["turned_over"] & wf["turned_over"]] > 0).all()
    n = fit_mod.source_noise(full, None, seeds=2, cold=True, gen=g)
    mean = (wf["write_blocks_per_s"][both] + wh["write_blocks_per_s"][both]) / 2
    assert n["max_error_median"] == pytest.approx(np.abs(wf["write_blocks_per_s"][both] / mean - 1).max())
    ex = n["exact_model"]
    off = np.abs(wf["write_blocks_per_s"][both] / wh["write_blocks_per_s"][both] - 1).max()
    assert ex["pairs"] == 2 and ex["max_error_median"] == pytest.approx(off / 2)     # the median of 0 and it
