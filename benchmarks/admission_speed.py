"""Measured speed of the admission trade-off's per-capacity simulation (kvbench.analysis.admission.simulate_tier)
per policy, against the plain LRU prefix loop (kvbench.sim.policies.simulate_prefix) and the tier simulation
(kvbench.sim.tiers.Hierarchy, one L3 tier, block events built) on the same trace. Prints block references per
CPU second and ratios; ~30 s on a 2-core VM.

    .venv/bin/python benchmarks/admission_speed.py [TRACE] [CAPACITY_BLOCKS]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvbench.analysis.admission import simulate_tier  # noqa: E402
from kvbench.sim.policies import make_policy, simulate_prefix  # noqa: E402
from kvbench.sim.tiers import Hierarchy, HierarchySpec, TierSpec  # noqa: E402
from kvbench.stream.traces import read_trace  # noqa: E402

POLICIES = ("all", "second-access", "tinylfu", "prefix-depth:depth=16", "prefix-depth:beyond_shared=1",
            "threshold:min_blocks=16", "threshold:window=10m")


def cpu(f, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        f()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    trace = read_trace(sys.argv[1] if len(sys.argv) > 1 else "mooncake-synthetic")
    cap = int(sys.argv[2]) if len(sys.argv) > 2 else 16_000
    refs = int(trace.offsets[-1] - trace.offsets[0])
    base = cpu(lambda: simulate_prefix([trace], make_policy("lru", cap)))
    print(f"{trace.path}: {refs:,} block references, capacity {cap:,} blocks")
    print(f"  simulate_prefix (LRU, no admission): {refs / base / 1e6:6.2f} M refs/s")
    for p in POLICIES:
        t = cpu(lambda: simulate_tier(trace, cap, p))
        print(f"  simulate_tier {p:<30} {refs / t / 1e6:6.2f} M refs/s  ({t / base:4.2f}x the LRU loop)")
    bb = 8192
    for p in ("all", "tinylfu"):
        t = cpu(lambda: Hierarchy(HierarchySpec((TierSpec("l3", cap * bb, admission=p),), bb)).run(
            trace.timestamp_s, trace.offsets, trace.keys), repeat=1)
        print(f"  Hierarchy (L3 only, events) {p:<16} {refs / t / 1e6:6.2f} M refs/s")


if __name__ == "__main__":
    main()
