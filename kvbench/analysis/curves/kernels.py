"""Compiled sequential kernels for LRU stack distances and SHARDS (numba; imported lazily by ``profile``,
``stack`` and ``residence``).

Why compiled: Mattson stack distances are inherently sequential (each reference's distance depends on every
earlier one); numpy cannot vectorise them and a Python loop runs at ~1M refs/s. ``lru_feed`` (the exact
curve) keeps a mark at every key's latest access slot and counts the marks after a key's previous slot with a
bitmap and block counts; ``shards_fs_feed`` (fixed-size SHARDS) uses the classic Fenwick tree over slots
because it must also drop keys from the sample. Slots are compacted (live marks renumbered in order) when they run out, so memory
stays proportional to the distinct keys instead of growing with the trace. The hot subscripts go through
:func:`kvbench.kernels.u` (an unsigned index: no negative-index wraparound code).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from kvbench.kernels import u

_GOLD = np.uint64(0x9E3779B97F4A7C15)       # Fibonacci hashing multiplier of the key tables


@njit(cache=True, nogil=True, inline="always")
def _probe(tab, k, shift, mask):
    """Open addressing (Fibonacci hash, linear probing) over ``tab`` = (key, value) pairs, value 0 = empty:
    the index of key ``k``'s pair, or of the empty pair where it would go, and that pair's value."""
    h = np.int64((k * _GOLD) >> np.uint64(shift))
    while True:
        v = tab[u(2 * h + 1)]
        if v == 0 or tab[u(2 * h)] == k:
            return h, v
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def _rebuild(tree, owner, last, width):
    """Compact live slots to 0..live-1 (order kept) and rebuild the Fenwick tree; returns live count."""
    j = 0
    for s in range(width):
        o = owner[u(s)]
        if o >= 0:
            owner[u(j)] = o
            last[o] = j
            j += 1
    for s in range(j, width):
        owner[u(s)] = -1
    for s in range(width + 1):
        tree[s] = 0
    for s in range(1, width + 1):
        if s <= j:
            tree[s] += 1
        parent = s + (s & -s)
        if parent <= width:
            tree[parent] += tree[s]
    return j


@njit(cache=True, nogil=True)
def _heap_push(heap, size, item, hashes):
    heap[size] = item
    hv_item = hashes[item]
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if hashes[heap[parent]] >= hv_item:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = item
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap, size, hashes):
    top = heap[0]
    size -= 1
    item = heap[size]
    hv_item = hashes[item]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and hashes[heap[c + 1]] > hashes[heap[c]]:
            c += 1
        if hashes[heap[c]] <= hv_item:
            break
        heap[i] = heap[c]
        i = c
    if size > 0:
        heap[i] = item
    return top, size


@njit(cache=True, nogil=True)
def shards_fs_feed(keys, fracs, times, want_gaps, s_max, shift, tab, ekey, efrac, eslot, etime, ein, tree, owner,
                   heap, st, thr_box, dist, rate, gaps, taken, i_start):
    """Fixed-size SHARDS (Waldspurger et al., FAST'15), fed in touch order batch by batch (state persists).

    ``keys``/``fracs``/``times``: references of one batch in touch order whose hash may be below the threshold,
    with the key's hash as a fraction in [0, 1). At most ``s_max`` keys are tracked: when one more arrives, the
    key with the largest hash is dropped and the threshold (the sampling rate, ``thr_box[0]``) lowered to its
    hash; a dropped key's hash is then at or above the threshold for good, so it never comes back. Keys map to
    entries through an open-addressing table (``tab``: key, entry + 1); per entry its key, hash, latest slot,
    time and whether it is in the sample. Slots of the Fenwick tree are compacted when they run out. Writes, per
    reference from ``i_start``, the rate in force, the sampled stack distance (0 = cold), the idle gap and
    whether it was sampled. ``st`` = [entries, next slot, live keys, heap size]. Returns ``(i, code)``: 0 done,
    1 the entry arrays, the table, the heap or the slots are full (make room, then call again from ``i``).
    """
    n = keys.shape[0]
    mask = tab.shape[0] // 2 - 1
    width = owner.shape[0]
    n_ent, slot, live, hsize = st[0], st[1], st[2], st[3]
    thr = thr_box[0]
    for i in range(i_start, n):
        if fracs[i] >= thr:
            continue
        k = keys[u(i)]
        h, v = _probe(tab, k, shift, mask)
        e = np.int64(v) - 1
        hit = v != 0 and ein[e]
        full = v == 0 and (n_ent >= ekey.shape[0] or 2 * (n_ent + 1) > mask + 1)
        if full or (not hit and hsize + 1 >= heap.shape[0]) or (slot == width and 2 * live + 2 > width):
            st[0], st[1], st[2], st[3] = n_ent, slot, live, hsize
            thr_box[0] = thr
            return i, 1
        if slot == width:
            slot = _rebuild(tree, owner, eslot, width)
        taken[i] = True
        if hit:
            p = eslot[e]
            s = p + 1
            c = 0
            while s > 0:
                c += tree[s]
                s -= s & -s
            dist[i] = live - c + 1
            s = p + 1
            while s <= width:
                tree[s] -= 1
                s += s & -s
            owner[u(p)] = -1
            if want_gaps:
                gaps[i] = times[u(i)] - etime[e]
        else:
            if v == 0:
                e = n_ent
                n_ent += 1
                tab[u(2 * h)] = k
                tab[u(2 * h + 1)] = np.uint64(e + 1)
                ekey[e] = k
                efrac[e] = fracs[i]
            ein[e] = True
            dist[i] = 0
            live += 1
            hsize = _heap_push(heap, hsize, e, efrac)
            if want_gaps:
                gaps[i] = np.inf
        rate[i] = thr
        s = slot + 1
        while s <= width:
            tree[s] += 1
            s += s & -s
        owner[u(slot)] = e
        eslot[e] = slot
        if want_gaps:
            etime[e] = times[u(i)]
        slot += 1
        while hsize > s_max:
            victim, hsize = _heap_pop(heap, hsize, efrac)
            thr = efrac[victim]
            ein[victim] = False
            pv = eslot[victim]
            s = pv + 1
            while s <= width:
                tree[s] -= 1
                s += s & -s
            owner[u(pv)] = -1
            eslot[victim] = -1
            live -= 1
    st[0], st[1], st[2], st[3] = n_ent, slot, live, hsize
    thr_box[0] = thr
    return n, 0


@njit(cache=True, nogil=True)
def shards_fs_compact(n_ent, ekey, efrac, eslot, etime, ein, owner, heap, hsize, ntab, shift, nkey, nfrac, nslot,
                      ntime, nin):
    """Keep only the entries of keys in the sample (dropped keys never come back), renumbered in order into
    the new arrays and the new table; slot owners and heap items follow. Returns the number kept."""
    remap = np.full(n_ent, -1, np.int64)
    mask = ntab.shape[0] // 2 - 1
    with_time = etime.shape[0] > 0
    j = 0
    for e in range(n_ent):
        if ein[e]:
            remap[e] = j
            k = ekey[e]
            nkey[j] = k
            nfrac[j] = efrac[e]
            nslot[j] = eslot[e]
            if with_time:
                ntime[j] = etime[e]
            nin[j] = True
            h = np.int64((k * _GOLD) >> np.uint64(shift))
            while ntab[2 * h + 1] != 0:
                h = (h + 1) & mask
            ntab[2 * h] = k
            ntab[2 * h + 1] = np.uint64(j + 1)
            j += 1
    for s in range(owner.shape[0]):
        if owner[u(s)] >= 0:
            owner[u(s)] = remap[owner[u(s)]]
    for x in range(hsize):
        heap[x] = remap[heap[x]]
    return j


# --- streaming exact LRU: hash table + three-level mark counts -----------------------------------------
# The kernel above needs dense key ids (a factorize pass) and a Fenwick tree (three ~log2(W)-step walks per
# reference). This one maps keys with its own open-addressing table (keys stay in it forever: one entry per
# distinct key, whose value is the slot of its latest access) and counts live marks with a bitmap plus
# counts per 4096 and per 262144 slots: "marks after slot p" is a popcount, <= 63 word popcounts, <= 63 block
# counts and a few group counts, and recent keys (short distances, the common case) touch only hot words.
# Marking and unmarking are O(1). State persists across calls, so a trace is fed batch by batch.


@intrinsic
def _popcnt_u64(typingctx, x):
    """LLVM ctpop: one POPCNT instruction on x86-64 (numba has no popcount of its own)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _popcnt(x):
    return np.int64(_popcnt_u64(x))


@njit(cache=True, nogil=True)
def _marks_after(bits, c2, c3, p, t):
    """Number of marks in slots (p, t); every mark is below t.

    Within p's 4096-slot block and p's 262144-slot group, sums the shorter side (before or after p) and
    subtracts from the block/group total when that side is the one before p.
    """
    w = p >> 6
    blk = w >> 6
    tw = (t - 1) >> 6
    tb = tw >> 6
    b = np.uint64(p & 63)
    wend = min((blk + 1) << 6, tw + 1)
    if wend - (w + 1) <= w - (blk << 6):
        # marks after p in its word, then in the following words of its block
        cnt = _popcnt((bits[u(w)] >> b) >> np.uint64(1))
        for x in range(w + 1, wend):
            cnt += _popcnt(bits[u(x)])
    else:
        # block total minus the marks at or before p in the block
        cnt = c2[u(blk)] - _popcnt(bits[u(w)] & ((np.uint64(2) << b) - np.uint64(1)))
        for x in range(blk << 6, w):
            cnt -= _popcnt(bits[u(x)])
    if tb > blk:
        grp = blk >> 6
        tg = tb >> 6
        bend = min((grp + 1) << 6, tb + 1)
        if bend - (blk + 1) <= blk - (grp << 6) + 1:
            for y in range(blk + 1, bend):
                cnt += c2[u(y)]
        else:
            cnt += c3[u(grp)]
            for y in range(grp << 6, blk + 1):
                cnt -= c2[u(y)]
        for z in range(grp + 1, tg + 1):
            cnt += c3[u(z)]
    return cnt


@njit(cache=True, nogil=True)
def _marks_in(bits, lo, hi):
    """Number of marks in slots [lo, hi) (lo <= hi), one popcount per word."""
    if lo >= hi:
        return 0
    wl = lo >> 6
    wh = (hi - 1) >> 6
    first = bits[u(wl)] >> np.uint64(lo & 63)
    if wl == wh:
        n = hi - lo
        if n < 64:
            first &= (np.uint64(1) << np.uint64(n)) - np.uint64(1)
        return _popcnt(first)
    cnt = _popcnt(first)
    for x in range(wl + 1, wh):
        cnt += _popcnt(bits[u(x)])
    top = np.uint64((hi - 1) & 63)
    cnt += _popcnt(bits[u(wh)] & ((np.uint64(2) << top) - np.uint64(1)))
    return cnt


ANCHOR_SPAN = 4096      # slots: counting from the last reference's answer costs at most 64 word popcounts


@njit(cache=True, nogil=True)
def _mark(bits, c2, c3, s):
    bits[u(s >> 6)] |= np.uint64(1) << np.uint64(s & 63)
    c2[u(s >> 12)] += 1
    c3[u(s >> 18)] += 1


@njit(cache=True, nogil=True)
def _unmark(bits, c2, c3, s):
    bits[u(s >> 6)] &= ~(np.uint64(1) << np.uint64(s & 63))
    c2[u(s >> 12)] -= 1
    c3[u(s >> 18)] -= 1


@njit(cache=True, nogil=True)
def lru_compact_into(owner, tab, width, new_owner, new_bits, new_c2, new_c3):
    """Renumber live slots 0..live-1 (order kept) into fresh arrays; returns the next free slot.

    A slot is live when the table entry it names still points back at it (stale owners are never cleared).
    """
    j = 0
    for s in range(width):
        e = owner[u(s)]
        if e >= 0 and tab[u(2 * e + 1)] == np.uint64(s + 1):
            new_owner[j] = e
            tab[u(2 * e + 1)] = np.uint64(j + 1)
            j += 1
    for s in range(j, new_owner.shape[0]):
        new_owner[s] = -1
    new_bits[:] = 0
    new_c2[:] = 0
    new_c3[:] = 0
    for s in range(j):
        _mark(new_bits, new_c2, new_c3, s)
    return j


@njit(cache=True, nogil=True)
def lru_rehash(tab, ttime, ntab, ntime, owner, shift, with_time):
    """Move every table entry into a larger table (``shift`` = 64 - log2(new size)); fix slot owners."""
    mask = ntab.shape[0] // 2 - 1
    for j in range(tab.shape[0] // 2):
        s1 = tab[u(2 * j + 1)]
        if s1 != 0:
            k = tab[u(2 * j)]
            h = np.int64((k * _GOLD) >> np.uint64(shift))
            while ntab[2 * h + 1] != 0:
                h = (h + 1) & mask
            ntab[2 * h] = k
            ntab[2 * h + 1] = s1
            if with_time:
                ntime[h] = ttime[u(j)]
            owner[u(np.int64(s1) - 1)] = h


@njit(cache=True, nogil=True)
def lru_feed(keys, offsets, times, r_start, ref_base, count_from, ttl, shift,
             tab, ttime, owner, bits, c2, c3, hist, state):
    """Feed requests ``r_start..`` of a batch (blocks touched deepest-first) into the LRU stack.

    ``tab`` interleaves (key, slot + 1) per entry, 0 = empty, so a probe is one cache line. The stack distance
    of a hit is 1 + the marks after its key's previous slot p. The kernel keeps an anchor: a slot ``pa`` and
    ``ca``, the marks after it now (each reference adds its new mark after every earlier slot: ``ca`` + 1). A hit
    whose p lies near ``pa`` counts only the marks between the two (for a prefix chain touched again in the
    same order, p = pa + 1: one bit); a far one counts from scratch (``_marks_after``). Its answer becomes the
    next anchor. Compaction renumbers slots, so it drops the anchor, as do references not counted. ``state``
    (int64[5]): entries, next slot, counted references, cold references, ttl-expired references. A reference
    at global touch index >= ``count_from`` adds 1 to ``hist[distance]`` (a hit for every capacity >=
    distance) unless it is cold or idle longer than ``ttl``. Returns ``(r, code)``: code 0 done; 1 grow the
    table, 2 grow the slot space, 3 grow the histogram, then call again from request ``r``.
    """
    cap = tab.shape[0] // 2
    mask = cap - 1
    width = owner.shape[0]
    n_req = offsets.shape[0] - 1
    with_time = ttl != np.inf
    entries = state[0]
    slot = state[1]
    warm = np.uint64(0)
    pa = -1                 # anchor slot (-1: none) and the marks after it, ca
    ca = 0
    for r in range(r_start, n_req):
        a = offsets[u(r)]
        b = offsets[u(r + 1)]
        nb = b - a
        if 2 * (entries + nb) > cap:
            state[0] = entries
            state[1] = slot
            return r, 1
        if hist.shape[0] < entries + nb + 2:
            state[0] = entries
            state[1] = slot
            return r, 3
        if slot + nb > width:
            if 2 * (entries + nb) > width:
                state[0] = entries
                state[1] = slot
                return r, 2
            slot = lru_compact_into(owner, tab, width, owner, bits, c2, c3)
            pa = -1
        now = times[u(r)]
        for i in range(b - 1, a - 1, -1):
            k = keys[u(i)]
            # touch the table line of a reference 8 ahead (in file order) so its cache miss overlaps this work
            j = i - 8 if i - 8 >= 0 else i
            warm ^= tab[u(2 * np.int64((keys[u(j)] * _GOLD) >> np.uint64(shift)) + 1)]
            h, s1 = _probe(tab, k, shift, mask)
            counted = ref_base + a + (b - 1 - i) >= count_from
            if s1 == 0:
                tab[u(2 * h)] = k
                entries += 1
                if counted:
                    state[2] += 1
                    state[3] += 1
                ca += 1                 # the new mark lies after the anchor
            else:
                p = np.int64(s1) - 1
                if counted and (not with_time or now - ttime[u(h)] <= ttl):
                    state[2] += 1
                    if pa < 0 or p - pa > ANCHOR_SPAN or pa - p > ANCHOR_SPAN:
                        c = _marks_after(bits, c2, c3, p, slot)
                    elif p >= pa:
                        c = ca - _marks_in(bits, pa + 1, p + 1)
                    else:
                        c = ca + _marks_in(bits, p + 1, pa + 1)
                    hist[u(c + 1)] += 1
                    pa = p
                    ca = c + 1          # p's own mark goes (it is not after p), the new one comes
                else:
                    if counted:
                        state[2] += 1
                        state[4] += 1
                    pa = -1
                _unmark(bits, c2, c3, p)
            tab[u(2 * h + 1)] = np.uint64(slot + 1)
            if with_time:
                ttime[u(h)] = now
            owner[u(slot)] = h
            _mark(bits, c2, c3, slot)
            slot += 1
    state[0] = entries
    state[1] = slot
    state[5] ^= np.int64(warm & np.uint64(1))      # keep the warming loads alive
    return n_req, 0


STACK_COLD = np.iinfo(np.int64).max         # stack_distances of a key's first reference


@njit(cache=True, nogil=True)
def stack_distances(ids, n_ids):
    """LRU stack distance of every reference of dense ids ``0..n_ids-1``: the distinct ids touched since the id's
    previous reference (0 = a re-touch of the most recent one; the reference hits an LRU cache of k entries iff
    its distance < k), ``STACK_COLD`` at its first. A Fenwick tree over time: position p holds 1 while p is the
    latest reference of its id. The one per-reference engine (the exact curve's ``lru_feed`` keeps only the
    histogram, streaming): :mod:`kvbench.analysis.curves.residence` and :mod:`kvbench.sim.rowcache` use it."""
    n = ids.shape[0]
    tree = np.zeros(n + 1, dtype=np.int64)
    last = np.full(n_ids, -1, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    for t in range(n):
        k = ids[t]
        p = last[k]
        last[k] = t
        if p < 0:
            out[t] = STACK_COLD
        else:
            s = 0                       # latest-reference marks in (p, t) = prefix(0..t-1) - prefix(0..p)
            i = t
            while i > 0:
                s += tree[i]
                i -= i & (-i)
            i = p + 1
            while i > 0:
                s -= tree[i]
                i -= i & (-i)
            out[t] = s
            i = p + 1                   # p is no longer the latest reference of its id
            while i <= n:
                tree[i] -= 1
                i += i & (-i)
        i = t + 1
        while i <= n:
            tree[i] += 1
            i += i & (-i)
    return out
