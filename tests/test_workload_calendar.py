"""The workload model's calendar against Python's own (datetime, UTC): the daily cycle's hour, the weekday of
every second (Unix time 0 was a Thursday), the weekend factor, and Unix time's DST-free seconds (the EU clock
change on 2024-03-31 moves no hour of a UTC clock)."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from kvbench.stream.fit import fit_model
from kvbench.stream.synth import Generator, intensity
from kvbench.stream.traces import Trace
from kvbench.stream.workload import Arrivals, Prompts, Sessions, WorkloadModel

UTC = timezone.utc
T0 = datetime(2024, 3, 8, 22, 30, tzinfo=UTC)        # a Friday, 22:30


def _hour(d: datetime) -> float:
    return d.hour + d.minute / 60 + d.second / 3600 + d.microsecond / 3.6e9


def _model(start: datetime, amplitude=0.5, peak=14.0, weekend=0.4, **kw) -> WorkloadModel:
    return WorkloadModel(name="cal", block_tokens=64, arrivals=Arrivals(
        rate=1.0, diurnal_amplitude=amplitude, peak_hour=peak, weekend_factor=weekend,
        start_hour=_hour(start), start_weekday=start.weekday(), **kw))


def _by_calendar(start: datetime, t_s: float, amplitude=0.5, peak=14.0, weekend=0.4) -> float:
    """The intensity at ``t_s`` seconds after ``start``, read off the calendar: cosine of the hour of day,
    the weekend's factor on Saturday and Sunday, scaled so that a week's mean is 1 (5 weekdays + 2 weekend days)."""
    d = start + timedelta(seconds=t_s)
    daily = 1 + amplitude * math.cos(2 * math.pi * (_hour(d) - peak) / 24)
    return daily * (weekend if d.weekday() >= 5 else 1.0) / ((5 + 2 * weekend) / 7)


MIDNIGHT = 5400.0                                   # 22:30 + 1.5 h: Friday -> Saturday
TIMES = [0.0, MIDNIGHT - 1, MIDNIGHT, 2 * 86_400 + MIDNIGHT - 1, 2 * 86_400 + MIDNIGHT,   # Sunday 23:59:59, Monday
         (datetime(2024, 3, 31, 1, 30, tzinfo=UTC) - T0).total_seconds(),                   # EU clocks change: UTC not
         7 * 86_400.0, 7 * 86_400.0 + 12_345.6, 366 * 86_400.0]                             # a week, a leap year on


@pytest.mark.parametrize("start", [T0, datetime(2024, 3, 4, 0, 0, tzinfo=UTC),          # Monday midnight
                                   datetime(2024, 3, 10, 23, 59, 59, tzinfo=UTC)])      # Sunday, a second to go
def test_intensity_follows_the_calendar(start):
    m = _model(start)
    got = intensity(m, np.array(TIMES))
    want = [_by_calendar(start, t) for t in TIMES]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_a_weeks_mean_intensity_is_one():
    m = _model(T0)
    t = np.arange(0.0, 7 * 86_400.0, 60.0)            # every minute of one week from Friday 22:30
    assert float(intensity(m, t).mean()) == pytest.approx(1.0, abs=1e-12)


def test_the_weekend_is_saturday_and_sunday_whatever_the_start_hour():
    # from Friday 22:30 the weekend factor starts 1.5 h in and ends 49.5 h later, at Monday 00:00
    m = _model(T0, amplitude=0.0)
    t = np.arange(0.0, 7 * 86_400.0, 900.0)
    weekend = intensity(m, t) < 1.0
    want = np.array([(T0 + timedelta(seconds=float(s))).weekday() >= 5 for s in t])
    assert np.array_equal(weekend, want)
    assert weekend.sum() * 900 == 2 * 86_400


def _clocked(t0: datetime, n: int = 40) -> Trace:
    """A short trace whose first request is at Unix time ``t0``."""
    m = WorkloadModel(name="s", block_tokens=64, arrivals=Arrivals(rate=0.5),
                      sessions=Sessions(turns_mean=1.0), prompts=Prompts(system_tokens=0.0, first_user_tokens=64.0,
                                                                          output_tokens=1.0))
    tr = Trace.concat(list(Generator(m, duration_s=4 * n, seed=1).batches()))
    return replace(tr, t0=t0.timestamp())


@pytest.mark.parametrize("t0", [T0,
                                datetime.fromtimestamp(1_000_000_000, UTC),             # Sunday 2001-09-09 01:46:40
                                datetime(2024, 3, 31, 1, 30, tzinfo=UTC),               # EU DST change, Sunday
                                datetime(2024, 12, 31, 23, 59, 59, tzinfo=UTC),          # Tuesday, the year's end
                                datetime(2024, 2, 29, 12, 0, tzinfo=UTC)])              # a leap day, Thursday
def test_a_fitted_unix_clock_starts_at_its_utc_hour_and_weekday(t0):
    a = fit_model(_clocked(t0)).model.arrivals
    assert a.start_weekday == t0.weekday()
    assert a.start_hour == pytest.approx(_hour(t0), abs=1e-9)


def test_the_fitted_weekend_factor_counts_saturdays_and_sundays():
    """16 days of arrivals from Friday 22:30 to Sunday 22:30 with weekends at 0.3 of the weekday rate (generated
    from the calendar's start); the fit must find the weekend on the same days from the Unix timestamps alone.
    Not whole weeks: a weekend misplaced by a day would cover a different number of days."""
    base = _model(T0, amplitude=0.0, weekend=0.3)
    m = replace(base, arrivals=replace(base.arrivals, rate=0.05), sessions=Sessions(turns_mean=1.0),
                prompts=Prompts(system_tokens=0.0, first_user_tokens=64.0, output_tokens=1.0))
    span = 16 * 86_400
    tr = replace(Trace.concat(list(Generator(m, duration_s=span, seed=4).batches())), t0=T0.timestamp())
    hours_weekend = sum((T0 + timedelta(minutes=k)).weekday() >= 5 for k in range(span // 60)) / 60   # 142.5 h
    share = hours_weekend * 0.3 / (span / 3600 - hours_weekend + hours_weekend * 0.3)
    weekend = [(T0 + timedelta(seconds=float(s))).weekday() >= 5 for s in tr.timestamp_s]
    assert sum(weekend) / len(weekend) == pytest.approx(share, abs=0.015)
    a = fit_model(tr).model.arrivals
    assert a.weekend_factor == pytest.approx(0.3, rel=0.12)
