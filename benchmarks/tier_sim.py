#!/usr/bin/env python3
"""Tier simulation speed: the compiled Hierarchy vs the Python reference, and ``replay kv --dry-run`` end to end.

Target (issue 16): ``replay kv --dry-run`` >= 3M blocks/s on the shipped synthetic trace, hit ratios unchanged.
Part 1 runs both simulations in-process on the same trace and specs (one batch, JIT already warm) and checks the
outputs are identical; rates use process CPU time (a shared machine's load does not count), wall beside.
Part 2 runs the command and prints the ``blocks_per_s`` it reports (its ``simulation`` section).

    .venv/bin/python benchmarks/tier_sim.py [--trace mooncake-synthetic] [--repeat 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec  # noqa: E402
from kvbench.stream.traces import Trace, read_trace  # noqa: E402

BLOCK = 512 * 131072          # llama-3.1-8b, 512-token blocks


def repeated(t: Trace, k: int) -> tuple:
    """The trace k times over, later copies shifted in time (same keys: a longer run of the same workload)."""
    n, span = t.n_requests, float(t.timestamp_s[-1]) + 1.0
    times = np.concatenate([t.timestamp_s + i * span for i in range(k)])
    offs = np.concatenate([t.offsets[:-1] + i * t.n_blocks for i in range(k)] + [[k * t.n_blocks]])
    return times, offs.astype(np.int64), np.tile(t.keys, k), n * k


def timed(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


SPECS = {
    "L1 8G + L2 16G + L3 64G, LRU, write-through": HierarchySpec(
        (TierSpec("l1", 8 << 30), TierSpec("l2", 16 << 30), TierSpec("l3", 64 << 30)), BLOCK),
    "L2 32G + L3 256G log, S3-FIFO, TTL 10 min, write-back": HierarchySpec(
        (TierSpec("l2", 32 << 30, "s3fifo", 600.0), TierSpec("l3", 256 << 30, "s3fifo", 600.0, layout="log", trim=True)),
        BLOCK, write_policy="back", segment_bytes=1 << 30),
    "L1 + L2 + L3 exclusive FIFO": HierarchySpec(
        (TierSpec("l1", 8 << 30, "fifo"), TierSpec("l2", 16 << 30, "fifo"), TierSpec("l3", 128 << 30, "fifo")), BLOCK,
        write_policy="back", inclusion="exclusive"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake-synthetic")
    ap.add_argument("--repeat", type=int, default=8, help="compiled runs use the trace this many times over")
    a = ap.parse_args()
    t = read_trace(a.trace)
    Hierarchy(next(iter(SPECS.values()))).run(t.timestamp_s[:50], t.offsets[:51], t.keys[:t.offsets[50]])  # JIT
    times, offs, keys, nreq = repeated(t, a.repeat)
    print(f"{a.trace}: {t.n_requests:,} requests, {t.n_blocks:,} block references")
    for name, spec in SPECS.items():
        (rq, ev), pc, pw = timed(lambda: ReferenceHierarchy(spec).run(t.timestamp_s, t.offsets, t.keys))
        (jq, jv), jc, jw = timed(lambda: Hierarchy(spec).run(t.timestamp_s, t.offsets, t.keys))
        same = np.array_equal(rq, jq) and np.array_equal(ev, jv)
        (bq, _), bc, bw = timed(lambda: Hierarchy(spec).run(times, offs, keys))
        n = int(offs[-1])
        print(f"  {name}: identical={same}; hit ratio {rq['hit_blocks'].sum() / t.n_blocks:.4f}; python "
              f"{t.n_blocks / pc / 1e6:.3f} M blocks/s; compiled {t.n_blocks / jc / 1e6:.2f} M blocks/s "
              f"(x{pc / jc:.0f}); compiled on {a.repeat}x the trace ({n:,} blocks) {n / bc / 1e6:.2f} M blocks/s "
              f"cpu, {n / bw / 1e6:.2f} wall")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "kvbench", "replay", "kv", a.trace, "--model", "llama-3.1-8b", "--l1", "8GiB",
           "--l2", "16GiB", "--l3", "/var/tmp/kvbench-tier-sim.dat", "--l3-capacity", "64GiB", "--dry-run", "--json"]
    d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=REPO).stdout)
    print(f"replay kv --dry-run: {d['simulation']['blocks_per_s'] / 1e6:.2f} M blocks/s "
          f"({d['simulation']['blocks']:,} blocks in {d['simulation']['seconds']:.3f} s), hit ratio "
          f"{d['hit_ratio']:.5f}, per tier " + ", ".join(f"{k} {v['hit_ratio']:.5f}" for k, v in d["tiers"].items()))


if __name__ == "__main__":
    main()
