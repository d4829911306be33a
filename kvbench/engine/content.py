"""Content stamping and verification (vectorised over a batch of slots).

Contract: every 8-byte word of the logical block at device offset ``o`` written with tag ``t`` holds
``t ^ (o // lbs)``, so any block's expected content follows from (tag, offset) alone and a read can be
checked without keeping a copy of what was written.
"""

from __future__ import annotations

import numpy as np


def _blocks(words: np.ndarray, slots, length: int, lbs: int) -> np.ndarray:
    """(qd, nblk, words-per-block) view of the first ``length`` bytes of every slot."""
    nblk, wpb = length // lbs, lbs // 8
    return words[:, : length // 8].reshape(words.shape[0], nblk, wpb)


def expected_words(tags: np.ndarray, offsets: np.ndarray, length: int, lbs: int) -> np.ndarray:
    """(k, nblk) expected word value of each block of each I/O."""
    first = (offsets // np.uint64(lbs)).astype(np.uint64)
    return tags.astype(np.uint64)[:, None] ^ (first[:, None] + np.arange(length // lbs, dtype=np.uint64))


def stamp(words, slots, tags, offsets, lengths, lbs: int) -> None:
    """Fill each slot's buffer with its I/O's content pattern."""
    for length in np.unique(lengths):
        sel = lengths == length
        L = int(length)
        _blocks(words, slots, L, lbs)[slots[sel]] = expected_words(tags[sel], offsets[sel], L, lbs)[..., None]


def verify(words, slots, tags, offsets, lengths, lbs: int) -> np.ndarray:
    """Boolean mask (per given slot) of reads whose buffer does not hold the expected pattern."""
    bad = np.zeros(len(slots), dtype=bool)
    for length in np.unique(lengths):
        sel = np.flatnonzero(lengths == length)
        L = int(length)
        got = _blocks(words, slots, L, lbs)[slots[sel]]
        exp = expected_words(tags[sel], offsets[sel], L, lbs)[..., None]
        bad[sel] = (got != exp).any(axis=(1, 2))
    return bad


def expected_buffer(tag: int, offset: int, length: int, lbs: int) -> bytes:
    """The bytes an I/O (tag, offset, length) writes: for tests and external checks."""
    w = expected_words(np.array([tag], dtype=np.uint64), np.array([offset], dtype=np.uint64), length, lbs)
    return np.repeat(w[0], lbs // 8).astype("<u8").tobytes()
