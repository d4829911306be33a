"""One process and signal model (kvbench.procs), tested as a user meets it: a long-running command started in its
own process group, a signal to the parent mid-run, then its exit status, its run folder's status, what it left
on disk and whether any process of its group lives on. SIGINT, SIGTERM and SIGHUP each: exit 128 + signal,
``interrupted`` with what was measured, no traceback, no partial output, no scratch store, no orphan. SIGKILL:
the children die with the parent (PR_SET_PDEATHSIG) and the next look marks the folder ``stale``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvbench import procs
from kvbench.cli import main

REPO = Path(__file__).resolve().parents[1]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


_STARTED: list[int] = []


@pytest.fixture(autouse=True)
def _no_leftovers():
    """Whatever a test fails on, the process groups it started are gone after it."""
    yield
    while _STARTED:
        pgid = _STARTED.pop()
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _start(args, cwd, preexec_fn=None):
    env = {**os.environ, "PYTHONPATH": str(REPO), "KVBENCH_DEBUG": ""}
    err = open(Path(cwd) / "stderr.txt", "w")
    p = subprocess.Popen([sys.executable, "-m", "kvbench", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                         stderr=err, start_new_session=True,     # its own group: the orphan check looks at it
                         preexec_fn=preexec_fn)
    _STARTED.append(p.pid)
    return p, err


def _wait_for(cond, timeout=240.0, what="the command to get going"):
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        if cond():
            return
        time.sleep(0.2)
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,pgid=,stat=,args="], capture_output=True, text=True).stdout
    raise AssertionError(f"timed out waiting for {what}; kvbench processes: "
                         + "; ".join(ln for ln in out.splitlines() if "kvbench" in ln or "spawn" in ln))


def _group(pgid: int) -> list[str]:
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True).stdout
    rows = [ln.split(None, 3) for ln in out.splitlines()]
    return [" ".join(r) for r in rows if len(r) >= 3 and int(r[1]) == pgid and not r[2].startswith("Z")]


def _stop(p, err, sig, cwd, timeout=240.0) -> str:
    p.send_signal(sig)
    rc = p.wait(timeout=timeout)
    err.close()
    text = (Path(cwd) / "stderr.txt").read_text()
    assert rc == 128 + sig, f"exit {rc} after {sig.name}: {text[-2000:]}"
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    _wait_for(lambda: not _group(p.pid), 60, "the command's children to end")
    return text


def _summaries(root: Path) -> dict:
    return {str(s.parent.relative_to(root)): json.loads(s.read_text())["status"]
            for s in root.rglob("summary.json")}


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_trace_gen_leaves_no_partial_trace(sig, tmp_path):
    p, err = _start(["trace", "gen", "--model-file", "chat", "--duration", "60d", "--rate", "50",
                     "-o", "week.jsonl.gz"], tmp_path)
    _wait_for(lambda: list(tmp_path.glob(".kvbench-tmp-*")), what="the trace to be written")
    time.sleep(0.5)
    _stop(p, err, sig, tmp_path)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["stderr.txt"]   # no trace, no temporary file


def test_sigint_stops_a_command_started_with_sigint_ignored(tmp_path):
    """``kvbench ... &`` from a script starts it with SIGINT ignored; ``kill -INT`` must still stop it."""
    p, err = _start(["trace", "gen", "--model-file", "chat", "--duration", "60d", "--rate", "50", "-o", "w.jsonl"],
                    tmp_path, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    _wait_for(lambda: list(tmp_path.glob(".kvbench-tmp-*")), what="the trace to be written")
    _stop(p, err, signal.SIGINT, tmp_path)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["stderr.txt"]


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_run_records_interrupted_writes_its_report_and_removes_its_store(sig, tmp_path):
    p, err = _start(["run", "--max-requests", "300", "--duration", "60s", "--probe-seconds", "0.5",
                     "--results", "res", "-o", "rep.html"], tmp_path)
    _wait_for(lambda: "[4/8" in (tmp_path / "stderr.txt").read_text() and
              list(tmp_path.glob("res/*/l3-store.bin")), what="the replay step")
    time.sleep(3)
    _stop(p, err, sig, tmp_path)
    (job,) = tmp_path.glob("res/run-*")
    assert json.loads((job / "summary.json").read_text())["status"] == "interrupted"
    assert "interrupted" in set(_summaries(job).values())
    assert (tmp_path / "rep.html").is_file()                            # the report of the part that ran
    assert not list(tmp_path.rglob("*store*.bin")), "the scratch store was left"
    assert not list(tmp_path.rglob(".kvbench-tmp-*"))


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_qualify_records_interrupted(sig, tmp_path):
    # 2560 MiB: the smallest region whose replay reads L3 enough for its p99.9 is 2.5 GiB (refused below it)
    p, err = _start(["qualify", "kv-cache-offload", "--target", "q.dat", "--size", "2560MiB", "--quick",
                     "--results", "res", "-o", "q.html"], tmp_path)
    _wait_for(lambda: "precondition" in (tmp_path / "stderr.txt").read_text(), what="the precondition")
    time.sleep(1)
    _stop(p, err, sig, tmp_path)
    statuses = _summaries(tmp_path / "res")
    assert statuses and set(statuses.values()) <= {"interrupted", "complete"} and \
        "interrupted" in statuses.values(), statuses


def _cluster(tmp_path):
    return _start(["cluster", "mooncake-sample", "--model", "tiny-gqa", "--router", "session", "--nodes", "2",
                   "--l2", "16MiB", "--l3", "st.dat", "--l3-capacity", "64MiB", "--speed", "0.05",
                   "--results", "res"], tmp_path)


def _nodes_running(pgid):
    return sum("spawn_main" in row for row in _group(pgid)) == 2


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_cluster_ends_its_node_processes_and_records_interrupted(sig, tmp_path):
    p, err = _cluster(tmp_path)
    _wait_for(lambda: _nodes_running(p.pid), what="both node processes")
    time.sleep(2)
    _stop(p, err, sig, tmp_path)
    (job,) = tmp_path.glob("res/cluster-*")
    s = json.loads((job / "summary.json").read_text())
    assert s["status"] == "interrupted"
    # what the nodes measured before they drained is kept: a node folder per node, each interrupted
    assert {n["status"] for n in s["measured"]["nodes"]} == {"interrupted"}, s["measured"]["nodes"]
    assert all((job / f"node-{n['node']}").is_dir() for n in s["measured"]["nodes"])


def test_sigkill_kills_the_children_and_the_next_look_marks_the_run_stale(tmp_path):
    from kvbench.metrics.results import read_run

    p, err = _cluster(tmp_path)
    _wait_for(lambda: _nodes_running(p.pid), what=f"both node processes (group {p.pid})")
    (job,) = tmp_path.glob("res/cluster-*")
    assert read_run(job).summary.status == "partial"                      # its process is alive: left alone
    p.kill()
    p.wait()
    err.close()
    _wait_for(lambda: not _group(p.pid), 60, "the node processes to die with their parent")
    assert read_run(job).summary.status == "stale"
    s = json.loads((job / "summary.json").read_text())
    assert s["status"] == "stale" and f"PID {p.pid}" in s["stale"]


def test_a_running_folder_of_a_dead_process_is_marked_stale_by_report_and_by_the_next_run(tmp_path, cli):
    """No process needed: a folder whose recorded process is gone (a PID that exited) reads stale through the
    one reader (report, plan --run, check --run) and is marked by the next run created beside it; a folder
    of a live process, or one that ended properly, is left alone."""
    from kvbench.metrics.results import read_run
    from kvbench.metrics.run import RunDir

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    root = tmp_path / "results"
    folders = {}
    made = {name: RunDir.create("io", {}, root=root, run_id=name) for name in ("killed", "alive", "done", "killed2")}
    for name, rd in made.items():                                # after every create: none has looked yet
        if name == "done":
            rd.write_summary({"iops": 1.0}, status="complete")
        if name.startswith("killed"):
            rd.write_summary({}, status="running")
            run = json.loads((rd.path / "run.json").read_text())
            run["process"]["pid"] = int(dead.stdout)           # the PID of a process that has exited
            (rd.path / "run.json").write_text(json.dumps(run))
        folders[name] = rd.path
    assert read_run(folders["alive"]).summary.status == "partial"          # this very process: alive
    assert read_run(folders["done"]).summary.status == "complete"
    r = cli("report", folders["killed"], "-o", tmp_path / "k.html")
    assert r.exit_code == 0, r.output
    assert json.loads((folders["killed"] / "summary.json").read_text())["status"] == "stale"
    assert "STALE" in (tmp_path / "k.html").read_text()
    assert json.loads((folders["killed2"] / "summary.json").read_text())["status"] == "running"
    RunDir.create("io", {}, root=root)                                   # the next run looks at its neighbours
    assert json.loads((folders["killed2"] / "summary.json").read_text())["status"] == "stale"
    assert json.loads((folders["alive"] / "summary.json").read_text())["status"] == "partial"


def test_ctrl_c_to_the_whole_group_is_one_clean_interruption(tmp_path):
    """A terminal's Ctrl-C reaches every process of the group at once (parent and node processes): one
    interruption, no traceback from any of them (was: five, and status partial), nothing left running."""
    p, err = _cluster(tmp_path)
    _wait_for(lambda: _nodes_running(p.pid), what="both node processes")
    time.sleep(2)
    os.killpg(p.pid, signal.SIGINT)
    rc = p.wait(timeout=240)
    err.close()
    text = (tmp_path / "stderr.txt").read_text()
    assert rc == 130 and "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    _wait_for(lambda: not _group(p.pid), 60, "the node processes to end")
    (job,) = tmp_path.glob("res/cluster-*")
    assert json.loads((job / "summary.json").read_text())["status"] == "interrupted"


# --- a stop that lands inside a compiled kernel ---------------------------------------------------------------
def _wrapped_stop(signum=signal.SIGINT):
    """What CPython raises when a stop signal's handler raised while a numba kernel ran: a SystemError ("returned a
    result with an exception set") caused by the Stop."""
    try:
        raise procs.Stop(signum)
    except procs.Stop as stop:
        try:
            raise SystemError("CPUDispatcher(<function block_keys>) returned a result with an exception set") from stop
        except SystemError as e:
            return e


def test_stop_from_finds_a_stop_a_native_call_wrapped_and_nothing_else():
    stop = procs.Stop(signal.SIGTERM)
    assert procs.stop_from(stop) is stop and procs.stop_from(KeyboardInterrupt()) is not None
    w = _wrapped_stop(signal.SIGTERM)
    assert isinstance(procs.stop_from(w), procs.Stop) and procs.stop_from(w).signum == signal.SIGTERM
    twice = SystemError("outer")
    twice.__cause__ = w
    assert procs.stop_from(twice) is w.__cause__
    ctx = SystemError("by context")
    ctx.__context__ = stop
    assert procs.stop_from(ctx) is stop
    other = ValueError("a real error raised while stopping")
    other.__cause__ = stop
    assert procs.stop_from(other) is None                  # only the native call's wrapping is unwrapped
    assert procs.stop_from(SystemError("no cause")) is None and procs.stop_from(None) is None


def test_a_wrapped_stop_exits_as_an_interrupt_not_an_internal_error(monkeypatch):
    """Every command runs under the CLI group: a wrapped stop is 'interrupted', exit 130; a SystemError of its own
    stays an internal error, exit 1."""
    from click.testing import CliRunner

    import kvbench.cli.models as models

    runner = CliRunner()
    for exc, code, said in ((_wrapped_stop(), 130, "kvbench: interrupted"),
                            (SystemError("a bug"), 1, "kvbench: internal error: SystemError: a bug")):
        def boom(*a, exc=exc, **k):
            raise exc
        monkeypatch.setattr(models, "model_names", boom)
        r = runner.invoke(main, ["models", "--json"])
        assert r.exit_code == code and said in r.output and "Traceback" not in r.output, r.output


def test_every_ctrl_c_path_takes_a_stop_wrapped_by_a_compiled_kernel():
    """A Ctrl-C path that catches KeyboardInterrupt alone misses a stop a numba kernel wrapped: each one catches
    procs.WRAPPED_STOP (and re-raises what procs.stop_from finds no stop in); only the CLI group, whose generic
    handler unwraps the rest, catches the bare KeyboardInterrupt."""
    import re

    allowed = {  # where no kernel runs inside the try, with why
        ("kvbench/cli/__init__.py", "except KeyboardInterrupt:"): "the CLI group: its generic handler unwraps the rest",
        ("kvbench/cluster/workers.py", "except (OSError, EOFError, KeyboardInterrupt):    # the parent is gone or "
                                       "stopping: exit quietly"): "a node's last message down a pipe, no kernel",
    }
    bare = []
    for path in sorted((REPO / "kvbench").rglob("*.py")):
        for line in path.read_text().splitlines():
            if re.search(r"except\s*\(?[^)]*\bKeyboardInterrupt\b", line):
                bare.append((str(path.relative_to(REPO)), line.strip()))
    assert sorted(bare) == sorted(allowed), bare
    wrapped = [p for p in (REPO / "kvbench").rglob("*.py") if "procs.WRAPPED_STOP" in p.read_text()]
    assert len(wrapped) >= 4
