"""Measured speed of the Engram pure pipeline: tokenizer, canonical-id map, hashing, per-step unique rows, LRU
stack distances, and a whole workload build. Prints rates; takes ~30 s on a 2-core VM.

    .venv/bin/python benchmarks/engram_speed.py [TEXT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvbench.replay.engram import EngramReplayConfig, build_workload  # noqa: E402
from kvbench.sim.rowcache import RowStream  # noqa: E402
from kvbench.stream.engram import EngramHasher, load_engram  # noqa: E402
from kvbench.stream.tokens import compress, load_tokenizer, read_text  # noqa: E402


def timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def main() -> None:
    default = ROOT.parent / "shared" / "corpus" / "en_mobydick.txt"
    text_path = Path(sys.argv[1]) if len(sys.argv) > 1 else (default if default.is_file() else
                                                              ROOT / "tests" / "fixtures" / "text" / "mobydick_slice.txt")
    text = read_text(text_path)
    tk, t_load = timed(load_tokenizer)
    lut, t_map = timed(tk.canonical_map)
    ids, t_enc = timed(lambda: tk.encode(text))
    print(f"text               {text_path.name}: {len(text):,} chars -> {ids.size:,} tokens ({tk.kind})")
    print(f"tokenizer          load {t_load:.2f} s, canonical map {t_map:.2f} s "
          f"({tk.vocab_size:,} -> {lut.max() + 1:,} ids), encode {ids.size / t_enc / 1e6:.2f} M tokens/s")
    c = compress(ids, lut)
    spec = load_engram("engram-27b")
    h = EngramHasher.build(spec, int(lut.max()) + 1, int(lut[spec.pad_id]))
    n = (c.size // 2048) * 2048
    rows, t_hash = timed(lambda: h.rows(c[:n].reshape(-1, 2048)))
    print(f"hash (engram-27b)  {n / t_hash / 1e6:.2f} M tokens/s = {rows.size / t_hash / 1e6:.1f} M rows/s")
    flat = rows.reshape(-1)
    rs, t_rs = timed(lambda: RowStream.build(flat, np.arange(flat.size) >= flat.size // 2))
    print(f"row stream         {flat.size / t_rs / 1e6:.2f} M accesses/s (dense ids + LRU stack distances + ranks)")
    cfg = EngramReplayConfig(preset="engram-27b", text=str(text_path), batch=32, seq_len=2048, dram=256 << 20)
    w, t_w = timed(lambda: build_workload(cfg))
    s = w.summary()
    print(f"workload build     {t_w:.1f} s for {s['steps']:,} steps, {w.access_row.size:,} step-unique rows "
          f"({w.access_row.size / t_w / 1e6:.2f} M rows/s end to end)")
    print(f"  DRAM 256 MiB static hit ratio {s['dram_hit_ratio']:.3f}; read amplification "
          + ", ".join(f"{k} {v['read_amplification']:.2f}" for k, v in s["layouts"].items()))


if __name__ == "__main__":
    main()
