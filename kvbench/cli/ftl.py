"""``kvbench ftl``: the device write amplification a write pattern would cause on a modelled drive."""

from __future__ import annotations

import click

from kvbench.cli._common import IO_SIZE, SIZE, emit_json, json_option
from kvbench.errors import UsageError
from kvbench.units import format_bytes, parse_size


def parse_writes(text: str, user_bytes: int) -> float:
    """``10x`` (multiples of the user capacity) or a size (``4TiB``) -> multiples of the user capacity."""
    s = str(text).strip()
    try:
        if s.endswith("x"):
            value = float(s[:-1])
        else:
            value = parse_size(s, what="--writes") / user_bytes
    except ValueError:
        raise UsageError(f"--writes: cannot parse {text!r}", "give a multiple of the capacity (10x) or a size") from None
    if not value > 0:
        raise UsageError(f"--writes {text!r} must be > 0", "give e.g. 10x")
    return value


@click.command("ftl")
@click.option("--capacity", type=SIZE, default=None, help="User capacity of the modelled drive (e.g. 4GiB).")
@click.option("--page-size", type=IO_SIZE, default="4KiB", show_default=True, help="NAND page (mapping unit).")
@click.option("--op", "op", type=float, default=0.07, show_default=True,
              help="Over-provisioning: (physical - user) / user.")
@click.option("--block-pages", type=int, default=256, show_default=True, help="Pages per erase block.")
@click.option("--gc", type=click.Choice(["greedy", "fifo"]), default="greedy", show_default=True,
              help="Garbage-collection victim choice.")
@click.option("--pattern", type=click.Choice(["uniform", "sequential", "classes", "jesd219"]), default=None,
              help="Synthetic write pattern (default uniform when no --iolog/--plan); classes: two lifetime "
                   "classes (--hot-lbas, --hot-writes).")
@click.option("--hot-lbas", type=float, default=0.2, show_default=True,
              help="classes pattern: share of the LBAs in the short-lifetime (hot) class.")
@click.option("--hot-writes", type=float, default=0.8, show_default=True,
              help="classes pattern: share of the writes going to the hot class (= --hot-lbas: one lifetime).")
@click.option("--streams", type=int, default=1, show_default=True,
              help="Write streams / FDP reclaim-unit handles: one open erase block each.")
@click.option("--placement", default="none", show_default=True,
              help="Which stream a write goes to: none, tier (an I/O plan's targets), lifetime (the classes "
                   "pattern's lifetime class), age (GC moves survivors one stream older).")
@click.option("--iolog", type=click.Path(dir_okay=False), default=None, help="fio iolog (v2/v3): its writes/trims.")
@click.option("--iolog-target", default=None, help="File name inside an iolog that writes several files.")
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False), default=None,
              help="An I/O plan saved as .npy (engine PLAN_DTYPE): its writes/trims.")
@click.option("--io-size", type=IO_SIZE, default=None, help="Write size for --pattern (default: one page).")
@click.option("--writes", default="10x", show_default=True,
              help="Host writes after the preconditioning fill: a multiple of the capacity (10x) or a size.")
@click.option("--warmup", type=float, default=0.5, show_default=True,
              help="Fraction of those writes excluded from the steady-state WAF.")
@click.option("--no-precondition", is_flag=True, help="Start from an empty drive instead of a sequential fill.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--trace", "trace", default=None, metavar="TRACE",
              help="Model the write stream a KV store makes under this trace (file or built-in name): --capacity is "
                   "then the store's KV capacity, and --model sets the block size.")
@click.option("--model", default=None, help="With --trace: model preset for the KV block size.")
@click.option("--tp", type=int, default=None, help="With --trace: tensor-parallel degree for the model's KV bytes.")
@click.option("--layout", type=click.Choice(["slot", "log"]), default="slot", show_default=True,
              help="With --trace: the store's layout (fixed slots with a FIFO free list, or a log of segments).")
@click.option("--policy", default="lru", show_default=True, help="With --trace: the store's cache policy.")
@click.option("--ttl", "ttl", default=None, help="With --trace: retention (a block idle longer is dropped), e.g. 1h.")
@click.option("--trim/--no-trim", default=False, show_default=True,
              help="With --trace: the store trims freed slots (segments).")
@click.option("--spare-slots", type=int, default=64, show_default=True,
              help="With --trace: slot store's spare slots beyond its capacity.")
@click.option("--erase-block", type=IO_SIZE, default="256MiB", show_default=True,
              help="With --trace: the drive's erase unit (superblock).")
@click.option("--jesd219", "jesd219", is_flag=True,
              help="Print a drive class's reference WAF (JESD219A, its rating's workload) and its P/E check.")
@click.option("--class", "class_name", default=None, help="With --jesd219: the drive class (an [ssd.NAME] of --prices).")
@click.option("--prices", default="2025-h2", show_default=True, help="With --jesd219: price preset name or TOML path.")
@json_option
def ftl_cmd(capacity, page_size, op, block_pages, gc, pattern, hot_lbas, hot_writes, streams, placement, iolog,
            iolog_target, plan_path, io_size, writes, warmup, no_precondition, seed, trace, model, tp, layout,
            policy, ttl, trim, spare_slots, erase_block, jesd219, class_name, prices, as_json):
    """Model a drive's flash translation layer and print its steady-state write amplification (WAF).

    A page-mapped FTL with greedy or FIFO garbage collection and trim, preconditioned by a sequential fill,
    then fed a uniform or sequential pattern, or the writes and trims of a fio iolog or an I/O plan (looped
    until --writes). Uniform random page writes reproduce the analytic WAF alpha/(alpha+W(-alpha e^-alpha)).
    """
    from dataclasses import replace

    from kvbench.analysis import ftl
    from kvbench.analysis.placement import get_placement

    sources = [x for x in (pattern, iolog, plan_path) if x]
    if jesd219 or class_name:
        if not (jesd219 and class_name) or sources or trace or capacity:
            raise UsageError("--jesd219 --class NAME prints a drive class's reference WAF: it takes no --capacity, "
                             "--pattern, --iolog, --plan or --trace", "give --jesd219 --class NAME [--prices FILE]")
        return _class_reference(class_name, prices, as_json)
    if capacity is None:
        raise UsageError("missing --capacity", "give the modelled drive's user capacity, e.g. --capacity 4GiB")
    if trace is not None:
        ftl.erase_unit_pages(erase_block, ftl.MIN_PAGE_BYTES)        # the KV store's model holds this unit exactly
        if sources or streams != 1:
            raise UsageError("--trace models a KV store's own writes: --pattern, --iolog, --plan and --streams do "
                             "not apply", "drop them, or drop --trace")
        return _trace_ftl(trace, model=model, tp=tp, capacity=capacity, layout=layout, policy=policy, ttl=ttl,
                          trim=trim, spare_slots=spare_slots, op=op, gc=gc, erase_block=erase_block,
                          seed=seed, as_json=as_json)
    if len(sources) > 1:
        raise UsageError("--pattern, --iolog and --plan are exclusive", "give one write source")
    rule = get_placement(placement)
    if streams > 1 and rule.name == "none":
        raise UsageError(f"--streams {streams} with --placement none puts every write in one stream",
                         "give a placement rule: --placement lifetime, tier or age")
    cfg = ftl.FtlConfig(user_bytes=capacity, page_size=page_size, op=op, block_pages=block_pages, gc=gc,
                        streams=streams, gc_stream=rule.gc_stream).validate()
    io_pages = 1
    if io_size:
        if io_size % page_size:
            raise UsageError(f"--io-size {io_size} is not a multiple of the page size {page_size}",
                             "give a whole number of pages")
        io_pages = io_size // page_size
    extents, labels, src = None, {}, iolog or plan_path or (pattern or "uniform")
    if pattern == "classes":
        labels = {"lifetime": "classes"}
    if iolog:
        extents = ftl.bytes_to_pages(*ftl.read_iolog(iolog, target=iolog_target), page_size)
    elif plan_path:
        ops, offs, lens, tiers = ftl.read_plan_tiers(plan_path)
        extents, labels = ftl.bytes_to_pages(ops, offs, lens, page_size), {"tier": tiers}
    if rule.label is not None and rule.label not in labels:
        rule.streams(labels, 0, streams, source=str(src))          # raises: the source lacks the labels
    kw = dict(pattern=pattern or "uniform", writes=parse_writes(writes, capacity), warmup=warmup, seed=seed,
              io_pages=io_pages, precondition=not no_precondition, hot_lbas=hot_lbas, hot_writes=hot_writes)

    def run(c, separate: bool):
        ext, of_class = extents, None
        if separate and rule.label == "lifetime":
            of_class = lambda cls: rule.streams({"lifetime": cls}, len(cls), c.streams)  # noqa: E731
        if separate and extents is not None and rule.label is not None:
            ext = (*extents, rule.streams(labels, len(extents[0]), c.streams, source=str(src)))
        from kvbench.progress import Line

        with Line("ftl" + ("" if separate else " (one stream)"), None, "host pages") as line:
            return ftl.simulate(c, extents=ext, stream_of_class=of_class,
                                progress=lambda done, total: line.update(done, total=total), **kw)

    result = run(cfg, True)
    out = result.to_dict()
    out["source"] = src
    out["placement"] = {"rule": rule.name, "statement": rule.rule, "streams": streams}
    if streams > 1:      # the same writes on one stream: what the separation buys
        base = run(replace(cfg, streams=1, gc_stream="same"), False)
        out["waf_one_stream"] = base.waf
        out["placement"]["waf_one_stream"] = base.waf
        out["placement"]["waf_reduction"] = 1.0 - result.waf / base.waf if base.waf else None
    if as_json:
        emit_json(out)
        return
    click.echo(f"drive: {format_bytes(capacity)} user, op {op:g} (effective {cfg.effective_op:.4f}), "
               f"{cfg.blocks} erase blocks x {block_pages} x {format_bytes(page_size)}, gc {gc}")
    click.echo(f"writes: {out['source']}, {result.total.host_pages * page_size / capacity:.2f}x capacity "
               f"incl. fill; steady state after {warmup:.0%} of them")
    click.echo(f"waf: {result.waf:.4f}  (all writes after fill: {result.waf_all:.4f}; analytic uniform-random "
               f"at this op: {out['analytic_uniform_waf']:.4f})")
    if streams > 1:
        click.echo(f"placement {rule.name} over {streams} streams ({rule.rule}): WAF {result.waf:.4f} against "
                   f"{out['waf_one_stream']:.4f} on one stream ({out['placement']['waf_reduction']:+.1%} fewer NAND "
                   "writes)")
    click.echo(f"speed: {result.pages_per_s / 1e6:.2f}M host pages/s ({result.seconds:.2f} s)")


def _trace_ftl(trace, *, model, tp, capacity, layout, policy, ttl, trim, spare_slots, op, gc, erase_block, seed,
               as_json):
    """``ftl --trace``: the device WAF of the store's own write/trim stream at this capacity."""
    from kvbench.analysis.trace_waf import trace_waf
    from kvbench.sim.policies import POLICIES
    from kvbench.spec.models import load_model
    from kvbench.stream.traces import read_trace
    from kvbench.units import parse_duration

    if model is None:
        raise UsageError("--trace needs --model for the KV block size", "pass e.g. --model llama-3.1-8b")
    if policy not in POLICIES:
        raise UsageError(f"unknown policy {policy!r}", f"use one of {', '.join(POLICIES)}")
    ttl_s = parse_duration(ttl, what="--ttl") if ttl is not None else None
    if spare_slots < 0:
        raise UsageError(f"--spare-slots {spare_slots} is negative", "give 0 or more")
    from kvbench.stream.synth import require_whole_stream

    require_whole_stream(trace, "ftl --trace", "a store of --capacity is written by every block, not a share")
    tr = read_trace(trace)
    block = load_model(model, tp=tp).block_bytes(tr.block_tokens)
    r = trace_waf(tr, block_bytes=block, capacity_bytes=capacity, layout=layout, policy=policy, ttl_s=ttl_s,
                  trim=trim, spare_slots=spare_slots, op=op, erase_block_bytes=erase_block, gc=gc, seed=seed)
    out = {**r.to_dict(), "trace": str(tr.path), "model": model, "block_bytes": block, "capacity_bytes": capacity}
    if as_json:
        emit_json(out)
        return
    p = r.params
    click.echo(f"store: {layout}, {format_bytes(capacity)} of {model} KV ({block:,} B blocks), {policy}"
               f"{', trim' if trim else ''}; drive op {op:g}, {gc} GC, {format_bytes(p['erase_unit_bytes'])} erase "
               "units (scaled)")
    click.echo(f"stream: {p['origin_note']}; {p['store_writes']:,} store writes"
               + (f" on a key sample at {p['sample_rate']:.3g}" if p["sample_rate"] < 1 else "")
               + f", {p['turnovers_measured']:.2f} turnovers measured after the warm-up")
    click.echo(f"waf: {r.waf:.4f}  (host {format_bytes(r.host_bytes)} -> NAND {format_bytes(r.nand_bytes)} in the "
               "scaled model)")


def _class_reference(name, prices, as_json):
    """``ftl --jesd219 --class NAME``: the class's reference WAF, where it came from, and its P/E check."""
    from kvbench.analysis.cost import load_prices
    from kvbench.analysis.drive_class import describe

    table = load_prices(prices)          # settles every class: a class that fails the P/E check is refused here
    if name not in table.ssd:
        raise UsageError(f"unknown drive class {name!r} in {table.path}", f"choose one of: {', '.join(table.ssd)}")
    d = {**describe(table.ssd[name]), "waf": table.ssd[name].reference_waf, "prices": table.path}
    if as_json:
        emit_json(d)
        return
    op = d["over_provisioning"]
    click.echo(f"class {name}: {format_bytes(d['drive_capacity_bytes'] or 0, binary=False, digits=4)} user"
               + (f" on {format_bytes(d['raw_nand_bytes'], binary=True)} raw NAND (op {op:.4f})" if d["raw_nand_bytes"]
                  else (f", op {op:g}" if op else ", no raw NAND or OP stated")))
    if d["waf"] is None:
        click.echo("reference WAF: none (no vendor figure and no OP to compute it at)")
        return
    click.echo(f"reference WAF: {d['waf']:.4f}  ({d['reference_waf_source']})")
    if d["nand_endurance_bytes"]:
        click.echo(f"rating: {d['rated_dwpd']:g} DWPD x {d['warranty_years']:g} years = TBW "
                   f"{d['rated_tbw_bytes'] / 1e15:,.4g} PB; x WAF = {d['rated_nand_bytes'] / 1e15:,.4g} PB of NAND "
                   f"writes <= raw x {d['pe_cycles']:,.0f} P/E = {d['nand_endurance_bytes'] / 1e15:,.4g} PB "
                   f"({d['pe_used_by_rating']:,.0f} cycles used)")


COMMANDS = [ftl_cmd]
