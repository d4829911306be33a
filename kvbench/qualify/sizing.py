"""Size each step so that every criterion the profile declares on it can be measured, before any I/O.

A criterion reads a number its step must produce, and some numbers exist only when the step does enough of
something: ``tiers.l3.read_lat_us.p99.9`` needs the replay to read L3 at least 1,000 times (over none the
percentile is absent and the criterion ends not-measured). What a KV replay reads where is set by the trace,
the tiers' capacities (L3: the test region less its store's spare slots) and how many requests run, and the
replay's own tier simulation computes it without I/O (:func:`kvbench.replay.kv.simulate_tier_ios`). So,
before the precondition writes a byte, for each replay-kv step:

- a criterion on ``tiers.<tier>.(read|write)_lat_us.pQ`` needs :func:`samples_needed` (Q) chunk I/Os of that
  op on that tier (p99.9: 1,000; p99: 100; p50: 2); one on any other ``tiers.<tier>.(read|write)_...`` figure
  needs one (:func:`needs_of`);
- the step, at the capacities the region gives it, is simulated until every need is met: the fewest leading
  requests that meet them. Under ``--quick`` the step runs exactly those requests (``--max-requests N`` in
  place of the 10 s cap: a 10 s cap would cut it before its first L3 read on most drives);
- when the whole trace at this region does not meet them, the job refuses (one line, before any I/O), naming
  the smallest region that does (:func:`smallest_region`: bisection over whole slots, each candidate
  simulated), or saying that no region does.

Other kinds of step are not sized here: an ``io`` step's sample count is its IOPS x runtime, known only once
the drive has run it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from fractions import Fraction

from kvbench.errors import SpecError, UsageError
from kvbench.units import format_bytes

_TIER_METRIC = re.compile(r"^tiers\.(l[1-4])\.(read|write)_(.+)$")
_PCT = re.compile(r"^lat_us\.p(\d+(?:\.\d+)?)$")


class CannotMeasure(UsageError):
    """A criterion of the profile cannot be measured on this region (refused before any I/O)."""


def samples_needed(q: str | float) -> int:
    """I/Os a ``pQ`` percentile needs to be more than the maximum: ceil(100 / (100 - Q)) (p99.9 -> 1,000,
    p99 -> 100, p50 -> 2); Q >= 100 (the maximum) needs one."""
    q = Fraction(str(q))
    if q >= 100:
        return 1
    return math.ceil(Fraction(100) / (100 - q))


def needs_of(criteria, step: str) -> dict:
    """``{(tier, op): (I/Os, criterion names)}`` the criteria on ``step`` need (see the module docstring)."""
    out: dict = {}
    for c in criteria:
        if c.workload != step:
            continue
        m = _TIER_METRIC.match(c.metric)
        if not m:
            continue
        tier, op, rest = m.groups()
        p = _PCT.match(rest)
        n = samples_needed(p.group(1)) if p else 1
        have, names = out.get((tier, op), (0, ()))
        out[(tier, op)] = (max(have, n), names + (c.name,))
    return out


@dataclass(frozen=True)
class StepSize:
    """How one step was sized: its tiers at this region, the requests that measure its criteria."""

    step: str
    region_bytes: int
    capacity_blocks: dict
    block_bytes: int
    ios_per_block: int
    requests: int | None          # the fewest leading requests that meet every need
    trace_requests: int
    needs: dict                   # "l3 read" -> I/Os needed
    options: dict                 # what the step's command line gets in place of the profile's / --quick's

    def to_dict(self) -> dict:
        return {"region_bytes": self.region_bytes, "capacity_blocks": self.capacity_blocks,
                "block_bytes": self.block_bytes, "ios_per_block": self.ios_per_block, "requests": self.requests,
                "trace_requests": self.trace_requests, "needs_ios": self.needs, "options": self.options}

    def line(self) -> str:
        tiers = ", ".join(f"{t} {n:,} blocks" for t, n in self.capacity_blocks.items())
        need = ", ".join(f"{n:,} {k} I/Os" for k, n in self.needs.items())
        return (f"{self.step}: {tiers} of {format_bytes(self.block_bytes)}; its criteria need {need}: "
                f"the first {self.requests:,} of {self.trace_requests:,} requests give them"
                + (f" (--quick runs those: --max-requests {self.options['max_requests']})"
                   if "max_requests" in self.options else ""))


def replay_step_config(argv, kind_words=("replay", "kv")):
    """The :class:`ReplayConfig` the replay step's command line gives (parsed by the command itself)."""
    import click

    from kvbench import progress
    from kvbench.cli._common import replay_config
    from kvbench.cli.replay_kv import replay_kv_cmd
    from kvbench.replay.kv import ReplayConfig

    args = [a for a in argv[3 + len(kind_words):] if a != "--json"]
    mode = progress._mode                              # the --json callback sets the process's mode: keep ours
    try:
        ctx = replay_kv_cmd.make_context("kv", args)
    finally:
        progress.set_mode(mode)
    keep = set(ReplayConfig.__dataclass_fields__) | {"l4_link_latency", "ttl", "duration", "exclusive"}
    return replay_config(**{k: v for k, v in ctx.params.items() if k in keep})


def _geometry(cfg) -> tuple[int, int, int]:
    """(slot bytes, spare slots, blocks the trace references) of the replay step's L3 store."""
    from kvbench.replay.kv import _load_trace_meta, keyed_stream, store_spare_slots
    from kvbench.sim.blockstore import slot_bytes_for
    from kvbench.spec.models import load_model

    bt, _n, n_blocks, _most = _load_trace_meta(keyed_stream(cfg))
    block = load_model(cfg.model, tp=cfg.tp).block_bytes(bt)
    return slot_bytes_for(block), store_spare_slots(cfg, block), n_blocks


def _holds_a_block(cfg, region: int, slot: int, spare: int) -> bool:
    from kvbench.sim.blockstore import capacity_within

    return capacity_within(cfg.layout, region, slot, segment_bytes=cfg.segment_bytes, spare_slots=spare) >= slot


def _meets(cfg, want: dict) -> bool:
    from kvbench.replay.kv import simulate_tier_ios

    sim = simulate_tier_ios(cfg, want)
    return all(sim.reached[k] is not None for k in want)


def smallest_region(cfg, want: dict, given: int) -> int | None:
    """The smallest ``--l3-region`` (a whole number of slots) at which the whole trace meets ``want``, above
    ``given`` (which does not); None when no region does (an L3 that holds every block the trace references
    still does not). Doubling, then bisection: L3's reads grow with its capacity (an LRU stack's hits do)."""
    from kvbench.sim.blockstore import capacity_within

    slot, spare, n_blocks = _geometry(cfg)
    lo = max(given // slot, 1)                          # slots; a region of lo slots does not meet want
    while not _holds_a_block(cfg, (lo + 1) * slot, slot, spare):
        lo += 1
    top = lo + 1                                        # a region whose L3 holds every block of the trace
    while capacity_within(cfg.layout, top * slot, slot, segment_bytes=cfg.segment_bytes,
                          spare_slots=spare) < (n_blocks + 1) * slot:
        top *= 2
    hi = None
    while lo < top:
        k = min(2 * lo, top) if lo > 1 else 2
        if _meets(replace(cfg, l3_region=k * slot), want):
            hi = k
            break
        lo = k
    if hi is None:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _meets(replace(cfg, l3_region=mid * slot), want):
            hi = mid
        else:
            lo = mid
    return hi * slot


def size_replay_step(profile_name: str, step: str, argv, criteria, region: int, *, quick: bool) -> StepSize | None:
    """Size one replay-kv step (see the module docstring); None when no criterion of it needs sizing. Raises
    :class:`CannotMeasure` naming the smallest region that works."""
    needs = needs_of(criteria, step)
    if not needs:
        return None
    import click

    try:
        cfg = replay_step_config(argv)
    except click.ClickException as e:          # the profile gives the command an option it refuses
        raise SpecError(f"profile {profile_name}: workload {step}: {e.format_message()}",
                        "fix the workload's options") from None
    cfg = replace(cfg, duration_s=None if quick else cfg.duration_s)
    want = {k: n for k, (n, _names) in needs.items()}
    from kvbench.replay.kv import simulate_tier_ios

    sim = None
    if cfg.l3_region <= 0 or _holds_a_block(cfg, cfg.l3_region, *_geometry(cfg)[:2]):
        sim = simulate_tier_ios(cfg, want)
    if sim is None or any(v is None for v in sim.reached.values()):
        raise _refusal(profile_name, step, cfg, sim, needs, want, region)
    n = max(sim.reached.values())
    opts = {"max_requests": n} if quick else {}
    return StepSize(step, region, sim.capacity_blocks, sim.block_bytes, sim.ios_per_block, n, sim.trace_requests,
                    {f"{t} {op}": v for (t, op), v in want.items()}, opts)


def _refusal(profile_name, step, cfg, sim, needs, want, region) -> CannotMeasure:
    short = next(k for k in want if sim is None or sim.reached[k] is None)
    tier, op = short
    n, names = needs[short]
    if sim is None:
        where = f"a {format_bytes(region)} region holds no block of the step's L3 store"
    else:
        caps = ", ".join(f"{t} holds {b:,}" for t, b in sim.capacity_blocks.items())
        where = (f"on a {format_bytes(region)} region ({caps} blocks of {format_bytes(sim.block_bytes)}) the "
                 f"trace's {sim.trace_requests:,} requests {op} {tier.upper()} {sim.ios[short]:,} times")
    head = f"{profile_name}: {names[0]!r} needs {n:,} {tier.upper()} {op}s ({step}), but {where}"
    if cfg.l3_region <= 0:
        return CannotMeasure(head, f"give the workload a larger {tier} or a trace that reuses more")
    best = smallest_region(cfg, want, region)
    if best is None:
        return CannotMeasure(head + "; no region size gives them",
                             "give the workload a smaller l2 or a trace that reuses more")
    if cfg.l3_region != region:                # the profile fixes the step's region itself
        return CannotMeasure(head, f"give workload {step} l3_region = \"{best}\" ({format_bytes(best)}) or more")
    return CannotMeasure(head, f"qualify a device (or --size) of at least {format_bytes(best)} ({best:,} bytes)")


def size_steps(profile, region: int | None, *, quick: bool, argv_of) -> dict:
    """``{step name: StepSize}`` for every step of ``profile`` that needs sizing on a ``region``-byte test
    region (``argv_of(workload)``: the step's command line as the job will run it). Raises
    :class:`CannotMeasure` for the first step that no sizing lets measure its criteria."""
    out = {}
    if not region:
        return out
    for w in profile.workloads:
        if w.kind != "replay-kv":
            continue
        s = size_replay_step(profile.name, w.name, argv_of(w), profile.criteria, int(region), quick=quick)
        if s is not None:
            out[w.name] = s
    return out
