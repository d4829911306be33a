#!/usr/bin/env python3
"""Peak memory of ``kvbench mrc --sample-size`` on generated streams of growing length (issue 16: a
billion-reference stream stays under 2 GiB).

Each run is a fresh ``kvbench mrc "gen:MODEL,duration=D,rate=R,seed=1" --sample-size N --json`` process; its
peak resident set comes from wait4's rusage (ru_maxrss of that child alone). Memory flat in the stream length
is the claim: the printed ratio is each run's peak over the shortest run's.

    .venv/bin/python benchmarks/mrc_memory.py [--model chat] [--rate 2000] [--hours 0.5 2 8] [--size 8192]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(spec: str, size: int) -> tuple[dict, float, float, float]:
    """(mrc JSON, peak RSS MiB, CPU s, wall s) of one mrc process."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    w0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "kvbench", "mrc", spec, "--sample-size", str(size), "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"mrc_memory: {spec} failed ({p.returncode}): {err.decode().strip()}")
    return json.loads(out), ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime, time.perf_counter() - w0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="chat", help="workload class or model file of the gen: stream")
    ap.add_argument("--rate", type=float, default=2000.0, help="requests per second of the generated stream")
    ap.add_argument("--hours", type=float, nargs="+", default=[0.5, 2.0, 8.0], help="stream lengths (hours)")
    ap.add_argument("--size", type=int, default=8192, help="--sample-size (keys)")
    a = ap.parse_args()
    rows = []
    print(f"kvbench mrc gen:{a.model} at {a.rate:g} req/s --sample-size {a.size}: peak RSS per process")
    for h in a.hours:
        spec = f"gen:{a.model},duration={h * 3600:g}s,rate={a.rate:g},seed=1"
        d, rss, cpu, wall = run(spec, a.size)
        rows.append({"hours": h, "references": d["references"], "requests": d["requests"], "peak_rss_mib": rss,
                     "cpu_s": cpu, "wall_s": wall, "sample_rate": d["sample_rate"]})
        base = rows[0]["peak_rss_mib"]
        print(f"  {h:g} h: {d['references']:>13,} references  peak RSS {rss:7.0f} MiB (x{rss / base:.2f} of the "
              f"shortest)  {cpu:7.1f} s CPU  {d['references'] / cpu / 1e6:5.2f} M refs/CPU s  "
              f"final rate {d['sample_rate']:.3g}")
    print("JSON " + json.dumps(rows))


if __name__ == "__main__":
    main()
