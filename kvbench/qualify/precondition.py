"""Drive preconditioning: sequential fill, then random-write rounds until SNIA PTS steady state.

Runs in-process on the engine (``run_plan``), one plan per round, so every round is measured with the same
O_DIRECT path as the workloads that follow. Data contents are not stamped (nothing will read them back).
"""

from __future__ import annotations

import time

import numpy as np

from kvbench.analysis.steady_state import detect
from kvbench.engine.plan import OP_WRITE, make_plan
from kvbench.engine.runner import run_plan
from kvbench.errors import Interrupted
from kvbench.qualify.profile import Precondition
from kvbench.report.rundata import dig

MAX_PLAN_ROWS = 4_000_000       # ~160 MB of plan: a round longer than this at its IOPS simply ends early


def _run(plan, target, qd, runtime_s=None):
    res = run_plan(plan, [target], qd=qd, runtime_s=runtime_s, stamp=False)
    if res.status == "interrupted":
        raise Interrupted("interrupted during preconditioning; nothing was qualified", "rerun kvbench qualify")
    res.raise_for_status()
    return res.summary()


def precondition(target, pre: Precondition, *, region: int | None = None, seed: int = 1, progress=None) -> dict:
    """Fill ``region`` bytes of ``target`` sequentially ``fill_passes`` times, then run random-write rounds
    until the steady-state rule holds (after ``min_rounds``) or ``max_rounds`` ran. Returns a JSON-ready dict
    with the fill's numbers, per-round summaries, the per-round metric values and the steady-state verdict."""
    say = progress or (lambda msg: None)
    lbs = target.lbs
    region = int(region or target.size)
    step = max(pre.fill_bs, pre.bs, lbs)
    region -= region % step
    if region < step:
        raise ValueError(f"region {region} smaller than one {step}-byte write")
    out: dict = {"region_bytes": region, "fill": None, "rounds": [], "values": [], "metric": pre.metric}
    if pre.fill_passes > 0:
        n_slots = region // pre.fill_bs
        n = int(round(n_slots * pre.fill_passes))
        offsets = (np.arange(n, dtype=np.uint64) % np.uint64(n_slots)) * np.uint64(pre.fill_bs)
        t0 = time.monotonic()
        say(f"precondition: sequential fill, {pre.fill_passes:g} pass(es) of {region / 2**30:.3g} GiB "
            f"in {pre.fill_bs // 1024} KiB writes")
        s = _run(make_plan(OP_WRITE, offsets, pre.fill_bs), target, pre.qd)
        out["fill"] = {"bytes": int(offsets.size) * pre.fill_bs, "seconds": time.monotonic() - t0,
                       "bw_bytes_per_s": s.get("bw_bytes_per_s"), "lat_us": s.get("lat_us")}
        say(f"  fill done: {(s.get('bw_bytes_per_s') or 0) / 1e6:,.0f} MB/s")
    rng = np.random.default_rng(seed)
    slots = region // pre.bs
    last_rate = None
    ss = detect([], pre.window, pre.max_range, pre.max_excursion)
    for r in range(pre.max_rounds):
        n = int(np.clip((last_rate or 50_000.0) * pre.round_s * 1.5, 1000, MAX_PLAN_ROWS))
        offsets = rng.integers(0, slots, n, dtype=np.uint64) * np.uint64(pre.bs)
        s = _run(make_plan(OP_WRITE, offsets, pre.bs), target, pre.qd, runtime_s=pre.round_s)
        last_rate = s.get("iops") or last_rate
        v = dig(s, pre.metric)
        out["rounds"].append({"round": r + 1, "iops": s.get("iops"), "bw_bytes_per_s": s.get("bw_bytes_per_s"),
                              "runtime_s": s.get("runtime_s"), "lat_us": s.get("lat_us")})
        out["values"].append(None if v is None else float(v))
        vals = [np.nan if x is None else x for x in out["values"]]
        ss = detect(vals, pre.window, pre.max_range, pre.max_excursion)
        say(f"precondition round {r + 1}/{pre.max_rounds}: {pre.metric} {v if v is None else f'{v:,.4g}'}; "
            + ss.describe())
        if ss.reached and r + 1 >= pre.min_rounds:
            break
    out["steady_state"] = {**ss.to_dict(), "values": out["values"], "metric": pre.metric}
    return out
