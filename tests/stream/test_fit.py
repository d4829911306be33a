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
    by benchmarks/fit_dwpd.py over seeds 100-111: per trace max 3.2% on average, the worst 4.2%)."""
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
    assert good["before_calibration"]["dwpd_error_max"] == c.dwpd_error_max_before
    assert 0.5 < c.rate_factor < 2.0 and 0.5 < c.length_factor < 2.0
    # the trace starts cold: the long run's rate is centred on the generated duration (a few % lower)
    assert 0.9 < c.gen_rate_factor < 1.0
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
    assert "h), --seed 0: DWPD error per trace mean" in r.output and "within the goal (5%, 0.02)" in r.output
    assert "The source's own sampling noise" in r.output
    text = out.read_text()
    assert "[calibration]" in text and "calibrated = true" in text and "dwpd_error_max_before" in text


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


def test_a_first_block_three_sessions_share_is_a_system_prompt():
    """Sessions [7, 1], [7, 2], [7, 3] (prefix-chained): block 7 is shared by 3 sessions (>= max(3, 2% of 3)):
    one system prompt of depth 1, written as (1 + 0.5) x 512 = 768 tokens."""
    from tests.conftest import chained_trace

    c = chained_trace([[7, 1], [7, 2], [7, 3]])
    t = make_trace([0.0, 10.0, 20.0], [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(3)])
    res = fit_mod.fit_model(t)
    assert res.observed["system_prompts_seen"] == 1
    assert res.model.prompts.system_prompt_tokens == (768.0,) and res.model.prompts.system_prompts == 1
    two = make_trace([0.0, 10.0], [list(map(int, c.keys[c.offsets[i]:c.offsets[i + 1]])) for i in range(2)])
    assert fit_mod.fit_model(two).observed["system_prompts_seen"] == 0      # 2 sessions: a document, not a system


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


def test_long_run_of_a_running_services_window_is_its_calibration(monkeypatch):
    """A trace that does not start cold was calibrated on warmed-up windows: no check, no rate change; a model
    of 64,000 requests a span or more: the span."""
    from types import SimpleNamespace

    _fake_checks(monkeypatch, [])
    m = WorkloadModel(arrivals=Arrivals(rate=10.0))
    assert fit_mod.long_run(SimpleNamespace(n_requests=1000, duration_s=100.0), m, cold=False) == (m, 6400.0, None,
                                                                                                 None)
    busy = WorkloadModel(arrivals=Arrivals(rate=640.0))             # 64,000 requests a span
    assert fit_mod.long_run(SimpleNamespace(n_requests=1000, duration_s=100.0), busy, cold=True) == (busy, 100.0,
                                                                                                   None, None)


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
