"""The load-vs-recompute inequality (DESIGN.md, "The inequality"): when is reading a KV prefix from a tier
cheaper than recomputing it?

For a request whose first ``n`` tokens are cached and whose ``s`` remaining tokens must be computed anyway:

- Recomputing the prefix costs ``saved(n) = T(n) - T(0) = b*n + c*n^2`` of TTFT (the fixed overhead ``a`` is
  paid either way: the suffix, at least the last token, still runs through the model; the attention of the
  suffix over the prefix is paid either way too).
- Loading costs ``t_first_byte + n * bytes_per_token / BW`` when it precedes compute. Pipelined layer by
  layer (layer l+1's KV loads while layer l computes the suffix), only ``t_first_byte + l + (L-1) *
  max(0, l - c)`` is exposed, with ``l`` the load time of one layer and ``c`` the suffix's compute per layer,
  ``(T(n+s) - T(n)) / L``; with layers of several kinds (a window, a state) the sum runs group by group, each
  group's ``l`` from its own bytes. With nothing to overlap (s = 0) both forms agree.
- ``bytes_per_token * n`` is what a full-attention prefix loads; a model's layer kinds (``kv``) give the bytes
  exactly (README, "Model presets").

Loading wins at ``n`` when its exposed time is below ``saved(n)``. The break-even ``n*`` is the smallest
prefix from which loading wins at every longer length up to ``max_tokens`` (null when it never does); shorter
winning stretches, which pipelining can create, are kept in ``win_ranges``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace

import numpy as np

from kvbench.compute.profile import ComputeProfile
from kvbench.errors import SpecError, UnitError
from kvbench.units import format_duration, format_rate, parse_duration, parse_rate

DEFAULT_MAX_TOKENS = 1 << 20
# spaces around '=' and ',' read alike, as in every key=value option (kvbench.spec.fields; the name is free and
# the value a list, so this one pair keeps its own pattern)
_TIER_RE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*=\s*([^,]+?)\s*,\s*([^,]+?)\s*$")


@dataclass(frozen=True)
class Tier:
    """A place KV can be loaded from: sustained read bandwidth and first-byte latency at the I/O size used."""

    name: str
    bandwidth_bytes_per_s: float
    latency_s: float
    source: str = "given"
    fitted: bool = False          # latency and bandwidth fitted to load times (a 0 latency: not resolved)

    def __post_init__(self):
        if not (np.isfinite(self.bandwidth_bytes_per_s) and self.bandwidth_bytes_per_s > 0):
            raise SpecError(f"tier {self.name!r}: bandwidth must be > 0", "give e.g. fast=10GB/s,100us")
        if not (np.isfinite(self.latency_s) and self.latency_s >= 0):
            raise SpecError(f"tier {self.name!r}: latency must be >= 0", "give e.g. fast=10GB/s,100us")


NOT_RESOLVED = "not resolved by the fit"


def first_byte_text(tier: Tier) -> str:
    """A tier's first byte in words: a fitted 0 is a fit with no fixed part, not a measured 0 ns."""
    if tier.fitted and tier.latency_s == 0:
        return NOT_RESOLVED
    return format_duration(tier.latency_s)


def parse_tier(text: str) -> Tier:
    """``NAME=BANDWIDTH,LATENCY`` with units, e.g. ``l3=6.5GB/s,90us``; ``LATENCY`` = ``unresolved`` carries a fit
    with no fixed part (latency 0, said as not resolved: :func:`first_byte_text`)."""
    m = _TIER_RE.match(text.strip())
    if not m:
        raise SpecError(f"--tier {text!r}: expected NAME=BANDWIDTH,LATENCY", "write e.g. --tier l3=6.5GB/s,90us")
    name, bw, lat = m.groups()
    try:
        unresolved = lat.strip().lower() == "unresolved"
        return Tier(name, parse_rate(bw, what=f"--tier {name} bandwidth"),
                    0.0 if unresolved else parse_duration(lat, what=f"--tier {name} latency"), fitted=unresolved)
    except UnitError as e:
        raise SpecError(str(e.problem), e.fix) from None


@dataclass(frozen=True)
class Inequality:
    """``T_load`` vs ``T_recompute`` for one model's KV size, one compute profile, and the layer count.

    ``kv`` (a :class:`kvbench.spec.models.ModelSpec`) gives the bytes a hit on n tokens loads, layer group by
    layer group (a sliding-window layer at most its window, a linear-attention layer one state); without it every
    token costs ``bytes_per_token`` and the layers are alike."""

    profile: ComputeProfile
    bytes_per_token: float
    layers: int
    pipelined: bool = False
    kv: object = None

    def load_bytes(self, n) -> np.ndarray:
        """Bytes a hit on a prefix of ``n`` tokens loads."""
        n = np.asarray(n, dtype=np.float64)
        return self.kv.kv_bytes(n) if self.kv is not None else n * self.bytes_per_token

    def recompute_saved(self, n) -> np.ndarray:
        """TTFT that recomputing the prefix costs (and loading saves): ``T(n) - T(0)``."""
        n = np.asarray(n, dtype=np.float64)
        return self.profile.seconds(n) - self.profile.seconds(0.0)

    def _layer_times(self, tier: Tier, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(layers per group [G], load time of one layer of each group [G, len(n)])."""
        if self.kv is not None:
            counts, loads = self.kv.layer_loads(n)
            return counts, loads / tier.bandwidth_bytes_per_s
        return np.array([float(self.layers)]), (n * self.bytes_per_token / tier.bandwidth_bytes_per_s / self.layers)[None, :]

    def load_exposed(self, tier: Tier, n, suffix=0) -> np.ndarray:
        """TTFT that loading the prefix adds (first byte + transfer, minus what overlaps suffix compute).
        Pipelined: layer 0's load is exposed, and each later layer's load beyond the suffix's compute of one layer
        (``(T(n+s) - T(n)) / L``), layer group by layer group."""
        n = np.asarray(n, dtype=np.float64)
        if not self.pipelined:
            return tier.latency_s + self.load_bytes(n) / tier.bandwidth_bytes_per_s
        nb, sb = np.broadcast_arrays(n, np.asarray(suffix, dtype=np.float64))
        nf, sf = nb.ravel(), sb.ravel()
        counts, t = self._layer_times(tier, nf)                                    # t: [groups, n]
        compute = (self.profile.seconds(nf + sf) - self.profile.seconds(nf)) / self.layers
        rest = counts.copy()
        rest[0] -= 1                                                              # layer 0 is exposed whole
        exposed = tier.latency_s + t[0] + (rest[:, None] * np.maximum(0.0, t - compute[None, :])).sum(axis=0)
        return exposed.reshape(nb.shape)

    def margin(self, tier: Tier, n, suffix=0) -> np.ndarray:
        """Seconds loading saves over recomputing (negative: recompute is faster)."""
        return self.recompute_saved(n) - self.load_exposed(tier, n, suffix)

    def win_ranges(self, tier: Tier, suffix: int = 0, max_tokens: int = DEFAULT_MAX_TOKENS) -> list[tuple[int, int]]:
        """Integer prefix-length ranges [lo, hi] in 1..max_tokens where loading wins (margin > 0)."""
        grid = np.unique(np.round(np.geomspace(1, max_tokens, 4096)).astype(np.int64))
        wins = self.margin(tier, grid, suffix) > 0
        ranges = []
        change = np.flatnonzero(wins[1:] != wins[:-1]) + 1
        edges = [0, *change.tolist(), len(grid)]
        for lo_i, hi_i in zip(edges[:-1], edges[1:]):
            if wins[lo_i]:
                lo = grid[lo_i] if lo_i == 0 else self._first_win(tier, grid[lo_i - 1], grid[lo_i], suffix)
                hi = grid[hi_i - 1] if hi_i == len(grid) else self._first_win(
                    tier, grid[hi_i - 1], grid[hi_i], suffix, want=False) - 1
                ranges.append((int(lo), int(hi)))
        return ranges

    def _first_win(self, tier, lo, hi, suffix, want=True) -> int:
        """Smallest integer in (lo, hi] whose win state is ``want`` (state at lo is the opposite)."""
        lo, hi = int(lo), int(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if (self.margin(tier, mid, suffix) > 0) == want:
                hi = mid
            else:
                lo = mid
        return hi

    def break_even(self, tier: Tier, suffix: int = 0, max_tokens: int = DEFAULT_MAX_TOKENS) -> int | None:
        """Smallest n from which loading wins at every length up to ``max_tokens``; None if it does not."""
        return _n_star(self.win_ranges(tier, suffix, max_tokens), max_tokens)

    def bandwidth_needed(self, tier: Tier, n: int, suffix: int = 0) -> float | None:
        """Bandwidth at which loading ``n`` tokens breaks even (pipelined over ``suffix`` tokens when the
        inequality is); None if the first-byte latency alone loses."""
        budget = float(self.recompute_saved(n)) - tier.latency_s
        if budget <= 0:
            return None
        nbytes = float(self.load_bytes(n))
        hi = nbytes / budget                     # loading before compute: exposed = latency + bytes / BW
        if not self.pipelined or hi <= 0:
            return hi
        def wins(bw: float) -> bool:
            return float(self.margin(replace(tier, bandwidth_bytes_per_s=bw), n, suffix)) > 0
        lo, floor = hi / 2, hi * 1e-12
        while wins(lo) and lo > floor:           # exposed time falls as bandwidth rises: bracket, then bisect
            hi, lo = lo, lo / 2
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if wins(mid):
                hi = mid
            else:
                lo = mid
            if hi / lo < 1 + 1e-9:
                break
        return hi


def _n_star(ranges, max_tokens: int) -> int | None:
    return ranges[-1][0] if ranges and ranges[-1][1] == max_tokens else None


def verdict(tier: Tier, n_star: int | None, ranges, ref_tokens: int, margin_at_ref: float,
            need_at_ref: float | None, max_tokens: int = DEFAULT_MAX_TOKENS, how: str = "") -> str:
    """One line per tier: where loading wins, and what it would take where it does not. It quotes the margin and
    the bandwidth of the JSON beside it (``margin_at_reference_s``, ``bandwidth_needed_at_reference``), computed
    the same way (pipelined or not); ``how`` names the loading mode."""
    lat = first_byte_text(tier)
    lat = f"first byte {lat}" if lat == NOT_RESOLVED else lat
    head = f"{tier.name} ({format_rate(tier.bandwidth_bytes_per_s)}, {lat}{how}):"
    if margin_at_ref > 0:
        at = f"at {ref_tokens:,} tokens loading saves {format_duration(margin_at_ref)}"
    else:
        at = f"at {ref_tokens:,} tokens recomputing is faster by {format_duration(abs(margin_at_ref))}"  # not -0
    if n_star is not None:
        return f"{head} LOAD for prefixes >= {n_star:,} tokens, recompute below; {at}"
    need_txt = (f"; it would need > {format_rate(need_at_ref)} to win at {ref_tokens:,} tokens" if need_at_ref
                else f"; its latency alone exceeds recomputing {ref_tokens:,} tokens")
    if ranges:
        spans = ", ".join(f"{lo:,}-{hi:,}" for lo, hi in ranges)
        return f"{head} MIXED: loading wins only for {spans} tokens; {at}{need_txt}"
    return f"{head} RECOMPUTE: loading never wins up to {max_tokens:,} tokens; {at}{need_txt}"


def analyse_tiers(ineq: Inequality, tiers: list[Tier], *, lengths, suffix: int = 0,
                  max_tokens: int = DEFAULT_MAX_TOKENS, ref_tokens: int | None = None) -> dict:
    """Per tier: break-even, win ranges, margins at ``lengths``, the verdict (a JSON-ready dict)."""
    lengths = np.asarray(sorted(set(int(x) for x in lengths)), dtype=np.int64)
    ref = int(ref_tokens or ineq.profile.reference_tokens)
    curve_n = curve_tokens(max(int(lengths.max()) if lengths.size else 1, ref))
    out = {}
    how = f", pipelined over {suffix:,} suffix tokens" if ineq.pipelined else ""
    for tier in tiers:
        ranges = ineq.win_ranges(tier, suffix, max_tokens)
        n_star = _n_star(ranges, max_tokens)
        margins = ineq.margin(tier, lengths, suffix)
        m_ref = float(ineq.margin(tier, ref, suffix))
        need = ineq.bandwidth_needed(tier, ref, suffix)
        out[tier.name] = {
            "bandwidth_bytes_per_s": tier.bandwidth_bytes_per_s, "latency_s": tier.latency_s, "source": tier.source,
            "first_byte": first_byte_text(tier), "latency_resolved": not (tier.fitted and tier.latency_s == 0),
            "break_even_tokens": n_star, "win_ranges": [list(r) for r in ranges],
            "margin_s": {str(int(n)): float(m) for n, m in zip(lengths, margins)},
            "load_s": {str(int(n)): float(t) for n, t in zip(lengths, ineq.load_exposed(tier, lengths, suffix))},
            "reference_tokens": ref, "margin_at_reference_s": m_ref,
            "bandwidth_needed_at_reference": need,
            "curve": {"tokens": curve_n.tolist(), "load_s": ineq.load_exposed(tier, curve_n, suffix).tolist()},
            "verdict": verdict(tier, n_star, ranges, ref, m_ref, need, max_tokens, how),
        }
    return out


def overall_verdict(result_tiers: dict) -> dict:
    """The check's answer over all tiers (``check --json``'s top-level ``verdict``): per tier LOAD (loading
    wins from a break-even n* up), MIXED (only in some ranges) or RECOMPUTE (never), and the tier that wins
    from the shortest prefix. ``decision`` is "load" when some tier has an n*, "mixed", or "recompute"."""
    per = {}
    for name, r in result_tiers.items():
        per[name] = ("load" if r.get("break_even_tokens") is not None else
                     "mixed" if r.get("win_ranges") else "recompute")
    loads = {n: r["break_even_tokens"] for n, r in result_tiers.items() if per[n] == "load"}
    best = min(loads, key=loads.get) if loads else None
    decision = "load" if loads else ("mixed" if "mixed" in per.values() else "recompute")
    return {"decision": decision, "tiers": per, "best_tier": best,
            "break_even_tokens": loads[best] if best else None,
            "lines": [r.get("verdict") for r in result_tiers.values()]}


def curve_tokens(max_tokens: int, points: int = 64) -> np.ndarray:
    """Prefix lengths for plotting load and recompute curves: 1 .. max_tokens, geometric."""
    return np.unique(np.round(np.geomspace(1, max(2, max_tokens), points)).astype(np.int64))


# --- a replay run's measurements ------------------------------------------------------------------------
# requests.csv of ``kvbench replay kv``: hit_l1..hit_l4, load_ms, l2_load_ms..l4_load_ms, blocks; other spellings
# (hit_blocks_<tier>, load_time_us, input_tokens) are accepted for runs imported from elsewhere.
_HIT_COLS = (re.compile(r"^hit_(l\d+)$"), re.compile(r"^hit_blocks_(\w+)$"), re.compile(r"^(\w+)_hit_blocks$"))
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_LOAD_COLS = {f"{stem}_{u}": k for stem in ("load_time", "load") for u, k in _UNITS.items()}
_TIER_LOAD_COL = re.compile(r"^(\w+?)_load_(s|ms|us|ns)$")


@dataclass(frozen=True)
class RunHits:
    """Per-request hit blocks by tier and measured load times from a replay run's ``requests.csv``."""

    hit_blocks: dict            # tier name -> int64 array (one per request)
    load_s: np.ndarray | None   # measured load time per request (first issue to last completion), or None
    input_tokens: np.ndarray | None
    blocks: np.ndarray | None = None            # blocks per request (prompt length in blocks)
    tier_load_s: dict = field(default_factory=dict)  # tier name -> that tier's load time per request (NaN: none)
    sample_rate: float | None = None            # a key-sampled replay (--sample-keys): hits cover the sample
    full_blocks: np.ndarray | None = None       # blocks per request before sampling
    full_load_s: np.ndarray | None = None       # the replay's full-request load time estimate

    def full_size(self) -> "RunHits":
        """For a key-sampled run, the requests at full size: hits per tier / rate (capped at the request's
        blocks), the unsampled prompt length and the estimated full-request load time; else itself. Tier fits
        stay on the sampled rows (measured bytes against measured time); margins and wins need full lengths."""
        if not self.sample_rate or self.full_blocks is None:
            return self
        est = {k: v / self.sample_rate for k, v in self.hit_blocks.items()}
        total = sum(est.values())
        cap = np.where(total > self.full_blocks, self.full_blocks / np.maximum(total, 1e-12), 1.0)
        hit = {k: np.floor(v * cap + 0.5).astype(np.int64) for k, v in est.items()}
        return replace(self, hit_blocks=hit, blocks=self.full_blocks, load_s=self.full_load_s, input_tokens=None,
                       tier_load_s={}, sample_rate=None, full_blocks=None, full_load_s=None)


@dataclass(frozen=True)
class RunMeasurements:
    """What ``kvbench check --run`` needs from a replay run folder."""

    path: str
    tiers: list[Tier]
    model: str | None
    block_tokens: int | None
    hits: RunHits | None
    notes: tuple[str, ...] = ()


def read_run(run_dir) -> RunMeasurements:
    """Tier bandwidth/latency from ``summary.json`` and per-request hits from ``requests.csv`` of a replay run
    (the folder read through the result contract, :func:`kvbench.metrics.results.read_run`)."""
    from kvbench.metrics.results import read_run as read_folder

    folder = read_folder(run_dir, parts=False)
    replay, root = folder.replay, folder.path
    summary_path = root / "summary.json"
    if replay.dry_run:
        raise SpecError(f"{summary_path}: a --dry-run replay has no tier measurements",
                        "give a replay run that did real I/O, or use --tier NAME=BW,LATENCY")
    tiers, notes = [], []
    for name, t in replay.tiers.items():
        if t.read_bw_bytes_per_s and t.read_lat_p50_s is not None and t.read_bw_bytes_per_s > 0:
            tiers.append(Tier(name, t.read_bw_bytes_per_s, t.read_lat_p50_s,
                              source=f"{summary_path.name}: run-average bandwidth"))
        else:
            notes.append(f"tier {name}: no read measurements in the run (skipped)")
    if not tiers:
        raise SpecError(f"{summary_path}: no tier has read measurements (tiers.<name>.read_bw_bytes_per_s and "
                        f"read_lat_us.p50)", "give a replay run that read from a tier (not --dry-run), or use --tier")
    hits = _read_requests(root / "requests.csv") if (root / "requests.csv").is_file() else None
    if hits is None:
        notes.append("no requests.csv: per-hit results unavailable")
    elif replay.sample_rate < 1 and hits.full_blocks is not None:      # a key-sampled replay
        hits = replace(hits, sample_rate=replay.sample_rate)
        notes.append(f"key-sampled replay (rate {replay.sample_rate}): tiers fitted on the sampled loads; hit "
                     "lengths, wins and TTFT saved use the full-size estimates (hits / rate, full_load_ms_est)")
    return RunMeasurements(str(root), tiers, replay.model, replay.block_tokens, hits, tuple(notes))


def _read_requests(path) -> RunHits:
    import pandas as pd
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise SpecError(f"{path}: unreadable CSV: {str(e).splitlines()[0]}", "re-run the replay") from None
    hit_blocks = {}
    for col in df.columns:
        for rx in _HIT_COLS:
            m = rx.match(str(col))
            if m:
                hit_blocks[m.group(1)] = df[col].fillna(0).to_numpy(dtype=np.int64)
                break
    if not hit_blocks:
        raise SpecError(f"{path}: no hit-block columns (hit_blocks_<tier>)", "give requests.csv of kvbench replay kv")
    load = next(((df[c].to_numpy(dtype=np.float64) * k) for c, k in _LOAD_COLS.items() if c in df.columns), None)
    inp = df["input_tokens"].to_numpy(dtype=np.int64) if "input_tokens" in df.columns else None
    blocks = df["blocks"].to_numpy(dtype=np.int64) if "blocks" in df.columns else None
    tier_load = {}
    for col in df.columns:
        m = _TIER_LOAD_COL.match(str(col))
        if m and m.group(1) in hit_blocks:
            tier_load[m.group(1)] = df[col].to_numpy(dtype=np.float64) * _UNITS[m.group(2)]
    full_blocks = df["full_blocks"].to_numpy(dtype=np.int64) if "full_blocks" in df.columns else None
    full_load = df["full_load_ms_est"].to_numpy(dtype=np.float64) * 1e-3 if "full_load_ms_est" in df.columns else None
    return RunHits(hit_blocks, load, inp, blocks, tier_load, full_blocks=full_blocks, full_load_s=full_load)


def fit_tier_from_requests(name: str, hits: RunHits, block_bytes: float, min_requests: int = 8,
                           latency_s: float | None = None) -> Tier | None:
    """The tier as requests experienced it (unlike a run-average bandwidth, which a write-heavy or open-loop run
    drags down): latency + bytes/bandwidth fitted to the tier's per-request load times when there are
    ``min_requests`` of two or more sizes; with fewer, bytes over load time at the given ``latency_s``; None
    when no request loaded from the tier (or no latency is known for the fallback)."""
    from kvbench.compute.fit import fit_line
    if name not in hits.hit_blocks:
        return None
    own = hits.hit_blocks[name]
    if name in hits.tier_load_s:  # the tier's own load time per request: every request that hit it counts
        load, what = hits.tier_load_s[name], f"{name}'s load times of"
        sel = own > 0
    elif hits.load_s is not None:
        others = sum((b for k, b in hits.hit_blocks.items() if k != name), np.zeros_like(own))
        load, what = hits.load_s, "load times of single-tier"
        sel = (own > 0) & (others == 0)
    else:
        return None
    sel &= np.isfinite(load) & (load > 0)
    if not sel.any():
        return None
    nbytes = own[sel] * block_bytes
    if sel.sum() >= min_requests and np.unique(own[sel]).size >= 2:
        a, b = fit_line(nbytes, load[sel])
        if b > 0:
            return Tier(name, 1.0 / b, a, source=f"fit to {what} {int(sel.sum())} requests in requests.csv",
                        fitted=True)
    if latency_s is None:
        return None
    # too few requests for a fit: bytes over load time per request (latency included, so pessimistic)
    return Tier(name, float(nbytes.sum() / load[sel].sum()), latency_s,
                source=f"bytes / load time over {what} {int(sel.sum())} requests in requests.csv "
                       "(too few or too alike for a fit), p50 read latency")


def _pct(x: np.ndarray) -> dict:
    if x.size == 0:
        return {"p50": None, "p99": None}
    return {"p50": float(np.percentile(x, 50)), "p99": float(np.percentile(x, 99))}


def analyse_run_hits(ineq: Inequality, tiers: list[Tier], hits: RunHits, block_tokens: int) -> dict:
    """Over a run's hits: per tier the margin at the real hit lengths; overall, with the measured load times,
    the fraction of requests with loaded hits where loading won and the TTFT it saved (p50, p99).

    Hits in tiers without read measurements (a simulated HBM tier) cost no load: for those requests the
    choice is between loading the rest and recomputing it on top of the free part, ``T(free+loaded) - T(free)``.
    """
    hits = hits.full_size()
    names = {t.name for t in tiers}
    zeros = np.zeros(next(iter(hits.hit_blocks.values())).size, dtype=np.int64)
    loaded = sum((b for k, b in hits.hit_blocks.items() if k in names), zeros) * block_tokens
    free = sum((b for k, b in hits.hit_blocks.items() if k not in names), zeros) * block_tokens
    prompt = hits.input_tokens if hits.input_tokens is not None else (
        hits.blocks * block_tokens if hits.blocks is not None else None)
    if prompt is not None:  # the last prompt token is always computed
        room = np.maximum(prompt - 1, 0)
        free = np.minimum(free, room)
        loaded = np.minimum(loaded, room - free)
        suffix = prompt - free - loaded
    else:
        suffix = np.ones_like(loaded)
    per_tier = {}
    for tier in tiers:
        blocks = hits.hit_blocks.get(tier.name)
        if blocks is None:
            continue
        sel = blocks > 0
        n = blocks[sel] * block_tokens
        m = ineq.margin(tier, n, suffix[sel]) if n.size else np.zeros(0)
        per_tier[tier.name] = {"hit_requests": int(sel.sum()), "hit_tokens": _pct(n.astype(np.float64)),
                               "margin_s": _pct(m), "wins_fraction": float((m > 0).mean()) if m.size else None}
    is_hit = loaded > 0
    out = {"requests": int(zeros.size), "requests_with_loaded_hits": int(is_hit.sum()),
           "loaded_tokens": _pct(loaded[is_hit].astype(np.float64)), "tiers": per_tier}
    if hits.load_s is not None:
        is_hit &= np.isfinite(hits.load_s)
    if hits.load_s is not None and is_hit.any():
        recompute = ineq.profile.seconds(free[is_hit] + loaded[is_hit]) - ineq.profile.seconds(free[is_hit])
        saved = recompute - hits.load_s[is_hit]
        out.update({"measured_load_s": _pct(hits.load_s[is_hit]), "wins_fraction": float((saved > 0).mean()),
                    "ttft_saved_s": _pct(saved), "ttft_saved_s_if_best_choice": _pct(np.maximum(saved, 0.0))})
    return out


# --- a trace's reusable prefixes --------------------------------------------------------------------------
@dataclass(frozen=True)
class TracePrefixes:
    """Per request, the prefix (tokens) an unbounded cache would hold: its leading blocks seen in earlier
    requests. An upper bound on real hit lengths (no capacity, no TTL), used for margins at real lengths."""

    path: str
    hit_tokens: np.ndarray      # int64 per request (0 when no prefix was seen before)
    input_tokens: np.ndarray
    block_tokens: int


def trace_prefixes(path, *, batch_requests: int = 65536, limit: int | None = None) -> TracePrefixes:
    """Leading already-seen blocks per request, vectorised per batch; memory is the set of distinct keys."""
    from kvbench.stream.traces import iter_trace, resolve_trace
    seen = np.zeros(0, dtype=np.uint64)
    hits, inputs, block_tokens = [], [], 0
    for tr in iter_trace(resolve_trace(path), batch_requests=batch_requests, limit=limit):
        block_tokens = tr.block_tokens
        keys, off = tr.keys, tr.offsets.astype(np.int64)
        counts = np.diff(off)
        owner = np.repeat(np.arange(counts.size), counts)          # request of each block (in the batch)
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        earlier_in_batch = owner[first[inverse]] < owner              # first seen in an earlier request
        was_seen = np.isin(keys, seen, assume_unique=False) | earlier_in_batch
        local = np.arange(keys.size, dtype=np.int64) - np.repeat(off[:-1], counts)
        unseen_at = np.where(was_seen, np.iinfo(np.int64).max, local)
        lead = counts.copy()                                          # all seen unless an unseen block comes first
        nonempty = counts > 0
        if keys.size:
            first_unseen = np.minimum.reduceat(unseen_at, off[:-1][nonempty])
            lead[nonempty] = np.minimum(first_unseen, counts[nonempty])
        tokens = np.minimum(lead * block_tokens, np.maximum(tr.input_tokens - 1, 0))  # last token computed
        hits.append(tokens.astype(np.int64))
        inputs.append(tr.input_tokens.astype(np.int64))
        seen = np.union1d(seen, uniq)
    return TracePrefixes(str(path), np.concatenate(hits) if hits else np.zeros(0, np.int64),
                         np.concatenate(inputs) if inputs else np.zeros(0, np.int64), block_tokens)


def analyse_trace_prefixes(ineq: Inequality, tiers: list[Tier], pre: TracePrefixes) -> dict:
    """Per tier, at the trace's reusable prefix lengths: the fraction where loading wins and the margin."""
    sel = pre.hit_tokens > 0
    n, suffix = pre.hit_tokens[sel], (pre.input_tokens - pre.hit_tokens)[sel]
    out = {"path": pre.path, "requests": int(pre.hit_tokens.size), "requests_with_prefix": int(sel.sum()),
           "block_tokens": pre.block_tokens, "prefix_tokens": _pct(n.astype(np.float64)),
           "bound": "unbounded cache (every earlier prefix resident): an upper bound on hits", "tiers": {}}
    for tier in tiers:
        m = ineq.margin(tier, n, suffix) if n.size else np.zeros(0)
        out["tiers"][tier.name] = {"wins_fraction": float((m > 0).mean()) if m.size else None, "margin_s": _pct(m),
                                   "ttft_saved_s_if_best_choice": _pct(np.maximum(m, 0.0))}
    return out
