"""``kvbench cluster``: simulate the cluster under each router, then (without ``--dry-run``) measure every
node's I/O on real targets, locally or on Ray; one run folder with the comparison and a subfolder per node.

Run folder: ``summary.json`` (the ``--json`` contract), ``requests-<router>.csv`` (per request: node, hits per
tier, queue, load, prefill, TTFT), ``timeseries.csv`` (the headline router's L4 bytes per second), and for measured runs ``node-<i>/`` (each node's ``replay kv`` run folder)
and ``histograms.json`` (the nodes' latency histograms merged exactly).
"""

from __future__ import annotations

from dataclasses import asdict

from kvbench.cluster.config import DEFAULT_L2_BW, DEFAULT_L3_BW, DEFAULT_PREFILL_TOKENS_PER_S, ClusterConfig
from kvbench import procs
from kvbench.errors import SpecError, UsageError


def _timing(cfg: ClusterConfig, profile):
    from kvbench.cluster.sim import TimingModel

    r = cfg.replay
    l2 = cfg.l2_bw or (profile.copy.bandwidth_bytes_per_s if profile.copy is not None else DEFAULT_L2_BW)
    fit = profile.fit
    device = None
    if cfg.l3_device:
        from kvbench.cluster.device import read_curve

        device = read_curve(cfg.l3_device)
    return TimingModel(l2_bw=float(l2), l3_bw=float(cfg.l3_bw or DEFAULT_L3_BW), l4_link_bw=r.l4_link_bw, l3_device=device,
                       l4_link_latency_s=float(r.l4_link_latency_s or 0.0), l4_pool_bw=cfg.l4_pool_bw,
                       fit_a=float(fit.a), fit_b=float(fit.b), fit_c=float(fit.c))


def _model_notes(cfg: ClusterConfig, profile, timing) -> dict:
    return {
        "profile": profile.describe(),
        "profile_kind": profile.kind,
        "gpus_per_node": cfg.gpus_per_node,
        "l2_bw_bytes_per_s": timing.l2_bw, "l3_bw_bytes_per_s": timing.l3_bw,
        "l2_bw_source": "--l2-bw" if cfg.l2_bw else ("profile copy measurement" if profile.copy is not None
                                                     else "assumed (give --l2-bw)"),
        "l3_bw_source": ("measured drive (--l3-device): queueing at the drive, latency under load from "
                         f"{timing.l3_device.source}") if timing.l3_device is not None else
                        ("--l3-bw" if cfg.l3_bw else "assumed (give --l3-bw or --l3-device, e.g. from kvbench io)"),
        "l3_device": timing.l3_device.to_dict() if timing.l3_device is not None else None,
        "l4_link_bw_bytes_per_s": timing.l4_link_bw, "l4_link_latency_s": timing.l4_link_latency_s,
        "l4_pool_bw_bytes_per_s": timing.l4_pool_bw,
        "ttft": "queue wait + max(per-tier load) + prefill of the uncached suffix (T(n) - T(cached) + a); "
                "cache state at arrival; decode not modelled",
        "contention": "L4 loads and writes share each node's link and the pool's aggregate bandwidth, first come "
                      "first served; L1-L3 bandwidth is per request",
    }


def node_spec(cfg: ClusterConfig, model, trace):
    """One node's tier hierarchy (capacities per node), validated."""
    from kvbench.replay.kv import hierarchy_spec

    spec = hierarchy_spec(cfg.replay, model.block_bytes(trace.block_tokens),
                          f"{model.name}, {trace.block_tokens} tokens")
    try:
        spec.validate()
    except SpecError as e:
        raise SpecError(f"per node: {e.problem}", e.fix) from None
    return spec


def prepare(cfg: ClusterConfig):
    """Everything checked before any work or I/O: options, model, trace, profile, per-node capacities."""
    from kvbench.analysis.curves.profile import warmup_window
    from kvbench.compute.profile import load_profile, rate_profile
    from kvbench.spec.models import load_model
    from kvbench.stream.synth import require_whole_stream
    from kvbench.stream.traces import read_trace

    cfg.validate()
    r = cfg.replay
    require_whole_stream(r.trace, "cluster", "its routers match whole prefixes and each node's tiers take every block")
    model = load_model(r.model, tp=r.tp)
    trace = read_trace(r.trace, r.fmt, limit=r.max_requests)
    if trace.n_requests == 0:
        raise UsageError(f"trace {r.trace} has no requests", "give a non-empty trace")
    spec = node_spec(cfg, model, trace)
    warmup_window(trace, cfg.warmup)                  # a warm-up that leaves nothing to measure, before any work
    if cfg.sweep:                                     # every configuration of the sweep is valid before any work
        from kvbench.cluster.sizing import configure, grid, parse_sweep

        for point in grid(parse_sweep(cfg.sweep)):
            c = configure(cfg, point)
            c.validate()
            node_spec(c, model, trace)
    profile = load_profile(cfg.profile) if cfg.profile else rate_profile(DEFAULT_PREFILL_TOKENS_PER_S, model=model.name)
    drive_class(cfg)                                  # a bad --ssd-class / --prices before any work
    if cfg.l3_device:                                 # and a bad --l3-device run
        from kvbench.cluster.device import read_curve

        read_curve(cfg.l3_device)
    return model, trace, spec, profile


def drive_class(cfg: ClusterConfig):
    """The SSD class each node's L3 is judged on (``--ssd-class`` of ``--prices``; default the preset's first)."""
    from kvbench.analysis.cost import load_prices

    prices = load_prices(cfg.prices)
    name = cfg.ssd_class or next(iter(prices.ssd))
    if name not in prices.ssd:
        raise UsageError(f"unknown --ssd-class {name!r}", f"choose one of: {', '.join(prices.ssd)}")
    return prices.ssd[name]


def simulate(cfg: ClusterConfig, trace, spec, profile) -> tuple[dict, dict]:
    """Each router on the same trace: {router: summary}, {router: per-request columns}."""
    from kvbench.analysis.curves.profile import warmup_window
    from kvbench.cluster.routers import make_router
    from kvbench.cluster.sim import simulate_router, summarise

    timing = _timing(cfg, profile)
    drive = drive_class(cfg)
    from kvbench.analysis.trace_waf import class_op

    op = class_op(drive)
    warm = warmup_window(trace, cfg.warmup)
    out, tables = {}, {}
    for name in cfg.routers:
        router = make_router(name, cfg.nodes, cfg.seed, **cfg.router_opts)
        cols, nodes, pool = simulate_router(trace, spec, cfg.nodes, cfg.gpus_per_node, router, timing,
                                            trace.block_tokens)
        out[name] = summarise(cols, nodes, pool, spec, router, drive=drive, op=op, from_request=warm)
        tables[name] = cols
    return out, tables


# what the cluster states as steady that a non-stationary trace bends (kvbench.stream.stationarity)
STEADY_FIGURES = "the hit ratios, each node's steady write rate, DWPD and lifetime"


def _window(trace, warmup) -> dict:
    """The summary's ``stationarity`` (of the span measured) and, under a warm-up, ``measured_from``."""
    from kvbench.analysis.curves.profile import warmup_window
    from kvbench.stream.stationarity import stat_share, whole_trace_report

    k = warmup_window(trace, warmup)
    if not k:
        return {"stationarity": whole_trace_report(trace, STEADY_FIGURES)}
    start = float(trace.timestamp_s[k])
    return {"stationarity": whole_trace_report(trace, STEADY_FIGURES, start_s=start),
            "measured_from": {"request": k, "start_s": start, "share_of_span": stat_share(trace, start),
                              "requests": int(trace.n_requests - k),
                              "whole_run": "the tiers' byte counters, evictions, duplication, L4 traffic, link "
                                           "utilisation and the measured nodes' replays"}}


def run_cluster(cfg: ClusterConfig) -> dict:
    """Simulate (and unless dry-run, measure) the cluster; returns the summary (also summary.json)."""
    from kvbench.metrics.csvout import write_csv
    from kvbench.metrics.run import RunDir

    model, trace, spec, profile = prepare(cfg)
    measure = None
    if not cfg.dry_run:
        from kvbench.cluster import measure
        measure.check(cfg, trace, spec)                 # targets, Ray reachable: before any I/O
        l2 = next((t.capacity_bytes for t in spec.tiers if t.name == "l2"), 0)
        if l2 and not cfg.ray_address:                  # every node's L2 arena on this machine, all at once
            from kvbench.engine.targets import check_memory
            from kvbench.units import format_bytes

            check_memory(l2 * cfg.nodes, f"{cfg.nodes} nodes x --l2 {format_bytes(l2)}",
                         "give a smaller --l2 or fewer --nodes (or --dry-run: the simulation holds no arena)")
    timing = _timing(cfg, profile)
    config = {**{k: v for k, v in asdict(cfg).items() if k != "replay"}, "replay": asdict(cfg.replay),
              "block_tokens": trace.block_tokens, "block_bytes": spec.block_bytes, "slot_bytes": spec.slot_bytes,
              "tiers_per_node": {t.name: t.capacity_bytes for t in spec.tiers if t.name != "l4"},
              "l4_pool_bytes": next((t.capacity_bytes for t in spec.tiers if t.name == "l4"), 0)}
    rd = RunDir.create("cluster", config, root=cfg.replay.results)
    try:                  # a stop signal (kvbench.procs) or Ctrl-C: the folder says interrupted, nodes are ended
        results, tables = simulate(cfg, trace, spec, profile)
        for name, cols in tables.items():
            write_csv(rd.path / f"requests-{name}.csv", cols, decimals=6)
        if any(t.name == "l4" for t in spec.tiers):
            from kvbench.cluster.sim import l4_per_second
            rd.append_timeseries(l4_per_second(tables[cfg.routers[0]], spec.slot_bytes))
        first = results[cfg.routers[0]]
        sweep = None
        if cfg.sweep:
            from kvbench.analysis.cost import load_prices
            from kvbench.cluster.sizing import Targets, parse_sweep, run_sweep

            sweep = run_sweep(cfg, trace, lambda c: node_spec(c, model, trace), profile, parse_sweep(cfg.sweep),
                              Targets(cfg.ttft_p99_s, cfg.hit_ratio_target), load_prices(cfg.prices), drive_class(cfg),
                              simulate)
        summary = {"trace": cfg.replay.trace, "model": model.name, "nodes_count": cfg.nodes,
                   "block_bytes": spec.block_bytes, "dry_run": cfg.dry_run,
                   "model_notes": _model_notes(cfg, profile, timing), **first,
                   **_window(trace, cfg.warmup)}
        if len(cfg.routers) > 1:
            summary["routers"] = results
        if sweep is not None:
            summary["sweep"] = sweep
        status = "complete"
        if not cfg.dry_run:
            measured = measure.run_nodes(cfg, trace, tables[cfg.routers[0]], rd)
            summary["measured"] = measured
            summary["parts"] = {f"node-{m['node']}": m["run_dir"] for m in measured["nodes"] if m.get("run_dir")}
            if measured["lost"]:
                status = "partial"
        rd.write_summary(summary, status=status)
    except procs.WRAPPED_STOP as e:
        from kvbench.errors import Interrupted

        e = procs.stop_from(e)
        if e is None:
            raise
        measured = getattr(e, "measured", None)          # the nodes' results up to the stop (measure.run_nodes)
        part = {"measured": measured, "parts": {f"node-{m['node']}": m["run_dir"] for m in measured["nodes"]
                                                if m.get("run_dir")}} if measured else {}
        rd.write_summary({"trace": cfg.replay.trace, "nodes_count": cfg.nodes, "dry_run": cfg.dry_run, **part},
                         status="interrupted")
        raise Interrupted(f"cluster run interrupted; its folder is {rd.path}", "rerun the command") from None
    return {"kind": "cluster", "status": status, "run_dir": str(rd.path), **summary}
