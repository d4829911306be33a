"""Write amplification in three layers, each reported with where its numbers came from (pure).

- application WA = bytes written to the store / unique KV bytes produced (the replay's layout, write policy and
  re-production after eviction or expiry);
- host WA = bytes the device received (/proc/diskstats) / bytes the engine wrote (filesystem, journal,
  alignment);
- device WA = NAND bytes / host bytes (SMART + OCP C0h counters when the drive has them, else the FTL model
  with stated over-provisioning: :mod:`kvbench.analysis.ftl`).
The NAND bytes per unique KV byte is their product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvbench.errors import SpecError


def _ratio(num, den) -> float | None:
    if num is None or den is None or not den:
        return None
    return float(num) / float(den)


@dataclass(frozen=True)
class WriteAmplification:
    """Bytes at each layer of the write path; ratios are None where a layer was not measured."""

    unique_kv_bytes: float | None = None        # KV bytes produced once each
    store_bytes: float | None = None            # bytes the store wrote (application level)
    engine_bytes: float | None = None           # bytes the engine submitted to the device or file
    device_bytes: float | None = None           # bytes the block device received (diskstats)
    nand_bytes: float | None = None             # bytes programmed to NAND (OCP C0h or the FTL model)
    device_waf_source: str = ""                 # "smart/ocp" | "ftl model: ..." | ""
    device_waf_override: float | None = None    # a device WAF without byte counts (FTL model ratio)

    @property
    def app(self) -> float | None:
        return _ratio(self.store_bytes, self.unique_kv_bytes)

    @property
    def host(self) -> float | None:
        return _ratio(self.device_bytes, self.engine_bytes)

    @property
    def device(self) -> float | None:
        if self.device_waf_override is not None:
            return self.device_waf_override
        return _ratio(self.nand_bytes, self.device_bytes if self.device_bytes is not None else self.engine_bytes)

    @property
    def total(self) -> float | None:
        """NAND bytes per unique KV byte: the product of the layers that were measured (None if none)."""
        parts = [x for x in (self.app, self.host, self.device) if x is not None]
        return math.prod(parts) if parts else None

    def to_dict(self) -> dict:
        return {"app": self.app, "host": self.host, "device": self.device, "total": self.total,
                "device_source": self.device_waf_source,
                "bytes": {"unique_kv": self.unique_kv_bytes, "store": self.store_bytes, "engine": self.engine_bytes,
                          "device": self.device_bytes, "nand": self.nand_bytes}}


def _dig(d: dict, *path, default=None):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def from_summary(summary: dict, *, tier: str = "l3") -> WriteAmplification:
    """The layers a replay summary (summary.json, :mod:`kvbench.metrics.results`) measured: the store's
    ``tiers.<tier>.write_bytes`` (what the engine wrote to it), ``app_write_amplification``, the store
    device's /proc/diskstats delta ``host_bytes`` and its SMART/OCP deltas ``device_counters.<tier>``."""
    if not isinstance(summary, dict):
        raise SpecError("summary.json is not an object", "give a kvbench run folder")
    store = _dig(summary, "tiers", tier, "write_bytes")
    app = summary.get("app_write_amplification")
    unique = store / app if (app and store is not None) else None
    device = _dig(summary, "host_bytes", "write_bytes")
    engine = store
    smart = _dig(summary, "device_counters", tier)
    nand, source = None, ""
    if isinstance(smart, dict) and smart.get("nand_bytes_written") is not None:
        nand, source = smart["nand_bytes_written"], "smart/ocp"
        if device is None:
            device = smart.get("host_bytes_written")
    return WriteAmplification(unique_kv_bytes=unique, store_bytes=store, engine_bytes=engine, device_bytes=device,
                              nand_bytes=nand, device_waf_source=source)
