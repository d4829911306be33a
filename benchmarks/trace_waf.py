"""Trace-driven device WAF: what a KV store's own write stream does to the NAND, per policy, layout, spare and size.

Run: .venv/bin/python benchmarks/trace_waf.py [--trace mooncake-synthetic] [--markdown]
Each row is ``kvbench ftl --trace`` (kvbench.analysis.trace_waf) at one setting: the L3 store's writes (and
trims) from the tier simulation through the FTL model, 256 MiB erase units, greedy GC; the README's endurance
table is this script's --markdown output. The last rows feed the same drive uniform random slot overwrites, the
stream the old synthetic "slot" model assumed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kvbench.analysis import ftl  # noqa: E402
from kvbench.analysis.trace_waf import StoreWrites, store_waf, store_writes  # noqa: E402
from kvbench.spec.models import load_model  # noqa: E402
from kvbench.stream.traces import read_trace  # noqa: E402

ROWS = [  # (label, model, capacity blocks, store_writes keywords, op)
    ("LRU, slot", "llama-3.1-8b", 5000, {}, 0.07),
    ("LRU, slot", "llama-3.1-8b", 10000, {}, 0.07),
    ("LRU, slot", "llama-3.1-8b", 30000, {}, 0.07),
    ("LRU, slot, trim", "llama-3.1-8b", 10000, {"trim": True}, 0.07),
    ("LRU, slot, no spare", "llama-3.1-8b", 10000, {"spare_slots": 0}, 0.07),
    ("LRU, slot, 1,024 spare", "llama-3.1-8b", 10000, {"spare_slots": 1024}, 0.07),
    ("FIFO, slot", "llama-3.1-8b", 10000, {"policy": "fifo"}, 0.07),
    ("S3-FIFO, slot", "llama-3.1-8b", 10000, {"policy": "s3fifo"}, 0.07),
    ("LRU, slot, TTL 5 min", "llama-3.1-8b", 10000, {"ttl_s": 300.0}, 0.07),
    ("LRU, slot, TTL 5 min, trim", "llama-3.1-8b", 10000, {"ttl_s": 300.0, "trim": True}, 0.07),
    ("LRU, log", "llama-3.1-8b", 10000, {"layout": "log"}, 0.07),
    ("LRU, slot (28 MiB slots straddle erase units)", "qwen2.5-7b", 20000, {}, 0.07),
    ("LRU, slot (34.3 MiB slots straddle erase units)", "deepseek-v3", 60000, {}, 0.07),
]


GENERATED = ("gen:chat,duration=2h,rate=20", "gen:coding-agent,duration=2h,rate=5",
             "gen:tool-agent,duration=2h,rate=5", "gen:qa,duration=2h,rate=20")


def random_overwrites(n_slots: int, slot_bytes: int, turnovers: float, seed: int = 1) -> StoreWrites:
    rng = np.random.default_rng(seed)
    slots = np.concatenate([np.arange(n_slots), rng.integers(0, n_slots, int((2 + turnovers) * n_slots))])
    k = slots.size
    return StoreWrites(ops=np.full(k, ftl.OP_WRITE, np.uint8), slots=slots.astype(np.int64),
                       nslots=np.ones(k, np.int64), request=np.arange(k), slot_bytes=slot_bytes,
                       capacity_blocks=n_slots, n_slots=n_slots, sample_rate=1.0, layout="slot", policy="random",
                       trim=False, origin="synthetic", note="uniform random slot overwrites",
                       warm_writes=2 * n_slots)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake-synthetic")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    tr = read_trace(args.trace)
    head = ("| store | model (slot) | capacity | stream | turnovers | WAF 7% OP | WAF 28% OP | s |\n"
            "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    if not args.markdown:
        print(f"trace {args.trace}: {tr.n_requests:,} requests, {tr.n_blocks:,} block references; 256 MiB erase "
              "units, greedy GC")
    print(head)
    for label, model, blocks, kw, _ in ROWS:
        bb = load_model(model).block_bytes(tr.block_tokens)
        t0 = time.perf_counter()
        sw = store_writes(tr, block_bytes=bb, capacity_bytes=blocks * (-(-bb // 4096) * 4096), **kw)
        w7, w28 = store_waf(sw, op=0.07).waf, store_waf(sw, op=0.28).waf
        origin = sw.origin + (f", sample {sw.sample_rate:.2g}" if sw.sample_rate < 1 else "")
        print(f"| {label} | {model} ({sw.slot_bytes / 2**20:.3g} MiB) | {blocks:,} blocks | {origin} | "
              f"{sw.turnovers:.1f} | {w7:.3f} | {w28:.3f} | {time.perf_counter() - t0:.1f} |")
    from kvbench.stream.synth import iter_generated
    from kvbench.stream.traces import Trace

    bb = load_model("llama-3.1-8b").block_bytes(512)
    for spec in GENERATED:
        g = Trace.concat(list(iter_generated(spec)))
        blocks = int(len(np.unique(g.keys)) * 0.1)
        t0 = time.perf_counter()
        sw = store_writes(g, block_bytes=bb, capacity_bytes=blocks * bb, max_slots=1 << 14, extend=False)
        w7, w28 = store_waf(sw, op=0.07).waf, store_waf(sw, op=0.28).waf
        w1g = store_waf(sw, op=0.07, erase_block_bytes=1 << 30).waf
        print(f"| LRU, slot, `{spec}` (10% of its blocks; 1 GiB erase units: {w1g:.2f}) | llama-3.1-8b (64 MiB) | "
              f"{blocks:,} blocks | generated, sample {sw.sample_rate:.2g} | {sw.turnovers:.1f} | {w7:.3f} | "
              f"{w28:.3f} | {time.perf_counter() - t0:.1f} |")
    for model, blocks in (("llama-3.1-8b", 10000),):
        bb = load_model(model).block_bytes(tr.block_tokens)
        sw = random_overwrites(blocks, bb, 3.0)
        print(f"| uniform random slot overwrites | {model} ({bb / 2**20:.3g} MiB) | {blocks:,} blocks | synthetic | "
              f"3.0 | {store_waf(sw, op=0.07).waf:.3f} | {store_waf(sw, op=0.28).waf:.3f} | |")


if __name__ == "__main__":
    main()
