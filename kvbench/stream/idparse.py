"""Compiled parser of JSON id lists (numba; imported only for large trace chunks, where it pays for itself).

A Mooncake-style line is mostly its ``hash_ids`` list: parsing it with a JSON library makes one Python int per
id and a list per line, and flattening those into numpy costs as much again. Here the reader cuts the list's
text out of each line (the rest is still parsed by orjson) and this kernel turns the concatenated texts into one
uint64 array. It accepts only plain JSON non-negative integers (digits, no leading zeros, below 2^64) separated by
commas and whitespace; anything else returns -1 and the reader parses that chunk the ordinary way, which names
the bad line.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_MAX_DIV10 = np.uint64(1844674407370955161)    # (2^64 - 1) // 10; the last digit may then be at most 5


@njit(cache=True, nogil=True)
def parse_id_lists(buf, bounds, out, counts):
    """Parse the lists ``buf[bounds[j]:bounds[j+1]]`` (the text between a list's brackets) into ``out``;
    ``counts[j]`` = ids in list j. Returns the ids written, or -1 at the first text that is not a plain list of
    non-negative integers."""
    m = 0
    for j in range(bounds.shape[0] - 1):
        state = 0           # 0: a number may start (1: after a comma, one must), 2: in a number, 3: after one
        v = np.uint64(0)
        lead0 = False
        c = 0
        for i in range(bounds[j], bounds[j + 1]):
            ch = buf[i]
            if 48 <= ch <= 57:
                if state == 3:
                    return -1
                d = np.uint64(ch - 48)
                if state == 2:
                    if lead0 or v > _MAX_DIV10 or (v == _MAX_DIV10 and d > np.uint64(5)):
                        return -1
                    v = v * np.uint64(10) + d
                else:
                    v = d
                    lead0 = ch == 48
                    state = 2
            elif ch == 44:              # ,
                if state == 2:
                    out[m] = v
                    m += 1
                    c += 1
                elif state != 3:
                    return -1
                state = 1
            elif ch == 32 or ch == 9 or ch == 10 or ch == 13:
                if state == 2:
                    out[m] = v
                    m += 1
                    c += 1
                    state = 3
            else:
                return -1
        if state == 2:
            out[m] = v
            m += 1
            c += 1
        elif state == 1:
            return -1
        counts[j] = c
    return m
