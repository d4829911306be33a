"""What every hit-ratio curve answers: :class:`HitRatioCurve`, the protocol its consumers depend on.

A hit-ratio curve says how much of a reference stream a cache of C blocks hits. kvbench builds one in four ways,
each a type of its own because each says something the others cannot:

- :class:`~kvbench.analysis.curves.profile.ReuseProfile` -- the (estimated) LRU stack-distance histogram of a
  trace, exact or SHARDS-sampled: the source of the others, with the sample's weights and correction;
- :class:`~kvbench.analysis.curves.profile.Curve` -- one policy's curve at the capacities a user asked for, in
  their unit (blocks or bytes); a simulated policy (FIFO, S3-FIFO) is not a stack algorithm, so its curve need not
  rise with capacity;
- :class:`~kvbench.analysis.curves.capacity.HitCurve` -- a non-decreasing step function as arrays, what capacity
  sizing (target, knee, marginal value) reads;
- :class:`~kvbench.analysis.curves.residence.SteadyHits` -- the *steady-state* hit ratio 1 - W(C) / demand of a
  write-through tier from its first eviction on (the whole-trace curves count the trace's cold start too); it need
  not rise with capacity where a write rate is held beyond the trace.

Not curves: :class:`~kvbench.analysis.curves.residence.SteadyCurve` is the write rate, residence and DWPD per
capacity (its ``at`` gives those; :meth:`SteadyCurve.hits` is its hit-ratio curve), and
:class:`kvbench.analysis.admission.TierRun` is one simulated tier at one capacity (a point).

Capacities are blocks. ``capacity_scale`` says whose blocks: how many blocks of the whole stream one block of
capacity stands for. A key-sampled stream (rate r < 1) gives either scale: SHARDS estimates over the whole
stream's blocks (``capacity_scale`` 1), or the sample's own blocks, as the plan sizes a miniature
(``capacity_scale`` 1 / r). A consumer wanting whole-stream blocks multiplies by ``capacity_scale``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class HitRatioCurve(Protocol):
    """A hit-ratio-vs-capacity curve (see the module docstring for the types that are one).

    - ``at(capacity_blocks)``: the hit ratio, in [0, 1], at each capacity (blocks; an array of the same shape);
      a step function, 0 below the curve's first capacity;
    - ``capacities_blocks``: the ascending capacities (blocks) where the curve is listed: between two of them
      ``at`` holds the lower one's value, so these points are the whole curve;
    - ``infinite_hit_ratio``: the hit ratio of a cache of every block (the curve's ceiling);
    - ``references``: the block references the hit ratios are fractions of (after any warm-up);
    - ``sample_rate``: the key sample rate of the stream measured (1.0: every key);
    - ``capacity_scale``: blocks of the whole stream per block of capacity (1.0, or 1 / sample_rate when the
      capacities are the sample's own blocks).
    """

    @property
    def capacities_blocks(self) -> np.ndarray: ...

    @property
    def infinite_hit_ratio(self) -> float: ...

    @property
    def references(self) -> int: ...

    @property
    def sample_rate(self) -> float: ...

    @property
    def capacity_scale(self) -> float: ...

    def at(self, capacity_blocks) -> np.ndarray: ...


def step_at(capacities_blocks: np.ndarray, hit_ratio: np.ndarray, capacity_blocks) -> np.ndarray:
    """The step function through ``(capacities_blocks, hit_ratio)`` (ascending capacities) at ``capacity_blocks``:
    the value at the largest listed capacity <= each, 0 below the first."""
    c = np.asarray(capacity_blocks, dtype=np.float64)
    i = np.searchsorted(capacities_blocks, c, side="right") - 1
    if len(hit_ratio) == 0:
        return np.zeros(c.shape)
    return np.where(i >= 0, np.asarray(hit_ratio, dtype=np.float64)[np.maximum(i, 0)], 0.0)
