"""A week of a workload model at a realistic rate, streamed into kvbench commands without a file.

Target (issue 13): a 7-day workload at 20 requests/s (about 12M requests, ~100M block references for chat)
runs through ``mrc --sample`` and ``plan`` in minutes with memory bounded by the sample, not by the trace. Each
step runs the real CLI in a child process; wall time and the child's peak RSS (``ru_maxrss``) are printed, with
the references streamed per second. ``plan`` holds its key-sampled stream whole but compacted (only requests
holding a sampled block), so its RSS follows the sampled references: it is printed against the same plan at
one day.

    .venv/bin/python benchmarks/workload_week.py [--model chat] [--duration 7d] [--rate 20] [--sample 0.01]
        [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def run(args: list[str]) -> tuple[dict, float, float]:
    """Run ``kvbench ARGS --json`` in a fresh child; returns its JSON, wall seconds and peak RSS (MiB)."""
    env = dict(os.environ, PYTHONPATH=REPO)
    t = time.perf_counter()
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: a fresh wrapper per step runs kvbench as its only
    # child and reports that child's peak
    code = ("import resource, subprocess, sys; "
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
            "sys.stderr.write(p.stderr); sys.stdout.write(p.stdout); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)")
    p = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "kvbench", *args, "--json"],
                       capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"kvbench {' '.join(args)} failed:\n{p.stderr}")
    rss_kib = int(p.stderr.strip().splitlines()[-1])
    return json.loads(p.stdout), wall, rss_kib / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="chat", help="workload model preset or TOML")
    ap.add_argument("--duration", default="7d")
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--sample", type=float, default=0.01)
    ap.add_argument("--quick", action="store_true", help="1 day instead of the duration (a smoke run)")
    a = ap.parse_args()
    duration = "1d" if a.quick else a.duration
    spec = f"gen:{a.model},duration={duration},rate={a.rate:g},seed=1"
    print(f"workload {spec}")
    out, wall, rss = run(["mrc", spec, "--sample", str(a.sample), "--points", "16"])
    refs = out["references"]
    print(f"mrc --sample {a.sample:g}: {out['requests']:,} requests, {refs:,} block references in {wall:.1f} s "
          f"({refs / wall / 1e6:.2f}M refs/s end to end), peak RSS {rss:,.0f} MiB; keys of the whole trace would "
          f"take {refs * 8 / 2**20:,.0f} MiB; infinite-cache hit ratio {out['infinite_hit_ratio']:.3f}")
    small = f"gen:{a.model},duration=1d,rate={a.rate:g},seed=1"
    out1, wall1, rss1 = run(["mrc", small, "--sample", str(a.sample), "--points", "16"])
    print(f"  same at 1 day: {out1['references']:,} references, peak RSS {rss1:,.0f} MiB "
          f"(RSS ratio {rss / rss1:.2f} for {refs / max(1, out1['references']):.1f}x the references)")
    plans = {}
    for d in dict.fromkeys(("1d", duration)):
        pspec = f"gen:{a.model},duration={d},rate={a.rate:g},seed=1,sample={a.sample:g}"
        po, pwall, prss = run(["plan", "--trace", pspec, "--model", "llama-3.1-8b", "--waf", "1.5"])
        plans[d] = (po, prss)
        print(f"plan on {pspec}: {po['requests']:,} requests, {po['references']:,} sampled references in "
              f"{pwall:.1f} s, peak RSS {prss:,.0f} MiB ({prss * 2**20 / po['references']:,.0f} B per sampled "
              f"reference, {prss * 2**20 / po['requests']:,.0f} B per request)")
    if len(plans) == 2:
        (p1, r1), (p7, r7) = plans["1d"], plans[duration]
        print(f"  plan RSS ratio {r7 / r1:.2f} for {p7['requests'] / p1['requests']:.1f}x the requests and "
              f"{p7['references'] / p1['references']:.1f}x the sampled references")

if __name__ == "__main__":
    main()
