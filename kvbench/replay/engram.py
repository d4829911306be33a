"""Engram replay: token batches -> the unique table rows each step needs -> DRAM row cache -> the pages holding
the missed rows -> O_DIRECT reads through the engine, timed against the prefetch window.

Pure part (``build_workload``): tokens are cut into ``batch`` sequences of ``seq_len`` tokens (each padded
before its start); a decode step takes one token of every sequence, a prefill step ``chunk`` tokens of every
sequence. The first ``profile_fraction`` of the steps is the profiling pass (it picks the static top-k rows and
the hot-first page order, and warms LRU/LFU); the rest is measured. Rows are packed into pages of ``page``
bytes, rows never straddling a page, each Engram layer's tables starting on a page boundary, either in hash
order (row number order) or hottest-first within each layer. Read amplification = bytes of the pages read /
bytes of the missed rows they serve.

Timed part (``run_fetch``): the table is written once (deterministic stamped content, so reads verify), then
each measured step's page reads are issued together (the first one fenced behind the previous step) and a
step's Engram layer ``i`` must have all its pages by its window: ``--window-us`` for every layer, or
``--layer-us`` times the number of blocks before the layer (its layer id).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvbench.errors import TargetError, UsageError
from kvbench.sim.rowcache import POLICIES, RowStream, sorted_unique
from kvbench.stream.engram import EngramHasher, EngramSpec, load_engram
from kvbench.stream.tokens import (TokenizerFallbackWarning, compress, load_tokenizer, text_tokens, zipf_fit,
                                   zipf_tokens)

LAYOUTS = ("hash", "hot-first")
#: how another model's compute profile is carried over to an Engram preset's backbone (name -> what it assumes)
COMPUTE_SCALING = {
    "active-params": "step time scales with the parameters active per token (FLOPs per token ~ 2 x active)",
}
MODES = ("decode", "prefill")
DEFAULT_ZIPF_TOKENS = 1 << 18
DEFAULT_ZIPF = 1.0          # word-like: DeepSeek tokens of Moby-Dick fit s = 1.04


@dataclass(frozen=True)
class EngramReplayConfig:
    """Everything one ``kvbench replay engram`` run depends on (recorded in run.json)."""

    preset: str
    text: str | None = None
    zipf: float | None = None
    tokens: int | None = None          # cap on tokens used (text) / generated (zipf)
    batch: int = 32
    seq_len: int = 2048
    mode: str = "decode"
    chunk: int | None = None           # prefill tokens per sequence per step (default: seq_len)
    dram: int | None = None            # bytes of DRAM row cache (None = no DRAM cache)
    policy: str = "static"
    layout: str = "hash"
    page: int = 4096
    window_us: float | None = None
    layer_us: float | None = None
    compute: str | None = None         # compute profile: per-layer time = T(step tokens) / backbone layers
    compute_scaling: str | None = None  # rule when the profile is another model's (COMPUTE_SCALING)
    profile_fraction: float = 0.5
    steps: int | None = None           # cap on measured steps (timed run)
    target: str | None = None
    scale_to: int | None = None        # scale head tables so the table file fits this many bytes
    seed: int = 0
    tokenizer: str | None = None       # override the preset's tokenizer (e.g. "utf8-bytes")

    def validate(self) -> None:
        if self.text is not None and self.zipf is not None:
            raise UsageError("--text and --zipf both given", "give one token source: --text FILE or --zipf S")
        if self.text is not None and not Path(self.text).is_file():
            raise UsageError(f"{self.text}: text file not found", "give an existing UTF-8 text file with --text")
        if self.mode not in MODES:
            raise UsageError(f"unknown --mode {self.mode!r}", f"use one of {', '.join(MODES)}")
        if self.layout not in LAYOUTS:
            raise UsageError(f"unknown --layout {self.layout!r}", f"use one of {', '.join(LAYOUTS)}")
        if self.policy not in POLICIES:
            raise UsageError(f"unknown --policy {self.policy!r}", f"use one of {', '.join(POLICIES)}")
        for name in ("batch", "seq_len", "page"):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be > 0", f"give a positive --{name.replace('_', '-')}")
        if self.chunk is not None and not 0 < self.chunk:
            raise UsageError("--chunk must be > 0", "give a positive --chunk")
        if self.tokens is not None and self.tokens <= 0:
            raise UsageError("--tokens must be > 0", "give a positive --tokens or omit it")
        if self.steps is not None and self.steps <= 0:
            raise UsageError("--steps must be > 0", "give a positive --steps or omit it")
        if self.dram is not None and self.dram <= 0:
            raise UsageError("--dram capacity must be > 0", "omit --dram to run with no DRAM row cache")
        if self.scale_to is not None and self.scale_to <= 0:
            raise UsageError("--scale-to capacity must be > 0", "give the table size to fit, e.g. --scale-to 2GiB")
        if self.page % 512:
            raise UsageError(f"--page {self.page} is not a multiple of 512 bytes", "use e.g. 4k or 16k")
        if sum(x is not None for x in (self.window_us, self.layer_us, self.compute)) > 1:
            raise UsageError("more than one of --window-us, --layer-us, --compute given",
                             "give one: a window, a per-layer time, or a compute profile")
        for name in ("window_us", "layer_us"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise UsageError(f"--{name.replace('_', '-')} must be > 0", "give a positive time in microseconds")
        if self.compute_scaling is not None and self.compute_scaling not in COMPUTE_SCALING:
            raise UsageError(f"unknown --compute-scaling {self.compute_scaling!r}",
                             f"use one of {', '.join(COMPUTE_SCALING)}")
        if self.compute_scaling is not None and self.compute is None:
            raise UsageError("--compute-scaling without --compute", "give the compute profile it scales")
        if not 0 <= self.profile_fraction < 1:
            raise UsageError("--profile-fraction must be in [0, 1)", "e.g. 0.5: first half profiles")


# --- page packing -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PageLayout:
    """Where each row lives: rows never straddle pages; each layer's tables start on a page boundary."""

    kind: str
    page: int
    row_bytes: int
    layer_lo: np.ndarray         # first global row of each layer
    layer_hi: np.ndarray         # one past the last
    layer_page0: np.ndarray      # first page of each layer
    hot_sorted: tuple = ()       # per layer: (sorted hot rows, their slot) for hot-first

    @property
    def rows_per_page(self) -> int:
        return max(1, self.page // self.row_bytes)

    @property
    def pages_per_row(self) -> int:
        return max(1, -(-self.row_bytes // self.page))

    @property
    def extent(self) -> int:
        """Bytes of one read: a page, or the pages one row spans when a row is larger than a page."""
        return self.page * self.pages_per_row

    @property
    def total_bytes(self) -> int:
        return int(self.layer_page0[-1]) * self.page

    def slots(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(layer index, slot within the layer) of each global row."""
        rows = np.asarray(rows, dtype=np.int64)
        layer = np.searchsorted(self.layer_hi, rows, side="right")
        slot = rows - self.layer_lo[layer]
        if self.kind == "hot-first":
            slot = slot.copy()
            for li, (hot, hot_slot) in enumerate(self.hot_sorted):
                sel = layer == li
                if not sel.any() or hot.size == 0:
                    continue
                r = rows[sel]
                idx = np.searchsorted(hot, r)
                found = (idx < hot.size) & (hot[np.minimum(idx, hot.size - 1)] == r)
                # hot rows take slots 0..k-1 by popularity; the rest keep hash order after them
                s = hot.size + (r - self.layer_lo[li]) - idx
                s[found] = hot_slot[idx[found]]
                slot[sel] = s
        return layer, slot

    def pages(self, rows: np.ndarray) -> np.ndarray:
        """First page (global page number) of each row's extent."""
        layer, slot = self.slots(rows)
        if self.row_bytes <= self.page:
            return self.layer_page0[layer] + slot // self.rows_per_page
        return self.layer_page0[layer] + slot * self.pages_per_row


def make_layout(kind: str, hasher: EngramHasher, page: int, hot_rows: np.ndarray | None = None) -> PageLayout:
    """Page layout of a table: ``hash`` (row order) or ``hot-first`` (profiled rows by popularity, per layer)."""
    if kind not in LAYOUTS:
        raise UsageError(f"unknown layout {kind!r}", f"use one of {', '.join(LAYOUTS)}")
    L = len(hasher.spec.layer_ids)
    lo = np.array([hasher.layer_row_range(i)[0] for i in range(L)], dtype=np.int64)
    hi = np.array([hasher.layer_row_range(i)[1] for i in range(L)], dtype=np.int64)
    row_bytes = hasher.spec.row_bytes
    rpp = max(1, page // row_bytes)
    ppr = max(1, -(-row_bytes // page))
    per_layer = -(-(hi - lo) // rpp) if row_bytes <= page else (hi - lo) * ppr
    page0 = np.concatenate([[0], np.cumsum(per_layer)]).astype(np.int64)
    hot_sorted = ()
    if kind == "hot-first":
        hot = np.asarray(hot_rows if hot_rows is not None else [], dtype=np.int64)
        parts = []
        for li in range(L):
            h = hot[(hot >= lo[li]) & (hot < hi[li])]              # popularity order kept
            order = np.argsort(h, kind="stable")
            parts.append((h[order], np.arange(h.size, dtype=np.int64)[order]))
        hot_sorted = tuple(parts)
    return PageLayout(kind, page, row_bytes, lo, hi, page0, hot_sorted)


def read_amplification(pages_read: int, extent: int, rows_used: int, row_bytes: int) -> float:
    """Bytes read / bytes of rows used (NaN when no row came from the table)."""
    return pages_read * extent / (rows_used * row_bytes) if rows_used else float("nan")


# --- what the deadlines ask of the device ---------------------------------------------------------------------
def _stats(x: np.ndarray) -> dict:
    return {"mean": float(x.mean()), "p99": float(np.percentile(x, 99))} if x.size else {"mean": 0.0, "p99": 0.0}


def layer_needs(reads: np.ndarray, windows_ns: np.ndarray, extent: int, layer_ids) -> dict:
    """Per Engram layer, the read rate its own deadline needs, and the binding layer (pure).

    ``reads`` is [steps, layers]: a step's reads for each Engram layer, issued together at the step's start;
    layer ``i`` needs its rows by ``windows_ns[i]``. ``own``: the layer's reads / its window. ``cumulative``: the
    reads of every layer due no later than it / its window, what a device serving reads earliest deadline first
    must sustain for that layer to be on time. The device needs the largest cumulative rate (feasible for every
    layer exactly when it meets that); the layer that sets it is the binding one (by p99 over steps; mean and p99
    are over steps, each ratio taken per step)."""
    reads = np.asarray(reads, dtype=np.float64)
    win_s = np.asarray(windows_ns, dtype=np.float64) / 1e9
    order = np.argsort(win_s, kind="stable")
    cum = np.empty_like(reads)
    cum[:, order] = np.cumsum(reads[:, order], axis=1)
    per = {}
    for i, lid in enumerate(layer_ids):
        own, total = reads[:, i] / win_s[i], cum[:, i] / win_s[i]
        per[str(lid)] = {"window_us": float(win_s[i] * 1e6), "reads_per_step": _stats(reads[:, i]),
                         "iops_own": _stats(own), "iops_cumulative": _stats(total),
                         "bytes_per_s_own": _stats(own * extent), "bytes_per_s_cumulative": _stats(total * extent)}
    keys = [str(x) for x in layer_ids]
    binding = max(keys, key=lambda k: (per[k]["iops_cumulative"]["p99"], per[k]["iops_cumulative"]["mean"]))
    need = per[binding]["iops_cumulative"]
    return {"iops_needed": dict(need), "bytes_per_s_needed": {k: v * extent for k, v in need.items()},
            "binding_layer": int(binding), "layer_needs": per}


# --- the workload ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngramWorkload:
    """The pure result: per-access rows and hits, per-step read lists and statistics."""

    config: EngramReplayConfig
    spec: EngramSpec
    hasher: EngramHasher
    tokenizer: dict
    stream_stats: dict
    n_steps: int
    profile_steps: int
    access_step: np.ndarray      # per access (unique row of a step), the step
    access_layer: np.ndarray     # Engram layer index
    access_row: np.ndarray       # global row
    hit: np.ndarray              # served from DRAM
    measure: np.ndarray          # counted (not profiling)
    rowstream: RowStream = field(repr=False)
    layouts: dict = field(repr=False)          # kind -> PageLayout
    reads: dict = field(repr=False)            # kind -> (group, page) unique sorted arrays for measured misses
    warnings: tuple = ()
    layer_us: float | None = None              # per backbone layer compute time (given or from --compute)
    window_source: str | None = None

    @property
    def n_layers(self) -> int:
        return len(self.spec.layer_ids)

    @property
    def capacity_rows(self) -> int:
        return 0 if not self.config.dram else self.config.dram // self.spec.row_bytes

    def layer_windows_ns(self) -> np.ndarray | None:
        """Prefetch window of each Engram layer (ns from step start), or None when no window was given."""
        c = self.config
        if c.window_us is not None:
            return np.full(self.n_layers, c.window_us * 1e3)
        if self.layer_us is not None:
            return np.array([max(lid, 0) * self.layer_us * 1e3 for lid in self.spec.layer_ids], dtype=np.float64)
        return None

    def summary(self) -> dict:
        """Statistics that need no I/O: hit ratio, read amplification per layout, rows and bytes per step."""
        m = self.measure
        miss = m & ~self.hit
        steps = max(self.n_steps - self.profile_steps, 1)
        rb = self.spec.row_bytes
        amp = {}
        for kind, (group, pages) in self.reads.items():
            lay = self.layouts[kind]
            amp[kind] = {"pages_read": int(group.size), "bytes_read": int(group.size) * lay.extent,
                         "read_amplification": read_amplification(group.size, lay.extent, int(miss.sum()), rb),
                         "reads_per_step": group.size / steps,
                         "bytes_per_step": group.size * lay.extent / steps}
        chosen = amp[self.config.layout]
        return {
            "preset": self.spec.name, "rows_per_token": self.spec.rows_per_token, "row_bytes": rb,
            "bytes_per_token": self.spec.bytes_per_token, "table_rows": self.hasher.total_rows,
            "table_bytes": self.layouts[self.config.layout].total_bytes, "table_scale": self.spec.scale,
            "rows_per_head": list(self.spec.rows_per_head),
            "tokenizer": self.tokenizer, "stream": self.stream_stats,
            "steps": self.n_steps, "profile_steps": self.profile_steps, "measured_steps": self.n_steps - self.profile_steps,
            "rows_per_step": float(m.sum() / steps),
            "dram_bytes": self.config.dram or 0, "dram_rows": self.capacity_rows, "dram_policy": self.config.policy,
            "dram_fraction_of_table": (self.capacity_rows / self.hasher.total_rows),
            "dram_hit_ratio": float(self.hit[m].sum() / max(int(m.sum()), 1)),
            "rows_from_table": int(miss.sum()),
            "layout": self.config.layout, "page_bytes": self.config.page, "read_bytes": self.layouts[self.config.layout].extent,
            "read_amplification": chosen["read_amplification"],
            "reads_per_step": chosen["reads_per_step"], "bytes_per_step": chosen["bytes_per_step"],
            "layouts": amp,
            "window_source": self.window_source, "layer_us": self.layer_us,
            "window_us": None if self.layer_windows_ns() is None else [float(x) / 1e3 for x in self.layer_windows_ns()],
            **self.needed_rates(),
            "warnings": list(self.warnings),
        }

    def reads_per_step(self) -> np.ndarray:
        """Reads of each measured step (chosen layout)."""
        group, _ = self.reads[self.config.layout]
        return np.bincount(group // self.n_layers - self.profile_steps,
                           minlength=self.n_steps - self.profile_steps)

    def reads_per_step_layer(self) -> np.ndarray:
        """Reads of each measured step and Engram layer, [steps, layers] (chosen layout)."""
        group, _ = self.reads[self.config.layout]
        steps = self.n_steps - self.profile_steps
        flat = np.bincount(group - self.profile_steps * self.n_layers, minlength=steps * self.n_layers)
        return flat.reshape(steps, self.n_layers)

    def needed_rates(self) -> dict:
        """What each Engram layer's deadline asks of the device (see :func:`layer_needs`); None without a window."""
        win = self.layer_windows_ns()
        if win is None or win.min() <= 0:
            return {"iops_needed": None, "bytes_per_s_needed": None, "binding_layer": None, "layer_needs": None}
        return layer_needs(self.reads_per_step_layer(), win, self.layouts[self.config.layout].extent,
                           self.spec.layer_ids)

    def curve(self, points: int = 16) -> dict:
        """Row hit ratio vs DRAM capacity (bytes), per policy, on log-spaced capacities up to the rows seen."""
        n = max(self.rowstream.rows.size, 1)
        caps = sorted_unique(np.geomspace(1, n, num=points).astype(np.int64))
        if self.capacity_rows:
            caps = sorted_unique(np.append(caps, min(self.capacity_rows, n)))
        hr = self.rowstream.curve(caps)
        return {"dram_bytes": (caps * self.spec.row_bytes).tolist(), "dram_rows": caps.tolist(),
                **{p: v.tolist() for p, v in hr.items()}}

    def plan_arrays(self, layout_kind: str | None = None, max_steps: int | None = None):
        """(step, layer, offset) of each read of the measured steps, step-major, earliest layer first."""
        kind = layout_kind or self.config.layout
        group, pages = self.reads[kind]
        step, layer = group // self.n_layers, group % self.n_layers
        if max_steps is not None:
            keep = step < self.profile_steps + max_steps
            step, layer, pages = step[keep], layer[keep], pages[keep]
        return step, layer, pages * self.layouts[kind].page


def _step_index(cfg: EngramReplayConfig, S: int, L: int) -> tuple[np.ndarray, int]:
    """Step of each token of a [S, L] token array (S = waves x batch sequences) and the number of steps."""
    waves = S // cfg.batch
    per_step = 1 if cfg.mode == "decode" else (cfg.chunk or L)
    steps_per_wave = -(-L // per_step)
    w = (np.arange(S) // cfg.batch)[:, None]
    t = np.arange(L)[None, :] // per_step
    return (w * steps_per_wave + t).astype(np.int64), waves * steps_per_wave


def load_stream(cfg: EngramReplayConfig, spec: EngramSpec) -> tuple[np.ndarray, dict, int, int, list]:
    """Compressed token ids, tokenizer facts, compressed vocab size and pad id, warnings."""
    notes = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TokenizerFallbackWarning)
        tk = load_tokenizer(cfg.tokenizer or spec.tokenizer)
    notes += [str(w.message) for w in caught]
    lut = tk.canonical_map()
    if cfg.text is not None:
        raw = text_tokens(cfg.text, tk, cfg.tokens)
        source = {"source": "text", "path": str(cfg.text)}
    else:
        s = cfg.zipf if cfg.zipf is not None else DEFAULT_ZIPF
        if cfg.zipf is None:
            notes.append(f"no --text or --zipf: using a Zipf({s}) synthetic token stream (give --text for real text)")
        raw = zipf_tokens(cfg.tokens or DEFAULT_ZIPF_TOKENS, s, tk.vocab_size, cfg.seed)
        source = {"source": "zipf", "exponent": s, "seed": cfg.seed}
    ids = compress(raw, lut)
    vocab = int(lut.max()) + 1
    pad = int(lut[spec.pad_id]) if spec.pad_id < lut.size else 0
    info = {"name": tk.name, "kind": tk.kind, "vocab_size": tk.vocab_size, "compressed_vocab_size": vocab,
            "compression": 1 - vocab / tk.vocab_size, **source, "tokens": int(ids.size)}
    return ids, info, vocab, pad, notes


def build_workload(cfg: EngramReplayConfig, spec: EngramSpec | None = None) -> EngramWorkload:
    """Tokens -> rows -> per-step unique rows -> DRAM cache -> pages, for both layouts (pure, no I/O)."""
    cfg.validate()
    spec = spec or load_engram(cfg.preset)
    ids, tk_info, vocab, pad, notes = load_stream(cfg, spec)
    hasher = EngramHasher.build(spec, vocab, pad)

    seq_len = cfg.seq_len
    if ids.size < cfg.batch * seq_len:
        seq_len = ids.size // cfg.batch
        if seq_len < 2:
            raise UsageError(f"the stream has {ids.size} tokens, too few for --batch {cfg.batch}",
                             "give more text, more --tokens, or a smaller --batch")
        notes.append(f"stream of {ids.size} tokens is shorter than batch x seq_len: seq_len cut to {seq_len}")
    waves = ids.size // (cfg.batch * seq_len)
    seqs = ids[: waves * cfg.batch * seq_len].reshape(waves * cfg.batch, seq_len)
    step_of_tok, n_steps = _step_index(cfg, *seqs.shape)

    rows = hasher.rows(seqs)                                   # [S, T, layers, orders*heads]
    R = rows.shape[-1] * rows.shape[-2]
    total = hasher.total_rows
    keys = sorted_unique((np.repeat(step_of_tok.ravel(), R) * total + rows.reshape(-1)))   # step-major, row order
    del rows
    a_step, a_row = keys // total, keys % total
    lo = np.array([hasher.layer_row_range(i)[0] for i in range(len(spec.layer_ids))])
    a_layer = np.searchsorted(lo, a_row, side="right") - 1
    profile_steps = int(n_steps * cfg.profile_fraction)
    if n_steps - profile_steps < 1:
        raise UsageError(f"only {n_steps} steps: nothing left to measure after profiling",
                         "give more tokens or a smaller --profile-fraction")
    measure = a_step >= profile_steps

    rs = RowStream.build(a_row, measure)
    cap_rows = 0 if not cfg.dram else cfg.dram // spec.row_bytes
    if cfg.dram and cap_rows == 0:
        raise UsageError(f"--dram {cfg.dram} B holds no {spec.row_bytes}-byte row", "give a larger --dram")
    hit = rs.hits(cfg.policy, cap_rows)

    hot = rs.hot_rows()
    layouts = {k: make_layout(k, hasher, cfg.page, hot if k == "hot-first" else None) for k in LAYOUTS}
    miss = measure & ~hit
    L = len(spec.layer_ids)
    group_of_miss = a_step[miss] * L + a_layer[miss]
    reads = {}
    miss_dense = rs.ids[miss]
    for kind, lay in layouts.items():
        pages = lay.pages(rs.rows)[miss_dense]              # page of each distinct row, gathered per access
        u = sorted_unique(group_of_miss * int(lay.layer_page0[-1]) + pages)   # unique (step, layer, page), sorted
        reads[kind] = (u // int(lay.layer_page0[-1]), u % int(lay.layer_page0[-1]))

    layer_us, window_source = cfg.layer_us, None
    if cfg.window_us is not None:
        window_source = "--window-us (every Engram layer)"
    elif cfg.layer_us is not None:
        window_source = "--layer-us x blocks before each Engram layer"
    elif cfg.compute is not None:
        layer_us, window_source = compute_layer_us(cfg, spec, seq_len)
    stats = {"zipf_fit": [zipf_fit(ids, n).to_dict() for n in (1, *spec.orders)],
             "batch": cfg.batch, "seq_len": seq_len, "mode": cfg.mode, "tokens_used": int(seqs.size)}
    return EngramWorkload(cfg, spec, hasher, tk_info, stats, n_steps, profile_steps, a_step, a_layer, a_row,
                          hit, measure, rs, layouts, reads, tuple(notes), layer_us, window_source)


def compute_layer_us(cfg: EngramReplayConfig, spec: EngramSpec, seq_len: int) -> tuple[float, str]:
    """Per-layer compute time of the Engram preset's backbone for one step, from a compute profile.

    A profile of the backbone's own model (``backbone_model``): ``T(step tokens) / backbone_layers``. Another
    model's profile only with a stated rule (``--compute-scaling``): ``active-params`` scales the profile's step
    time by the ratio of parameters active per token, backbone over profile model (for the step's mode), then
    divides by the backbone's layers. A prefill fit applied to a decode step's B tokens is a lower bound on that
    step's time (decode is weight-bandwidth bound), so the window it gives is a conservative (tight) one."""
    from kvbench.compute.profile import load_profile
    from kvbench.spec.models import load_model
    prof = load_profile(cfg.compute)
    per_seq = 1 if cfg.mode == "decode" else (cfg.chunk or seq_len)
    step_tokens = cfg.batch * per_seq
    step_s = float(prof.seconds(step_tokens))
    layers = spec.backbone_layers
    own = bool(spec.backbone_model) and _same_model(prof.model, spec.backbone_model)
    if own:
        model_layers = load_model(spec.backbone_model).layers
        if model_layers != layers:
            raise UsageError(f"engram preset {spec.name}: backbone_layers {layers} but its backbone_model "
                             f"{spec.backbone_model} has {model_layers} layers", "fix the preset")
        rule = f"compute profile {prof.name} [{prof.kind}] of {prof.model}, the backbone"
    elif cfg.compute_scaling is None:
        backbone = f" ({spec.backbone_model})" if spec.backbone_model else " (kvbench has no preset of it)"
        raise UsageError(f"compute profile {prof.name} is for {prof.model or 'an unnamed model'}, not engram preset "
                         f"{spec.name}'s backbone{backbone}",
                         "give --compute-scaling active-params to scale it by active parameters (stated in the "
                         "results), a profile of the backbone, or --layer-us/--window-us")
    else:
        mine = spec.active_params_b(cfg.mode)
        theirs = load_model(prof.model).active_params_b if prof.model else 0.0
        if not (mine > 0 and theirs > 0):
            raise UsageError(f"--compute-scaling active-params needs active parameters of engram preset {spec.name}'s "
                             f"backbone ({mine or 'unknown'}) and of model {prof.model or '?'} ({theirs or 'unknown'})",
                             "add backbone_active_params_b / active_params_b to the presets, or give --layer-us")
        step_s *= mine / theirs
        rule = (f"compute profile {prof.name} [{prof.kind}] of {prof.model} ({theirs:g}B active), scaled by active "
                f"parameters to the backbone's {mine:g}B ({cfg.mode}): x{mine / theirs:.4g}")
    us = step_s * 1e6 / layers
    if not us > 0:
        raise UsageError(f"compute profile {prof.name} gives {us} us per layer for {step_tokens} tokens",
                         "give --layer-us or --window-us instead")
    return us, f"{rule}; T({step_tokens} tokens) / {layers} backbone layers x blocks before each Engram layer"


def _same_model(a: str, b: str) -> bool:
    """Two model names (preset names or paths) naming the same preset."""
    return Path(a).stem == Path(b).stem


# --- deadline accounting --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepTiming:
    """Per measured step: fetch time of each Engram layer (ns from the step's first submit) and window misses."""

    steps: np.ndarray            # step ids (every measured step, with or without reads)
    fetch_ns: np.ndarray         # [steps, layers] completion of the layer's last read - step start; 0 if none
    step_fetch_ns: np.ndarray    # [steps] max over layers
    missed: np.ndarray | None    # [steps] any layer past its window (None without a window)
    layer_missed: np.ndarray | None
    stall_ns: np.ndarray | None = None   # [steps] compute time lost waiting for rows (windows are layer starts)

    @property
    def window_miss_ratio(self) -> float | None:
        return None if self.missed is None else float(self.missed.mean()) if self.missed.size else 0.0


def stall_ns(fetch_ns: np.ndarray, windows_ns: np.ndarray) -> np.ndarray:
    """Compute stalled per step: Engram layer ``i`` would start at ``windows_ns[i]`` plus the stalls before it;
    when its rows arrive later, the step waits for them (layers in order, vectorised over steps)."""
    stall = np.zeros(fetch_ns.shape[0], dtype=np.float64)
    for i in np.argsort(windows_ns, kind="stable"):
        stall += np.maximum(fetch_ns[:, i] - (windows_ns[i] + stall), 0.0)
    return stall


def step_timing(steps: np.ndarray, io_step: np.ndarray, io_layer: np.ndarray, submit_ns: np.ndarray,
                complete_ns: np.ndarray, n_layers: int, windows_ns: np.ndarray | None) -> StepTiming:
    """Deadline accounting (pure): a step starts when its first read is submitted; layer ``i`` is on time when
    its last read completes within ``windows_ns[i]`` of that start. Steps without reads take 0 and never miss."""
    steps = np.asarray(steps, dtype=np.int64)
    pos = np.searchsorted(steps, io_step)
    start = np.full(steps.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(start, pos, submit_ns.astype(np.int64))
    done = np.zeros((steps.size, n_layers), dtype=np.int64)
    rel = complete_ns.astype(np.int64) - start[pos]
    np.maximum.at(done, (pos, io_layer), rel)
    step_fetch = done.max(axis=1) if n_layers else np.zeros(steps.size, dtype=np.int64)
    if windows_ns is None:
        return StepTiming(steps, done, step_fetch, None, None)
    windows_ns = np.asarray(windows_ns, dtype=np.float64)
    late = done > windows_ns[None, :]
    return StepTiming(steps, done, step_fetch, late.any(axis=1), late, stall_ns(done, windows_ns))


# --- the table on a target ------------------------------------------------------------------------------------
def table_tag(spec: EngramSpec, layout_bytes: int, page: int) -> int:
    """A 64-bit content tag naming the table (preset, scale, size): a stale table file fails verification."""
    key = json.dumps([spec.name, spec.rows_per_head, spec.row_bytes, spec.seed, layout_bytes, page])
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little") or 1


def fit_scale(spec: EngramSpec, vocab: int, pad: int, page: int, capacity: int) -> EngramSpec:
    """The largest scaled spec (fewer rows per head) whose table file fits ``capacity`` bytes."""
    def size(s: EngramSpec) -> int:
        return make_layout("hash", EngramHasher.build(s, vocab, pad), page).total_bytes
    full = size(spec)
    if full <= capacity:
        return spec
    factor = capacity / full
    for _ in range(64):
        s = spec.scaled(factor)
        if size(s) <= capacity:
            return s
        factor *= 0.995
    raise TargetError(f"cannot scale {spec.name} to fit {capacity} bytes", "give a larger --scale-to")


def target_capacity(target: str) -> tuple[str, int | None]:
    """(kind, usable bytes) of a target before opening it: ``dram`` arena size, block device size, or the free
    space for a file (plus its current size). None when unknown."""
    from kvbench.engine.targets import DRAM_PREFIX, is_dram_spec
    from kvbench.units import parse_size

    if is_dram_spec(target):
        size = parse_size(target[len(DRAM_PREFIX):], what="dram target size")
        if size <= 0:
            raise UsageError(f"target {target!r} has zero capacity", "give e.g. --target dram:2GiB")
        return "dram", size
    p = Path(target)
    if p.exists() and stat.S_ISBLK(os.stat(p).st_mode):
        with open(p, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
        if size <= 0:
            raise UsageError(f"block device {target} has zero capacity", "attach a backing file (losetup)")
        return "block", size
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"target folder {parent} does not exist", "create it or give another --target")
    have = p.stat().st_size if p.is_file() else 0
    return "file", shutil.disk_usage(parent).free + have


def _size_arg(n: int) -> str:
    """A size to paste into --scale-to, rounded down: whole MiB from 1 MiB up, else whole KiB (at least 1)."""
    return f"{n >> 20}MiB" if n >= 1 << 20 else f"{max(1, n >> 10)}KiB"


def check_fits(table_bytes: int, target: str, scaled_note: str = "") -> tuple[str, int | None]:
    """One-line error before any I/O when the table does not fit the target."""
    kind, cap = target_capacity(target)
    if cap is not None and table_bytes > cap:
        from kvbench.units import format_bytes
        what = {"dram": "the DRAM arena", "block": "the block device", "file": "the free space for"}[kind]
        raise TargetError(f"Engram table of {format_bytes(table_bytes)}{scaled_note} is larger than {what} "
                          f"{target} ({format_bytes(cap)})",
                          f"use --scale-to {_size_arg(int(cap * 0.9))} for a scaled table (fewer rows per head), "
                          "or a larger target")
    return kind, cap


# --- timed fetch through the engine ---------------------------------------------------------------------------
WRITE_CHUNK = 1 << 20


def table_write_plan(table_bytes: int, tag: int):
    """Sequential 1 MiB writes covering the table, each stamped with ``tag`` (content = tag ^ block number)."""
    from kvbench.engine import OP_WRITE, make_plan
    off = np.arange(0, table_bytes, WRITE_CHUNK, dtype=np.uint64)
    length = np.minimum(WRITE_CHUNK, table_bytes - off.astype(np.int64)).astype(np.uint32)
    return make_plan(OP_WRITE, off, length, tag=tag)


def table_is_current(target, table_bytes: int, tag: int, engine: str, extent: int, samples: int = 64) -> bool:
    """Read ``samples`` pages spread over the table with full verification: True when all hold this table."""
    from kvbench.engine import OP_READ, make_plan, run_plan
    if target.size < table_bytes:
        return False
    n_pages = table_bytes // extent
    pages = sorted_unique(np.linspace(0, n_pages - 1, num=min(samples, n_pages)).astype(np.int64))
    res = run_plan(make_plan(OP_READ, pages.astype(np.uint64) * extent, extent, tag=tag), [target],
                   engine=engine, qd=8, verify="all", handle_signals=False)
    return res.status == "complete" and not res.verify.get("mismatches") and bool(res.ok.all())


def read_plan(w: EngramWorkload, tag: int, max_steps: int | None = None):
    """The measured reads: one extent per (step, layer, page), the first read of each step fenced behind the
    previous step (so each step's fetch is timed alone, at the full queue depth)."""
    from kvbench.engine import FLAG_FENCE, OP_READ, make_plan
    step, layer, offset = w.plan_arrays(max_steps=max_steps)
    first = np.ones(step.size, dtype=bool)
    first[1:] = step[1:] != step[:-1]
    flags = np.where(first, FLAG_FENCE, 0).astype(np.uint8)
    if flags.size:
        flags[0] = 0
    plan = make_plan(OP_READ, offset.astype(np.uint64), w.layouts[w.config.layout].extent, tag=tag,
                     group=step, flags=flags)
    return plan, step, layer


def fetch_summary(w: EngramWorkload, res, step: np.ndarray, layer: np.ndarray, max_steps: int | None) -> tuple:
    """Per-step timing, histograms and the run's measured numbers from the engine's per-I/O arrays."""
    from kvbench.metrics.histogram import LatencyHistogram
    last = w.n_steps if max_steps is None else min(w.n_steps, w.profile_steps + max_steps)
    steps = np.arange(w.profile_steps, last, dtype=np.int64)
    done = res.complete_ns >= 0
    timing = step_timing(steps, step[done], layer[done], res.submit_ns[done], res.complete_ns[done],
                         w.n_layers, w.layer_windows_ns())
    ran = np.ones(steps.size, dtype=bool)            # steps past an interruption are not counted
    if res.status != "complete":
        issued = res.submit_ns >= 0
        ran[(np.searchsorted(steps, step[issued].max()) + 1) if issued.any() else 0:] = False
    fetch_h = LatencyHistogram()
    fetch_h.record(timing.step_fetch_ns[ran])
    hists = {"step_fetch": fetch_h, "read": res.latency("read")}
    for i in range(w.n_layers):
        h = LatencyHistogram()
        h.record(timing.fetch_ns[ran, i])
        hists[f"layer{w.spec.layer_ids[i]}_fetch"] = h
    wall = res.wall_s
    ios = res.ios_by_op()["read"]
    pct = fetch_h.percentiles()
    windows = w.layer_windows_ns()
    missed = None if timing.missed is None else float(timing.missed[ran].mean()) if ran.any() else 0.0
    out = {
        "fetch_us": {"p50": pct["p50"], "p90": pct["p90"], "p99": pct["p99"], "p99.9": pct["p99.9"],
                     "max": pct["max"], "mean": pct["mean"]},
        "window_us": None if windows is None else [float(x) / 1e3 for x in windows],
        "window_miss_ratio": missed,
        **stall_summary(w, timing, ran),
        "layer_window_miss_ratio": None if timing.layer_missed is None or not ran.any() else
        {str(lid): float(timing.layer_missed[ran, i].mean()) for i, lid in enumerate(w.spec.layer_ids)},
        "iops": ios / wall if wall > 0 else None,
        "bytes_per_s": res.bytes_by_op()["read"] / wall if wall > 0 else None,
        "read_lat_us": res.latency("read").percentiles(),
        "timed_steps": int(ran.sum()), "reads": ios, "runtime_s": wall,
        "engine": res.summary(),
    }
    ts = {"step": steps[ran], "reads": np.bincount(np.searchsorted(steps, step), minlength=steps.size)[ran],
          "fetch_us": timing.step_fetch_ns[ran] / 1e3}
    for i in range(w.n_layers):
        ts[f"layer{w.spec.layer_ids[i]}_fetch_us"] = timing.fetch_ns[ran, i] / 1e3
    if timing.missed is not None:
        ts["missed_window"] = timing.missed[ran].astype(int)
    return out, hists, ts


def stall_summary(w: EngramWorkload, timing: StepTiming, ran: np.ndarray) -> dict:
    """Stall per step and, when the per-layer compute time is known, the decode-throughput cost in the spirit of
    the paper's anchor (a host-DRAM table cost 1.9-2.8%): mean stall / (step compute + mean stall)."""
    if timing.stall_ns is None or not ran.any():
        return {"stall_us": None, "throughput_cost": None}
    st = timing.stall_ns[ran]
    out = {"stall_us": {"p50": float(np.percentile(st, 50) / 1e3), "p99": float(np.percentile(st, 99) / 1e3),
                        "mean": float(st.mean() / 1e3)}, "throughput_cost": None, "step_compute_us": None}
    if w.layer_us is not None:
        step_us = w.layer_us * w.spec.backbone_layers
        out["step_compute_us"] = step_us
        out["throughput_cost"] = float(out["stall_us"]["mean"] / (step_us + out["stall_us"]["mean"]))
    return out


def _counting(progress, phase: str, total: int):
    """An engine ``on_second`` feeding ``progress(phase, I/Os done, I/Os in all, row)`` (None: no progress)."""
    if progress is None:
        return None
    seen = [0.0]
    progress(phase, 0, total, None)

    def row(r: dict) -> None:
        seen[0] += float(r.get("iops") or 0.0) * float(r.get("interval_s") or 1.0)
        progress(phase, seen[0], total, r)
    return row


def run_fetch(w: EngramWorkload, target, *, engine: str = "libaio", qd: int = 32, verify: str = "sampled",
              on_write=None, progress=None) -> tuple:
    """Write the table when the target does not already hold it, then time the measured steps' reads.
    Returns (fetch summary, histograms, per-step time series, engine result, table facts). ``progress(phase,
    done, total, row)`` follows each phase's I/Os second by second."""
    from kvbench.engine import run_plan
    from kvbench.engine.engines import engine_for
    lay = w.layouts[w.config.layout]
    table_bytes = lay.total_bytes
    tag = table_tag(w.spec, table_bytes, lay.page)
    dev_engine = engine_for(engine, [target])        # a DRAM arena runs on the memory engine
    facts = {"tag": f"{tag:#018x}", "bytes": table_bytes, "written": False, "write_s": 0.0}
    if target.kind == "dram" or target.created or not table_is_current(target, table_bytes, tag, dev_engine, lay.extent):
        if not target.writable:
            raise TargetError(f"{target.path} does not hold this Engram table and is read-only to kvbench",
                              "give a new file path (kvbench creates it) or a device with --destroy-data")
        if on_write:
            on_write(table_bytes)
        t0 = time.perf_counter()
        wplan = table_write_plan(table_bytes, tag)
        wres = run_plan(wplan, [target], engine=dev_engine, qd=8,
                        on_second=_counting(progress, "writing the table", len(wplan)))
        wres.raise_for_status()
        facts.update(written=True, write_s=time.perf_counter() - t0,
                     write_bytes_per_s=table_bytes / max(time.perf_counter() - t0, 1e-9))
    plan, step, layer = read_plan(w, tag, w.config.steps)
    res = run_plan(plan, [target], engine=dev_engine, qd=qd, verify=verify,
                   on_second=_counting(progress, "fetching rows", len(plan)))
    out, hists, ts = fetch_summary(w, res, step, layer, w.config.steps)
    return out, hists, ts, res, facts
