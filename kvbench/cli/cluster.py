"""``kvbench cluster``: many serving nodes behind a router, each with ``replay kv``'s tiers, sharing an L4 pool."""

from __future__ import annotations

import click

from kvbench.cli._common import (RATE, WARMUP, emit_json, fields_option, json_option, key_values, ray_timeout_option,
                                 replay_config, replay_io_options, tier_options)



def _router_options() -> list[str]:
    """Every option some router takes (--router-opt; check_routers then holds each to the routers given)."""
    from kvbench.cluster.routers import ROUTERS, router_class

    return sorted({k for n in ROUTERS for k in router_class(n).options})


def _parse_sweep(items):
    from kvbench.cluster.sizing import parse_sweep

    return parse_sweep(items)

@click.command("cluster")
@click.argument("trace")
@click.option("--model", required=True, help="Model preset (see `kvbench models`) or TOML path: KV bytes per token.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (splits GQA KV heads).")
@click.option("--format", "fmt", default="auto", show_default=True, help="Trace format (auto-detected).")
@click.option("--nodes", type=int, default=1, show_default=True, help="Serving nodes (L1-L3 capacities are per node).")
@click.option("--router", "router", default=None, help="Router: random, round-robin, least-loaded, session, prefix, cost.")
@click.option("--routers", "routers", default=None, metavar="A,B,C",
              help="Compare several routers on the same trace in one run (the first is the headline).")
@fields_option("--router-opt", "router_opts", multiple=True, convert=True, example="shared_fraction=0.9",
               parse=key_values("--router-opt", known=lambda: _router_options(), numeric=True), metavar="KEY=VALUE",
              help="A router's knob, e.g. shared_fraction=0.9 (session), vnodes=128 (repeatable).")
@click.option("--load-bound", type=float, default=None,
              help="prefix router: fall back to the least-loaded node when the chosen one has more than this x the "
                   "mean outstanding work [1.5].")
@click.option("--load-slack", type=float, default=None, metavar="SECONDS",
              help="prefix router: ... and more than this many seconds of work above the least-loaded node [0].")
@click.option("--gpus-per-node", type=int, default=1, show_default=True, help="Prefill lanes (GPUs) per node.")
@click.option("--profile", default=None, help="Compute profile (prefill time per GPU): preset name or path "
              "[a stated 10,000 tokens/s what-if].")
@click.option("--l2-bw", type=RATE, default=None, help="L2 -> HBM load bandwidth [profile's copy measurement or 25GB/s].")
@click.option("--l3-bw", type=RATE, default=None, help="L3 read bandwidth per node [6GB/s; measure with kvbench io].")
@click.option("--l4-pool-bw", type=RATE, default=None, help="Aggregate bandwidth of the shared L4 pool, e.g. 100GB/s.")
@tier_options
@replay_io_options
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random router and the session ring.")
@click.option("--dry-run", is_flag=True, help="Simulate only: no I/O, no targets touched.")
@click.option("--destroy-data", default=None, metavar="DEV",
              help="Allow writing the raw block device DEV given as --l3 (on each Ray host; its data is destroyed).")
@click.option("--ray-address", default=None, metavar="ADDR",
              help="Run the nodes' I/O on a Ray cluster (one actor per node; needs kvbench[cluster]).")
@ray_timeout_option
@click.option("--placement", type=click.Choice(["spread", "strict-spread", "pack"]), default="spread",
              show_default=True, help="Ray placement-group strategy for the node actors.")
@click.option("--inject-node-loss", type=int, default=None, hidden=True, help="Testing: node I's worker dies at start.")
@click.option("--prices", default="2025-h2", show_default=True,
              help="Price preset name or TOML path: the drive classes each node's L3 wear is judged on.")
@click.option("--ssd-class", default=None, help="Drive class of the nodes' L3 (default: the preset's first).")
@click.option("--l3-device", "l3_device", default=None, metavar="RUN[,RUN]",
              help="kvbench io run folders measured on the L3 drive (random reads at a few --qd): each node's L3 loads "
                   "queue at that drive and pay its measured latency under load (instead of --l3-bw).")
@fields_option("--sweep", "sweep", multiple=True, metavar="KEY=V1,V2", example="nodes=2,4",
               parse=lambda items: _parse_sweep(items),
              help="Sizing sweep (with --dry-run): simulate every combination of these values under every router and "
                   "price it; keys nodes, gpus_per_node, l2, l3_capacity, l4_capacity (0: no pool), l4_link_bw, "
                   "l4_pool_bw (repeatable).")
@click.option("--ttft-p99", "ttft_p99", default=None, metavar="DURATION",
              help="Sweep target: TTFT p99 at most this (e.g. 2s).")
@click.option("--hit-ratio", "hit_ratio", type=float, default=None, help="Sweep target: hit ratio at least this.")
@click.option("--warmup", type=WARMUP, default=0.0, show_default=True, metavar="FRACTION|TIME",
              help="Requests that only warm the caches, left out of hit ratios, TTFT and the steady wear (kvbench "
                   "plan --warmup): a fraction of them (0.5) or a time on the trace's clock (136.3s: those before it).")
@click.option("--results", default="results", show_default=True, help="Results folder.")
@json_option
def cluster_cmd(trace, model, tp, fmt, nodes, router, routers, router_opts, load_bound, load_slack, gpus_per_node,
                profile, l2_bw, l3_bw, l4_pool_bw, l1, l2, l3, l3_capacity, l4, l4_capacity, l4_link_bw,
                l4_link_latency, policy, ttl, write_policy, exclusive, promote, layout, segment_bytes, trim, chunk_bytes,
                qd, engine, speed, closed_loop, duration, max_requests, verify, seed, dry_run, destroy_data, ray_address, placement,
                inject_node_loss, prices, ssd_class, l3_device, sweep, ttft_p99, hit_ratio, warmup, results, as_json):
    """Simulate TRACE on NODES serving nodes behind a router: per node L1-L3 (capacities per node), one L4 pool
    shared by all (capacity, per-node link, aggregate bandwidth), a prefill queue per node; hit ratios per node
    and tier, imbalance, duplication, L4 traffic and TTFT per router. Without --dry-run every node also replays
    its requests' I/O on real targets (its own store per node; with --ray-address on the cluster's hosts)."""
    from kvbench.cluster.config import ClusterConfig
    from kvbench.cluster.job import run_cluster
    from kvbench.errors import UsageError
    from kvbench.units import parse_duration

    if router and routers:
        raise UsageError("--router and --routers both given", "give one router, or a list with --routers")
    names = tuple(n.strip() for n in (routers or router or "").split(",") if n.strip())
    opts = dict(router_opts)
    if load_bound is not None:
        opts["load_bound"] = load_bound
    if load_slack is not None:
        opts["load_slack_s"] = load_slack
    rcfg = replay_config(trace=trace, model=model, fmt=fmt, tp=tp, l1=l1, l2=l2, l3=l3, l3_capacity=l3_capacity,
                         l4=l4, l4_capacity=l4_capacity, l4_link_bw=l4_link_bw, l4_link_latency=l4_link_latency,
                         policy=policy, ttl=ttl, write_policy=write_policy, exclusive=exclusive, promote=promote,
                         layout=layout, trim=trim, segment_bytes=segment_bytes, chunk_bytes=chunk_bytes, speed=speed,
                         closed_loop=closed_loop, duration=duration, max_requests=max_requests, verify=verify, qd=qd,
                         engine=engine, dry_run=dry_run, destroy_data=destroy_data, results=results)
    cfg = ClusterConfig(replay=rcfg, nodes=nodes, routers=names, gpus_per_node=gpus_per_node, router_opts=opts,
                        seed=seed, profile=profile, l2_bw=l2_bw, l3_bw=l3_bw, l4_pool_bw=l4_pool_bw,
                        ray_address=ray_address, placement=placement, inject_node_loss=inject_node_loss,
                        prices=prices, ssd_class=ssd_class, sweep=tuple(sweep),
                        l3_device=tuple(p.strip() for p in (l3_device or "").split(",") if p.strip()),
                        ttft_p99_s=parse_duration(ttft_p99, what="--ttft-p99") if ttft_p99 is not None else None,
                        hit_ratio_target=hit_ratio, warmup=warmup)
    s = run_cluster(cfg)
    if as_json:
        emit_json(s)
    else:
        _print(s)
    lost = (s.get("measured") or {}).get("lost") or []
    if lost:
        from kvbench.errors import KvbenchError
        raise KvbenchError(f"{len(lost)} of {s['nodes_count']} nodes did not finish: " +
                           "; ".join(f"node {m['node']} {m['status']}: {m['error']}" for m in lost) +
                           f"; the other nodes' results are in {s['run_dir']}", "rerun on healthy hosts")


def _print(s: dict) -> None:
    from kvbench.report.text import table
    from kvbench.units import format_rate

    results = s.get("routers") or {s["router"]: s}
    mf = s.get("measured_from")
    click.echo(f"cluster of {s['nodes_count']} nodes, {s['requests']} requests" + (" (dry run)" if s["dry_run"] else "")
               + (f", measured from request {mf['request']:,} ({mf['start_s']:,.4g} s)" if mf else ""))
    note = (s.get("stationarity") or {}).get("note")
    if note:
        click.echo(f"  note: {note}")
    rows = []
    for name, r in results.items():
        th = r["global"]["tier_hit_ratio"]
        l4, dup = r["l4"]["read_bytes_per_s"], r["duplication"]
        rows.append([name, f"{r['global']['hit_ratio']:.3f}",
                     *(f"{th[t]:.3f}" if th[t] is not None else "-" for t in ("l1", "l2", "l3", "l4")),
                     f"{r['imbalance']:.2f}", f"{dup:.2f}" if dup is not None else "-",
                     f"{r['ttft_ms']['p50']:.1f}", f"{r['ttft_ms']['p99']:.1f}", f"{r['prefill_tokens_saved']:,}",
                     format_rate(l4) if l4 is not None else "-"])
    for line in table(["router", "hit", "l1", "l2", "l3", "l4", "imbal", "dup", "TTFT p50", "p99 ms", "saved tok",
                       "L4 read/s"], rows, "<" + ">" * 11, indent="  "):
        click.echo(line)
    _print_wear(results)
    if s.get("sweep"):
        _print_sweep(s["sweep"])
    l4 = s["l4"]
    if l4["present"]:
        pk = l4["peak_pool_utilisation"]
        lk = l4["peak_link_utilisation"]
        click.echo(f"  L4 pool ({s['router']}): peak link utilisation "
                   f"{'-' if lk is None else f'{lk:.0%}'}, peak pool utilisation {'-' if pk is None else f'{pk:.0%}'}")
    m = s.get("measured")
    if m:
        t = m["ttft_ms"]
        if t["p50"] is not None:
            click.echo(f"  measured ({m['where']}): TTFT p50 {t['p50']:.1f} ms p99 {t['p99']:.1f} ms over "
                       f"{t['requests']} requests (measured loads, modelled prefill)")
        for nd in m["nodes"]:
            lt = (nd.get("load_time_ms") or {})
            click.echo(f"  measured node {nd['node']} on {nd.get('host', '?')}: {nd['status']}"
                       + (f", load p50 {lt['p50']:.3f} ms p99 {lt['p99']:.3f} ms" if lt.get("p50") is not None else "")
                       + (f" ({nd['error']})" if nd.get("error") else ""))
    click.echo(f"  model: {s['model_notes']['profile']}")
    click.echo(f"  run_dir: {s['run_dir']}")


def _print_sweep(sw: dict) -> None:
    """The configurations that meet the targets, cheapest first (at most 10), and how many were tried."""
    from kvbench.report.text import table

    t = sw["targets"]
    want = ", ".join(x for x in ((f"TTFT p99 <= {t['ttft_p99_s']:g} s" if t["ttft_p99_s"] is not None else ""),
                                 (f"hit ratio >= {t['hit_ratio']:g}" if t["hit_ratio"] is not None else "")) if x)
    click.echo(f"  sweep over {', '.join(sw['keys'])}: {len(sw['points'])} (configuration, router) runs; "
               f"{len(sw['meeting'])} meet {want or 'no target'} (priced on {sw['class']}, {sw['prices']}; "
               "network not priced)")
    rows = [[f"${r['usd_per_day']['total']:,.0f}/day", ", ".join(f"{k}={_fmt(k, r[k])}" for k in sw["keys"]),
             f"{r['router']}: hit {r['hit_ratio']:.3f}, TTFT p99 {r['ttft_p99_ms']:,.0f} ms"
             + (f", L3 busiest {r['l3_dwpd_host_busiest']:,.0f} DWPD" if r["l3_dwpd_host_busiest"] else "")]
            for r in sw["meeting"][:10]]
    for line in table(None, rows, "><<", indent="    "):
        click.echo(line)


def _fmt(key: str, v) -> str:
    from kvbench.units import format_bytes, format_rate

    kind = {"l4_link_bw": "rate", "l4_pool_bw": "rate", "nodes": "count", "gpus_per_node": "count"}.get(key, "size")
    return str(v) if kind == "count" else (format_rate(v) if kind == "rate" else format_bytes(v))


def _print_wear(results: dict) -> None:
    """Per router: what each node's L3 drive sees (the busiest node and the mean), and the L4 links and pool."""
    from kvbench.units import format_rate, format_residence, format_years

    for name, r in results.items():
        w = (r.get("wear") or {}).get("l3")
        if w and w["dwpd_host_busiest"] is not None:
            eq, life = w["dwpd_rating_equivalent_busiest"], w["lifetime_years_busiest"]
            click.echo(f"  {name}: L3 per node host DWPD mean {w['dwpd_host_mean']:,.3g}, busiest "
                       f"{w['dwpd_host_busiest']:,.3g} (write {format_rate(w['write_bytes_per_s_busiest'])}, KV kept "
                       f"{format_residence(w['residence_s_busiest'], w['write_bytes_per_s_busiest'])}"
                       + (f", {eq:,.3g} rating-equivalent on {w['drive_class']} (WAF {w['waf_busiest']:.3g}), "
                          f"{format_years(life)}" if eq is not None else "") + ")"
                       + ("" if w["nodes_turned_over"] == w["nodes"] else
                          f"; {w['nodes'] - w['nodes_turned_over']} node(s) never turned over"))
        elif w:
            click.echo(f"  {name}: L3 per node: no node's store turned over within the trace (no steady DWPD)")
        ln = r.get("links")
        if ln and ln.get("mean") is not None:
            pool = ln.get("pool")
            click.echo(f"  {name}: L4 links mean {ln['mean']:.1%}, p99 {ln['p99']:.0%}, saturated "
                       f"{ln['saturated_fraction']:.1%} of the time (busiest node mean {ln['busiest_node_mean']:.1%})"
                       + (f"; pool mean {pool['mean']:.1%}, p99 {pool['p99']:.0%}, saturated "
                          f"{pool['saturated_fraction']:.1%}" if pool else ""))


COMMANDS = [cluster_cmd]
