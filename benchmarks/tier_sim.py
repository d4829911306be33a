#!/usr/bin/env python3
"""Tier simulation speed: the compiled Hierarchy vs the Python reference, and ``replay kv --dry-run`` end to end.

Target (issue 16): ``replay kv --dry-run`` >= 3M blocks/s on the shipped synthetic trace (multi-tier included),
hit ratios unchanged.

Part 1 runs both simulations in-process on the same trace and specs and checks that requests and events are
identical; the compiled side runs as the replay does (windows of 4096 blocks, one hierarchy, kernel loaded
first). Rates use process CPU time (a shared machine's load does not count), minimum of ``--repeat`` runs; the
first window of a fresh hierarchy (its state laid out and first touched) is shown apart, and so is the CPU time
inside ``Hierarchy.run`` alone (what the command's ``blocks_per_cpu_s`` counts: no state layout, no joins).
Part 2 runs the command (L1+L2+L3+L4, and again with an L3/L4 admission policy) ``--runs`` times and prints the
rates it reports in its ``simulation`` section against the target: ``blocks_per_s`` (wall: what the contract
reports) and ``blocks_per_cpu_s`` (the simulating thread's CPU time), with the hit ratio the reference gives;
and the whole process's rates against issue 32's 2M blocks/s: blocks / the process's wall time (start-up,
imports, numba's first dispatch, trace read, simulation, files) and blocks / its CPU seconds (user + sys, what a
loaded machine does not inflate), with the 1-minute load average beside. A process pays ~0.8 s of CPU before its
first block (Python, numpy and numba imported, numba's target set up on its first dispatch, the kernel loaded),
so on the shipped trace (122k blocks) the whole process cannot reach 2M/s; ``--big`` runs part 2 on the
10.7M-reference agent trace of ``benchmarks/trace_ingest.py`` too (generated, seeded; its expected hit ratio is
the compiled simulation's in-process, which part 1 checks against the reference on the shipped trace).
``--against DIR`` runs the command of another checkout (e.g. ``git archive <commit> | tar -x -C DIR``) in turn
with this one, so that a before/after ratio is taken at the same moments of a shared machine; ``--command-only``
skips part 1.

Measured 2026-12-05 on the shared 2-core VM (``--command-only --big --runs 3 --against`` a copy of 0786dd0, medians,
load 2.5-4.0): the 10.7M-block agent trace, whole process, L1-L4 LRU 1.62M blocks/s wall and 1.77M per CPU second
against 0.98M / 1.16M before (x1.5-1.65); with TinyLFU 2.99M / 3.01M against 1.94M / 1.93M (x1.55); at load ~2.6
the LRU run reached 1.85M wall and 2.61M per CPU second. After dry-run windows counted their events in place (``run_counted``),
against the tree before, load 4.6-6.1: LRU 2.35M per CPU second (2.21M before), TinyLFU 2.64M (2.58M); wall
0.83M / 0.91M (the process had about a third of a core). With a core free (load 0.15-0.30), the LRU command
alone, three runs: 3.79-4.27 s wall, 2.50-2.81M blocks/s. The shipped trace's whole process stays ~0.12M/s, both
trees: its simulation is ~0.035 s of a ~0.9 s process.

Part 3 (``--cluster``, issue 33 part 5): ``kvbench cluster``'s shared-L4 path, 16 nodes routed by ``prefix``, L2
16 GiB and L3 256 GiB each, one 2 TiB L4 pool, on ``gen:mooncake-synthetic-fit`` (13,785 requests an hour). In
process, ``simulate_router`` with the nodes of one compiled SharedPool against reference nodes sharing the L4
object (``pool_compiled`` false; the first ``--reference-span`` only) on the same trace: per-request tables
identical, requests and blocks per CPU second and per wall second with the load average, and the time a week
(24 x 7 x the hour's requests) takes at that rate; then the command as a whole process on the hour, this tree and
``--against``'s in turn. ``--compile`` times the tier kernel's first-run compilation (a child process, an empty
numba cache) in this tree and ``--against``'s.

Measured 2026-12-05 (shared 2-core VM, see the README's cluster section for the figures).

    .venv/bin/python benchmarks/tier_sim.py [--trace mooncake-synthetic] [--repeat 5] [--runs 3] [--big]
                                            [--command-only] [--against DIR]
    .venv/bin/python benchmarks/tier_sim.py --cluster [--cluster-span 1d] [--reference-span 1h] [--compile]
                                            [--against DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import fastest_cpu as cpu  # noqa: E402
from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec  # noqa: E402
from kvbench.stream.traces import read_trace  # noqa: E402

BLOCK = 512 * 131072          # llama-3.1-8b, 512-token blocks
TARGET = 3e6                  # blocks/s
WHOLE_TARGET = 2e6            # blocks/s of the whole dry-run process (issue 32)
WINDOW = 4096                 # blocks per hierarchy call, as replay kv cuts a 1 MiB-chunk run

SPECS = {
    "L1 8G + L2 16G + L3 64G, LRU, write-through": HierarchySpec(
        (TierSpec("l1", 8 << 30), TierSpec("l2", 16 << 30), TierSpec("l3", 64 << 30)), BLOCK),
    "L1 + L2 + L3 + L4 256G, LRU, write-through": HierarchySpec(
        (TierSpec("l1", 8 << 30), TierSpec("l2", 16 << 30), TierSpec("l3", 64 << 30), TierSpec("l4", 256 << 30)),
        BLOCK),
    "L1 + L2 + L3 + L4, L3/L4 tinylfu admission": HierarchySpec(
        (TierSpec("l1", 8 << 30), TierSpec("l2", 16 << 30), TierSpec("l3", 64 << 30, admission="tinylfu"),
         TierSpec("l4", 256 << 30, admission="tinylfu")), BLOCK),
    "L2 32G + L3 256G log, S3-FIFO, TTL 10 min, write-back": HierarchySpec(
        (TierSpec("l2", 32 << 30, "s3fifo", 600.0), TierSpec("l3", 256 << 30, "s3fifo", 600.0, layout="log", trim=True)),
        BLOCK, write_policy="back", segment_bytes=1 << 30),
    "L1 + L2 + L3 exclusive FIFO, L3 second-access": HierarchySpec(
        (TierSpec("l1", 8 << 30, "fifo"), TierSpec("l2", 16 << 30, "fifo"),
         TierSpec("l3", 128 << 30, "fifo", admission="second-access")), BLOCK,
        write_policy="back", inclusion="exclusive"),
}


def windowed(spec, t, most: int):
    """The compiled simulation as the replay runs it: one hierarchy, windows of whole requests. Returns the
    requests, the events and the thread CPU seconds spent inside ``Hierarchy.run`` alone (what the command's
    ``blocks_per_cpu_s`` counts)."""
    h = Hierarchy(spec, max_request_blocks=most)
    offs, n, r, out, run_cpu = t.offsets, t.n_requests, 0, [], 0.0
    while r < n:
        stop = min(max(int(np.searchsorted(offs, offs[r] + WINDOW, side="right")) - 1, r + 1), n)
        c = time.thread_time()
        out.append(h.run(t.timestamp_s[r:stop], offs[r:stop + 1] - offs[r], t.keys[offs[r]:offs[stop]],
                         first_request=r))
        run_cpu += time.thread_time() - c
        r = stop
    return np.concatenate([q for q, _ in out]), np.concatenate([e for _, e in out]), run_cpu


def runs_only(spec, t, most: int, repeat: int) -> float:
    """Blocks per CPU second inside Hierarchy.run alone (state layout and output joins left out), fastest of
    ``repeat`` fresh hierarchies."""
    best = float("inf")
    for _ in range(repeat):
        best = min(best, windowed(spec, t, most)[2])
    return t.n_blocks / best


def first_window(spec, t, most: int, repeat: int) -> float:
    """CPU seconds of a fresh hierarchy's first window (state laid out, pages first touched), fastest of ``repeat``."""
    offs = t.offsets
    stop = min(max(int(np.searchsorted(offs, offs[0] + WINDOW, side="right")) - 1, 1), t.n_requests)
    best = float("inf")
    for _ in range(repeat):
        h = Hierarchy(spec, max_request_blocks=most)
        c = time.thread_time()
        h.run(t.timestamp_s[:stop], offs[:stop + 1], t.keys[:offs[stop]])
        best = min(best, time.thread_time() - c)
    return int(offs[stop]) / best


def replay(trace: str, admission: str, tmp: str, repo: Path = REPO) -> tuple[dict, float, float, float]:
    """The command's JSON, the process's wall and CPU seconds (user + sys), and the 1-minute load average."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    cmd = [sys.executable, "-m", "kvbench", "replay", "kv", trace, "--model", "llama-3.1-8b", "--l1", "8GiB",
           "--l2", "16GiB", "--l3", os.path.join(tmp, "l3.store"), "--l3-capacity", "64GiB", "--l4", tmp,
           "--l4-capacity", "256GiB", "--admission", admission, "--dry-run", "--json", "--results",
           os.path.join(tmp, "results")]
    load = os.getloadavg()[0]
    r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=repo).stdout
    wall, r1 = time.perf_counter() - w0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return json.loads(out), wall, cpu, load


def big_trace(tmp: str) -> str:
    """benchmarks/trace_ingest.py's default trace: agent, 13,500 requests of 64-token blocks (~10.7M references)."""
    path = os.path.join(tmp, "agent-13500.jsonl")
    subprocess.run([sys.executable, "-m", "kvbench", "trace", "gen", "agent", "-o", path, "-n", "13500",
                    "--block-tokens", "64", "--rate", "5", "--json"], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    return path


def expected_hit_ratio(spec, t) -> tuple[float, str]:
    """The hit ratio the command must report: the Python reference's, or on a large trace (where it would take
    minutes) the compiled simulation's in-process."""
    if t.n_blocks <= 2_000_000:
        ref, _ = ReferenceHierarchy(spec).run(t.timestamp_s, t.offsets, t.keys)
        return ref["hit_blocks"].sum() / t.n_blocks, "reference"
    q, _, _ = windowed(spec, t, int(np.diff(t.offsets).max()))
    return q["hit_blocks"].sum() / t.n_blocks, "compiled in-process"


def command(trace: str, runs: int, tmp: str, against: Path | None) -> None:
    """Part 2 on one trace: the command's own rates and the whole process's, per run; medians of the latter."""
    t = read_trace(trace)
    nb = t.n_blocks
    trees = [("this", REPO)] + ([("against", against)] if against else [])
    print(f"replay kv --dry-run on {trace}: {nb:,} blocks, L1 8G + L2 16G + L3 64G + L4 256G ({runs} runs"
          + (f", in turn with {against}" if against else "") + "):")
    for adm in ("all", "tinylfu"):
        spec = HierarchySpec(tuple(TierSpec(n, c << 30, admission=adm if n in ("l3", "l4") else "all")
                                   for n, c in (("l1", 8), ("l2", 16), ("l3", 64), ("l4", 256))), BLOCK)
        want, by = expected_hit_ratio(spec, t)
        whole = {name: [] for name, _ in trees}
        for _ in range(runs):
            for name, repo in trees:
                d, wall, cpu, load = replay(trace, adm, tmp, repo)
                sim = d["simulation"]
                same = "same" if abs(d["hit_ratio"] - want) < 1e-12 else "DIFFERENT"
                whole[name].append((nb / wall, nb / cpu))
                print(f"  {name:<7} admission {adm:<8} load {load:4.2f}: command {sim['blocks_per_s'] / 1e6:5.2f}M "
                      f"blocks/s wall ({sim['blocks_per_s'] / TARGET:.2f}x target), "
                      f"{sim['blocks_per_cpu_s'] / 1e6:5.2f}M/s cpu; whole process {wall:5.2f} s wall "
                      f"{nb / wall / 1e6:5.2f}M/s ({nb / wall / WHOLE_TARGET:.2f}x 2M), {cpu:5.2f} s cpu "
                      f"{nb / cpu / 1e6:5.2f}M/s ({nb / cpu / WHOLE_TARGET:.2f}x); hit ratio {d['hit_ratio']:.5f} "
                      f"({by} {want:.5f}, {same})")
        for name, v in whole.items():
            print(f"  {name:<7} admission {adm:<8} whole process, median of {runs}: "
                  f"{statistics.median(x[0] for x in v) / 1e6:5.2f}M blocks/s wall, "
                  f"{statistics.median(x[1] for x in v) / 1e6:5.2f}M blocks per CPU second")


CLUSTER_TRACE = "gen:mooncake-synthetic-fit,duration={}"
CLUSTER_NODES = 16


def cluster_config(span: str):
    from kvbench.cluster.config import ClusterConfig
    from kvbench.replay.kv import ReplayConfig

    g = 1 << 30
    return ClusterConfig(ReplayConfig(trace=CLUSTER_TRACE.format(span), model="llama-3.1-8b", l2=16 * g,
                                      l3="/var/tmp/kv.store", l3_capacity=256 * g, l4="/var/tmp/pool",
                                      l4_capacity=2048 * g, dry_run=True), nodes=CLUSTER_NODES, routers=("prefix",))


def cluster_run(span: str, reference: bool):
    """simulate_router on ``span`` of the workload: (columns, requests, blocks, CPU s, wall s, load before)."""
    import kvbench.cluster.nodes as nodes_mod
    from kvbench.cluster.job import _timing, prepare
    from kvbench.cluster.routers import make_router
    from kvbench.cluster.sim import simulate_router

    cfg = cluster_config(span)
    _, trace, spec, profile = prepare(cfg)
    timing = _timing(cfg, profile)
    keep = nodes_mod.pool_compiled
    if reference:
        nodes_mod.pool_compiled = lambda s: False
    try:
        load = os.getloadavg()[0]
        c, w = time.process_time(), time.perf_counter()
        cols, _, _ = simulate_router(trace, spec, CLUSTER_NODES, 1, make_router("prefix", CLUSTER_NODES), timing,
                                     trace.block_tokens)
        cpu_s, wall = time.process_time() - c, time.perf_counter() - w
    finally:
        nodes_mod.pool_compiled = keep
    return cols, trace.n_requests, trace.n_blocks, cpu_s, wall, load


def cluster_command(repo: Path, tmp: str) -> tuple[float, float, float, dict]:
    """The hour as ``kvbench cluster --dry-run`` in a child of ``repo``: wall, CPU (user + sys), load, JSON."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    cmd = [sys.executable, "-m", "kvbench", "cluster", CLUSTER_TRACE.format("1h"), "--model", "llama-3.1-8b",
           "--nodes", str(CLUSTER_NODES), "--router", "prefix", "--l2", "16GiB", "--l3", os.path.join(tmp, "kv.store"),
           "--l3-capacity", "256GiB", "--l4", os.path.join(tmp, "pool"), "--l4-capacity", "2TiB", "--dry-run",
           "--json", "--results", os.path.join(tmp, "results")]
    load = os.getloadavg()[0]
    r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, cwd=repo).stdout
    wall, r1 = time.perf_counter() - w0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), load, json.loads(out)


COMPILE = """
import time
c, w = time.process_time(), time.perf_counter()
from kvbench.sim.tiers import Hierarchy, HierarchySpec, TierSpec
h = Hierarchy(HierarchySpec((TierSpec("l2", 16 << 30), TierSpec("l3", 256 << 30), TierSpec("l4", 2 << 40)), 1 << 26))
h.cached_prefix([1, 2, 3], 0.0, ("l2", "l3"))
print(time.process_time() - c, time.perf_counter() - w)
"""


def compile_seconds(repo: Path) -> tuple[float, float, float]:
    """(CPU s, wall s, load) of the tier kernel's first load in a fresh child with an empty numba cache."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as cache:
        env = {**os.environ, "PYTHONPATH": str(repo), "KVBENCH_NUMBA_CACHE_DIR": cache}
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, check=True,
                             env=env, cwd=repo).stdout.split()
    return float(out[0]), float(out[1]), load


def cluster(a) -> None:
    """Part 3: the shared-pool cluster's rate, compiled against the reference, and the command before and after."""
    hour = read_trace(CLUSTER_TRACE.format("1h")).n_requests     # the week below is 24 x 7 of these
    print(f"kvbench cluster, {CLUSTER_NODES} nodes (prefix; L2 16 GiB, L3 256 GiB each; L4 2 TiB shared), "
          f"{CLUSTER_TRACE.format('SPAN')}:")
    cluster_run("10m", False)                                  # kernels loaded, caches warm
    ref = cluster_run(a.reference_span, True)
    new = cluster_run(a.reference_span, False)
    same = all(np.array_equal(ref[0][c], new[0][c]) for c in ref[0])
    runs = [("reference", a.reference_span, ref), ("compiled", a.reference_span, new)]
    if a.cluster_span != a.reference_span:
        runs.append(("compiled", a.cluster_span, cluster_run(a.cluster_span, False)))
    for name, span, (_, nreq, nb, cpu_s, wall, load) in runs:
        week = 24 * 7 * hour / (nreq / cpu_s)
        print(f"  {name:<9} {span:>3}: {nreq:,} requests, {nb:,} blocks: {cpu_s:6.2f} s CPU {nreq / cpu_s:8,.0f} "
              f"requests/s {nb / cpu_s / 1e6:5.2f}M blocks/s; {wall:6.2f} s wall {nreq / wall:8,.0f} requests/s "
              f"(load {load:.2f}); a week ({24 * 7 * hour / 1e6:.2f}M requests) {week / 60:5.1f} CPU minutes")
    print(f"  per-request tables of reference and compiled identical on {a.reference_span}: {same}")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        trees = [("this", REPO)] + ([("against", a.against)] if a.against else [])
        for _ in range(a.runs):
            for name, repo in trees:
                wall, cpu_s, load, d = cluster_command(repo, tmp)
                print(f"  command, {name:<7}: {wall:5.2f} s wall, {cpu_s:5.2f} s CPU (load {load:.2f}); "
                      f"{d['requests']:,} requests, hit ratio {d['global']['hit_ratio']:.6f}")
    if a.compile:
        for name, repo in [("this", REPO)] + ([("against", a.against)] if a.against else []):
            c, w, load = compile_seconds(repo)
            print(f"  tier kernel first-run compile, {name:<7}: {c:5.1f} s CPU, {w:5.1f} s wall (load {load:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default="mooncake-synthetic")
    ap.add_argument("--repeat", type=int, default=5, help="compiled runs per spec (the fastest counts)")
    ap.add_argument("--runs", type=int, default=3, help="replay kv --dry-run runs per configuration")
    ap.add_argument("--big", action="store_true", help="part 2 on the 10.7M-reference agent trace too")
    ap.add_argument("--command-only", action="store_true", help="part 2 only")
    ap.add_argument("--against", type=Path, default=None, help="another checkout whose command runs in turn")
    ap.add_argument("--cluster", action="store_true", help="part 3 only: the shared-L4 cluster simulation")
    ap.add_argument("--cluster-span", default="1d", help="--cluster: the compiled run's span of the workload")
    ap.add_argument("--reference-span", default="1h", help="--cluster: the span both paths run (and compare)")
    ap.add_argument("--compile", action="store_true", help="--cluster: time the kernel's first-run compilation")
    a = ap.parse_args()
    if a.cluster:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        cluster(a)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    t = read_trace(a.trace)
    most = int(np.diff(t.offsets).max())
    Hierarchy(next(iter(SPECS.values()))).run(t.timestamp_s[:50], t.offsets[:51], t.keys[:t.offsets[50]])  # JIT
    nb = t.n_blocks
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if not a.command_only:
        print(f"{a.trace}: {t.n_requests:,} requests, {nb:,} block references; target {TARGET / 1e6:.0f}M blocks/s")
        print(f"in-process (CPU time; compiled: min of {a.repeat}, windows of {WINDOW} blocks):")
        for name, spec in SPECS.items():
            (rq, ev), pc = cpu(lambda s=spec: ReferenceHierarchy(s).run(t.timestamp_s, t.offsets, t.keys), 1)
            (jq, jv, _), jc = cpu(lambda s=spec: windowed(s, t, most), a.repeat)
            same = np.array_equal(rq, jq) and np.array_equal(ev, jv)
            fw = first_window(spec, t, most, a.repeat)
            ro = runs_only(spec, t, most, a.repeat)
            print(f"  {name}: identical={same}, hit ratio {rq['hit_blocks'].sum() / nb:.4f}; python "
                  f"{nb / pc / 1e6:.3f}M/s, compiled {nb / jc / 1e6:.2f}M/s (x{pc / jc:.0f} python, "
                  f"{nb / jc / TARGET:.2f}x target; inside Hierarchy.run alone {ro / 1e6:.2f}M/s, "
                  f"{ro / TARGET:.2f}x; first window {fw / 1e6:.2f}M/s)")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        command(a.trace, a.runs, tmp, a.against)
        if a.big:
            command(big_trace(tmp), a.runs, tmp, a.against)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
