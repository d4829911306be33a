"""Measured speed of the admission trade-off's per-capacity simulation per policy: kvbench.analysis.admission.
simulate_tier (the compiled Hierarchy, one L3 tier, events reduced per batch) against simulate_tier_reference
(the Python loop it replaced, kept as the tests' oracle) and the plain LRU prefix loop
(kvbench.sim.policies.simulate_prefix) on the same trace; checks both give the same TierRun. Prints block
references per CPU second and ratios; ~30 s on a 2-core VM.

    .venv/bin/python benchmarks/admission_speed.py [TRACE] [CAPACITY_BLOCKS]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _timing import fastest_cpu  # noqa: E402
from kvbench.analysis.admission import simulate_tier, simulate_tier_reference  # noqa: E402
from kvbench.sim.policies import make_policy, simulate_prefix  # noqa: E402
from kvbench.stream.traces import read_trace  # noqa: E402

POLICIES = ("all", "second-access", "tinylfu", "prefix-depth:depth=16", "prefix-depth:beyond_shared=1",
            "threshold:min_blocks=16", "threshold:window=10m")


def cpu(f, repeat: int = 3) -> float:
    return fastest_cpu(f, repeat)[1]


def main() -> None:
    trace = read_trace(sys.argv[1] if len(sys.argv) > 1 else "mooncake-synthetic")
    cap = int(sys.argv[2]) if len(sys.argv) > 2 else 16_000
    refs = int(trace.offsets[-1] - trace.offsets[0])
    base = cpu(lambda: simulate_prefix([trace], make_policy("lru", cap)))
    print(f"{trace.path}: {refs:,} block references, capacity {cap:,} blocks")
    print(f"  simulate_prefix (LRU, no admission): {refs / base / 1e6:6.2f} M refs/s")
    simulate_tier(trace, cap, "tinylfu")                     # load the compiled kernel first
    for p in POLICIES:
        ref = cpu(lambda: simulate_tier_reference(trace, cap, p))
        t = cpu(lambda: simulate_tier(trace, cap, p))
        same = simulate_tier(trace, cap, p) == simulate_tier_reference(trace, cap, p)
        print(f"  {p:<30} compiled {refs / t / 1e6:6.2f} M refs/s, Python {refs / ref / 1e6:6.2f} M refs/s: "
              f"x{ref / t:5.2f}{'' if same else '  RESULTS DIFFER'}")

if __name__ == "__main__":
    main()
