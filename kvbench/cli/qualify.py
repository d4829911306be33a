"""``kvbench qualify PROFILE --target DEV``: precondition, run the profile's workloads, pass/fail per criterion."""

from __future__ import annotations

import click

from kvbench.cli._common import SIZE, emit_json, fan_out_cmd, json_option, key_value_callback, ray_options


@click.command("qualify")
@click.argument("profile")
@click.option("--target", required=True, help="Drive under test: a raw block device or a file (created if absent).")
@click.option("--size", type=SIZE, default=None, help="Bytes of the target to use (required for a new file).")
@click.option("--destroy-data", default=None, metavar="DEV",
              help="Allow writing to this raw block device (must name --target): its data is destroyed.")
@click.option("--drive", "drive", multiple=True, callback=key_value_callback("rated_dwpd=3"), metavar="KEY=VALUE",
              help="Override the profile's [drive] facts, e.g. --drive rated_dwpd=3 (repeatable).")
@click.option("--skip-precondition", is_flag=True, help="Skip the fill and steady-state rounds (drive already conditioned).")
@click.option("--results", "results_root", default="results", show_default=True, help="Folder for run folders.")
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False), help="HTML report path.")
@ray_options
@json_option
def qualify_cmd(profile, target, size, destroy_data, drive, skip_precondition, results_root, output, ray_address,
                inject_host_loss, as_json):
    """Qualify a drive against PROFILE (a name in workloads/qualify or a .toml path).

    Preconditions (sequential fill, random writes until the SNIA PTS steady-state rule holds), runs the
    profile's workloads, judges each criterion, writes the run folder and an HTML report. Exit status 0 when
    every criterion passes, 1 when any fails.
    """
    from kvbench.qualify.job import QualificationFailed, qualify
    from kvbench.qualify.profile import load_qualify_profile

    prof = load_qualify_profile(profile)
    if ray_address:      # every host, every drive of --target A,B: one report side by side
        fan_out_cmd("qualify", ray_address, target, {"profile": profile, "kwargs": dict(
            size=size, destroy_data=destroy_data, skip_precondition=skip_precondition, drive=drive)},
            results_root, output, inject_host_loss, as_json)
        return
    summary, run_dir = qualify(prof, target, size=size, destroy_data=destroy_data, results_root=results_root,
                               report_path=output, skip_precondition=skip_precondition, drive=drive)
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"{'PASS' if summary['passed'] else 'FAIL'}: {summary['criteria_passed']}/{summary['criteria']} "
                   f"criteria of {prof.name}; report: {summary.get('report')}; run_dir: {run_dir}")
    if not summary["passed"]:
        raise QualificationFailed(f"{prof.name}: {len(summary['failed'])} criteria failed: "
                                  f"{'; '.join(summary['failed'][:4])}", f"see the report {summary.get('report')}")


COMMANDS = [qualify_cmd]
