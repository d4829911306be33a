"""Capacity from a hit-ratio curve: the size for a target hit ratio, the knee, where another GB stops paying,
(pure, vectorised). How many GB of SSD replace one GB of DRAM is decided per drive class in
:mod:`kvbench.analysis.plan`, from the steady-state write rate.

A curve is a non-decreasing step function ``hit(C)`` over capacities in blocks (the exact LRU curve of
:mod:`kvbench.analysis.curves.profile`, or any arrays ``(capacities, hit_ratio)``): ``hit(C)`` is the value at the
largest listed capacity <= C, 0 below the first. The functions here take any
:class:`~kvbench.analysis.curves.protocol.HitRatioCurve` (:meth:`HitCurve.of` lists it as one). Targets are fractions of the infinite-cache hit ratio by
default (0.95 = "95% of what an unbounded cache would hit"), or absolute hit ratios.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvbench.analysis.curves.protocol import HitRatioCurve, step_at
from kvbench.errors import SpecError


@dataclass(frozen=True, eq=False)
class HitCurve:
    """Hit ratio at ascending capacities (blocks); ``block_bytes`` converts to bytes.

    A :class:`~kvbench.analysis.curves.protocol.HitRatioCurve`, and the one capacity sizing reads: a
    non-decreasing step function as arrays, every step listed (so a target's capacity is exact to the step). Not
    merged with :class:`~kvbench.analysis.curves.profile.Curve` (a policy's curve at asked capacities, which may
    fall) or :class:`~kvbench.analysis.curves.profile.ReuseProfile` (the sample behind an estimate)."""

    capacities_blocks: np.ndarray
    hit_ratio: np.ndarray
    infinite_hit_ratio: float
    block_bytes: int
    references: int = 0
    sample_rate: float = 1.0
    capacity_scale: float = 1.0

    @classmethod
    def from_arrays(cls, capacities_blocks, hit_ratio, *, block_bytes: int, infinite_hit_ratio: float | None = None,
                    references: int = 0, sample_rate: float = 1.0, capacity_scale: float = 1.0) -> "HitCurve":
        c = np.asarray(capacities_blocks, dtype=np.float64)
        h = np.asarray(hit_ratio, dtype=np.float64)
        if c.ndim != 1 or c.shape != h.shape or c.size == 0:
            raise SpecError("a hit-ratio curve needs equal-length, non-empty capacity and hit-ratio arrays",
                            "pass the curve's capacities and hit_ratio lists")
        if np.any(np.diff(c) <= 0) or c[0] <= 0:
            raise SpecError("curve capacities must be positive and strictly ascending", "sort the curve")
        if np.any((h < 0) | (h > 1)) or np.any(np.diff(h) < -1e-12):
            raise SpecError("curve hit ratios must be in [0, 1] and non-decreasing (an LRU curve)",
                            "pass an LRU (stack-algorithm) curve")
        if block_bytes <= 0:
            raise SpecError("block size must be > 0 bytes", "check the model preset and block_tokens")
        inf = float(h[-1]) if infinite_hit_ratio is None else float(infinite_hit_ratio)
        return cls(c, h, inf, int(block_bytes), int(references), float(sample_rate), float(capacity_scale))

    @classmethod
    def from_profile(cls, profile, *, block_bytes: int) -> "HitCurve":
        """From a stack-distance profile (``steps``, ``cum_hits``, ``references``: kvbench.analysis.curves.profile):
        every step of the exact curve, so capacity-for-target is exact to one block."""
        refs = int(profile.references)
        if refs <= 0:
            raise SpecError("the trace has no block references", "give a non-empty trace")
        steps = np.asarray(profile.steps, dtype=np.float64)
        # a sampled profile's SHARDS_adj can take the first steps below 0 (as hits_at, clip to [0, 1])
        hits = np.clip(np.asarray(profile.cum_hits, dtype=np.float64) / refs, 0.0, 1.0)
        if steps.size == 0:          # no reuse at all: the curve is 0 everywhere
            steps, hits = np.array([1.0]), np.array([0.0])
        keep = steps >= 1
        steps, hits = steps[keep], hits[keep]
        if steps.size == 0 or steps[0] > 1:
            steps, hits = np.concatenate(([1.0], steps)), np.concatenate(([0.0], hits))
        # distances are integers for the exact curve; estimated (fractional) ones round up to whole blocks
        caps = np.ceil(steps)
        last = np.append(caps[1:] != caps[:-1], True)
        return cls.from_arrays(caps[last], np.maximum.accumulate(hits[last]), block_bytes=block_bytes,
                               infinite_hit_ratio=profile.infinite_hit_ratio, references=refs,
                               sample_rate=getattr(profile, "sample_rate", 1.0),
                               capacity_scale=getattr(profile, "capacity_scale", 1.0))

    @classmethod
    def of(cls, curve: HitRatioCurve, *, block_bytes: int | None = None) -> "HitCurve":
        """Any hit-ratio curve as arrays: itself when it is one, a profile's every step (:meth:`from_profile`),
        else its value at each listed whole-block capacity. A curve that falls as capacity grows (a simulated
        FIFO's, a steady one's where a rate is held) is refused: capacity sizing needs an LRU curve."""
        if isinstance(curve, cls):
            return curve
        bb = int(block_bytes or getattr(curve, "block_bytes", None) or 1)
        from kvbench.analysis.curves.profile import ReuseProfile

        if isinstance(curve, ReuseProfile):
            return cls.from_profile(curve, block_bytes=bb)
        caps = np.unique(np.asarray(curve.capacities_blocks, dtype=np.float64))
        caps = caps[caps >= 1]
        if caps.size == 0:
            caps = np.array([1.0])
        return cls.from_arrays(caps, curve.at(caps), block_bytes=bb, infinite_hit_ratio=curve.infinite_hit_ratio,
                               references=curve.references, sample_rate=curve.sample_rate,
                               capacity_scale=curve.capacity_scale)

    def at(self, capacity_blocks) -> np.ndarray:
        """Hit ratio at capacities (blocks): the step function."""
        return step_at(self.capacities_blocks, self.hit_ratio, capacity_blocks)

    @property
    def full_capacity_blocks(self) -> float:
        """The smallest capacity that reaches the curve's largest hit ratio."""
        return float(self.capacities_blocks[np.argmax(self.hit_ratio >= self.hit_ratio[-1] - 1e-15)])


def target_hit(curve: HitRatioCurve, target: float, *, relative: bool = True) -> float:
    """The absolute hit ratio a target means (a fraction of the infinite-cache ratio when ``relative``)."""
    if not (0 < target <= 1) or not math.isfinite(target):
        raise SpecError(f"target hit ratio {target} is outside (0, 1]", "give e.g. --target-hit 0.95")
    return target * curve.infinite_hit_ratio if relative else target


def capacity_for_target(curve: HitRatioCurve, target: float, *, relative: bool = True) -> float | None:
    """Smallest listed capacity (blocks) whose hit ratio reaches the target; None when the curve never does
    (or when nothing is ever reused: no cache size buys a hit)."""
    curve = HitCurve.of(curve)
    if curve.hit_ratio[-1] <= 0:
        return None
    want = target_hit(curve, target, relative=relative) - 1e-12
    ok = curve.hit_ratio >= want
    if not ok.any():
        return None
    return float(curve.capacities_blocks[np.argmax(ok)])


def knee(curve: HitRatioCurve, points: int = 2048) -> float:
    """Capacity (blocks) where the curve bends: the point farthest above the chord from (0, 0) to the full
    capacity on axes normalised to [0, 1] (Kneedle, Satopaa et al., ICDCS-W 2011). Past it each further block
    gains less than the average block did."""
    curve = HitCurve.of(curve)
    top = curve.full_capacity_blocks
    if curve.hit_ratio[-1] <= 0 or top <= 1:
        return top
    grid = np.unique(np.concatenate((np.linspace(1.0, top, points), curve.capacities_blocks[
        curve.capacities_blocks <= top])))
    h = curve.at(grid) / curve.hit_ratio[-1]
    return float(grid[np.argmax(h - grid / top)])


def pays_until(curve: HitRatioCurve, *, value_per_hit_per_day: float, refs_per_day: float,
               cost_per_block_per_day: float, points: int = 256) -> float:
    """Largest capacity (blocks) at which one more block still saves more per day (its marginal hits x the
    value of a hit) than it costs per day; slopes over a log-spaced grid (the exact curve is a staircase)."""
    curve = HitCurve.of(curve)
    top = curve.full_capacity_blocks
    if top <= 1 or cost_per_block_per_day <= 0:
        return top
    grid = np.unique(np.round(np.geomspace(1.0, top, points)))
    h = curve.at(grid)
    slope = np.diff(h) / np.diff(grid)                     # hit ratio per block
    gain = slope * refs_per_day * value_per_hit_per_day    # money per block per day
    ok = np.flatnonzero(gain >= cost_per_block_per_day)
    return float(grid[ok[-1] + 1]) if ok.size else 0.0
