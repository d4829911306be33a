"""``kvbench mrc``: hit ratio vs cache capacity of a trace (exact LRU, SHARDS, retention, other policies)."""

from __future__ import annotations

import time

import click

from kvbench.cli._common import RETENTION, WARMUP, emit_json, json_option
from kvbench.cli.trace_cmds import trace_from_options, trace_options
from kvbench.stream.traces import DEFAULT_TRACE


def _capacities(text: str | None, unit: str):
    if text is None:
        return None
    from kvbench.errors import UsageError
    from kvbench.units import parse_size

    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.startswith("-"):
            raise UsageError(f"--capacities: {part} is not > 0", "give positive capacities, e.g. 1000,10000")
        out.append(parse_size(part, what="--capacities"))
    if not out:
        raise UsageError("--capacities is empty", "give e.g. --capacities 1000,10000")
    if min(out) <= 0:
        raise UsageError(f"--capacities: {min(out)} is not > 0", "give positive capacities, e.g. 1000,10000")
    return out


@click.command("mrc")
@click.argument("trace", default=DEFAULT_TRACE)
@trace_options
@click.option("--capacities", default=None, metavar="C1,C2,..",
              help="Capacities (blocks, or bytes with units like 64GiB under --unit bytes). Default: a full curve.")
@click.option("--unit", type=click.Choice(["blocks", "bytes"]), default="blocks", show_default=True)
@click.option("--model", default=None, help="Model preset for bytes per block (needed for --unit bytes).")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree for the model's KV bytes.")
@click.option("--policy", default="lru", show_default=True,
              help="Policies, comma-separated: lru (exact, one pass), fifo, s3fifo (simulated per size).")
@click.option("--ttl", type=RETENTION, default=None, help="Retention: a block idle longer than this is gone (with a unit: 90s, 10m, 2h).")
@click.option("--sample", type=float, default=None, help="SHARDS fixed-rate sampling, e.g. 0.01 (LRU only).")
@click.option("--sample-size", type=int, default=None, help="SHARDS fixed-size sampling: keys kept (LRU only).")
@click.option("--warmup", type=WARMUP, default=0.0, show_default=True,
              help="Requests that warm the cache but are not counted: a fraction of them (0.5) or a time on the "
                   "trace's clock (136.3s: those before it).")
@click.option("--points", type=int, default=64, show_default=True, help="Points of a full curve (log-spaced).")
@json_option
def mrc_cmd(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, capacities, unit, model, tp,
            policy, ttl, sample, sample_size, warmup, points, as_json):
    """Hit ratio vs capacity of TRACE (file or built-in name; default mooncake-sample).

    Requests touch their blocks deepest-first, so for prefix-chained keys a block hit is a prefix hit; the exact
    LRU curve comes from one pass of stack distances, for every capacity at once.
    """
    from kvbench.analysis.curves.profile import exact_profile, hit_ratio_curve, shards_profile
    from kvbench.errors import UsageError
    from kvbench.spec.models import load_model

    policies = [p.strip().lower() for p in policy.split(",") if p.strip()]
    from kvbench.sim.policies import POLICIES

    for p in policies:
        if p not in POLICIES:
            raise UsageError(f"unknown policy {p!r}", f"use one of {', '.join(POLICIES)}")
    if (sample is not None or sample_size is not None) and policies != ["lru"]:
        raise UsageError("SHARDS sampling applies to LRU only", "drop --sample or use --policy lru")
    if points < 2:
        raise UsageError(f"--points must be >= 2, got {points}", "give e.g. --points 64")
    caps = _capacities(capacities, unit)
    spec = load_model(model, tp=tp) if model else None
    if unit == "bytes" and spec is None:
        raise UsageError("--unit bytes needs a model preset for the block size", "pass --model NAME (see kvbench models)")
    sampled = sample is not None or sample_size is not None
    t0 = time.perf_counter()
    warm_label = None
    if policies == ["lru"] and not warmup and not sort_time:
        # streamed: memory bounded by the distinct blocks (or the sample), whatever the trace length
        from kvbench.analysis.curves.profile import stream_profile
        from kvbench.stream.traces import iter_trace, parse_field_mapping

        batches = iter_trace(trace, fmt, block_tokens=block_tokens, time_unit=time_unit,
                             fields=parse_field_mapping(field_map) or None, limit=limit)
        from kvbench.progress import trace_batches
        from kvbench.stream.traces import resolve_trace

        src = resolve_trace(trace)                      # a file's bytes read give the line its total
        profile, meta = stream_profile(trace_batches(batches, "mrc", path=src if not isinstance(src, str) else None),
                                       rate=sample, size=sample_size, ttl_s=ttl)
        tr = None
        t_prof = meta["kernel_s"]                       # the curve kernel alone; reading/parsing is read_s
        t_read = time.perf_counter() - t0 - t_prof
    else:
        tr = trace_from_options(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit)
        meta = {"path": tr.path, "format": tr.fmt, "block_tokens": tr.block_tokens, "requests": tr.n_requests,
                "references": tr.n_blocks}
        t_read = time.perf_counter() - t0
        from kvbench.analysis.curves.profile import WarmupTime, warmup_fraction

        warm_label = f"warm-up to {warmup.seconds:g} s" if isinstance(warmup, WarmupTime) else None
        warmup = warmup_fraction(tr, warmup)        # a warm-up by time: the fraction of requests before it
        t1 = time.perf_counter()
        profile = None
        if "lru" in policies or caps is None:
            profile = (shards_profile(tr, rate=sample, size=sample_size, ttl_s=ttl, warmup=warmup) if sampled
                       else exact_profile(tr, ttl_s=ttl, warmup=warmup))
        t_prof = time.perf_counter() - t1
    block_bytes = spec.block_bytes(meta["block_tokens"]) if spec else None
    if caps is None and profile is not None and len(policies) > 1:
        # one capacity grid for every policy: log-spaced up to the largest LRU reuse distance
        grid = profile.default_capacities(min(points, 16))
        caps = (grid * block_bytes).tolist() if unit == "bytes" else grid.tolist()
    from kvbench.progress import Steps

    curves = []
    with Steps("mrc", [None] * len(policies)) as meter:     # a simulated policy's curve: one step each
        for p in policies:
            meter.start(f"{p} curve")
            curves.append(hit_ratio_curve(tr, capacities=caps, unit=unit, block_bytes=block_bytes, policy=p,
                                          ttl_s=ttl, warmup=warmup, points=points,
                                          profile=profile if p == "lru" else None))
    out = curve_json(curves, meta, spec, profile, streamed=tr is None, read_s=t_read, profile_s=t_prof,
                     elapsed_s=time.perf_counter() - t0)
    main_curve = curves[0]
    for w in out["warnings"]:
        click.echo(f"warning: {w}", err=True)
    if as_json:
        emit_json(out)
        return
    from kvbench.report.text import table
    from kvbench.units import format_bytes

    what = main_curve.method + (f", ttl {ttl:g} s" if ttl else "") + (
        f", {warm_label or 'warm-up'} ({warmup:.0%} of requests)" if warmup else "")
    click.echo(f"{meta['path']}: {meta['requests']:,} requests, {main_curve.references:,} block references "
               f"({what}); infinite-cache hit ratio {main_curve.infinite_hit_ratio:.4f}")
    rows = [[f"{int(cb):,}", *([format_bytes(int(cb) * block_bytes)] if block_bytes else []),
             *(f"{c.hit_ratio[i]:.4f}" for c in curves)] for i, cb in enumerate(main_curve.capacities_blocks)]
    for line in table(["capacity", *(["bytes"] if block_bytes else []), *(c.policy for c in curves)], rows,
                      ">" * (1 + bool(block_bytes) + len(curves))):
        click.echo(line)


def curve_json(curves, meta: dict, spec, profile, *, streamed: bool, read_s: float, profile_s: float,
               elapsed_s: float) -> dict:
    """``kvbench mrc --json``: the curves (one per policy, the first the main one) with the trace's facts
    (``meta``: path, format, block_tokens, requests, references), the model's block size and the timings."""
    main_curve = curves[0]
    block_bytes = spec.block_bytes(meta["block_tokens"]) if spec else None
    t_read, t_prof, elapsed = read_s, profile_s, elapsed_s
    out = main_curve.to_dict() | {
        "trace": meta["path"], "format": meta["format"], "block_tokens": meta["block_tokens"],
        "requests": meta["requests"], "streamed": streamed,
        "model": spec.name if spec else None, "bytes_per_token": spec.bytes_per_token if spec else None,
        "stored_bytes_per_token": spec.stored_bytes_per_token(meta["block_tokens"]) if spec else None,
        "capacities_bytes": (main_curve.capacities_blocks * block_bytes).tolist() if block_bytes else None,
        "read_s": t_read, "profile_s": t_prof, "elapsed_s": elapsed,
        # the LRU curve kernel's rate (profile_s), and end to end (reading and parsing the trace included)
        "refs_per_s": meta["references"] / t_prof if profile is not None and t_prof > 0 else None,
        "end_to_end_refs_per_s": meta["references"] / elapsed if elapsed > 0 else None,
        "curves": [c.to_dict() for c in curves],        # one per policy, whatever the options (a stable shape)
        "warnings": [],
    }
    if profile is not None and profile.sample_rate < 1.0 and profile.steps.size == 0:
        n = profile.sampled_references
        held = f"{n:,} sampled reference{'' if n == 1 else 's'}, each a first touch" if n else "no reference"
        out["warnings"].append(
            f"the sample at rate {profile.sample_rate:.3g} holds no reuse ({held}): its curve is 0 at every "
            "capacity and SHARDS_adj has no reuse to correct; raise --sample (or --sample-size) or drop it for the "
            "exact curve")
    return out


def lru_curve_json(trace, profile, *, spec, unit: str = "bytes", points: int = 64, read_s: float = 0.0,
                   profile_s: float = 0.0, warmup: float = 0.0) -> dict:
    """``kvbench mrc TRACE --unit UNIT --model M [--warmup W] --json`` (exact LRU, a full curve) of a trace already
    read and its exact profile already computed after the same warm-up (``kvbench run``'s job hands both in)."""
    from kvbench.analysis.curves.profile import hit_ratio_curve
    from kvbench.stream.sampling import full_references_from, key_sample_rate

    t0 = time.perf_counter()
    refs = full_references_from(trace, 0) if key_sample_rate(trace) < 1.0 else trace.n_blocks
    meta = {"path": trace.path, "format": trace.fmt, "block_tokens": trace.block_tokens, "requests": trace.n_requests,
            "references": refs}
    block_bytes = spec.block_bytes(trace.block_tokens) if spec else None
    curve = hit_ratio_curve(trace, capacities=None, unit=unit, block_bytes=block_bytes, policy="lru", points=points,
                            warmup=warmup, profile=profile)
    return curve_json([curve], meta, spec, profile, streamed=False, read_s=read_s, profile_s=profile_s,
                      elapsed_s=read_s + profile_s + time.perf_counter() - t0)


COMMANDS = [mrc_cmd]
