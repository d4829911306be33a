"""Tier probes: a tier's first-byte latency and its bandwidth at a given I/O size, measured on the engine.

``T_load(n) = t_first_byte + n * bytes_per_token / BW(io_size)`` (DESIGN.md, "The inequality") needs both
numbers per tier. A replay measures them on its own loads, but a short replay of a trace whose reuse comes
late may issue no load at all; then ``kvbench run`` probes the tiers it used: small reads at depth 1 for the
first byte, reads at the replay's chunk size and depth for the bandwidth, over the part of the store that
was written (reading never-written file ranges would measure holes, not the device).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from kvbench.engine.plan import OP_READ, make_plan
from kvbench.engine.runner import run_plan


@dataclass(frozen=True)
class TierProbe:
    name: str
    path: str
    first_byte_s: float           # p50 latency of a small read at queue depth 1
    bandwidth_bytes_per_s: float  # reads of io_size at queue depth qd
    io_size: int
    qd: int
    first_byte_lat_us: dict
    bandwidth_lat_us: dict

    def tier_arg(self) -> str:
        """``NAME=BW,LATENCY`` for ``kvbench check --tier``."""
        return f"{self.name}={self.bandwidth_bytes_per_s:.6g}B/s,{self.first_byte_s * 1e6:.6g}us"

    def to_dict(self) -> dict:
        return asdict(self)


def _reads(target, span: int, size: int, n: int, qd: int, seconds: float, seed: int):
    rng = np.random.default_rng(seed)
    slots = max(1, span // size)
    offsets = rng.integers(0, slots, n, dtype=np.uint64) * np.uint64(size)
    res = run_plan(make_plan(OP_READ, offsets, size), [target], qd=qd, runtime_s=seconds, handle_signals=False)
    res.raise_for_status()
    return res.summary()


def probe_tier(name: str, path: str, *, span: int | None = None, io_size: int = 1 << 20, qd: int = 32,
               seconds: float = 2.0, small: int = 4096) -> TierProbe:
    """Measure one tier: ``path`` is the store file/device or ``dram:<size>``; ``span`` bytes from offset 0
    are read (default: the whole target)."""
    from kvbench.engine.targets import open_target

    t = open_target(path, write=path.startswith("dram:"), create=False)
    try:
        span = int(min(span or t.size, t.size))
        small = max(small, t.lbs)
        io_size = max(io_size - io_size % t.lbs, t.lbs)
        if t.kind == "dram":
            qd = 1          # a DRAM copy is synchronous: depth only queues copies behind each other
        lat = _reads(t, span, small, 20_000, 1, seconds / 2, 1)
        bw = _reads(t, span, io_size, max(256, int(seconds * 20_000)), qd, seconds, 2)
    finally:
        t.close()
    return TierProbe(name, path, float(lat["lat_us"]["p50"]) * 1e-6, float(bw["bw_bytes_per_s"] or 0.0), io_size, qd,
                     lat["lat_us"], bw["lat_us"])
