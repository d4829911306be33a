"""Returns beyond the window (kvbench.stream.returns): the normal tail against math.erfc, visit ends on a
hand-made trace, the no-return bound against hand arithmetic, a one-hour generated trace with known returns,
and trace fit's use of it."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace

import numpy as np
import pytest

from kvbench.stream.returns import DELTA_95, ReturnEvidence, _log_sf, _ncdf, fit_returns, visit_ends
from kvbench.stream.sessions import recover_sessions
from tests.conftest import make_trace

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("z", [-6.0, -2.5, -0.3, 0.0, 0.7, 1.96, 4.0, 12.0, 30.0])
def test_normal_tail_against_math(z):
    sf = 0.5 * math.erfc(z / math.sqrt(2.0))
    assert float(_ncdf(z)) == pytest.approx(1.0 - sf, abs=2e-7)
    # the log tail keeps its relative accuracy where 1 - Phi underflows a plain subtraction
    assert float(_log_sf(z)) == pytest.approx(math.log(sf), rel=5e-4 if z > 2 else 1e-5, abs=1e-6)


def test_visit_ends_by_hand():
    # A (0 s) -> B (100 s, a follow-up within 30 min) -> C (4,000 s: a return after 3,900 s); D and E start new
    # sessions; the trace ends at 5,000 s: C waits 1,000 s and D 500 s without a return (censored), E 0 s
    t = make_trace([0, 100, 4000, 4500, 5000], [[1, 2], [1, 2, 3], [1, 2, 3, 4], [10], [20]])
    g, c = visit_ends(t, recover_sessions(t), 1800.0)
    assert g.tolist() == [3900.0] and sorted(c.tolist()) == [0.0, 500.0, 1000.0]


def test_no_return_seen_bounds_the_return_probability():
    # N visits, each waited a full hour without coming back: the likelihood of returning within (30 min, 1 h] with
    # probability q is (1 - q)^N, so the 95% profile bound is N (-log(1 - q)) <= 1.92: q <= 1 - exp(-1.92 / N)
    n = 1000
    f = fit_returns(np.zeros(0), np.full(n, 3600.0), 3600.0, gap_s=1800.0)
    bound = 1.0 - math.exp(-DELTA_95 / n)
    w = f.within["1h"]
    assert w["estimate"] == 0.0 and w["low"] == 0.0
    assert 0.5 * bound <= w["high"] <= bound * (1 + 1e-9)
    # what an hour cannot see stays open: a return after 6 h is bounded by nothing but the model family
    assert f.within["7d"]["high"] > 0.9 and f.returns == 0 and f.censored == n


def test_one_hour_of_generated_chat_gives_a_non_zero_return_probability_at_6h():
    """The chat preset: a quarter of visits come back, lognormal median 6 h, sigma 1.5. The share that comes back
    after more than 30 min and within 6 h is 0.25 (Phi(0) - Phi(ln(1800/21600)/1.5)) = 0.1128; one hour of it
    (seed 0) is fitted: the estimate is non-zero and its 95% interval holds the truth."""
    from tests.stream.test_workload import _whole

    from kvbench.stream.synth import Generator
    from kvbench.stream.workload import load_model_file

    m = load_model_file("chat")
    s = m.sessions
    assert (s.return_probability, s.return_time_s, s.return_sigma) == (0.25, 21600.0, 1.5)
    truth = 0.25 * (0.5 - 0.5 * math.erfc(-math.log(1800 / 21600) / 1.5 / math.sqrt(2)))
    assert truth == pytest.approx(0.1128, abs=1e-4)
    t = _whole(Generator(m, duration_s=3600, seed=0))
    g, c = visit_ends(t, recover_sessions(t), 1800.0)
    f = fit_returns(g, c, t.duration_s, gap_s=1800.0)
    w = f.within["6h"]
    assert f.returns >= 5 and w["estimate"] > 0              # 8 returns seen (seeds 0-7: 8 to 21)
    assert w["low"] <= truth <= w["high"] and w["high"] - w["low"] > 0.05      # an interval, honestly wide


def test_trace_fit_reports_the_censored_fit():
    from kvbench.stream.fit import fit_model
    from kvbench.stream.traces import read_trace

    res = fit_model(read_trace("mooncake-synthetic"))
    rf = res.observed["returns_fit"]
    # 17 minutes: no gap can exceed 30 min, so no return is seen and 6 h stays unbounded
    assert rf["returns"] == 0 and rf["within"]["6h"]["estimate"] == 0.0 and rf["within"]["6h"]["high"] > 0.9
    assert res.model.sessions.return_probability == 0.0                          # the default, with a warning
    assert any(w.startswith("sessions.return_probability") and "censored fit" in w for w in res.warnings)


# --- fit -> gen: the DWPD error trace fit reports --------------------------------------------------------------
def test_dwpd_error_by_hand():
    """The same trace: no error. Its copy with every gap halved writes each capacity's misses twice as fast:
    W(C) and so DWPD(C) = 86400 W(C) / C are doubled, a relative error of exactly 1 at every capacity."""
    from dataclasses import replace

    from kvbench.stream.fit import dwpd_error

    rng = np.random.default_rng(1)
    blocks = [[int(k)] for k in rng.integers(0, 40, 600)]
    t = make_trace(np.arange(600, dtype=np.float64), blocks)
    caps = np.array([2.0, 5.0, 10.0, 20.0])
    same = dwpd_error(t, t, caps)
    assert same["dwpd_error_mean"] == 0.0 and same["dwpd_points"] == 4
    fast = dwpd_error(t, replace(t, timestamp_s=t.timestamp_s / 2), caps)
    assert fast["dwpd_error_mean"] == pytest.approx(1.0) and fast["dwpd_signed_mean"] == pytest.approx(1.0)
    assert fast["dwpd_error_max"] == pytest.approx(1.0)
    # a capacity the trace never turns over (the whole working set and more) is left out
    assert dwpd_error(t, t, np.array([1000.0]))["dwpd_points"] == 0


def test_trace_fit_prints_the_dwpd_error(cli, tmp_path):
    r = cli("trace", "fit", "mooncake-sample", "-o", tmp_path / "m.toml", "--seeds", "1")
    assert r.exit_code == 0, r.output
    assert "fit DWPD   steady write rate (DWPD) at the capacities both turn over: mean error" in r.output
    assert "returns    return within 6h:" in r.output


def test_a_flat_retention_sweep_is_said_in_words():
    from kvbench.analysis.plan import flat_retention_note

    rows = [{"retention_s": 600.0, "capacity_bytes": 1e12, "hit_ratio": 0.6},
            {"retention_s": 3600.0, "capacity_bytes": 6e12, "hit_ratio": 0.674},
            {"retention_s": 21600.0, "capacity_bytes": 4e13, "hit_ratio": 0.674},
            {"retention_s": 604800.0, "capacity_bytes": 1e15, "hit_ratio": 0.6745}]
    note = flat_retention_note(rows)
    assert note.startswith("Keeping KV longer than 60 min buys no hits here: the hit ratio stays 0.674 up to 7 d")
    assert "86,400 / retention by construction" in note
    # every longer retention still buys hits (0.002 and more): nothing to say; nor with a single row
    growing = [dict(r, hit_ratio=0.6 + 0.01 * i) for i, r in enumerate(rows)]
    assert flat_retention_note(growing) is None and flat_retention_note(rows[:1]) is None
    # flat, but the capacity does not even double: not the case either
    assert flat_retention_note([dict(rows[1]), dict(rows[2], capacity_bytes=1.1e13)]) is None


# --- a longer trace's evidence pooled in as a prior (trace fit --returns-prior) -----------------------------------

GAP = 1800.0                               # kvbench.stream.fit.RETURN_GAP_S, restated
P, MEDIAN, SIGMA = 0.3, 3 * 3600.0, 1.0    # the law the evidence is drawn from


def _cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf((math.log(x) - math.log(MEDIAN)) / (SIGMA * math.sqrt(2.0))))


# What the fit estimates: among visits with no follow-up within GAP, the share that come back within 6 h. A return
# sooner than GAP is a think time (that visit goes on), so it is not a visit end: condition on that.
TRUTH_6H = P * (_cdf(6 * 3600.0) - _cdf(GAP)) / (1.0 - P * _cdf(GAP))


def _evidence(seed: int, n: int, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Visits ending uniformly over a window, each back with probability P after a lognormal delay: the gaps of
    the returns seen inside the window and the time left to its end for the others (drawn with numpy alone)."""
    rng = np.random.default_rng(seed)
    end = rng.uniform(0.0, window_s, n)
    back = rng.random(n) < P
    delay = rng.lognormal(math.log(MEDIAN), SIGMA, n)
    visit_end = ~(back & (delay <= GAP))
    end, back, delay = end[visit_end], back[visit_end], delay[visit_end]
    seen = back & (end + delay < window_s)
    return delay[seen], (window_s - end)[~seen]


def test_a_long_window_brackets_the_law_it_was_drawn_from():
    g, c = _evidence(seed=5, n=25_000, window_s=48 * 3600.0)
    fit = fit_returns(g, c, 48 * 3600.0, gap_s=GAP)
    w = fit.within["6h"]
    # thousands of returns: the interval is narrow but not a single grid point, and it holds the truth
    assert w["low"] < TRUTH_6H < w["high"]
    assert 0 < w["high"] - w["low"] < 0.05
    assert fit.returns == g.size and fit.censored == c.size


def test_an_hour_with_no_return_says_nothing_and_a_prior_gives_the_law_with_its_interval():
    # an hour of visits: nearly every return falls after the window's end
    g, c = _evidence(seed=7, n=600, window_s=3600.0)
    alone = fit_returns(g, c, 3600.0, gap_s=GAP)
    assert alone.within["6h"]["low"] < 0.05 and alone.within["6h"]["high"] > 0.5    # uninformative, honestly
    pg, pc = _evidence(seed=8, n=25_000, window_s=48 * 3600.0)
    prior = ReturnEvidence(pg, pc, 48 * 3600.0, "a two-day trace")
    pooled = fit_returns(g, c, 3600.0, gap_s=GAP, prior=prior)
    w = pooled.within["6h"]
    assert w["estimate"] > 0 and w["low"] < TRUTH_6H < w["high"]
    assert w["high"] - w["low"] < 0.05
    # the fit records what the window alone showed, and the line says what was pooled and what it assumes
    assert (pooled.window_returns, pooled.window_censored) == (g.size, c.size)
    assert pooled.returns == g.size + pg.size
    from kvbench.stream.returns import describe

    line = describe(pooled)
    assert f"from {g.size:,} returns seen and {c.size:,} visits not yet back in a 1 h window" in line
    assert f"pooled with {pg.size:,} returns seen" in line and "a two-day trace" in line


def test_pooling_is_the_product_of_the_likelihoods():
    # pooling a prior is the same as fitting the window's and the prior's observations together
    g, c = _evidence(seed=3, n=800, window_s=6 * 3600.0)
    pg, pc = _evidence(seed=4, n=3000, window_s=24 * 3600.0)
    pooled = fit_returns(g, c, 6 * 3600.0, gap_s=GAP, prior=ReturnEvidence(pg, pc, 24 * 3600.0))
    joint = fit_returns(np.concatenate([g, pg]), np.concatenate([c, pc]), 6 * 3600.0, gap_s=GAP)
    assert pooled.within == joint.within
    assert (pooled.probability, pooled.median_s, pooled.sigma) == (joint.probability, joint.median_s, joint.sigma)


def _model(return_probability: float):
    from kvbench.stream.workload import WorkloadModel

    m = WorkloadModel()
    return replace(m, name="returns-test",
                   sessions=replace(m.sessions, turns_mean=2.0, return_probability=return_probability,
                                    return_time_s=MEDIAN, return_sigma=SIGMA),
                   arrivals=replace(m.arrivals, rate=0.2, diurnal_amplitude=0.0))


def _generate(path, model, seed: int, hours: float):
    from kvbench.stream.synth import Generator, write_stream

    write_stream(Generator(model, duration_s=hours * 3600.0, seed=seed).batches(), path)
    return path


@pytest.fixture(scope="module")
def day_and_hour(tmp_path_factory):
    d = tmp_path_factory.mktemp("returns")
    m = _model(P)
    return _generate(d / "day.jsonl", m, seed=1, hours=24.0), _generate(d / "hour.jsonl", m, seed=2, hours=1.0)


def test_trace_fit_of_an_hour_pools_a_day_and_writes_a_returning_model(cli, day_and_hour, tmp_path):
    day, hour = day_and_hour
    without = cli("trace", "fit", hour, "-o", tmp_path / "a.toml", "--seeds", "1", "--no-calibrate")
    assert without.exit_code == 0, without.output
    assert tomllib.loads((tmp_path / "a.toml").read_text())["sessions"]["return_probability"] == 0.0
    r = cli("trace", "fit", hour, "--returns-prior", day, "-o", tmp_path / "b.toml", "--seeds", "1",
            "--no-calibrate")
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("with prior"))
    assert "pooled with" in line and str(day) in line
    est = float(line.split("return within 6h: ")[1].split(" ")[0])
    assert est > 0.05                             # the day's returns, not the hour's silence
    model = tomllib.loads((tmp_path / "b.toml").read_text())
    assert model["sessions"]["return_probability"] > 0.05
    assert any(s.startswith("returns: censored fit pooled with") and str(day) in s
               for s in model["workload"]["sources"])


def test_a_prior_is_not_used_on_a_trace_long_enough_for_its_own_returns(day_and_hour):
    from kvbench.stream.fit import fit_model, returns_prior
    from kvbench.stream.traces import read_trace

    day, _ = day_and_hour
    tr = read_trace(day)
    res = fit_model(tr, returns_prior=returns_prior(tr))
    assert any(w.startswith("--returns-prior not used: the trace spans") for w in res.warnings)
    assert "returns_fit_with_prior" not in res.observed


def test_a_short_prior_is_refused(day_and_hour):
    from kvbench.errors import SpecError
    from kvbench.stream.fit import returns_prior
    from kvbench.stream.traces import read_trace

    _, hour = day_and_hour
    with pytest.raises(SpecError, match="a prior for returns hours later needs a trace of at least 6 h"):
        returns_prior(read_trace(hour))
