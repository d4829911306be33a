"""Summary statistics of a trace: size, tokens, block reuse, reuse times, arrivals, id chaining (pure numpy)."""

from __future__ import annotations

import numpy as np

from kvbench.stream.traces import Trace

REUSE_WINDOWS_S = {"1m": 60.0, "10m": 600.0, "1h": 3600.0, "1d": 86400.0}


def _pct(x: np.ndarray, qs=(50, 90, 99)) -> dict:
    if x.size == 0:
        return {f"p{q}": None for q in qs} | {"mean": None, "max": None}
    v = np.percentile(x, qs)
    return {f"p{q}": float(a) for q, a in zip(qs, v)} | {"mean": float(x.mean()), "max": float(x.max())}


def prefix_chaining(trace: Trace) -> dict:
    """Are the keys prefix-chained? Counts ids seen at more than one (position, predecessor) context."""
    counts = trace.blocks_per_request
    pos = np.arange(trace.n_blocks, dtype=np.int64) - np.repeat(trace.offsets[:-1], counts)
    prev = np.empty_like(trace.keys)
    prev[1:] = trace.keys[:-1]
    first = pos == 0
    prev[first] = np.uint64(2**64 - 1)
    ctx = np.stack([trace.keys, prev, pos.astype(np.uint64)], axis=1)
    uniq = np.unique(ctx, axis=0)
    ids, n_ctx = np.unique(uniq[:, 0], return_counts=True)
    import pandas as pd

    codes, uniq_keys = pd.factorize(trace.keys)
    pair = np.repeat(np.arange(trace.n_requests, dtype=np.int64), counts) * max(1, len(uniq_keys)) + codes
    pair.sort()
    dup = pair[1:][pair[1:] == pair[:-1]]
    repeats = int(np.unique(dup // max(1, len(uniq_keys))).size)
    return {"prefix_chained": bool(np.all(n_ctx == 1)), "ids_in_several_contexts": int(np.count_nonzero(n_ctx > 1)),
            "repeated_ids_within_requests": repeats}


def reuse_times(trace: Trace) -> np.ndarray:
    """Seconds between consecutive accesses of the same block key (one value per reuse)."""
    import pandas as pd

    if trace.n_blocks == 0:
        return np.zeros(0)
    order = trace.touch_order()
    keys = trace.keys[order]
    times = np.repeat(trace.timestamp_s, trace.blocks_per_request)
    codes, _ = pd.factorize(keys)
    idx = np.argsort(codes, kind="stable")
    same = codes[idx][1:] == codes[idx][:-1]
    return (times[idx][1:] - times[idx][:-1])[same]


def trace_stats(trace: Trace) -> dict:
    """Everything ``kvbench trace stats`` prints, as one JSON-ready dict."""
    n = trace.n_requests
    distinct = int(np.unique(trace.keys).size)
    ts = trace.timestamp_s
    gaps = np.diff(ts) if n > 1 else np.zeros(0)
    dur = trace.duration_s
    rt = reuse_times(trace)
    bt = trace.block_tokens
    expect_blocks = -(-trace.input_tokens // bt)
    out = {
        "path": trace.path, "format": trace.fmt, "block_tokens": bt,
        "requests": n, "duration_s": dur,
        "arrival_rate_per_s": (n - 1) / dur if dur > 0 else None,
        "interarrival_s": _pct(gaps) | {"cv": float(gaps.std() / gaps.mean()) if gaps.size and gaps.mean() > 0 else None},
        "input_tokens": _pct(trace.input_tokens.astype(np.float64)) | {"total": int(trace.input_tokens.sum())},
        "output_tokens": _pct(trace.output_tokens.astype(np.float64)) | {"total": int(trace.output_tokens.sum())},
        "blocks_per_request": _pct(trace.blocks_per_request.astype(np.float64)),
        "block_references": trace.n_blocks,
        "distinct_blocks": distinct,
        "infinite_cache_reuse": 1.0 - distinct / trace.n_blocks if trace.n_blocks else 0.0,
        "tokens_per_block_id": _pct(trace.input_tokens[trace.blocks_per_request > 0]
                                    / trace.blocks_per_request[trace.blocks_per_request > 0]),
        "lines_matching_block_size": float(np.mean(expect_blocks == trace.blocks_per_request)) if n else None,
        "reuse_time_s": _pct(rt),
        "reuse_within": {k: float(np.mean(rt <= v)) if rt.size else None for k, v in REUSE_WINDOWS_S.items()},
        "out_of_order_requests": int(np.count_nonzero(gaps < 0)),
    }
    if "parent_chat_id" in trace.extras:           # Bailian: conversations are explicit
        parent, turn = trace.extras["parent_chat_id"], trace.extras.get("turn")
        out["sessions"] = {"roots": int(np.count_nonzero(parent < 0)),
                           "follow_ups": int(np.count_nonzero(parent >= 0)),
                           "turn": _pct(turn.astype(np.float64)) if turn is not None else None}
    return out
