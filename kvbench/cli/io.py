"""``kvbench io``: a fio-like micro-benchmark on the kvbench engine (O_DIRECT, libaio by default).

fio's words work: ``--iodepth`` (= ``--qd``), ``--numjobs`` (= ``--workers``), ``--filename`` (= ``--target``),
``--ioengine`` (= ``--engine``), ``--randseed`` (= ``--seed``), ``--rate`` (bandwidth, fio's ``rate``),
``--rate_iops``, ``--status-interval``, ``--eta``, ``--output-format json|json+``, ``--write_lat_log``; sizes of
I/Os read K/KB/M/MB 1024-based as fio's default ``kb_base=1024`` does (kvbench.units).
"""

from __future__ import annotations

import click

from kvbench.cli._common import (DURATION, IO_SIZE, OUTPUT, SIZE, emit_json, fan_out_cmd, force_option, json_option,
                                 ray_options)


class FioRate(click.ParamType):
    """fio's ``rate``: a bandwidth, ``100m`` = 100 MiB/s (kb_base=1024), or ``100MB/s``. A bare number was
    kvbench's IOPS before (fio reads it as bytes/s): refused, naming ``--rate_iops``."""

    name = "bandwidth"

    def convert(self, value, param, ctx):
        from kvbench import units
        from kvbench.errors import UnitError

        if isinstance(value, float):
            return value
        text = str(value).strip()
        if "," in text:
            self.fail(f"{text!r}: separate read,write rates are not supported; give one bandwidth, e.g. 100m",
                      param, ctx)
        if units.is_bare_number(text):
            self.fail(f"{text} has no unit: --rate is a bandwidth, as in fio (e.g. --rate 100m = 100 MiB/s); "
                      f"for {text} I/Os per second pass --rate_iops {text}", param, ctx)
        try:
            if text.endswith("/s"):
                return units.parse_rate(text, what="--rate", kb_base=1024)
            return float(units.parse_size(text, what="--rate", kb_base=1024))
        except UnitError as e:
            self.fail(f"{e} (a bandwidth: 100m = 100 MiB/s, 2g, 500MB/s)", param, ctx)


def _direct(ctx, param, value):
    if value is not None and value != 1:
        raise click.BadParameter(f"{value}: kvbench io always bypasses the page cache (fio's direct=1): buffered I/O "
                                 "would measure memory, not the device; drop --direct or give --direct 1")
    return value


def fio_compat(f):
    """fio's job-line words that kvbench io's behaviour already matches, so a fio command line runs as written:
    ``--name`` (the job's label, kept in the summary), ``--direct 1`` (kvbench is always O_DIRECT; 0 is
    refused), ``--time_based`` (a ``--runtime`` above 0 is time-based), ``--group_reporting`` (workers are
    always reported merged)."""
    for option in reversed((
        click.option("--name", "job_name", default=None, metavar="NAME", help="fio's job name: a label kept in the summary."),
        click.option("--direct", type=int, default=None, callback=_direct, expose_value=False,
                     help="fio's direct: 1 only (kvbench always bypasses the page cache)."),
        click.option("--time_based", "--time-based", is_flag=True, expose_value=False,
                     help="fio's time_based: accepted; a --runtime above 0 always is."),
        click.option("--group_reporting", "--group-reporting", is_flag=True, expose_value=False,
                     help="fio's group_reporting: accepted; workers are always reported merged."),
    )):
        f = option(f)
    return f


def _lat_log_paths(prefix: str | None, workers: int) -> list[str]:
    return [f"{prefix}_lat.{w + 1}.log" for w in range(max(1, workers))] if prefix else []


@click.command("io")
@click.option("--target", "--filename", "target", default=None, metavar="PATH",
              help="File, raw block device or dram:<size> (default: a scratch file results/io-scratch.dat).")
@click.option("--rw", default="randread", show_default=True,
              type=click.Choice(["read", "write", "randread", "randwrite", "randrw", "rw"]))
@click.option("--bs", type=IO_SIZE, default="4k", show_default=True,
              help="Block size (multiple of the LBA size); 4k = 4KB = 4KiB = 4096 bytes, as in fio.")
@click.option("--qd", "--iodepth", "qd", type=int, default=32, show_default=True, help="Queue depth per worker.")
@click.option("--workers", "--numjobs", "workers", type=int, default=1, show_default=True,
              help="Worker processes, each with --qd.")
@click.option("--reap-batch", type=int, default=1, show_default=True,
              help="Most completions taken per io_getevents (fio's iodepth_batch_complete_max): 1 reaps one and "
                   "resubmits one, keeping --qd in flight as fio does; up to --qd reaps in bursts (fewer syscalls, "
                   "fewer I/Os in flight).")
@click.option("--size", type=SIZE, default=None, help="Bytes of the target to use (new files: 1GiB).")
@click.option("--runtime", type=DURATION, default="10s", show_default=True,
              help="Run time (e.g. 10s); 0 = one pass over --size.")
@click.option("--rwmixread", type=int, default=70, show_default=True, help="Percent reads for randrw/rw.")
@click.option("--seed", "--randseed", "seed", type=int, default=1, show_default=True,
              help="The offset sequence depends only on it.")
@click.option("--engine", "--ioengine", "engine", default="libaio", show_default=True,
              type=click.Choice(["libaio", "psync", "dram", "null"]))
@click.option("--rate", "rate_bytes", type=FioRate(), default=None,
              help="Open loop at this bandwidth, as fio's rate: 100m = 100 MiB/s, or 500MB/s (else closed loop "
                   "keeps --qd full).")
@click.option("--rate_iops", "--rate-iops", "rate_iops", type=float, default=None,
              help="Open loop at this many I/Os per second (fio's rate_iops).")
@click.option("--arrival", type=click.Choice(["uniform", "poisson"]), default="uniform", show_default=True,
              help="Open-loop inter-arrival times.")
@click.option("--speed", type=float, default=1.0, show_default=True, help="Open loop: scale plan time.")
@click.option("--verify", type=click.Choice(["off", "sampled", "all"]), default="off", show_default=True,
              help="Check read data against the content kvbench io wrote.")
@click.option("--destroy-data", metavar="DEV", default=None,
              help="Allow writing to raw block device DEV (must name the --target device).")
@click.option("--prefill/--no-prefill", default=None,
              help="Write the target before reading it (default: when kvbench just created it).")
@click.option("--export-iolog", type=OUTPUT, default=None,
              help="Write the exact I/O as a fio iolog v3 (replay with fio --read_iolog).")
@click.option("--results", "results_root", default="results", show_default=True, help="Results folder root.")
@click.option("--inject-fault", "faults", default=None, metavar="SPEC",
              help="Testing: eio@N, enospc@N, eio-every=N, corrupt@N, corrupt-every=N.")
@click.option("--status-interval", type=DURATION, default="1s", show_default=True,
              help="Refresh the live status line (terminal only) this often; whole seconds.")
@click.option("--eta", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="The live status line on stderr: auto = only on a terminal (as fio's --eta).")
@click.option("--output-format", type=click.Choice(["normal", "json", "json+"]), default="normal", show_default=True,
              help="json = --json; json+ adds every latency histogram's full bins (as fio's json+).")
@click.option("--write_lat_log", "--write-lat-log", "lat_log", default=None, metavar="PREFIX",
              help="Per-I/O latency logs in fio's format: PREFIX_lat.<worker>.log (time ms, latency ns, direction, "
                   "bs, offset, priority).")
@fio_compat
@force_option
@ray_options
@json_option
def io(target, rw, bs, qd, workers, reap_batch, size, runtime, rwmixread, seed, engine, rate_bytes, rate_iops, arrival,
       speed, verify, destroy_data, prefill, export_iolog, results_root, faults, status_interval, eta, output_format,
       lat_log, job_name, ray_address, inject_host_loss, as_json):
    """Measure a block pattern on a file, raw device or DRAM arena (like fio, on the kvbench engine).

    With --ray-address, on every host of the Ray cluster for every drive of --target A,B: one report side by
    side, with the spread between drives."""
    import warnings

    from kvbench import progress
    from kvbench.cli._common import FORCE_KEY
    from kvbench.engine.microbench import IoSpec, default_target, run_io
    from kvbench.engine.safety import allow_replace, check_output
    from kvbench.units import format_bytes, format_rate

    as_json = as_json or output_format != "normal"
    progress.set_mode("never" if as_json and eta == "auto" else eta)
    force = bool(click.get_current_context().meta.get(FORCE_KEY))
    for path in _lat_log_paths(lat_log, workers):       # the output guard, before any work (as OUTPUT options)
        check_output(path, force)
        if force:
            allow_replace(path)

    if target is None:
        import os
        os.makedirs(results_root, exist_ok=True)
    spec = IoSpec(target=target or default_target(results_root), rw=rw, bs=bs, qd=qd, workers=workers,
                  reap_batch=reap_batch, size=size,
                  runtime_s=runtime, rwmixread=rwmixread, seed=seed, engine=engine, rate_iops=rate_iops,
                  rate_bytes=rate_bytes,
                  arrival=arrival, speed=speed, verify=verify, destroy_data=destroy_data, prefill=prefill,
                  faults=faults)
    if ray_address:          # every host, every drive of --target A,B: one report side by side
        from dataclasses import asdict
        spec.validate()
        fan_out_cmd("io", ray_address, target, {"spec": {k: v for k, v in asdict(spec).items() if k != "target"}},
                    results_root, None, inject_host_loss, as_json)
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary, rd, result = run_io(spec, results_root=results_root, export_iolog=export_iolog,
                                     write_lat_log=lat_log, json_plus=output_format == "json+",
                                     status_interval_s=status_interval)
    for w in caught:
        click.echo(f"kvbench: warning: {w.message}", err=True)
    if target is None:                         # say where the default scratch file is, and that it stays
        import os
        scratch = os.path.abspath(spec.target)
        if os.path.exists(scratch):
            summary["scratch_file"] = scratch
            click.echo(f"kvbench: note: scratch file {scratch} ({format_bytes(os.path.getsize(scratch))}) is kept "
                       f"and reused by the next kvbench io without --target; remove it with: rm {scratch}", err=True)
    if job_name:
        summary["job_name"] = job_name
    if as_json:
        emit_json(summary)
    else:
        lat = summary["lat_us"]
        click.echo(f"{spec.rw} bs={format_bytes(spec.bs)} qd={spec.qd} workers={summary['workers']} "
                   f"engine={summary['engine']} target={summary['target']}")
        if summary["iops"]:
            click.echo(f"  iops={summary['iops']:.0f} bw={format_rate(summary['bw_bytes_per_s'])} "
                       f"ios={summary['ios']} runtime={summary['runtime_s']:.2f}s")
            click.echo("  lat (us): " + " ".join(f"{k}={v:.1f}" for k, v in lat.items() if v is not None))
        if summary.get("open_loop"):
            from kvbench.engine.io_report import rate_line
            click.echo(rate_line(summary["open_loop"]))
        host = summary.get("host", {})
        if host.get("device"):
            wa = host.get("write_amplification")
            click.echo(f"  host /dev/{host['device']}: read {format_bytes(host['read_bytes'])}, written "
                       f"{format_bytes(host['write_bytes'])}" + (f" (host WA {wa:.2f})" if wa else "") +
                       {True: ", O_DIRECT bypass verified", False: ", WARNING: fewer device reads than engine "
                        "reads (page cache?)", None: ""}[host.get("direct_io_verified")])
        if summary.get("lat_log"):
            click.echo(f"  latency logs: {', '.join(summary['lat_log']['paths'])}")
        click.echo(f"  run_dir={rd.path}")
    result.raise_for_status()


COMMANDS = [io]
