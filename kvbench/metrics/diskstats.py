"""Host block-layer counters from /proc/diskstats: what the kernel sent to each device (sectors are 512 B)."""

from __future__ import annotations

from pathlib import Path

FIELDS = ("read_ios", "read_merges", "read_sectors", "read_ms", "write_ios", "write_merges", "write_sectors",
          "write_ms", "in_flight", "io_ms", "weighted_ms", "discard_ios", "discard_merges", "discard_sectors",
          "discard_ms")


def snapshot(names=None) -> dict[str, dict]:
    """Counters per device name (all devices, or only ``names``)."""
    out = {}
    try:
        lines = Path("/proc/diskstats").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) < 14:
            continue
        name = parts[2]
        if names is not None and name not in names:
            continue
        vals = [int(x) for x in parts[3:3 + len(FIELDS)]]
        out[name] = dict(zip(FIELDS, vals))
    return out


def delta(before: dict, after: dict) -> dict[str, dict]:
    """Per device: ios and bytes read/written/discarded between two snapshots."""
    out = {}
    for name, a in after.items():
        b = before.get(name)
        if b is None:
            continue
        d = {k: a[k] - b.get(k, 0) for k in a}
        out[name] = {"read_ios": d["read_ios"], "read_bytes": d["read_sectors"] * 512,
                     "write_ios": d["write_ios"], "write_bytes": d["write_sectors"] * 512,
                     "discard_bytes": d.get("discard_sectors", 0) * 512}
    return out
