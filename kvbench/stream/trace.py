"""``Trace``: the requests of a serving trace as numpy arrays (CSR block keys), the one type every stage reads.

A module of its own, importing nothing of kvbench but the errors, so that the readers
(:mod:`kvbench.stream.traces`), the generator (:mod:`kvbench.stream.synth`) and key sampling
(:mod:`kvbench.stream.sampling`) all import it without importing each other (they used to form an import circle
through ``traces``, broken only by function-level imports). ``kvbench.stream.traces.Trace`` is this class.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np

from kvbench.errors import UsageError


@dataclass(frozen=True, eq=False)
class Trace:
    """Requests of a trace as numpy arrays; block r,i is ``keys[offsets[r] + i]``.

    ``timestamp_s`` is seconds from the first request of the trace (the first line, or the earliest when sorted;
    every batch of ``iter_trace`` uses the same origin). ``keys`` are prefix-chained uint64 block keys of
    ``block_tokens`` tokens each. ``extras`` holds optional per-request int64 columns of some formats
    (``chat_id``, ``parent_chat_id``, ``turn`` for Bailian). ``t0`` is the first request's time in the trace's own
    clock, in seconds; ``first_line`` the file line of row 0. ``meta`` says where the requests came from when
    not from a file: a ``gen:`` trace (:mod:`kvbench.stream.synth`) has ``source = "generated"``,
    ``generated_from``, ``span_s``, ``seed``, ``rate`` and ``sample_rate``.
    """

    timestamp_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    offsets: np.ndarray
    keys: np.ndarray
    block_tokens: int
    fmt: str
    path: str
    extras: Mapping[str, np.ndarray] = field(default_factory=dict)
    t0: float = 0.0
    meta: Mapping[str, object] = field(default_factory=dict)

    @property
    def n_requests(self) -> int:
        return int(self.timestamp_s.shape[0])

    def __len__(self) -> int:
        return self.n_requests

    @property
    def n_blocks(self) -> int:
        """Block references (sum of blocks over requests)."""
        return int(self.keys.shape[0])

    @property
    def blocks_per_request(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def duration_s(self) -> float:
        return float(self.timestamp_s.max() - self.timestamp_s.min()) if self.n_requests else 0.0

    def request_of_block(self) -> np.ndarray:
        """Request index of every entry of ``keys``."""
        return np.repeat(np.arange(self.n_requests, dtype=np.int64), self.blocks_per_request)

    def touch_order(self) -> np.ndarray:
        """Permutation of ``keys`` in touch order: requests by arrival, each one's blocks deepest-first.

        ``keys[trace.touch_order()]`` is the reference stream whose LRU stack distances give the exact prefix
        hit-ratio curve (DESIGN.md, "Prefix hits").
        """
        counts = self.blocks_per_request
        # block j of request r (offsets[r] <= j < offsets[r+1]) goes to offsets[r] + offsets[r+1] - 1 - j
        return np.repeat(self.offsets[:-1] + self.offsets[1:] - 1, counts) - np.arange(self.n_blocks, dtype=np.int64)

    def slice(self, start: int, stop: int) -> "Trace":
        """Requests ``start:stop`` as a Trace (keys copied so the slice owns its memory)."""
        start, stop, _ = slice(start, stop).indices(self.n_requests)
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        return replace(self, timestamp_s=self.timestamp_s[start:stop], input_tokens=self.input_tokens[start:stop],
                       output_tokens=self.output_tokens[start:stop], offsets=self.offsets[start:stop + 1] - a,
                       keys=self.keys[a:b].copy(), extras={k: v[start:stop] for k, v in self.extras.items()})

    def take(self, rows: np.ndarray) -> "Trace":
        """Requests at ``rows`` (e.g. an argsort), keys gathered in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        counts = self.blocks_per_request[rows]
        offsets = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        src = np.repeat(self.offsets[rows] - offsets[:-1], counts) + np.arange(int(offsets[-1]), dtype=np.int64)
        return replace(self, timestamp_s=self.timestamp_s[rows], input_tokens=self.input_tokens[rows],
                       output_tokens=self.output_tokens[rows], offsets=offsets, keys=self.keys[src],
                       extras={k: v[rows] for k, v in self.extras.items()})

    @staticmethod
    def concat(parts: list["Trace"]) -> "Trace":
        """Join batches (same format/path/block size) into one Trace."""
        if not parts:
            raise UsageError("no trace batches to join", "read a non-empty trace")
        if len(parts) == 1:
            return parts[0]
        offsets = [parts[0].offsets]
        base = int(parts[0].offsets[-1])
        for p in parts[1:]:
            offsets.append(p.offsets[1:] + base)
            base += int(p.offsets[-1])
        return replace(parts[0],
                       timestamp_s=np.concatenate([p.timestamp_s for p in parts]),
                       input_tokens=np.concatenate([p.input_tokens for p in parts]),
                       output_tokens=np.concatenate([p.output_tokens for p in parts]),
                       offsets=np.concatenate(offsets), keys=np.concatenate([p.keys for p in parts]),
                       extras={k: np.concatenate([p.extras[k] for p in parts]) for k in parts[0].extras})
