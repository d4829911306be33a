#!/usr/bin/env python3
"""kvbench vs fio on identical I/O: the same offsets (exported as a fio iolog v3), the same file, one run.

For each case the plan is built once, written as an iolog, and replayed by fio (libaio, direct=1,
numjobs=1, replay_no_stall=1, slat/clat/lat percentiles) and by kvbench's engine, alternating in several
rounds so that drift of a shared machine hits both; the medians over rounds give the ratios. kvbench runs with
``--workers W`` processes sharing the same total queue depth (qd / W each).

Latency is compared as fio defines it, each kind with its own: slat (handed to io_submit -> io_submit
returned), clat (io_submit returned -> completion reaped) and lat (their sum). The depth each tool really kept
is measured the same way for both, by Little's law: inflight = IOPS x mean total latency (fio's JSON, and
kvbench's ``inflight_mean``); latencies only compare at equal measured depth, so it is printed beside them.
fio reaps one completion per io_getevents by default (iodepth_batch_complete_max = 1) and so does kvbench
(``--reap-batch 1 0`` also runs kvbench reaping every ready completion at once, which keeps fewer in flight).

    .venv/bin/python benchmarks/vs_fio.py [--target results/vsfio.dat] [--size 1GiB] [--seconds 3] [--rounds 3]
    .venv/bin/python benchmarks/vs_fio.py --fidelity     # drives of known speed: throttled loop devices

``--fidelity`` needs root (losetup, cgroup writes) and the cgroup-v1 blkio controller (/sys/fs/cgroup/blkio);
without them it exits with one line saying which is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvbench.engine import make_plan, open_target, run_plan  # noqa: E402
from kvbench.engine.iolog import write_iolog  # noqa: E402
from kvbench.metrics import diskstats  # noqa: E402
from kvbench.units import parse_size  # noqa: E402

CASES = [  # name, op, random, bs, qd
    ("4k-randread-qd32", 0, True, 4096, 32),
    ("128k-randread-qd32", 0, True, 128 << 10, 32),
    ("1m-seqread-qd8", 0, False, 1 << 20, 8),
    ("4k-randwrite-qd32", 1, True, 4096, 32),
]
TAG = 0x5653464
KINDS = ("slat", "clat", "lat")
STATS = ("iops", "bw", "inflight", *(f"{k}_{q}" for k in KINDS for q in ("p50", "p99")))

def build(op, rand, bs, size, n, seed=1):
    blocks = size // bs
    idx = np.random.default_rng(seed).integers(0, blocks, n) if rand else np.arange(n) % blocks
    return make_plan(op, idx * bs, bs, tag=TAG)


def run_fio(log, qd, n, bs, op):
    cmd = ["fio", "--name=vs", "--ioengine=libaio", "--direct=1", f"--iodepth={qd}", f"--read_iolog={log}",
           "--replay_no_stall=1", "--lat_percentiles=1", "--clat_percentiles=1", "--slat_percentiles=1",
           f"--io_size={n * bs}", "--output-format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    j = json.loads(out[out.index("{"):])["jobs"][0]["write" if op else "read"]
    row = {"iops": j["iops"], "bw": j["bw_bytes"], "ios": j["total_ios"],
           "inflight": j["iops"] * j["lat_ns"]["mean"] / 1e9}
    for kind in KINDS:
        p = j[f"{kind}_ns"].get("percentile", {})
        row[f"{kind}_p50"] = p.get("50.000000", float("nan")) / 1e3
        row[f"{kind}_p99"] = p.get("99.000000", float("nan")) / 1e3
    return row


def run_kv(target, plan, qd, workers, hugepages=True, reap_batch=1):
    r = run_plan(plan, [target], qd=max(1, qd // workers), workers=workers, hugepages=hugepages,
                 reap_batch=reap_batch)
    r.raise_for_status()
    s = r.summary()
    row = {"iops": s["iops"], "bw": s["bw_bytes_per_s"], "ios": s["ios"], "cpu": s["cpu"]["utilisation"],
           "inflight": s["inflight_mean"]}
    for kind in KINDS:
        row[f"{kind}_p50"] = s[f"{kind}_us"]["p50"]
        row[f"{kind}_p99"] = s[f"{kind}_us"]["p99"]
    return row


def fidelity(seconds: float) -> dict:
    """Two loop devices throttled by the blkio cgroup to a 4.7x bandwidth ratio: drives of known speed.

    kvbench and fio each read them (128 KiB random, QD 8) from inside the throttled cgroup; both must report
    the bandwidth that was set and the 4.7x ratio (DESIGN.md)."""
    from kvbench.engine.throttle import throttled_loop, unavailable

    why = unavailable()
    if why:
        sys.exit(f"vs_fio --fidelity: {why}; it makes loop devices throttled by the cgroup-v1 blkio controller, "
                 "so run it as root on a host with /sys/fs/cgroup/blkio (or run vs_fio.py without --fidelity)")
    tmp = tempfile.mkdtemp(prefix="vsfio-fid-", dir="/var/tmp")
    rows = []
    repo = Path(__file__).resolve().parents[1]
    try:
        for i, bps in enumerate((16 << 20, int((16 << 20) * 4.7))):
            with throttled_loop(os.path.join(tmp, f"d{i}.img"), 256 << 20, read_bps=bps) as loop:
                dev = loop.device
                kv = subprocess.run(loop.argv([sys.executable, "-m", "kvbench", "io", "--target", dev, "--rw",
                                               "randread", "--bs", "128k", "--qd", "8", "--runtime", f"{seconds}s",
                                               "--results", f"{tmp}/results", "--json"]),
                                    cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True,
                                    text=True, check=True)
                fio = subprocess.run(loop.argv(["fio", "--name=f", f"--filename={dev}", "--rw=randread", "--bs=128k",
                                                "--iodepth=8", "--ioengine=libaio", "--direct=1", "--time_based",
                                                f"--runtime={seconds}", "--output-format=json"]),
                                     capture_output=True, text=True, check=True)
            kv_bw = json.loads(kv.stdout)["bw_bytes_per_s"]
            fio_bw = json.loads(fio.stdout)["jobs"][0]["read"]["bw_bytes"]
            rows.append((bps, kv_bw, fio_bw))
            print(f"device {dev} throttled to {bps / 1e6:.1f} MB/s: kvbench {kv_bw / 1e6:.1f} MB/s "
                  f"(x{kv_bw / bps:.3f}), fio {fio_bw / 1e6:.1f} MB/s (x{fio_bw / bps:.3f})")
        (s0, k0, f0), (s1, k1, f1) = rows
        print(f"ratio set {s1 / s0:.2f}: kvbench measured {k1 / k0:.2f}, fio measured {f1 / f0:.2f}")
        out = {"set_ratio": s1 / s0, "kvbench_ratio": k1 / k0, "fio_ratio": f1 / f0, "rows": rows}
        print("JSON " + json.dumps(out))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="results/vsfio-scratch.dat")
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--seconds", type=float, default=3.0, help="target duration of each measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="kvbench worker counts to compare")
    ap.add_argument("--cases", nargs="+", default=[c[0] for c in CASES])
    ap.add_argument("--reap-batch", type=int, nargs="+", default=[1],
                    help="kvbench completions per io_getevents to compare (1: fio's default; 0: all ready)")
    ap.add_argument("--kv-4k-pages", action="store_true",
                    help="also run kvbench with 4 KiB-page buffers like fio's (default: huge pages only)")
    ap.add_argument("--keep-target", action="store_true",
                    help="keep the target file when vs_fio created it (default: removed at the end)")
    ap.add_argument("--fidelity", action="store_true",
                    help="instead: measure two blkio-throttled loop devices (known 4.7x bandwidth ratio)")
    a = ap.parse_args(argv)
    if shutil.which("fio") is None:
        sys.exit("vs_fio: fio is not installed; install it (apt-get install fio, or bash .ci/install)")
    if a.fidelity:
        fidelity(a.seconds)
        return
    size = parse_size(a.size)
    os.makedirs(os.path.dirname(os.path.abspath(a.target)), exist_ok=True)
    t = open_target(a.target, size=size, write=True)
    created = t.created
    if t.created:                                   # fill it so reads reach the device
        r = run_plan(make_plan(1, np.arange(size >> 20) << 20, 1 << 20, tag=TAG), [t], qd=8)
        r.raise_for_status()
        os.fsync(t.fd)
    print(f"target {t.path} ({t.fstype}, device {t.device}, lbs {t.lbs}), {a.rounds} rounds, "
          f"~{a.seconds:g} s each; medians; ratio = kvbench / fio")
    tmp = tempfile.mkdtemp(prefix="vsfio-")
    rows = []
    try:
        for name, op, rand, bs, qd in CASES:
            if name not in a.cases:
                continue
            # the run length from a probe of kvbench's rate; the best of two, as the first may pay for loading
            # the compiled loop or meet a burst of other work on a shared machine
            probe = max((run_kv(t, build(op, rand, bs, size, 4000 if bs <= 16384 else 400), qd, 1)
                         for _ in range(2)), key=lambda r: r["iops"])
            n = int(max(2000, min(probe["iops"] * a.seconds, 4_000_000)))
            plan = build(op, rand, bs, size, n)
            log = os.path.join(tmp, f"{name}.iolog")
            write_iolog(log, plan, [t.path])
            # kvbench variants: (workers, huge-page buffers, reap batch), one row each
            variants = {f"kv{w}" + (f"-r{rb}" if rb != 1 else ""): (w, True, rb)
                        for w in a.workers for rb in a.reap_batch}
            if a.kv_4k_pages:
                variants |= {f"{k}-4k": (w, False, rb) for k, (w, _, rb) in variants.items()}
            res = {"fio": []} | {k: [] for k in variants}
            host = {}
            for _ in range(a.rounds):
                for who in res:
                    before = diskstats.snapshot([t.device])
                    if who == "fio":
                        t.close()                   # fio opens the file itself; kvbench's lock must not block it
                        res[who].append(run_fio(log, qd, n, bs, op))
                        t = open_target(a.target, write=True)
                    else:
                        w, huge, rb = variants[who]
                        res[who].append(run_kv(t, plan, qd, w, hugepages=huge, reap_batch=rb))
                    d = diskstats.delta(before, diskstats.snapshot([t.device])).get(t.device, {})
                    host.setdefault(who, []).append(d.get("write_bytes" if op else "read_bytes", 0) / (n * bs))
            med = {who: {k: statistics.median(x[k] for x in v) for k in STATS} for who, v in res.items()}
            f = med["fio"]
            print(f"\n{name}: {n} I/Os per run; fio iops {f['iops']:.0f} bw {f['bw'] / 1e6:.0f} MB/s "
                  f"in flight {f['inflight']:.1f}; "
                  + " ".join(f"{k} p50/p99 {f[k + '_p50']:.1f}/{f[k + '_p99']:.0f} us" for k in KINDS)
                  + f" (device bytes / planned: {statistics.median(host['fio']):.2f})")
            for who in res:
                if who == "fio":
                    continue
                k = med[who]
                w, huge, rb = variants[who]
                row = {"case": name, "kvbench_workers": w, "buffers": "hugepages" if huge else "4k-pages",
                       "reap_batch": rb,
                       "iops_ratio": k["iops"] / f["iops"], "bw_ratio": k["bw"] / f["bw"],
                       "kv_inflight": k["inflight"], "fio_inflight": f["inflight"],
                       "kv_iops": k["iops"], "fio_iops": f["iops"]}
                for kind in KINDS:
                    for q in ("p50", "p99"):
                        row[f"{kind}_{q}_ratio"] = k[f"{kind}_{q}"] / f[f"{kind}_{q}"] if f[f"{kind}_{q}"] else None
                # each round's ratio to the fio run just before it (drift of a shared machine hits both alike)
                paired = {st: [kv[st] / fo[st] if fo[st] else float("nan") for kv, fo in zip(res[who], res["fio"])]
                          for st in ("iops", "clat_p50", "clat_p99")}
                row["rounds"] = paired
                row["paired_median"] = {st: statistics.median(v) for st, v in paired.items()}
                rows.append(row)
                print(f"  kvbench workers={w} (qd {max(1, qd // w)} each, {row['buffers']}, reap batch "
                      f"{rb or 'all'}): iops {k['iops']:.0f} "
                      f"(x{row['iops_ratio']:.2f}) bw x{row['bw_ratio']:.2f} in flight {k['inflight']:.1f} "
                      f"(fio {f['inflight']:.1f}); "
                      + " ".join(f"{kind} p50 {k[kind + '_p50']:.1f} us (x{row[kind + '_p50_ratio'] or 0:.2f}) "
                                 f"p99 {k[kind + '_p99']:.0f} us (x{row[kind + '_p99_ratio'] or 0:.2f})"
                                 for kind in KINDS)
                      + f"; device bytes / planned {statistics.median(host[who]):.2f}")
                print("    per round, kvbench / the fio run beside it: " + "; ".join(
                    f"{st} " + " ".join(f"x{v:.2f}" for v in paired[st]) + f" (median x{row['paired_median'][st]:.2f})"
                    for st in paired))
    finally:
        t.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if created and not a.keep_target:           # the scratch file it made goes; a given file stays
            from kvbench.engine.safety import unmark

            Path(a.target).unlink(missing_ok=True)
            unmark(a.target)
    print("\nJSON " + json.dumps(rows))


if __name__ == "__main__":
    main()
