"""Conversations recovered from a trace's prefix-chained block keys (traces rarely carry session ids).

A request *continues* an earlier one when its prompt starts with all of that request's full blocks (a
follow-up turn's context holds the previous prompt, the answer and a new message) and the deepest block they
share is not a shared prefix. A request that shares only a shared prefix, or nothing, starts a new session;
the blocks it reuses become *common* (seen by two sessions): system prompts, tool definitions, documents.
The earlier request is the last one that touched the deepest block the new request reuses.

What it gives per request: its session, the request it continues (or -1), and for a session's first request
how many leading blocks it shares with earlier sessions. Traces with explicit conversations (Bailian's
``parent_chat_id``) are read from those ids instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvbench.stream.traces import Trace


@dataclass(frozen=True)
class Sessions:
    """Per-request session structure of a trace (request order)."""

    session: np.ndarray        # session index of each request (0..n_sessions-1, by first request)
    parent: np.ndarray         # the request it continues, -1 for a session's first request
    shared_blocks: np.ndarray  # first requests: leading blocks shared with earlier sessions (else 0)
    prefix_key: np.ndarray     # first requests: key of the deepest shared block (0 when none)
    system_key: np.ndarray     # first requests: key of block 0 when shared (0 when none)

    @property
    def n_sessions(self) -> int:
        return int(self.session.max()) + 1 if self.session.size else 0

    @property
    def first(self) -> np.ndarray:
        return self.parent < 0


def reused_depth(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the leading blocks seen in an earlier request (infinite-cache prefix hit), and dense key codes."""
    import pandas as pd

    codes, _ = pd.factorize(trace.keys, sort=False)
    codes = codes.astype(np.int64)
    req = trace.request_of_block()
    first_req = np.full(int(codes.max()) + 1 if codes.size else 0, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_req, codes, req)
    seen = first_req[codes] < req
    counts = trace.blocks_per_request
    pos = np.arange(trace.n_blocks, dtype=np.int64) - np.repeat(trace.offsets[:-1], counts)
    first_unseen = np.where(seen, np.iinfo(np.int64).max, pos)
    depth = counts.copy()
    nz = counts > 0
    if trace.n_blocks:
        depth[nz] = np.minimum(np.minimum.reduceat(first_unseen, trace.offsets[:-1][nz]), counts[nz])
    return depth, codes


def recover_sessions(trace: Trace) -> Sessions:
    """Sessions of a trace from explicit conversation ids when it has them, else from its block keys."""
    n = trace.n_requests
    depth, codes = reused_depth(trace)
    bt = trace.block_tokens
    full = trace.input_tokens // bt
    offsets = trace.offsets
    last_touch = np.full(int(codes.max()) + 1 if codes.size else 0, -1, dtype=np.int64)
    common = np.zeros(last_touch.size, dtype=bool)
    session = np.empty(n, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    shared = np.zeros(n, dtype=np.int64)
    prefix_key = np.zeros(n, dtype=np.uint64)
    system_key = np.zeros(n, dtype=np.uint64)
    explicit = _explicit_parents(trace)
    n_sessions = 0
    for r in range(n):
        a = int(offsets[r])
        h = int(depth[r])
        p = -1
        if explicit is not None:
            p = int(explicit[r])
        elif h > 0:
            deep = codes[a + h - 1]
            q = int(last_touch[deep])
            if q >= 0 and not common[deep] and h >= max(1, int(full[q])):
                p = q
        if p >= 0:
            parent[r] = p
            session[r] = session[p]
        else:
            session[r] = n_sessions
            n_sessions += 1
            if h > 0:
                common[codes[a:a + h]] = True
                shared[r] = h
                prefix_key[r] = trace.keys[a + h - 1]
                system_key[r] = trace.keys[a]
        last_touch[codes[a:int(offsets[r + 1])]] = r
    return Sessions(session, parent, shared, prefix_key, system_key)


def has_conversation_ids(trace: Trace) -> bool:
    """Whether the trace names its conversations (``chat_id``/``parent_chat_id``, Bailian's): its sessions are
    read from those ids, not recovered from block keys."""
    return "chat_id" in trace.extras and "parent_chat_id" in trace.extras


def _explicit_parents(trace: Trace) -> np.ndarray | None:
    """Request index of each request's parent from ``chat_id``/``parent_chat_id`` extras (-1: none)."""
    ex = trace.extras
    if not has_conversation_ids(trace):
        return None
    chat, par = np.asarray(ex["chat_id"]), np.asarray(ex["parent_chat_id"])
    order = np.argsort(chat, kind="stable")
    pos = np.searchsorted(chat[order], par)
    pos = np.minimum(pos, max(0, chat.size - 1))
    found = (par >= 0) & (chat.size > 0) & (chat[order][pos] == par)
    out = np.where(found, order[pos], -1)
    return np.where(out < np.arange(chat.size), out, -1)      # a parent must come earlier
