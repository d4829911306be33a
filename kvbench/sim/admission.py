"""Admission policies for the L3/L4 tiers: which missed or demoted blocks are written at all (registry).

Write-through admits every miss, yet most KV blocks written to an SSD tier are never read again. An admission
policy sits in front of a tier's replacement policy (:mod:`kvbench.sim.policies`) and answers, for a block
about to be written, whether to write it; a rejected block is simply not written (it stays in the tiers above
if it is there, and is produced again on its next miss). Every policy offers:

- ``begin_request(keys, now)`` (only ``needs_request`` policies): a request's blocks, before its lookups.
- ``observe(key, now, depth)``: a lookup of ``key`` reached this tier (hit or miss), ``depth`` its position in
  the request's prefix (0 = first block). Frequency and recency policies learn here.
- ``admit(key, now, depth, blocks, victim) -> bool``: write ``key`` into the tier? ``blocks`` is the request's
  length in blocks, ``depth`` -1 when the write is a demotion (not tied to the request), ``victim`` the key the
  replacement policy would evict next when the tier is full, else None (only passed to ``needs_victim``
  policies).

Policies (``name:param=value:param=value`` on the command line):

- ``all``: admit everything (today's write-through; the tier simulation skips the hook entirely).
- ``second-access[:ghost=G]``: admit a block the second time it is written (produced or demoted); the first
  time its key is only remembered, in a FIFO ghost list of ``G`` x the tier's capacity keys (default 1). A
  key stays remembered after it is admitted ("seen before"), so with a ghost larger than the trace's keys
  this is libCacheSim's Bloom-filter admissioner without false positives (equal miss counts: tested).
- ``tinylfu[:width=W:sample=S]``: TinyLFU (Einziger et al., ACM ToS 2017): a count-min sketch (4 rows of
  4-bit counters, ``W`` x capacity counters per row rounded up to a power of two, default 1) counts every
  lookup reaching the tier; after ``S`` x capacity increments (default 10) every counter is halved (ageing).
  A newcomer is admitted while the tier has room, then only when its estimate beats the victim's (strictly,
  as in Caffeine).
- ``prefix-depth:depth=N`` and/or ``prefix-depth:beyond_shared=M``: write only the first ``N`` blocks of a
  request's prefix (the shared system prompt and early turns; deep blocks are the most request-specific),
  and/or only blocks at most ``M`` blocks beyond the request's shared prefix: its leading blocks whose keys
  earlier requests also referenced (remembered for ``ghost`` x capacity keys, default 4; keys are
  prefix-chained, so a shared block's whole prefix is shared). ``beyond_shared=0`` writes only what other
  requests share; ``1`` also the first block of the new suffix (the next turn's prefix). Demotions of deep keys
  are recognised by the depth observed at their last lookup (remembered for 4 x capacity keys; forgotten keys
  count as shallow).
- ``threshold[:min_blocks=B][:window=T]``: size and time thresholds. ``min_blocks``: write only blocks of
  requests at least ``B`` blocks long (a short prompt recomputes faster than it loads: see ``kvbench check``'s
  break-even). ``window`` (seconds or 10m/1h): write a block only when its key was looked up before within
  ``T`` (a time-bounded second access; demotions: its last lookup within ``T``); remembered for ``ghost`` x
  capacity keys (default 4).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

import numpy as np

from kvbench.errors import SpecError

ALL = "all"


def _multiple(v: float, capacity: int, what: str) -> int:
    if not v > 0:
        raise SpecError(f"admission {what}={v} must be > 0", f"give e.g. {what}=1 (times the tier's capacity)")
    return max(1, int(round(v * capacity)))


class _Ghost:
    """A bounded FIFO of keys (with one value each): what an admission policy remembers of the past."""

    __slots__ = ("od", "size")

    def __init__(self, size: int):
        self.od: OrderedDict = OrderedDict()
        self.size = int(size)

    def put(self, key, value=None) -> None:
        od = self.od
        if key in od:
            od.move_to_end(key)
        od[key] = value
        if len(od) > self.size:
            od.popitem(last=False)

    def pop(self, key, default=None):
        return self.od.pop(key, default)

    def get(self, key, default=None):
        return self.od.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.od

    def __len__(self) -> int:
        return len(self.od)


class Admission:
    """Base: admit everything. ``trivial`` policies never reject, so the tier simulation skips the hook."""

    name = "base"
    trivial = False
    needs_victim = False
    needs_request = False
    params: dict = {}
    #: the compiled tier simulation's code for this policy (kvbench.sim.tiers_kernel ``ADM_*``; the registry owns
    #: it: tests/sim/test_tiers_kernel.py checks the two agree); None: the policy runs in ReferenceHierarchy only
    kernel_code: int | None = None

    def kernel_params(self) -> dict:
        """The compiled kernel's parameters of this policy: ``code`` and the sizes and settings its state is laid
        out from (kvbench.sim.tiers.Hierarchy._adm_layout), read from this object (one source for defaults)."""
        raise NotImplementedError(f"{self.name} admission has no compiled form")

    def __init__(self, capacity_blocks: int):
        capacity_blocks = int(capacity_blocks)
        if capacity_blocks < 1:
            raise SpecError(f"{self.name} admission: capacity must be at least 1 block, not {capacity_blocks}",
                            "give the tier a capacity of at least one block")
        self.capacity = capacity_blocks

    def begin_request(self, keys, now: float) -> None:
        return None

    def observe(self, key, now: float, depth: int) -> None:
        return None

    def admit(self, key, now: float, depth: int, blocks: int, victim) -> bool:
        return True

    def describe(self) -> str:
        p = ":".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.params.items())
        return self.name + (":" + p if p else "")


class AdmitAll(Admission):
    """Write every block (write-through as today)."""

    name = ALL
    trivial = True


class SecondAccess(Admission):
    """Admit on the second write attempt; the first only enters a bounded FIFO ghost list of keys."""

    name = "second-access"
    kernel_code = 1                     # tiers_kernel.ADM_SECOND

    def kernel_params(self) -> dict:
        return dict(code=self.kernel_code, ghosts=(self.ghost.size,))

    def __init__(self, capacity_blocks: int, ghost: float = 1.0):
        super().__init__(capacity_blocks)
        self.params = {"ghost": float(ghost)}
        self.ghost = _Ghost(_multiple(float(ghost), self.capacity, "ghost"))

    def admit(self, key, now, depth, blocks, victim):
        if key in self.ghost:          # seen before (it stays remembered: "seen", as a Bloom filter)
            return True
        self.ghost.put(key)
        return False


_MASK64 = (1 << 64) - 1
# odd 64-bit multipliers (multiply-shift hashing), one per sketch row
_SKETCH_SEEDS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)
_S0, _S1, _S2, _S3 = _SKETCH_SEEDS
_NO_KEY = object()                   # equals no key (None included): a fresh sketch hashes every key it is asked


class TinyLFU(Admission):
    """Count-min frequency sketch with periodic halving; admit a newcomer whose estimate beats the victim's."""

    name = "tinylfu"
    needs_victim = True
    counter_max = 15                 # 4-bit counters
    kernel_code = 2                  # tiers_kernel.ADM_TINYLFU

    def kernel_params(self) -> dict:
        return dict(code=self.kernel_code, sketch=(self.width, self._shift, self.sample_size))

    def __init__(self, capacity_blocks: int, width: float = 1.0, sample: float = 10.0):
        super().__init__(capacity_blocks)
        self.params = {"width": float(width), "sample": float(sample)}
        w = _multiple(float(width), self.capacity, "width")
        bits = max(4, (w - 1).bit_length())
        self.width = 1 << bits
        self._shift = 64 - bits
        self.sample_size = _multiple(float(sample), self.capacity, "sample")
        self.rows = [bytearray(self.width) for _ in _SKETCH_SEEDS]
        self.increments = 0
        self.resets = 0
        self._last = (_NO_KEY, None)     # (key, its slots) of the latest lookup: none yet, so no key matches

    def _slots(self, key):
        k = hash(key) & _MASK64
        s = self._shift
        return (((k * _S0) & _MASK64) >> s, ((k * _S1) & _MASK64) >> s, ((k * _S2) & _MASK64) >> s,
                ((k * _S3) & _MASK64) >> s)

    def estimate(self, key) -> int:
        last = self._last
        i0, i1, i2, i3 = last[1] if last[0] == key else self._slots(key)
        r0, r1, r2, r3 = self.rows
        return min(r0[i0], r1[i1], r2[i2], r3[i3])

    def observe(self, key, now, depth):
        slots = self._slots(key)
        self._last = (key, slots)          # the newcomer's estimate follows its lookup: hash it once
        i0, i1, i2, i3 = slots
        r0, r1, r2, r3 = self.rows
        cm = self.counter_max
        if r0[i0] < cm:
            r0[i0] += 1
        if r1[i1] < cm:
            r1[i1] += 1
        if r2[i2] < cm:
            r2[i2] += 1
        if r3[i3] < cm:
            r3[i3] += 1
        self.increments += 1
        if self.increments >= self.sample_size:        # ageing: halve every counter
            for row in self.rows:
                a = np.frombuffer(row, dtype=np.uint8)
                a >>= 1
            self.increments //= 2
            self.resets += 1

    def admit(self, key, now, depth, blocks, victim):
        if victim is None:
            return True
        return self.estimate(key) > self.estimate(victim)


class PrefixDepth(Admission):
    """Write only the first ``depth`` blocks of a request's prefix, and/or those at most ``beyond_shared`` blocks
    beyond its shared prefix."""

    name = "prefix-depth"
    kernel_code = 3                  # tiers_kernel.ADM_PREFIX

    def kernel_params(self) -> dict:
        seen = self._seen.size if self._seen is not None else 0
        return dict(code=self.kernel_code, ghosts=(seen, self._deep.size), depth=self.depth,
                    beyond=self.beyond_shared, limit=self._limit)

    def __init__(self, capacity_blocks: int, depth: float | None = None, beyond_shared: float | None = None,
                 ghost: float = 4.0):
        super().__init__(capacity_blocks)
        if depth is None and beyond_shared is None:
            raise SpecError("prefix-depth admission needs depth or beyond_shared",
                            "give e.g. prefix-depth:depth=8 or prefix-depth:beyond_shared=1")
        if depth is not None and not (float(depth) >= 1 and float(depth) == int(depth)):
            raise SpecError(f"prefix-depth: depth={depth} must be a whole number of blocks >= 1",
                            "give e.g. prefix-depth:depth=8")
        if beyond_shared is not None and not (float(beyond_shared) >= 0 and float(beyond_shared) == int(beyond_shared)):
            raise SpecError(f"prefix-depth: beyond_shared={beyond_shared} must be a whole number of blocks >= 0",
                            "give e.g. prefix-depth:beyond_shared=1")
        self.depth = None if depth is None else int(depth)
        self.beyond_shared = None if beyond_shared is None else int(beyond_shared)
        self.params = {k: v for k, v in (("depth", self.depth), ("beyond_shared", self.beyond_shared))
                       if v is not None}
        self.needs_request = self.beyond_shared is not None
        self._seen = _Ghost(_multiple(float(ghost), self.capacity, "ghost")) if self.needs_request else None
        self._limit = self.depth if self.depth is not None else 0
        self._deep = _Ghost(4 * self.capacity)   # keys last seen at or beyond the limit (for demotions)

    def begin_request(self, keys, now):
        seen = self._seen
        shared = 0
        for k in keys:                           # prefix-chained keys: the leading run seen before
            if k not in seen:
                break
            shared += 1
        for k in keys:
            seen.put(k)
        limit = shared + self.beyond_shared
        self._limit = limit if self.depth is None else min(limit, self.depth)

    def observe(self, key, now, depth):
        if depth >= self._limit:
            self._deep.put(key)
        elif key in self._deep:
            self._deep.pop(key)

    def admit(self, key, now, depth, blocks, victim):
        if depth < 0:
            return key not in self._deep
        return depth < self._limit


class Threshold(Admission):
    """Size threshold (request length in blocks) and/or time threshold (re-reference within a window)."""

    name = "threshold"
    kernel_code = 4                  # tiers_kernel.ADM_THRESHOLD

    def kernel_params(self) -> dict:
        return dict(code=self.kernel_code, ghosts=(self._seen.size if self._seen is not None else 0,),
                    min_blocks=self.min_blocks, window=self.window)

    def __init__(self, capacity_blocks: int, min_blocks: float = 0, window: float | None = None,
                 ghost: float = 4.0):
        super().__init__(capacity_blocks)
        if float(min_blocks) < 0 or float(min_blocks) != int(min_blocks):
            raise SpecError(f"threshold: min_blocks={min_blocks} must be a whole number >= 0",
                            "give e.g. threshold:min_blocks=4")
        if window is not None and not float(window) > 0:
            raise SpecError(f"threshold: window={window} must be > 0 s", "give e.g. threshold:window=10m")
        if int(min_blocks) == 0 and window is None:
            raise SpecError("threshold admission needs min_blocks or window",
                            "give e.g. threshold:min_blocks=4 or threshold:window=10m")
        self.min_blocks = int(min_blocks)
        self.window = None if window is None else float(window)
        self.params = {k: v for k, v in (("min_blocks", self.min_blocks), ("window", self.window)) if v}
        self._seen = _Ghost(_multiple(float(ghost), self.capacity, "ghost")) if self.window else None
        self._gap = (None, float("inf"))         # (key, time since its previous lookup) of the latest lookup

    def observe(self, key, now, depth):
        if self._seen is not None:
            last = self._seen.get(key)
            self._gap = (key, float("inf") if last is None else now - last)
            self._seen.put(key, now)

    def admit(self, key, now, depth, blocks, victim):
        if depth >= 0 and blocks < self.min_blocks:
            return False
        if self.window is None:
            return True
        if depth >= 0 and self._gap[0] == key:
            return self._gap[1] <= self.window
        last = self._seen.get(key)
        return last is not None and now - last <= self.window


ADMISSIONS: dict[str, Callable[..., Admission]] = {
    ALL: AdmitAll,
    "second-access": SecondAccess,
    "tinylfu": TinyLFU,
    "prefix-depth": PrefixDepth,
    "threshold": Threshold,
}


def _parameters(name: str) -> list[str]:
    """The parameters admission policy ``name`` takes (its constructor's, past the tier's capacity)."""
    import inspect

    return [p for p in inspect.signature(ADMISSIONS[name].__init__).parameters if p not in ("self", "capacity_blocks")]


def parse_admission(spec: str, option: str = "admission") -> tuple[str, dict]:
    """``name[:k=v[:k=v]]`` -> (name, params); values are numbers or durations (10m, 1h). SpecError if bad, its
    message led by ``option`` (the option or field the spec came from)."""
    from kvbench.spec.fields import parse_fields
    from kvbench.units import parse_duration

    text = str(spec).strip()
    name, *parts = text.split(":")
    name = name.strip().lower()
    if name not in ADMISSIONS:
        raise SpecError(f"unknown admission policy {name!r}", f"use one of {', '.join(ADMISSIONS)}")

    allowed = _parameters(name)
    fields = parse_fields(parts, option=f"{option} {text!r}", known=allowed, known_text="", noun="parameter",
                          fix=f"{name} takes {', '.join(allowed) or 'no parameters'}",
                          error=SpecError)
    params = {}
    for k, v in fields.items():
        try:
            params[k] = float(v)
        except ValueError:
            try:
                params[k] = float(parse_duration(v, what=f"admission {k}"))
            except Exception:
                raise SpecError(f"admission {text!r}: {k}={v!r} is not a number or duration",
                                "give e.g. threshold:window=10m") from None
    return name, params


def make_admission(spec: str, capacity_blocks: int) -> Admission:
    """Build an admission policy from ``name[:k=v...]`` for a tier of ``capacity_blocks``."""
    name, params = parse_admission(spec)
    try:
        return ADMISSIONS[name](capacity_blocks, **params)
    except TypeError:
        allowed = _parameters(name)
        raise SpecError(f"admission {spec!r}: unknown parameter(s) {', '.join(params)}",
                        f"{name} takes {', '.join(allowed) or 'no parameters'}") from None


def is_trivial(spec: str | None) -> bool:
    """True when ``spec`` admits everything (no hook needed)."""
    return spec is None or ADMISSIONS[parse_admission(spec)[0]].trivial
