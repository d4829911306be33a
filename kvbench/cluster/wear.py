"""What a cluster's routing does to its drives: per node and per stored tier, the steady write rate, host and
rating-equivalent DWPD, residence and lifetime on a stated drive class (pure).

Routing decides what each node's cache sees, so it decides each drive's rewrite rate: a random router spreads a
conversation's blocks over every node, each node misses and writes more, and the same drives wear faster than
under session or prefix routing. Each node's L3 store (and the shared L4 pool) is judged on its own write/trim
stream from the cluster simulation:

- steady write rate W: from the store's first slot reuse on (the store is full and turning over; the fill
  before it is not steady state), W = slots written after that moment x slot bytes / (end - that moment), the
  end being the last arrival of the trace; a store that never reuses a slot has no steady state (None, said);
- host DWPD = W x 86,400 / C, residence C / W (:mod:`kvbench.analysis.endurance`, the one place for them);
- device WAF: the node's own stream through the FTL model (:func:`kvbench.analysis.trace_waf.store_waf`) at the
  class's over-provisioning, for up to ``MAX_WAF_NODES`` nodes (the rest take their median, stated);
- rating-equivalent DWPD = host DWPD x WAF / the class's reference WAF, and the lifetime on the class's rating.
"""

from __future__ import annotations

import math

import numpy as np

from kvbench.analysis.endurance import dwpd, lifetime_years, rating_equivalent_dwpd, residence_s

MAX_WAF_NODES = 64


def steady_write_rate(times: np.ndarray, slots: np.ndarray, slot_bytes: int, end_s: float,
                      start_s: float | None = None) -> tuple[float | None, float | None]:
    """(W bytes/s, the time steady state starts) of a store's writes at ``times`` to ``slots``; (None, None)
    when no slot is ever written twice or no time passes after that. ``start_s``: a warm-up's last arrival
    (``cluster --warmup``): steady state starts no earlier."""
    from kvbench.analysis.trace_waf import first_reuse

    reuse = first_reuse(slots)
    if reuse is None:
        return None, None
    t0 = float(times[reuse]) if start_s is None else max(float(times[reuse]), float(start_s))
    span = end_s - t0
    if not span > 0:
        return None, t0
    return float(np.count_nonzero(times > t0)) * slot_bytes / span, t0


def _stream(events, capacity_blocks: int, slot_bytes: int, layout: str, policy: str, trim: bool,
            from_request: int):
    """The node's store stream for the FTL model; under a warm-up its steady part opens no earlier than the first
    write of request ``from_request`` (as :func:`kvbench.analysis.trace_waf.store_writes` rules)."""
    from kvbench.analysis.trace_waf import stream_from_events

    return stream_from_events(events, slot_bytes=slot_bytes, capacity_blocks=capacity_blocks, layout=layout,
                              policy=policy, trim=trim, origin="cluster simulation",
                              note="the node's own store stream in the cluster simulation", from_request=from_request)


def tier_wear(times: np.ndarray, events: np.ndarray, *, capacity_bytes: float, capacity_blocks: int,
              slot_bytes: int, end_s: float, drive, waf: float | None, waf_source: str,
              start_s: float | None = None) -> dict:
    """The per-tier answer for one store: capacity, W, host and rating-equivalent DWPD, residence, lifetime;
    ``start_s``: steady state starts no earlier (a warm-up's last arrival)."""
    from kvbench.sim.tiers import EV_WRITE

    w = events["op"] == EV_WRITE
    wb, t0 = steady_write_rate(times[w], events["slot"][w], slot_bytes, end_s, start_s)
    out = {"capacity_bytes": float(capacity_bytes), "capacity_blocks": int(capacity_blocks),
           "written_bytes": float(np.count_nonzero(w)) * slot_bytes, "steady_from_s": t0,
           "write_bytes_per_s": wb, "dwpd_host": None, "dwpd_rating_equivalent": None, "residence_s": None,
           "lifetime_years": None, "waf": waf, "waf_source": waf_source,
           "drive_class": getattr(drive, "name", None), "reference_waf": getattr(drive, "reference_waf", None)}
    if wb is None:
        out["steady_state"] = "not reached: the store never reused a slot within the trace"
        return out
    out["steady_state"] = "measured"
    out["dwpd_host"] = dwpd(wb, capacity_bytes)
    out["residence_s"] = residence_s(capacity_bytes, wb) if wb > 0 else math.inf
    if drive is not None and waf is not None:
        ref = drive.reference_waf if drive.reference_waf is not None else waf
        out["dwpd_rating_equivalent"] = rating_equivalent_dwpd(out["dwpd_host"], waf, ref)
        out["lifetime_years"] = lifetime_years(wb, capacity_bytes, waf=waf, rated_dwpd=drive.dwpd,
                                               warranty_years=drive.warranty_years, reference_waf=ref)
    return out


def cluster_wear(nodes, spec, end_s: float, drive, op: float, arrivals,
                 from_request: int) -> tuple[list[dict], dict | None]:
    """Per node {"l3": tier_wear} (nodes with an L3), and the shared pool's tier_wear (with an L4); ``arrivals``:
    the trace's arrival times, by request index (an event's time is its request's arrival). ``from_request``: the
    requests before it only warm the stores (``cluster --warmup``): steady state opens no earlier than the last
    of them arrives, and the FTL model measures from the first write of request ``from_request``."""
    from kvbench.analysis.trace_waf import store_waf
    from kvbench.errors import SpecError

    start_s = float(np.asarray(arrivals)[from_request - 1]) if from_request else None
    slot = spec.slot_bytes
    tiers = {t.name: t for t in spec.tiers}
    per_node = [{} for _ in nodes]
    logs = [_log(nd, arrivals) for nd in nodes]
    if "l3" in tiers:
        t = tiers["l3"]
        blocks = spec.capacity_blocks(t)
        l3 = [_tier(lg, 2) for lg in logs]
        wafs, sources = {}, {}
        for i in range(min(len(nodes), MAX_WAF_NODES)):
            try:
                r = store_waf(_stream(l3[i][1], blocks, slot, t.layout, t.policy, t.trim, from_request), op=op)
                wafs[i], sources[i] = r.waf, f"trace-driven: {r.detail} (this node's stream)"
            except SpecError as e:
                sources[i] = f"no steady state for the FTL model: {e.problem}"
        median = float(np.median(list(wafs.values()))) if wafs else None
        for i in range(len(nodes)):
            if i in wafs:
                waf, src = wafs[i], sources[i]
            elif i < MAX_WAF_NODES:      # too few writes for the model on this node: the others' median, said
                waf, src = median, (f"median of the other nodes' trace-driven WAF ({sources[i]})" if median
                                    is not None else sources[i])
            else:
                waf, src = median, f"median of the first {MAX_WAF_NODES} nodes' trace-driven WAF"
            per_node[i]["l3"] = tier_wear(*l3[i], capacity_bytes=t.capacity_bytes, capacity_blocks=blocks,
                                          slot_bytes=slot, end_s=end_s, drive=drive, waf=waf, waf_source=src,
                                          start_s=start_s)
    pool = None
    if "l4" in tiers:
        t = tiers["l4"]
        parts = [_tier(lg, 3) for lg in logs]
        times = np.concatenate([p[0] for p in parts])
        ev = np.concatenate([p[1] for p in parts])
        order = np.argsort(times, kind="stable")
        pool = tier_wear(times[order], ev[order], capacity_bytes=t.capacity_bytes,
                         capacity_blocks=spec.capacity_blocks(t), slot_bytes=slot, end_s=end_s, drive=drive,
                         waf=None, waf_source="the pool's drives are not modelled (give their WAF with a replay)",
                         start_s=start_s)
    return per_node, pool


def rollup(per_node: list[dict], name: str = "l3") -> dict | None:
    """One tier over the nodes, as the terminal, the JSON (``wear.l3``) and the report state it: how many nodes
    turned over, the mean and busiest node's host DWPD, and the busiest node's write rate, residence, WAF,
    rating-equivalent DWPD and lifetime."""
    tiers = [w[name] for w in per_node if name in w]
    if not tiers:
        return None
    steady = [t for t in tiers if t["dwpd_host"] is not None]
    out = {"nodes": len(tiers), "nodes_turned_over": len(steady), "dwpd_host_mean": None, "dwpd_host_busiest": None}
    if steady:
        busiest = max(steady, key=lambda t: t["dwpd_host"])
        out.update({"dwpd_host_mean": float(np.mean([t["dwpd_host"] for t in steady])),
                    "dwpd_host_busiest": busiest["dwpd_host"],
                    "write_bytes_per_s_busiest": busiest["write_bytes_per_s"],
                    "residence_s_busiest": busiest["residence_s"], "waf_busiest": busiest["waf"],
                    "dwpd_rating_equivalent_busiest": busiest["dwpd_rating_equivalent"],
                    "lifetime_years_busiest": busiest["lifetime_years"], "drive_class": busiest["drive_class"]})
    return out


def _log(node, arrivals):
    """(times, events) of every stored-tier write and trim the node made, in order."""
    from kvbench.sim.tiers import EVENT_DTYPE

    ev = np.concatenate(node.store_log) if node.store_log else np.zeros(0, EVENT_DTYPE)
    return np.asarray(arrivals, np.float64)[ev["request"]], ev


def _tier(log, level: int):
    times, ev = log
    sel = ev["tier"] == level
    return times[sel], ev[sel]
