"""``kvbench prefill``: measure a prefill compute profile for a model preset (torch; CUDA or CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvbench.cli._common import OUTPUT, emit_json, force_option, json_option
from kvbench.errors import SpecError


def _lengths(ctx, param, value):
    if value is None:
        return None
    from kvbench.compute.prefill import validate_lengths
    return validate_lengths(value.split(","))


@click.command("prefill")
@click.option("--model", "model_name", required=True, help="Model preset (kvbench models) or TOML path.")
@click.option("--device", default=None, help="cpu or cuda[:N] (default: cuda when torch sees one, else cpu).")
@click.option("--lengths", callback=_lengths, default=None,
              help="Prompt lengths in tokens, comma-separated (default cpu 128..1024, cuda 1024..16384).")
@click.option("--layers", type=int, default=None,
              help="Layers to build; times are scaled per layer kind to the full model (default: cpu 2, cuda all "
                   "that fit in half the free memory).")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default=None,
              help="Compute dtype (default: bf16 on cuda, fp32 on cpu).")
@click.option("--warmup", type=int, default=None, help="Warm-up passes per length (default cpu 1, cuda 3).")
@click.option("--reps", type=int, default=None, help="Timed repetitions per length (default cpu 3, cuda 10).")
@click.option("--copy/--no-copy", "measure_copy", default=True, show_default=True,
              help="On CUDA, also measure pinned host->device copy per block size (the L2->L1 tier).")
@click.option("--name", default=None, help="Profile name (default <model>-<device>-measured).")
@click.option("--out", "out_file", type=OUTPUT, default=None,
              help="Also write the profile here (.toml or .json), e.g. workloads/compute/<name>.toml.")
@click.option("--results", default="results", show_default=True, help="Folder for run folders.")
@click.option("--threads", type=int, default=None,
              help="CPU threads for torch (default: torch's; 1 is steadier on a shared machine).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for the random weights and tokens.")
@force_option
@json_option
def prefill_cmd(model_name, device, lengths, layers, dtype, warmup, reps, measure_copy, name, out_file, results,
                threads, seed, as_json):
    """Measure prefill time over prompt lengths with random weights; fit T(n) = a + b*n + c*n^2 and save a
    measured compute profile (profile.toml in a run folder) for `kvbench check`."""
    from kvbench.compute.prefill import DEFAULT_LENGTHS, prepare_prefill, run_prefill
    from kvbench.compute.profile import save_profile
    from kvbench.compute.stack import require_torch
    from kvbench.metrics.run import RunDir
    from kvbench.spec.models import load_model
    from kvbench.units import format_duration, format_rate

    spec = load_model(model_name)
    if out_file and Path(out_file).suffix not in (".toml", ".json"):
        raise SpecError(f"--out {out_file}: the profile file must end in .toml or .json", "e.g. --out prof.toml")
    torch = require_torch()
    dev_kind = (device or ("cuda" if torch.cuda.is_available() else "cpu")).split(":")[0]
    setup = prepare_prefill(spec, lengths or DEFAULT_LENGTHS.get(dev_kind, DEFAULT_LENGTHS["cpu"]), device=device,
                            dtype=dtype, layers=layers, warmup=warmup, reps=reps, seed=seed, name=name,
                            measure_copy=measure_copy, threads=threads)
    rd = RunDir.create("prefill", setup.to_dict(), root=results)
    done = []

    def rows():
        return [{"tokens": r.tokens, "seconds_median": r.median_s, "seconds": list(r.model_seconds),
                 "stack_seconds": list(r.stack_seconds)} for r in done]

    from kvbench.progress import Line
    from kvbench.progress import echo as say

    line = Line(f"prefill {spec.name}", sum(setup.lengths), "tokens")      # lengths timed, in prompt tokens

    def progress(r):
        done.append(r)
        rd.write_summary({"kind": "prefill", "run_dir": str(rd.path), "model": spec.name, "lengths": rows()},
                         status="partial")
        if not as_json:
            if len(done) == 1:
                say(f"prefill {spec.name} on {setup.device} ({setup.dtype}, {setup.plan.layers_measured}/"
                    f"{setup.plan.layers_total} layers): lengths {','.join(map(str, setup.lengths))}", sys.stdout)
            say(f"  {r.tokens:>7} tokens  {format_duration(r.median_s):>10}  {r.tokens / r.median_s:>12,.0f} tok/s",
                sys.stdout)
        line.update(sum(x.tokens for x in done))

    try:
        line.update(0)
        with line:
            profile, _ = run_prefill(setup, progress)
    except BaseException as e:  # keep what was measured, marked as such, then let the CLI report it
        rd.write_summary({"kind": "prefill", "run_dir": str(rd.path), "model": spec.name, "lengths": rows(),
                          "error": str(e)}, status="interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    prof_path = save_profile(profile, rd.path / "profile.toml")
    if out_file:
        save_profile(profile, out_file)
    summary = {"kind": "prefill", "run_dir": str(rd.path), "profile": str(prof_path), "profile_out": out_file,
               **profile.to_dict(), "lengths": rows()}
    rd.write_summary(summary, status="complete")
    summary["status"] = "complete"
    if as_json:
        emit_json(summary)
        return
    f = profile.fit
    click.echo(f"fit: T(n) = {f.a:.4g} + {f.b:.4g}*n + {f.c:.4g}*n^2 s  (relative rms {f.rel_rms:.2%})")
    if f.rel_rms > 0.10:
        click.echo(f"warning: the fit misses the points by {f.rel_rms:.0%} rms: the timings are noisy (a busy "
                   "machine?); re-measure with " + ("more --reps or longer --lengths" if threads == 1 or
                                                     not str(setup.device).startswith("cpu") else
                                                     "more --reps, longer --lengths or --threads 1"))
    click.echo(f"device: {profile.device}, {profile.dtype}; {profile.notes}")
    if profile.copy is not None:
        click.echo(f"host->device copy (pinned): {format_rate(profile.copy.bandwidth_bytes_per_s)}, "
                   f"latency {format_duration(profile.copy.latency_s)}")
    click.echo(f"profile: {prof_path}" + (f" (and {out_file})" if out_file else ""))
    click.echo(f"run_dir: {rd.path}")


COMMANDS = [prefill_cmd]
