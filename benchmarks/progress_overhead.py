"""Which live-progress library costs kvbench less: tqdm or rich (kvbench/progress.py uses the winner).

Two costs count for a CLI whose every command may show a live line: the import (paid by every command at
start-up, line or no line) and the CPU of one update while a line is drawn on a terminal. Both are measured in
process CPU time (the fastest of a few runs: a shared machine's load does not count), the display written to a
pseudo-terminal as a user's would be. rich is measured only where it is importable (``PYTHONPATH`` may point at
a ``pip install --target`` folder: ``PYTHONPATH=/tmp/richpkg python benchmarks/progress_overhead.py``).
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import time

from _timing import fastest_cpu

UPDATES = 20_000


def import_cpu(module: str, repeat: int = 5) -> float:
    """Fewest CPU seconds of a fresh interpreter importing ``module``, less the bare interpreter's."""
    def child(code):
        best = float("inf")
        for _ in range(repeat):
            r = subprocess.run([sys.executable, "-c", code + "; import resource as r; u = r.getrusage(r.RUSAGE_SELF);"
                                "print(u.ru_utime + u.ru_stime)"], capture_output=True, text=True, check=True,
                               env=os.environ)
            best = min(best, float(r.stdout.split()[-1]))
        return best
    return child(f"import {module}") - child("pass")


def tqdm_updates(tty) -> None:
    from tqdm import tqdm

    bar = tqdm(total=UPDATES, file=tty, mininterval=0.1, dynamic_ncols=False, ncols=100)
    for _ in range(UPDATES):
        bar.update(1)
    bar.close()


def rich_updates(tty) -> None:
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(file=tty, force_terminal=True, width=100), refresh_per_second=10) as p:
        task = p.add_task("bench", total=UPDATES)
        for _ in range(UPDATES):
            p.update(task, advance=1)


def main() -> None:
    master, slave = pty.openpty()
    tty = os.fdopen(slave, "w")
    os.set_blocking(master, False)

    def drain():
        try:
            while os.read(master, 1 << 16):
                pass
        except BlockingIOError:
            pass

    rows = []
    for name, module, fn in (("tqdm", "tqdm", tqdm_updates), ("rich", "rich.progress", rich_updates)):
        try:
            __import__(module)
        except ImportError:
            print(f"{name}: not importable here (skipped)")
            continue

        def run():
            fn(tty)
            drain()
        t = time.perf_counter()
        _, cpu = fastest_cpu(run)
        wall = time.perf_counter() - t
        rows.append((name, import_cpu(module), cpu / UPDATES, wall / 3))
    print(f"load average {os.getloadavg()[0]:.2f}; {UPDATES:,} updates drawn on a pseudo-terminal")
    for name, imp, per, wall in rows:
        print(f"{name:5s} import {imp * 1e3:6.1f} ms CPU; {per * 1e6:5.2f} us CPU per update (one run {wall:.2f} s wall)")
    if len(rows) == 2:
        (a, ia, pa, _), (b, ib, pb, _) = rows
        print(f"ratio {b}/{a}: import x{ib / ia:.1f}, per update x{pb / pa:.1f}")


if __name__ == "__main__":
    main()
