"""The block keys of generated requests, compiled (:meth:`kvbench.stream.synth.Generator._keys` calls it).

A request of ``prompt`` tokens holds ``ceil(prompt / block_tokens)`` blocks; block ``i`` (its last token
``(i + 1) * block_tokens``) is of kind 1 (inside the system prompt), 2 (inside the shared document), 3 (inside
the session's history) or 4 (the request's own new tokens), and its key chains the generator's salt, the kind,
the owner (the system prompt; system and document; the session), the block's position and, for kind 4, the
prompt length (:func:`kvbench.stream.chain.mix`, splitmix64 based). One fused pass: the NumPy form made 6
splitmix64 passes and 7 temporaries per block (1.7 s of the default job's plan step under cProfile); this pass is
31-58x faster on 1.95M keys of 65,536 requests (0.23-0.66 s -> 7-11 ms, measured interleaved on the 2-core VM).
tests/stream/test_generators.py compares it with the array form on every kind boundary.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvbench.kernels import splitmix64

_GOLDEN = np.uint64(0x9E37_79B9_7F4A_7C15)


@njit(cache=True, nogil=True, inline="always")
def _mix(prev, ident):
    """:func:`kvbench.stream.chain.mix`, compiled."""
    return splitmix64(splitmix64(prev) ^ (ident * _GOLDEN))


@njit(cache=True, nogil=True)
def block_keys(prompt, system, system_len, shared_len, doc, session, block_tokens, salt, mask):
    """(keys uint64, offsets int64) of the requests' blocks, in request order."""
    n = prompt.shape[0]
    bt = np.int64(block_tokens)
    offsets = np.zeros(n + 1, np.int64)
    for j in range(n):
        offsets[j + 1] = offsets[j] + (np.int64(prompt[j]) + bt - 1) // bt
    keys = np.empty(offsets[n], np.uint64)
    for j in range(n):
        p = np.int64(prompt[j])
        sl = np.int64(system_len[j])
        dl = np.int64(shared_len[j])
        sysid = np.int64(system[j])
        owners = (np.uint64(sysid), np.uint64(sysid * np.int64(1 << 32) + np.int64(doc[j])),
                  np.uint64(np.int64(session[j])))
        base = offsets[j]
        for i in range(offsets[j + 1] - base):
            end = (i + 1) * bt
            if end <= sl:
                kind, owner = 1, owners[0]
            elif end <= dl:
                kind, owner = 2, owners[1]
            elif end <= p:
                kind, owner = 3, owners[2]
            else:
                kind, owner = 4, owners[2]
            k = _mix(salt ^ np.uint64(kind), owner)
            k = _mix(k, np.uint64(i))
            k = _mix(k, np.uint64(p) if kind == 4 else np.uint64(0))
            keys[base + i] = k & mask
    return keys, offsets
