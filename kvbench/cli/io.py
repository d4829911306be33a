"""``kvbench io``: a fio-like micro-benchmark on the kvbench engine (O_DIRECT, libaio by default)."""

from __future__ import annotations

import click

from kvbench.cli._common import (DURATION, OUTPUT, SIZE, emit_json, fan_out_cmd, force_option, json_option,
                                 ray_options)


@click.command("io")
@click.option("--target", default=None, metavar="PATH",
              help="File, raw block device or dram:<size> (default: a scratch file results/io-scratch.dat).")
@click.option("--rw", default="randread", show_default=True,
              type=click.Choice(["read", "write", "randread", "randwrite", "randrw", "rw"]))
@click.option("--bs", type=SIZE, default="4k", show_default=True, help="Block size (multiple of the LBA size).")
@click.option("--qd", type=int, default=32, show_default=True, help="Queue depth per worker.")
@click.option("--workers", type=int, default=1, show_default=True, help="Worker processes, each with --qd.")
@click.option("--reap-batch", type=int, default=1, show_default=True,
              help="Most completions taken per io_getevents (fio's iodepth_batch_complete_max): 1 reaps one and "
                   "resubmits one, keeping --qd in flight as fio does; up to --qd reaps in bursts (fewer syscalls, "
                   "fewer I/Os in flight).")
@click.option("--size", type=SIZE, default=None, help="Bytes of the target to use (new files: 1GiB).")
@click.option("--runtime", type=DURATION, default="10s", show_default=True,
              help="Run time (e.g. 10s); 0 = one pass over --size.")
@click.option("--rwmixread", type=int, default=70, show_default=True, help="Percent reads for randrw/rw.")
@click.option("--seed", type=int, default=1, show_default=True, help="The offset sequence depends only on it.")
@click.option("--engine", default="libaio", show_default=True,
              type=click.Choice(["libaio", "psync", "dram", "null"]))
@click.option("--rate", "rate_iops", type=float, default=None,
              help="Open loop: issue at this many IOPS (else closed loop keeps --qd full).")
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
@force_option
@ray_options
@json_option
def io(target, rw, bs, qd, workers, reap_batch, size, runtime, rwmixread, seed, engine, rate_iops, arrival, speed, verify,
       destroy_data, prefill, export_iolog, results_root, faults, ray_address, inject_host_loss, as_json):
    """Measure a block pattern on a file, raw device or DRAM arena (like fio, on the kvbench engine).

    With --ray-address, on every host of the Ray cluster for every drive of --target A,B: one report side by
    side, with the spread between drives."""
    import warnings

    from kvbench.engine.microbench import IoSpec, default_target, run_io
    from kvbench.units import format_bytes, format_rate

    if target is None:
        import os
        os.makedirs(results_root, exist_ok=True)
    spec = IoSpec(target=target or default_target(results_root), rw=rw, bs=bs, qd=qd, workers=workers,
                  reap_batch=reap_batch, size=size,
                  runtime_s=runtime, rwmixread=rwmixread, seed=seed, engine=engine, rate_iops=rate_iops,
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
        summary, rd, result = _run(run_io, spec, results_root, export_iolog)
    for w in caught:
        click.echo(f"kvbench: warning: {w.message}", err=True)
    if target is None:                         # say where the default scratch file is, and that it stays
        import os
        scratch = os.path.abspath(spec.target)
        if os.path.exists(scratch):
            summary["scratch_file"] = scratch
            click.echo(f"kvbench: note: scratch file {scratch} ({format_bytes(os.path.getsize(scratch))}) is kept "
                       f"and reused by the next kvbench io without --target; remove it with: rm {scratch}", err=True)
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
        host = summary.get("host", {})
        if host.get("device"):
            wa = host.get("write_amplification")
            click.echo(f"  host /dev/{host['device']}: read {format_bytes(host['read_bytes'])}, written "
                       f"{format_bytes(host['write_bytes'])}" + (f" (host WA {wa:.2f})" if wa else "") +
                       {True: ", O_DIRECT bypass verified", False: ", WARNING: fewer device reads than engine "
                        "reads (page cache?)", None: ""}[host.get("direct_io_verified")])
        click.echo(f"  run_dir={rd.path}")
    result.raise_for_status()


def _run(run_io, spec, results_root, export_iolog):
    return run_io(spec, results_root=results_root, export_iolog=export_iolog)


COMMANDS = [io]
