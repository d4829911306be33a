"""The key sample rate of a miniature replay: the store a disk can hold, placed at the hit-ratio curve's knee.

A real KV footprint is terabytes (the Mooncake synthetic trace with llama-3.1-8b: 43,924 blocks x 64 MiB =
2.7 TiB); a test box has tens of GB. Replaying with spatial key sampling (:mod:`kvbench.stream.sampling`) at
rate ``r`` needs a store of ``r`` times the modelled capacity, so the modelled L3 is put at the knee of the
exact LRU curve (where extra capacity stops paying as much: the capacity a deployment would plausibly buy) and
``r = store blocks / knee blocks``. The replay then shows the hit ratios of a knee-sized cache on the small
store, instead of the near-zero ones of a store far below the working set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvbench.errors import SpecError

MIN_SAMPLED_KEYS = 200          # below this many sampled distinct blocks the estimates get noisy: say so


@dataclass(frozen=True)
class SampleChoice:
    """The rate chosen (1.0: no sampling), the knee it aims at, and the capacities to give ``replay kv``."""

    rate: float
    knee_blocks: float
    knee_hit_ratio: float
    distinct_blocks: int
    store_blocks: int
    modelled_l3_bytes: int          # --l3-capacity for replay kv (the full-size cache modelled)
    modelled_l2_bytes: int          # --l2 for replay kv
    reason: str


def modelled_bytes(device_bytes: int, rate: float, slot_bytes: int) -> int:
    """Full-size capacity whose ``x rate`` share, floored to slots as replay kv does, is the whole slots of
    ``device_bytes`` (half a slot of margin against rounding either way)."""
    if device_bytes <= 0 or rate >= 1.0:
        return int(device_bytes)
    return int(math.ceil((device_bytes // slot_bytes * slot_bytes + slot_bytes / 2) / rate))


def choose_sample_rate(trace, *, block_bytes: int, l3_bytes: int, l2_bytes: int, profile=None,
                       distinct: int | None = None) -> SampleChoice:
    """Rate that lands the store (``l3_bytes`` on the device) at the exact LRU curve's knee of ``trace``.
    ``profile`` (``exact_profile(trace)``) and ``distinct`` (its distinct blocks): when the caller has them
    already (``kvbench run``'s job), not computed again."""
    import numpy as np

    from kvbench.analysis.curves import capacity as cap
    from kvbench.analysis.curves.profile import exact_profile
    from kvbench.sim.blockstore import slot_bytes_for

    curve = cap.HitCurve.from_profile(profile if profile is not None else exact_profile(trace),
                                      block_bytes=block_bytes)
    knee = float(cap.knee(curve))
    knee_hit = float(curve.at(np.array([knee]))[0])
    distinct = int(np.unique(trace.keys).size) if distinct is None else int(distinct)
    slot = slot_bytes_for(block_bytes)
    store = int(l3_bytes // slot)
    if store < 1:
        raise SpecError(f"the L3 store ({l3_bytes:,} B) holds no {slot:,}-byte block slot: no sample rate fits it",
                        "give an --l3-capacity of at least one block slot")
    if knee <= store:
        rate = 1.0
        reason = (f"no key sampling: the curve's knee ({knee:,.0f} blocks, hit ratio {knee_hit:.3f}) fits the "
                  f"{store:,}-block store")
    else:
        exact = store / knee
        step = 10.0 ** (math.floor(math.log10(exact)) - 2)
        rate = math.floor(exact / step) * step           # 3 significant digits, rounded down (never overfills)
        rate = float(f"{rate:.3g}")
        reason = (f"key sample rate {rate:g} = store {store:,} blocks / knee {knee:,.0f} blocks of the exact LRU "
                  f"curve (hit ratio {knee_hit:.3f} there; full footprint {distinct:,} blocks): the replay models "
                  f"an L3 at the knee and L2/L3 at 1/{rate:g} of the device sizes, so its hit ratios estimate a "
                  f"knee-sized cache")
        if rate * distinct < MIN_SAMPLED_KEYS:
            reason += (f"; only ~{rate * distinct:.0f} distinct blocks are sampled, so the estimates are noisy "
                       "(a larger store raises the rate)")
    return SampleChoice(rate, knee, knee_hit, distinct, store, modelled_bytes(l3_bytes, rate, slot),
                        modelled_bytes(l2_bytes, rate, slot), reason)
