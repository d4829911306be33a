"""``kvbench run``'s job as a library: the main job in one process, its trace read once.

The job reads the trace once (:class:`TraceData`), computes its exact LRU profile and distinct blocks once, and
hands them in-process to what needs them: the tier sizing (the footprint), the key sample rate
(:func:`kvbench.analysis.curves.miniature.choose_sample_rate`), the hit-ratio curve (``mrc``), the whole-trace
simulation (``replay kv --dry-run``, fed the loaded trace) and the plan (curves, steady state, capacity, DWPD);
the load-vs-recompute check runs here too. Only the measured replay runs as a child kvbench process (timed I/O,
isolated: a crash or an out-of-memory there cannot take the job down); the tier probes run here, as before.

Each step is still the command a user can rerun: it is described by the same argv (``steps`` in the job's
summary.json), its options are parsed by that command's own click parameters (the same defaults and checks),
its run folder records that command (:class:`kvbench.metrics.run.as_command`), and the job writes the same files
from the same ``--json`` object as when the step ran as a process (mrc.json, the dry run's folder, plan.json,
retention.json, check.json). A step that fails is recorded and the job goes on, so the report shows everything
that could be measured and says the job is partial; an interrupt (Ctrl-C, SIGTERM, SIGHUP) removes the scratch
store and writes the report of the part that ran.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import click

from kvbench.units import format_bytes

# a stationary workload: the shipped trace is not (its new-block share falls 0.95 -> 0.03 across tenths), so the
# default is an hour of the model fitted to it (workloads/classes/mooncake-synthetic-fit.toml says how and why)
DEFAULT_TRACE = "gen:mooncake-synthetic-fit,duration=1h"
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_PROFILE = "llama-3.1-8b-h200-trtllm-fp8"
RETENTIONS = "10m,1h,6h,1d,7d"
# the deployment every answer is scaled to unless --deployment says otherwise: one 7.68 TB drive per GPU, GPUs
# prefilling half the time (the README's first-principles table uses the same)
DEFAULT_DEPLOYMENT = "gpus=1,drives=1,drive_capacity=7.68TB,utilization=0.5"
MiB = 1 << 20


@dataclass(frozen=True)
class TierSizes:
    """What the job gives each tier, and why."""

    l2_bytes: int
    l3_bytes: int
    footprint_bytes: int          # every distinct block of the trace at the model's block size
    block_bytes: int
    reason: str


def size_tiers(footprint: int, block_bytes: int, free_disk: int, avail_mem: int, *,
               max_store: int = 32 << 30, max_dram: int = 4 << 30, disk_share: float = 0.20) -> TierSizes:
    """Pick L2 (DRAM) and L3 (store) capacities: L2 a quarter of the footprint within 10% of free memory,
    L3 the whole footprint within ``disk_share`` of ``free_disk`` (20% of a filesystem's free space; 90% of a
    raw device given with --l3); both whole blocks, L3 at least 4 blocks (else an error)."""
    from kvbench.errors import TargetError

    if block_bytes <= 0:
        raise TargetError("model block size is 0", "check the model preset")
    blocks = max(1, footprint // block_bytes)
    l3_cap = min(blocks * block_bytes, int(free_disk * disk_share), max_store)
    l3 = (l3_cap // block_bytes) * block_bytes
    if blocks < 4:
        raise TargetError(f"the trace's footprint is {blocks} block(s) of {block_bytes / MiB:.3g} MiB: a store "
                          "needs at least 4", "give a longer trace (kvbench trace gen), or run kvbench replay kv")
    if l3 < 4 * block_bytes:
        raise TargetError(f"not enough free disk for a store of 4 blocks of {format_bytes(block_bytes)} "
                          f"({disk_share:.0%} of free space is {format_bytes(free_disk * disk_share)})",
                          "free disk space, pass --l3-capacity, or a --results folder on a larger filesystem")
    l2_cap = min(blocks * block_bytes // 4, int(avail_mem * 0.10), max_dram)
    l2 = max(0, (l2_cap // block_bytes) * block_bytes)
    reason = (f"footprint {blocks:,} blocks x {block_bytes / MiB:.3g} MiB; L2 = min(footprint/4, 10% of free "
              f"memory, {format_bytes(max_dram)}); L3 = min(footprint, {disk_share:.0%} of "
              f"{'the device' if disk_share > 0.5 else 'free disk'}, {format_bytes(max_store)})")
    return TierSizes(l2, l3, blocks * block_bytes, block_bytes, reason)


def _trace_path(trace: str) -> str:
    """A built-in trace name -> its shipped file (works on a clone without ../shared); paths and ``gen:`` workload
    models (checked) pass through."""
    from kvbench.spec.presets import workloads_dir
    from kvbench.stream.synth import is_gen, parse_gen

    if is_gen(trace):
        parse_gen(trace)
        return trace
    p = Path(trace)
    if p.exists():
        return str(p)
    for cand in (workloads_dir() / "traces" / trace, workloads_dir() / "traces" / f"{trace}.jsonl",
                 workloads_dir() / "traces" / f"{trace}.jsonl.gz"):
        if cand.is_file():
            return str(cand)
    from kvbench.errors import SpecError

    names = sorted(x.name.split(".jsonl")[0] for x in (workloads_dir() / "traces").glob("*.jsonl*"))
    raise SpecError(f"trace not found: {trace}", f"give a trace file or one of: {', '.join(names) or '(none)'}")


def _pick_profile(given: str | None, model: str) -> tuple[str, str | None]:
    """The compute profile for ``model``: the one given, else a shipped one for that model (measured first),
    else the default published profile, with a note saying it stands in for a different model."""
    if given:
        return given, None
    from kvbench.compute.profile import load_profile, profile_names

    mine = []
    for name in profile_names():
        try:
            p = load_profile(name)
        except Exception:  # noqa: BLE001 - a broken preset must not stop the main job
            continue
        if p.model == model:
            mine.append((p.kind != "measured", name))
    if mine:
        return sorted(mine)[0][1], None
    return DEFAULT_PROFILE, (f"no compute profile ships for {model}; load vs recompute uses {DEFAULT_PROFILE} as a "
                             f"stand-in (measure one with kvbench prefill --model {model}, or pass --profile)")


def _replay_progress(job_dir: Path, elapsed: float, budget_s: float | None = None) -> str:
    """One progress line from the replay's live ``progress.json`` (rewritten each second while I/O runs):
    requests done / total, bandwidth per domain, and an ETA (the sooner of the replay's time budget running
    out and the trace running out at the current rate)."""
    import json

    from kvbench.replay.kv import LiveProgress

    dirs = sorted(job_dir.glob("replay-kv-*"))
    line = f"replay {elapsed:5.0f} s"
    if not dirs:
        return line + ": starting (reading the trace)"
    try:
        p = json.loads((dirs[-1] / LiveProgress.FILE).read_text())
    except (OSError, ValueError):
        return line + ": simulating the first window and creating the store"
    done, total, secs = p.get("requests_done") or 0, p.get("trace_requests") or 0, p.get("seconds") or 0.0
    line += f": {done:,} / {total:,} requests ({done / total:.0%})" if total else f": {done:,} requests"
    names = {"dram": "DRAM (L2)", "dev": "store (L3)"}
    if secs > 0:
        bw = [f"{names.get(k, k)} {v / secs / 1e9:.2f} GB/s" for k, v in (p.get("bytes") or {}).items() if v > 0]
        if bw:
            line += "; " + ", ".join(bw)
        left = {}
        if budget_s:
            left["time budget"] = max(0.0, budget_s - secs)
        if total and 0 < done < total:
            left["trace at this rate"] = (total - done) * secs / done
        if left.get("time budget") == 0.0:
            line += "; time budget used: draining the queue and writing the results"
        elif left:
            why = min(left, key=left.get)
            line += f"; ETA {left[why]:.0f} s ({why})"
    return line


def first_byte_notes(probes: list, check_tiers: dict) -> list[str]:
    """Name the difference where the probe's first byte and the one check used disagree for a tier: the probe
    times one small read at QD1 on an idle tier; check --run fits latency + bytes / bandwidth to the replay's
    per-request load times, whose intercept includes waiting behind the request's own chunk I/Os and other
    requests' I/O at the replay's queue depth."""
    from kvbench.units import format_duration

    out = []
    for p in probes:
        t = check_tiers.get(p.name)
        if not isinstance(t, dict) or t.get("latency_s") is None:
            continue
        used, probed = float(t["latency_s"]), float(p.first_byte_s)
        if abs(used - probed) <= 0.05 * max(used, probed):
            continue
        said = format_duration(used) if t.get("latency_resolved", True) else str(t.get("first_byte"))
        out.append(f"{p.name} first byte: probe {format_duration(probed)} (one small read "
                   f"at QD1 on the idle tier) vs check {said} ({t.get('source') or 'given'}: the "
                   f"latency a request saw under the replay's load, queueing included); check decides with the "
                   f"latter")
    return out


def _remove_store(store: str) -> None:
    from kvbench.engine.safety import unmark

    Path(store).unlink(missing_ok=True)
    unmark(store)


def _remove_store_behind(store: str):
    """Remove the scratch store in a thread while the job goes on (plan, check, report): unlinking a multi-GB
    store frees its extents in the kernel (2.1 s of the default job's wall time, measured), and nothing reads
    it after the probes. The thread is not a daemon: the interpreter joins it before the process exits, so the
    store is gone when ``kvbench run`` returns, on success, error or interrupt alike (os.unlink releases the GIL)."""
    import threading

    class Removal(threading.Thread):
        """An error in the thread (a store that cannot be removed) is raised again by ``join()``, in the job's
        thread, where it becomes the command's one-line error: a thread's own error would print a traceback."""

        error = None

        def run(self):
            try:
                _remove_store(store)
            except BaseException as e:  # noqa: BLE001 - handed to join()
                self.error = e

        def join(self, timeout=None):
            super().join(timeout)
            if self.error is not None:
                err, self.error = self.error, None
                raise err

    th = Removal(name="kvbench-remove-store")
    th.start()
    return th


def _probe_tiers(tiers: dict, store: str, l2_bytes: int, l3_bytes: int, chunk: int, seconds: float,
                 faults: str | None = None) -> tuple[list, list, list]:
    """The tier probes, each checked against the replay (:func:`kvbench.qualify.probe.probe_job_tiers`)."""
    from kvbench.qualify.probe import probe_job_tiers

    return probe_job_tiers(tiers, store, l2_bytes, l3_bytes, chunk, seconds, faults)


class _Progress:
    """The job's log lines ([k/n] step) and its live line (kvbench.progress.Steps: step k of n, ETA)."""

    def __init__(self, total: int):
        from kvbench.progress import Steps

        self.total, self.i, self.t0 = total, 0, time.monotonic()
        self.meter = Steps("run", [None] * total)     # closed with every live line when the command ends

    def step(self, what: str) -> float:
        from kvbench.progress import echo

        self.i += 1
        echo(f"[{self.i}/{self.total} {time.monotonic() - self.t0:6.1f}s] {what}")
        self.meter.start(what.split(" (")[0])
        return time.monotonic()

    def done(self, t: float, what: str) -> None:
        from kvbench.progress import echo

        echo(f"        {what} ({time.monotonic() - t:.1f} s)")

    def echo(self, msg: str) -> None:
        from kvbench.progress import echo

        echo(msg)


def _g(v) -> str:
    """A number for a progress line (4 significant digits), or n/a."""
    return f"{v:.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "n/a"


def _l3_room(l3_path: str | None, results_root: str, l3_capacity: int | None) -> tuple[int, float]:
    """Where the L3 store goes and how much of it it may take: a raw device's size (90%), else the free space
    of the filesystem that will hold the store (20%): --l3's, not --results'. A --l3-capacity larger than the
    device is refused here, not minutes into the replay."""
    import os
    import stat

    import psutil

    from kvbench.errors import TargetError
    from kvbench.units import format_bytes

    if l3_path and os.path.exists(l3_path) and stat.S_ISBLK(os.stat(l3_path).st_mode):
        fd = os.open(l3_path, os.O_RDONLY)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)
        if l3_capacity is not None and l3_capacity > size:
            raise TargetError(f"--l3-capacity {format_bytes(l3_capacity)} is larger than {l3_path} "
                              f"({format_bytes(size)})", f"give --l3-capacity below {format_bytes(size)}, or omit it "
                              "(sized to the device)")
        return size, 0.90
    where = Path(l3_path).resolve().parent if l3_path else Path(results_root)
    while not where.exists():
        where = where.parent
    return psutil.disk_usage(str(where)).free, 0.20


def _preflight(l3_path: str | None, results_root: str, destroy_data: str | None) -> None:
    """What would fail the replay step minutes in, refused before the job starts (nothing made yet)."""
    import os
    import stat

    from kvbench.engine import safety
    from kvbench.engine.targets import MEMORY_FILESYSTEMS
    from kvbench.errors import TargetError
    from kvbench.metrics.environment import mount_of

    if l3_path and os.path.exists(l3_path) and stat.S_ISBLK(os.stat(l3_path).st_mode):
        safety.check_block_write(l3_path, destroy_data)
        return
    where = l3_path or results_root
    probe = Path(where).resolve()
    while not probe.exists():
        probe = probe.parent
    fs = (mount_of(str(probe)) or {}).get("fstype")
    if fs in MEMORY_FILESYSTEMS:
        what = f"--l3 {l3_path}" if l3_path else f"the scratch L3 store (under --results {results_root})"
        raise TargetError(f"{what} would be on {fs}, where O_DIRECT is served from memory or unsupported: no "
                          "device would be measured", "give --l3 a file on a device-backed filesystem (ext4, "
                          "xfs) or a raw block device, or --results on one")


class TraceData:
    """The job's trace, read once, and what the job computes of it once: its exact LRU profile
    (:func:`kvbench.analysis.curves.profile.exact_profile`) and the distinct blocks of the part the job replays
    (``head``: the first ``max_requests`` requests when that cuts the trace, with a profile of its own)."""

    def __init__(self, path: str, max_requests: int | None = None):
        from kvbench.stream.traces import read_trace

        t0 = time.perf_counter()
        self.path = path
        self.trace = read_trace(path)
        self.read_s = time.perf_counter() - t0
        t = self.trace
        self.head = t.slice(0, max_requests) if max_requests and max_requests < t.n_requests else t
        self.profile_s = 0.0
        self._profiles: dict = {}
        self._distinct = None
        self._plan_trace = None

    def profile(self, trace=None, warmup: float = 0.0):
        """The exact profile of ``trace`` (the whole trace, or ``head``) after a warm-up (a fraction of its
        requests), computed on first use."""
        from kvbench.analysis.curves.profile import exact_profile

        trace = self.trace if trace is None else trace
        key = (id(trace), float(warmup))
        if key not in self._profiles:
            t0 = time.perf_counter()
            self._profiles[key] = exact_profile(trace, warmup=warmup)
            self.profile_s += time.perf_counter() - t0
        return self._profiles[key]

    @property
    def distinct(self) -> int:
        """Distinct blocks of ``head`` (the footprint the tiers are sized to)."""
        if self._distinct is None:
            import numpy as np

            self._distinct = int(np.unique(self.head.keys).size)
        return self._distinct

    @property
    def plan_trace(self):
        """The trace as ``kvbench plan`` reads it (``read_trace(..., compact=True)``): a key-sampled stream
        without the requests its sample left empty, any other trace as it is."""
        if self._plan_trace is None:
            from kvbench.stream.sampling import FULL_BLOCKS, compact_batches

            self._plan_trace = (compact_batches([self.trace]) if FULL_BLOCKS in self.trace.extras
                                else self.trace)
        return self._plan_trace


def _sampling(data: TraceData, sample_keys: str, block_bytes: int, l2_bytes: int, l3_bytes: int):
    """The replay's key sample rate (``auto``: store at the curve's knee; a key-sampled ``gen:`` trace: its own)
    and the full-size L2/L3 it models."""
    from kvbench.analysis.curves.miniature import SampleChoice, choose_sample_rate, modelled_bytes
    from kvbench.sim.blockstore import slot_bytes_for
    from kvbench.stream.sampling import check_rate
    from kvbench.stream.synth import gen_sample_rate

    own = gen_sample_rate(data.path)
    if own is not None:             # run_job refused a --sample-keys beside it
        slot = slot_bytes_for(block_bytes)
        return SampleChoice(own, 0.0, 0.0, data.distinct, l3_bytes // slot, modelled_bytes(l3_bytes, own, slot),
                            modelled_bytes(l2_bytes, own, slot),
                            f"key sample rate {own:g}: the trace's own (sample= in its gen: argument); the replay "
                            f"models L2/L3 at 1/{own:g} of the device sizes")
    if str(sample_keys).strip().lower() != "auto":
        r = check_rate(sample_keys)
        slot = slot_bytes_for(block_bytes)
        return SampleChoice(r, 0.0, 0.0, 0, l3_bytes // slot, modelled_bytes(l3_bytes, r, slot),
                            modelled_bytes(l2_bytes, r, slot), f"key sample rate {r:g} (given)" if r < 1 else
                            "no key sampling (given)")
    return choose_sample_rate(data.head, block_bytes=block_bytes, l3_bytes=l3_bytes, l2_bytes=l2_bytes,
                              profile=data.profile(data.head), distinct=data.distinct)


def parse_step(command: click.Command, args) -> dict:
    """``args`` (a step's command line after its command words, without ``--json``) through ``command``'s own
    click parameters: its defaults, conversions and checks, as the command run as a process would have them.
    The job's progress mode is kept (parsing runs ``--json``'s callback)."""
    from kvbench import progress

    mode = progress.mode()
    try:
        with command.make_context(command.name, [str(a) for a in args]) as ctx:
            params = dict(ctx.params)
    finally:
        progress.set_mode(mode)
    params.pop("as_json", None)
    return params


def run_inprocess(name: str, argv: list, *, fn):
    """Run a step in this process: ``fn()`` returns the object its command prints with ``--json``. Returns the
    same :class:`~kvbench.qualify.steps.StepResult` as :func:`~kvbench.qualify.steps.run_step` would (the result
    as that JSON; a failure recorded with its one-line error, not raised); an interrupt raises. Run folders
    made inside record the step's command (``argv`` without the interpreter)."""
    from kvbench.errors import Interrupted, KvbenchError, one_line
    from kvbench.metrics.run import as_command, to_jsonable
    from kvbench.qualify.steps import StepResult

    t0 = time.monotonic()

    def failed(code: int, error: str, result=None):
        return StepResult(name, tuple(argv), code, time.monotonic() - t0, result, one_line(error))

    try:
        with as_command(["kvbench", *list(argv)[3:]]):
            result = to_jsonable(fn())
    except Interrupted:
        raise
    except KvbenchError as e:
        summary = getattr(e, "summary", None)         # a failed replay still answers its --json
        return failed(e.exit_code, str(e), to_jsonable({"kind": "replay-kv", **summary, "error": e.problem,
                                                        "fix": e.fix}) if summary else None)
    except OSError as e:
        if os.environ.get("KVBENCH_DEBUG"):
            raise
        return failed(1, f"{e.strerror or e} ({e.filename or 'no file'})")
    except Exception as e:  # noqa: BLE001 - a step's bug fails the step (as a crashed process would), not the job
        if os.environ.get("KVBENCH_DEBUG"):
            raise
        return failed(1, f"{type(e).__name__}: {e} (fix: rerun with KVBENCH_DEBUG=1 for the traceback and report it)")
    return StepResult(name, tuple(argv), 0, time.monotonic() - t0, result, None)


@dataclass(frozen=True)
class JobOptions:
    """``kvbench run``'s options (sizes in bytes, the duration in seconds)."""

    trace: str = DEFAULT_TRACE
    model: str = DEFAULT_MODEL
    compute_profile: str | None = None
    l2: int | None = None
    l3_path: str | None = None
    l3_capacity: int | None = None
    destroy_data: str | None = None
    duration: float = 60.0
    max_requests: int | None = None
    sample_keys: str = "auto"
    deployment: str = DEFAULT_DEPLOYMENT
    warmup: object = 0.0            # a fraction of the requests or a WarmupTime (--warmup): mrc and plan take it
    retentions: str = RETENTIONS
    probe_seconds: float = 1.0
    link: str | None = None
    probe_fault: str | None = None
    keep_store: bool = False
    results_root: str = "results"
    output: str | None = None


@dataclass
class JobResult:
    """What the job did: its run folder (as read back through the result contract), the report, the steps and
    the names of those that failed."""

    run_dir: Path
    report: Path
    folder: object
    failed: list
    steps: list


def run_job(o: JobOptions) -> JobResult:
    """The main job: size the tiers, the exact curve, the whole trace through the tiers at full size, the
    measured replay (a child process), the tier probes, the plan, the load-vs-recompute check and the report.
    Returns what it did; a failed step is in ``failed`` (the job went on); an interrupt raises after recording
    ``interrupted`` with the report of the part that ran."""
    import psutil

    from kvbench.analysis.deployment import parse_deployment
    from kvbench.metrics.results import CheckResult, PlanResult, Summary, read_run
    from kvbench.metrics.run import RunDir
    from kvbench.qualify import steps as child
    from kvbench.replay.kv import coverage_line
    from kvbench.report import build_report, default_report_path
    from kvbench.spec.models import load_model
    from kvbench.stream.synth import gen_sample_rate
    from kvbench.units import parse_duration

    for x in o.retentions.split(","):       # a bad retention fails here, before any step runs
        if x.strip():
            parse_duration(x.strip(), what="--retentions")
    if not o.duration > 0:
        from kvbench.errors import UsageError

        raise UsageError(f"--duration {o.duration:g} s must be > 0", "give the replay's wall-clock budget, e.g. 60s")
    parse_deployment(o.deployment)          # a bad spec fails here, before any step runs
    trace_path = _trace_path(o.trace)
    own = gen_sample_rate(trace_path)
    if own is not None and str(o.sample_keys).strip().lower() != "auto":
        from kvbench.errors import UsageError

        raise UsageError(f"{o.trace} is already a key sample at rate {own:g}; --sample-keys samples it again",
                         "give the rate once: sample= in the gen: argument or --sample-keys auto")
    _preflight(o.l3_path, o.results_root, o.destroy_data)
    prog = _Progress(8)
    spec = load_model(o.model)
    compute_profile, profile_note = _pick_profile(o.compute_profile, spec.name)
    if profile_note:
        prog.echo(f"note: {profile_note}")
    t = prog.step(f"sizing tiers for {Path(trace_path).name} with {spec.name} ({spec.bytes_per_token:,} B/token)")
    data = TraceData(trace_path, o.max_requests)          # the trace, read once for every step but the replay
    if o.warmup:
        from kvbench.analysis.curves.profile import warmup_window

        warmup_window(data.plan_trace, o.warmup)        # a warm-up that leaves nothing to measure fails here
    block_tokens = int(data.trace.block_tokens)
    block_bytes = spec.block_bytes(block_tokens)
    room, share = _l3_room(o.l3_path, o.results_root, o.l3_capacity)
    sizes = size_tiers(data.distinct * block_bytes, block_bytes, room, psutil.virtual_memory().available,
                       disk_share=share)
    Path(o.results_root).mkdir(parents=True, exist_ok=True)
    l2_bytes = sizes.l2_bytes if o.l2 is None else o.l2
    l3_bytes = sizes.l3_bytes if o.l3_capacity is None else o.l3_capacity
    sampling = _sampling(data, o.sample_keys, block_bytes, l2_bytes, l3_bytes)
    config = {"trace": trace_path, "model": spec.name, "bytes_per_token": spec.bytes_per_token,
              "block_tokens": block_tokens, "block_bytes": block_bytes, "l2": l2_bytes, "l3": l3_bytes,
              "l3_path": o.l3_path, "profile": compute_profile, "profile_note": profile_note,
              "duration_s": o.duration, "max_requests": o.max_requests,
              "deployment": o.deployment, "sizing": asdict(sizes), "sample_rate": sampling.rate,
              "sampling": asdict(sampling)}
    rd = RunDir.create("run", config, root=o.results_root)
    store = o.l3_path or str(rd.path / "l3-store.bin")
    prog.done(t, f"L2 DRAM {l2_bytes / 2**30:.3g} GiB, L3 {l3_bytes / 2**30:.3g} GiB on {store}; {sizes.reason}")
    prog.echo(f"        {sampling.reason}")     # above the live line, not into it
    parts: dict = {}
    steps: list = []
    notes: list = []
    check_out: dict = {}
    removal = None          # the scratch store's removal, started once the probes are done (_remove_store_behind)
    remove_store = not o.keep_store and o.l3_path is None

    def save(status, extra=None):
        rd.write_summary({"parts": parts, "steps": steps, "config": config, "notes": notes, **(extra or {})},
                         status=status)

    def record(st):
        steps.append({"name": st.name, "ok": st.ok, "seconds": round(st.seconds, 2), "error": st.error,
                      "run_dir": st.run_dir, "argv": list(st.argv[3:])})
        if st.run_dir:
            parts[st.name] = st.run_dir
        save("running")
        return st

    def step(name, words, args=(), options=None, heartbeat=None):
        """A step run as a child kvbench process (the measured replay)."""
        return record(child.run_step(name, child.kvbench_argv(words, args, options), heartbeat=heartbeat))

    def here(name, command, words, args=(), options=None, *, fn):
        """A step run in this process: ``fn(params)`` with the command's options parsed by the command itself."""
        argv = child.kvbench_argv(words, args, options)
        return record(run_inprocess(name, argv, fn=lambda: fn(parse_step(command, argv[3 + len(words):-1]))))

    try:
        t = prog.step("hit-ratio curve (kvbench mrc, exact LRU)")

        def mrc(p):
            from kvbench.analysis.curves.profile import warmup_fraction
            from kvbench.cli.mrc import lru_curve_json

            warm = warmup_fraction(data.trace, p["warmup"])     # a warm-up by time: the fraction before it
            out = lru_curve_json(data.trace, data.profile(warmup=warm), spec=load_model(p["model"], tp=p["tp"]),
                                 unit=p["unit"], points=p["points"], read_s=data.read_s, profile_s=data.profile_s,
                                 warmup=warm)
            for w in out["warnings"]:
                prog.echo(f"    warning: {w}")
            return out

        from kvbench.cli.mrc import mrc_cmd

        warm = {"warmup": str(o.warmup)} if o.warmup else {}        # the steps read it back (WarmupTime's text)
        st = here("mrc", mrc_cmd, ["mrc"], [trace_path], {"unit": "bytes", "model": spec.name, **warm}, fn=mrc)
        if st.result:
            rd.write_json("mrc.json", st.result)
        prog.done(t, f"infinite-cache hit ratio {_g((st.result or {}).get('infinite_hit_ratio'))}" if st.ok
                  else f"FAILED: {st.error}")

        t = prog.step("the whole trace through the tiers at full size (kvbench replay kv --dry-run)")

        def simulate(p):
            from kvbench.cli._common import replay_config
            from kvbench.replay.kv import replay_kv

            return replay_kv(replay_config(**p), trace=data.trace,
                             progress=lambda done, total: prog.meter.tick(f"{done:,} of {total:,} requests"))

        from kvbench.cli.replay_kv import replay_kv_cmd

        st = here("simulate", replay_kv_cmd, ["replay", "kv"], [trace_path],
                  {"model": spec.name, "l2": sampling.modelled_l2_bytes, "l3": store,
                   "l3_capacity": sampling.modelled_l3_bytes, "dry_run": True, "max_requests": o.max_requests,
                   "results": str(rd.path)}, fn=simulate)
        sim = Summary.from_json(st.result, "kvbench replay kv --dry-run --json").data if st.result else {}
        prog.done(t, f"{sim.get('requests', 0):,} requests, hit ratio {_g(sim.get('hit_ratio'))} at L2/L3 of "
                     f"{_g(sampling.modelled_l2_bytes / 2**30)}/{_g(sampling.modelled_l3_bytes / 2**30)} GiB"
                  if st.ok else f"FAILED: {st.error}")

        t = prog.step(f"replay through DRAM + NVMe (kvbench replay kv, closed loop: I/O for at most "
                      f"{o.duration:.0f} s, plus reading the trace and creating the store)")
        opts = {"model": spec.name, "l2": sampling.modelled_l2_bytes, "l3": store,
                "l3_capacity": sampling.modelled_l3_bytes,
                # a gen: trace's own sample is applied by the replay itself (keyed_stream): not passed again
                "sample_keys": sampling.rate if sampling.rate < 1 and gen_sample_rate(trace_path) is None else None,
                "closed_loop": True,
                "duration": f"{o.duration}s", "max_requests": o.max_requests, "results": str(rd.path),
                "destroy_data": o.destroy_data}
        st = step("replay", ["replay", "kv"], [trace_path], opts,
                  heartbeat=lambda s: _replay_progress(rd.path, s, o.duration))
        replay_dir = st.run_dir
        r = Summary.from_json(st.result, "kvbench replay kv --json").data if st.result else {}
        est = (f" (estimate for L2/L3 of {_g(sampling.modelled_l2_bytes / 2**30)}/"
               f"{_g(sampling.modelled_l3_bytes / 2**30)} GiB from a {sampling.rate:g} key sample; load times cover "
               f"sampled blocks)") if sampling.rate < 1 else ""
        prog.done(t, f"{coverage_line(_issued(r), int(r.get('trace_requests') or sim.get('requests') or 0), o.duration)} "
                     f"(timed I/O; the answer's hit ratios are the whole trace's); "
                     f"hit ratio of the replayed part {_g(r.get('hit_ratio'))}{est}; load time p50 "
                     f"{_g((r.get('load_time_ms') or {}).get('p50'))} ms" if st.ok else f"FAILED: {st.error}")
        t = prog.step("tier probes (first byte at QD1, bandwidth at the replay's chunk size)")
        probes, probe_notes, excluded = [], [], []
        tiers = r.get("tiers") or {}
        try:
            if st.ok:
                probes, probe_notes, excluded = _probe_tiers(tiers, store, l2_bytes, l3_bytes,
                                                             int(r.get("chunk_bytes") or MiB), o.probe_seconds,
                                                             o.probe_fault)
        finally:
            if remove_store:
                removal = _remove_store_behind(store)
        if probes or excluded:
            rd.write_json("probes.json", [p.to_dict() for p in probes] + [{**x, "excluded": True} for x in excluded])
        from kvbench.analysis.loadpath import job_load_paths

        # the one L2 and L3 load path of the run, with their sources: plan, check and the report use these
        paths = job_load_paths(replay_dir, spec, probes, has_l2=l2_bytes > 0 and "l2" in tiers,
                               profile_name=compute_profile, link=o.link, notes=probe_notes, excluded=excluded)
        rd.write_json("load_paths.json", paths.to_json())
        notes.extend(probe_notes)
        for note in probe_notes:
            prog.echo(f"        note: {note}")
        prog.done(t, "; ".join(f"{p.name}: {p.bandwidth_bytes_per_s / 1e9:.3g} GB/s at {format_bytes(p.io_size)} QD{p.qd}, "
                               f"first byte {p.first_byte_s * 1e6:.0f} us (one small read at QD1, idle)"
                               for p in probes) or "no tier to probe")

        t = prog.step("steady-state capacity, DWPD and residence at the deployment (kvbench plan)")

        def plan_fn(p):
            from kvbench.cli.plan import plan_result

            p = {k: v for k, v in p.items() if k not in ("trace_path", "report_path", "results_root")}
            ptrace = data.plan_trace
            return plan_result(ptrace, **p, exact=data.profile() if ptrace is data.trace else None,
                               step=lambda name: prog.meter.tick(name, now=True))

        from kvbench.cli.plan import plan_cmd

        popts = {"trace": trace_path, "model": spec.name, "run": replay_dir, "deployment": o.deployment,
                 "profile": compute_profile, "sweep": o.retentions,
                 "load_tier": paths.tier_arg("l3"), **warm}
        st = here("plan", plan_cmd, ["plan"], (), popts, fn=plan_fn)
        plan = PlanResult.from_json(st.result, "kvbench plan --json").data if st.result else {}
        if st.result:
            rd.write_json("plan.json", plan)
            rows = [{"retention_s": x["retention_s"], "dwpd": x["dwpd"], "capacity_bytes": x["capacity_bytes"],
                     "hit_ratio": x.get("hit_ratio"), "extrapolated": x["extrapolated"], "basis": x["basis"]}
                    for x in plan.get("retention_sweep") or []]
            if rows:
                rd.write_json("retention.json", rows)
        prog.done(t, "plan written (the answer follows the load-vs-recompute check)" if st.ok
                  else f"FAILED: {st.error}")

        t = prog.step(f"load vs recompute (kvbench check, profile {compute_profile})")
        measured = [k for k, v in tiers.items() if isinstance(v, dict) and (v.get("read_bytes") or 0) > 0]
        if replay_dir and (measured or paths.tiers):
            from kvbench.cli.check import check_cmd, check_result

            def check_fn(p):
                return check_result(**p)[0]

            copts = {"profile": compute_profile, "model": spec.name, "link": o.link}
            # the replay's own loads first (check --run fits them as the load paths did); the load paths of tiers
            # the replay never loaded from beside them; where check cannot read the run, the load paths alone
            extra = [paths.tier_arg(n) for n in paths.tiers if n not in measured]
            st = here("check", check_cmd, ["check"], (), {**copts, "run": replay_dir, "tier": extra},
                      fn=check_fn) if measured else None
            if (st is None or not st.ok) and paths.tiers:
                if st is not None:
                    steps[-1].update(name="check-run", ok=True, note="fell back to the load paths: " + str(st.error))
                st = here("check", check_cmd, ["check"], (),
                          {**copts, "tier": [paths.tier_arg(n) for n in paths.tiers]}, fn=check_fn)
            if st.result:
                rd.write_json("check.json", CheckResult.from_json(st.result, "kvbench check --json").to_json())
                check_out = st.result
            ctiers = (st.result or {}).get("tiers") or {}
            verdicts = [v.get("verdict") for v in ctiers.values() if isinstance(v, dict)]
            prog.done(t, "; ".join(str(v) for v in verdicts) if st.ok else f"FAILED: {st.error}")
            notes.extend(first_byte_notes(probes, ctiers))
            for note in notes:
                prog.echo(f"        note: {note}")
        else:
            steps.append({"name": "check", "ok": False, "error": "no tier measurements to check"})
            prog.done(t, "skipped: no tier was measured")
    except BaseException as e:
        # Ctrl-C or a fatal error: the scratch store goes, what was measured stays, with a report of it
        if remove_store:
            if removal is not None:
                removal.join()
            _remove_store(store)
        save("interrupted", {"reason": f"{type(e).__name__}: {e}"})
        try:
            out = Path(o.output) if o.output else default_report_path([rd.path])
            path, _ = build_report([rd.path], out, title=f"kvbench run (interrupted): {Path(trace_path).name}")
            save("interrupted", {"reason": f"{type(e).__name__}: {e}", "report": str(path)})
            click.echo(f"report of the part that ran: {path}", err=True)
        except Exception:  # noqa: BLE001 - the report is a courtesy here; the interruption is what matters
            pass
        raise

    t = prog.step("HTML report")
    failed = [s["name"] for s in steps if not s["ok"]]
    status = "complete" if not failed else "partial"
    extra = {"reason": "failed steps: " + ", ".join(failed)} if failed else {}
    extra["answer"] = job_answer(sim, r, plan, sampling, check_out, rd.path, excluded)
    save(status, extra)
    out = Path(o.output) if o.output else default_report_path([rd.path])
    path, index = build_report([rd.path], out, title=f"kvbench run: {Path(trace_path).name}, {spec.name}")
    save(status, {**extra, "report": str(path), "figures": index["figures"]})
    prog.done(t, f"{path} ({len(index['figures'])} figures)")
    if removal is not None:
        removal.join()          # the store is gone before the job says it is done
    folder = read_run(rd.path, parts=False)
    return JobResult(rd.path, Path(path), folder, failed, steps)


def _issued(replay: dict) -> int:
    """Requests whose I/O the replay issued (it simulates whole windows; a stopped one issues part of the last)."""
    return int(replay.get("requests") or 0) - int(replay.get("requests_not_issued") or 0)


def job_answer(sim: dict, replay: dict, plan: dict, sampling, check: dict | None = None, job=None,
               excluded=()) -> dict | None:
    """The job's answer (:class:`kvbench.analysis.answer.Answer`, computed once from the plan, the check and the
    replay's coverage; probes excluded as suspect carried as suspect figures), plus what the whole-trace
    simulation found at the replayed tier sizes (``simulated``)."""
    from kvbench.analysis.answer import Sources, build_answer

    if not plan.get("per_target"):
        return None
    job = Path(job) if job is not None else Path(".")
    src = Sources(plan=str(job / "plan.json"), check=str(job / "check.json"),
                  replay=f"{replay.get('run_dir') or 'the replay'}/summary.json",
                  simulate=f"{sim.get('run_dir') or 'the simulation'}/summary.json")
    # the requests the job covers: the whole-trace simulation's (the first --max-requests when given)
    trace = int(sim.get("requests") or replay.get("trace_requests") or 0) or None
    out = build_answer(plan, check or None, trace_requests=trace, requests_issued=_issued(replay) if replay else None,
                       sources=src, excluded=excluded).to_json()
    out["simulated"] = {"hit_ratio": sim.get("hit_ratio"), "l2_bytes": sampling.modelled_l2_bytes,
                        "l3_bytes": sampling.modelled_l3_bytes,
                        "tier_hit_ratio": {k: v.get("hit_ratio") for k, v in (sim.get("tiers") or {}).items()
                                           if isinstance(v, dict)}}
    return out
