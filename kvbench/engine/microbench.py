"""``kvbench io``: a fio-like micro-benchmark on the engine (spec, plan builder, and the run with results).

Offsets depend only on the seed: random patterns draw block indices uniformly (with replacement, like fio's
``norandommap``) from ``numpy.random.default_rng(seed)``; mixed patterns draw each I/O's direction from a
second stream of the same seed. Time-based runs (``runtime > 0``) loop over a plan of at most
``MAX_PLAN`` I/Os; ``runtime = 0`` does one pass over ``size``.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import asdict, dataclass

import numpy as np

from kvbench.engine import io_report
from kvbench.engine.iolog import check_iolog_names, write_iolog
from kvbench.engine.plan import OP_READ, OP_WRITE, make_plan
from kvbench.engine import safety
from kvbench.engine.runner import run_plan
from kvbench.engine.targets import is_dram_spec, open_target
from kvbench.errors import TargetError, UsageError
from kvbench.metrics import diskstats
from kvbench.metrics.run import RunDir
from kvbench.units import format_bytes

RW_MODES = ("read", "write", "randread", "randwrite", "randrw", "rw")
IO_TAG = 0x6B7662656E636800        # "kvbench\0": the content tag of everything kvbench io writes
MAX_PLAN = 1 << 20
PREFILL_BS = 1 << 20


@dataclass(frozen=True)
class IoSpec:
    target: str
    rw: str = "randread"
    bs: int = 4096
    qd: int = 32
    workers: int = 1
    size: int | None = None
    runtime_s: float = 10.0
    rwmixread: int = 70
    seed: int = 1
    engine: str = "libaio"
    rate_iops: float | None = None      # open loop at this many IOPS (fio's rate_iops; None: closed loop)
    rate_bytes: float | None = None     # open loop at this bandwidth, bytes/s (fio's rate): rate_bytes / bs IOPS
    arrival: str = "uniform"            # open-loop arrivals: uniform | poisson
    speed: float = 1.0
    verify: str = "off"
    destroy_data: str | None = None
    prefill: bool | None = None         # None: prefill new files that will be read
    faults: str | None = None
    reap_batch: int = 1                 # completions per io_getevents (fio's iodepth_batch_complete_max)

    def validate(self) -> None:
        if self.rw not in RW_MODES:
            raise UsageError(f"--rw {self.rw!r} is not one of {', '.join(RW_MODES)}", "pick one of them")
        if self.bs <= 0:
            raise UsageError(f"--bs must be > 0, got {self.bs}", "pass e.g. --bs 4k")
        if self.bs > 64 << 20:
            raise UsageError(f"--bs {self.bs} is larger than 64 MiB", "use a smaller block size")
        if self.qd < 1 or self.qd > 65536:
            raise UsageError(f"--qd must be between 1 and 65536, got {self.qd}", "pass e.g. --qd 32")
        if not 1 <= self.reap_batch <= self.qd:
            raise UsageError(f"--reap-batch must be between 1 and --qd ({self.qd}), got {self.reap_batch}",
                             "pass --reap-batch 1 (fio's default) or up to --qd")
        if self.workers < 1 or self.workers > 256:
            raise UsageError(f"--workers must be between 1 and 256, got {self.workers}", "pass e.g. --workers 2")
        if not 0 <= self.rwmixread <= 100:
            raise UsageError(f"--rwmixread must be 0..100, got {self.rwmixread}", "pass e.g. --rwmixread 70")
        if self.runtime_s < 0 or not math.isfinite(self.runtime_s):
            raise UsageError(f"--runtime must be >= 0, got {self.runtime_s}", "pass e.g. --runtime 10s")
        if self.rate_iops is not None and not (self.rate_iops > 0 and math.isfinite(self.rate_iops)):
            raise UsageError(f"--rate_iops must be > 0 IOPS, got {self.rate_iops}", "pass e.g. --rate_iops 5000")
        if self.rate_bytes is not None and not (self.rate_bytes > 0 and math.isfinite(self.rate_bytes)):
            raise UsageError(f"--rate must be > 0 bytes/s, got {self.rate_bytes}", "pass e.g. --rate 100m (MiB/s)")
        if self.rate_iops is not None and self.rate_bytes is not None:
            raise UsageError("--rate (bandwidth) and --rate_iops both set the open-loop rate", "give one of them")
        if self.open_iops is not None and self.runtime_s <= 0:
            raise UsageError("--rate/--rate_iops (open loop) needs --runtime > 0", "pass e.g. --runtime 10s")
        if not (self.speed > 0 and math.isfinite(self.speed)):
            raise UsageError(f"--speed must be > 0, got {self.speed}", "pass e.g. --speed 2")
        if self.faults:
            from kvbench.engine.faults import parse_faults
            parse_faults(self.faults)          # a bad spec is refused before any file or run folder is made
        if self.size is not None and 0 < self.size < self.bs:
            raise UsageError(f"--size {self.size} is smaller than one --bs {self.bs} block",
                             "give --size >= --bs (or a smaller --bs)")

    @property
    def open_iops(self) -> float | None:
        """The open-loop issue rate in I/Os per second of plan time (None: closed loop)."""
        if self.rate_bytes is not None:
            return self.rate_bytes / self.bs
        return self.rate_iops

    @property
    def writes(self) -> bool:
        return self.rw in ("write", "randwrite", "randrw", "rw") and not (self.rw in ("randrw", "rw")
                                                                          and self.rwmixread == 100)

    @property
    def reads(self) -> bool:
        return self.rw in ("read", "randread") or (self.rw in ("randrw", "rw") and self.rwmixread > 0)


def build_plan(spec: IoSpec, size: int) -> tuple[np.ndarray, bool]:
    """The I/O plan of a spec on a target of ``size`` bytes; returns (plan, loop)."""
    blocks = size // spec.bs
    if blocks < 1:
        raise UsageError(f"--size {size} is smaller than --bs {spec.bs}", "give a larger --size or smaller --bs")
    rate = spec.open_iops
    if rate:
        n = int(math.ceil(rate * spec.runtime_s / spec.speed))
        if n > 16 * MAX_PLAN:
            raise UsageError(f"--rate/--rate_iops x --runtime asks for {n} I/Os, more than {16 * MAX_PLAN}",
                             "lower the rate or --runtime")
        loop = False
    elif spec.runtime_s > 0:
        n = int(min(max(blocks, 4 * spec.qd * spec.workers), MAX_PLAN))
        loop = True
    else:
        n = int(blocks)
        loop = False
    rng = np.random.default_rng(spec.seed)
    if spec.rw.startswith("rand"):
        idx = rng.integers(0, blocks, n, dtype=np.int64)
    else:
        idx = np.arange(n, dtype=np.int64) % blocks
    if spec.rw in ("randrw", "rw"):
        mix = np.random.default_rng([spec.seed, 1]).random(n)
        ops = np.where(mix < spec.rwmixread / 100.0, OP_READ, OP_WRITE)
    else:
        ops = OP_WRITE if spec.rw in ("write", "randwrite") else OP_READ
    issue = 0
    if rate:
        if spec.arrival == "poisson":
            gaps = np.random.default_rng([spec.seed, 2]).exponential(1e9 / rate, n)
            issue = np.cumsum(gaps).astype(np.int64) - int(gaps[0])
        else:
            issue = (np.arange(n) * (1e9 / rate)).astype(np.int64)
    return make_plan(ops, idx * spec.bs, spec.bs, tag=IO_TAG, issue_ns=issue), loop


def default_target(results_root: str) -> str:
    return os.path.join(results_root, "io-scratch.dat")


def run_io(spec: IoSpec, *, results_root: str = "results", export_iolog: str | None = None,
           on_row=None, write_lat_log: str | None = None, json_plus: bool = False,
           status_interval_s: float = 1.0) -> tuple[dict, RunDir, object]:
    """Run the micro-benchmark and write its run folder; returns (summary, run dir, PlanResult).
    ``write_lat_log``: a prefix for fio-format per-I/O latency logs; ``json_plus``: full latency bins in the
    summary (``bins``); a live status line every ``status_interval_s`` on a terminal (kvbench.progress).

    Raises (after writing the results) when the run failed, was interrupted or verify found mismatches."""
    spec.validate()
    path = spec.target
    exists = os.path.exists(path)
    size = spec.size
    if size is None and not exists and not is_dram_spec(path):
        size = 1 << 30
    if export_iolog:
        d = os.path.dirname(os.path.abspath(export_iolog))
        if not os.path.isdir(d):
            raise UsageError(f"--export-iolog: directory {d} does not exist", "create it or give another path")
        check_iolog_names([path])                   # before the run: the log is written after it
    if write_lat_log:
        d = os.path.dirname(os.path.abspath(write_lat_log))
        if not os.path.isdir(d):
            raise UsageError(f"--write_lat_log: directory {d} does not exist", "create it or give another prefix")
    # a new (or grown) file is created writable and is prefilled before it is read: unwritten extents never
    # reach the device, so reading them would measure nothing. An existing file with holes is filled too when
    # kvbench wrote it, and refused when it did not (or the user said --no-prefill)
    hole = _unwritten(path, size) if spec.reads and exists else None
    if hole is not None and (spec.prefill is False or not safety.is_owned(path)):
        raise TargetError(f"{path} has unwritten ranges (from byte {hole}): the filesystem answers them with "
                          "zeros and no device I/O, so reading them would measure nothing",
                          "write the file first, let kvbench fill its own file (drop --no-prefill), or give a "
                          "new path (kvbench creates and fills it)")
    target = open_target(path, size=size, write=spec.writes or spec.prefill is True or hole is not None,
                         destroy_data=spec.destroy_data)
    rd = None
    try:
        if spec.bs % target.lbs:
            raise TargetError(f"--bs {spec.bs} is not a multiple of the logical block size {target.lbs} of "
                              f"{target.path}", f"use a block size that is a multiple of {target.lbs}")
        if target.size < spec.bs:
            raise UsageError(f"{target.path} holds {target.size} bytes, less than one --bs {spec.bs} block",
                             "give a smaller --bs or a larger target")
        size = target.size - target.size % spec.bs
        plan, loop = build_plan(spec, size)
        config = {"spec": asdict(spec), "size_used": size, "plan_ios": len(plan), "loop": loop,
                  "content_tag": IO_TAG}
        rd = RunDir.create("io", config, root=results_root, targets=[target.path])
        rd.update_run(target_opened=target.facts())
        prefill = None
        do_prefill = spec.prefill if spec.prefill is not None else \
            ((target.created or hole is not None) and spec.reads)
        if do_prefill:
            prefill = _prefill(target, spec)
        devs = [target.device] if target.device else []
        before = diskstats.snapshot(devs)

        so_far = {"ios": 0, "bytes": 0}
        status = io_report.IoStatus(f"io {spec.rw} {format_bytes(spec.bs)}", runtime_s=spec.runtime_s if loop else None, ios=len(plan),
                          interval_s=status_interval_s)

        def on_second(row):
            rd.append_timeseries(row)
            so_far["ios"] += int(round(row["iops"] * row["interval_s"]))
            so_far["bytes"] += int(round(row["bw_bytes_per_s"] * row["interval_s"]))
            rd.write_summary({"rw": spec.rw, "bs": spec.bs, "ios_so_far": so_far["ios"],
                              "bytes_so_far": so_far["bytes"], "seconds_so_far": row["t_s"] + row["interval_s"]},
                             status="partial")
            status.row(row)
            if on_row is not None:
                on_row(row)

        try:
            result = run_plan(plan, [target], engine=spec.engine, qd=spec.qd, workers=spec.workers,
                              pacing="open" if spec.open_iops else "closed", speed=spec.speed, verify=spec.verify,
                              runtime_s=spec.runtime_s if loop else None, loop=loop, faults=spec.faults,
                              on_second=on_second, reap_batch=spec.reap_batch)
        finally:
            status.close()
        host = diskstats.delta(before, diskstats.snapshot(devs))
        summary = _summary(spec, result, target, host, prefill)
        hists = {"all": result.latency(), **{op: result.latency(op) for op, n in result.ios_by_op().items() if n}}
        if result.pacing == "open":
            hists["issue_lag"] = result.lag
            summary["open_loop"] = io_report.rate_check(spec.open_iops * spec.speed, summary)
        rd.write_histograms(hists)
        if json_plus:
            summary["bins"] = io_report.json_plus(result)
        if write_lat_log:
            paths = io_report.write_lat_logs(write_lat_log, result, plan, result.workers)
            summary["lat_log"] = {"paths": paths, "ios": int(((result.submit_ns >= 0) & (result.complete_ns >= 0)).sum())}
            if result.passes:
                warnings.warn(f"--write_lat_log holds the last pass over the plan ({summary['lat_log']['ios']:,} of "
                              f"{summary['ios']:,} I/Os): a time-based run reuses its plan of {len(plan):,} I/Os")
        if export_iolog:
            issued = result.submit_ns >= 0
            times = result.submit_ns if result.pacing == "closed" else None
            summary["iolog"] = {"path": export_iolog, "ios": write_iolog(
                export_iolog, plan if result.passes else plan[issued], [target.path],
                times_ns=(times if times is None or result.passes else times[issued]),
                repeat=max(1, result.passes))}
        status = {"complete": "complete", "interrupted": "interrupted", "failed": "failed"}[result.status]
        mismatches = int((result.verify or {}).get("mismatches") or 0)
        summary["verify_errors"] = mismatches
        if mismatches and status == "complete":      # wrong data read back: the run failed, whatever its speed
            status = "failed"
            summary["error"] = (f"verify: {mismatches} of {result.verify.get('checked')} checked reads "
                                "returned wrong data")
        if status == "complete" and summary.get("not_measured"):
            status = "not-measured"
            warnings.warn(f"not measured: {summary['not_measured']}")
        summary["status"] = status
        summary["run_dir"] = str(rd.path)
        rd.write_summary(summary, status=status)
        return summary, rd, result
    except BaseException:
        if rd is None:          # refused before any I/O: a file made for this run goes too
            target.discard()
        raise
    finally:
        target.close()


def _unwritten(path: str, size: int | None) -> int | None:
    from kvbench.engine.targets import first_hole

    if is_dram_spec(path) or not os.path.isfile(path):
        return None
    return first_hole(path, size)


def _prefill(target, spec: IoSpec) -> dict:
    bs = max(spec.bs, PREFILL_BS - PREFILL_BS % spec.bs) if target.size >= PREFILL_BS else spec.bs
    n = target.size // bs
    plan = make_plan(OP_WRITE, np.arange(n, dtype=np.int64) * bs, bs, tag=IO_TAG)
    from kvbench.progress import Line

    # a new file is written whole before it is read (seconds to minutes): a live line, not a silent terminal
    with Line(f"io: prefilling {os.path.basename(target.path)} (reads must find data)", n * bs, "B") as line:
        line.update(0)
        done = [0.0]

        def on_second(row):
            done[0] += row["bw_bytes_per_s"] * row["interval_s"]
            line.update(min(done[0], n * bs), note=f"{row['bw_bytes_per_s'] / 1e9:.3g} GB/s")

        r = run_plan(plan, [target], engine=spec.engine if spec.engine != "null" else "libaio", qd=8,
                     on_second=on_second)
    r.raise_for_status()
    if target.fd >= 0:
        os.fsync(target.fd)
    return {"bytes": int(n * bs), "seconds": r.wall_s, "bw_bytes_per_s": n * bs / r.wall_s if r.wall_s else None}


def _summary(spec, result, target, host, prefill) -> dict:
    s = result.summary()
    out = {"rw": spec.rw, "bs": spec.bs, "qd": spec.qd, "workers": result.workers, "engine": result.engine,
           "target": target.path, "target_kind": target.kind, "logical_block_size": target.lbs,
           "size": target.size, "seed": spec.seed,
           "iops": s["iops"], "bw_bytes_per_s": s["bw_bytes_per_s"], "ios": s["ios"], "runtime_s": s["runtime_s"],
           "lat_us": s["lat_us"]}
    if spec.rw in ("randrw", "rw"):
        for op in ("read", "write"):
            if op in s["ops"]:
                out[op] = s["ops"][op]
    rest = {k: v for k, v in s.items() if k not in out}
    out.update(rest)
    written = result.bytes_by_op()["write"]
    out["host"] = {"devices": host}
    if target.device and target.device in host:
        hw = host[target.device]["write_bytes"]
        out["host"]["device"] = target.device
        out["host"]["write_bytes"] = hw
        out["host"]["engine_write_bytes"] = written
        out["host"]["write_amplification"] = hw / written if written else None
        read = result.bytes_by_op()["read"]
        hr = host[target.device]["read_bytes"]
        out["host"]["read_bytes"] = hr
        # O_DIRECT check: every byte the engine read must have reached the device (no page-cache hits)
        out["host"]["direct_io_verified"] = bool(hr >= 0.98 * read) if read else None
        if out["host"]["direct_io_verified"] is False and result.engine != "null":
            out["not_measured"] = (f"the O_DIRECT bypass check failed: /dev/{target.device} read "
                                   f"{hr:,} bytes where the engine read {read:,} (holes or page cache answered "
                                   "the rest)")
    if prefill:
        out["prefill"] = prefill
    return out
