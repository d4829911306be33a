"""Returns beyond the window (kvbench.stream.returns): the normal tail against math.erfc, visit ends on a
hand-made trace, the no-return bound against hand arithmetic, a one-hour generated trace with known returns,
and trace fit's use of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvbench.stream.returns import DELTA_95, _log_sf, _ncdf, fit_returns, visit_ends
from kvbench.stream.sessions import recover_sessions
from kvbench.stream.traces import Trace

pytestmark = pytest.mark.timeout(600)


def make_trace(times, blocks) -> Trace:
    offs = np.zeros(len(blocks) + 1, dtype=np.int64)
    offs[1:] = np.cumsum([len(b) for b in blocks])
    return Trace(timestamp_s=np.asarray(times, dtype=np.float64),
                 input_tokens=np.asarray([512 * len(b) for b in blocks], dtype=np.int64),
                 output_tokens=np.zeros(len(blocks), dtype=np.int64), offsets=offs,
                 keys=np.array([k for b in blocks for k in b], dtype=np.uint64), block_tokens=512, fmt="test",
                 path="hand")


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
    assert f.returns >= 10 and w["estimate"] > 0
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
