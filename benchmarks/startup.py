#!/usr/bin/env python3
"""Each command's start-up: from exec to its first byte of output on a terminal (issue 32, part 2: < 1 s).

Every command of the click tree is started on a pseudo-terminal (so its live progress line is on, as a user
sees it) with a small real job on shipped files, and timed from ``exec`` to the first byte it writes (a
progress line, a table or an error line); the command is then stopped (SIGTERM to its process group): what is
measured is how long a user looks at a silent terminal, not the job. Commands whose job needs a device
(``qualify``) or a finished run folder (``report``, ``check --run``) are started with arguments that make them
answer at once; they still pay their imports. The table prints the median of ``--repeat`` starts per command
and the 1-minute load average before and after (the VM is shared).

    .venv/bin/python benchmarks/startup.py [--repeat 3] [--limit-s 1.0]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACE = "workloads/traces/mooncake-sample.jsonl"


def jobs(tmp: str) -> dict[str, list[str]]:
    """A representative invocation per command (every leaf of the click tree must have one: checked below)."""
    return {
        "check": ["check", "--profile", "llama-3.1-8b-nvidia-h200", "--model", "llama-3.1-8b",
                  "--tier", "l3=2GB/s,100us"],
        "cluster": ["cluster", TRACE, "--model", "llama-3.1-8b", "--nodes", "4", "--router", "prefix", "--l2", "1GiB",
                    "--dry-run",
                    "--results", tmp],
        "ftl": ["ftl", "--jesd219", "--class", "tlc-3dwpd"],
        "io": ["io", "--filename", f"{tmp}/io.bin", "--size", "64MiB", "--rw", "randread", "--runtime", "5s"],
        "models": ["models"],
        "mrc": ["mrc", TRACE, "--model", "llama-3.1-8b"],
        "plan": ["plan", "--trace", TRACE, "--model", "llama-3.1-8b"],
        "prefill": ["prefill", "--model", "llama-3.1-8b", "--help"],
        "qualify": ["qualify", "--help"],
        "report": ["report", f"{tmp}/no-such-run"],
        "run": ["run", "--trace", TRACE, "--duration", "5s", "--results", tmp, "-o", f"{tmp}/run.html"],
        "replay engram": ["replay", "engram", "--help"],
        "replay kv": ["replay", "kv", TRACE, "--model", "llama-3.1-8b", "--l2", "1GiB", "--dry-run",
                      "--results", tmp],
        "trace convert": ["trace", "convert", TRACE, "-o", f"{tmp}/conv.jsonl"],
        "trace fit": ["trace", "fit", TRACE, "-o", f"{tmp}/fit.toml"],
        "trace gen": ["trace", "gen", "--model-file", "mooncake-synthetic-fit", "--duration", "1h", "-o",
                      f"{tmp}/gen.jsonl"],
        "trace stats": ["trace", "stats", TRACE],
    }


def leaves() -> list[str]:
    import click

    from kvbench.cli import main

    def walk(c, p=()):
        if isinstance(c, click.Group):
            ctx = click.Context(c)
            for n in c.list_commands(ctx):
                yield from walk(c.get_command(ctx, n), p + (n,))
        else:
            yield " ".join(p)

    return list(walk(main))


def first_output_s(argv: list[str], cap_s: float = 30.0) -> tuple[float | None, str]:
    """Seconds from exec to the first byte the command writes on its terminal (None: silent for ``cap_s``), and
    what it wrote first (shown, so that an error line is not mistaken for a start)."""
    master, slave = pty.openpty()
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "kvbench", *argv], cwd=REPO, stdin=subprocess.DEVNULL,
                         stdout=slave, stderr=slave, start_new_session=True,
                         env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"})
    os.close(slave)
    got, text = None, ""
    try:
        r, _, _ = select.select([master], [], [], cap_s)
        if r:
            got = time.perf_counter() - t0
            try:
                text = os.read(master, 4096).decode(errors="replace")
            except OSError:
                pass
    finally:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            while select.select([master], [], [], 0.2)[0] and os.read(master, 65536):
                pass
        except OSError:
            pass
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        os.close(master)
    return got, " ".join(text.replace("\r", " ").split())[:70]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit-s", type=float, default=1.0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        table = jobs(tmp)
        missing = sorted(set(leaves()) - set(table))
        if missing:
            raise SystemExit(f"no start-up job for: {', '.join(missing)} (add one to jobs())")
        load0 = os.getloadavg()[0]
        print(f"start-up (exec to first output on a terminal), median of {a.repeat}; target < {a.limit_s:g} s")
        slow = []
        for name, argv in table.items():
            outs = [first_output_s(argv) for _ in range(a.repeat)]
            runs = [x for x, _ in outs]
            ok = [x for x in runs if x is not None]
            med = statistics.median(ok) if ok else None
            flag = "" if med is not None and med < a.limit_s else "  <-- over"
            if flag:
                slow.append(name)
            shown = f"{med:6.2f} s" if med is not None else "  silent"
            print(f"  {name:15s} {shown}   [{', '.join(f'{x:.2f}' if x is not None else '-' for x in runs)}]{flag}"
                  f"   {outs[-1][1]!r}")
        print(f"load average {load0:.2f} -> {os.getloadavg()[0]:.2f}; over the target: {', '.join(slow) or 'none'}")


if __name__ == "__main__":
    main()
