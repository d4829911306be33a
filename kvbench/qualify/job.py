"""``kvbench qualify``: precondition a drive, run a profile's workloads on it, judge the criteria, report.

Everything lands in one run folder (``results/qualify-.../``): ``steady_state.json`` (the preconditioning
rounds and the PTS verdict), ``qualify.json`` (an outcome per criterion), ``summary.json`` (with ``parts``:
each workload's own run folder, all under ``steps/`` of this folder) and the HTML report. The summary is
rewritten after every step, so a killed qualification still says how far it got.

What the job guarantees before a criterion may pass (``criteria`` judges the rest):

- every byte of the test region is written before any workload reads it: the precondition's sequential fill,
  or, when the precondition is skipped or absent, one sequential pass (``written_by``);
- every workload gets the one ``--destroy-data`` the user gave, the test region (``--size``), and this run's
  folder for its results; the replay's store fits the region (``--l3-region``: its cache is the region less its spare slots);
- every criterion on a replay's tier latency can be measured: before any I/O the replay is simulated at the
  region's capacities and run for at least the requests that give the percentile its I/Os (``sizing``; under
  ``--quick`` exactly those), or the job refuses, naming the smallest region that gives them;
- the DWPD criterion reads the deployment DWPD per drive at the whole drive's capacity (``{drive_capacity}``:
  ``--drive capacity=...``, else the whole device holding the target), never the test region's.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from pathlib import Path

from kvbench.errors import KvbenchError
from kvbench.qualify.criteria import evaluate, verdict
from kvbench.qualify.profile import KIND_COMMANDS, PRECONDITION, Precondition, QualifyProfile, validate_drive
from kvbench.qualify.sizing import size_steps
from kvbench.qualify.steps import kvbench_argv, run_step
from kvbench.units import format_bytes, parse_duration

QUICK_S = 10.0                  # --quick: no workload runs longer than this, the precondition one round of it
QUICK_ENGRAM_TOKENS = 32768     # --quick: the Engram replay's token stream and timed steps (its run time
QUICK_ENGRAM_STEPS = 256        # scales with them; it has no duration option)


class QualificationFailed(KvbenchError):
    """The drive did not meet the profile: some criterion failed or was not measured (the report says which)."""

    exit_code = 1


def _say(msg: str) -> None:
    from kvbench.progress import echo
    echo(f"[qualify {time.strftime('%H:%M:%S')}] {msg}")


def expected_seconds(w, quick: float | None = None) -> float | None:
    """How long a workload's step should take (its runtime or duration), for the job's ETA; None: unknown."""
    key = {"io": "runtime", "replay-kv": "duration"}.get(w.kind)
    value = w.options.get(key) if key else None
    if value in (None, ""):
        return quick if quick and w.kind in QUICK else None
    try:
        v = parse_duration(value, what=key)
    except KvbenchError:
        return None
    return min(v, quick) if quick else v


def _substitute(value, ctx: dict):
    if isinstance(value, str):
        for k, v in ctx.items():
            value = value.replace("{" + k + "}", str(v))
        return value
    if isinstance(value, list):
        return [_substitute(v, ctx) for v in value]
    return value


# --- what each kind of step is given: the target's region, the one --destroy-data, this run's folder ------
def _io_options(opts: dict, ctx: dict) -> None:
    opts.setdefault("target", ctx["target"])
    if ctx["size"]:
        opts.setdefault("size", ctx["size"])
    if ctx["destroy_data"] and str(opts.get("rw", "")).endswith(("write", "rw")):
        opts.setdefault("destroy_data", ctx["destroy_data"])


def _replay_kv_options(opts: dict, ctx: dict) -> None:
    if ctx["destroy_data"] and opts.get("l3") == ctx["target"]:
        opts.setdefault("destroy_data", ctx["destroy_data"])


def _replay_engram_options(opts: dict, ctx: dict) -> None:
    if opts.get("target") == ctx["target"]:
        if ctx["size"]:
            opts.setdefault("scale_to", ctx["size"])       # the table fits the test region, stated in its results
        if ctx["destroy_data"]:
            opts.setdefault("destroy_data", ctx["destroy_data"])


def _plan_options(opts: dict, ctx: dict) -> None:
    """The plan is judged against the drive under test: its rating (the profile's or ``--drive rated_dwpd``) is
    the deployment's reference class's, with the reference WAF of the price class nearest that rating
    (:func:`kvbench.analysis.cost.class_for_rating`), unless the profile names a class itself."""
    rated = (ctx.get("drive") or {}).get("rated_dwpd")
    if rated is None or opts.get("ssd_class"):
        return
    from kvbench.analysis.cost import DEFAULT_PRICES, class_for_rating, load_prices

    given = opts.get("price") or []
    given = [given] if isinstance(given, str) else list(given)
    cls = class_for_rating(load_prices(opts.get("prices") or DEFAULT_PRICES, given), float(rated))
    opts["ssd_class"] = cls
    opts["price"] = given + [f"ssd.{cls}.dwpd={float(rated):g}"]


STEP_OPTIONS = {"io": _io_options, "replay-kv": _replay_kv_options, "replay-engram": _replay_engram_options,
                "plan": _plan_options}
TAKES_RESULTS = {"io", "replay-kv", "replay-engram"}


def _min_duration(value, cap: float) -> str:
    v = parse_duration(value, what="runtime") if value not in (None, "") else cap
    return f"{min(v, cap):g}s" if v > 0 else f"{cap:g}s"


def _quick_engram(o: dict, seconds: float) -> None:
    o["tokens"] = min(int(o.get("tokens") or QUICK_ENGRAM_TOKENS), QUICK_ENGRAM_TOKENS)
    o["steps"] = min(int(o.get("steps") or QUICK_ENGRAM_STEPS), QUICK_ENGRAM_STEPS)


#: --quick: how each kind of step is shortened (at most ``seconds`` of I/O; plan and check do no I/O)
QUICK = {
    "io": lambda o, sec: o.update(runtime=_min_duration(o.get("runtime"), sec)),
    "replay-kv": lambda o, sec: o.update(duration=_min_duration(o.get("duration"), sec)),
    "replay-engram": _quick_engram,
}


def workload_argv(w, *, target: str, size: int | None, destroy_data: str | None, results_root: str,
                  run_dirs: dict, drive_capacity: int | None = None, quick: float | None = None,
                  drive: dict | None = None, sized: dict | None = None) -> list[str]:
    """The command line of one workload: the profile's options with placeholders filled ({target}, {size},
    {drive_capacity}, {results}, {run:NAME} = an earlier workload's run folder), plus what the step needs
    to run on the drive under test (STEP_OPTIONS), its results folder, ``quick`` (seconds: --quick) and
    ``sized``: options :mod:`kvbench.qualify.sizing` set so that its criteria can be measured (under --quick,
    ``max_requests`` replaces the duration cap)."""
    ctx = {"target": target, "size": size or "", "results": results_root,
           "drive_capacity": drive_capacity or "", **{f"run:{k}": v for k, v in run_dirs.items()}}
    opts = {k: _substitute(v, ctx) for k, v in w.options.items()}
    STEP_OPTIONS.get(w.kind, lambda o, c: None)(opts, {**ctx, "destroy_data": destroy_data, "drive": drive or {}})
    if w.kind in TAKES_RESULTS:
        opts.setdefault("results", results_root)
    if quick and w.kind in QUICK:
        QUICK[w.kind](opts, float(quick))
    if sized:
        if "max_requests" in sized:
            opts.pop("duration", None)
        opts.update(sized)
    return kvbench_argv(KIND_COMMANDS[w.kind], [_substitute(a, ctx) for a in w.args], opts)


# --- the drive ---------------------------------------------------------------------------------------------
def _target_size(target: str) -> int | None:
    """Bytes of an existing file or block device (None when absent: then --size must be given)."""
    try:
        fd = os.open(target, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END) or None
    finally:
        os.close(fd)


def drive_capacity(target: str, drive: dict, given: set) -> tuple[int | None, str]:
    """The capacity DWPD is counted against: ``--drive capacity``, else the whole device holding the target
    (a partition's or a file's whole disk), never the test region. Returns (bytes, where it came from)."""
    from kvbench.metrics.environment import devno_name, whole_disk

    if drive.get("capacity"):
        src = "--drive capacity" if "capacity" in given else "the profile's [drive] capacity"
        return int(drive["capacity"]), src
    path = target if os.path.exists(target) else (os.path.dirname(os.path.abspath(target)) or ".")
    st = os.stat(path)
    name = devno_name(st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev)
    if not name:
        return None, "unknown (give --drive capacity=...)"
    disk = whole_disk(name)
    try:
        sectors = int((Path("/sys/block") / disk / "size").read_text())
    except (OSError, ValueError):
        return None, f"unknown: /sys/block/{disk}/size unreadable (give --drive capacity=...)"
    return sectors * 512, f"the whole device /dev/{disk} holding {target}"


def _reads(profile: QualifyProfile) -> bool:
    return any(w.kind != "plan" and w.kind != "check" for w in profile.workloads)


def _shortened(pre: Precondition, seconds: float) -> Precondition:
    from dataclasses import replace

    return replace(pre, fill_passes=min(pre.fill_passes, 1.0) or 1.0, round_s=min(pre.round_s, seconds),
                   max_rounds=1, min_rounds=1)


# --- the job -----------------------------------------------------------------------------------------------
def qualify(profile: QualifyProfile, target: str, *, size: int | None = None, destroy_data: str | None = None,
            results_root: str = "results", report_path=None, skip_precondition: bool = False,
            drive: dict | None = None, quick: bool = False, quick_s: float = QUICK_S,
            progress=_say) -> tuple[dict, Path]:
    """Run the qualification; returns (summary, run folder). Raises nothing for a failed drive: the caller
    decides the exit code from ``summary["verdict"]``. ``quick``: every workload at most ``quick_s`` seconds
    and the precondition one round of it."""
    from kvbench.engine.targets import open_target
    from kvbench.metrics.results import read_run
    from kvbench.metrics.run import RunDir
    from kvbench.report import build_report, default_report_path

    given = dict(drive or {})
    named = set(profile.drive) | {str(c.threshold)[6:] for c in profile.criteria
                                  if isinstance(c.threshold, str) and c.threshold.startswith("drive.")}
    drive_facts = {**profile.drive, **validate_drive(given, named=named)}   # bad --drive values: before any I/O
    size = size or _target_size(target)
    cap, cap_source = drive_capacity(target, drive_facts, set(given))

    def argv_of(w, run_dirs=None, results=results_root, sized=None):
        return workload_argv(w, target=target, size=size, destroy_data=destroy_data, results_root=results,
                             run_dirs=run_dirs or {}, drive_capacity=cap, quick=quick_s if quick else None,
                             drive=drive_facts, sized=sized)

    # every refusal comes before a run folder is made or a byte written: first those about an existing target
    # itself (safety, ownership, O_DIRECT, lock; nothing created or grown), then each criterion measurable on
    # this region (else the smallest region that is), then a new file's (its size, free space)
    if os.path.exists(target):
        open_target(target, write=True, destroy_data=destroy_data).close()
    sized = size_steps(profile, size, quick=quick, argv_of=argv_of)
    open_target(target, size=size, write=True, destroy_data=destroy_data).close()
    rd = RunDir.create("qualify", {"profile": profile.name, "profile_path": profile.path, "target": target,
                                   "size": size, "skip_precondition": skip_precondition, "quick": quick,
                                   "drive": drive_facts, "drive_capacity": cap,
                                   "drive_capacity_source": cap_source},
                       root=results_root)
    steps_root = str((rd.path / "steps").resolve())
    results: dict = {}
    parts: dict = {}
    steps: list = []
    skipped: dict = {}
    head = {"profile": profile.name, "target": target, "region_bytes": size, "quick": quick,
            "drive_capacity": {"bytes": cap, "source": cap_source},
            **({"sizing": {k: s.to_dict() for k, s in sized.items()}} if sized else {})}

    def save(status: str, extra: dict | None = None) -> None:
        rd.write_summary({**head, "parts": parts, "steps": steps, **(extra or {})}, status=status)

    from kvbench.progress import Steps
    from kvbench.replay.live import step_detail
    runs_pre = profile.precondition is not None and not skip_precondition or _reads(profile)
    meter = Steps("qualify", [None] * runs_pre + [None if w.name in sized and sized[w.name].options else
                                                  expected_seconds(w, quick_s if quick else None)
                                                  for w in profile.workloads])
    for s in sized.values():
        progress(f"sized {s.line()}")
    try:
        pre = profile.precondition
        if skip_precondition and pre is not None:
            skipped[PRECONDITION] = "the steady-state rounds were skipped (--skip-precondition)"
            pre = None
        elif quick and pre is not None:
            skipped[PRECONDITION] = f"--quick: one {quick_s:g} s round cannot show steady state"
            pre = _shortened(pre, quick_s)
        if pre is None and _reads(profile):
            # nothing may be read that was not written: one sequential pass over the region
            pre = Precondition(fill_passes=1.0, max_rounds=0, min_rounds=0)
        if pre is not None:
            meter.start(PRECONDITION)
            results[PRECONDITION] = _precondition(target, size, destroy_data, pre, rd, progress,
                                                  steady=PRECONDITION not in skipped)
            steps.append({"name": PRECONDITION, "ok": True, "seconds": results[PRECONDITION]["seconds"],
                          "steady_state": (results[PRECONDITION].get("steady_state") or {}).get("reached")})
            head["written_by"] = "precondition fill" if profile.precondition is not None and \
                PRECONDITION not in skipped else "one sequential pass before the workloads"
            save("running")
        for w in profile.workloads:
            argv = argv_of(w, run_dirs=parts, results=steps_root,
                           sized=sized[w.name].options if w.name in sized else None)
            meter.start(w.name)
            missing = sorted({m for a in argv for m in re.findall(r"\{run:([^}]+)\}", a)})
            if missing:       # an earlier step it reads produced no run folder: do not feed it the placeholder
                err = f"needs the run folder of {', '.join(missing)}, which did not produce one"
                results[w.name] = {"error": err}
                steps.append({"name": w.name, "ok": False, "seconds": 0.0, "error": err, "status": None,
                              "run_dir": None, "argv": list(argv[3:])})
                progress(f"  {w.name}: not run: {err}")
                save("running")
                continue
            progress(f"workload {w.name} ({w.kind}): kvbench {' '.join(argv[3:])}")
            since = time.time()
            st = run_step(w.name, argv, heartbeat=lambda _s: meter.tick(step_detail(steps_root, since)))
            results[w.name] = st.result if st.result is not None else {"error": st.error}
            if st.error and st.result is not None:
                results[w.name] = {**st.result, "error": st.error}
            if st.run_dir:
                parts[w.name] = st.run_dir
            status = (st.result or {}).get("status")
            steps.append({"name": w.name, "ok": st.ok, "seconds": round(st.seconds, 3), "error": st.error,
                          "status": status, "run_dir": st.run_dir, "argv": list(st.argv[3:])})
            progress(f"  {w.name}: " + ("done" if st.ok else f"FAILED: {st.error}") + f" in {st.seconds:.1f} s"
                     + (f" (not measured: {st.result.get('not_measured')})" if status == "not-measured" else ""))
            save("running")
    except BaseException as e:
        status = "failed" if isinstance(e, KvbenchError) and e.exit_code != 130 else "interrupted"
        reason = str(e) if isinstance(e, KvbenchError) else type(e).__name__
        save(status, {"reason": reason})
        try:   # what ran so far, reported; the interruption or error itself is what the caller sees
            out = Path(report_path) if report_path else default_report_path([rd.path])
            path, _ = build_report([rd.path], out, title=f"kvbench qualification ({status}): {profile.name} on {target}")
            save(status, {"reason": reason, "report": str(path)})
        except Exception:  # noqa: BLE001
            pass
        raise
    finally:
        meter.close()

    verdicts = evaluate(profile.criteria, results, drive_facts, skipped)
    v = verdict(verdicts)
    entries = [{"name": c.name, "workload": c.workload, "metric": c.metric, "value": c.value,
                "threshold": c.threshold, "op": c.op, "outcome": c.outcome,
                **({"reason": c.reason} if c.reason else {})} for c in verdicts]
    q = {"profile": profile.name, "profile_path": profile.path, "description": profile.description,
         "verdict": v, "passed": v == "pass", "quick": quick, "drive": drive_facts,
         "drive_capacity": head["drive_capacity"], "skipped": sorted(skipped),
         "criteria": [c.to_dict() for c in verdicts]}
    if PRECONDITION in results and results[PRECONDITION].get("steady_state"):
        q["steady_state"] = results[PRECONDITION]["steady_state"]
    rd.write_json("qualify.json", q)
    all_ran = all(s["ok"] for s in steps)
    count = {o: sum(c.outcome == o for c in verdicts) for o in ("pass", "fail", "skipped", "not-measured")}
    summary = {"verdict": v, "passed": v == "pass", "results": entries,
               "criteria_passed": count["pass"], "criteria": len(verdicts), "outcomes": count,
               "failed": [c.name for c in verdicts if c.outcome == "fail"],
               "not_measured": [c.name for c in verdicts if c.outcome == "not-measured"],
               "skipped": [c.name for c in verdicts if c.outcome == "skipped"],
               **({"shortened": f"--quick: workloads at most {quick_s:g} s, precondition one round"
                   + "".join(f"; {k}: the first {s.requests:,} requests (what its criteria read)"
                             for k, s in sized.items() if s.options)}
                  if quick else {})}
    run_status = "complete" if all_ran else "partial"
    failed_steps = {} if all_ran else {"reason": "some workloads failed: " +
                                       ", ".join(s["name"] for s in steps if not s["ok"])}
    save(run_status, {**summary, **failed_steps})
    out = Path(report_path) if report_path else default_report_path([rd.path])
    path, _ = build_report([rd.path], out, title=f"kvbench qualification{' (quick)' if quick else ''}: "
                                                 f"{profile.name} on {target}")
    save(run_status, {**summary, **failed_steps, "report": str(path)})
    for c in verdicts:
        progress(c.line())
    return read_run(rd.path, parts=False).summary.data, rd.path


def _precondition(target, size, destroy_data, pre: Precondition, rd, progress, *, steady: bool) -> dict:
    """Run the fill (and the steady-state rounds when ``steady``); returns the precondition's result."""
    from kvbench.engine.targets import open_target
    from kvbench.qualify.precondition import precondition

    t0 = time.monotonic()
    t = open_target(target, size=size, write=True, destroy_data=destroy_data)
    try:
        rd.add_targets([t.facts()])
        what = "preconditioning" if pre.max_rounds else "writing the test region once (nothing is read unwritten)"
        progress(f"{what}: {target} ({format_bytes(t.size)}, {t.kind})")
        res = precondition(t, pre, region=size, progress=progress)
    finally:
        t.close()
    res["seconds"] = round(time.monotonic() - t0, 3)
    if pre.max_rounds and steady:
        rd.write_json("steady_state.json", res["steady_state"])
    else:
        res.pop("steady_state", None)          # not judged: the rounds were skipped or shortened
    return res

