"""``kvbench run``: the main job. Built-in defaults: an hour of the workload model fitted to the shipped Mooncake
synthetic trace (stationary, unlike the trace: ``DEFAULT_TRACE``), a model preset,
DRAM and NVMe tiers sized to this machine, a scratch store under results/; it replays, analyses and writes the
HTML report. The trace's footprint (terabytes) cannot fit a test disk, so the replay is key-sampled
(miniature simulation) at the rate that puts the sized store at the exact curve's knee: its hit ratios are
those of a knee-sized cache (:mod:`kvbench.analysis.curves.miniature`).

The job is :func:`kvbench.job.run_job`: the trace read once and its exact curve computed once, handed in-process
to the steps ``mrc`` (the exact hit-ratio curve), ``replay kv --dry-run`` (the whole trace through the tiers at
full size: the hit ratios and byte volumes of the answer, whatever the replay's duration), ``plan``
(steady-state capacity, DWPD and residence at a stated deployment, and the retention sweep) and ``check`` (load
vs recompute per tier with a shipped published prefill profile); ``replay kv`` (real DRAM and O_DIRECT I/O for
as much of the trace as ``--duration`` allows) runs as a child process; then ``report``. Each step writes the
files and run folder its command writes, and is recorded with that command's line, so it can be rerun alone.
This module is the command's options and its output.
"""

from __future__ import annotations

import click

from kvbench.cli._common import (DURATION, OUTPUT, SIZE, WARMUP, emit_json, fields_option, force_option, json_option,
                                 lazy_parser)
# the job's names, where the command's users and tests have found them
from kvbench.job import (DEFAULT_DEPLOYMENT, DEFAULT_MODEL, DEFAULT_PROFILE, DEFAULT_TRACE, RETENTIONS,  # noqa: F401
                         TierSizes, _l3_room, _pick_profile, _remove_store_behind, _replay_progress, _trace_path,
                         first_byte_notes, job_answer, size_tiers)


@click.command("run")
@click.option("--trace", default=DEFAULT_TRACE, show_default=True,
              help="Trace file, built-in trace name (e.g. mooncake-synthetic) or gen:MODEL,duration=D workload model.")
@click.option("--model", default=DEFAULT_MODEL, show_default=True, help="Model preset (KV bytes per token).")
@click.option("--profile", "compute_profile", default=None,
              help="Compute profile for load vs recompute (default: a shipped profile of the model, measured before "
                   f"published; {DEFAULT_PROFILE} as a stand-in when the model has none).")
@click.option("--l2", type=SIZE, default=None, help="L2 DRAM capacity (default: sized to free memory and the trace).")
@click.option("--l3", "l3_path", default=None, metavar="PATH",
              help="L3 store: file or raw block device (default: a scratch file in the job folder, removed after).")
@click.option("--l3-capacity", type=SIZE, default=None, help="L3 capacity (default: sized to free disk and the trace).")
@click.option("--destroy-data", default=None, metavar="DEV", help="Allow writing to the raw block device given as --l3.")
@click.option("--duration", type=DURATION, default="60s", show_default=True,
              help="Wall-clock budget of the replay (closed loop: as fast as the devices allow).")
@click.option("--max-requests", type=int, default=None, help="Replay only the first N requests.")
@click.option("--sample-keys", default="auto", show_default=True, metavar="auto|RATE",
              help="Key sampling of the replay: auto puts the store at the hit-ratio curve's knee (rate = store / "
                   "knee); a fraction in (0, 1] fixes it (1: none). L2/L3 sizes stay what goes on the device.")
@fields_option("--deployment", default=DEFAULT_DEPLOYMENT, show_default=True, metavar="SPEC",
               example="gpus=8,drives=8,drive_capacity=7.68TB,utilization=0.5",
               parse=lazy_parser("kvbench.analysis.deployment", "parse_deployment"),
              help="The server the answer is scaled to (kvbench plan --deployment): gpus=G,drives=D,"
                   "drive_capacity=CAP,utilization=U.")
@click.option("--warmup", type=WARMUP, default=0.0, show_default=True, metavar="FRACTION|TIME",
              help="Requests that only warm the cache (kvbench plan --warmup; the mrc and plan steps take it): a "
                   "fraction of them (0.5) or a time on the trace's clock (136.3s: those before it, e.g. a "
                   "stationary tail's start from kvbench trace stats).")
@click.option("--retentions", default=RETENTIONS, show_default=True,
              help="Retention times for the DWPD-vs-retention sweep (comma list; empty: no sweep).")
@click.option("--probe-seconds", type=float, default=1.0, show_default=True,
              help="Seconds of each tier probe's bandwidth phase (its first-byte phase runs at most half of it).")
@click.option("--link", default=None, metavar="NAME",
              help="L2 -> GPU link model (workloads/links: pcie-gen5-x16, pcie-gen4-x16) [the profile's measured "
                   "pinned copy when it has one, else pcie-gen5-x16]: host memcpy is never a load path.")
@click.option("--probe-fault", default=None, hidden=True, metavar="SPEC",
              help="Inject an engine fault into the tier probes (tests: e.g. stall-every=1:1.5s).")
@click.option("--keep-store", is_flag=True, help="Keep the scratch L3 store file after the job.")
@click.option("--results", "results_root", default="results", show_default=True, help="Folder for run folders.")
@click.option("-o", "--output", default=None, type=OUTPUT, help="HTML report (default reports/<run>.html).")
@force_option
@json_option
def run_cmd(trace, model, compute_profile, l2, l3_path, l3_capacity, destroy_data, duration, max_requests, sample_keys,
            deployment, warmup, retentions, probe_seconds, link, probe_fault, keep_store, results_root, output,
            as_json):
    """The main job: replay a trace through DRAM and NVMe tiers, analyse capacity, DWPD and load vs recompute,
    and write one HTML report. Everything has a default: `kvbench run` alone takes a few minutes."""
    from kvbench.job import JobOptions, run_job

    res = run_job(JobOptions(trace=trace, model=model, compute_profile=compute_profile, l2=l2, l3_path=l3_path,
                             l3_capacity=l3_capacity, destroy_data=destroy_data, duration=duration,
                             max_requests=max_requests, sample_keys=sample_keys, deployment=deployment,
                             warmup=warmup,
                             retentions=retentions, probe_seconds=probe_seconds, link=link, probe_fault=probe_fault,
                             keep_store=keep_store, results_root=results_root, output=output))
    if as_json:
        emit_json(res.folder.summary.data)
    else:
        if res.folder.answer is not None:
            from kvbench.analysis.answer import text_table

            click.echo(text_table(res.folder.answer))
        click.echo(f"report: {res.report}\nrun_dir: {res.run_dir}")
    if res.failed:
        from kvbench.errors import KvbenchError

        raise KvbenchError(f"the run is partial: step(s) {', '.join(res.failed)} failed "
                           f"({'; '.join(s.get('error') or 'no message' for s in res.steps if not s['ok'])[:300]})",
                           f"the report {res.report} shows what was measured; rerun after fixing the step")


COMMANDS = [run_cmd]
