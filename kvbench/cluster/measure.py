"""Measured cluster runs: every simulated node replays its own requests' I/O on a real target.

The simulation routes the trace (the headline router); node i's requests become a trace of their own, and
node i runs ``replay kv`` on it with the cluster's tier options: on one machine each node in its own process
with its own store (``--l3 PATH`` -> ``PATH.node<i>``, ``--l4 DIR`` -> ``DIR/node-<i>``), on Ray one actor per
node on the cluster's hosts (``--l3`` names the path on each host: a block device there is used as it is, a
file path becomes ``PATH.node<i>`` so that two nodes placed on one host do not share a store). The nodes start together; each node's run
folder comes back as ``node-<i>/`` and their latency histograms merge exactly into the run's
``histograms.json``. A lost node is reported with its error; the others' results are kept.

Measured per node: what ``replay kv`` measures (tier bytes, bandwidth, latency, load times, verification).
The tiers L1-L3 of a node are exactly the simulation's (same requests, same capacities: the measured hit
ratios equal the simulated ones); the shared L4 pool is simulated only: in the measured run each node has a
private L4 of pool capacity / nodes on its own directory, so cross-node pool hits are not replayed as I/O.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from kvbench import procs
from kvbench.errors import UsageError
from kvbench.metrics.results import Summary, stamp
from kvbench.units import format_bytes

SUBTRACE_BLOCK_TOKENS = 512         # node traces are written as Mooncake lines (512-token blocks)


def node_l3(l3: str | None, nodes: int, i: int) -> str | None:
    """Node i's L3 store on its host: a block device as given, a file as ``PATH.node<i>`` (several nodes)."""
    if not l3 or nodes == 1 or (os.path.exists(l3) and stat.S_ISBLK(os.stat(l3).st_mode)):
        return l3
    return f"{l3}.node{i}"


def node_l4(cfg, i: int) -> str | None:
    return os.path.join(cfg.replay.l4, f"node-{i}") if cfg.replay.l4 else None


def check(cfg, trace, spec) -> None:
    """What a measured run needs, before any I/O: node traces, per-node stores, Ray (installed, reachable)."""
    if trace.block_tokens != SUBTRACE_BLOCK_TOKENS:
        raise UsageError(f"a measured cluster run needs {SUBTRACE_BLOCK_TOKENS}-token blocks, the trace has "
                         f"{trace.block_tokens}", "use --dry-run for this trace")
    r = cfg.replay
    if r.l3 and cfg.nodes > 1 and not cfg.ray_address and os.path.exists(r.l3) and \
            stat.S_ISBLK(os.stat(r.l3).st_mode):
        raise UsageError(f"--l3 {r.l3} is a block device: {cfg.nodes} nodes on one machine need a store each",
                         "give a file path (each node gets PATH.node<i>), or run the nodes on Ray hosts")
    if r.l4_capacity and r.l4_capacity // cfg.nodes < spec.slot_bytes:
        raise UsageError(f"--l4-capacity {format_bytes(r.l4_capacity)} split over {cfg.nodes} measured nodes cannot "
                         f"hold one KV block of {format_bytes(spec.slot_bytes)} per node",
                         f"give at least {format_bytes(spec.slot_bytes * cfg.nodes)}")
    if cfg.ray_address:
        from kvbench.cluster.workers import check_address, import_ray
        import_ray()
        check_address(cfg.ray_address)


def node_trace_text(trace, rows: np.ndarray) -> str:
    """Mooncake JSON lines of ``rows`` of ``trace``, keys as hash ids (already prefix-chained), times in ms."""
    lines = []
    offs = trace.offsets
    for r in rows.tolist():
        lines.append(json.dumps({"timestamp": float(trace.timestamp_s[r]) * 1e3,
                                 "input_length": int(trace.input_tokens[r]),
                                 "output_length": int(trace.output_tokens[r]),
                                 "hash_ids": trace.keys[offs[r]:offs[r + 1]].tolist()}))
    return "\n".join(lines) + "\n"


def run_node(payload: dict) -> dict:
    """On the worker: replay the node's trace with its tiers; returns its summary and run folder files."""
    from kvbench.errors import Interrupted, KvbenchError
    from kvbench.replay.kv import ReplayConfig, replay_kv

    with tempfile.TemporaryDirectory(prefix=f"kvbench-node{payload['node']}-") as tmp:
        tr = Path(tmp) / "node-trace.jsonl"
        tr.write_text(payload["trace_text"])
        rc = dict(payload["replay"], trace=str(tr), fmt="mooncake", results=str(Path(tmp) / "results"),
                  l3=node_l3(payload["replay"]["l3"], payload["nodes"], payload["node"]))
        if rc.get("l4"):
            os.makedirs(rc["l4"], exist_ok=True)
        summary, error, status = None, None, "complete"
        try:
            summary = replay_kv(ReplayConfig(**rc))
            status = summary["status"]
        except Interrupted as e:     # stopped (kvbench.procs): its results so far are kept, as interrupted
            error, status = str(e), "interrupted"
        except procs.WRAPPED_STOP as e:         # stopped before the replay could start: nothing measured
            stop = procs.stop_from(e)
            if stop is None:
                raise
            error, status = f"stopped before the replay started ({stop})", "interrupted"
        except KvbenchError as e:
            error, status = str(e), "failed"
        files = {}
        runs = sorted((Path(tmp) / "results").glob("*/"))
        if runs:
            for f in runs[0].iterdir():
                if f.is_file():
                    files[f.name] = f.read_bytes()
        if summary is None and "summary.json" in files:
            summary = Summary.from_json(json.loads(files["summary.json"]), "the node's summary.json").data
        return {"node": payload["node"], "status": status, "error": error, "summary": summary, "files": files}


def _jobs(cfg, trace, nodes_of: np.ndarray) -> list:
    jobs = []
    per_l4 = cfg.replay.l4_capacity // cfg.nodes if cfg.replay.l4_capacity else 0
    for i in range(cfg.nodes):
        rows = np.flatnonzero(nodes_of == i)
        rc = replace(cfg.replay, l4=node_l4(cfg, i), l4_capacity=per_l4, max_requests=None,
                     dry_run=False, export_iolog=None)
        d = asdict(rc)
        jobs.append(("kvbench.cluster.measure:run_node",
                     {"node": i, "nodes": cfg.nodes, "replay": d, "trace_text": node_trace_text(trace, rows) if rows.size else "",
                      "requests": int(rows.size)}))
    return jobs


def merge_histograms(per_node: list[dict]) -> dict:
    """Histograms of the same name across nodes, added bucket by bucket (exact)."""
    from kvbench.metrics.histogram import LatencyHistogram

    out: dict = {}
    for hists in per_node:
        for name, d in hists.items():
            out.setdefault(name, LatencyHistogram()).merge(LatencyHistogram.from_dict(d))
    return out


def measured_ttft(cols: dict, rows: np.ndarray, load_ms: np.ndarray, lanes: int) -> np.ndarray:
    """TTFT (ms) of one node's measured requests: its queue replayed with the *measured* load times and the
    simulation's prefill times (``rows``: the requests' global indices, in arrival order)."""
    from kvbench.cluster.nodes import Lanes

    q = Lanes(lanes)
    out = np.empty(rows.size)
    arrival = cols["arrival_s"][rows]
    prefill = cols["prefill_ms"][rows] / 1e3
    load = np.nan_to_num(np.asarray(load_ms, dtype=np.float64)) / 1e3     # no load: every hit was in L1
    for j in range(rows.size):
        lane, start = q.start(arrival[j])
        done = start + load[j] + prefill[j]
        q.finish(lane, done)
        out[j] = (done - arrival[j]) * 1e3
    return out


def _node_ttft(cols, nodes_of, i, files, lanes):
    import io

    import pandas as pd

    if "requests.csv" not in files:
        return None
    df = pd.read_csv(io.BytesIO(files["requests.csv"]))
    if df.empty:
        return None
    rows = np.flatnonzero(nodes_of == i)[df["request"].to_numpy(dtype=np.int64)]
    return measured_ttft(cols, rows, df["load_ms"].to_numpy(), lanes)


def run_nodes(cfg, trace, cols: dict, rd) -> dict:
    """Measure every node with requests; write ``node-<i>/`` folders and merged histograms into ``rd``."""
    from kvbench.cluster.config import PLACEMENTS
    from kvbench.cluster.workers import Lost, run_jobs

    nodes_of = np.asarray(cols["node"])
    jobs = _jobs(cfg, trace, nodes_of)
    active = [j for j in jobs if j[1]["requests"]]
    die = None
    if cfg.inject_node_loss is not None:
        die = next((k for k, j in enumerate(active) if j[1]["node"] == cfg.inject_node_loss), None)
    stopped = None
    try:
        results = run_jobs(active, cfg.ray_address, PLACEMENTS[cfg.placement], die=die)
    except procs.WRAPPED_STOP as e:  # a stop signal: keep what the nodes measured before they drained
        e = procs.stop_from(e)
        if e is None:
            raise
        results = getattr(e, "partial_results", None)
        if results is None:
            raise
        stopped = e
    from kvbench.cluster.sim import pct

    nodes, lost, hists, ttfts = [], [], [], []
    for (fn, payload), res in zip(active, results):
        i = payload["node"]
        if isinstance(res, Lost):
            entry = {"node": i, "status": "lost", "error": res.error, "host": res.host, "run_dir": None}
            lost.append(entry)
            nodes.append(entry)
            continue
        sub = rd.path / f"node-{i}"
        sub.mkdir()
        for name, data in (res.get("files") or {}).items():
            (sub / name).write_bytes(data)
        s = res.get("summary") or {}
        if s:
            s = {**s, "run_dir": str(sub)}
            (sub / "summary.json").write_text(json.dumps(stamp("summary", s), indent=2) + "\n")
        if "histograms.json" in (res.get("files") or {}):
            hists.append(json.loads(res["files"]["histograms.json"]))
        sim = cols["hit_blocks"][nodes_of == i].sum() / max(1, cols["blocks"][nodes_of == i].sum())
        ttft = _node_ttft(cols, nodes_of, i, res.get("files") or {}, cfg.gpus_per_node)
        if ttft is not None:
            ttfts.append(ttft)
        nodes.append({"node": i, "host": res.get("host"), "status": res.get("status"), "error": res.get("error"),
                      "run_dir": str(sub), "requests": s.get("requests"), "hit_ratio": s.get("hit_ratio"),
                      "simulated_hit_ratio": float(sim), "load_time_ms": s.get("load_time_ms"),
                      "tiers": {t: {k: v.get(k) for k in ("read_bytes", "write_bytes", "read_bw_bytes_per_s",
                                                          "write_bw_bytes_per_s", "read_lat_us")}
                                for t, v in (s.get("tiers") or {}).items()},
                      "verify_errors": s.get("verify_errors"),
                      "ttft_ms": None if ttft is None else {"p50": pct(ttft, 50), "p99": pct(ttft, 99),
                                                            "requests": int(ttft.size)}})
        if res.get("status") == "failed":
            lost.append({"node": i, "status": "failed", "error": res.get("error"), "host": res.get("host")})
    for i in range(cfg.nodes):
        if not any(n["node"] == i for n in nodes):
            nodes.append({"node": i, "status": "idle", "error": None, "run_dir": None, "requests": 0})
    nodes.sort(key=lambda n: n["node"])
    merged = merge_histograms(hists)
    if merged:
        rd.write_histograms(merged)
    hp = {name: h.percentiles() for name, h in merged.items()}
    every = np.concatenate(ttfts) if ttfts else np.zeros(0)
    out = {"nodes": nodes, "lost": lost, "where": f"ray {cfg.ray_address}" if cfg.ray_address else "local processes",
            "load_time_ms": {k: (v / 1e3 if v is not None else None) for k, v in (hp.get("load_time") or {}).items()},
            "ttft_ms": {"p50": pct(every, 50), "p99": pct(every, 99), "requests": int(every.size),
                        "note": "each node's queue replayed with its measured load times and the modelled prefill"},
            "merged_histograms": {name: {"count": h.count, **{k: hp[name].get(k) for k in ("p50", "p99", "max")}}
                                  for name, h in merged.items()},
            "note": "L1-L3 per node as simulated; the shared L4 pool is simulated only (each measured node has a "
                    "private L4 of pool capacity / nodes)"}
    if stopped is not None:          # the job records it as interrupted, with these nodes' results
        stopped.measured = out
        raise stopped
    return out
