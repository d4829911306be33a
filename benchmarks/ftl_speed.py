"""FTL model speed and accuracy: host pages/s and NAND pages/s of the numba kernel, WAF vs the analytic result.

Run: .venv/bin/python benchmarks/ftl_speed.py [--capacity 4GiB] [--writes 4]
Prints one line per (pattern, GC, over-provisioning): measured WAF, analytic WAF (uniform random only), the
relative error, and the rates (kernel compile excluded; the preconditioning fill included).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvbench.analysis.ftl import FtlConfig, analytic_waf_uniform, simulate  # noqa: E402
from kvbench.units import parse_size  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--capacity", default="4GiB")
    ap.add_argument("--writes", type=float, default=4.0)
    ap.add_argument("--block-pages", type=int, default=256)
    args = ap.parse_args()
    cap = parse_size(args.capacity)
    print(f"capacity {args.capacity} ({cap // 4096:,} pages of 4 KiB), {args.block_pages} pages/block, "
          f"{args.writes}x writes after a sequential fill")
    print(f"{'pattern':<10} {'gc':<6} {'op':>5} {'waf':>7} {'analytic':>8} {'error':>7} {'host Mpg/s':>10} "
          f"{'nand Mpg/s':>10} {'s':>6}")
    for pattern in ("uniform", "sequential"):
        for gc in ("greedy", "fifo"):
            for op in (0.07, 0.28):
                cfg = FtlConfig(user_bytes=cap, op=op, block_pages=args.block_pages, gc=gc)
                r = simulate(cfg, pattern=pattern, writes=args.writes, warmup=0.5, seed=1)
                ref = analytic_waf_uniform(cfg.effective_op) if pattern == "uniform" else 1.0
                print(f"{pattern:<10} {gc:<6} {op:>5.2f} {r.waf:7.3f} {ref:8.3f} {r.waf / ref - 1:+7.2%} "
                      f"{r.total.host_pages / r.seconds / 1e6:10.2f} {r.total.nand_pages / r.seconds / 1e6:10.2f} "
                      f"{r.seconds:6.2f}")


if __name__ == "__main__":
    main()
