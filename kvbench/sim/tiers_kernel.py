"""The tier simulation compiled: :class:`kvbench.sim.tiers.Hierarchy`'s per-block loop in numba.

It is a transcription of :class:`kvbench.sim.tiers.ReferenceHierarchy` (the readable Python definition, kept as
the reference the tests compare against on randomized traces) onto flat arrays, so that every policy,
retention, write policy, inclusion, store layout and event order comes out identical:

- per tier, a node pool (key, list links, where, frequency, last access, meta slot/version) with an
  open-addressing hash table key -> node; a node lives while its key is in the policy (or S3-FIFO's ghost)
  or in the tier's meta (the two can differ for a moment, exactly as the reference's dicts can);
- the OrderedDicts of the policies are doubly linked lists (queue 0: LRU/FIFO order or S3-FIFO's main, 1:
  S3-FIFO's small, 2: its ghost); retention of FIFO/S3-FIFO is the same lazy min-heap of (deadline, key);
- the slot store's free deque and the log store's free segments are ring buffers, its sealed segments a
  linked list.

Per-tier integers live in one int64 row ``I[t]`` (field indices below), the rest in flat arrays addressed by a
per-tier base. Events go to an (n, 8) int64 array; before each request the caller has made room for a bound
of that request's events, and node pools are grown between requests, so nothing allocates inside: the kernel
runs without numba's reference counting (``_nrt=False``), which was most of its time per call.

Admission (issue 17): ``_admit`` is called by ``_insert`` for every new key a tier would take (creation,
promotion, demotion) before the policy sees it; it admits everything today. A policy hook adds its state as
per-tier fields/arrays and its decision there; a refused key is then neither inserted nor written.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit

# ---- per-tier integer fields: I[t, F] ---------------------------------------------------------------------
(POL, CAP, SCAP, MCAP, HASTTL, STORE, TRIMF, LEVEL, NB, NN, HB, HM, FTOP,
 QH0, QH1, QH2, QT0, QT1, QT2, QL0, QL1, QL2, NMETA,
 HPB, HPN, HPC, PEB, PEN, PEC,
 SLOTB, NSLOTS, SFB, SFH, SFN,
 SEGS, NSEG, SEGB, LHEAD, LPOS, FSB, FSH, FSN, SLH, SLT, USED, RECLAIMED, DROPPED,
 C_HIT_BLOCKS, C_HIT_READS, C_CREATE, C_PROMOTE, C_DEMOTE_READS, C_DEMOTE_WRITES, C_TRIMS, C_EVICT, C_EXPIRE,
 C_RECLAIM, C_PEAK, DRB, DRN, TRN, TR0F, TR0N, TR1F, TR1N, NNMAX, NFIELDS) = range(67)
POL_LRU, POL_FIFO, POL_S3 = 0, 1, 2
STORE_NONE, STORE_SLOT, STORE_LOG = 0, 1, 2
# global ints G[]
(G_REQ, G_SEQ, G_NEV, G_PHASE, G_ERR, G_PRODUCED, G_NT, G_DEMOTE, G_EXCL, G_PROMOTE, G_TOPL1, G_NCREATE,
 G_MARK, G_NEED, G_EVNEED) = range(15)
G_CREATE0 = 16          # G[G_CREATE0 + j]: the j-th tier a new block is created in
NG = 20
ERR_NODES = 1           # a tier's node pool ran out
ERR_META = 2            # a hit block without meta (the reference raises KeyError there)
ERR_EVENTS = 4          # a request wrote more events than the room its bound reserved
NEED_GROW = 3           # not an error: a node pool or the event buffer is low before a request; the caller
                        # grows it and resumes
# event kinds / ops (as kvbench.sim.tiers)
HIT_READ, CREATE_WRITE, PROMOTE_WRITE, DEMOTE_READ, DEMOTE_WRITE, TRIM = range(6)
EV_READ, EV_WRITE, EV_TRIM = 0, 1, 2
W_NONE, W_MAIN, W_SMALL, W_GHOST = 0, 1, 2, 3
_MIN = np.int64(-(2 ** 63))


# ---- the state tuple S ------------------------------------------------------------------------------------
# S = (I, F, G, ht, nkey, nprev, nnext, nslot, nver, nlast, nwhere, nmeta, nfreq, nfree,
#      hd, hk, pexp, sfree, skey, slive, swr, segl, sprev, snext, sealed, fsegs, drop, evs)
(S_I, S_F, S_G, S_HT, S_NKEY, S_NPREV, S_NNEXT, S_NSLOT, S_NVER, S_NLAST, S_NWHERE, S_NMETA, S_NFREQ, S_NFREE,
 S_HD, S_HK, S_PEXP, S_SFREE, S_SKEY, S_SLIVE, S_SWR, S_SEGL, S_SPREV, S_SNEXT, S_SEALED, S_FSEGS, S_DROP,
 S_EVS) = range(28)


# ---- hashing ----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _home(key, mask):
    z = np.uint64(key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z & np.uint64(mask))


@njit(cache=True, _nrt=False)
def _find(S, t, key):
    """Node of ``key`` in tier t (index relative to the tier's pool), or -1."""
    I, ht, nkey = S[S_I], S[S_HT], S[S_NKEY]
    hb, mask, nb = I[t, HB], I[t, HM], I[t, NB]
    i = _home(key, mask)
    while True:
        v = ht[hb + i]
        if v == 0:
            return -1
        if nkey[nb + v - 1] == key:
            return v - 1
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def _node(S, t, key):
    """The node of ``key`` in tier t, made (empty: no policy, no meta) when absent; -1 when the pool is out."""
    n = _find(S, t, key)
    if n >= 0:
        return n
    I, G, ht, nkey, nfree = S[S_I], S[S_G], S[S_HT], S[S_NKEY], S[S_NFREE]
    top = I[t, FTOP]
    if top == 0:
        G[G_ERR] = ERR_NODES
        return -1
    nb = I[t, NB]
    n = nfree[nb + top - 1]
    I[t, FTOP] = top - 1
    nkey[nb + n] = key
    S[S_NWHERE][nb + n] = W_NONE
    S[S_NMETA][nb + n] = 0
    S[S_NFREQ][nb + n] = 0
    hb, mask = I[t, HB], I[t, HM]
    i = _home(key, mask)
    while ht[hb + i] != 0:
        i = (i + 1) & mask
    ht[hb + i] = n + 1
    return n


@njit(cache=True, _nrt=False)
def _release(S, t, n):
    """Free node n when neither the policy (nor ghost) nor the meta holds it (backward-shift table delete)."""
    I, ht, nkey = S[S_I], S[S_HT], S[S_NKEY]
    nb = I[t, NB]
    if S[S_NWHERE][nb + n] != W_NONE or S[S_NMETA][nb + n] != 0:
        return
    hb, mask = I[t, HB], I[t, HM]
    i = _home(nkey[nb + n], mask)
    while ht[hb + i] != n + 1:
        if ht[hb + i] == 0:                 # not allocated (already released)
            return
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        v = ht[hb + j]
        if v == 0:
            break
        k = _home(nkey[nb + v - 1], mask)
        if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
            ht[hb + i] = v
            i = j
    ht[hb + i] = 0
    S[S_NFREE][nb + I[t, FTOP]] = n
    I[t, FTOP] += 1


# ---- linked queues (the OrderedDicts) ---------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _q_append(S, t, q, n):
    I, nprev, nnext = S[S_I], S[S_NPREV], S[S_NNEXT]
    nb = I[t, NB]
    tail = I[t, QT0 + q]
    nprev[nb + n] = tail
    nnext[nb + n] = -1
    if tail >= 0:
        nnext[nb + tail] = n
    else:
        I[t, QH0 + q] = n
    I[t, QT0 + q] = n
    I[t, QL0 + q] += 1


@njit(cache=True, _nrt=False)
def _q_unlink(S, t, q, n):
    I, nprev, nnext = S[S_I], S[S_NPREV], S[S_NNEXT]
    nb = I[t, NB]
    p, x = nprev[nb + n], nnext[nb + n]
    if p >= 0:
        nnext[nb + p] = x
    else:
        I[t, QH0 + q] = x
    if x >= 0:
        nprev[nb + x] = p
    else:
        I[t, QT0 + q] = p
    I[t, QL0 + q] -= 1


# ---- retention heap of FIFO / S3-FIFO (the reference's _IdleHeap) -----------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _hless(d1, k1, d2, k2):
    return d1 < d2 or (d1 == d2 and (k1 ^ _MIN) < (k2 ^ _MIN))      # keys compare as unsigned


@njit(cache=True, _nrt=False)
def _heap_push(S, t, d, k):
    I, hd, hk = S[S_I], S[S_HD], S[S_HK]
    b, n = I[t, HPB], I[t, HPN]
    i = n
    I[t, HPN] = n + 1
    while i > 0:
        p = (i - 1) >> 1
        if _hless(d, k, hd[b + p], hk[b + p]):
            hd[b + i] = hd[b + p]
            hk[b + i] = hk[b + p]
            i = p
        else:
            break
    hd[b + i] = d
    hk[b + i] = k


@njit(cache=True, _nrt=False)
def _heap_pop(S, t):
    I, hd, hk = S[S_I], S[S_HD], S[S_HK]
    b = I[t, HPB]
    n = I[t, HPN] - 1
    I[t, HPN] = n
    d, k = hd[b + n], hk[b + n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _hless(hd[b + c + 1], hk[b + c + 1], hd[b + c], hk[b + c]):
            c += 1
        if _hless(hd[b + c], hk[b + c], d, k):
            hd[b + i] = hd[b + c]
            hk[b + i] = hk[b + c]
            i = c
        else:
            break
    if n > 0:
        hd[b + i] = d
        hk[b + i] = k


@njit(cache=True, _nrt=False)
def _live(S, t):
    """len(_IdleHeap.last): the keys the policy holds (small + main for S3-FIFO)."""
    I = S[S_I]
    if I[t, POL] == POL_S3:
        return I[t, QL0] + I[t, QL1]
    return I[t, QL0]


@njit(cache=True, _nrt=False)
def _touch(S, t, n, now):
    I, F, nlast, nkey, nnext = S[S_I], S[S_F], S[S_NLAST], S[S_NKEY], S[S_NNEXT]
    nb = I[t, NB]
    nlast[nb + n] = now
    _heap_push(S, t, now + F[t], nkey[nb + n])
    if I[t, HPN] > 2 * _live(S, t) + 64:        # rebuilt from the live keys, one entry each
        I[t, HPN] = 0
        for q in range(2 if I[t, POL] == POL_S3 else 1):
            m = I[t, QH0 + q]
            while m >= 0:
                _heap_push(S, t, nlast[nb + m] + F[t], nkey[nb + m])
                m = nnext[nb + m]


@njit(cache=True, _nrt=False)
def _alive(S, t, n, now):
    I, F = S[S_I], S[S_F]
    return now - S[S_NLAST][I[t, NB] + n] <= F[t]


@njit(cache=True, _nrt=False)
def _pend_expired(S, t, key):
    I, pexp = S[S_I], S[S_PEXP]
    pexp[I[t, PEB] + I[t, PEN]] = key
    I[t, PEN] += 1


# ---- policies: lookup / insert / remove / expire ----------------------------------------------------------
@njit(cache=True, _nrt=False)
def _p_lookup(S, t, key, now):
    I, nb = S[S_I], S[S_I][t, NB]
    n = _find(S, t, key)
    if n < 0:
        return False
    nwhere, nfreq = S[S_NWHERE], S[S_NFREQ]
    w = nwhere[nb + n]
    if w == W_NONE or w == W_GHOST:
        return False
    pol = I[t, POL]
    if pol == POL_LRU:
        if I[t, HASTTL] and now - S[S_NLAST][nb + n] > S[S_F][t]:
            _q_unlink(S, t, 0, n)
            nwhere[nb + n] = W_NONE
            _pend_expired(S, t, key)
            _release(S, t, n)
            return False
        S[S_NLAST][nb + n] = now
        _q_unlink(S, t, 0, n)
        _q_append(S, t, 0, n)
        return True
    if I[t, HASTTL]:
        if not _alive(S, t, n, now):
            _q_unlink(S, t, 0 if w == W_MAIN else 1, n)
            nwhere[nb + n] = W_NONE
            _pend_expired(S, t, key)
            _release(S, t, n)
            return False
        _touch(S, t, n, now)
    if pol == POL_S3 and nfreq[nb + n] < 3:
        nfreq[nb + n] += 1
    return True


@njit(cache=True, _nrt=False)
def _s3_evict_one(S, t):
    """S3-FIFO's eviction (the reference's _evict_one); returns the victim's node (now a ghost or free)."""
    I, nfreq, nwhere = S[S_I], S[S_NFREQ], S[S_NWHERE]
    nb = I[t, NB]
    while True:
        if I[t, QL1] > 0 and (I[t, QL1] >= I[t, SCAP] or I[t, QL0] == 0):
            n = I[t, QH1]
            _q_unlink(S, t, 1, n)
            if nfreq[nb + n] > 1:
                nfreq[nb + n] = 0
                nwhere[nb + n] = W_MAIN
                _q_append(S, t, 0, n)
                continue
            nwhere[nb + n] = W_GHOST
            _q_append(S, t, 2, n)
            while I[t, QL2] > I[t, MCAP]:
                g = I[t, QH2]
                _q_unlink(S, t, 2, g)
                nwhere[nb + g] = W_NONE
                if g != n:
                    _release(S, t, g)
            return n
        n = I[t, QH0]
        _q_unlink(S, t, 0, n)
        f = nfreq[nb + n]
        if f > 0:
            nfreq[nb + n] = f - 1
            _q_append(S, t, 0, n)
            continue
        nwhere[nb + n] = W_NONE
        return n


@njit(cache=True, _nrt=False)
def _p_insert(S, t, n, now):
    """Admit node n's key to the policy; returns the evicted key's node or -1 (at most one: one in, one out).

    The victim node is left for the caller, which must call _release on it once done with its key."""
    I, nwhere, nfreq = S[S_I], S[S_NWHERE], S[S_NFREQ]
    nb = I[t, NB]
    pol = I[t, POL]
    w = nwhere[nb + n]
    if w == W_MAIN or w == W_SMALL:
        if pol == POL_LRU:
            S[S_NLAST][nb + n] = now
            _q_unlink(S, t, 0, n)
            _q_append(S, t, 0, n)
        elif I[t, HASTTL]:
            _touch(S, t, n, now)
        return -1
    victim = -1
    if pol == POL_S3:
        was_ghost = w == W_GHOST
        if was_ghost:
            _q_unlink(S, t, 2, n)
            nwhere[nb + n] = W_NONE
        if I[t, QL0] + I[t, QL1] >= I[t, CAP]:
            victim = _s3_evict_one(S, t)
        nfreq[nb + n] = 0
        if was_ghost:
            nwhere[nb + n] = W_MAIN
            _q_append(S, t, 0, n)
        else:
            nwhere[nb + n] = W_SMALL
            _q_append(S, t, 1, n)
        if I[t, HASTTL]:
            _touch(S, t, n, now)
        return victim
    if I[t, QL0] >= I[t, CAP]:
        victim = I[t, QH0]
        _q_unlink(S, t, 0, victim)
        nwhere[nb + victim] = W_NONE
    nwhere[nb + n] = W_MAIN
    _q_append(S, t, 0, n)
    if pol == POL_LRU:
        S[S_NLAST][nb + n] = now
    elif I[t, HASTTL]:
        _touch(S, t, n, now)
    return victim


@njit(cache=True, _nrt=False)
def _p_remove(S, t, n):
    """Take node n's key out of the policy (and S3-FIFO's ghost); the caller releases the node."""
    I, nwhere = S[S_I], S[S_NWHERE]
    nb = I[t, NB]
    w = nwhere[nb + n]
    if w == W_MAIN:
        _q_unlink(S, t, 0, n)
    elif w == W_SMALL:
        _q_unlink(S, t, 1, n)
    elif w == W_GHOST:
        _q_unlink(S, t, 2, n)
    nwhere[nb + n] = W_NONE


@njit(cache=True, _nrt=False)
def _p_expire(S, t, now, out):
    """Keys dropped by retention since the last call (pending lookup expiries first); returns how many."""
    I, pexp, nwhere, nlast = S[S_I], S[S_PEXP], S[S_NWHERE], S[S_NLAST]
    nb = I[t, NB]
    k = 0
    for j in range(I[t, PEN]):
        out[k] = pexp[I[t, PEB] + j]
        k += 1
    I[t, PEN] = 0
    if not I[t, HASTTL]:
        return k
    ttl = S[S_F][t]
    if I[t, POL] == POL_LRU:
        limit = now - ttl
        while I[t, QL0] > 0:
            n = I[t, QH0]
            if nlast[nb + n] >= limit:
                break
            _q_unlink(S, t, 0, n)
            nwhere[nb + n] = W_NONE
            out[k] = S[S_NKEY][nb + n]
            k += 1
            _release(S, t, n)
        return k
    hd, hk = S[S_HD], S[S_HK]
    b = I[t, HPB]
    while I[t, HPN] > 0 and hd[b] < now:
        deadline, key = hd[b], hk[b]
        _heap_pop(S, t)
        n = _find(S, t, key)
        if n < 0:
            continue
        w = nwhere[nb + n]
        if w != W_MAIN and w != W_SMALL:          # not in last (ghost or meta only)
            continue
        last = nlast[nb + n]
        if last + ttl == deadline and now - last > ttl:
            _q_unlink(S, t, 0 if w == W_MAIN else 1, n)
            nwhere[nb + n] = W_NONE
            out[k] = key
            k += 1
            _release(S, t, n)
    return k


# ---- stores -----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _trim_seg(S, t, seg):
    I = S[S_I]
    if I[t, TRIMF]:
        j = I[t, TRN]
        I[t, TR0F + 2 * j] = seg * I[t, SEGS]
        I[t, TR0N + 2 * j] = I[t, SEGS]
        I[t, TRN] = j + 1


@njit(cache=True, _nrt=False)
def _sealed_append(S, t, seg):
    I, sprev, snext, sealed = S[S_I], S[S_SPREV], S[S_SNEXT], S[S_SEALED]
    b = I[t, SEGB]
    tail = I[t, SLT]
    sprev[b + seg] = tail
    snext[b + seg] = -1
    if tail >= 0:
        snext[b + tail] = seg
    else:
        I[t, SLH] = seg
    I[t, SLT] = seg
    sealed[b + seg] = 1


@njit(cache=True, _nrt=False)
def _sealed_unlink(S, t, seg):
    I, sprev, snext, sealed = S[S_I], S[S_SPREV], S[S_SNEXT], S[S_SEALED]
    b = I[t, SEGB]
    p, x = sprev[b + seg], snext[b + seg]
    if p >= 0:
        snext[b + p] = x
    else:
        I[t, SLH] = x
    if x >= 0:
        sprev[b + x] = p
    else:
        I[t, SLT] = p
    sealed[b + seg] = 0


@njit(cache=True, _nrt=False)
def _fseg_push(S, t, seg):
    I, fsegs = S[S_I], S[S_FSEGS]
    n = I[t, NSEG]
    fsegs[I[t, SEGB] + (I[t, FSH] + I[t, FSN]) % n] = seg
    I[t, FSN] += 1


@njit(cache=True, _nrt=False)
def _alloc(S, t, key):
    """A slot for ``key``; dropped keys (log reclaim) go to the tier's drop buffer, trims to TR*."""
    I = S[S_I]
    I[t, DRN] = 0
    I[t, TRN] = 0
    sb = I[t, SLOTB]
    if I[t, STORE] == STORE_SLOT:
        sfree = S[S_SFREE]
        slot = sfree[sb + I[t, SFH]]
        I[t, SFH] = (I[t, SFH] + 1) % I[t, NSLOTS]
        I[t, SFN] -= 1
        I[t, USED] += 1
        return slot
    segs, skey, slive, segl = I[t, SEGS], S[S_SKEY], S[S_SLIVE], S[S_SEGL]
    gb = I[t, SEGB]
    if I[t, LPOS] == segs:
        head = I[t, LHEAD]
        if segl[gb + head] == 0:
            _fseg_push(S, t, head)
            _trim_seg(S, t, head)
        else:
            _sealed_append(S, t, head)
        if I[t, FSN] > 0:
            I[t, LHEAD] = S[S_FSEGS][gb + I[t, FSH]]
            I[t, FSH] = (I[t, FSH] + 1) % I[t, NSEG]
            I[t, FSN] -= 1
        else:
            seg = I[t, SLH]
            _sealed_unlink(S, t, seg)
            lo = seg * segs
            drop = S[S_DROP]
            db = I[t, DRB]
            nd = 0
            for s in range(lo, lo + segs):
                if slive[sb + s]:
                    drop[db + nd] = skey[sb + s]
                    nd += 1
                    slive[sb + s] = 0
            I[t, DRN] = nd
            I[t, USED] -= nd
            segl[gb + seg] = 0
            I[t, RECLAIMED] += 1
            I[t, DROPPED] += nd
            _trim_seg(S, t, seg)
            I[t, LHEAD] = seg
        I[t, LPOS] = 0
    slot = I[t, LHEAD] * segs + I[t, LPOS]
    I[t, LPOS] += 1
    skey[sb + slot] = key
    slive[sb + slot] = 1
    segl[gb + I[t, LHEAD]] += 1
    I[t, USED] += 1
    return slot


@njit(cache=True, _nrt=False)
def _free(S, t, slot):
    """Release a slot; trims go to TR* (TRN of them)."""
    I = S[S_I]
    I[t, TRN] = 0
    sb = I[t, SLOTB]
    if I[t, STORE] == STORE_SLOT:
        sfree = S[S_SFREE]
        sfree[sb + (I[t, SFH] + I[t, SFN]) % I[t, NSLOTS]] = slot
        I[t, SFN] += 1
        I[t, USED] -= 1
        if I[t, TRIMF]:
            I[t, TR0F] = slot
            I[t, TR0N] = 1
            I[t, TRN] = 1
        return
    slive, segl = S[S_SLIVE], S[S_SEGL]
    if not slive[sb + slot]:
        return
    slive[sb + slot] = 0
    I[t, USED] -= 1
    gb = I[t, SEGB]
    seg = slot // I[t, SEGS]
    segl[gb + seg] -= 1
    if segl[gb + seg] == 0 and seg != I[t, LHEAD]:
        if not S[S_SEALED][gb + seg]:
            return
        _sealed_unlink(S, t, seg)
        _fseg_push(S, t, seg)
        _trim_seg(S, t, seg)


@njit(cache=True, _nrt=False)
def _emit_trims(S, t):
    I = S[S_I]
    for j in range(I[t, TRN]):
        n = I[t, TR0N + 2 * j]
        _emit(S, t, EV_TRIM, TRIM, I[t, TR0F + 2 * j], n, 0, -1)
        I[t, C_TRIMS] += n
    I[t, TRN] = 0


# ---- events -----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _emit(S, t, op, kind, slot, nslots, key, version):
    G, ev = S[S_G], S[S_EVS]
    i = G[G_NEV]
    if i >= ev.shape[0]:                 # the room reserved per request was not enough: nothing is written
        G[G_ERR] = ERR_EVENTS
        return
    ev[i, 0] = G[G_REQ]
    ev[i, 1] = S[S_I][t, LEVEL]
    ev[i, 2] = op
    ev[i, 3] = kind
    ev[i, 4] = slot
    ev[i, 5] = nslots
    ev[i, 6] = key
    ev[i, 7] = version
    G[G_NEV] = i + 1
    if G[G_PHASE] and op == EV_WRITE:        # a slot written while the request's blocks were looked up
        S[S_SWR][S[S_I][t, SLOTB] + slot] = G[G_MARK]


# ---- the hierarchy ----------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _admit(S, t, key, kind, now):
    """Admission hook (issue 17): may tier t take ``key`` (CREATE_WRITE/PROMOTE_WRITE/DEMOTE_WRITE)? All today."""
    return True


# The reference's _insert and _evict call each other (an eviction demotes into the next tier, which may evict
# in turn). numba cannot cache recursive functions (numba#6061: the cached code segfaults), so the chain is
# unrolled by depth: _insert_d / _evict_d for d = 0..3 (a chain goes down one tier per step, four tiers at most),
# each a few lines around the shared, non-recursive steps below.
@njit(cache=True, _nrt=False)
def _ins_begin(S, t, key, kind, now):
    """First half of an insert: refresh a resident key, or admit it and make room. Returns (node, victim
    node or -1); node -1 when the insert is over (refreshed, refused, or out of nodes)."""
    I, nmeta = S[S_I], S[S_NMETA]
    nb = I[t, NB]
    n = _node(S, t, key)
    if n < 0:
        return -1, -1
    if nmeta[nb + n]:                       # already resident (same content): refresh only
        v = _p_insert(S, t, n, now)
        if v >= 0:
            _release(S, t, v)               # the reference ignores this eviction (it cannot happen in order)
        return -1, -1
    if not _admit(S, t, key, kind, now):
        _release(S, t, n)
        return -1, -1
    v = _p_insert(S, t, n, now)
    if v >= 0:
        I[t, C_EVICT] += 1
    return n, v


@njit(cache=True, _nrt=False)
def _ins_alloc(S, t, key):
    """The insert's slot (-1 on L1); the keys a log reclaim dropped are in the tier's drop buffer (DRN)."""
    I = S[S_I]
    if I[t, STORE] == STORE_NONE:
        I[t, DRN] = 0
        return -1
    return _alloc(S, t, key)


@njit(cache=True, _nrt=False)
def _ins_drop(S, t, j):
    """The j-th key a reclaim dropped: out of the policy; returns it (the caller evicts it, freed)."""
    I = S[S_I]
    victim = S[S_DROP][I[t, DRB] + j]
    _p_remove(S, t, _find(S, t, victim))
    I[t, C_RECLAIM] += 1
    return victim


@njit(cache=True, _nrt=False)
def _ins_finish(S, t, n, key, version, kind, slot):
    I, nmeta = S[S_I], S[S_NMETA]
    nb = I[t, NB]
    I[t, DRN] = 0
    nmeta[nb + n] = 1
    S[S_NSLOT][nb + n] = slot
    S[S_NVER][nb + n] = version
    I[t, NMETA] += 1
    if I[t, STORE] != STORE_NONE:
        _emit_trims(S, t)
        _emit(S, t, EV_WRITE, kind, slot, 1, key, version)
    if kind == CREATE_WRITE:
        I[t, C_CREATE] += 1
    elif kind == PROMOTE_WRITE:
        I[t, C_PROMOTE] += 1
    else:
        I[t, C_DEMOTE_WRITES] += 1
    if I[t, NMETA] > I[t, C_PEAK]:
        I[t, C_PEAK] = I[t, NMETA]


@njit(cache=True, _nrt=False)
def _ev_begin(S, t, key):
    """First half of an eviction (the policy already dropped ``key``): pop the meta, emit the demotion read.
    Returns (node, slot, version, demote?); node -1 when there is nothing more to do."""
    I, G, nmeta = S[S_I], S[S_G], S[S_NMETA]
    nb = I[t, NB]
    n = _find(S, t, key)
    if n < 0:
        return -1, -1, -1, False
    if not nmeta[nb + n]:
        _release(S, t, n)
        return -1, -1, -1, False
    slot, version = S[S_NSLOT][nb + n], S[S_NVER][nb + n]
    nmeta[nb + n] = 0
    I[t, NMETA] -= 1
    demote = False
    if G[G_DEMOTE] and t + 1 < G[G_NT]:
        if not _resident(S, t + 1, key):
            if I[t, STORE] != STORE_NONE:
                _emit(S, t, EV_READ, DEMOTE_READ, slot, 1, key, version)
                I[t, C_DEMOTE_READS] += 1
            demote = True
    return n, slot, version, demote


@njit(cache=True, _nrt=False)
def _ev_end(S, t, n, slot, freed):
    I = S[S_I]
    if I[t, STORE] != STORE_NONE and not freed:
        _free(S, t, slot)
        _emit_trims(S, t)
    _release(S, t, n)


@njit(cache=True, _nrt=False)
def _evict3(S, t, key, freed, now):
    n, slot, version, demote = _ev_begin(S, t, key)      # depth 3 is the fourth tier: nothing below it
    if n >= 0:
        _ev_end(S, t, n, slot, freed)


@njit(cache=True, _nrt=False)
def _insert3(S, t, key, version, kind, now):
    n, v = _ins_begin(S, t, key, kind, now)
    if n < 0:
        return
    if v >= 0:
        _evict3(S, t, S[S_NKEY][S[S_I][t, NB] + v], False, now)
    slot = _ins_alloc(S, t, key)
    for j in range(S[S_I][t, DRN]):
        _evict3(S, t, _ins_drop(S, t, j), True, now)
    _ins_finish(S, t, n, key, version, kind, slot)


@njit(cache=True, _nrt=False)
def _evict2(S, t, key, freed, now):
    n, slot, version, demote = _ev_begin(S, t, key)
    if n >= 0:
        if demote:
            _insert3(S, t + 1, key, version, DEMOTE_WRITE, now)
        _ev_end(S, t, n, slot, freed)


@njit(cache=True, _nrt=False)
def _insert2(S, t, key, version, kind, now):
    n, v = _ins_begin(S, t, key, kind, now)
    if n < 0:
        return
    if v >= 0:
        _evict2(S, t, S[S_NKEY][S[S_I][t, NB] + v], False, now)
    slot = _ins_alloc(S, t, key)
    for j in range(S[S_I][t, DRN]):
        _evict2(S, t, _ins_drop(S, t, j), True, now)
    _ins_finish(S, t, n, key, version, kind, slot)


@njit(cache=True, _nrt=False)
def _evict1(S, t, key, freed, now):
    n, slot, version, demote = _ev_begin(S, t, key)
    if n >= 0:
        if demote:
            _insert2(S, t + 1, key, version, DEMOTE_WRITE, now)
        _ev_end(S, t, n, slot, freed)


@njit(cache=True, _nrt=False)
def _insert1(S, t, key, version, kind, now):
    n, v = _ins_begin(S, t, key, kind, now)
    if n < 0:
        return
    if v >= 0:
        _evict1(S, t, S[S_NKEY][S[S_I][t, NB] + v], False, now)
    slot = _ins_alloc(S, t, key)
    for j in range(S[S_I][t, DRN]):
        _evict1(S, t, _ins_drop(S, t, j), True, now)
    _ins_finish(S, t, n, key, version, kind, slot)


@njit(cache=True, _nrt=False)
def _evict(S, t, key, freed, now):
    """``key`` left tier t (its policy already dropped it): demote it if asked, free its slot."""
    n, slot, version, demote = _ev_begin(S, t, key)
    if n >= 0:
        if demote:
            _insert1(S, t + 1, key, version, DEMOTE_WRITE, now)
        _ev_end(S, t, n, slot, freed)


@njit(cache=True, _nrt=False)
def _insert(S, t, key, version, kind, now):
    """Put ``key`` (content ``version``) in tier t, evicting (and demoting) what it displaces."""
    n, v = _ins_begin(S, t, key, kind, now)
    if n < 0:
        return
    if v >= 0:
        _evict(S, t, S[S_NKEY][S[S_I][t, NB] + v], False, now)
    slot = _ins_alloc(S, t, key)
    for j in range(S[S_I][t, DRN]):
        _evict(S, t, _ins_drop(S, t, j), True, now)
    _ins_finish(S, t, n, key, version, kind, slot)


@njit(cache=True, _nrt=False)
def _remove(S, t, key):
    """Take ``key`` out of tier t without demotion (exclusive promotion)."""
    I, nmeta = S[S_I], S[S_NMETA]
    nb = I[t, NB]
    n = _find(S, t, key)
    _p_remove(S, t, n)
    nmeta[nb + n] = 0
    I[t, NMETA] -= 1
    if I[t, STORE] != STORE_NONE:
        _free(S, t, S[S_NSLOT][nb + n])
        _emit_trims(S, t)
    _release(S, t, n)


@njit(cache=True, _nrt=False)
def _resident(S, t, key):
    n = _find(S, t, key)
    return n >= 0 and S[S_NMETA][S[S_I][t, NB] + n] != 0


@njit(cache=True, _nrt=False)
def _shift_tail(ev, a, b, by):
    """Move rows [a, b) of ev to [a + by, b + by) (overlapping: copy from the end)."""
    for i in range(b - 1, a - 1, -1):
        for c in range(8):
            ev[i + by, c] = ev[i, c]


@njit(cache=True, _nrt=False)
def run_requests(S, times, offsets, keys, first_request, reqs, xbuf, found, versions, hitrow):
    """Simulate requests (CSR keys as int64 bit patterns); fills reqs (n, 9) and the events in S.

    Returns the number of requests done (fewer than asked only when G[G_ERR] is set: the state is then
    inconsistent and the caller must rebuild it)."""
    I, G = S[S_I], S[S_G]
    nt = G[G_NT]
    nreq = times.shape[0]
    for r in range(nreq):
        now = times[r]
        for t in range(nt):               # pools start small and grow (between requests) as tiers fill
            if I[t, FTOP] < G[G_NEED] and I[t, NN] < I[t, NNMAX]:
                G[G_ERR] = NEED_GROW
                return r
        if S[S_EVS].shape[0] - G[G_NEV] < G[G_EVNEED]:
            G[G_ERR] = NEED_GROW
            return r
        G[G_REQ] = first_request + r
        G[G_MARK] += 1
        G[G_PHASE] = 1
        start = G[G_NEV]
        for t in range(nt):
            k = _p_expire(S, t, now, xbuf)
            for j in range(k):
                I[t, C_EXPIRE] += 1
                _evict(S, t, xbuf[j], False, now)
        a, b = offsets[r], offsets[r + 1]
        n = b - a
        produced = 0
        for i in range(n - 1, -1, -1):
            key = keys[a + i]
            found[i] = -1
            for t in range(nt):
                if _p_lookup(S, t, key, now):
                    found[i] = t
                    break
            if found[i] < 0:
                version = G[G_SEQ]
                G[G_SEQ] += 1
                produced += 1
                for j in range(G[G_NCREATE]):
                    _insert(S, G[G_CREATE0 + j], key, version, CREATE_WRITE, now)
            if G[G_ERR]:
                return r
        h = 0
        while h < n and found[h] >= 0:
            h += 1
        G[G_PHASE] = 0
        loop_end = G[G_NEV]
        # hit reads: loads first, then the loop's events, then reads of slots the loop wrote ("late")
        for lv in range(4):
            hitrow[lv] = 0
        nload = 0
        nlate = 0
        req_mark = G[G_MARK]
        for i in range(h):
            t = found[i]
            nb = I[t, NB]
            nd = _find(S, t, keys[a + i])
            if nd < 0 or not S[S_NMETA][nb + nd]:
                G[G_ERR] = ERR_META
                return r
            slot, version = S[S_NSLOT][nb + nd], S[S_NVER][nb + nd]
            versions[i] = version
            hitrow[I[t, LEVEL]] += 1
            I[t, C_HIT_BLOCKS] += 1
            if I[t, STORE] != STORE_NONE:
                I[t, C_HIT_READS] += 1
                if loop_end > start and S[S_SWR][I[t, SLOTB] + slot] == req_mark:
                    nlate += 1
                else:
                    nload += 1
        if nload + nlate:
            ev = S[S_EVS]
            need = loop_end + nload + nlate
            if need > ev.shape[0]:
                G[G_ERR] = ERR_EVENTS
                return r
            _shift_tail(ev, start, loop_end, nload)
            pl, pt = start, loop_end + nload
            for i in range(h):
                t = found[i]
                if I[t, STORE] == STORE_NONE:
                    continue
                nb = I[t, NB]
                nd = _find(S, t, keys[a + i])
                slot = S[S_NSLOT][nb + nd]
                late = loop_end > start and S[S_SWR][I[t, SLOTB] + slot] == req_mark
                row = pt if late else pl
                ev[row, 0] = G[G_REQ]
                ev[row, 1] = I[t, LEVEL]
                ev[row, 2] = EV_READ
                ev[row, 3] = HIT_READ
                ev[row, 4] = slot
                ev[row, 5] = 1
                ev[row, 6] = keys[a + i]
                ev[row, 7] = versions[i]
                if late:
                    pt += 1
                else:
                    pl += 1
            G[G_NEV] = need
        # promotion, deepest-first
        for i in range(h - 1, -1, -1):
            ti = found[i]
            if ti == 0:
                continue
            key, version = keys[a + i], versions[i]
            if G[G_EXCL]:
                for tj in range(1, nt):
                    if _resident(S, tj, key):
                        _remove(S, tj, key)
                _insert(S, 0, key, version, PROMOTE_WRITE, now)
            elif G[G_PROMOTE]:
                for tj in range(ti - 1, -1, -1):
                    if not _resident(S, tj, key):
                        _insert(S, tj, key, version, PROMOTE_WRITE, now)
            elif G[G_TOPL1]:
                if not _resident(S, 0, key):
                    _insert(S, 0, key, version, PROMOTE_WRITE, now)
            if G[G_ERR]:
                return r
        G[G_PRODUCED] += produced
        reqs[r, 0] = first_request + r
        reqs[r, 1] = n
        reqs[r, 2] = h
        for lv in range(4):
            reqs[r, 3 + lv] = hitrow[lv]
        reqs[r, 7] = produced
    return nreq


@njit(cache=True, _nrt=False)
def rehash(old_ht, old_hb, old_size, ht, hb, mask, nkey, nb):
    """Enter the nodes of an old table region into a new (larger) one."""
    for i in range(old_size):
        v = old_ht[old_hb + i]
        if v == 0:
            continue
        j = _home(nkey[nb + v - 1], mask)
        while ht[hb + j] != 0:
            j = (j + 1) & mask
        ht[hb + j] = v


@njit(cache=True)
def tier_keys(S, t, meta_only):
    """Keys (int64 bit patterns) with meta in tier t, and their slots and versions."""
    I = S[S_I]
    nb, nn = I[t, NB], I[t, NN]
    out = np.empty(I[t, NMETA], np.int64)
    slots = np.empty(I[t, NMETA], np.int64)
    vers = np.empty(I[t, NMETA], np.int64)
    k = 0
    hb = I[t, HB]
    for i in range(I[t, HM] + 1):
        v = S[S_HT][hb + i]
        if v != 0 and S[S_NMETA][nb + v - 1]:
            out[k] = S[S_NKEY][nb + v - 1]
            slots[k] = S[S_NSLOT][nb + v - 1]
            vers[k] = S[S_NVER][nb + v - 1]
            k += 1
    return out[:k], slots[:k], vers[:k]
