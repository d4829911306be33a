"""The key-sampling filter, compiled (:func:`kvbench.stream.sampling.sampled_indices` calls it).

One pass over the references: the index of every reference whose key's splitmix64 hash (after the salt) is
below the threshold of the sampling rate. The hash is :func:`kvbench.kernels.splitmix64`, the compiled form of
the one :func:`kvbench.stream.sampling.key_mask` applies with numpy, so a miniature replay (``--sample-keys``),
SHARDS (``mrc --sample``) and a key-sampled ``gen:`` stream keep the same keys.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvbench.kernels import splitmix64, u


@njit(cache=True, nogil=True)
def below_threshold(keys, salt, threshold):
    """Indices of the references whose ``splitmix64(key ^ salt)`` is below ``threshold``, in order."""
    n = keys.shape[0]
    out = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if splitmix64(keys[u(i)] ^ salt) < threshold:
            out[m] = i
            m += 1
    return out[:m]
