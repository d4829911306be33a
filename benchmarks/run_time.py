#!/usr/bin/env python3
"""Where the default job's time goes: ``kvbench run --duration 10s``, first run and warm (issue 32, part 1).

Target: warm, the job's own work (everything but the replay's timed I/O: trace, curve, dry run, store and
arena set-up, probes, plan, check, report) <= 20 s of wall time on the 2-core VM, so the whole job is its
replay budget plus ~20 s. The first run compiles numba's kernels into an empty cache folder
(``KVBENCH_NUMBA_CACHE_DIR``), stated apart; the warm runs reuse that folder.

Per run it prints the wall time, the replay's timed I/O (``elapsed_s`` of the timed replay's summary), the job's
own work (wall - timed I/O), the steps the job records (``summary.json`` ``steps``) and the time between
them (sizing, probes, report), with the 1-minute load average before and after: the VM is shared.

    .venv/bin/python benchmarks/run_time.py [--duration 10s] [--warm 2] [--no-cold]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def one_run(duration: str, cache: str, label: str) -> dict:
    with tempfile.TemporaryDirectory(dir=REPO / "results" if (REPO / "results").is_dir() else None) as d:
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "kvbench", "run", "--duration", duration, "--results", d,
                            "-o", f"{d}/r.html", "--json"], cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO), "KVBENCH_NUMBA_CACHE_DIR": cache})
        wall = time.perf_counter() - t0
        if p.returncode:
            raise SystemExit(f"{label}: kvbench run exited {p.returncode}: "
                             f"{(p.stderr.strip().splitlines() or [''])[-1]}")
        job = Path(json.loads(p.stdout)["run_dir"])
        summary = json.loads((job / "summary.json").read_text())
        steps = {s["name"]: float(s["seconds"]) for s in summary.get("steps") or []}
        timed = 0.0
        for part in job.glob("replay-kv-*/summary.json"):
            s = json.loads(part.read_text())
            if not s.get("dry_run"):
                timed = float(s.get("elapsed_s") or 0.0)
        return {"label": label, "wall_s": wall, "timed_io_s": timed, "own_s": wall - timed, "steps": steps,
                "other_s": wall - sum(steps.values()), "load": (load0, os.getloadavg()[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="10s")
    ap.add_argument("--warm", type=int, default=2, help="warm runs after the first")
    ap.add_argument("--no-cold", action="store_true", help="skip the first run into an empty numba cache "
                                                           "(the warm runs then use the machine's cache)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as empty:
        cache = os.environ.get("KVBENCH_NUMBA_CACHE_DIR", str(Path.home() / ".cache/kvbench/numba"))
        runs = []
        if not a.no_cold:
            cache = empty
            runs.append(one_run(a.duration, cache, "first (empty numba cache)"))
        runs += [one_run(a.duration, cache, f"warm {i + 1}") for i in range(a.warm)]
    print(f"kvbench run --duration {a.duration}: wall, the replay's timed I/O, the job's own work (target <= 20 s "
          "warm)")
    for r in runs:
        steps = ", ".join(f"{k} {v:.1f}" for k, v in r["steps"].items())
        print(f"  {r['label']:<26} wall {r['wall_s']:6.1f} s  timed I/O {r['timed_io_s']:5.1f} s  own "
              f"{r['own_s']:6.1f} s  [steps: {steps}; sizing, probes, report, start-up {r['other_s']:.1f}]  "
              f"load {r['load'][0]:.2f} -> {r['load'][1]:.2f}")


if __name__ == "__main__":
    main()
