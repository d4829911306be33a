"""Shared option decorators and output helpers for the CLI commands."""

from __future__ import annotations

import json
import math
import sys

import click

from kvbench import units
from kvbench.errors import UnitError
from kvbench.metrics.run import to_jsonable


def _quiet_progress(ctx, param, value):
    from kvbench import progress
    progress.set_mode("never" if value else None)    # machine-read output: no live progress line
    return value


def json_option(f):
    """``--json``: print the machine-readable summary (one JSON object) on stdout (and no live progress line)."""
    return click.option("--json", "as_json", is_flag=True, callback=_quiet_progress,
                        help="Print the summary as one JSON object on stdout.")(f)


FORCE_KEY = "kvbench.force"


def _remember_force(ctx, param, value):
    ctx.meta[FORCE_KEY] = bool(value)


def force_option(f):
    """``--force``: replace an existing output file that kvbench did not write. Eager, so that every
    :data:`OUTPUT` parameter sees it whatever the order on the command line; not passed to the command (the
    output parameters carry it)."""
    return click.option("--force", is_flag=True, is_eager=True, expose_value=False, callback=_remember_force,
                        help="Overwrite an existing output file kvbench did not write (refused otherwise).")(f)


class OutputParam(click.ParamType):
    """The type of every option naming a file kvbench writes (``-o``, ``--report``, ``--export-iolog``...):
    refused before any work when it is a folder, under /proc, /sys or /dev, in a missing folder, a symlink, or
    a file kvbench did not write (unless ``--force``, which it hands to the writer); written only through
    :class:`kvbench.engine.safety.PendingOutput`. ``keep`` values
    (e.g. plan's bare ``--report`` = "auto") pass through unchecked. tests/cli/test_outputs.py walks the command
    tree: a writing option of another type fails it."""

    name = "file"

    def __init__(self, keep: tuple = ()):
        self.keep = keep

    def convert(self, value, param, ctx):
        if value is None or value in self.keep:
            return value
        from kvbench.engine.safety import allow_replace, check_output

        force = bool(ctx.meta.get(FORCE_KEY)) if ctx is not None else False
        check_output(value, force)        # a SafetyError: one line with its fix, before the command runs
        if force:
            allow_replace(value)
        return str(value)


OUTPUT = OutputParam()


class Number(click.ParamType):
    """A finite int or float in [lo, hi] (lo excluded when ``lo_open``): ``nan``, ``inf``, ``-1`` or ``1e30``
    are refused before any work, in one line (a :class:`~kvbench.errors.UsageError`) naming the option and the
    range."""

    def __init__(self, kind: type, lo: float = 0, hi: float = 1e15, lo_open: bool = False):
        self.kind, self.lo, self.hi, self.lo_open = kind, lo, hi, lo_open
        self.name = "integer" if kind is int else "float"

    def convert(self, value, param, ctx):
        from kvbench.errors import UsageError

        # the option's own (first long) name: an alias (io's fio words: --iodepth for --qd) is not its name
        opt = next((o for o in param.opts if o.startswith("--")), param.opts[0]) if param is not None else "the value"
        num = lambda x: f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e12 else f"{x:g}"  # noqa: E731
        try:
            v = value if isinstance(value, self.kind) and not isinstance(value, bool) else self.kind(str(value))
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"{opt} {value!r} is not {'an integer' if self.kind is int else 'a number'}",
                             f"give {opt} a number from {num(self.lo)} to {num(self.hi)}") from None
        if not math.isfinite(v):
            raise UsageError(f"{opt} must be a finite number, not {value}",
                             f"give {opt} a number from {num(self.lo)} to {num(self.hi)}")
        if v < self.lo or (self.lo_open and v == self.lo):
            raise UsageError(f"{opt} must be {'>' if self.lo_open else '>='} {num(self.lo)}, not {value}",
                             f"give {opt} {num(self.lo)} or more" if not self.lo_open else
                             f"give {opt} above {num(self.lo)}")
        if v > self.hi:
            raise UsageError(f"{opt} must be <= {num(self.hi)}, not {value}", f"give a smaller {opt}")
        return v


#: option name (the parameter's) -> (lo, hi, lo_open) for its int/float value; any other int or float option is
#: finite, >= 0 and <= 1e15. Applied to every command by :func:`bound_numbers` (the lazy group calls it), so a
#: new numeric option is bounded without a line here; tests/cli/test_validation.py walks the tree.
NUMERIC_BOUNDS: dict[str, tuple] = {
    **{k: (0, 2**32 - 1, False) for k in ("seed", "sample_seed")},
    **{k: (1, 1e15, False) for k in ("max_requests", "qd", "workers", "reap_batch", "tp", "nodes", "gpus_per_node",
                                      "block_tokens", "limit", "sample_size", "seeds", "requests", "reps", "layers",
                                      "threads", "batch", "seq_len", "tokens", "steps", "streams", "block_pages",
                                      "max_tokens", "chunk")},
    "points": (2, 1e6, False), "rwmixread": (0, 100, False),
    **{k: (0, 1e15, True) for k in ("speed", "rate", "recompute_tokens_per_s", "probe_seconds", "burstiness")},
    **{k: (0, 1, True) for k in ("sample", "targets", "store_fill", "profile_fraction", "sample_keys")},
    **{k: (0, 1, False) for k in ("hot_lbas", "hot_writes")},
    "load_bound": (1, 1e6, False), "load_slack": (0, 1e9, False), "waf": (1, 1e3, False),
}


def bound_numbers(cmd: click.Command) -> click.Command:
    """Give every plain int/float option of ``cmd`` its :data:`NUMERIC_BOUNDS` range (idempotent)."""
    for p in cmd.params:
        if p.type is click.INT or p.type is click.FLOAT:
            lo, hi, lo_open = NUMERIC_BOUNDS.get(p.name, (0, 1e15, False))
            p.type = Number(int if p.type is click.INT else float, lo, hi, lo_open)
    return cmd


def emit_json(obj) -> None:
    """Print one JSON object on stdout (NaN/inf as null, numpy types converted)."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


class SizeParam(click.ParamType):
    """A click parameter for byte sizes with units (``4k``, ``64GiB``); errors become usage errors.
    ``kb_base`` is units.parse_size's: 1024 for I/O sizes (``IO_SIZE``), 1000 for capacities (``SIZE``)."""

    name = "size"

    def __init__(self, kb_base: int = 1000):
        self.kb_base = kb_base

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return units.parse_size(value, what=f"--{param.name.replace('_', '-')}" if param else "size",
                                    kb_base=self.kb_base)
        except UnitError as e:
            self.fail(str(e), param, ctx)


class DurationParam(click.ParamType):
    """A click parameter for durations (``250us``, ``10m``); returns seconds. With ``require_unit`` a bare
    number is refused (``--ttl 10``: seconds or minutes?); otherwise a bare number is seconds."""

    name = "duration"

    def __init__(self, require_unit: bool = False):
        self.require_unit = require_unit

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        opt = f"--{param.name.replace('_', '-')}" if param else "duration"
        if self.require_unit and units.is_bare_number(value):
            self.fail(f"{opt} {value}: give a unit, e.g. {value}s, {value}m or {value}h (a bare number is ambiguous)",
                      param, ctx)
        try:
            return units.parse_duration(value, what=opt)
        except UnitError as e:
            self.fail(str(e), param, ctx)


class WarmupParam(click.ParamType):
    """``--warmup``: a fraction of the requests (``0.5``) or a time on the trace's clock (``136.3s``, ``2m``: the
    requests before it), which warm the cache and are not measured. Returns a float fraction or a
    :class:`~kvbench.analysis.curves.profile.WarmupTime` the trace resolves (``warmup_fraction``)."""

    name = "fraction|time"

    def convert(self, value, param, ctx):
        from kvbench.analysis.curves.profile import WarmupTime

        if isinstance(value, (int, float, WarmupTime)):
            return value
        text = str(value).strip()
        if units.is_bare_number(text):
            x = float(text)
            if not 0.0 <= x < 1.0:        # one line, as every bad value: kvbench's own error, not click's usage
                from kvbench.errors import UsageError

                raise UsageError(f"warm-up fraction must be in [0, 1), got {text} (a bare number is a fraction of "
                                 "the requests)", f"give e.g. --warmup 0.1, or a time with a unit: --warmup {text}s")
            return x
        try:
            seconds = units.parse_duration(text, what="--warmup")
        except UnitError as e:
            self.fail(str(e), param, ctx)
        return WarmupTime(seconds) if seconds > 0 else 0.0


class RateParam(click.ParamType):
    """A click parameter for bandwidths (``10GB/s``); returns bytes per second."""

    name = "rate"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return units.parse_rate(value, what=f"--{param.name.replace('_', '-')}" if param else "rate")
        except UnitError as e:
            self.fail(str(e), param, ctx)


SIZE = SizeParam()                  # capacities: KB/MB/GB/TB are SI (a 7.68TB drive)
IO_SIZE = SizeParam(kb_base=1024)   # I/O sizes (block, chunk, page, segment): KB/MB 1024-based, like fio
DURATION = DurationParam()
WARMUP = WarmupParam()
RETENTION = DurationParam(require_unit=True)     # retention/TTL: minutes vs seconds matters, so say which
RATE = RateParam()


def tier_options(f):
    """The L1-L4 tier options of ``replay kv`` (also per node of ``kvbench cluster``): capacities, targets, policies, write policy, layout."""
    for option in reversed((
        click.option("--l1", type=SIZE, default="0", help="L1 HBM capacity (simulated), e.g. 16GiB; 0 = absent."),
        click.option("--l2", type=SIZE, default="0", help="L2 DRAM arena capacity (real memory copies); 0 = absent."),
        click.option("--l3", "l3", default=None, metavar="PATH", help="L3 store: a file (O_DIRECT) or raw block device."),
        click.option("--l3-capacity", type=SIZE, default="0", help="L3 store capacity (cache blocks), e.g. 64GiB."),
        click.option("--l4", "l4", default=None, metavar="DIR", help="L4 remote tier: a directory on any mounted filesystem."),
        click.option("--l4-capacity", type=SIZE, default="0", help="L4 capacity."),
        click.option("--l4-link-bw", type=RATE, default=None, help="Modelled link bandwidth in front of L4, e.g. 10GB/s."),
        click.option("--l4-link-latency", type=DURATION, default="0", help="Modelled link latency per request, e.g. 50us."),
        click.option("--policy", default="lru", show_default=True, help="Cache policy of every tier: lru, fifo, s3fifo."),
        click.option("--ttl", type=RETENTION, default=None,
                     help="Retention: drop blocks idle longer than this (with a unit: 90s, 10m, 2h)."),
        click.option("--write-policy", type=click.Choice(["through", "back"]), default="through", show_default=True, help="through: new KV written to L3 at creation; back: written when evicted from L2."),
        click.option("--exclusive", is_flag=True, help="Exclusive tiers: a block lives in one tier (needs write-back)."),
        click.option("--promote/--no-promote", default=True, show_default=True, help="Copy L3/L4 hits up into L2."),
        click.option("--layout", type=click.Choice(["slot", "log"]), default="slot", show_default=True, help="L3 layout: fixed slots with a free list, or a log of large segments."),
        click.option("--segment", "segment_bytes", type=IO_SIZE, default="64MiB", show_default=True, help="Log segment size (--layout log)."),
        click.option("--trim", is_flag=True, help="Trim freed store space (punch holes in files, BLKDISCARD on devices)."),
    )):
        f = option(f)
    return f


def replay_io_options(f):
    """How ``replay kv`` issues its I/O: chunk size, queue depth, engine, pacing, limits, verification."""
    for option in reversed((
        click.option("--chunk", "chunk_bytes", type=IO_SIZE, default="1MiB", show_default=True, help="I/O size: KV blocks are read/written in chunks of this size."),
        click.option("--qd", type=int, default=32, show_default=True, help="Queue depth per target domain."),
        click.option("--engine", default="libaio", show_default=True, help="I/O engine for L3/L4 (libaio, psync)."),
        click.option("--speed", type=float, default=1.0, show_default=True, help="Open loop at trace time / speed."),
        click.option("--closed-loop", is_flag=True, help="Issue as fast as the devices allow (ignore trace time)."),
        click.option("--duration", type=DURATION, default=None, help="Stop after this much replay time."),
        click.option("--max-requests", type=int, default=None, help="Replay only the first N requests."),
        click.option("--verify", type=click.Choice(["sampled", "all", "off"]), default="sampled", show_default=True, help="Check read data against the block's key/version tag."),
    )):
        f = option(f)
    return f


def _set_ray_timeout(ctx, param, value):
    from kvbench.cluster.workers import set_ray_timeout

    if value is not None:
        set_ray_timeout(value)


def ray_timeout_option(f):
    """``--ray-timeout``: how long connecting to a Ray cluster may take (a port that is not Ray never answers)."""
    return click.option("--ray-timeout", type=DurationParam(), default="30s", show_default=True,
                        expose_value=False, callback=_set_ray_timeout,
                        help="Give up connecting to --ray-address after this long, with an error.")(f)


def ray_options(f):
    """``--ray-address``: run the command's job on every host of a Ray cluster (kvbench[cluster])."""
    f = ray_timeout_option(f)
    f = click.option("--inject-host-loss", type=int, default=None, hidden=True,
                     help="Testing: the worker on host I dies at start.")(f)
    return click.option("--ray-address", default=None, metavar="ADDR",
                        help="Run on every host of this Ray cluster (every drive of --target A,B) and compare them "
                             "side by side; needs kvbench[cluster].")(f)


def fan_out_cmd(kind: str, ray_address: str, target: str | None, payload: dict, results_root: str,
                report: str | None, inject_host_loss: int | None, as_json: bool) -> None:
    """The ``--ray-address`` branch of ``io`` and ``qualify``: fan out, print, fail if a host was lost."""
    from kvbench.cluster.fanout import fan_out, print_fanout
    from kvbench.errors import KvbenchError

    s = fan_out(kind, ray_address, (target or "").split(","), payload, results_root, report, die=inject_host_loss)
    if as_json:
        emit_json(s)
    else:
        print_fanout(s, click.echo)
    if s["lost"]:
        raise KvbenchError(f"{len(s['lost'])} of {s['hosts']} hosts did not finish: " +
                           "; ".join(f"{h['host']}: {h['error']}" for h in s["lost"]) +
                           f"; the other hosts' runs are in {s['run_dir']}", "rerun on healthy hosts")


def replay_config(**opts):
    """A :class:`kvbench.replay.kv.ReplayConfig` from the options of :func:`tier_options` and
    :func:`replay_io_options` (CLI names) plus any ReplayConfig field given by its own name."""
    from kvbench.replay.kv import ReplayConfig

    renamed = {"l4_link_latency": "l4_link_latency_s", "ttl": "ttl_s", "duration": "duration_s"}
    exclusive = opts.pop("exclusive", False)
    kw = {renamed.get(k, k): v for k, v in opts.items()}
    kw["l4_link_latency_s"] = kw.get("l4_link_latency_s") or 0.0
    return ReplayConfig(inclusion="exclusive" if exclusive else "inclusive", **kw)


class FieldsOption(click.Option):
    """An option whose value is ``key=value`` fields (kvbench.spec.fields): parsed when the option is read,
    before any work, by ``fields_parse`` (the site's parser, which goes through
    :func:`kvbench.spec.fields.parse_fields`). ``fields_example`` is a valid value (one pair per value of a
    repeatable option), ``fields_sep`` the separator between pairs in one value (``,``; ``:`` for an admission
    spec), ``fields_open`` says why unknown keys are only refused later (None: they are refused here).
    tests/cli/test_validation.py walks every command's FieldsOptions with these."""

    def __init__(self, *args, fields_parse, fields_example, fields_sep: str = ",", fields_open: str | None = None,
                 fields_convert: bool = False, **kw):
        def callback(ctx, param, value):
            if value is None or (isinstance(value, tuple) and not value):
                return value
            out = fields_parse(value)
            return out if fields_convert else value

        super().__init__(*args, callback=callback, **kw)
        self.fields_parse, self.fields_example, self.fields_sep = fields_parse, fields_example, fields_sep
        self.fields_open = fields_open


def fields_option(*decls, parse, example, sep: str = ",", open_keys: str | None = None, convert: bool = False,
                  **kw):
    """``click.option`` of a :class:`FieldsOption` (see there)."""
    return click.option(*decls, cls=FieldsOption, fields_parse=parse, fields_example=example, fields_sep=sep,
                        fields_open=open_keys, fields_convert=convert, **kw)


def lazy_parser(module: str, name: str):
    """``module.name`` as a FieldsOption parser, imported when an option is read (the CLI starts light)."""
    def parse(value):
        import importlib

        return getattr(importlib.import_module(module), name)(value)
    return parse


def parse_admissions(option: str):
    """A parser of an admission spec (``--admission tinylfu:width=0.5``) or a list of them (plan's ``a,b:k=v``)."""
    def parse(value) -> tuple:
        from kvbench.analysis.admission import parse_policies
        from kvbench.sim.admission import parse_admission

        return tuple(parse_admission(x, option) for x in parse_policies(value, option))
    return parse


def key_values(option: str, known=None, numeric: bool = False):
    """A parser of a repeatable ``KEY=VALUE`` option into a dict (values numbers when they read as finite
    numbers; all must when ``numeric``); ``known``: a function giving the keys taken (None: any)."""
    def convert(values):
        from kvbench.errors import UsageError
        from kvbench.spec.fields import parse_fields

        out = {}
        for k, val in parse_fields(values, option=option, known=known() if known else None, noun="key",
                                   error=UsageError).items():
            try:
                num = float(val)
            except ValueError:
                if numeric:
                    raise UsageError(f"{option} {k}={val}: the value must be a number", f"e.g. {k}=1") from None
                out[k] = val
                continue
            if not math.isfinite(num):
                raise UsageError(f"{option} {k}={val}: the value must be a finite number", f"e.g. {k}=1")
            out[k] = num
        return out
    return convert
