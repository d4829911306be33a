"""Hit-ratio curves of a trace, in one place: how much a cache of C blocks hits, and what that implies.

Modules (import them by name; this package re-exports nothing, so an import names where a thing lives):

- :mod:`~kvbench.analysis.curves.protocol` -- :class:`HitRatioCurve`, the protocol every hit-ratio curve type
  declares (hit ratio at capacities in blocks, the infinite-cache ratio, the references, the key sample rate and
  whose blocks the capacities are), and why each of the types is one of its own.
- :mod:`~kvbench.analysis.curves.kernels` -- the compiled (numba) sequential kernels: the one per-reference
  stack-distance engine (``stack_distances``), its streaming histogram form (``lru_feed``) and fixed-size SHARDS.
- :mod:`~kvbench.analysis.curves.stack` -- ``LRUStack``: the exact streaming LRU stack-distance histogram that
  owns ``lru_feed``'s arrays (memory bounded by the distinct keys, not the trace length).
- :mod:`~kvbench.analysis.curves.profile` -- the reference stream, ``ReuseProfile`` (exact, SHARDS fixed-rate
  and fixed-size, streamed), the other policies' per-size simulation and ``Curve``, the curve a user asks for
  (``kvbench mrc``).
- :mod:`~kvbench.analysis.curves.capacity` -- ``HitCurve`` (a curve as arrays) and what a curve says about
  capacity: the size for a target hit ratio, the knee, where another block stops paying.
- :mod:`~kvbench.analysis.curves.residence` -- the steady state of a write-through LRU tier at every capacity
  (``SteadyCurve``: write rate, residence time, DWPD) and ``SteadyHits``, its steady hit-ratio curve.
- :mod:`~kvbench.analysis.curves.miniature` -- the key sample rate of a miniature replay (the store at the
  curve's knee).

The key-sampling hash is not here: it is :mod:`kvbench.stream.sampling` (SHARDS' spatial sample and
``gen:...,sample=`` pick the same keys).
"""
