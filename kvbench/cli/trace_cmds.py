"""``kvbench trace stats`` / ``kvbench trace gen``: inspect and generate serving traces.

Also the shared trace options (``trace_options`` / ``trace_from_options``) that ``kvbench mrc`` and other
trace-reading commands use, so every command reads traces the same way.
"""

from __future__ import annotations

import functools

import click

from kvbench.cli._common import check_outputs, emit_json, force_option, json_option
from kvbench.stream.traces import DEFAULT_TRACE


def trace_options(f):
    """--format, --block-tokens, --time-unit, --field NAME=FIELD (repeatable), --sort, --limit."""
    from kvbench.stream.traces import format_names

    @click.option("--format", "fmt", default="auto", show_default=True,
                  help=f"Trace format: {', '.join(format_names())} (auto-detects from the first line).")
    @click.option("--block-tokens", type=int, default=None,
                  help="Tokens per KV block (default: the format's; needed for generic jsonl/csv).")
    @click.option("--time-unit", default=None, help="Unit of the timestamp field: ns, us, ms or s (generic formats).")
    @click.option("--field", "field_map", multiple=True, metavar="NAME=FIELD",
                  help="Map timestamp/input_length/output_length/hash_ids to the file's field names.")
    @click.option("--sort", "sort_time", is_flag=True, help="Sort requests by arrival (default: out-of-order is an error).")
    @click.option("--limit", type=int, default=None, help="Read only the first N requests.")
    @functools.wraps(f)
    def wrapper(*args, **kw):
        return f(*args, **kw)

    return wrapper


def trace_from_options(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, chain=None):
    """Read the trace named on the command line with the shared options."""
    from kvbench.stream.traces import parse_field_mapping, read_trace

    return read_trace(trace, fmt, block_tokens=block_tokens, time_unit=time_unit,
                      fields=parse_field_mapping(field_map) or None, order="sort" if sort_time else "check",
                      limit=limit, chain=chain)


def _fmt_pct(d: dict, scale: float = 1.0, unit: str = "") -> str:
    if d.get("p50") is None:
        return "-"
    return (f"p50 {d['p50'] * scale:,.4g}{unit}  p90 {d['p90'] * scale:,.4g}{unit}  "
            f"p99 {d['p99'] * scale:,.4g}{unit}  max {d['max'] * scale:,.4g}{unit}")


@click.command("stats")
@click.argument("trace", default=DEFAULT_TRACE)
@trace_options
@json_option
def stats_cmd(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, as_json):
    """Requests, tokens, distinct blocks, infinite-cache reuse, reuse times and arrivals of TRACE.

    TRACE is a file (JSONL/CSV, optionally gzipped) or a built-in trace name (default: mooncake-sample).
    """
    from dataclasses import replace

    from kvbench.stream.chain import chain_ids
    from kvbench.stream.stats import prefix_chaining, trace_stats

    raw = trace_from_options(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, chain=False)
    chaining = prefix_chaining(raw)
    from kvbench.stream.traces import get_format

    chained = get_format(raw.fmt).chain or not chaining["prefix_chained"]
    t = replace(raw, keys=chain_ids(raw.keys, raw.offsets)) if chained else raw
    s = trace_stats(t) | {"ids": chaining | {"chained_by_reader": chained}}
    if as_json:
        emit_json(s)
        return
    click.echo(f"trace        {s['path']} ({s['format']}, {s['block_tokens']} tokens/block)")
    click.echo(f"requests     {s['requests']:,} over {s['duration_s']:,.1f} s"
               + (f" ({s['arrival_rate_per_s']:.3g} req/s, inter-arrival CV {s['interarrival_s']['cv']:.2f})"
                  if s["arrival_rate_per_s"] else ""))
    click.echo(f"input tok    {_fmt_pct(s['input_tokens'])}  mean {s['input_tokens']['mean']:,.0f}")
    click.echo(f"output tok   {_fmt_pct(s['output_tokens'])}  mean {s['output_tokens']['mean']:,.0f}")
    click.echo(f"blocks       {s['block_references']:,} references, {s['distinct_blocks']:,} distinct; "
               f"infinite-cache reuse {s['infinite_cache_reuse']:.3f}")
    click.echo(f"reuse time   {_fmt_pct(s['reuse_time_s'], unit=' s')}")
    w = s["reuse_within"]
    if w["1m"] is not None:
        click.echo("reused within " + ", ".join(f"{k}: {v:.1%}" for k, v in w.items()))
    if "sessions" in s:
        ss = s["sessions"]
        click.echo(f"sessions     {ss['roots']:,} conversations, {ss['follow_ups']:,} follow-up requests"
                   + (f", turn {_fmt_pct(ss['turn'])}" if ss["turn"] else ""))
    ids = s["ids"]
    click.echo(f"ids          prefix-chained: {'yes' if ids['prefix_chained'] else 'no'} "
               f"({ids['ids_in_several_contexts']:,} ids in several contexts, "
               f"{ids['repeated_ids_within_requests']:,} requests repeat an id)"
               + ("; chained by the reader" if ids["chained_by_reader"] else ""))
    if s["lines_matching_block_size"] is not None and s["lines_matching_block_size"] < 1:
        click.echo(f"note         len(hash_ids) == ceil(input/{s['block_tokens']}) on "
                   f"{s['lines_matching_block_size']:.0%} of requests: the block size is approximate "
                   f"(input tokens per id: {_fmt_pct(s['tokens_per_block_id'])})")


@click.command("gen")
@click.argument("kind", type=click.Choice(["chat", "agent", "docqa", "qa"]))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Output file (Mooncake JSONL; gzipped when it ends in .gz).")
@click.option("--requests", "-n", type=int, default=1000, show_default=True, help="Number of requests.")
@click.option("--rate", type=float, default=1.0, show_default=True, help="Mean arrival rate, requests/s.")
@click.option("--arrival", type=click.Choice(["poisson", "bursty"]), default="poisson", show_default=True)
@click.option("--burstiness", type=float, default=4.0, show_default=True,
              help="Bursty arrivals: coefficient of variation of session inter-arrival times.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--block-tokens", type=int, default=512, show_default=True, help="Tokens per KV block.")
@click.option("--set", "overrides", multiple=True, metavar="PARAM=VALUE",
              help="Override a kind parameter, e.g. --set turns_mean=10 --set system_tokens=4000.")
@force_option
@json_option
def gen_cmd(kind, output, requests, rate, arrival, burstiness, seed, block_tokens, overrides, force, as_json):
    """Generate a seeded synthetic trace of KIND (chat, agent, docqa, qa) in Mooncake format."""
    from dataclasses import fields

    from kvbench.errors import UsageError
    from kvbench.stream.generators import GenSpec, KindParams, generate, override_params, spec_dict, write_trace
    from kvbench.stream.stats import trace_stats
    from kvbench.stream.traces import read_trace

    check_outputs(force, output)
    types = {f.name: f.type for f in fields(KindParams)}
    kw = {}
    for item in overrides:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"bad --set {item!r}", "write PARAM=VALUE, e.g. --set turns_mean=10")
        conv = float if types.get(name) in ("float", float) else int
        try:
            kw[name] = conv(value)
        except ValueError:
            raise UsageError(f"--set {name}: {value!r} is not a number", "give a number") from None
    spec = GenSpec(kind, requests=requests, rate=rate, arrival=arrival, burstiness=burstiness, seed=seed,
                   block_tokens=block_tokens, params=override_params(kind, **kw) if kw else None)
    path = write_trace(generate(spec), output)
    s = trace_stats(read_trace(path, "mooncake", block_tokens=block_tokens))
    summary = {"path": str(path), "spec": spec_dict(spec), "requests": s["requests"],
               "duration_s": s["duration_s"], "block_references": s["block_references"],
               "distinct_blocks": s["distinct_blocks"], "infinite_cache_reuse": s["infinite_cache_reuse"],
               "arrival_rate_per_s": s["arrival_rate_per_s"]}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"wrote {path}: {s['requests']:,} {kind} requests over {s['duration_s']:,.1f} s, "
               f"{s['block_references']:,} block references, infinite-cache reuse {s['infinite_cache_reuse']:.3f}")


GROUP = "trace"
COMMANDS = [stats_cmd, gen_cmd]
