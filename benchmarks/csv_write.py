#!/usr/bin/env python3
"""Per-request and per-I/O files at trace scale: kvbench's compiled CSV writer vs pandas' to_csv, and what a
``replay kv --dry-run`` spends beside its simulation.

Part 1 writes the same requests.csv-shaped table (ints, 4-decimal floats, NaN load times) and the same fio
iolog lines (ints, and names as the iolog writer gives them: codes into a list; space-separated) both ways and prints CPU seconds per million rows, the ratio,
and whether the bytes are identical. Part 2 generates a day of the ``chat`` workload (seeded) and runs
``replay kv --dry-run`` over it ``--runs`` times: the simulation's own rate (``simulation.blocks_per_s``) and
block references per second of the whole command (start-up, trace reading and the run folder included).

    .venv/bin/python benchmarks/csv_write.py [--rows 1000000] [--duration 1d] [--runs 2]
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

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import fastest_cpu as cpu  # noqa: E402
from kvbench.metrics.csvout import Labels, format_csv  # noqa: E402


def tables(n: int) -> dict:
    rng = np.random.default_rng(0)
    blocks = rng.integers(1, 200, n)
    hits = (blocks * rng.random(n)).astype(np.int64)
    load = np.where(hits > 0, rng.random(n) * 50, np.nan)
    requests = {"request": np.arange(n), "arrival_s": np.cumsum(rng.exponential(0.2, n)), "blocks": blocks,
                "hit_blocks": hits, "hit_l1": hits // 4, "hit_l2": hits // 4, "hit_l3": hits // 4,
                "hit_l4": hits - 3 * (hits // 4), "produced": blocks - hits, "load_ms": load,
                "l2_load_ms": load / 3, "l3_load_ms": load, "l4_load_ms": np.full(n, np.nan)}
    files, ops = ("/dev/nvme0n1", "/mnt/pool/kvbench-l4.bin"), ("read", "write", "trim")
    f, op = rng.integers(0, 2, n), rng.integers(0, 3, n)
    iolog = {"t": np.sort(rng.integers(0, 86_400_000, n)), "f": Labels(f, files), "a": Labels(op, ops),
             "o": rng.integers(0, 1 << 28, n) * 4096, "l": np.full(n, 1 << 20)}
    return {"requests.csv": (requests, ",", True), "fio iolog": (iolog, " ", False)}


def plain(cols: dict) -> dict:
    """The columns as pandas takes them (names instead of codes)."""
    return {k: np.array(v.names, dtype=object)[v.codes] if isinstance(v, Labels) else v for k, v in cols.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--duration", default="1d", help="span of the generated chat workload (part 2)")
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    import pandas as pd

    format_csv({"x": np.zeros(2), "i": np.zeros(2, np.int64)})           # the kernel loaded first
    print(f"part 1: {a.rows:,} rows, CPU seconds (fastest of 3)")
    for name, (cols, sep, header) in tables(a.rows).items():
        want, tp = cpu(lambda c=plain(cols), s=sep, h=header: pd.DataFrame(c).to_csv(
            index=False, float_format="%.4f", sep=s, header=h).encode())
        got, tk = cpu(lambda c=cols, s=sep, h=header: format_csv(c, decimals=4, sep=s, header=h))
        print(f"  {name:<13} pandas {tp:6.3f} s, kvbench {tk:6.3f} s: x{tp / tk:5.1f}; "
              f"{len(got) / 1e6:,.1f} MB, {'identical' if got == want else 'DIFFERENT'}")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        trace = os.path.join(tmp, "chat.jsonl")
        subprocess.run([sys.executable, "-m", "kvbench", "trace", "gen", "--model-file", "chat", "--duration",
                        a.duration, "-o", trace, "--json"], check=True, capture_output=True, env=env, cwd=REPO)
        cmd = [sys.executable, "-m", "kvbench", "replay", "kv", trace, "--model", "llama-3.1-8b", "--l1", "8GiB",
               "--l2", "64GiB", "--l3", os.path.join(tmp, "l3.store"), "--l3-capacity", "1TiB", "--l4", tmp,
               "--l4-capacity", "4TiB", "--dry-run", "--json", "--results", os.path.join(tmp, "results")]
        print(f"part 2: replay kv --dry-run over {a.duration} of the chat workload, L1 8G + L2 64G + L3 1T + L4 4T")
        for _ in range(a.runs):
            w = time.perf_counter()
            d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                                          cwd=REPO).stdout)
            wall = time.perf_counter() - w
            sim = d["simulation"]
            print(f"  {d['requests']:,} requests, {sim['blocks']:,} blocks: simulation {sim['blocks_per_s'] / 1e6:.2f}M "
                  f"blocks/s ({sim['seconds']:.2f} s), whole command {sim['blocks'] / wall / 1e6:.2f}M blocks/s "
                  f"({wall:.2f} s wall)")


if __name__ == "__main__":
    main()
