"""``kvbench run``'s job in one process (kvbench/job.py): the trace is read once and its exact profile computed
once for every step but the measured replay; each step writes what its command writes, records the command
that reruns it, and that command, rerun on its own, prints the same result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# the job folder kvbench run wrote when its steps were processes (main at c8db9d6), for a job whose replay
# failed: the curve, the load paths (always), the plan and its retention sweep; no probes or check without a
# replay (with one, probes.json and check.json too: the default job's folders before and after list the same)
JOB_FILES = {"run.json", "summary.json", "mrc.json", "load_paths.json", "plan.json", "retention.json"}
DRY_RUN_FILES = {"run.json", "summary.json", "requests.csv"}     # a dry run: no I/O, no timeseries
TIMINGS = {"read_s", "profile_s", "elapsed_s", "refs_per_s", "end_to_end_refs_per_s", "streamed"}


class Counter:
    """Wrap ``module.name`` and count its calls (what it returns unchanged)."""

    def __init__(self, monkeypatch, module, name):
        self.calls, self.fn = 0, getattr(module, name)

        def counted(*a, **kw):
            self.calls += 1
            return self.fn(*a, **kw)

        monkeypatch.setattr(module, name, counted)


def _cli(*args):
    from click.testing import CliRunner

    from kvbench.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def job_run(tmp_path_factory):
    """``kvbench run`` on the shipped sample with the measured replay stubbed out (it is a child process: a
    failed step here), counting trace reads and curve computations in this process. Once for the module."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _job_run(tmp_path_factory.mktemp("job"), monkeypatch)


def _job_run(tmp_path, monkeypatch):
    import kvbench.analysis.curves.profile as curves
    import kvbench.analysis.curves.residence as residence
    import kvbench.qualify.steps as steps
    import kvbench.stream.traces as traces
    from kvbench.qualify.steps import StepResult

    children = []

    def child(name, argv, **kw):
        children.append(name)
        return StepResult(name, tuple(argv), 1, 0.01, None, f"{name}: not run in this test")

    monkeypatch.setattr(steps, "run_step", child)
    counts = {"iter_trace": Counter(monkeypatch, traces, "iter_trace"),
              "exact_profile": Counter(monkeypatch, curves, "exact_profile"),
              "stream_profile": Counter(monkeypatch, curves, "stream_profile"),
              "steady_curve": Counter(monkeypatch, residence, "steady_curve")}
    monkeypatch.chdir(tmp_path)
    r = _cli("run", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--l2", "16MiB", "--l3-capacity", "256MiB",
            "--retentions", "1h", "-o", tmp_path / "r.html")
    job = next((tmp_path / "results").iterdir())
    return r, job, children, {k: c.calls for k, c in counts.items()}


@pytest.mark.slow
def test_the_trace_is_read_once_and_its_profile_computed_once(job_run):
    r, job, children, counts = job_run
    assert r.exit_code == 1, r.output[-2000:]                 # the stubbed replay failed: a partial job
    assert children == ["replay"]                             # the only child process
    summary = json.loads((job / "summary.json").read_text())
    ok = {s["name"]: s["ok"] for s in summary["steps"]}
    assert ok == {"mrc": True, "simulate": True, "replay": False, "plan": True, "check": False}, summary["steps"]
    # sizing, sample rate, mrc, the dry run and the plan: one read of the file, one exact profile, one steady curve
    assert counts == {"iter_trace": 1, "exact_profile": 1, "stream_profile": 0, "steady_curve": 1}, counts


@pytest.mark.slow
def test_the_job_folder_holds_the_files_it_held_when_steps_were_processes(job_run):
    _, job, _, _ = job_run
    assert {p.name for p in job.iterdir() if p.is_file()} == JOB_FILES
    (dry,) = [p for p in job.iterdir() if p.is_dir()]         # the whole-trace simulation's run folder
    assert dry.name.startswith("replay-kv-") and {p.name for p in dry.iterdir()} == DRY_RUN_FILES
    summary = json.loads((job / "summary.json").read_text())
    assert list(summary["parts"]) == ["simulate"] and Path(summary["parts"]["simulate"]).resolve() == dry.resolve()


@pytest.mark.slow
def test_each_step_records_the_command_that_reruns_it_and_the_command_prints_the_same(job_run):
    """The steps' argv, rerun as commands (each reading the trace itself), give what the job wrote."""
    _, job, _, _ = job_run
    summary = json.loads((job / "summary.json").read_text())
    argv = {s["name"]: s["argv"] for s in summary["steps"] if "argv" in s}
    (dry,) = [p for p in job.iterdir() if p.is_dir()]
    run = json.loads((dry / "run.json").read_text())
    assert run["command"].startswith("kvbench replay kv ") and run["argv"] == ["kvbench", *argv["simulate"]]

    def rerun(words):
        r = _cli(*words)
        assert r.exit_code == 0, r.output[-2000:]
        return json.loads(r.stdout[r.stdout.index("{"):])

    mrc = json.loads((job / "mrc.json").read_text())
    again = rerun(argv["mrc"])
    assert {k: v for k, v in again.items() if k not in TIMINGS} == {k: v for k, v in mrc.items() if k not in TIMINGS}
    sim = json.loads((dry / "summary.json").read_text())
    again = rerun(argv["simulate"])
    for k in ("requests", "blocks", "hit_ratio", "tiers", "load_time_ms", "sample_rate"):
        assert again[k] == sim[k], k
    assert (Path(again["run_dir"]) / "requests.csv").read_bytes() == (dry / "requests.csv").read_bytes()
    plan = json.loads((job / "plan.json").read_text())
    again = rerun(argv["plan"])
    assert again == plan


def test_a_step_in_process_fails_as_a_process_would_and_an_interrupt_stops_the_job():
    from kvbench.errors import Interrupted, SpecError
    from kvbench.job import run_inprocess
    from kvbench.metrics.run import RunDir

    argv = ["python", "-m", "kvbench", "plan", "--json"]

    def bad_spec():
        raise SpecError("no such\nmodel", "give one")

    st = run_inprocess("plan", argv, fn=bad_spec)
    assert (st.ok, st.returncode, st.result) == (False, 2, None)
    assert st.error == "no such model (fix: give one)"         # one line, as the process's error line read
    st = run_inprocess("plan", argv, fn=lambda: 1 / 0)
    assert not st.ok and st.error.startswith("ZeroDivisionError: division by zero")
    st = run_inprocess("plan", argv, fn=lambda: {"x": __import__("numpy").float64(0.5), "y": float("nan")})
    assert st.ok and st.result == {"x": 0.5, "y": None}        # the JSON the command prints

    def stopped():
        raise Interrupted("interrupted", "rerun")

    with pytest.raises(Interrupted):
        run_inprocess("plan", argv, fn=stopped)
    with pytest.raises(KeyboardInterrupt):
        run_inprocess("plan", argv, fn=lambda: (_ for _ in ()).throw(KeyboardInterrupt()))


def test_a_run_folder_made_by_a_step_in_process_records_the_steps_command(tmp_path):
    from kvbench.job import run_inprocess
    from kvbench.metrics.run import RunDir

    st = run_inprocess("x", ["python", "-m", "kvbench", "mrc", "a b", "--json"],
                       fn=lambda: {"run_dir": str(RunDir.create("mrc", {}, root=tmp_path).path)})
    run = json.loads((Path(st.run_dir) / "run.json").read_text())
    assert run["command"] == "kvbench mrc 'a b' --json" and run["argv"] == ["kvbench", "mrc", "a b", "--json"]
    outside = RunDir.create("mrc", {}, root=tmp_path)           # after the step: this process's own command again
    assert "kvbench mrc 'a b'" not in json.loads((outside.path / "run.json").read_text())["command"]
