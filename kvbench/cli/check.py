"""``kvbench check``: does loading KV from each tier beat recomputing it? (DESIGN.md, "The inequality")."""

from __future__ import annotations

import click

from kvbench.cli._common import emit_json, json_option
from kvbench.errors import SpecError

DEFAULT_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)


def _canonical(name: str | None) -> str | None:
    """A model preset's own name (aliases and paths resolved), else the name as written, lower-cased."""
    from kvbench.errors import KvbenchError
    from kvbench.spec.models import load_model

    if not name:
        return None
    try:
        return load_model(name).name.lower()
    except KvbenchError:
        return str(name).lower()


def _lengths(ctx, param, value):
    if not value:
        return DEFAULT_LENGTHS
    out = []
    for x in value.split(","):
        try:
            v = int(x)
        except ValueError:
            raise click.BadParameter(f"{x!r} is not an integer (give e.g. 1024,4096)") from None
        if v <= 0:
            raise click.BadParameter(f"lengths must be > 0, got {v}")
        out.append(v)
    return tuple(out)


@click.command("check")
@click.option("--profile", "profile_name", default=None,
              help="Compute profile: preset in workloads/compute, a .toml/.json file, or a prefill run folder.")
@click.option("--recompute-tokens-per-s", "rate", type=float, default=None,
              help="Instead of a profile: a plain prefill rate (linear what-if).")
@click.option("--run", "run_dir", type=click.Path(file_okay=False), default=None,
              help="A replay run folder: tier bandwidth/latency from summary.json, hits from requests.csv.")
@click.option("--tier", "tier_specs", multiple=True, metavar="NAME=BW,LATENCY",
              help="A tier to check, e.g. l3=6.5GB/s,90us (repeatable).")
@click.option("--trace", "trace_path", default=None,
              help="A trace (path or built-in name): margins at its reusable prefix lengths (unbounded-cache bound).")
@click.option("--model", "model_name", default=None,
              help="Model preset for KV bytes per token and layers (default: the profile's or the run's model).")
@click.option("--link", default=None, metavar="NAME",
              help="L2 -> GPU link model for a run's L2 (workloads/links: pcie-gen5-x16, pcie-gen4-x16) [the profile's "
                   "measured pinned copy when it has one, else pcie-gen5-x16]; host memcpy is never a load path.")
@click.option("--kv-dtype", default=None, help="KV cache dtype override (bf16, fp8, ...).")
@click.option("--pipelined", is_flag=True, help="Overlap loading layer by layer with the suffix's compute.")
@click.option("--suffix-tokens", type=int, default=0, show_default=True,
              help="Uncached tokens computed after the prefix (what pipelining overlaps; --run uses the trace's).")
@click.option("--lengths", callback=_lengths, default=None, help="Prefix lengths to report margins at (comma list).")
@click.option("--max-tokens", type=int, default=1 << 20, show_default=True,
              help="Longest prefix considered for the break-even.")
@json_option
def check_cmd(profile_name, rate, run_dir, tier_specs, trace_path, model_name, link, kv_dtype, pipelined, suffix_tokens,
              lengths, max_tokens, as_json):
    """Load vs recompute per tier: T_load(n) = first byte + n*bytes_per_token/BW (optionally pipelined) against
    the prefill profile's T(n); prints the break-even prefix n*, margins, and a verdict per tier."""
    out, profile, model, run, run_notes = check_result(profile_name, rate, run_dir, tier_specs, trace_path,
                                                       model_name, link, kv_dtype, pipelined, suffix_tokens,
                                                       lengths, max_tokens)
    result_tiers = out["tiers"]
    from kvbench.report.text import table
    from kvbench.units import format_bytes, format_duration, format_optional, format_rate

    if as_json:
        emit_json(out)
        return
    click.echo(f"recompute: {profile.describe()}")
    if profile.kind != "measured":
        click.echo(f"  ({profile.kind}: {profile.source})")
    elif profile.fit.rel_rms > 0.10:
        click.echo(f"  warning: this profile's fit misses its points by {profile.fit.rel_rms:.0%} rms (noisy timings)")
    kinds = " + ".join(f"{g.count} {g.kind}" + (f" ({g.window})" if g.window else "") for g in model.layer_bytes())
    click.echo(f"KV: {model.name}, {model.bytes_per_token:,} B/token at long prefixes ({model.dtype}), {model.layers} "
               f"layers: {kinds}; "
               f"load {'pipelined layer by layer over ' + str(suffix_tokens) + ' suffix tokens' if pipelined else 'before compute'}")
    show = [n for n in lengths][:6]
    rows = []
    for name, r in result_tiers.items():
        rows.append([name, format_rate(r["bandwidth_bytes_per_s"]),
                     format_optional(r["first_byte"], "unmeasured") if r["latency_resolved"] else "unresolved",
                     f"{r['break_even_tokens']:,}" if r["break_even_tokens"] is not None else "never",
                     *(format_duration(r["margin_s"][str(n)]) for n in show), ""])
    for line in table(["tier", "bandwidth", "latency", "n*", *(f"@{n}" for n in show),
                       "(margin = recompute - load; + loads)"], rows, "<" + ">" * (3 + len(show)) + "<"):
        click.echo(line)
    for name, r in result_tiers.items():
        if r["source"] != "given":
            click.echo(f"  {name}: {r['source']}")
        if not r["latency_resolved"]:
            click.echo(f"  {name}: first byte {r['first_byte']} (the fit has no fixed part: 0 is not a measurement)")
    for r in result_tiers.values():
        click.echo(r["verdict"])
    if run is not None:
        click.echo(f"run: {run.path}")
        for note in run_notes:
            click.echo(f"  note: {note}")
        h = out["run"].get("hits")
        if h:
            for name, t in h["tiers"].items():
                if t["hit_requests"]:
                    click.echo(f"  {name}: {t['hit_requests']:,} requests hit; hit length p50 "
                               f"{t['hit_tokens']['p50']:,.0f} tokens; loading wins for {t['wins_fraction']:.1%} "
                               f"(margin p50 {format_duration(t['margin_s']['p50'])})")
            if "wins_fraction" in h:
                click.echo(f"  measured loads: loading won in {h['wins_fraction']:.1%} of {h['requests_with_loaded_hits']:,}"
                           f" requests with loaded hits; TTFT saved p50 {format_duration(h['ttft_saved_s']['p50'])}, "
                           f"p99 {format_duration(h['ttft_saved_s']['p99'])}")

    if trace_path:
        tr = out["trace"]
        p = tr["prefix_tokens"]
        click.echo(f"trace {tr['path']}: {tr['requests_with_prefix']:,} of {tr['requests']:,} requests reuse a prefix "
                   f"(unbounded cache); prefix p50 {p['p50'] or 0:,.0f}, p99 {p['p99'] or 0:,.0f} tokens")
        for name, t in tr["tiers"].items():
            if t["wins_fraction"] is not None:
                click.echo(f"  {name}: loading wins for {t['wins_fraction']:.1%} of them; margin p50 "
                           f"{format_duration(t['margin_s']['p50'])}, p99 {format_duration(t['margin_s']['p99'])}")


def check_result(profile_name=None, rate=None, run_dir=None, tier_specs=(), trace_path=None, model_name=None,
                 link=None, kv_dtype=None, pipelined=False, suffix_tokens=0, lengths=DEFAULT_LENGTHS,
                 max_tokens=1 << 20):
    """``kvbench check --json`` (its options by their parameter names): the result, and the profile, model, run
    and run notes it used (for the text output)."""
    from kvbench.analysis.recompute import (Inequality, Tier, analyse_run_hits, analyse_tiers,
                                            analyse_trace_prefixes, curve_tokens, overall_verdict, parse_tier,
                                            read_run, trace_prefixes)
    from kvbench.compute.profile import load_profile, rate_profile
    from kvbench.metrics.results import CheckResult
    from kvbench.spec.models import load_model
    from kvbench.units import format_bytes, format_duration

    if (profile_name is None) == (rate is None):
        raise SpecError("give exactly one of --profile and --recompute-tokens-per-s",
                        "e.g. --profile llama-3.1-8b-h200-trtllm-fp8 or --recompute-tokens-per-s 39000")
    if suffix_tokens < 0 or max_tokens < 1:
        raise SpecError("--suffix-tokens must be >= 0 and --max-tokens >= 1", "fix the option")
    if trace_path:
        from kvbench.stream.synth import require_whole_stream

        require_whole_stream(trace_path, "check --trace", "a request's reusable prefix is its leading seen blocks")
    tiers = [parse_tier(t) for t in tier_specs]
    run = read_run(run_dir) if run_dir else None
    profile = load_profile(profile_name) if profile_name else rate_profile(rate)
    model_name = model_name or (profile.model or None) or (run.model if run else None)
    if run is not None and run.model and _canonical(model_name) != _canonical(run.model):
        raise SpecError(f"the run {run_dir} replayed {run.model} but the check would use {model_name}"
                        f"{' (the profile ' + profile.name + ' is of it)' if profile.model == model_name else ''}: "
                        "its loads and the recompute time would be of different models",
                        f"give a profile of {run.model} (or --model {run.model} to take its KV size on purpose)")
    if not model_name:
        raise SpecError("no model: the rate profile names none", "give --model, e.g. --model llama-3.1-8b")
    model = load_model(model_name, dtype=kv_dtype)
    run_notes, block_tokens = [], None
    if run is not None:
        from kvbench.analysis.loadpath import load_path_tiers, run_tiers

        block_tokens = run.block_tokens
        measured, notes = run_tiers(run, model)                      # the fit kvbench run's load paths use too
        measured, l2_notes = load_path_tiers(measured, profile, link)  # L2 -> GPU over PCIe, not a host memcpy
        tiers.extend(measured)
        run_notes = list(run.notes) + notes + l2_notes
    if profile.copy is not None and not any(t.name == "l2" for t in tiers):
        tiers.append(Tier("h2d-pinned", profile.copy.bandwidth_bytes_per_s, profile.copy.latency_s, fitted=True,
                          source=f"profile: pinned host->device copy on {profile.copy.device}"))
    if not tiers:
        raise SpecError("nothing to check: give --run RUN_DIR or --tier NAME=BW,LATENCY (or a profile with a "
                        "measured copy tier)", "e.g. --tier l3=6.5GB/s,90us")
    names = [t.name for t in tiers]
    if len(set(names)) != len(names):
        raise SpecError(f"tier names repeat: {', '.join(names)}", "give each --tier a distinct name")
    ineq = Inequality(profile, model.bytes_per_token, model.layers, pipelined, kv=model)
    result_tiers = analyse_tiers(ineq, tiers, lengths=lengths, suffix=suffix_tokens, max_tokens=max_tokens)
    out = {"profile": {"name": profile.name, "kind": profile.kind, "model": profile.model, "device": profile.device,
                       "dtype": profile.dtype, "tokens_per_s": profile.tokens_per_s,
                       "reference_tokens": profile.reference_tokens, "fit": profile.fit.to_dict(),
                       "source": profile.source, "path": profile.path},
           "model": model.name, "bytes_per_token": model.bytes_per_token, "kv_dtype": model.dtype,
           "bytes_for_tokens": {str(n): model.bytes_for_tokens(n) for n in sorted(set(lengths))},
           "kv_layers": [g.to_dict() for g in model.layer_bytes()],
           "layers": model.layers, "pipelined": pipelined, "suffix_tokens": suffix_tokens, "max_tokens": max_tokens,
           "tiers": result_tiers, "verdict": overall_verdict(result_tiers)}
    # the TTFT recomputing a prefix costs, T(n) - T(0), on the grid of each tier's "curve" (for plots)
    cn = curve_tokens(max(max(lengths), profile.reference_tokens))
    out["recompute_curve"] = {"tokens": cn.tolist(), "seconds": ineq.recompute_saved(cn).tolist()}
    if run is not None:
        out["run"] = {"run_dir": run.path, "block_tokens": block_tokens, "notes": run_notes}
        if run.hits is not None:
            if not block_tokens:
                raise SpecError(f"{run.path}: block_tokens is in neither summary.json nor run.json config",
                                "re-run the replay with a current kvbench")
            out["run"]["hits"] = analyse_run_hits(ineq, tiers, run.hits, block_tokens)
    if trace_path:
        out["trace"] = analyse_trace_prefixes(ineq, tiers, trace_prefixes(trace_path))
    out = CheckResult(out).to_json()      # check.json's layout version (--json prints the same object)
    return out, profile, model, run, run_notes


COMMANDS = [check_cmd]
