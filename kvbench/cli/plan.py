"""``kvbench plan``: capacity per tier, DWPD, WAF, lifetime and the bill for a trace (and optionally a run)."""

from __future__ import annotations

import math
from pathlib import Path

import click

from kvbench.cli._common import (DURATION, IO_SIZE, SIZE, WARMUP, OutputParam, emit_json, fields_option, force_option,
                                 json_option, lazy_parser, parse_admissions)
from kvbench.errors import UsageError
from kvbench.units import MISSING, format_bytes, format_lasts as _lasts, format_rate, format_residence, format_years


def _read_run(run_dir: str):
    """The replay run a plan measures against, through the result contract (one reader of a run folder)."""
    from kvbench.metrics.results import read_run

    return read_run(run_dir, parts=False).replay


def _run_iolog_waf(run_dir: str, capacity: float | None, op: float, erase_block: int, exported: str | None = None):
    """Device WAF of the run's own write stream: its exported fio iolog through the FTL model (None if absent)."""
    from kvbench.analysis import ftl

    logs = sorted(Path(run_dir).glob("*.iolog")) + sorted(Path(run_dir).glob("*iolog*.txt"))
    if exported and Path(exported).is_file():
        logs.insert(0, Path(exported))
    if not logs:
        return None
    ops, offsets, lengths = ftl.read_iolog(logs[0], largest=True)
    writes = ops == ftl.OP_WRITE
    if not writes.any():
        return None
    top = max(float(capacity or 0), float((offsets + lengths).max()))
    # 16 KiB pages, coarser to keep the model small, the erase unit the one given
    page, block_pages = ftl.erase_unit_pages(erase_block, 16 << 10,
                                             too_many=lambda pg: -(-int(top) // pg) * (1 + op) > (1 << 22))
    pages = -(-int(top) // page)
    blocks_needed = max(64, -(-pages // block_pages))
    cfg = ftl.FtlConfig(user_bytes=blocks_needed * block_pages * page, page_size=page, op=op,
                        block_pages=block_pages).validate()
    r = ftl.simulate(cfg, extents=ftl.bytes_to_pages(ops, offsets, lengths, page), writes=4.0, warmup=0.5)
    return r.waf, f"FTL model fed the run's I/O ({logs[0].name}), op {op:g}, {format_bytes(erase_block)} erase units"


@click.command("plan")
@click.option("--trace", "trace_path", required=True, help="Trace file or built-in trace name.")
@click.option("--model", required=True, help="Model preset (KV bytes per token).")
@click.option("--target-hit", "targets", type=float, multiple=True,
              help="Target hit ratio, as a fraction of the infinite-cache hit ratio (repeatable; default 0.9, "
                   "0.95, 0.99; the first is the headline).")
@click.option("--absolute", is_flag=True, help="Targets are absolute hit ratios, not fractions of the infinite one.")
@click.option("--retention", type=DURATION, default=None,
              help="Keep KV at least this long (e.g. 1h): the tier is the smallest whose residence time reaches it.")
@click.option("--capacities", default=None, metavar="LIST",
              help="Capacities for the steady-state capacity curve, e.g. 1TiB,4TiB,16TiB (default: a log grid).")
@click.option("--sweep", default="10m,1h,6h,1d,7d", show_default=True, metavar="LIST",
              help="Retentions for the capacity/DWPD-vs-retention sweep (comma list; empty: none).")
@click.option("--rate", type=float, default=None, help="Requests per second to plan for (default: the trace's).")
@click.option("--rate-model", type=click.Choice(["compress", "replicate"]), default="compress", show_default=True,
              help="compress: the same requests arrive faster; replicate: independent copies of the users.")
@fields_option("--deployment", default=None, metavar="SPEC",
               example="gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5",
               parse=lazy_parser("kvbench.analysis.deployment", "parse_deployment"),
              help="Scale the workload to a server: gpus=G,drives=D,drive_capacity=CAP,utilization=U (with "
                   "--profile): the GPUs compute U x the profile's prefill tokens/s of missed tokens.")
@click.option("--per-gpu-capacity", type=SIZE, default=None,
              help="The fixed-capacity question: KV storage per GPU (e.g. 16TB): the DWPD its drives see, how long KV "
                   "is kept and the hit ratio that buys (with --profile; a deployment of 1 GPU and 1 drive of it).")
@click.option("--utilization", type=float, default=0.5, show_default=True,
              help="With --per-gpu-capacity: the share of time the GPU prefills.")
@click.option("--admitted", type=float, default=1.0, show_default=True,
              help="With --per-gpu-capacity: the share of computed blocks written (1: write-through).")
@click.option("--sweep-profiles", is_flag=True,
              help="With --per-gpu-capacity or --deployment: the DWPD at that capacity per GPU for every shipped "
                   "compute profile (model x GPU x prefill rate).")
@click.option("--load-tier", default=None, metavar="NAME=BW,LAT",
              help="The SSD tier's load speed (e.g. l3=6.5GB/s,90us): the bill then also counts only the hits whose "
                   "load beats recomputing that prefix (usd_per_day_loading_wins).")
@click.option("--run", "run_dir", type=click.Path(file_okay=False), default=None,
              help="A replay run folder: its measured device WAF (SMART/OCP or its I/O through the FTL model).")
@click.option("--prices", default="2025-h2", show_default=True, help="Price preset name or TOML path.")
@fields_option("--price", "price_overrides", multiple=True, metavar="KEY=VALUE", example="dram=6",
               parse=lazy_parser("kvbench.analysis.cost", "parse_price_overrides"),
              help="Override a price: dram=6, gpu=2.5, ssd.qlc=0.05, ssd.qlc.reference_waf=4.")
@click.option("--profile", "profile_name", default=None, help="Compute profile (prefill rate) name or path.")
@click.option("--recompute-tokens-per-s", type=float, default=None, help="Prefill rate when no profile is given.")
@click.option("--layout", type=click.Choice(["slot", "log"]), default="slot", show_default=True,
              help="L3 block-store layout for the device WAF model.")
@click.option("--ssd-op", type=float, default=0.07, show_default=True, help="Drive over-provisioning (FTL model).")
@click.option("--erase-block", type=IO_SIZE, default="256MiB", show_default=True, help="Erase unit (FTL model).")
@click.option("--waf", type=float, default=None, help="The workload's device WAF (skips the FTL model).")
@click.option("--dram", "dram_bytes", type=SIZE, default=None, help="Fixed L2 DRAM size (default: the knee).")
@click.option("--ssd-class", default=None, help="SSD class from the price preset (default: cheapest per day).")
@click.option("--store-fill", type=float, default=1.0, show_default=True, help="Fraction of the SSD the store uses.")
@click.option("--warmup", type=WARMUP, default=0.0, show_default=True,
              help="Requests that only warm the cache, left out of hit ratios, steady writes and the stationarity "
                   "test: a fraction of them (0.5) or a time on the trace's clock (136.3s: those before it, e.g. "
                   "a stationary tail's start from kvbench trace stats).")
@click.option("--block-tokens", type=int, default=None, help="Override the trace's tokens per block.")
@click.option("--report", "report_path", type=OutputParam(keep=("auto",)), default=None, is_flag=False,
              flag_value="auto", metavar="[HTML]",
              help="Also write the plan as a run folder under --results and a self-contained HTML report "
                   "(default reports/<run>.html) whose first section states the answer.")
@click.option("--results", "results_root", default="results", show_default=True, help="Folder for the run folder.")
@fields_option("--admission", default=None, metavar="LIST", parse=parse_admissions("--admission"),
               example="tinylfu:width=0.5", sep=":",
              help="Admission policies to trade off at the planned capacity (the first of --capacities, else the "
                   "headline target's), e.g. all,second-access,tinylfu,prefix-depth:depth=8,threshold:min_blocks=4: "
                   "hit ratio, steady write rate, DWPD and cost per day for each.")
@click.option("--placement", default=None, metavar="RULE",
              help="Device WAF of the L3 store's simulated writes with write streams (FDP) under a placement rule "
                   "(lifetime, age) against one stream, at the planned capacity.")
@click.option("--streams", type=int, default=2, show_default=True, help="Write streams for --placement.")
@fields_option("--fdp", "fdp", default=None, metavar="handles=N,ru=SIZE[,rule=R]", convert=True,
               parse=lambda value: _fdp_spec(value), example="handles=4,ru=1GiB",
              help="NVMe FDP: device WAF, NAND writes and rating-equivalent DWPD of the picked class's store with N "
                   "placement handles (reclaim units of SIZE; rule lifetime or age) and without; with --run, the "
                   "WAF the drive's FDP statistics measured beside them.")
@force_option
@json_option
def plan_cmd(trace_path, model, targets, absolute, retention, capacities, sweep, rate, rate_model, deployment,
             per_gpu_capacity, utilization, admitted, sweep_profiles, load_tier, run_dir, prices, price_overrides, profile_name, recompute_tokens_per_s, layout, ssd_op, erase_block,
             waf, dram_bytes, ssd_class, store_fill, warmup, block_tokens, report_path, results_root, admission, placement,
             streams, fdp, as_json):
    """Plan DRAM and SSD for a trace at steady state: hit ratio, write rate, residence time and DWPD against
    capacity; the tier that keeps KV for a retention; per drive class the capacity that meets the hit target
    and the rating (which binds), lifetime, SSD per GB of DRAM and the cost per day against recomputing."""
    from kvbench.stream.traces import read_trace

    out = plan_result(lambda: read_trace(trace_path, compact=True), model, targets, absolute, retention, capacities,
                      sweep, rate, rate_model, deployment, per_gpu_capacity, utilization, admitted, sweep_profiles,
                      load_tier, run_dir, prices, price_overrides, profile_name, recompute_tokens_per_s, layout,
                      ssd_op, erase_block, waf, dram_bytes, ssd_class, store_fill, warmup, block_tokens, admission,
                      placement, streams, fdp)
    if report_path:
        out["run_dir"], out["report"] = _write_report(out, report_path, results_root)
    if as_json:
        emit_json(out)
        return
    _print(out)


def plan_result(read, model, targets=(), absolute=False, retention=None, capacities=None, sweep="10m,1h,6h,1d,7d",
                rate=None, rate_model="compress", deployment=None, per_gpu_capacity=None, utilization=0.5,
                admitted=1.0, sweep_profiles=False, load_tier=None, run_dir=None, prices="2025-h2",
                price_overrides=(), profile_name=None, recompute_tokens_per_s=None, layout="slot", ssd_op=0.07,
                erase_block=256 << 20, waf=None, dram_bytes=None, ssd_class=None, store_fill=1.0, warmup=0.0,
                block_tokens=None, admission=None, placement=None, streams=2, fdp=None, *, exact=None,
                step=None) -> dict:
    """``kvbench plan --json`` (its options by their parameter names) of the trace ``read`` (a ``Trace``, or a
    function reading it once the options are checked). ``exact``: the trace's exact LRU profile when the caller
    has it (``kvbench run``'s job), used where the plan would compute the same (no warm-up, no --block-tokens);
    ``step(name)``: told as each stage begins, in place of the plan's own live line."""
    from contextlib import nullcontext
    from dataclasses import replace

    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.plan import PlanOptions, build_plan
    from kvbench.spec.models import load_model
    from kvbench.units import parse_duration, parse_size

    spec = load_model(model)
    dep = None
    if deployment is not None:
        from kvbench.analysis.deployment import parse_deployment

        dep = parse_deployment(deployment)
        if not (profile_name or recompute_tokens_per_s):
            raise UsageError("--deployment needs a prefill rate", "give --profile NAME (or --recompute-tokens-per-s)")
    dep = _per_gpu_deployment(dep, per_gpu_capacity, utilization, sweep_profiles,
                              bool(profile_name or recompute_tokens_per_s))
    caps = tuple(float(parse_size(x.strip(), what="--capacities")) for x in (capacities or "").split(",") if x.strip())
    sweep_s = tuple(parse_duration(x.strip(), what="--sweep") for x in (sweep or "").split(",") if x.strip())
    trace = read() if callable(read) else read     # a key-sampled stream keeps only its sampled requests
    if block_tokens:
        trace = replace(trace, block_tokens=int(block_tokens))
    from kvbench.analysis.curves.profile import warmup_fraction

    warmup = warmup_fraction(trace, warmup)        # a warm-up by time: the fraction of requests before it
    block_bytes = spec.block_bytes(trace.block_tokens)
    price_table = load_prices(prices, price_overrides)
    if profile_name and recompute_tokens_per_s:
        raise UsageError("--profile and --recompute-tokens-per-s are exclusive", "give one prefill rate source")
    prof = None
    if profile_name:
        from kvbench.compute.profile import load_profile

        prof = load_profile(profile_name)
        # every computed token writes its KV: a rate that counts cache hits is converted, or refused
        tokens_per_s = prof.computed_tokens_per_s("the plan's prefill and write rate")
        compute = {"profile": prof.name, "kind": prof.kind, "device": prof.device, "tokens_per_s": tokens_per_s,
                   "source": prof.source, "counts_cache_hits": prof.counts_cache_hits,
                   "hit_fraction": prof.hit_fraction}
    else:
        tokens_per_s = recompute_tokens_per_s or 10_000.0
        compute = {"profile": None, "kind": "rate", "tokens_per_s": tokens_per_s,
                   "source": "--recompute-tokens-per-s" if recompute_tokens_per_s else
                   "assumption: 10,000 prefill tokens/s per GPU (give --profile or --recompute-tokens-per-s)"}
    waf_source = "given (--waf)"
    measured = None
    if run_dir:
        from kvbench.analysis.waf import from_summary

        replay = _read_run(run_dir)
        l3 = replay.tiers.get("l3")
        l3_cap = l3.capacity_bytes if l3 is not None else None
        layers = from_summary(replay.summary.data)
        if waf is None and layers.device is not None and layers.device_waf_source:
            waf, waf_source = layers.device, f"measured in the run ({layers.device_waf_source})"
        elif waf is None:
            waf, waf_source = (_run_iolog_waf(run_dir, l3_cap, ssd_op, erase_block, replay.export_iolog)
                               or (None, waf_source))
        if l3 is not None and l3.layout in ("slot", "log"):
            layout = l3.layout
        # the summary counts every simulated request; requests_issued only those whose I/O ran
        measured = {"run": str(run_dir), "requests_replayed": replay.requests_issued,
                    "run_status": replay.summary.status, "l3_capacity_bytes": l3_cap,
                    "l3_write_bytes": l3.full_write_bytes if l3 is not None else None,
                    "write_amplification": layers.to_dict(), "waf": waf, "waf_source": waf_source,
                    "device_counters": replay.summary.data.get("device_counters"),
                    "note": "what the replay measured; the plan's write rates are the whole trace's steady state"}
    opts = PlanOptions(targets=tuple(targets) or (0.9, 0.95, 0.99), relative=not absolute, retention_s=retention,
                       rate=rate, rate_model=rate_model, warmup=warmup, layout=layout, ssd_op=ssd_op,
                       erase_block_bytes=erase_block, store_fill=store_fill, dram_bytes=dram_bytes,
                       ssd_class=ssd_class, waf=waf, waf_source=waf_source, capacities=caps, sweep=sweep_s,
                       deployment=dep, load_tier=_load_tier(load_tier),
                       admission=_admission_list(admission), placement=placement, streams=streams,
                       fdp=fdp)
    from kvbench.progress import Steps

    with Steps("plan", [None] * (1 + len(opts.targets))) if step is None else nullcontext() as meter:
        # ETA: the mean of the stages done
        out = build_plan(trace, block_bytes=block_bytes, prices=price_table, tokens_per_s=tokens_per_s, options=opts,
                         bytes_per_token=spec.stored_bytes_per_token(trace.block_tokens), compute=compute,
                         model=spec.name, measured=measured, profile=prof, kv=spec,
                         step=meter.start if step is None else step, exact=exact if not block_tokens else None)
    if dep is not None:
        from kvbench.analysis.fixed_capacity import for_plan

        out["fixed_capacity"] = for_plan(out, capacity_per_gpu_bytes=dep.drives * dep.drive_capacity_bytes / dep.gpus,
                                         utilization=dep.utilization, tokens_per_s_per_gpu=tokens_per_s,
                                         compute=compute, admission=admitted, store_fill=store_fill,
                                         sweep=sweep_profiles, block_tokens=trace.block_tokens)
        out["answer"]["sentences"].append(out["fixed_capacity"]["sentence"])
    if run_dir:
        out["run"] = str(run_dir)
        out["write_amplification"] = measured["write_amplification"]
    from kvbench.metrics.results import PlanResult

    out = PlanResult(out).to_json()       # plan.json's layout version (--json prints the same object)
    return out


def _per_gpu_deployment(dep, per_gpu_capacity, utilization, sweep_profiles, has_rate):
    """--per-gpu-capacity C is a deployment of one GPU and one drive of C; --sweep-profiles needs one of the two."""
    from kvbench.analysis.deployment import Deployment

    if per_gpu_capacity is None:
        if sweep_profiles and dep is None:
            raise UsageError("--sweep-profiles needs a capacity per GPU", "give --per-gpu-capacity 16TB (or --deployment)")
        return dep
    if dep is not None:
        raise UsageError("--per-gpu-capacity and --deployment are exclusive",
                         "give one: --per-gpu-capacity C is --deployment gpus=1,drives=1,drive_capacity=C,utilization=U")
    if not has_rate:
        raise UsageError("--per-gpu-capacity needs a prefill rate", "give --profile NAME (or --recompute-tokens-per-s)")
    if not 0 < utilization <= 1:
        raise UsageError(f"--utilization {utilization:g} is not in (0, 1]", "give the share of time the GPU prefills")
    if not float(per_gpu_capacity) > 0:
        raise UsageError("--per-gpu-capacity must be > 0", "give e.g. --per-gpu-capacity 16TB")
    return Deployment(gpus=1.0, drives=1.0, drive_capacity_bytes=float(per_gpu_capacity), utilization=utilization)


def _write_report(out: dict, report_path: str, results_root: str) -> tuple[str, str]:
    """A run folder holding the plan (plan.json, retention.json) and its HTML report."""
    import sys

    from kvbench.metrics.run import RunDir
    from kvbench.report import build_report, default_report_path

    rd = RunDir.create("plan", {"trace": out["trace"], "model": out["model"], "argv": sys.argv[1:]}, root=results_root)
    rd.write_json("plan.json", out)
    rd.write_json("retention.json", out["retention_sweep"])
    rd.write_summary({"answer": out["answer"]}, status="complete")
    dest = default_report_path([rd.path]) if report_path == "auto" else Path(report_path)
    path, _ = build_report([rd.path], dest, title=f"kvbench plan: {Path(out['trace']).name}, {out['model']}")
    return str(rd.path), str(path)


def _load_tier(text):
    if not text:
        return None
    from kvbench.analysis.recompute import parse_tier

    return parse_tier(text if "=" in text else f"l3={text}")


def _admission_list(text) -> tuple:
    if text is None:
        return ()
    from kvbench.analysis.admission import parse_policies

    return parse_policies(text)


def _money(x) -> str:
    return "inf" if x is None or x == float("inf") else f"${x:,.2f}"


def _num(x, fmt=".3g") -> str:
    return MISSING if x is None else format(x, fmt)


def _life(years, fmt: str, unit: str = "") -> str:
    """A lifetime in a table cell: the number (``unit`` after it), "no writes: unbounded" when nothing is written,
    "n/a" when not stated; never "inf"."""
    return format_years(years) if years is None or math.isinf(years) else format(years, fmt) + unit


def write_policy_line(wp: dict) -> str:
    """The write-policy comparison, named by the tiers it simulated (the hit target's L2 and L3, not the drives
    endurance buys: a DWPD of that L3, beside the plan's own at the bought capacity, would read as a
    contradiction without it) and as each policy's writes against the first's."""
    first = next(iter(wp.values()))
    l2 = f"L2 {format_bytes(first['l2_bytes'])} + " if first.get("l2_bytes") else ""
    ref = first["write_bytes_per_s"] if first["steady_state"] else None
    parts = []
    for i, (name, r) in enumerate(wp.items()):
        if not r["steady_state"]:
            parts.append(f"write-{name}: L3 never evicts within the trace")
            continue
        vs = f", {r['write_bytes_per_s'] / ref:.2f}x write-{next(iter(wp))}'s" if i and ref else ""
        parts.append(f"write-{name} {format_rate(r['write_bytes_per_s'])} ({r['dwpd']:.3g} DWPD of that L3{vs})")
    return (f"write policy at the hit target's tiers ({l2}L3 {format_bytes(first['l3_bytes'])} simulated, steady "
            "state): " + "; ".join(parts))


def _print(out: dict) -> None:
    from kvbench.analysis.fixed_capacity import table_lines
    from kvbench.report.text import table
    from kvbench.units import format_duration

    mf = (out.get("stationarity") or {}).get("measured_from")
    click.echo(f"trace {out['trace']}: {out['requests']} requests over {out['span_s']:.0f} s "
               + (f"from {mf['start_s']:,.4g} s, the requests before only warming the cache " if mf else "")
               + f"({out['trace_rate']:.2f} req/s), planned at {out['rate']:.3g} req/s ({out['rate_model']}); "
               f"model {out['model']}, block {format_bytes(out['block_bytes'])}")
    ss = out["steady_state"]
    click.echo(f"infinite-cache hit ratio {out['infinite_hit_ratio']:.3f}; knee at {format_bytes(out['knee_bytes'])}; "
               f"device WAF {out['waf']:.3g} ({out['waf_source']}); the trace shows residence times up to "
               f"{format_duration(ss['max_residence_s'])}")
    click.echo("")
    for s in out["answer"]["sentences"]:
        click.echo(s)
    click.echo("")
    click.echo("steady state vs capacity (write-through, from the first eviction on"
               + (f" or {mf['start_s']:,.4g} s, the warm-up's end, whichever is later" if mf else "") + "):")
    rows = []
    for r in out["capacity_curve"]:
        if r["filled"]:
            rows.append([format_bytes(r["capacity_bytes"]), f"{r['hit_ratio']:.3f}",
                         format_rate(r["write_bytes_per_s"]), format_residence(r["residence_s"], r["write_bytes_per_s"]),
                         f"{r['dwpd']:.3g}",
                         "  ".join(note for note, on in (
                             ("(projected: not turned over; answers hold the rate)", not r["turned_over"]),
                             ("(fitted extension)", r.get("from") == "extension")) if on)])
        else:
            rows.append([format_bytes(r["capacity_bytes"]), f"{r['hit_ratio']:.3f}", "never fills: no steady state"])
    for line in table(["capacity", "hit", "writes/s", "residence", "DWPD", ""], rows, ">>>>><"):
        click.echo(line)
    rows = []
    for k, t in out["per_target"].items():
        if not t.get("need_bytes"):
            rows.append([k, f"unreachable (target {t['target_hit_ratio']:.3f} > infinite "
                            f"{t['infinite_hit_ratio']:.3f})"])
            continue
        life = t["lifetime_years"]
        rows.append([k, f"{t['hit_ratio']:.3f}", format_bytes(t["need_bytes"]), format_bytes(t["l2_bytes"]),
                     format_bytes(t["ssd_bytes"]), _num(t["dwpd_host"]), _num(t["dwpd_rating_equivalent"]),
                     _life(life, ".1f"), _num(t["ssd_per_dram_gb"]),
                     f"{t['ssd_class']}, {t['bound']}"])
    for line in table(["target", "hit", "need", "L2 DRAM", "L3 SSD", "DWPD", "eq.DWPD", "life (y)", "SSD/hit",
                       "class, bound"], rows, ">" * 9 + "<"):
        click.echo(line)
    click.echo("drive classes at the headline target:")
    for line in table(None, [[d["class"], format_bytes(d["capacity_bytes"]),
                              f"({d['bound']} binds; {d['drives'] if d['drives'] is not None else '?'} drives) host "
                              f"DWPD {_num(d['dwpd_host'])}, rating-eq. {_num(d['dwpd_rating_equivalent'])} of "
                              f"{d['rated_dwpd']:g}, life {_life(d['lifetime_years'], '.2f', ' y')}, SSD / hit capacity "
                              f"{_num(d['ssd_per_dram'])}, {_money(d['usd_per_day']['total'])}/day"]
                             for d in out["drives"]], "<><", indent="  "):
        click.echo(line)
    if out["retention_sweep"]:
        click.echo("retention sweep: " + "; ".join(
            f"{format_duration(r['retention_s'])}: "
            + (f"{format_bytes(r['capacity_bytes'])}, " if r["capacity_bytes"] is not None else "")
            + f"{r['dwpd']:.3g} DWPD" + (" (beyond the trace)" if r["extrapolated"] else "")
            + (" (fitted extension)" if r.get("from") == "extension" else "")
            for r in out["retention_sweep"]))
    r = out.get("retention")
    if r:
        click.echo(f"retention {format_duration(r['retention_s'])}: "
                   + (f"{format_bytes(r['capacity_bytes'])}, hit ratio {_num(r['hit_ratio'])}, "
                      if r["capacity_bytes"] is not None else "")
                   + f"{r['dwpd']:.3g} DWPD ({r['basis']})")
    for line in table_lines(out.get("fixed_capacity") or {}):
        click.echo(line)
    dep = out.get("deployment")
    if dep:
        click.echo(f"deployment: {dep['formula']}")
        click.echo(f"  {dep['requests_per_s']:,.3g} requests/s (trace x {dep['trace_copies']:.3g}), steady-state hit ratio "
                   f"{dep['hit_ratio']:.3f}; per drive {format_rate(dep['write_bytes_per_s_per_drive'])}, host DWPD "
                   f"{dep['dwpd_host_per_drive']:.3g}, rating-equivalent {dep['dwpd_rating_equivalent_per_drive']:.3g} "
                   f"(WAF {dep['workload_waf']:.3g} / reference {dep['reference_waf']:.3g}, {dep['reference_class']})")
        if dep.get("rate_note"):
            click.echo(f"  {dep['rate_note']}")
        click.echo(f"  a {dep['rated_dwpd']:g}-DWPD drive {_lasts(dep['lifetime_years'])} (warranty "
                   f"{dep['warranty_years']:g}); {dep['drives_within_rating']:,} drive(s) of this capacity keep "
                   "within the rating")
        click.echo(f"  {dep['what_lowers_it']}")
    wp = out.get("write_policies") or {}
    if wp:
        click.echo(write_policy_line(wp))
    lay = out.get("layouts") or {}
    if lay:
        click.echo("store layout (synthetic FTL models): " + "; ".join(
            f"{name}: WAF {r['waf']:.2f}, {r['nand_writes_per_day']:.3g} NAND drive-writes/day"
            for name, r in lay.items()))
    adm = out.get("admission") or {}
    if adm:
        first = next(iter(adm.values()))
        click.echo(f"admission at {format_bytes(first['capacity_bytes'])} (steady state; {first['ssd_class']} drives, "
                   f"WAF {first['workload_waf']:.3g} vs reference {first['reference_waf']:.3g}):")
        rows = []
        for name, r in adm.items():
            w = r["write_bytes_per_s"]
            wtxt = format_rate(w) if w is not None else \
                (f"({format_rate(r['mean_write_bytes_per_s'])})" if r.get("mean_write_bytes_per_s") else MISSING)
            rows.append([r["policy"], f"{r['hit_ratio']:.3f}", wtxt, _num(r["dwpd"]), _num(r["dwpd_host"]),
                         _num(r["dwpd_rating_equivalent"]), _money(r["usd_per_day"]["total"]),
                         "" if r["steady_state"] == "measured" else "(extrapolated: rate held, see basis)"
                         if r["steady_state"] == "extrapolated" else "(no steady state: fill-phase mean write rate)"
                         if r.get("mean_write_bytes_per_s") else "(no steady state)"])
        for line in table(["policy", "hit", "writes/s", "DWPD", "host", "eq.DWPD", "$/day", ""], rows, "<>>>>>><",
                          indent="  "):
            click.echo(line)
    pl = out.get("placement")
    if pl:
        click.echo(f"placement {pl['rule']} over {pl['streams']} streams ({pl['statement']}), "
                   f"{format_bytes(pl['capacity_bytes'])} store, device WAF separated / one stream:")
        for lay, rows in (pl.get("layouts") or {pl["layout"]: pl["policies"]}).items():
            click.echo(f"  {lay}: " + "; ".join(f"{name} {_num(r['waf'])} / {_num(r['waf_one_stream'])}"
                                                for name, r in rows.items()))
    fd = out.get("fdp")
    if fd:
        click.echo(f"FDP {fd['handles']} handles, {format_bytes(fd['ru_bytes'])} reclaim units ({fd['rule']}: "
                   f"{fd['statement']}), {fd['class']} store {format_bytes(fd['store_bytes'])}:")
        for line in table(None, [[name, f"WAF {fd[f'waf_{key}']:.3f}", "NAND " + (
                f"{format_bytes(fd[f'nand_bytes_per_day_{key}'])}/day" if fd[f"nand_bytes_per_day_{key}"] is not None
                else "n/a"), f"eq.DWPD {_num(fd[f'dwpd_rating_equivalent_{key}'])} (host {_num(fd['dwpd_host'])})"]
                for key, name in (("without", "without FDP"), ("with", "with FDP"))], "<<<<", indent="  "):
            click.echo(line)
        m = fd["measured"]
        click.echo(f"  measured on the drive: " + (f"WAF {m['waf']:.3f} ({m['note']})" if m["waf"] is not None
                                                  else m["note"]))
    for w in out.get("warnings", []):
        click.echo(f"warning: {w}")
    if out.get("report"):
        click.echo(f"report: {out['report']}\nrun_dir: {out['run_dir']}")


def _fdp_spec(text):
    """--fdp parsed and validated when the option is read, before any work (the trace, the prices)."""
    from kvbench.analysis.fdp import parse_fdp

    return parse_fdp(text) if text else None


COMMANDS = [plan_cmd]
