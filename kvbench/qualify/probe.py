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
    timed_out: bool = False       # a phase completed no read in its time: first byte = that time (a lower bound)

    def tier_arg(self) -> str:
        """``NAME=BW,LATENCY`` for ``kvbench check --tier``."""
        return f"{self.name}={self.bandwidth_bytes_per_s:.6g}B/s,{self.first_byte_s * 1e6:.6g}us"

    def to_dict(self) -> dict:
        return asdict(self)


def _reads(target, span: int, size: int, n: int, qd: int, seconds: float, seed: int, faults=None):
    rng = np.random.default_rng(seed)
    slots = max(1, span // size)
    offsets = rng.integers(0, slots, n, dtype=np.uint64) * np.uint64(size)
    res = run_plan(make_plan(OP_READ, offsets, size), [target], qd=qd, runtime_s=seconds, handle_signals=False,
                   faults=faults)
    res.raise_for_status()
    return res.summary()


def probe_tier(name: str, path: str, *, span: int | None = None, io_size: int = 1 << 20, qd: int = 32,
               seconds: float = 2.0, small: int = 4096, faults: str | None = None) -> TierProbe:
    """Measure one tier: ``path`` is the store file/device or ``dram:<size>``; ``span`` bytes from offset 0
    are read (default: the whole target). ``faults``: injected into both measurements (tests: a stall)."""
    from kvbench.engine.targets import is_dram_spec, open_target

    t = open_target(path, write=is_dram_spec(path), create=False, shared=False)   # one worker (_reads)
    try:
        span = int(min(span or t.size, t.size))
        small = max(small, t.lbs)
        io_size = max(io_size - io_size % t.lbs, t.lbs)
        if t.kind == "dram":
            qd = 1          # a DRAM copy is synchronous: depth only queues copies behind each other
        lat = _reads(t, span, small, 20_000, 1, seconds / 2, 1, faults)
        bw = _reads(t, span, io_size, max(256, int(seconds * 20_000)), qd, seconds, 2, faults)
    finally:
        t.close()
    # a stalled tier may complete no read within a phase: its first byte is then at least the phase's time
    p50 = lat["lat_us"].get("p50")
    timed_out = p50 is None or bw["lat_us"].get("p50") is None
    first = float(p50) * 1e-6 if p50 is not None else seconds / 2
    return TierProbe(name, path, first, float(bw["bw_bytes_per_s"] or 0.0), io_size, qd, lat["lat_us"], bw["lat_us"],
                     timed_out)


def probe_job_tiers(tiers: dict, store: str, l2_bytes: int, l3_bytes: int, chunk: int, seconds: float,
                    faults: str | None = None) -> tuple[list, list, list]:
    """Probe the DRAM and NVMe tiers a replay used (both, even when the replay loaded from them: a probe says what
    the tier can do at the I/O size, the replay what it did under the workload), each checked against the replay
    on the same tier (:func:`kvbench.analysis.loadpath.guard_probes`: a suspect probe is rerun once, then
    excluded). ``tiers``: the replay summary's. Returns (probes kept, notes, excluded probes)."""
    from pathlib import Path

    from kvbench.analysis.loadpath import guard_probes

    specs = {}
    for name, t in tiers.items():
        if not isinstance(t, dict):
            continue
        if name == "l3" and Path(store).exists():
            written = int(t.get("write_bytes") or 0)
            span = min(l3_bytes, written) if written else l3_bytes
            if span >= chunk:
                specs["l3"] = {"path": store, "span": span}
        elif name == "l2" and l2_bytes > 0:
            specs["l2"] = {"path": f"dram:{max(chunk, min(l2_bytes, 1 << 30) // chunk * chunk)}", "span": None}

    def probe(name: str) -> TierProbe:
        return probe_tier(name, specs[name]["path"], span=specs[name]["span"], io_size=chunk, seconds=seconds,
                          faults=faults)

    return guard_probes([probe(n) for n in specs], tiers, lambda p: probe(p.name))
