"""kvbench.engine.microbench: the plan of an ``io`` run (arrivals), checked by hand and through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_io_poisson_arrivals_are_exponential_not_uniform(cli, tmp_path):
    """Open loop at 2000/s for 0.5 s: 1,000 I/Os either way. Uniform gaps are all 500 us (coefficient of
    variation 0); Poisson gaps are exponential (CV 1, mean 500 us). The run follows the plan: never early."""
    from kvbench.engine.microbench import IoSpec, build_plan

    cv = {}
    for arrival in ("uniform", "poisson"):
        plan, loop = build_plan(IoSpec(target="x", rate_iops=2000, runtime_s=0.5, arrival=arrival, seed=3), 4 << 20)
        gaps = np.diff(plan["issue_ns"]).astype(np.float64)
        assert len(plan) == 1000 and not loop and plan["issue_ns"][0] == 0
        assert gaps.mean() == pytest.approx(500_000, rel=0.1)
        cv[arrival] = gaps.std() / gaps.mean()
        s = _json(cli("io", "--target", tmp_path / "p.dat", "--size", "4MiB", "--rate_iops", "2000", "--arrival",
                      arrival, "--runtime", "0.5s", "--seed", "3", "--qd", "8", "--json", "--results",
                      tmp_path / "res"))
        assert s["pacing"] == "open" and s["ios"] == 1000 and s["issue_lag_us"]["n"] == 1000
        assert s["issue_lag_us"]["mean_us"] >= 0                   # never early (signed mean)
    assert cv["uniform"] < 1e-3 and 0.85 < cv["poisson"] < 1.15
