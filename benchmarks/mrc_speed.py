"""Measure hit-ratio-curve speed: exact LRU and SHARDS references/s on one core, SHARDS error vs exact.

Targets (issue 3): exact >= 5M refs/s; SHARDS >= 50M refs/s with mean absolute error <= 0.5% against exact.
Rates use process CPU time (the kernels are single-threaded), so a loaded shared machine does not make them
look slower than they are; wall time is printed beside. JIT compilation is excluded (warmed up first).
MAE is over 100 capacities evenly spaced from 1 block to the largest reuse distance (how SHARDS reports it).

    .venv/bin/python benchmarks/mrc_speed.py [--requests N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kvbench.analysis.curves.profile import exact_profile, shards_profile  # noqa: E402
from kvbench.stream.generators import GenSpec, generate, write_trace  # noqa: E402
from kvbench.stream.traces import Trace, read_trace  # noqa: E402


def timed(fn):
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def make_trace(kind: str, requests: int, block_tokens: int, seed: int = 1) -> Trace:
    with tempfile.TemporaryDirectory() as d:
        p = write_trace(generate(GenSpec(kind, requests=requests, rate=5.0, seed=seed, block_tokens=block_tokens)),
                        os.path.join(d, "t.jsonl"))
        return read_trace(p)


def uniform_trace(n_refs: int, n_keys: int, seed: int = 0) -> Trace:
    """Worst case for locality: blocks drawn uniformly from n_keys (50 per request)."""
    rng = np.random.default_rng(seed)
    n_req = n_refs // 50
    offsets = np.arange(n_req + 1, dtype=np.int64) * 50
    keys = rng.integers(0, n_keys, n_req * 50).astype(np.uint64)
    return Trace(np.arange(n_req, dtype=np.float64), np.full(n_req, 50 * 16), np.zeros(n_req, np.int64), offsets,
                 keys, 16, "uniform", "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=12000, help="agent requests (64-token blocks)")
    ap.add_argument("--quick", action="store_true", help="smaller traces (a smoke run)")
    a = ap.parse_args()
    scale = 0.1 if a.quick else 1.0
    exact_profile(make_trace("chat", 50, 512))                       # JIT warm-up (cached afterwards)
    shards_profile(make_trace("chat", 50, 512), size=64)
    traces = {
        "agent/64-token blocks": make_trace("agent", int(a.requests * scale), 64),
        "chat/16-token blocks": make_trace("chat", int(60000 * scale), 16),
        "uniform 1M keys": uniform_trace(int(5_000_000 * scale), 1_000_000),
    }
    print(f"{'trace':<24} {'refs':>11} {'distinct':>10} {'method':<22} {'M refs/s':>9} {'(wall)':>8} "
          f"{'MAE':>8} {'max err':>8}")
    for name, t in traces.items():
        n = t.n_blocks
        exact, cpu, wall = timed(lambda: exact_profile(t))
        grid = np.linspace(1, max(1.0, exact.max_distance), 100)
        truth = exact.hit_ratio(grid)
        print(f"{name:<24} {n:>11,} {int(exact.distinct_blocks):>10,} {'exact LRU':<22} {n / cpu / 1e6:>9.1f} "
              f"{n / wall / 1e6:>8.1f} {0:>8.4f} {0:>8.4f}")
        for label, kw in (("shards rate 0.1", {"rate": 0.1}), ("shards rate 0.05", {"rate": 0.05}),
                          ("shards rate 0.01", {"rate": 0.01}), ("shards size 32768", {"size": 32768})):
            est, cpu, wall = timed(lambda: shards_profile(t, **kw))
            err = np.abs(est.hit_ratio(grid) - truth)
            print(f"{'':<24} {'':>11} {'':>10} {label:<22} {n / cpu / 1e6:>9.1f} {n / wall / 1e6:>8.1f} "
                  f"{err.mean():>8.4f} {err.max():>8.4f}")


if __name__ == "__main__":
    main()
