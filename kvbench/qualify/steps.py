"""Run kvbench commands as the steps of a job (``kvbench qualify``, ``kvbench run``) and read their ``--json``.

Each step is a child process of this same kvbench (same interpreter, same package on PYTHONPATH), so a step
that crashes, is killed or runs out of memory cannot take the job down with it, and its own progress output
(on stderr) reaches the user unchanged. The JSON contract of every command (``run_dir`` and its documented
fields) is the interface; nothing here depends on another command's internals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import kvbench
from kvbench import procs
from kvbench.errors import Interrupted


@dataclass(frozen=True)
class StepResult:
    name: str
    argv: tuple
    returncode: int
    seconds: float
    result: dict | None          # the parsed --json object (None when the step printed none)
    error: str | None            # the step's one-line error when it failed

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.result is not None

    @property
    def run_dir(self) -> str | None:
        return (self.result or {}).get("run_dir")


def option_args(options: dict) -> list[str]:
    """``{"bs": "4k", "closed_loop": True, "tier": ["a", "b"]}`` -> ``--bs 4k --closed-loop --tier a --tier b``."""
    out: list[str] = []
    for k, v in options.items():
        flag = "--" + str(k).replace("_", "-")
        if v is True:
            out.append(flag)
        elif v is False or v is None:
            continue
        elif isinstance(v, (list, tuple)):
            for x in v:
                out += [flag, str(x)]
        else:
            out += [flag, str(v)]
    return out


def kvbench_argv(words, args=(), options: dict | None = None) -> list[str]:
    return [sys.executable, "-m", "kvbench", *words, *map(str, args), *option_args(options or {}), "--json"]


def _env() -> dict:
    root = str(Path(kvbench.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the job dies, even by SIGKILL (kvbench.procs), so a step never
    runs on orphaned holding its target's lock. The child stays in the job's process group (Ctrl-C reaches
    both)."""
    from kvbench.procs import die_with_parent

    die_with_parent()


def run_step(name: str, argv: list[str], *, timeout_s: float | None = None, cwd=None, echo=True,
             heartbeat=None, every_s: float = 1.0) -> StepResult:
    """Run one kvbench command: its stderr (warnings) streams live to ours, indented; its stdout is the JSON
    result. ``heartbeat(elapsed_s)`` is asked every ``every_s`` for the step's live line (kvbench.progress: on a
    terminal only); it may return None. A step that exits 130 (Ctrl-C) interrupts the job."""
    import tempfile
    import threading

    from kvbench import progress

    t0 = time.monotonic()
    tail: list[str] = []
    with tempfile.TemporaryFile(mode="w+") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True, env=_env(), cwd=cwd,
                             bufsize=1, preexec_fn=_die_with_parent)

        def pump():
            for ln in p.stderr:
                ln = ln.rstrip("\n")
                if not ln.strip():
                    continue
                tail.append(ln)
                del tail[:-50]
                if echo:
                    progress.echo(f"    {ln}")

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        timed_out = False
        line = None
        try:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    p.wait(timeout=every_s if left is None else min(every_s, left))
                    break
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() >= deadline:
                        raise
                    if heartbeat is not None:
                        try:
                            msg = heartbeat(time.monotonic() - t0)
                        except Exception:  # noqa: BLE001 - a progress line must never break the step
                            msg = None
                        if msg:
                            line = line or progress.Line(f"    {name}", unit=None)
                            line.note(msg, now=True)
        except subprocess.TimeoutExpired:
            timed_out = True
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        except procs.WRAPPED_STOP as e:
            if procs.stop_from(e) is None:
                raise
            p.terminate()
            p.wait()
            raise Interrupted(f"interrupted during step {name!r}", "rerun the job") from None
        finally:
            if line is not None:
                line.close()
        th.join(timeout=5)
        out.seek(0)
        result = _parse(out.read())
    seconds = time.monotonic() - t0
    if timed_out:
        return StepResult(name, tuple(argv), 124, seconds, result, f"timed out after {timeout_s:.0f} s")
    if p.returncode in (130, 143, 129):                 # SIGINT, SIGTERM, SIGHUP: kvbench.procs
        raise Interrupted(f"step {name!r} was interrupted", "rerun the job")
    error = None
    if p.returncode != 0:
        error = next((ln.split("error:", 1)[1].strip() for ln in reversed(tail) if "error:" in ln),
                     tail[-1] if tail else f"exit status {p.returncode}")
    return StepResult(name, tuple(argv), p.returncode, seconds, result, error)


def _parse(stdout: str) -> dict | None:
    s = (stdout or "").strip()
    if not s:
        return None
    try:
        obj = json.loads(s)
    except json.JSONDecodeError:
        start = s.find("{")        # a command that printed a line before its JSON
        try:
            obj = json.loads(s[start:]) if start >= 0 else None
        except json.JSONDecodeError:
            return None
    return obj if isinstance(obj, dict) else None
