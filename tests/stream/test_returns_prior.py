"""Returns hours later from a window of an hour: the censored fit, its refined interval, and a longer trace's
evidence pooled in as a prior (``trace fit --returns-prior``)."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace

import numpy as np
import pytest

from kvbench.stream.returns import ReturnEvidence, fit_returns

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
