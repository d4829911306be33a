"""Replay fidelity and cost: does `kvbench replay kv`, sped up past the device, move as many bytes per second as
`kvbench io` at the same I/O size, depth and read/write mix on the same target? And is memory bounded by the
resident keys rather than by the trace length? Also measures the simulation rate on the Mooncake trace.

    .venv/bin/python benchmarks/replay_vs_io.py [--target /var/tmp/kvbench-bench.store] [--seconds 8]
    .venv/bin/python benchmarks/replay_vs_io.py --throttle 300MB/s   # root + cgroup-v1 blkio: a drive of known speed

Everything it creates (the store file, the loop image and device, the result folders) is removed on exit,
Ctrl-C and SIGTERM included; the printed JSON is the result.

Prints one JSON object: replay and io bandwidth and their ratio (goal >= 0.95), fences, issue lag, peak RSS of
dry runs over 1/4 and all of the trace, and simulation blocks/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))     # this checkout's kvbench, also for in-process imports
MOONCAKE = REPO.parent / "shared" / "traces" / "mooncake-fast25" / "synthetic_trace.jsonl"


CGROUP = None          # blkio cgroup (v1) folder the kvbench children join when --throttle is given


def _join_cgroup():
    if CGROUP is not None:
        with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))


def kvbench(*args, rss=False):
    cmd = [sys.executable, "-m", "kvbench", *map(str, args), "--json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if rss:   # peak RSS of the child, from GNU time's format
        cmd = ["/usr/bin/time", "-f", "RSS_KB=%M", *cmd]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, preexec_fn=_join_cgroup)
    if p.returncode != 0:
        raise SystemExit(f"kvbench {' '.join(map(str, args))} failed: {p.stderr.strip()[-500:]}")
    out = json.loads(p.stdout[p.stdout.index("{"):])
    if rss:
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("RSS_KB=")][-1]
        out["_rss_kb"] = int(line.split("=")[1])
    return out


def _destroy(a):
    return ["--destroy-data", a.destroy] if getattr(a, "destroy", None) else []


def _io(a, read_pct, res):
    rw = "randrw" if 0 < read_pct < 100 else ("randread" if read_pct == 100 else "randwrite")
    io = kvbench("io", "--target", a.target, "--rw", rw, "--rwmixread", max(1, min(99, read_pct)), "--bs", a.chunk,
                 "--qd", a.qd, "--runtime", f"{a.seconds}s", "--results", res, *_destroy(a))
    return {"bw_bytes_per_s": io["bw_bytes_per_s"], "rw": rw, "lat_us": io.get("lat_us")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default="/var/tmp/kvbench-bench.store")
    ap.add_argument("--trace", default=str(MOONCAKE) if MOONCAKE.exists() else "mooncake-sample")
    ap.add_argument("--model", default="tiny-gqa",
                    help="Model of the I/O runs: tiny-gqa gives 256 KiB blocks, ~47%% reads at 3 GiB on Mooncake")
    ap.add_argument("--dry-model", default="llama-3.1-8b", help="Model of the dry runs (simulation rate, memory)")
    ap.add_argument("--capacity", default="3GiB")
    ap.add_argument("--chunk", default="256KiB")
    ap.add_argument("--qd", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--speed", type=float, default=1000.0,
                    help="Open loop at trace time / SPEED (far beyond the device); 0 = closed loop")
    ap.add_argument("--throttle", default=None, metavar="RATE",
                    help="Replay on a loop device throttled to RATE (e.g. 300MB/s) by the blkio cgroup: a drive of "
                         "known bandwidth instead of the VM's noisy disk (needs root).")
    a = ap.parse_args()
    a.speed = a.speed or None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("replay_vs_io: terminated (cleaned up)"))
    if a.throttle:
        from kvbench.engine.throttle import unavailable

        why = unavailable()
        if why:
            sys.exit(f"replay_vs_io --throttle: {why}; it makes a loop device throttled by the cgroup-v1 blkio "
                     "controller, so run it as root on a host with /sys/fs/cgroup/blkio (or drop --throttle)")
        return _throttled(a)
    return _run(a)


def _throttled(a):
    """Loop device over a sparse file, blkio.throttle read/write bps on it, every kvbench child in the cgroup."""
    global CGROUP
    from kvbench.units import parse_rate, parse_size

    from kvbench.engine.throttle import throttled_loop

    bps = int(parse_rate(a.throttle))
    size = parse_size(a.capacity) + (2 << 30)
    # fallocated (no first-write cost) and direct-I/O loop (no host page cache): the throttle sets the speed
    with throttled_loop("/var/tmp/kvbench-bench-loop.img", size, allocate=True, direct_io=True,
                        read_bps=bps, write_bps=bps) as loop:
        CGROUP = str(loop.cgroup)
        try:
            a.target = a.destroy = loop.device
            out = _run(a)
            out["throttle_bytes_per_s"] = bps
            return out
        finally:
            CGROUP = None


def _run(a):
    res = tempfile.mkdtemp(prefix="kvbench-bench-")
    try:
        return _measure(a, res)
    finally:
        shutil.rmtree(res, ignore_errors=True)


def _measure(a, res):
    out = {"target": a.target, "trace": a.trace, "model": a.model, "chunk": a.chunk, "qd": a.qd}

    # 1. simulation rate and memory: dry runs over a quarter and the whole trace, same capacities
    quarter = kvbench("replay", "kv", a.trace, "--model", a.dry_model, "--l2", "8GiB", "--l3", a.target,
                      "--l3-capacity", "64GiB", "--dry-run", "--max-requests", 1000, "--results", res, rss=True)
    full = kvbench("replay", "kv", a.trace, "--model", a.dry_model, "--l2", "8GiB", "--l3", a.target,
                   "--l3-capacity", "64GiB", "--dry-run", "--results", res, rss=True)
    out["dry_run"] = {"requests": [quarter["requests"], full["requests"]],
                      "peak_rss_mib": [quarter["_rss_kb"] / 1024, full["_rss_kb"] / 1024],
                      "sim_blocks_per_s": full["simulation"]["blocks_per_s"],
                      "planned_ios": full["planned_ios"], "fences": full["fences"],
                      "elapsed_s": full["elapsed_s"]}
    one_tier = kvbench("replay", "kv", a.trace, "--model", a.dry_model, "--l2", "64GiB", "--dry-run", "--results", res)
    out["dry_run"]["single_tier_sim_blocks_per_s"] = one_tier["simulation"]["blocks_per_s"]

    # 2./3. replay sped past the device (closed loop; L3 only, so every byte goes to the one target), and
    # kvbench io on the same file at the same I/O size, depth and read share; alternated, io first (so both
    # see an allocated file), two rounds each, medians compared
    created = not os.path.exists(a.target) and not a.target.startswith("/dev/")
    reps, ios = [], []
    read_pct = None
    try:
        _io(a, 50, res)                       # warm-up, not counted
        for _ in range(2):
            if read_pct is not None:
                ios.append(_io(a, read_pct, res))
            pacing = ["--closed-loop"] if a.speed is None else ["--speed", a.speed]
            rep = kvbench("replay", "kv", a.trace, "--model", a.model, "--l3", a.target, "--l3-capacity",
                          a.capacity, *pacing, "--duration", f"{a.seconds}s", "--chunk", a.chunk,
                          "--qd", a.qd, "--verify", "off", "--results", res, *_destroy(a))
            l3 = rep["tiers"]["l3"]
            moved = l3["read_bytes"] + l3["write_bytes"]
            read_pct = int(round(100 * l3["read_bytes"] / moved)) if moved else 0
            reps.append({"bw_bytes_per_s": moved / rep["wall_s"], "read_pct": read_pct, "wall_s": rep["wall_s"],
                         "requests": rep["requests"], "fences": rep["fences"], "planned_ios": rep["planned_ios"],
                         "read_lat_us": l3["read_lat_us"], "write_lat_us": l3["write_lat_us"],
                         "load_time_ms": rep["load_time_ms"], "hit_ratio": rep["hit_ratio"],
                         "issue_lag_us": rep.get("issue_lag_us"), "pacing": rep["pacing"]})
        ios.append(_io(a, read_pct, res))
    finally:
        if created:
            for p in (a.target, a.target + ".kvbench-owned"):
                try:
                    os.unlink(p)
                except OSError:
                    pass
    med = lambda xs: sorted(xs)[len(xs) // 2] if len(xs) % 2 else sum(sorted(xs)[len(xs) // 2 - 1:][:2]) / 2
    out["replay"] = reps
    out["io"] = ios
    rb, ib = med([r["bw_bytes_per_s"] for r in reps]), med([i["bw_bytes_per_s"] for i in ios])
    out["replay_bw_median"], out["io_bw_median"] = rb, ib
    out["ratio_replay_over_io"] = rb / ib if ib else None
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
