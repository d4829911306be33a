#!/usr/bin/env python3
"""Trace ingest speed: the JSON parser choice, and ``kvbench mrc`` end to end on first read and on the cache.

Targets (issue 16): ``kvbench mrc`` on a ~10.7M-reference Mooncake-format trace >= 3M refs/s on first read and
>= 10M refs/s on the cached binary form. The trace is generated (seeded) unless --trace is given. Each mrc run is
a fresh process with its own empty cache folder for "first read"; "cached" reruns with that folder filled.
Printed rates: references / the command's own ``elapsed_s`` (read + profile, after imports) and references /
process CPU seconds (user + sys of the child: what a loaded shared machine does not inflate).

    .venv/bin/python benchmarks/trace_ingest.py [--trace FILE] [--kind agent --requests 13500 --block-tokens 64]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_mrc(trace: str, cache: str) -> tuple[dict, float, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KVBENCH_CACHE_DIR": cache}
    c0, w0 = child_cpu(), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "kvbench", "mrc", trace, "--json"], capture_output=True, text=True,
                         check=True, env=env, cwd=REPO).stdout
    return json.loads(out), child_cpu() - c0, time.perf_counter() - w0


def parsers(path: str) -> None:
    """CPU seconds to parse the lines and flatten the ids, per library (the choice in kvbench.stream.traces)."""
    import numpy as np

    sys.path.insert(0, str(REPO))
    libs = {"json (stdlib)": json.loads}
    try:
        import orjson
        libs["orjson"] = orjson.loads
    except ImportError:
        pass
    with open(path, "rb") as fh:
        lines = fh.read().splitlines()
    for name, loads in libs.items():
        c0 = time.process_time()
        recs = [loads(x) for x in lines]
        ids = np.array(list(itertools.chain.from_iterable(r["hash_ids"] for r in recs)))
        dt = time.process_time() - c0
        print(f"  {name:<14} {dt:6.2f} s CPU  {ids.size / dt / 1e6:6.2f} M refs/s (parse + flatten)")
    if "orjson" in libs:     # what kvbench does with large chunks: id lists cut out, parsed by a compiled kernel
        from kvbench.stream.traces import _parse_ids_fast

        _parse_ids_fast(lines[:10], b'"hash_ids"', libs["orjson"])      # load the compiled kernel first
        c0 = time.process_time()
        fast = _parse_ids_fast(lines, b'"hash_ids"', libs["orjson"])
        dt = time.process_time() - c0
        if fast is not None:
            print(f"  {'orjson + ids':<14} {dt:6.2f} s CPU  {fast[1].size / dt / 1e6:6.2f} M refs/s (kvbench: id "
                  "lists by the compiled kernel)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", help="an existing trace (default: generate one)")
    ap.add_argument("--kind", default="agent")
    ap.add_argument("--requests", type=int, default=13500)
    ap.add_argument("--block-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvbench-ingest-") as tmp:
        trace = a.trace
        if trace is None:
            trace = os.path.join(tmp, "trace.jsonl")
            subprocess.run([sys.executable, "-m", "kvbench", "trace", "gen", a.kind, "-o", trace, "-n",
                            str(a.requests), "--block-tokens", str(a.block_tokens), "--rate", "5", "--json"],
                           check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
        size = os.path.getsize(trace)
        print(f"trace {trace}: {size / 1e6:.1f} MB")
        print("parsers:")
        parsers(trace)
        rows = {"first read": [], "cached": []}
        refs = None
        for i in range(a.rounds):
            cache = os.path.join(tmp, f"cache{i}")
            for what in rows:
                d, cpu, wall = run_mrc(trace, cache)
                refs = d["references"]
                rows[what].append((refs / d["elapsed_s"], refs / cpu, wall))
        print(f"kvbench mrc, {refs:,} references, median of {a.rounds}:")
        for what, v in rows.items():
            print(f"  {what:<11} {statistics.median(x[0] for x in v) / 1e6:6.2f} M refs/s (command elapsed_s), "
                  f"{statistics.median(x[1] for x in v) / 1e6:6.2f} M refs/s per CPU second of the whole process "
                  f"(imports included), {statistics.median(x[2] for x in v):.2f} s wall")


if __name__ == "__main__":
    main()
