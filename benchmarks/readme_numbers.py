#!/usr/bin/env python3
"""Every performance and accuracy number the README states, regenerated: one claim per number, each measured
over repeated runs (median and range), checked against the range the README states, with the machine, the
date and the command that measures it.

    .venv/bin/python benchmarks/readme_numbers.py                  # every claim this machine can measure
    .venv/bin/python benchmarks/readme_numbers.py --fast           # the quick accuracy/ratio subset (tests run it)
    .venv/bin/python benchmarks/readme_numbers.py --only shards-mae,ftl-fifo --runs 5
    .venv/bin/python benchmarks/readme_numbers.py --write-readme   # replace the README's table with this run's
    .venv/bin/python benchmarks/readme_numbers.py --write-readme --from-json numbers.json   # from a saved run

Exit status 1 when a measured value (any run; only the median for claims marked "(median)", which are noisy
on a shared VM) falls outside its claim's stated range;
claims whose requirements are missing (fio, root, the cgroup-v1 blkio controller) are listed as skipped with
the reason. Speeds are absolute and machine-bound, so they are measured and printed but belong to no fast
subset: the test checks ratios and accuracies only, never wall-clock time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BENCH))

README = REPO / "README.md"
BEGIN, END = "<!-- readme-numbers:begin -->", "<!-- readme-numbers:end -->"


@dataclass(frozen=True)
class Claim:
    """One number the README states: what it is, the range it promises, and how to measure one run of it."""

    key: str
    what: str                          # the README's words for it
    unit: str                          # "x", "%", "M refs/s", "abs", "s"
    lo: float                          # stated range, inclusive
    hi: float
    command: str                       # the command beside the number in the README
    measure: Callable[[bool, int], float]      # (fast, run index) -> one value
    runs: int = 3
    fast: bool = False                 # in the quick subset the tests run (ratios and accuracies only)
    median_only: bool = False          # noisy on a shared VM: the median must be in range, runs may spread
    needs: Callable[[], str | None] = lambda: None   # why it cannot be measured here, or None

    def stated(self) -> str:
        return f"{_fmt(self.lo, self.unit)} to {_fmt(self.hi, self.unit)}" + (" (median)" if self.median_only else "")


def _fmt(v: float, unit: str) -> str:
    """Plain decimals (never exponent notation) with the unit as the README writes it."""
    if unit == "%":
        return f"{v:+.2f}%" if v < 0 else f"{v:.2f}%"
    if unit == "abs":
        return "0" if v == 0 else np.format_float_positional(v, precision=2, unique=False, fractional=False,
                                                             trim="-")
    if unit == "x":
        return f"{v:.2f}x"
    if unit == "s":
        return f"{v:.0f} s"
    return f"{v:.1f} {unit}"


# --- requirements ------------------------------------------------------------------------------------------
def _need_fio() -> str | None:
    return None if shutil.which("fio") else "needs fio (apt-get install fio)"


def _need_throttle() -> str | None:
    from kvbench.engine.throttle import unavailable

    return unavailable()


def _need_fio_and_throttle() -> str | None:
    return _need_fio() or _need_throttle()


# --- measurements: one run each -------------------------------------------------------------------------------
_CACHE: dict = {}


def _trace(kind: str, requests: int, block_tokens: int, seed: int = 1):
    from mrc_speed import make_trace

    key = (kind, requests, block_tokens, seed)
    if key not in _CACHE:
        _CACHE[key] = make_trace(kind, requests, block_tokens, seed)
    return _CACHE[key]


def exact_vs_brute(fast: bool, i: int) -> float:
    """Largest |exact Mattson curve - brute-force LRU simulation| over capacities (one simulation per size)."""
    from kvbench.analysis.curves.profile import exact_profile, policy_hit_ratios

    t = _trace("chat", 300 if fast else 2000, 16, seed=1 + i)
    prof = exact_profile(t)
    caps = np.unique(np.geomspace(1, max(2, prof.max_distance), 12).astype(np.int64))
    brute, _ = policy_hit_ratios(t, "lru", caps)
    return float(np.max(np.abs(prof.hit_ratio(caps) - brute)))


def shards_mae(fast: bool, i: int) -> float:
    """SHARDS (fixed rate 0.1) mean absolute error against the exact curve, in hit-ratio points (%), over 100
    capacities from 1 block to the largest reuse distance; a different hash salt each run."""
    from kvbench.analysis.curves.profile import exact_profile, shards_profile

    t = _trace("agent", 12000, 64)
    exact = _CACHE.get("agent-exact")
    if exact is None:
        exact = _CACHE["agent-exact"] = exact_profile(t)
    grid = np.linspace(1, max(1.0, exact.max_distance), 100)
    est = shards_profile(t, rate=0.1, salt=i)
    return float(np.mean(np.abs(est.hit_ratio(grid) - exact.hit_ratio(grid)))) * 100


def _refs_per_s(fn, t) -> float:
    import time

    fn(t)                                               # JIT compiled and cached
    c0 = time.process_time()
    fn(t)
    return t.n_blocks / (time.process_time() - c0) / 1e6


def exact_speed(fast: bool, i: int) -> float:
    """Exact LRU curve, references per CPU-second on one core, agent trace with 64-token blocks."""
    from kvbench.analysis.curves.profile import exact_profile

    return _refs_per_s(exact_profile, _trace("agent", 12000, 64))


def shards_speed(fast: bool, i: int) -> float:
    """SHARDS at rate 0.1, references per CPU-second on one core, same trace."""
    from kvbench.analysis.curves.profile import shards_profile

    return _refs_per_s(lambda t: shards_profile(t, rate=0.1), _trace("agent", 12000, 64))


def _ftl(gc: str, op: float, fast: bool, i: int) -> float:
    """FTL model WAF of uniform random writes vs the closed form, relative error in %."""
    from kvbench.analysis.ftl import FtlConfig, analytic_waf_uniform, simulate

    cfg = FtlConfig(user_bytes=4 << 30, op=op, block_pages=256, gc=gc)     # 1M pages: small drives bias WAF up
    r = simulate(cfg, pattern="uniform", writes=4.0, warmup=0.5, seed=1 + i)
    return (r.waf / analytic_waf_uniform(cfg.effective_op) - 1) * 100


def key_sampling(fast: bool, i: int) -> float:
    """Largest |sampled replay hit ratio - exact curve| on the shipped Mooncake synthetic trace, over sample
    rates 0.0124, 0.05, 0.1 and full-size caches of 2,000-20,000 blocks (dry runs; sample seed = run index)."""
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.replay.kv import ReplayConfig, replay_kv
    from kvbench.stream.traces import read_trace

    exact = _CACHE.get("synthetic-exact")
    if exact is None:
        exact = _CACHE["synthetic-exact"] = exact_profile(read_trace("mooncake-synthetic"))
    block = 262144                                     # tiny-gqa: 512 B/token x 512-token blocks
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        for rate in (0.0124, 0.05, 0.1):
            for cap in ((2000, 20000) if fast else (2000, 5000, 10000, 20000)):
                s = replay_kv(ReplayConfig(trace="mooncake-synthetic", model="tiny-gqa", l3=f"{d}/s",
                                           l3_capacity=cap * block, dry_run=True, sample_keys=rate,
                                           sample_seed=i, results=d))
                worst = max(worst, abs(s["hit_ratio"] - float(exact.hit_ratio(cap))))
    return worst


def histogram_error(fast: bool, i: int) -> float:
    """Largest relative error (%) of the latency histogram's percentiles against exact order statistics of
    log-uniform latencies from 100 ns to 10 s."""
    from kvbench.metrics.histogram import LatencyHistogram

    rng = np.random.default_rng(i)
    v = np.exp(rng.uniform(np.log(200), np.log(1e10), 200_000 if fast else 2_000_000)).astype(np.int64)
    h = LatencyHistogram()
    h.record(v)
    qs = np.array([1, 10, 25, 50, 75, 90, 99, 99.9, 99.99])
    s = np.sort(v)
    exact = s[np.maximum(1, np.ceil(qs / 100 * v.size - 1e-9).astype(np.int64)) - 1]
    got = np.array([h.value_at(q) for q in qs])
    return float(np.max(np.abs(got / exact - 1))) * 100


def _vs_fio(case: str, fast: bool, i: int) -> float:
    """kvbench / fio IOPS on identical offsets (one worker, kvbench's default huge-page buffers), one round."""
    import vs_fio

    from kvbench.engine import open_target, run_plan, make_plan

    name, op, rand, bs, qd = next(c for c in vs_fio.CASES if c[0] == case)
    size = 1 << 30
    path = str(REPO / "results" / "vsfio-scratch.dat")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t = open_target(path, size=size, write=True)
    try:
        if t.created:                       # filled once, reused by every vs-fio claim, removed at exit
            import atexit

            from kvbench.engine.safety import unmark

            atexit.register(lambda: (Path(path).unlink(missing_ok=True), unmark(path)))
            run_plan(make_plan(1, np.arange(size >> 20) << 20, 1 << 20, tag=vs_fio.TAG), [t], qd=8).raise_for_status()
            os.fsync(t.fd)
        probe = vs_fio.run_kv(t, vs_fio.build(op, rand, bs, size, 4000 if bs <= 16384 else 400), qd, 1)
        n = int(max(2000, min(probe["iops"] * 3.0, 4_000_000)))
        plan = vs_fio.build(op, rand, bs, size, n, seed=1 + i)
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "p.iolog")
            from kvbench.engine.iolog import write_iolog

            write_iolog(log, plan, [t.path])
            k = vs_fio.run_kv(t, plan, qd, 1)
            t.close()
            f = vs_fio.run_fio(log, qd, n, bs, op)
    finally:
        t.close()
    return k["iops"] / f["iops"]


def fidelity(fast: bool, i: int) -> float:
    """kvbench's measured bandwidth ratio of two loop devices throttled 4.7x apart (vs_fio.py --fidelity)."""
    import vs_fio

    return vs_fio.fidelity(5.0)["kvbench_ratio"]


def replay_vs_io(fast: bool, i: int) -> float:
    """Replay bandwidth / kvbench io bandwidth on a loop device throttled to 300 MB/s (replay_vs_io.py)."""
    p = subprocess.run([sys.executable, str(BENCH / "replay_vs_io.py"), "--throttle", "300MB/s", "--seconds", "6"],
                       cwd=REPO, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
    return float(json.loads(p.stdout[p.stdout.index("{"):])["ratio_replay_over_io"])


def run_duration(fast: bool, i: int) -> float:
    """Wall seconds of `kvbench run` with every default (the README's quick start)."""
    import time

    with tempfile.TemporaryDirectory(dir=REPO / "results" if (REPO / "results").is_dir() else None) as d:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "kvbench", "run", "--results", d, "-o", f"{d}/r.html"], cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError((p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1])
        return time.perf_counter() - t0


B = "benchmarks/readme_numbers.py --only"
CLAIMS: dict[str, Claim] = {c.key: c for c in [
    Claim("mrc-exact-vs-brute", "exact LRU curve vs a brute-force LRU simulation (largest difference)", "abs",
          0.0, 1e-9, f"{B} mrc-exact-vs-brute", exact_vs_brute, fast=True),
    Claim("shards-mae", "SHARDS at rate 0.1: mean absolute error vs the exact curve", "%", 0.0, 0.2,
          f"{B} shards-mae  (benchmarks/mrc_speed.py for all rates)", shards_mae, runs=5, fast=True),
    Claim("mrc-exact-speed", "exact LRU curve: references per CPU-second, one core, KV trace", "M refs/s",
          12.0, 60.0, f"{B} mrc-exact-speed  (benchmarks/mrc_speed.py)", exact_speed),
    Claim("shards-speed", "SHARDS rate 0.1: references per CPU-second, one core, KV trace", "M refs/s",
          70.0, 280.0, f"{B} shards-speed  (benchmarks/mrc_speed.py)", shards_speed),
    Claim("ftl-fifo-op0.07", "FTL model, FIFO GC, OP 0.07: WAF vs closed form", "%", -1.0, 1.0,
          f"{B} ftl-fifo-op0.07  (benchmarks/ftl_speed.py)", lambda f, i: _ftl("fifo", 0.07, f, i), fast=True),
    Claim("ftl-fifo-op0.28", "FTL model, FIFO GC, OP 0.28: WAF vs closed form", "%", -1.0, 1.0,
          f"{B} ftl-fifo-op0.28  (benchmarks/ftl_speed.py)", lambda f, i: _ftl("fifo", 0.28, f, i), fast=True),
    Claim("ftl-greedy-op0.07", "FTL model, greedy GC (default), OP 0.07: WAF vs closed form", "%", -3.0, 0.0,
          f"{B} ftl-greedy-op0.07  (benchmarks/ftl_speed.py)", lambda f, i: _ftl("greedy", 0.07, f, i), fast=True),
    Claim("ftl-greedy-op0.28", "FTL model, greedy GC (default), OP 0.28: WAF vs closed form", "%", -1.5, 0.0,
          f"{B} ftl-greedy-op0.28  (benchmarks/ftl_speed.py)", lambda f, i: _ftl("greedy", 0.28, f, i), fast=True),
    Claim("key-sampling", "key-sampled replay hit ratio vs the exact curve (largest difference, rates "
          "0.0124-0.1)", "abs", 0.0, 0.02, f"{B} key-sampling", key_sampling, runs=3, fast=True),
    Claim("histogram-error", "latency histogram: largest relative error of a percentile", "%", 0.0, 0.39,
          f"{B} histogram-error", histogram_error, runs=3, fast=True),
    # one round each on a VM disk the host caches: single rounds spread widely, so the median is the claim
    Claim("vs-fio-4k-randread", "kvbench / fio IOPS, 4 KiB random read QD32, identical offsets", "x", 0.7, 1.3,
          f"{B} vs-fio-4k-randread  (benchmarks/vs_fio.py)", lambda f, i: _vs_fio("4k-randread-qd32", f, i),
          runs=5, needs=_need_fio, median_only=True),
    Claim("vs-fio-4k-randwrite", "kvbench / fio IOPS, 4 KiB random write QD32, identical offsets", "x", 0.7, 1.3,
          f"{B} vs-fio-4k-randwrite  (benchmarks/vs_fio.py)", lambda f, i: _vs_fio("4k-randwrite-qd32", f, i),
          runs=5, needs=_need_fio, median_only=True),
    Claim("vs-fio-128k-randread", "kvbench / fio IOPS, 128 KiB random read QD32, kvbench's default huge-page "
          "buffers (fio: 4 KiB pages)", "x", 0.8, 2.6, f"{B} vs-fio-128k-randread  (benchmarks/vs_fio.py)",
          lambda f, i: _vs_fio("128k-randread-qd32", f, i), runs=5, needs=_need_fio, median_only=True),
    Claim("fidelity-4.7x", "two loop devices throttled 4.7x apart: the ratio kvbench measures", "x", 4.5, 4.8,
          f"{B} fidelity-4.7x  (benchmarks/vs_fio.py --fidelity --seconds 5)", fidelity, runs=3,
          needs=_need_fio_and_throttle),
    Claim("replay-vs-io", "replay kv bandwidth / kvbench io bandwidth, loop device throttled to 300 MB/s", "x",
          0.95, 1.05, f"{B} replay-vs-io  (benchmarks/replay_vs_io.py --throttle 300MB/s)", replay_vs_io,
          runs=3, needs=_need_throttle),
    Claim("run-duration", "`kvbench run` with every default, wall time", "s", 60.0, 240.0,
          f"{B} run-duration  (kvbench run)", run_duration, runs=2),
]}


# --- running and reporting ---------------------------------------------------------------------------------
def machine() -> str:
    from kvbench.metrics.environment import cpu_model

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    virt = " (VM)" if Path("/sys/hypervisor").exists() or "hypervisor" in Path("/proc/cpuinfo").read_text() else ""
    return f"{os.cpu_count()} x {cpu_model() or 'unknown CPU'}, {mem:.0f} GiB{virt}, Linux {os.uname().release}"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def measure(claim: Claim, fast: bool, runs: int | None = None) -> dict:
    """Run one claim ``runs`` times: values, median, range, and whether every run is inside the stated range."""
    why = claim.needs()
    if why:
        return {"key": claim.key, "skipped": why}
    n = runs or (min(claim.runs, 2) if fast else claim.runs)
    values = []
    for i in range(n):
        try:
            values.append(float(claim.measure(fast, i)))
        except Exception as e:  # noqa: BLE001 - one failed claim is reported, the others still run
            return {"key": claim.key, "error": f"{type(e).__name__}: {e}", "values": values}
    med = statistics.median(values)
    inside = [claim.lo <= v <= claim.hi for v in ([med] if claim.median_only else values)]
    return {"key": claim.key, "values": values, "median": med, "min": min(values),
            "max": max(values), "runs": n, "ok": all(inside), "fast": fast}


def markdown(results: list[dict], when: str, where: str, rev: str) -> str:
    """The README's table: one row per claim (measured or not), the stated range, median and range, command."""
    lines = [BEGIN,
             f"Measured {when} on {where}, commit {rev}; regenerate with "
             "`.venv/bin/python benchmarks/readme_numbers.py --write-readme`.",
             "",
             "| number | stated range | median (min-max, runs) | command |",
             "| --- | --- | --- | --- |"]
    by_key = {r["key"]: r for r in results}
    for c in CLAIMS.values():
        r = by_key.get(c.key, {})
        if "median" in r:
            got = f"{_fmt(r['median'], c.unit)} ({_fmt(r['min'], c.unit)} to {_fmt(r['max'], c.unit)}, {r['runs']})"
            if r.get("fast"):
                got += " fast subset"
        else:
            got = "not measured here: " + (r.get("skipped") or r.get("error") or "not run")
        lines.append(f"| `{c.key}`: {c.what} | {c.stated()} | {got} | `{c.command}` |")
    lines.append(END)
    return "\n".join(lines)


def write_readme(block: str, path: Path = README) -> None:
    text = path.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"readme_numbers: {path} has no {BEGIN} ... {END} block; add one where the table belongs")
    head, rest = text.split(BEGIN, 1)
    path.write_text(head + block + rest.split(END, 1)[1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fast", action="store_true",
                    help="only the quick accuracy/ratio claims, 2 runs each (same inputs as the full run)")
    ap.add_argument("--only", default=None, help="comma list of claim keys (see --list)")
    ap.add_argument("--runs", type=int, default=None, help="runs per claim (default: each claim's own)")
    ap.add_argument("--list", action="store_true", help="list the claims and exit")
    ap.add_argument("--json", dest="json_out", default=None, metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--write-readme", action="store_true", help="replace the README's numbers table")
    ap.add_argument("--from-json", default=None, metavar="FILE",
                    help="with --write-readme: write the table from a saved --json result instead of measuring")
    a = ap.parse_args(argv)
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        write_readme(markdown(saved["results"], saved["date"], saved["machine"], saved["commit"]))
        print(f"README table rewritten from {a.from_json} ({README})")
        return 0
    if a.list:
        for c in CLAIMS.values():
            print(f"{c.key:<22} {'fast ' if c.fast else '     '}{c.stated():>24}  {c.what}")
        return 0
    keys = [k.strip() for k in a.only.split(",")] if a.only else [k for k, c in CLAIMS.items() if c.fast or not a.fast]
    unknown = [k for k in keys if k not in CLAIMS]
    if unknown:
        print(f"readme_numbers: unknown claim(s) {', '.join(unknown)}; --list shows them", file=sys.stderr)
        return 2
    if a.runs is not None and a.runs < 1:
        print("readme_numbers: --runs must be >= 1", file=sys.stderr)
        return 2
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    where, rev = machine(), commit()
    print(f"{when}; {where}; commit {rev}" + ("; fast subset" if a.fast else ""))
    print(f"{'claim':<22} {'stated range':>24} {'median':>12} {'min':>12} {'max':>12} {'runs':>4}  result")
    results, failed = [], []
    for k in keys:
        c = CLAIMS[k]
        r = measure(c, a.fast, a.runs)
        results.append(r)
        if "median" in r:
            verdict = "ok" if r["ok"] else "OUTSIDE the stated range"
            print(f"{k:<22} {c.stated():>24} {_fmt(r['median'], c.unit):>12} {_fmt(r['min'], c.unit):>12} "
                  f"{_fmt(r['max'], c.unit):>12} {r['runs']:>4}  {verdict}", flush=True)
            if not r["ok"]:
                failed.append(k)
        else:
            print(f"{k:<22} {c.stated():>24} {'':>12} {'':>12} {'':>12} {'':>4}  "
                  + (f"skipped: {r['skipped']}" if "skipped" in r else f"ERROR: {r['error']}"), flush=True)
            if "error" in r:
                failed.append(k)
    out = {"date": when, "machine": where, "commit": rev, "fast": a.fast, "results": results}
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(out, indent=2) + "\n")
    if a.write_readme:
        write_readme(markdown(results, when, where, rev))
        print(f"README table rewritten ({README})")
    if failed:
        print(f"readme_numbers: {len(failed)} claim(s) outside their stated range or failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    return 0


def readme_rows(text: str) -> dict[str, str]:
    """Claim key -> its stated-range cell, from the README's numbers table (what the tests compare)."""
    block = text.split(BEGIN, 1)[1].split(END, 1)[0] if BEGIN in text else ""
    rows = {}
    for line in block.splitlines():
        m = re.match(r"\|\s*`([\w.\-]+)`[^|]*\|\s*([^|]+?)\s*\|", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


if __name__ == "__main__":
    sys.exit(main())
