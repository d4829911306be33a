"""``kvbench qualify PROFILE --target DEV``: precondition, run the profile's workloads, pass/fail per criterion."""

from __future__ import annotations

import click

from kvbench.cli._common import (OUTPUT, SIZE, emit_json, fan_out_cmd, force_option, json_option,
                                 fields_option, key_values, ray_options)


@click.command("qualify")
@click.argument("profile")
@click.option("--target", required=True, help="Drive under test: a raw block device or a file (created if absent).")
@click.option("--size", type=SIZE, default=None, help="Bytes of the target to use (required for a new file).")
@click.option("--destroy-data", default=None, metavar="DEV",
              help="Allow writing to this raw block device (must name --target): its data is destroyed.")
@fields_option("--drive", "drive", multiple=True, convert=True, example="rated_dwpd=3", parse=key_values("--drive"),
               open_keys="a profile may name its own drive facts: validate_drive refuses the rest once it is read",
               metavar="KEY=VALUE",
              help="Override the profile's [drive] facts, e.g. --drive rated_dwpd=3 (repeatable).")
@click.option("--skip-precondition", is_flag=True,
              help="Skip the steady-state rounds (drive already conditioned); the region is still written once "
                   "before it is read, and criteria on steady state are listed as skipped.")
@click.option("--quick", is_flag=True,
              help="A first look in minutes: every workload at most 10 s (a KV replay: the fewest requests that give "
                   "its criteria their I/Os), the precondition one short round; "
                   "the verdict says it was shortened.")
@click.option("--results", "results_root", default="results", show_default=True, help="Folder for run folders.")
@click.option("-o", "--output", default=None, type=OUTPUT, help="HTML report path.")
@force_option
@ray_options
@json_option
def qualify_cmd(profile, target, size, destroy_data, drive, skip_precondition, quick, results_root, output,
                ray_address, inject_host_loss, as_json):
    """Qualify a drive against PROFILE (a name in workloads/qualify or a .toml path).

    Preconditions (sequential fill, random writes until the SNIA PTS steady-state rule holds), runs the
    profile's workloads, judges each criterion (pass, fail, skipped, not-measured), writes the run folder and
    an HTML report. Verdict pass (exit 0) only when every criterion that ran passed and none went unmeasured;
    fail or partial exit 1.
    """
    from kvbench.qualify.job import QualificationFailed, qualify
    from kvbench.qualify.profile import load_qualify_profile

    prof = load_qualify_profile(profile)
    if ray_address:      # every host, every drive of --target A,B: one report side by side
        fan_out_cmd("qualify", ray_address, target, {"profile": profile, "kwargs": dict(
            size=size, destroy_data=destroy_data, skip_precondition=skip_precondition, drive=drive, quick=quick)},
            results_root, output, inject_host_loss, as_json)
        return
    summary, run_dir = qualify(prof, target, size=size, destroy_data=destroy_data, results_root=results_root,
                               report_path=output, skip_precondition=skip_precondition, drive=drive, quick=quick)
    v = summary["verdict"]
    if as_json:
        emit_json(summary)
    else:
        n = summary["outcomes"]
        extra = "".join(f", {n[k]} {k}" for k in ("fail", "not-measured", "skipped") if n[k])
        click.echo(f"{v.upper()}{' (shortened: --quick)' if quick else ''}: {n['pass']}/{summary['criteria']} "
                   f"criteria of {prof.name} passed{extra}; report: {summary.get('report')}; run_dir: {run_dir}")
        if summary["skipped"]:
            click.echo(f"  skipped: {'; '.join(summary['skipped'])}")
        cap = summary.get("drive_capacity") or {}
        if cap.get("bytes"):
            from kvbench.units import format_bytes
            click.echo(f"  DWPD counted against {format_bytes(cap['bytes'])}: {cap['source']}")
    if v != "pass":
        bad = [f"{r['name']} ({r['outcome']})" for r in summary["results"] if r["outcome"] in ("fail", "not-measured")]
        raise QualificationFailed(f"{prof.name}: verdict {v}: {len(bad)} criteria not passed: {'; '.join(bad[:4])}",
                                  f"see the report {summary.get('report')}")


COMMANDS = [qualify_cmd]
