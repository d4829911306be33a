"""``kvbench trace stats`` / ``gen`` / ``fit``: inspect, generate and model serving traces.

Also the shared trace options (``trace_options`` / ``trace_from_options``) that ``kvbench mrc`` and other
trace-reading commands use, so every command reads traces the same way.
"""

from __future__ import annotations

import functools

import click

from kvbench.cli._common import DURATION, OUTPUT, emit_json, fields_option, force_option, json_option, lazy_parser
from kvbench.stream.traces import DEFAULT_TRACE


def trace_options(f):
    """--format, --block-tokens, --time-unit, --field NAME=FIELD (repeatable), --sort, --limit."""
    from kvbench.stream.traces import format_names

    @click.option("--format", "fmt", default="auto", show_default=True,
                  help=f"Trace format: {', '.join(format_names())} (auto-detects from the first line).")
    @click.option("--block-tokens", type=int, default=None,
                  help="Tokens per KV block (default: the format's; needed for generic jsonl/csv).")
    @click.option("--time-unit", default=None, help="Unit of the timestamp field: ns, us, ms or s (generic formats).")
    @fields_option("--field", "field_map", multiple=True, metavar="NAME=FIELD", example="timestamp=ts",
                   parse=lazy_parser("kvbench.stream.traces", "parse_field_mapping"),
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
@click.option("--windows", type=int, default=10, show_default=True,
              help="Equal spans of time the stationarity test cuts the trace into.")
@json_option
def stats_cmd(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, windows, as_json):
    """Requests, tokens, distinct blocks, infinite-cache reuse, reuse times and arrivals of TRACE, and whether it
    is stationary (per window: new-block share, request rate, infinite-cache hit ratio; a trend test on each).

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
    from kvbench.stream.stationarity import stationarity, suffix_report

    st = stationarity(t, windows)
    s = trace_stats(t) | {"ids": chaining | {"chained_by_reader": chained},
                          "stationarity": st.to_dict() | {"suffix": suffix_report(t, st)}}
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
    _echo_stationarity(s["stationarity"])


def _echo_stationarity(st: dict) -> None:
    click.echo(f"windows      {st['windows']} x {(st['end_s'] - st['start_s']) / st['windows']:,.4g} s: "
               "new-block share / requests per s / infinite-cache hit ratio of the window (emptied at its start)")
    from kvbench.report.text import table

    rows = [[name, *(format(v, fmt) for v in st[key])] for name, key, fmt in (
        ("new share", "new_block_share", ".3f"), ("req/s", "request_rate", ".3g"), ("win hit", "window_hit_ratio", ".3f"))]
    for line in table(None, rows, "<" + ">" * (max(map(len, rows)) - 1), indent="  "):
        click.echo(line)
    click.echo(f"stationarity {st['verdict']}")
    from kvbench.stream.stationarity import suffix_line

    line = suffix_line(st["suffix"])
    if line:
        click.echo(f"  suffix     {line}")
    click.echo(f"  test       {st['test']}")


@click.command("gen")
@click.argument("kind", required=False, type=click.Choice(["chat", "agent", "docqa", "qa"]))
@click.option("-o", "--output", required=True, type=OUTPUT,
              help="Output file (Mooncake JSONL; gzipped when it ends in .gz).")
@click.option("--model-file", default=None,
              help="A workload model (TOML written by 'trace fit', or a preset of workloads/classes: "
                   "chat, qa, coding-agent, document-analysis, tool-agent) instead of KIND.")
@click.option("--duration", type=DURATION, default=None,
              help="With --model-file: the span to generate, e.g. 7d (default 1d; for a model trace fit "
                   "calibrated, the duration its gen check measured, [calibration] gen_duration_s).")
@click.option("--requests", "-n", type=int, default=None, help="KIND: number of requests (default 1000).")
@click.option("--rate", type=float, default=None,
              help="Mean arrival rate, requests/s (KIND: default 1; --model-file: default the model's).")
@click.option("--arrival", type=click.Choice(["poisson", "bursty"]), default="poisson", show_default=True)
@click.option("--burstiness", type=float, default=4.0, show_default=True,
              help="Bursty arrivals: coefficient of variation of session inter-arrival times.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--block-tokens", type=int, default=None, help="Tokens per KV block (default 512, or the model's).")
@fields_option("--set", "overrides", multiple=True, metavar="PARAM=VALUE", example="turns_mean=10",
               parse=lambda items: parse_set(items),
              help="Override a kind parameter, e.g. --set turns_mean=10 --set system_tokens=4000.")
@force_option
@json_option
def gen_cmd(kind, output, model_file, duration, requests, rate, arrival, burstiness, seed, block_tokens, overrides,
            as_json):
    """Generate a seeded synthetic trace in Mooncake format: from a workload model (--model-file, any horizon,
    streamed) or of a simple KIND (chat, agent, docqa, qa; a number of requests)."""
    from kvbench.errors import UsageError

    if (kind is None) == (model_file is None):
        raise UsageError("give either KIND or --model-file", "e.g. kvbench trace gen --model-file chat --duration 7d "
                         "-o week.jsonl.gz, or kvbench trace gen chat -n 1000 -o chat.jsonl")
    if model_file is not None:
        bad = [o for o, v in (("--requests", requests), ("--set", overrides)) if v]
        if bad:
            raise UsageError(f"{', '.join(bad)} applies to KIND, not to --model-file",
                             "change the model file (or use --duration/--rate) instead")
        _gen_model(model_file, output, duration, rate, seed, block_tokens, as_json)
        return
    if duration is not None:
        raise UsageError("--duration applies to --model-file", "give --requests N with KIND")
    _gen_kind(kind, output, 1000 if requests is None else requests, 1.0 if rate is None else rate, arrival,
              burstiness, seed, 512 if block_tokens is None else block_tokens, overrides, as_json)


def _gen_model(model_file, output, duration, rate, seed, block_tokens, as_json):
    import time
    from dataclasses import replace

    from kvbench.stream.synth import Generator, gen_duration, gen_meta, parse_gen, write_stream
    from kvbench.stream.workload import load_model_file

    model = load_model_file(model_file)
    if block_tokens is not None:
        model = replace(model, block_tokens=int(block_tokens))
    checked = model.calibration.gen_duration_s if model.calibration is not None else None
    duration = gen_duration(duration, model)
    t = time.perf_counter()
    gen = Generator(model, duration_s=duration, rate=rate, seed=seed)
    from kvbench.engine.safety import check_free_space

    gz = str(output).endswith(".gz")         # gzip keeps about a sixth of these lines (estimate)
    check_free_space(output, int(gen.expected_bytes / (6 if gz else 1)),
                     f"an estimated {gen.expected_requests:,.0f} requests: give a shorter --duration or a lower "
                     "--rate" + ("" if gz else ", or write .jsonl.gz"))
    from kvbench.progress import trace_batches
    written = write_stream(trace_batches(gen.batches(path=str(output)), "trace gen", duration), output)
    src = parse_gen(f"gen:{model_file},duration={duration:g}s,seed={seed}" + (f",rate={rate:g}" if rate else ""))
    summary = written | {"model": gen.model.to_dict(), "generated": gen_meta(src, gen.model),
                         "duration_s": duration, "seed": seed, "rate": gen.model.arrivals.rate,
                         "block_tokens": gen.model.block_tokens, "elapsed_s": time.perf_counter() - t}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"wrote {written['path']}: {written['requests']:,} requests of {gen.model.name} over "
               f"{duration:,.0f} s at {gen.model.arrivals.rate:g} req/s (seed {seed}), "
               f"{written['block_references']:,} block references of {gen.model.block_tokens} tokens"
               + ("" if gen.model.block_tokens == 512 else
                  f" (read it with --block-tokens {gen.model.block_tokens}: Mooncake's default is 512)"))
    if checked and rate is None and abs(duration - checked) > 1e-6 * checked:
        click.echo(f"note: trace fit checked this model's DWPD on {_dur_s(checked)} (its default here); "
                   + ("a shorter trace's steady write rate is noisier (one trace of the source's length strays "
                      "up to " + (f"{model.calibration.source_noise_max:.0%}" if model.calibration.source_noise_max
                                  is not None else "n/a") + ")" if duration < checked else
                      "a longer one carries the model's long run beyond what the check measured"))


def parse_set(overrides) -> dict:
    """``--set PARAM=VALUE`` (repeatable) -> {param: number}: a generator kind's parameters (KindParams)."""
    from dataclasses import fields

    from kvbench.errors import UsageError
    from kvbench.spec.fields import parse_fields
    from kvbench.stream.generators import KindParams

    types = {f.name: f.type for f in fields(KindParams)}
    kw = {}
    for name, value in parse_fields(overrides, option="--set", known=types, noun="parameter", error=UsageError,
                                    fix="write PARAM=VALUE, e.g. --set turns_mean=10").items():
        conv = float if types.get(name) in ("float", float) else int
        try:
            kw[name] = conv(value)
        except ValueError:
            raise UsageError(f"--set {name}: {value!r} is not a number", "give a number") from None
    return kw


def _gen_kind(kind, output, requests, rate, arrival, burstiness, seed, block_tokens, overrides, as_json):
    from kvbench.stream.generators import GenSpec, generate, override_params, spec_dict, write_trace
    from kvbench.stream.stats import trace_stats
    from kvbench.stream.traces import read_trace

    kw = parse_set(overrides)
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


@click.command("fit")
@click.argument("trace", default=DEFAULT_TRACE)
@trace_options
@click.option("-o", "--output", required=True, type=OUTPUT, help="The model file to write (TOML).")
@click.option("--defaults", default=None,
              help="Model (preset name or TOML) whose values stand in for what the trace cannot show "
                   "(default: the built-in defaults).")
@click.option("--name", default=None, help="Name of the fitted model (default fit-<trace>).")
@click.option("--seed", type=int, default=0, show_default=True, help="First seed of the regenerated traces.")
@click.option("--seeds", type=int, default=3, show_default=True,
              help="Regenerated traces the goodness of fit is averaged over.")
@click.option("--calibrate/--no-calibrate", default=True, show_default=True,
              help="Calibrate the rate, prompt lengths, turns and think time on generated traces so they carry "
                   "TRACE's steady write rate (DWPD); --no-calibrate keeps the structural fit (seconds faster).")
@click.option("--returns-prior", "returns_prior", default=None, metavar="TRACE",
              help="A longer trace (>= 6 h) of the same service whose returns (sessions coming back hours later) "
                   "are pooled into the censored fit of a TRACE too short to show them; read with its own "
                   "format detected and TRACE's block size.")
@force_option
@json_option
def fit_cmd(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit, output, defaults, name, seed, seeds,
            calibrate, returns_prior, as_json):
    """Fit a workload model to TRACE, write it to MODEL.toml and print the goodness of fit.

    Goodness: traces generated from the fitted model over TRACE's span, at its rate, against TRACE: the exact
    LRU hit-ratio curves (mean and max absolute error over capacities from one block to the working set), the
    steady write rate (DWPD) at the capacities both turn over, and the Kolmogorov-Smirnov distance between the
    reuse-time distributions. After the structural fit the rate and prompt lengths are calibrated so the
    generated traces carry TRACE's load, and the turns per visit and think time (which a window censors) are
    searched for its write rate at every capacity; the model file records the factors and the errors before and
    after. A parameter TRACE cannot show (a weekly cycle in an hour) keeps its default, with a warning naming it.
    """
    from pathlib import Path

    from kvbench.engine.safety import atomic_output
    from kvbench.errors import UsageError
    from kvbench.stream.fit import fit_and_score
    from kvbench.stream.workload import load_model_file, to_toml

    if seeds < 1:
        raise UsageError(f"--seeds must be >= 1, got {seeds}", "give e.g. --seeds 3")
    from kvbench.stream.synth import require_whole_stream

    require_whole_stream(trace, "trace fit", "sessions, turns and prompt lengths are recovered from whole prefixes")
    out = Path(output)
    tr = trace_from_options(trace, fmt, block_tokens, time_unit, field_map, sort_time, limit)
    prior = None
    if returns_prior is not None:
        from kvbench.stream.fit import returns_prior as prior_of

        prior = prior_of(trace_from_options(returns_prior, "auto", tr.block_tokens, None, (), sort_time, None))
    from kvbench.progress import Line

    with Line("trace fit: scoring regenerated traces", None, "traces") as line:
        res, good = fit_and_score(tr, load_model_file(defaults) if defaults else None, name=name, seeds=seeds,
                                  seed=seed, progress=lambda done, total: line.update(done, total=total),
                                  calibrate=calibrate, returns_prior=prior)
    gen_lines = (_gen_lines(good["gen_check"], good.get("source_noise"), out,
                            res.observed["stationarity"]["stationary"]) if good.get("gen_check") is not None else [])
    header = (f"Workload model fitted by kvbench trace fit to {tr.path}\n"
              f"({tr.n_requests} requests over {tr.duration_s:.0f} s, {tr.block_tokens}-token blocks).\n"
              f"Goodness over {seeds} regenerated traces: hit-ratio curve MAE {good['curve_mae']:.4f}, max error "
              f"{good['curve_max_error']:.4f}; reuse-time KS distance "
              + (f"{good['reuse_time_ks']:.4f}" if good["reuse_time_ks"] is not None else "n/a") + ".\n"
              + (f"Steady write rate (DWPD) at the capacities both turn over: {_dwpd_line(good)}.\n"
                 if good.get("dwpd_error_mean") is not None else "")
              + (f"{'Calibrated: ' + _calibration_line(res.model.calibration)}.\n" if res.model.calibration else "")
              + "".join(f"{label.capitalize()}: {text}.\n" for label, text in gen_lines)
              + "".join(f"warning: {w}\n" for w in res.warnings))
    with atomic_output(out) as tmp:
        tmp.write_text(to_toml(res.model, header=header.rstrip("\n")))
    result = {"trace": tr.path, "output": str(out), "model": res.model.to_dict(), "fit": good,
              "warnings": res.warnings, "observed": res.observed}
    if as_json:
        emit_json(result)
        return
    m = res.model
    a, s, p = m.arrivals, m.sessions, m.prompts
    click.echo(f"fitted {m.name} to {tr.path}: {tr.n_requests:,} requests over {tr.duration_s:,.0f} s, "
               f"{res.observed['sessions']:,} sessions recovered")
    click.echo(f"arrivals   {a.rate:.4g} req/s, burstiness {a.burstiness:.3g}, diurnal amplitude "
               f"{a.diurnal_amplitude:.2g} (peak {a.peak_hour:.1f} h), weekend x{a.weekend_factor:.2g}")
    if "returns_fit" in res.observed:
        click.echo(f"returns    {res.observed['returns_fit']['line']}")
    if "returns_fit_with_prior" in res.observed:
        click.echo(f"with prior {res.observed['returns_fit_with_prior']['line']}")
    click.echo(f"sessions   {s.turns_mean:.3g} turns/visit, think {s.think_time_s:.3g} s (sigma {s.think_sigma:.2g}), "
               f"return p {s.return_probability:.3g} after {s.return_time_s:.3g} s")
    click.echo(f"prompts    system {p.system_probability:.2g} x {p.system_prompts} ({p.system_tokens:.0f} tok), "
               f"documents {p.document_probability:.2g} x {p.documents} ({p.document_tokens:.0f} tok), first "
               f"{p.first_user_tokens:.0f}, turn +{p.user_tokens:.0f}, output {p.output_tokens:.0f} tok")
    click.echo(f"fit        hit-ratio curve MAE {good['curve_mae']:.4f}, max error {good['curve_max_error']:.4f} "
               f"(capacities 1-{good['capacity_range_blocks'][1]:,.0f} blocks); reuse-time KS "
               + (f"{good['reuse_time_ks']:.4f}" if good["reuse_time_ks"] is not None else "n/a")
               + f" (mean of {seeds} seeds; {res.observed['length_distributions']} lengths)")
    if good.get("dwpd_error_mean") is not None:
        click.echo(f"fit DWPD   steady write rate (DWPD) at the capacities both turn over: {_dwpd_line(good)}; "
                   "the goal is within 5%")
    if m.calibration is not None:
        click.echo(f"calibrated {_calibration_line(m.calibration)}")
    column = {"gen check": "gen check  ", "gen goal": "gen goal   ", "gen noise": "gen noise  "}   # as the lines above
    for label, text in gen_lines:
        click.echo(column[label] + text)
    for w in res.warnings:
        click.echo(f"warning: {w}")
    click.echo(f"wrote {out}")


def _dwpd_line(good: dict) -> str:
    line = (f"mean error {good['dwpd_error_mean']:.1%}, max {good['dwpd_error_max']:.1%} (signed mean "
            f"{good['dwpd_signed_mean']:+.1%}) per generated trace as long as the trace")
    sm = good.get("dwpd_error_of_seed_mean")
    if sm:
        line += f"; their mean write rate: mean error {sm['mean']:.1%}, max {sm['max']:.1%}"
    return line


def _gen_lines(g: dict, noise: dict | None, out, stationary: bool = True) -> list[tuple[str, str]]:
    """What trace gen of the fitted model writes by default, against TRACE (``fit.gen_check``), as labelled
    lines: the check's figures; the goal's verdict (``fit.gen_verdict``: met, unattainable on a source this short,
    or missed, with why; a trace that is not stationary says so, its warning says why); and the source's own
    noise, with what an exact model would score where the goal is not met."""
    from kvbench.stream.fit import gen_verdict

    def pct(v):
        return "n/a" if v is None else f"{v:.1%}"
    sm = g.get("dwpd_error_of_seed_mean")
    n = g["seeds"]
    seeds = f"--seed {g['first_seed']}" + (f"..{g['first_seed'] + n - 1}" if n > 1 else "")
    ex = noise.get("exact_model") if noise is not None else None
    verdict = gen_verdict(g, ex)
    check = (f"kvbench trace gen --model-file {out} (default duration {_dur_s(g['duration_s'])}), {seeds}: DWPD "
             f"error per trace mean {pct(g['dwpd_error_mean'])}, max {pct(g['dwpd_error_max'])} (worst trace "
             f"{pct(g['dwpd_error_worst'])}), hit-ratio curve MAE {g['curve_mae']:.4f}"
             + (f"; their mean write rate max {pct(sm['max'])}" if sm else ""))
    goal = {"met": "met", "unattainable": "not attainable on a source this short",
            "missed": "NOT met"}[verdict["verdict"]] + " (every trace within 5% at every capacity, curve MAE within 0.02)"
    if verdict["verdict"] != "met":
        goal += ("" if ex is None else f": {verdict_reason(g, verdict)}") + (
            "" if stationary else "; the trace is not stationary (warning below)")
    lines = [("gen check", check), ("gen goal", goal)]
    if noise is not None:
        line = (f"a trace of the source's length drawn from the model strays up to {pct(noise['max_error_median'])} "
                f"from the model's W(C) (median of {noise['seeds']} draws; 90th percentile "
                f"{pct(noise['max_error_p90'])})")
        if ex is not None and verdict["verdict"] != "met":
            line += "; " + exact_model_words(g, ex, verdict)
        lines.append(("gen noise", line))
    return lines


def exact_model_words(g: dict, ex: dict, verdict: dict) -> str:
    """What the gen check ``g`` could find within the goal: the traces' own spread about their mean, and what an
    exact model would score (``fit.exact_model_score``) against what the fit scores on the trace."""
    from kvbench.stream.fit import DWPD_GOAL

    by = ex["within_goal_share_by_source"]
    spread = g.get("within_goal_of_their_mean")
    return ((f"these traces' own spread leaves {spread} of {g['seeds']} within {DWPD_GOAL:.0%} of their mean W(C) "
             "(a model whose mean were the trace's exactly would find about as many within); " if spread is not None
             else "")
            + f"were the trace exactly one of the model's draws, {ex['within_goal_share']:.0%} of the check's traces "
            f"would be within {DWPD_GOAL:.0%} at every capacity ({min(by):.0%}-{max(by):.0%} by draw, every trace on "
            f"{verdict['draws_meeting']} of {len(by)} draws; median max error {ex['max_error_median']:.1%}); on the "
            f"trace {verdict['share']:.0%}, no better than on {verdict['rank']:.0%} of the draws")


def verdict_reason(g: dict, verdict: dict) -> str:
    """Why the gen check's goal is unattainable or missed (``fit.gen_verdict`` beside an exact model's score)."""
    from kvbench.stream.fit import CURVE_MAE_GOAL, RANK_FLOOR

    return ("the fit comes as close as an exact model does" if verdict["verdict"] == "unattainable" else
            "the model misses, not only the source's length" if verdict["rank"] < RANK_FLOOR else
            "the hit-ratio curve misses its goal" if g["curve_mae"] > CURVE_MAE_GOAL else
            "an exact model meets it on most sources like this one: the model misses")


def _dur_s(s: float) -> str:
    for unit, size in (("d", 86_400.0), ("h", 3_600.0), ("min", 60.0)):
        if s >= size:
            return f"{s / size:.4g} {unit}"
    return f"{s:.4g} s"


def _calibration_line(c) -> str:
    """One line: what the calibration scaled and the errors before and after it."""
    def pct(v):
        return "n/a" if v is None else f"{v:.1%}"
    return (f"rate x{c.rate_factor:.3g}, own text lengths x{c.length_factor:.3g} (demand, {c.seeds} generated "
            f"traces from seed {c.first_seed}), turns per visit x{c.turns_factor:.3g}, think time "
            f"x{c.think_factor:.3g} (reuse search); DWPD error mean {pct(c.dwpd_error_mean_before)} -> "
            f"{pct(c.dwpd_error_mean_after)}, max {pct(c.dwpd_error_max_before)} -> {pct(c.dwpd_error_max_after)}, "
            f"hit-ratio curve MAE {c.curve_mae_before:.4f} -> {c.curve_mae_after:.4f}")


GROUP = "trace"
COMMANDS = [stats_cmd, gen_cmd, fit_cmd]
