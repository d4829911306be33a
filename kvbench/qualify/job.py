"""``kvbench qualify``: precondition a drive, run a profile's workloads on it, judge the criteria, report.

Everything lands in one run folder (``results/qualify-.../``): ``steady_state.json`` (the preconditioning
rounds and the PTS verdict), ``qualify.json`` (pass/fail per criterion), ``summary.json`` (with ``parts``:
each workload's own run folder) and the HTML report. The summary is rewritten after every step, so a killed
qualification still says how far it got.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kvbench.errors import KvbenchError
from kvbench.qualify.criteria import evaluate, overall
from kvbench.qualify.profile import KIND_COMMANDS, PRECONDITION, QualifyProfile
from kvbench.qualify.steps import kvbench_argv, run_step


class QualificationFailed(KvbenchError):
    """The drive did not meet the profile: some criterion failed (the report says which)."""

    exit_code = 1


def _say(msg: str) -> None:
    print(f"[qualify {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _substitute(value, ctx: dict):
    if isinstance(value, str):
        for k, v in ctx.items():
            value = value.replace("{" + k + "}", str(v))
        return value
    if isinstance(value, list):
        return [_substitute(v, ctx) for v in value]
    return value


def workload_argv(w, *, target: str, size: int | None, destroy_data: str | None, results_root: str,
                  run_dirs: dict) -> list[str]:
    """The command line of one workload: the profile's options, placeholders filled ({target}, {size},
    {run:NAME} = an earlier workload's run folder), target/size/--destroy-data added for ``io``."""
    ctx = {"target": target, "size": size or "", "results": results_root,
           **{f"run:{k}": v for k, v in run_dirs.items()}}
    opts = {k: _substitute(v, ctx) for k, v in w.options.items()}
    if w.kind == "io":
        opts.setdefault("target", target)
        if size:
            opts.setdefault("size", size)
        if destroy_data and str(opts.get("rw", "")).endswith(("write", "rw")):
            opts.setdefault("destroy_data", destroy_data)
    return kvbench_argv(KIND_COMMANDS[w.kind], [_substitute(a, ctx) for a in w.args], opts)


def _target_size(target: str) -> int | None:
    """Bytes of an existing file or block device (None when absent: then --size must be given)."""
    import os

    try:
        fd = os.open(target, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END) or None
    finally:
        os.close(fd)


def qualify(profile: QualifyProfile, target: str, *, size: int | None = None, destroy_data: str | None = None,
            results_root: str = "results", report_path=None, skip_precondition: bool = False,
            drive: dict | None = None, progress=_say) -> tuple[dict, Path]:
    """Run the qualification; returns (summary, run folder). Raises nothing for a failed drive: the caller
    decides the exit code from ``summary["passed"]``."""
    from kvbench.metrics.run import RunDir
    from kvbench.report import build_report, default_report_path

    drive_facts = {**profile.drive, **(drive or {})}
    size = size or _target_size(target)
    from kvbench.engine.targets import open_target
    # every refusal (safety, O_DIRECT, free space, lock) comes before a run folder is made or a byte written
    open_target(target, size=size, write=True, destroy_data=destroy_data).close()
    rd = RunDir.create("qualify", {"profile": profile.name, "profile_path": profile.path, "target": target,
                                   "size": size, "skip_precondition": skip_precondition, "drive": drive_facts},
                       root=results_root)
    results: dict = {}
    parts: dict = {}
    steps: list = []

    def save(status: str, extra: dict | None = None) -> None:
        rd.write_summary({"profile": profile.name, "target": target, "parts": parts, "steps": steps,
                          **(extra or {})}, status=status)

    try:
        if profile.precondition is not None and not skip_precondition:
            from kvbench.engine.targets import open_target
            from kvbench.qualify.precondition import precondition

            t = open_target(target, size=size, write=True, destroy_data=destroy_data)
            try:
                rd.add_targets([t.facts()])
                progress(f"preconditioning {target} ({t.size / 2**30:.3g} GiB, {t.kind})")
                pre = precondition(t, profile.precondition, region=size, progress=progress)
            finally:
                t.close()
            results[PRECONDITION] = pre
            rd.write_json("steady_state.json", pre["steady_state"])
            steps.append({"name": PRECONDITION, "ok": True, "steady_state": pre["steady_state"]["reached"]})
            save("running")
        for w in profile.workloads:
            argv = workload_argv(w, target=target, size=size, destroy_data=destroy_data,
                                 results_root=results_root, run_dirs=parts)
            progress(f"workload {w.name} ({w.kind}): kvbench {' '.join(argv[3:])}")
            st = run_step(w.name, argv)
            results[w.name] = st.result if st.result is not None else {"error": st.error}
            if st.error and st.result is not None:
                results[w.name] = {**st.result, "error": st.error}
            if st.run_dir:
                parts[w.name] = st.run_dir
            steps.append({"name": w.name, "ok": st.ok, "seconds": round(st.seconds, 3), "error": st.error,
                          "run_dir": st.run_dir, "argv": list(st.argv[3:])})
            progress(f"  {w.name}: " + ("done" if st.ok else f"FAILED: {st.error}") + f" in {st.seconds:.1f} s")
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

    verdicts = evaluate(profile.criteria, results, drive_facts)
    passed = overall(verdicts)
    q = {"profile": profile.name, "profile_path": profile.path, "description": profile.description,
         "passed": passed, "drive": drive_facts, "criteria": [v.to_dict() for v in verdicts]}
    if PRECONDITION in results:
        q["steady_state"] = results[PRECONDITION]["steady_state"]
    rd.write_json("qualify.json", q)
    all_ran = all(s["ok"] for s in steps)
    summary = {"passed": passed, "criteria_passed": sum(v.passed for v in verdicts), "criteria": len(verdicts),
               "failed": [v.name for v in verdicts if not v.passed]}
    save("complete" if all_ran else "partial",
         {**summary, **({} if all_ran else {"reason": "some workloads failed: " +
                                             ", ".join(s["name"] for s in steps if not s["ok"])})})
    out = Path(report_path) if report_path else default_report_path([rd.path])
    path, _ = build_report([rd.path], out, title=f"kvbench qualification: {profile.name} on {target}")
    save("complete" if all_ran else "partial", {**summary, "report": str(path)})
    for v in verdicts:
        progress(v.line())
    return json.loads((rd.path / "summary.json").read_text()), rd.path
