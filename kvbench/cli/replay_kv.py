"""``kvbench replay kv``: a serving trace through L1-L4 tiers onto real DRAM and NVMe I/O."""

from __future__ import annotations

import click

from kvbench.cli._common import (OUTPUT, SIZE, emit_json, fields_option, force_option, json_option, parse_admissions,
                                 replay_config,
                                 replay_io_options, tier_options)

GROUP = "replay"


@click.command("kv")
@click.argument("trace")
@click.option("--model", required=True, help="Model preset (see `kvbench models`) or TOML path: KV bytes per token.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (splits GQA KV heads).")
@click.option("--format", "fmt", default="auto", show_default=True, help="Trace format (auto-detected).")
@tier_options
@replay_io_options
@click.option("--l3-region", type=SIZE, default="0", metavar="SIZE",
              help="The most the L3 store may occupy (a test region on a drive): the cache is the largest capacity "
                   "whose store, spare slots included, fits it (--l3-capacity is then optional).")
@click.option("--dry-run", is_flag=True, help="Simulate and plan only: no I/O, no targets touched.")
@click.option("--export-iolog", type=OUTPUT, default=None,
              help="Write the L3/L4 I/O plan as a fio iolog v3 (replay it with fio --read_iolog).")
@click.option("--destroy-data", default=None, metavar="DEV",
              help="Allow writing the raw block device DEV given as --l3 (its data is destroyed).")
@click.option("--sample-keys", "sample_keys", type=float, default=None, metavar="RATE",
              help="Miniature simulation: replay only block keys hashing under RATE (e.g. 0.01) with every tier at "
                   "capacity x RATE (give the full-size capacities to model); hit ratios estimate the full cache.")
@click.option("--sample-seed", type=int, default=0, show_default=True, help="Hash salt of --sample-keys.")
@fields_option("--admission", default="all", show_default=True, metavar="POLICY", parse=parse_admissions("--admission"),
               example="tinylfu:width=0.5", sep=":",
              help="Admission policy of L3 and L4: all, second-access[:ghost=G], tinylfu[:width=W:sample=S], "
                   "prefix-depth:depth=N, threshold[:min_blocks=B][:window=T]. Rejected blocks are not written.")
@fields_option("--l4-admission", default=None, metavar="POLICY", parse=parse_admissions("--l4-admission"),
               example="tinylfu:width=0.5", sep=":", help="L4's admission policy (default: --admission).")
@click.option("--results", default="results", show_default=True, help="Results folder.")
@force_option
@json_option
def replay_kv_cmd(trace, model, tp, fmt, l1, l2, l3, l3_capacity, l4, l4_capacity, l4_link_bw, l4_link_latency,
                  policy, ttl, write_policy, exclusive, promote, layout, segment_bytes, trim, chunk_bytes, qd, engine,
                  speed, closed_loop, duration, max_requests, verify, l3_region, dry_run, export_iolog, destroy_data, sample_keys,
                  sample_seed, admission, l4_admission, results, as_json):
    """Replay TRACE through the tiers: hits read from where they live, misses produced and written, evictions
    cascade; per-request load times, per-tier hit ratios, bytes, bandwidth and latency."""
    from kvbench.replay.kv import replay_kv
    from kvbench.units import format_bytes, format_rate

    cfg = replay_config(trace=trace, model=model, fmt=fmt, tp=tp, l1=l1, l2=l2, l3=l3, l3_capacity=l3_capacity,
                        l3_region=l3_region, l4=l4,
                        l4_capacity=l4_capacity, l4_link_bw=l4_link_bw, l4_link_latency=l4_link_latency,
                        policy=policy, ttl=ttl, write_policy=write_policy, exclusive=exclusive, promote=promote,
                        layout=layout, trim=trim, segment_bytes=segment_bytes, chunk_bytes=chunk_bytes, speed=speed,
                        closed_loop=closed_loop, duration=duration, max_requests=max_requests, verify=verify,
                        qd=qd, engine=engine, dry_run=dry_run, export_iolog=export_iolog, destroy_data=destroy_data,
                        results=results, sample_keys=sample_keys, sample_seed=sample_seed,
                        admission=admission, l4_admission=l4_admission)
    from kvbench.errors import KvbenchError

    import time

    from kvbench.progress import Line
    from kvbench.replay.live import poll_replay

    try:
        with Line("replay kv", unit="requests") as line, \
                poll_replay(line, results, time.time(), None if dry_run else duration):
            # a dry run's line moves window by window; a measured one from its progress file (GB/s per tier)
            s = replay_kv(cfg, progress=(lambda done, total: line.update(done, total=total)) if dry_run else None)
    except KvbenchError as e:
        if as_json:      # a failed replay still answers --json: its error, and what it measured if it ran
            emit_json({"kind": "replay-kv", **(getattr(e, "summary", None) or {}),
                       "status": "interrupted" if e.exit_code == 130 else "failed",
                       "error": e.problem, "fix": e.fix})
        raise
    if as_json:
        emit_json(s)
        return
    lt = s["load_time_ms"]
    sampled = s.get("sample_rate", 1.0) < 1.0
    click.echo(f"replayed {s['requests']} requests, {s['blocks']} blocks of {format_bytes(s['block_bytes'])}: "
               f"hit ratio {s['hit_ratio']:.3f}" + (" (dry run)" if s["dry_run"] else ""))
    if sampled:
        click.echo(f"  key sample {s['sample_rate']:g}: hit ratios estimate the full cache "
                   f"({', '.join(f'{k} {format_bytes(v)}' for k, v in s['sampling']['modelled_capacity_bytes'].items())}"
                   f" modelled, simulated at x{s['sample_rate']:g}); bytes measured (full size = / rate)")
        sm = s["sampling"]
        if sm.get("hit_ratio_estimator") == "adjusted":
            click.echo(f"  the sample holds {sm['reference_excess']:.3g}x the references its rate implies (popular "
                       f"keys in it): hit ratios by SHARDS_adj; the sample's own {s['sampled_hit_ratio']:.3f}")
    for name, t in s["tiers"].items():
        bw = "" if t["read_bw_bytes_per_s"] is None else \
            f"  read {format_rate(t['read_bw_bytes_per_s'])} write {format_rate(t['write_bw_bytes_per_s'])}"
        lat = t["read_lat_us"]
        lat_s = "" if lat.get("p50") is None else f"  read p50 {lat['p50']:.0f} us p99 {lat['p99']:.0f} us"
        adm = t.get("admission", "all")
        adm_s = "" if adm == "all" else f"  admission {adm}: {t['blocks']['admission_rejects']:,} blocks kept out"
        click.echo(f"  {name}: hit {t['hit_ratio']:.3f}  read {format_bytes(t['read_bytes'])}  "
                   f"written {format_bytes(t['write_bytes'])}{bw}{lat_s}{adm_s}" +
                   (f"  (full size: read {format_bytes(t['full_read_bytes'])} written "
                    f"{format_bytes(t['full_write_bytes'])})" if sampled else ""))
    for name, t in s["tiers"].items():
        if t.get("store"):
            click.echo(f"  {name} store: {t['store']}")
    if lt.get("p50") is not None:
        click.echo(f"  load time p50 {lt['p50']:.3f} ms  p99 {lt['p99']:.3f} ms" +
                   (" (sampled blocks only)" if sampled else ""))
        fl = (s.get("sampling") or {}).get("full_load_time_ms_est") or {}
        if sampled and fl.get("p50") is not None:
            click.echo(f"  estimated full-request load time p50 {fl['p50']:.3f} ms  p99 {fl['p99']:.3f} ms")
    if s["app_write_amplification"] is not None:
        click.echo(f"  application write amplification (L3 bytes / KV produced): {s['app_write_amplification']:.3f}")
    click.echo(f"  verify: {s['verify_checked']} reads checked, {s['verify_errors']} errors")
    click.echo(f"  run_dir: {s['run_dir']}")


COMMANDS = [replay_kv_cmd]
