"""Simulate a cluster: route each request, run it through its node's tiers (L4 shared), time it in the node's
queue (pure; the run folder is written by :mod:`kvbench.cluster.job`).

Per request, in arrival order: the router picks a node from what it sees at the arrival time (outstanding
prefill work per node, the prefix each node holds); the node's hierarchy simulates the request exactly as
``replay kv`` does (hits per tier, creation, promotion, demotion into the shared L4 pool); then the request
waits for the first free lane (GPU) of its node and takes

    load    = max over tiers of the hit bytes' time: L2 bytes / l2_bw, L3 bytes / l3_bw (or, with a measured
              drive, its queue and latency under load: :mod:`kvbench.cluster.device`),
              L4 latency + its transfer on the node's link and the pool (:mod:`kvbench.cluster.pool`)
    prefill = T(n) - T(p) + a   for n prompt tokens of which p are cached (T the profile's fit a + b n + c n^2:
              the uncached suffix attends to the whole prompt; a, the per-request overhead, is always paid)
    TTFT    = queue wait + load + prefill

L4 writes of the request (creation under write-through, demotions under write-back) take bandwidth on the
link and the pool from the end of its prefill. Cache state is taken at arrival (as ``replay kv`` does); decode
is not modelled (TTFT only). Bandwidth of L1-L3 is per request (no contention inside a node).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvbench.cluster.nodes import LOCAL_TIERS, Node, node_hierarchies
from kvbench.cluster.pool import Calendar, transfer
from kvbench.sim.tiers import EV_READ, EV_WRITE, TIER_NAMES

REQ_COLUMNS = ("request", "arrival_s", "node", "blocks", "input_tokens", "hit_blocks", "hit_l1", "hit_l2",
               "hit_l3", "hit_l4", "cached_tokens", "queue_ms", "load_ms", "prefill_ms", "ttft_ms", "l4_write_bytes")


@dataclass(frozen=True)
class RouteRequest:
    """What a router sees of a request."""

    index: int
    arrival_s: float
    keys: list
    input_tokens: int


class ClusterView:
    """The nodes as a router sees them at one arrival time (and the prefill model, for cost-based routers)."""

    def __init__(self, nodes: list[Node], timing=None, block_tokens: int = 1):
        self.nodes = nodes
        self.now = 0.0
        self.timing, self.block_tokens = timing, int(block_tokens)
        self.pool = getattr(nodes[0].hier, "pool", None) if nodes else None      # a compiled SharedPool's members

    def prefill_s(self, input_tokens: int, cached_blocks):
        """Prefill time of a request of ``input_tokens`` with its first ``cached_blocks`` blocks cached (a number, or
        an array: one per node)."""
        n = int(input_tokens)
        return self.timing.prefill_s(n, np.minimum(np.asarray(cached_blocks) * self.block_tokens, n))

    def load(self) -> list[float]:
        now = self.now
        return [n.lanes.load(now) for n in self.nodes]

    def cached_prefix(self, keys) -> list[int]:
        if self.pool is not None:            # the members of one compiled SharedPool: every node in one call
            return self.pool.cached_prefix(keys, self.now, LOCAL_TIERS)
        return [n.cached_prefix(keys, self.now) for n in self.nodes]


@dataclass(frozen=True)
class TimingModel:
    """Bandwidths and the prefill fit used to time requests."""

    l2_bw: float
    l3_bw: float
    l4_link_bw: float | None
    l4_link_latency_s: float
    l4_pool_bw: float | None
    fit_a: float
    fit_b: float
    fit_c: float
    l3_device: object = None      # kvbench.cluster.device.DeviceCurve: each node's measured drive (None: l3_bw)

    def prefill_s(self, n: int, p):
        """T(n) - T(p) + a: the uncached suffix of an n-token prompt of which p are cached (p: a number or array)."""
        p = min(p, n) if isinstance(p, int) else np.minimum(p, n)
        return self.fit_a + self.fit_b * (n - p) + self.fit_c * (n * n - p * p)


def simulate_router(trace, spec, n_nodes: int, lanes: int, router, timing: TimingModel, block_tokens: int):
    """Run ``trace`` through ``n_nodes`` nodes of hierarchy ``spec`` routed by ``router``.

    Returns (per-request table as a dict of numpy columns, nodes, pool calendar).
    """
    from kvbench.progress import Line

    nodes = []
    most = int(np.diff(trace.offsets).max()) if trace.n_requests else 0
    with Line(f"cluster {router.name}: nodes", n_nodes, "nodes") as line:
        hiers = node_hierarchies(spec, n_nodes, most)
        for i in range(n_nodes):
            nodes.append(Node(i, spec, lanes, Calendar(timing.l4_link_bw), hiers[i]))
            if not i & 1023:
                line.update(i + 1)
    pool = Calendar(timing.l4_pool_bw)
    if timing.l3_device is not None:
        from kvbench.cluster.device import l3_load

        for nd in nodes:
            nd.device = Calendar(timing.l3_device.max_bandwidth)
    draws = np.random.default_rng(0)          # first-byte latency draws (seeded: a run is reproducible)
    view = ClusterView(nodes, timing, block_tokens)
    router.prepare(trace)
    slot = spec.slot_bytes
    ts = trace.timestamp_s
    offs = trace.offsets
    keys = trace.keys
    key_list = keys.tolist()
    inp = trace.input_tokens.tolist()
    n = trace.n_requests
    cols = {c: np.zeros(n, dtype=np.float64 if c.endswith(("_s", "_ms")) else np.int64) for c in REQ_COLUMNS}
    col_list = [cols[c] for c in REQ_COLUMNS]
    row = [0] * len(REQ_COLUMNS)
    line = Line(f"cluster {router.name}", n, "requests")
    for i in range(n):
        if not i & 255:
            line.update(i)
        now = float(ts[i])
        a, b = int(offs[i]), int(offs[i + 1])
        view.now = now
        pool.prune(now)
        node_i = router.route(RouteRequest(i, now, key_list[a:b], inp[i]), view)
        if not 0 <= node_i < n_nodes:
            raise RuntimeError(f"router {router.name} returned node {node_i} of {n_nodes}")
        node = nodes[node_i]
        node.link.prune(now)
        (hit, *hits), ev = node.hier.run_one(now, keys[a:b], i)
        wrote = 0
        if ev.size:
            tier, op = ev["tier"], ev["op"]
            stored = ev[(tier >= 2) & (op != EV_READ)]     # the drives' writes and trims (L3, L4)
            if stored.size:
                node.store_log.append(stored)
                wrote = int(np.count_nonzero((stored["tier"] == 3) & (stored["op"] == EV_WRITE))) * slot
        cached = min(hit * block_tokens, inp[i])
        lane, start = node.lanes.start(now)
        if timing.l3_device is not None and hits[2]:      # the node's measured drive: queue, then its latency
            node.device.prune(now)
            l3 = l3_load(timing.l3_device, node.device, start, hits[2] * slot, float(draws.random()))
        else:
            l3 = hits[2] * slot / timing.l3_bw
        load = max(hits[1] * slot / timing.l2_bw, l3)
        if hits[3]:
            end = transfer(start, hits[3] * slot, node.link, pool)
            load = max(load, timing.l4_link_latency_s + end - start)
        prefill = timing.prefill_s(inp[i], cached)
        done = start + load + prefill
        node.lanes.finish(lane, done)
        if wrote:
            transfer(done, wrote, node.link, pool)
        row[:] = (i, now, node_i, b - a, inp[i], hit, *hits, cached, (start - now) * 1e3, load * 1e3,
                  prefill * 1e3, (done - now) * 1e3, wrote)
        for col, v in zip(col_list, row):
            col[i] = v
    line.close()
    return cols, nodes, pool


def pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q, method="inverted_cdf")) if values.size else None


def _ratio(num, den):
    return num / den if den else None


def l4_per_second(cols: dict, slot_bytes: int) -> dict:
    """L4 bytes per second of simulated time: reads when each load starts, writes when its prefill ends."""
    start = cols["arrival_s"] + cols["queue_ms"] / 1e3
    done = cols["arrival_s"] + cols["ttft_ms"] / 1e3
    t0 = float(cols["arrival_s"].min()) if cols["arrival_s"].size else 0.0
    rd = np.bincount((start - t0).astype(np.int64), weights=cols["hit_l4"] * float(slot_bytes))
    wr = np.bincount((done - t0).astype(np.int64), weights=cols["l4_write_bytes"].astype(np.float64))
    n = max(rd.size, wr.size)
    rd, wr = np.pad(rd, (0, n - rd.size)), np.pad(wr, (0, n - wr.size))
    return {"t_s": np.arange(n), "l4_read_bw_bytes_per_s": rd, "l4_write_bw_bytes_per_s": wr}


def summarise(cols: dict, nodes: list[Node], pool: Calendar, spec, router, *, drive, op: float,
              from_request: int) -> dict:
    """The JSON contract's fields for one router (plus detail): global, per node (with each stored tier's wear on
    ``drive``, :mod:`kvbench.cluster.wear`), imbalance, duplication, L4, link and pool utilisation.

    ``from_request``: the requests before it only warm the caches (``cluster --warmup``): hit ratios, requests,
    tokens, TTFT, queue and load times, prefill tokens and the steady wear are the window's; the tiers' byte
    counters, evictions, duplication, L4 traffic and link utilisation stay the whole run's."""
    from kvbench.cluster.wear import cluster_wear, rollup

    tiers = [t.name for t in spec.tiers]
    slot = spec.slot_bytes
    measured = cols["request"] >= from_request
    blocks = int(cols["blocks"][measured].sum())
    last_arrival = float(cols["arrival_s"].max()) if cols["arrival_s"].size else 0.0
    wear, pool_wear = cluster_wear(nodes, spec, last_arrival, drive, op, cols["arrival_s"], from_request)

    def tier_hits(sel) -> dict:
        tot = int(cols["blocks"][sel].sum())
        return {t: (_ratio(int(cols[f"hit_{t}"][sel].sum()), tot) if t in tiers else None) for t in TIER_NAMES}

    everything = measured
    per_node = []
    for nd in nodes:
        sel = (cols["node"] == nd.index) & measured
        nb = int(cols["blocks"][sel].sum())
        counters = nd.hier.counters()
        ttft = cols["ttft_ms"][sel]
        per_node.append({
            "node": nd.index, "requests": int(sel.sum()), "tokens": int(cols["input_tokens"][sel].sum()),
            "blocks": nb, "hit_blocks": int(cols["hit_blocks"][sel].sum()),
            "hit_ratio": _ratio(int(cols["hit_blocks"][sel].sum()), nb),
            "tier_hit_ratio": tier_hits(sel),
            "prefill_tokens_saved": int(cols["cached_tokens"][sel].sum()),
            "ttft_ms": {"p50": pct(ttft, 50), "p99": pct(ttft, 99)},
            "tiers": {name: {"hit_blocks": int(cols[f"hit_{name}"][sel].sum()),
                             "read_bytes": c.reads * (spec.block_bytes if name == "l1" else slot),
                             "write_bytes": c.writes * (spec.block_bytes if name == "l1" else slot),
                             "evictions": c.evictions, **wear[nd.index].get(name, {})}
                      for name, c in counters.items()},
            "produced_blocks": nd.hier.produced,
        })
    reqs = np.array([p["requests"] for p in per_node], dtype=np.float64)
    toks = np.array([p["tokens"] for p in per_node], dtype=np.float64)
    held = [nd.held() for nd in nodes]
    union = set().union(*held) if held else set()
    copies = sum(len(h) for h in held)
    ttft = cols["ttft_ms"][measured]
    span = float(cols["arrival_s"].max() - cols["arrival_s"].min()) if cols["arrival_s"].size else 0.0
    end = float((cols["arrival_s"] + cols["ttft_ms"] / 1e3).max()) if cols["ttft_ms"].size else 0.0
    duration = max(end - float(cols["arrival_s"].min()), 1e-9) if cols["ttft_ms"].size else None
    has_l4 = "l4" in tiers
    l4_read = sum(nd.hier.counters()["l4"].reads for nd in nodes) * slot if has_l4 else 0
    l4_write = sum(nd.hier.counters()["l4"].writes for nd in nodes) * slot if has_l4 else 0
    link_peaks = [nd.link.peak_utilisation for nd in nodes if nd.link.peak_utilisation is not None]
    return {
        "router": router.name,
        "router_options": dict(router.opts),
        "router_stats": dict(router.stats),
        "requests": int(measured.sum()),
        "global": {"hit_ratio": _ratio(int(cols["hit_blocks"][measured].sum()), blocks),
                   "tier_hit_ratio": tier_hits(everything), "blocks": blocks,
                   "hit_blocks": int(cols["hit_blocks"][measured].sum())},
        "nodes": per_node,
        "imbalance": float(reqs.max() / reqs.mean()) if reqs.sum() else None,
        "token_imbalance": float(toks.max() / toks.mean()) if toks.sum() else None,
        "duplication": (copies / len(union)) if union else None,
        "duplication_detail": {"blocks_held": copies, "distinct_blocks": len(union),
                               "note": "copies of a block held in L1-L3 across nodes at the end of the run, "
                                       "per distinct block (1.0: no block held twice)"},
        "l4": {"present": has_l4, "read_bytes": l4_read, "write_bytes": l4_write,
               "read_bytes_per_s": (l4_read / duration) if (has_l4 and duration) else None,
               "write_bytes_per_s": (l4_write / duration) if (has_l4 and duration) else None,
               "peak_link_utilisation": max(link_peaks) if (has_l4 and link_peaks) else None,
               "peak_pool_utilisation": pool.peak_utilisation if has_l4 else None,
               "loads": int((cols["hit_l4"] > 0).sum()),
               "peak_read_bytes_per_s": float(l4_per_second(cols, slot)["l4_read_bw_bytes_per_s"].max())
               if (has_l4 and cols["ttft_ms"].size) else None},
        "ttft_ms": {"p50": pct(ttft, 50), "p90": pct(ttft, 90), "p99": pct(ttft, 99),
                    "mean": float(ttft.mean()) if ttft.size else None},
        "queue_ms": {"p50": pct(cols["queue_ms"][measured], 50), "p99": pct(cols["queue_ms"][measured], 99)},
        "load_ms": {"p50": pct(cols["load_ms"][measured], 50), "p99": pct(cols["load_ms"][measured], 99)},
        "prefill_tokens": int((cols["input_tokens"] - cols["cached_tokens"])[measured].sum()),
        "prefill_tokens_saved": int(cols["cached_tokens"][measured].sum()),
        "trace_span_s": span, "simulated_s": duration,
        "links": links_utilisation(nodes, pool, end) if has_l4 else None,
        "wear": {"l3": rollup(wear, "l3")},
        "pool_wear": pool_wear,
    }


def links_utilisation(nodes: list[Node], pool: Calendar, end: float) -> dict | None:
    """Node links (pooled over every node, each over the same window) and the pool: mean, p99, time saturated."""
    from kvbench.cluster.pool import utilisation_stats

    until = max([end, pool.t[-1]] + [nd.link.t[-1] for nd in nodes])
    segs = [s for s in (nd.link.segments(until) for nd in nodes) if s is not None]
    out = {}
    if segs:
        out = utilisation_stats(np.concatenate([d for d, _ in segs]), np.concatenate([u for _, u in segs]))
        out["busiest_node_mean"] = max(utilisation_stats(*s)["mean"] for s in segs)
        out["seconds"] = until
    out["pool"] = pool.utilisation(until)
    return out


__all__ = ["simulate_router", "summarise", "links_utilisation", "TimingModel", "RouteRequest", "ClusterView", "REQ_COLUMNS",
           "LOCAL_TIERS"]
