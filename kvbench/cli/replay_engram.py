"""``kvbench replay engram``: Engram n-gram table lookups from real or Zipf token streams against DRAM and NVMe."""

from __future__ import annotations

from dataclasses import asdict

import click

from kvbench.cli._common import IO_SIZE, SIZE, emit_json, json_option

GROUP = "replay"


@click.command("engram")
@click.option("--preset", required=True, help="Engram table preset (engram-27b, engram-40b, deepseek-v4.1-engram) "
                                              "or a .toml path.")
@click.option("--text", type=click.Path(dir_okay=False), default=None, help="UTF-8 text to tokenize (real tokens).")
@click.option("--zipf", type=float, default=None,
              help="Synthetic i.i.d. Zipf token stream with this exponent (default 1.0 when no --text).")
@click.option("--tokens", type=int, default=None, help="Use at most this many tokens (Zipf default 262144).")
@click.option("--tokenizer", default=None, help="Override the preset's tokenizer (deepseek-v3 | utf8-bytes).")
@click.option("--batch", type=int, default=32, show_default=True, help="Sequences per step.")
@click.option("--seq-len", type=int, default=2048, show_default=True, help="Tokens per sequence.")
@click.option("--mode", type=click.Choice(["decode", "prefill"]), default="decode", show_default=True,
              help="decode: one token per sequence per step; prefill: --chunk tokens per sequence per step.")
@click.option("--chunk", type=int, default=None, help="Prefill tokens per sequence per step (default --seq-len).")
@click.option("--dram", type=SIZE, default=None, help="DRAM hot-row cache capacity (e.g. 1GiB); none if omitted.")
@click.option("--policy", type=click.Choice(["static", "lru", "lfu"]), default="static", show_default=True,
              help="DRAM cache: static top-k from the profiling pass, LRU or LFU.")
@click.option("--layout", type=click.Choice(["hash", "hot-first"]), default="hash", show_default=True,
              help="Row packing into pages: hash order, or hottest rows first (from the profiling pass).")
@click.option("--page", type=IO_SIZE, default="4k", show_default=True, help="Page (read) size rows are packed into.")
@click.option("--window-us", type=float, default=None, help="Prefetch window of every Engram layer, microseconds.")
@click.option("--layer-us", type=float, default=None,
              help="Compute time per backbone layer, us: layer l's window is l x this (blocks before it).")
@click.option("--compute", default=None,
              help="Compute profile (workloads/compute or JSON) of the preset's backbone model: per-layer time = "
                   "T(step tokens) / backbone layers.")
@click.option("--compute-scaling", type=click.Choice(["active-params"]), default=None,
              help="Use another model's --compute profile, scaled by parameters active per token (stated in results).")
@click.option("--profile-fraction", type=float, default=0.5, show_default=True,
              help="Leading fraction of steps used to profile (static top-k, hot-first order) and warm caches.")
@click.option("--steps", type=int, default=None, help="Time at most this many measured steps.")
@click.option("--target", default=None, help="Table file, block device, or dram:<size> arena.")
@click.option("--scale-to", type=SIZE, default=None,
              help="Scale the head tables (fewer rows per head) so the table fits this size; stated in results.")
@click.option("--destroy-data", default=None, help="Allow writing the table over this block device (its data is lost).")
@click.option("--engine", type=click.Choice(["libaio", "psync"]), default="libaio", show_default=True)
@click.option("--qd", type=int, default=32, show_default=True, help="Queue depth for a step's reads.")
@click.option("--verify", type=click.Choice(["off", "sampled", "all"]), default="sampled", show_default=True,
              help="Check read data against the table's stamped content.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the Zipf stream.")
@click.option("--dry-run", is_flag=True, help="Simulate only: hit ratios, curves, read amplification; no I/O.")
@click.option("--results", default="results", show_default=True, help="Folder for the run folder.")
@json_option
def engram_cmd(preset, text, zipf, tokens, tokenizer, batch, seq_len, mode, chunk, dram, policy, layout, page,
               window_us, layer_us, compute, compute_scaling, profile_fraction, steps, target, scale_to, destroy_data, engine, qd, verify,
               seed, dry_run, results, as_json):
    """Replay Engram table lookups: tokens -> hashed rows -> DRAM row cache -> page reads (O_DIRECT) vs window."""
    from kvbench.errors import UsageError
    from kvbench.replay.engram import EngramReplayConfig, check_fits, fit_scale, make_layout
    from kvbench.stream.engram import EngramHasher, load_engram
    from kvbench.stream.tokens import load_tokenizer

    cfg = EngramReplayConfig(preset=preset, text=text, zipf=zipf, tokens=tokens, batch=batch, seq_len=seq_len,
                             mode=mode, chunk=chunk, dram=dram, policy=policy, layout=layout, page=page,
                             window_us=window_us, layer_us=layer_us, compute=compute, compute_scaling=compute_scaling,
                             profile_fraction=profile_fraction,
                             steps=steps, target=target, scale_to=scale_to, seed=seed, tokenizer=tokenizer)
    cfg.validate()
    if qd < 1:
        raise UsageError(f"--qd must be >= 1, got {qd}", "give --qd 1 or more")
    if not dry_run and target is None:
        raise UsageError("no --target to read the table from", "give --target PATH (file or device) or "
                         "dram:<size>, or --dry-run to simulate only")
    spec = load_engram(preset)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tk = load_tokenizer(tokenizer or spec.tokenizer)
    lut = tk.canonical_map()
    vocab, pad = int(lut.max()) + 1, int(lut[spec.pad_id]) if spec.pad_id < lut.size else 0
    if scale_to is not None:
        spec = fit_scale(spec, vocab, pad, page, scale_to)
    table_bytes = make_layout("hash", EngramHasher.build(spec, vocab, pad), page).total_bytes
    if target is not None:
        check_fits(table_bytes, target, f" (scaled x{spec.scale:.4g})" if spec.scale < 1 else "")
    run(cfg, spec, dry_run=dry_run, engine=engine, qd=qd, verify=verify, destroy_data=destroy_data,
        results=results, as_json=as_json)


def run(cfg, spec, *, dry_run, engine, qd, verify, destroy_data, results, as_json):
    """Build the workload, write the run folder, and (unless dry-run) time the fetch on the target."""
    from kvbench.errors import KvbenchError
    from kvbench.metrics.run import RunDir
    from kvbench.replay.engram import build_workload, run_fetch
    from kvbench.units import format_bytes

    config = {**asdict(cfg), "dry_run": dry_run, "engine": engine, "qd": qd, "verify": verify,
              "table_scale": spec.scale, "rows_per_head": list(spec.rows_per_head)}
    from kvbench.progress import Line

    with Line("replay engram: tokens -> rows -> pages", unit=None):
        w = build_workload(cfg, spec)          # bad text or too few tokens fail here, before the run folder
    tgt = None
    if not dry_run:                            # safety refusals (a device without --destroy-data) come next
        from kvbench.engine import open_target
        from kvbench.engine.targets import is_dram_spec

        tgt = open_target(cfg.target, size=None if is_dram_spec(cfg.target) else w.layouts[cfg.layout].total_bytes,
                          write=True, destroy_data=destroy_data)
    try:
        rd = RunDir.create("replay-engram", config, root=results, targets=[tgt] if tgt else ())
        summary = {**w.summary(), "fetch_us": None, "window_miss_ratio": None, "iops": None}
        if spec.scale < 1:
            summary["warnings"].append(f"table scaled to {spec.scale:.4g} of {spec.name}'s published rows per head "
                                       f"({list(spec.rows_per_head)}) to fit --scale-to")
        curve = w.curve()
        summary["dram_curve"] = curve
        rd.write_json("curve.json", curve)
        for msg in summary["warnings"]:
            click.echo(f"kvbench: warning: {msg}", err=True)
        if dry_run:
            rd.write_summary(summary, status="complete")
        else:
            def on_write(n):
                if not as_json:
                    click.echo(f"writing the {format_bytes(n)} table to {cfg.target} (once) ...", err=True)
            lines = {}

            def on_progress(phase, done, total, row):     # one live line per phase: I/Os, ETA, bandwidth
                from kvbench.units import format_rate
                for other in [k for k in lines if k != phase]:
                    lines.pop(other).close()
                if phase not in lines:
                    lines[phase] = Line(f"replay engram: {phase}", total, "I/Os")
                lines[phase].update(done, note=format_rate(row["bw_bytes_per_s"]) if row else None)
            try:
                out, hists, ts, res, facts = run_fetch(w, tgt, engine=engine, qd=qd, verify=verify,
                                                       on_write=on_write, progress=on_progress)
            except KvbenchError as e:          # e.g. the table write failed: the folder says so
                rd.write_summary({**summary, "error": str(e)}, status="failed")
                raise
            finally:
                for line in lines.values():
                    line.close()
            summary.update(out, table=facts, verify=res.verify)
            rd.append_timeseries(ts)
            rd.write_histograms(hists)
            status = res.status if res.status in ("complete", "interrupted", "failed") else "partial"
            if res.verify.get("mismatches"):
                status = "failed"
            rd.write_summary(summary, status=status)
            res.raise_for_status()
    finally:
        if tgt is not None:
            from kvbench.engine.targets import close_all
            close_all([tgt])
    summary["run_dir"] = str(rd.path)
    if as_json:
        emit_json({"run_dir": str(rd.path), **summary})
        return
    _print(summary, dry_run)


def _print(s: dict, dry_run: bool) -> None:
    from kvbench.report.text import table
    from kvbench.units import format_bytes, format_rate
    click.echo(f"run_dir            {s['run_dir']}")
    click.echo(f"preset             {s['preset']}  rows/token {s['rows_per_token']}  row {s['row_bytes']} B  "
               f"table {format_bytes(s['table_bytes'])}" + (f"  (scaled x{s['table_scale']:.4g})" if s['table_scale'] < 1 else ""))
    st = s["stream"]
    fits = ", ".join(f"n={f['n']}: s={f['zipf_exponent']:.2f}" for f in st["zipf_fit"])
    tk = s["tokenizer"]
    src = (f"synthetic Zipf({tk['exponent']:g}) over {tk['name']}'s vocabulary" if tk.get("source") == "zipf"
           else f"from {tk.get('path')} via {tk['kind']}")
    click.echo(f"tokens             {tk['tokens']:,} {src}  (canonical ids: -{tk['compression']:.1%})  Zipf fit {fits}")
    click.echo(f"steps              {s['measured_steps']:,} measured ({st['mode']}, batch {st['batch']}), "
               f"{s['rows_per_step']:.0f} unique rows/step")
    click.echo(f"DRAM               {format_bytes(s['dram_bytes'])} {s['dram_policy']}: hit ratio {s['dram_hit_ratio']:.3f}")
    for line in table(None, [[f"layout {k}", "*" if k == s["layout"] else "",
                              f"read amplification {v['read_amplification']:.2f}",
                              f"{v['reads_per_step']:.0f} reads/step ({format_bytes(v['bytes_per_step'])}/step)"]
                             for k, v in s["layouts"].items()], "<<<<"):
        click.echo(line)
    if not dry_run:
        f = s["fetch_us"]
        click.echo(f"fetch per step     p50 {f['p50']:.0f} us  p99 {f['p99']:.0f} us  max {f['max']:.0f} us")
        click.echo(f"device             {s['iops']:,.0f} IOPS  {format_rate(s['bytes_per_s'])}")
    if s.get("window_us") is not None:
        need = s["iops_needed"]
        line = "window             " + "; ".join(f"Engram layer {i + 1}: {x:,.0f} us"
                                                  for i, x in enumerate(s["window_us"])) + " (prefetch budget)"
        if need:
            line += f": needs {need['p99']:,.0f} IOPS (p99 step)"
        if not dry_run and s.get("window_miss_ratio") is not None:
            line += f"; {s['window_miss_ratio']:.1%} of steps miss"
        click.echo(line)
        if s.get("window_source"):
            click.echo(f"  from {s['window_source']}")
        for line in table(None, [["layer", f"{lid}:", f"{n['reads_per_step']['p99']:,.0f} reads (p99 step) by "
                                  f"{n['window_us']:,.1f} us: own {n['iops_own']['p99']:,.0f} IOPS, with earlier "
                                  f"deadlines {n['iops_cumulative']['p99']:,.0f} IOPS "
                                  f"({format_rate(n['bytes_per_s_cumulative']['p99'])})"
                                  + ("  <- binding" if int(lid) == s["binding_layer"] else "")]
                                 for lid, n in (s.get("layer_needs") or {}).items()], "<><", indent="  "):
            click.echo(line)
        if s.get("iops_needed"):
            click.echo(f"needs              {s['iops_needed']['p99']:,.0f} IOPS, "
                       f"{format_rate(s['bytes_per_s_needed']['p99'])} (p99 step; layer {s['binding_layer']} binds)")


COMMANDS = [engram_cmd]
