"""``kvbench cluster --sweep``: which cluster meets a TTFT / hit-ratio target for the least money per day.

A grid of configurations (``--sweep nodes=4,8,16 --sweep l4_capacity=16TB,64TB --sweep l4_pool_bw=50GB/s,100GB/s``)
is simulated under every router (dry run: the simulation of :mod:`kvbench.cluster.sim`, each node's wear from
:mod:`kvbench.cluster.wear`), and each (configuration, router) is priced per day from the price preset:

    GPUs  nodes x gpus_per_node x 24 h x $/GPU-hour
    DRAM  nodes x L2 bytes, over the DRAM's service years          (kvbench.analysis.cost.dram_usd_per_day)
    SSD   nodes x L3 bytes of the class, over min(warranty, the shortest node lifetime at its own DWPD)
    pool  L4 bytes of the class, over its warranty
    (network not priced: the links' utilisation is reported beside)

Rows that meet every target (``--ttft-p99``, ``--hit-ratio``) are listed cheapest first; the report draws the
Pareto front of cost against TTFT p99 per router. The pod-tier question ("a shared pool of ~16 TB per GPU on
400/800 Gb RDMA, or local NVMe only?") is a sweep over ``l4_capacity`` (0: no pool) and ``l4_link_bw``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from kvbench.errors import UsageError

MAX_POINTS = 256
#: sweep key -> (where it lives: "cluster" or "replay", field, parser kind)
KEYS = {
    "nodes": ("cluster", "nodes", "count"),
    "gpus_per_node": ("cluster", "gpus_per_node", "count"),
    "l2": ("replay", "l2", "size"),
    "l3_capacity": ("replay", "l3_capacity", "size"),
    "l4_capacity": ("replay", "l4_capacity", "size"),
    "l4_link_bw": ("replay", "l4_link_bw", "rate"),
    "l4_pool_bw": ("cluster", "l4_pool_bw", "rate"),
}


@dataclass(frozen=True)
class Targets:
    ttft_p99_s: float | None = None
    hit_ratio: float | None = None

    def meets(self, row: dict) -> bool:
        ok = True
        if self.ttft_p99_s is not None:
            ok &= row["ttft_p99_ms"] is not None and row["ttft_p99_ms"] <= self.ttft_p99_s * 1e3
        if self.hit_ratio is not None:
            ok &= row["hit_ratio"] is not None and row["hit_ratio"] >= self.hit_ratio
        return bool(ok)

    def to_dict(self) -> dict:
        return {"ttft_p99_s": self.ttft_p99_s, "hit_ratio": self.hit_ratio}


def parse_sweep(items) -> dict:
    """``("nodes=4,8", "l4_capacity=16TB,64TB")`` -> {key: [values]}; one-line errors name the key or value."""
    from kvbench.spec.fields import parse_fields
    from kvbench.units import parse_rate, parse_size

    fields = parse_fields(items or (), option="--sweep", known=KEYS, noun="key", error=UsageError,
                          fix="e.g. --sweep nodes=4,8,16 (list all of a key's values once)")
    out: dict = {}
    for key, values in fields.items():
        kind = KEYS[key][2]
        vals = []
        for v in (x.strip() for x in values.split(",")):
            try:
                if kind == "count":
                    n = int(v)
                    if not 1 <= n <= 1_000_000:
                        raise ValueError
                    vals.append(n)
                elif kind == "size":
                    vals.append(int(parse_size(v, what=f"--sweep {key}")))
                else:
                    vals.append(float(parse_rate(v, what=f"--sweep {key}")))
            except (ValueError, TypeError):
                raise UsageError(f"--sweep {key}: {v!r} is not a valid {kind}",
                                 "give e.g. nodes=4,8 l2=64GiB,128GiB l4_pool_bw=100GB/s") from None
            if kind == "rate" and not (vals[-1] > 0 and math.isfinite(vals[-1])):
                raise UsageError(f"--sweep {key}: {v!r} must be > 0", f"give e.g. {key}=100GB/s")
        if not vals:
            raise UsageError(f"--sweep {key} has no values", f"give e.g. --sweep {key}=...")
        out[key] = vals
    points = math.prod(len(v) for v in out.values()) if out else 0
    if points > MAX_POINTS:
        raise UsageError(f"--sweep spans {points:,} configurations (at most {MAX_POINTS})",
                         "sweep fewer values per key, or fewer keys")
    return out


def grid(sweep: dict) -> list[dict]:
    keys = list(sweep)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(sweep[k] for k in keys))]


def configure(cfg, point: dict):
    """The cluster configuration at one grid point."""
    rep = {KEYS[k][1]: v for k, v in point.items() if KEYS[k][0] == "replay"}
    clu = {KEYS[k][1]: v for k, v in point.items() if KEYS[k][0] == "cluster"}
    out = replace(cfg, **clu)
    if rep:
        out = out.with_replay(**rep)
    if "l4_capacity" in point and point["l4_capacity"] == 0:        # no pool: no pool bandwidth either
        out = replace(out.with_replay(l4="", l4_link_bw=None), l4_pool_bw=None)
    elif out.replay.l4_capacity and not out.replay.l4:               # a pool the base run had none of: the
        out = out.with_replay(l4=out.replay.results)                 # dry run names a folder it never writes
    return out


def usd_per_day(cfg, summary: dict, prices, drive) -> dict:
    """The day's bill of one configuration under one router (see the module docstring)."""
    from kvbench.analysis.cost import dram_usd_per_day, ssd_usd_per_day

    r = cfg.replay
    lives = [nd["tiers"]["l3"].get("lifetime_years") for nd in summary["nodes"] if "l3" in nd["tiers"]]
    lives = [x for x in lives if x is not None]
    life = min(lives) if lives else None
    bill = {"gpu": cfg.nodes * cfg.gpus_per_node * 24.0 * prices.gpu_usd_per_hour,
            "dram": dram_usd_per_day(cfg.nodes * r.l2, prices),
            "ssd": ssd_usd_per_day(cfg.nodes * r.l3_capacity, drive, life) if r.l3_capacity else 0.0,
            "pool": ssd_usd_per_day(r.l4_capacity, drive, None) if r.l4_capacity else 0.0}
    bill["total"] = sum(bill.values())
    return bill


def row(point: dict, router: str, cfg, summary: dict, prices, drive, targets: Targets) -> dict:
    wear = (summary.get("wear") or {}).get("l3") or {}        # the rollup every view states (cluster.wear.rollup)
    links = summary.get("links") or {}
    out = {**point, "router": router, "hit_ratio": summary["global"]["hit_ratio"],
           "ttft_p50_ms": summary["ttft_ms"]["p50"], "ttft_p99_ms": summary["ttft_ms"]["p99"],
           "l3_dwpd_host_busiest": wear.get("dwpd_host_busiest"),
           "links_mean": links.get("mean"), "links_p99": links.get("p99"),
           "pool_mean": (links.get("pool") or {}).get("mean"),
           "usd_per_day": usd_per_day(cfg, summary, prices, drive)}
    out["meets"] = targets.meets(out)
    return out


def pareto(rows: list[dict]) -> list[dict]:
    """Per router, the rows no other row of that router beats on both cost and TTFT p99."""
    front = []
    for router in dict.fromkeys(r["router"] for r in rows):
        mine = sorted((r for r in rows if r["router"] == router and r["ttft_p99_ms"] is not None),
                      key=lambda r: (r["usd_per_day"]["total"], r["ttft_p99_ms"]))
        best = math.inf
        for r in mine:
            if r["ttft_p99_ms"] < best:
                front.append(r)
                best = r["ttft_p99_ms"]
    return front


def run_sweep(cfg, trace, spec_for, profile, sweep: dict, targets: Targets, prices, drive, simulate) -> dict:
    """Every grid point under every router; ``spec_for(cfg)`` builds a point's hierarchy, ``simulate`` is
    :func:`kvbench.cluster.job.simulate`."""
    from kvbench.progress import Line

    rows = []
    points = grid(sweep)
    with Line("cluster sweep", len(points), "configurations") as line:
        for k, point in enumerate(points):
            c = configure(cfg, point)
            results, _ = simulate(c, trace, spec_for(c), profile)
            rows += [row(point, name, c, s, prices, drive, targets) for name, s in results.items()]
            line.update(k + 1)
    meeting = sorted((r for r in rows if r["meets"]), key=lambda r: r["usd_per_day"]["total"])
    for r in pareto(rows):
        r["pareto"] = True
    return {"keys": list(sweep), "targets": targets.to_dict(), "points": rows, "meeting": meeting,
            "cheapest": meeting[0] if meeting else None,
            "priced": "GPUs (nodes x GPUs x $/GPU-hour), DRAM, L3 SSD and the pool on the stated class; network "
                      "links are not priced (their utilisation is reported)", "class": drive.name,
            "prices": prices.name}
