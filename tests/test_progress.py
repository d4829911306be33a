"""The live progress line (kvbench.progress): drawn on a terminal only, with done/total, rate and an ETA to
completion; pipes and --json stay clean. The terminal is a real pseudo-terminal (python's pty module)."""

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from kvbench import progress

REPO = Path(__file__).resolve().parents[1]


# ---- the arithmetic, by hand ----------------------------------------------------------------------------------
def test_eta_is_work_left_at_the_mean_rate():
    assert progress.eta(25, 100, 10.0) == 30.0            # 25 in 10 s: 75 more take 30 s
    assert progress.eta(0, 100, 10.0) is None and progress.eta(5, None, 1.0) is None
    assert progress.eta(120, 100, 10.0) == 0.0
    assert progress.format_eta(None) == "ETA --" and progress.format_eta(75) == "ETA 1:15"
    assert progress.format_eta(3725) == "ETA 1:02:05"


class _Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_line_text_and_a_sooner_end(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    line = progress.Line("replay kv", 4000, "requests", stream=open(os.devnull, "w"))
    clock.t += 20.0
    line.update(1000, note="store (L3/L4) 1.2 GB/s")
    assert line.text() == "replay kv: 1,000/4,000 requests (25%), 50 requests/s, ETA 1:00, store (L3/L4) 1.2 GB/s"
    assert "ETA 0:15" in line.text(eta_s=15.0)             # a time budget running out first
    assert "ETA 1:00" in line.text(eta_s=500.0)
    free = progress.Line("trace", None, "requests", stream=open(os.devnull, "w"))
    clock.t += 4.0
    free.update(250_000)
    assert free.text() == "trace: 250k requests, 62,500 requests/s, 4 s"


def test_steps_eta_costs_the_steps_left(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    s = progress.Steps("qualify", [None, 60.0, 30.0, None], stream=open(os.devnull, "w"))
    s.start("precondition")
    assert s.remaining_s() is None                        # nothing costs the unknown steps yet
    clock.t += 100.0
    s.start("load-128k")                                  # the precondition took 100 s: the mean of finished steps
    clock.t += 20.0
    assert s.remaining_s() == 40.0 + 30.0 + 100.0
    clock.t += 50.0                                       # past its runtime: the step counts as ending now
    assert s.remaining_s() == 0.0 + 30.0 + 100.0
    s.start("mix")
    assert s.remaining_s() == 30.0 + (100.0 + 70.0) / 2
    u = progress.Steps("plan", [None, None, None], stream=open(os.devnull, "w"))
    u.start("curves")
    clock.t += 10.0
    u.start("target 0.9")
    clock.t += 4.0
    assert u.remaining_s() == 6.0 + 10.0                  # the mean of the finished step costs the rest
    clock.t += 21.0                                        # overran the mean: the rest costs what this took so far
    assert u.remaining_s() == 0.0 + 25.0


def test_inactive_line_draws_nothing_and_modes(monkeypatch):
    monkeypatch.setenv("KVBENCH_PROGRESS", "auto")
    progress.set_mode(None)
    with open(os.devnull, "w") as f:
        assert not progress.active(f)                     # not a terminal
        assert not progress.Line("x", 10, "it", stream=f).shown
        progress.set_mode("always")
        assert progress.active(f)
        progress.set_mode("never")
        assert not progress.active(f)
    progress.set_mode(None)
    monkeypatch.setenv("KVBENCH_PROGRESS", "never")
    assert not progress.active()
    with pytest.raises(ValueError):
        progress.set_mode("sometimes")


# ---- a real terminal -------------------------------------------------------------------------------------------
def _on_pty(argv, cwd, stderr_tty=True, timeout=240):
    """Run argv with stderr on a pseudo-terminal of 120x40 (stdout a pipe); returns (stdout, terminal bytes)."""
    env = {k: v for k, v in os.environ.items() if k != "KVBENCH_PROGRESS"}
    env.update(TERM="xterm", PYTHONPATH=str(REPO))
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=slave if stderr_tty else subprocess.PIPE, cwd=cwd, env=env)
    os.close(slave)
    term = b""
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk and p.poll() is not None:
                break
            term += chunk
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    err = b"" if stderr_tty else p.stderr.read()
    assert p.wait(timeout=timeout) == 0, (out, term, err)
    return out, (term if stderr_tty else err).decode(errors="replace")


IO = [sys.executable, "-m", "kvbench", "io", "--size", "4MiB", "--runtime", "3s", "--engine", "null", "--qd", "4"]


def test_io_status_line_on_a_terminal_and_clean_pipes(tmp_path):
    (tmp_path / "t.dat").write_bytes(b"\1" * (4 << 20))
    argv = IO + ["--target", str(tmp_path / "t.dat"), "--no-prefill", "--results", str(tmp_path / "res")]
    out, term = _on_pty(argv, tmp_path)
    frames = [f for f in term.split("\r") if "ETA" in f]
    assert frames, term
    assert any("/3 s (" in f and "IOPS" in f for f in frames)          # done/total, fio-like status
    assert "\r" not in out and "ETA" not in out and "iops=" in out      # stdout (a pipe) has the result only
    _, err = _on_pty(argv, tmp_path, stderr_tty=False)                   # stderr a pipe: nothing drawn
    assert "\r" not in err and "ETA" not in err
    out, term = _on_pty(argv + ["--json"], tmp_path)                     # --json on a terminal: no line either
    assert "ETA" not in term and out.lstrip().startswith("{")
    _, term = _on_pty(argv + ["--eta", "never"], tmp_path)
    assert "ETA" not in term


def test_io_prefill_of_a_new_file_shows_a_line(tmp_path):
    """A new file is written whole before it is read: the terminal shows that (bytes of the size), not silence."""
    argv = IO + ["--target", str(tmp_path / "new.dat"), "--results", str(tmp_path / "res")]
    _, term = _on_pty(argv, tmp_path)
    frames = [f for f in term.split("\r") if "prefilling" in f]
    assert any("prefilling new.dat" in f and "B (" in f for f in frames), term        # done/total B (share)


def test_trace_gen_line_has_an_eta_to_the_end_of_the_span(tmp_path):
    argv = [sys.executable, "-m", "kvbench", "trace", "gen", "--model-file", "chat", "--duration", "1d",
            "-o", str(tmp_path / "d.jsonl")]
    out, term = _on_pty(argv, tmp_path)
    frames = [f for f in term.split("\r") if "s of trace (" in f]
    assert frames and all("/86,400 s of trace" in f and "ETA " in f for f in frames), term
    assert "\r" not in out and out.startswith("wrote ")


def test_qualify_steps_are_costed_at_their_runtimes():
    from kvbench.qualify.job import expected_seconds
    from kvbench.qualify.profile import Workload

    io = Workload("load", "io", {"runtime": 60})
    kv = Workload("kv", "replay-kv", {"closed_loop": True})
    assert expected_seconds(io) == 60.0 and expected_seconds(io, quick=10.0) == 10.0
    assert expected_seconds(Workload("x", "io", {"runtime": "2m"})) == 120.0
    assert expected_seconds(kv) is None and expected_seconds(kv, quick=10.0) == 10.0   # --quick caps its duration
    assert expected_seconds(Workload("p", "plan", {})) is None


def test_every_command_starts_from_the_terminal_test(cli):
    progress.set_mode("always")                            # left over by an earlier command in this process
    assert cli("models", "--help").exit_code == 0
    assert progress._mode is None


def test_a_job_step_line_reads_the_child_run_folder(tmp_path):
    """qualify's step line: a child io run's bandwidth so far, a child replay's requests and GB/s per tier."""
    import json
    import time

    from kvbench.replay.live import line_update, step_detail

    since = time.time()
    assert step_detail(tmp_path, since) == ""
    io = tmp_path / "io-1"
    io.mkdir()
    (io / "summary.json").write_text(json.dumps({"bytes_so_far": 3_000_000_000, "seconds_so_far": 2.0}))
    assert step_detail(tmp_path, since) == "1.5 GB/s, 2 s"
    doc = {"requests_done": 1500, "trace_requests": 4000, "seconds": 10.0, "bytes": {"dram": 0.0, "dev": 2e9}}
    assert line_update(doc, budget_s=25.0) == {"done": 1500, "total": 4000, "note": "store (L3/L4) 200 MB/s",
                                               "eta_s": 15.0}
    kv = tmp_path / "replay-kv-2"
    kv.mkdir()
    (kv / "progress.json").write_text(json.dumps(doc))
    os.utime(io, (since - 60, since - 60))                 # the io folder is an earlier step's
    assert step_detail(tmp_path, since) == "1,500/4,000 requests, store (L3/L4) 200 MB/s"


def test_read_position_is_the_open_files_offset(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(b"x" * 10_000)
    assert progress.read_position(p) is None                 # not open here
    with open(p, "rb", buffering=0) as f:
        f.read(1234)
        assert progress.read_position(p) == 1234
        f.read(766)
        assert progress.read_position(tmp_path / "." / "t.jsonl") == 2000


def test_mrc_of_a_trace_file_shows_bytes_read_of_its_size(tmp_path, monkeypatch):
    big = tmp_path / "week.jsonl"
    gen = [sys.executable, "-m", "kvbench", "trace", "gen", "--model-file", "chat", "--duration", "12h",
           "-o", str(big)]
    subprocess.run(gen, check=True, capture_output=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    size_mb = f"/{big.stat().st_size / 1e6:.3g} MB ("
    monkeypatch.setenv("KVBENCH_TRACE_CACHE", "0")          # parse the text (a cached binary is read by a map)
    out, term = _on_pty([sys.executable, "-m", "kvbench", "mrc", str(big)], tmp_path)
    frames = [f for f in term.split("\r") if "MB (" in f]
    assert frames and all(size_mb in f and "ETA " in f and "requests read" in f for f in frames), term
    assert "\r" not in out


# --- kvbench.progress.Steps when a caller starts more steps than it listed: the live line's arithmetic must never
# break the work it describes (before the fix, remaining_s indexed past ``expected`` and the extra step raised
# IndexError from Steps.start, inside the command).
def test_a_step_past_the_list_is_costed_as_unknown_and_counted(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    s = progress.Steps("plan", [None, 30.0], stream=open(os.devnull, "w"))
    s.start("curves")
    clock.t += 10.0
    s.start("target 0.9")                     # listed at 30 s: 12 s in, 18 s left
    clock.t += 12.0
    assert s.remaining_s() == 18.0
    s.start("target 0.95")                    # not listed: unknown cost, the mean of the finished (10, 12) = 11 s
    clock.t += 4.0
    assert s.remaining_s() == 11.0 - 4.0
    clock.t += 20.0                           # overran the mean: nothing known is left after it
    assert s.remaining_s() == 0.0
    assert "step 3 of 3: target 0.95" in s.line._note
    s.close()
