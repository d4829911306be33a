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

Admission (issue 17, :mod:`kvbench.sim.admission`): a tier with a policy (``I[t, ADM]`` != ADM_ALL) sees the
request's keys first (``_adm_begin``, prefix-depth's shared prefix), every lookup that reaches it
(``_adm_observe``) and decides in ``_admit``, called by ``_ins_begin`` for every new key the tier would take
(creation, promotion, demotion) before the policy sees it; a refused key is neither inserted nor written. The
policies' memory is compiled too: bounded FIFO ghost lists (key -> value, move-to-end on put: the reference's
``_Ghost``) and TinyLFU's count-min sketch (4-bit counters packed 16 to a word, halved in one mask per word).
Their parameters (sizes, widths, thresholds) come from the reference objects, built by the caller.

Every subscript goes through :func:`kvbench.kernels.u` (an unsigned index: no negative-index wraparound code).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kvbench.kernels import u

# ---- per-tier integer fields: I[t, F] ---------------------------------------------------------------------
(POL, CAP, SCAP, MCAP, HASTTL, STORE, TRIMF, LEVEL, NB, NN, HB, HM, FTOP,
 QH0, QH1, QH2, QT0, QT1, QT2, QL0, QL1, QL2, NMETA,
 HPB, HPN, HPC, PEB, PEN, PEC,
 SLOTB, NSLOTS, SFB, SFH, SFN,
 SEGS, NSEG, SEGB, LHEAD, LPOS, FSB, FSH, FSN, SLH, SLT, USED, RECLAIMED, DROPPED,
 C_HIT_BLOCKS, C_HIT_READS, C_CREATE, C_PROMOTE, C_DEMOTE_READS, C_DEMOTE_WRITES, C_TRIMS, C_EVICT, C_EXPIRE,
 C_RECLAIM, C_PEAK, DRB, DRN, TRN, TR0F, TR0N, TR1F, TR1N, NNMAX,
 ADM, ADMG0, ADMG1, ADEPTH, ABEYOND, ALIMIT, AMINB, AWIN, SKB, SKW, SKSH, SKSAMP, SKINC, SKRES, GAPK, GAPSET,
 C_REJECT,
 FK, FV, FKIND, FN, FSLOT, FJ, FJN, FPH, EN, ESLOT, EFREED, NFIELDS) = range(95)
# FK..FPH: the tier's open insert frame of _cascade (key, version, kind, node, slot, drop index and count, phase),
# EN..EFREED: its open evict frame (node, slot, freed) while the evicted key is demoted into the next tier
ADM_ALL, ADM_SECOND, ADM_TINYLFU, ADM_PREFIX, ADM_THRESHOLD = range(5)
# ghost lists: header GH[q * GHF + f] of ghost q (at most two per tier)
GH_NB, GH_CAP, GH_HB, GH_HM, GH_HEAD, GH_TAIL, GH_LEN, GH_FTOP, GHF = range(9)
NGHOST = 8
POL_LRU, POL_FIFO, POL_S3 = 0, 1, 2
STORE_NONE, STORE_SLOT, STORE_LOG = 0, 1, 2
# global ints G[]
(G_REQ, G_SEQ, G_NEV, G_PHASE, G_ERR, G_PRODUCED, G_NT, G_DEMOTE, G_EXCL, G_PROMOTE, G_TOPL1, G_NCREATE,
 G_MARK, G_NEED, G_EVNEED, G_BLOCKS) = range(16)
G_CREATE0 = 16          # G[G_CREATE0 + j]: the j-th tier a new block is created in
G_SUMSEGS = 56          # the tiers' segment sizes (slots; 0 for slot stores): their sum and largest, for the
G_MAXSEGS = 57          # per-request room bounds (set by the caller's layout)
NG = 60
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


# ---- the state A --------------------------------------------------------------------------------------------
# One int64 array, not dozens: numba passes every array argument as ~7 scalars on the stack, and the kernel makes
# dozens of calls per block, so the state is one array (a call with the state spread over 28 arrays cost ~100 ns;
# a tuple of three arrays still ~25 stack arguments per call). A holds the tier rows I[t, f] = A[t * NF + f]
# (4 rows), then G[g] = A[GB + g], then every int array at its base G[B_name], the float arrays (NLAST, HD, TTL:
# the retention per tier) at theirs, read through ``A.view(np.float64)`` (same indices), and last the event rows
# (8 int64 each) at G[B_EV], room for G[G_EVCAP] of them.
NF = NFIELDS
GB = 4 * NF
B_HT = 20
B_NODE = 21             # node records: NW int64 each (fields O_*), a tier's pool at NODE + NW * I[t, NB]
B_NFREQ = 28
B_NFREE = 29
B_HK = 30
B_PEXP = 31
B_SFREE = 32
B_SKEY = 33
B_SLIVE = 34
B_SWR = 35
B_SEGL = 36
B_SPREV = 37
B_SNEXT = 38
B_SEALED = 39
B_FSEGS = 40
B_DROP = 41
B_HD = 43
B_TTL = 44
B_EV = 45
G_EVCAP = 46
B_GH = 47
B_GKEY = 48
B_GPREV = 49
B_GNEXT = 50
B_GFREE = 51
B_GHT = 52
B_SK = 53
B_GVAL = 54
B_ADMF = 55
INT_ARRAYS = ('HT', 'NODE', 'NFREQ', 'NFREE', 'HK', 'PEXP', 'SFREE', 'SKEY', 'SLIVE', 'SWR', 'SEGL', 'SPREV', 'SNEXT', 'SEALED', 'FSEGS', 'DROP',
              'GH', 'GKEY', 'GPREV', 'GNEXT', 'GFREE', 'GHT', 'SK')
FLOAT_ARRAYS = ('HD', 'TTL', 'GVAL', 'ADMF')     # ADMF[2t]: tier t's window, ADMF[2t + 1]: its last gap
FIXED_ARRAYS = ('GH', 'GKEY', 'GPREV', 'GNEXT', 'GFREE', 'GHT', 'SK', 'GVAL', 'ADMF')   # sized by admission only
# a node's fields, in one 64-byte record (the region is 64-byte aligned): a hit, a move in a list, an insert touch
# one cache line per node, not one per field; O_LAST is a float (read through the float64 view)
O_KEY, O_PREV, O_NEXT, O_SLOT, O_VER, O_WHERE, O_META, O_LAST = range(8)
NW = 8


# ---- hashing ----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _home(key, mask):
    z = np.uint64(key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z & np.uint64(mask))


@njit(cache=True, _nrt=False)
def _find(A, t, key):
    """Node of ``key`` in tier t (index relative to the tier's pool), or -1."""
    ht, mask = A[u(GB + B_HT)] + A[u((t) * NF + HB)], A[u((t) * NF + HM)]
    i = _home(key, mask)
    while True:
        v = A[u(ht + 2 * i)]
        if v == 0:
            return -1
        if A[u(ht + 2 * i + 1)] == key:
            return v - 1
        i = (i + 1) & mask


@njit(cache=True, _nrt=False, inline="always")
def _node(A, t, key):
    """The node of ``key`` in tier t, made (empty: no policy, no meta) when absent; -1 when the pool is out.
    One probe: the empty table slot that ends a miss is where the new node goes."""
    nb = A[u((t) * NF + NB)]
    ht, mask = A[u(GB + B_HT)] + A[u((t) * NF + HB)], A[u((t) * NF + HM)]
    i = _home(key, mask)
    while True:
        v = A[u(ht + 2 * i)]
        if v == 0:
            break
        if A[u(ht + 2 * i + 1)] == key:
            return v - 1
        i = (i + 1) & mask
    top = A[u((t) * NF + FTOP)]
    if top == 0:
        A[u(GB + G_ERR)] = ERR_NODES
        return -1
    n = A[u(A[u(GB + B_NFREE)] + nb + top - 1)]
    A[u((t) * NF + FTOP)] = top - 1
    e = A[u(GB + B_NODE)] + NW * (nb + n)
    A[u(e + O_KEY)] = key
    A[u(e + O_WHERE)] = W_NONE
    A[u(e + O_META)] = 0
    A[u(A[u(GB + B_NFREQ)] + nb + n)] = 0
    A[u(ht + 2 * i)] = n + 1
    A[u(ht + 2 * i + 1)] = key
    return n


@njit(cache=True, _nrt=False)
def _release(A, t, n):
    """Free node n when neither the policy (nor ghost) nor the meta holds it (backward-shift table delete)."""
    nb = A[u((t) * NF + NB)]
    e = A[u(GB + B_NODE)] + NW * (nb + n)
    if A[u(e + O_WHERE)] != W_NONE or A[u(e + O_META)] != 0:
        return
    ht, mask = A[u(GB + B_HT)] + A[u((t) * NF + HB)], A[u((t) * NF + HM)]
    i = _home(A[u(e + O_KEY)], mask)
    while A[u(ht + 2 * i)] != n + 1:
        if A[u(ht + 2 * i)] == 0:                 # not allocated (already released)
            return
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        v = A[u(ht + 2 * j)]
        if v == 0:
            break
        k = _home(A[u(ht + 2 * j + 1)], mask)
        if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
            A[u(ht + 2 * i)] = v
            A[u(ht + 2 * i + 1)] = A[u(ht + 2 * j + 1)]
            i = j
    A[u(ht + 2 * i)] = 0
    A[u(A[u(GB + B_NFREE)] + nb + A[u((t) * NF + FTOP)])] = n
    A[u((t) * NF + FTOP)] += 1


# ---- linked queues (the OrderedDicts) ---------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _q_append(A, t, q, n):
    nb = A[u((t) * NF + NB)]
    tail = A[u((t) * NF + QT0 + q)]
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_PREV)] = tail
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_NEXT)] = -1
    if tail >= 0:
        A[u(A[u(GB + B_NODE)] + NW * (nb + tail) + O_NEXT)] = n
    else:
        A[u((t) * NF + QH0 + q)] = n
    A[u((t) * NF + QT0 + q)] = n
    A[u((t) * NF + QL0 + q)] += 1


@njit(cache=True, _nrt=False)
def _q_unlink(A, t, q, n):
    nb = A[u((t) * NF + NB)]
    p, x = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_PREV)], A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_NEXT)]
    if p >= 0:
        A[u(A[u(GB + B_NODE)] + NW * (nb + p) + O_NEXT)] = x
    else:
        A[u((t) * NF + QH0 + q)] = x
    if x >= 0:
        A[u(A[u(GB + B_NODE)] + NW * (nb + x) + O_PREV)] = p
    else:
        A[u((t) * NF + QT0 + q)] = p
    A[u((t) * NF + QL0 + q)] -= 1


# ---- retention heap of FIFO / S3-FIFO (the reference's _IdleHeap) -----------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _hless(d1, k1, d2, k2):
    return d1 < d2 or (d1 == d2 and (k1 ^ _MIN) < (k2 ^ _MIN))      # keys compare as unsigned


@njit(cache=True, _nrt=False)
def _heap_push(A, t, d, k):
    D = A.view(np.float64)
    b, n = A[u((t) * NF + HPB)], A[u((t) * NF + HPN)]
    i = n
    A[u((t) * NF + HPN)] = n + 1
    while i > 0:
        p = (i - 1) >> 1
        if _hless(d, k, D[u(A[u(GB + B_HD)] + b + p)], A[u(A[u(GB + B_HK)] + b + p)]):
            D[u(A[u(GB + B_HD)] + b + i)] = D[u(A[u(GB + B_HD)] + b + p)]
            A[u(A[u(GB + B_HK)] + b + i)] = A[u(A[u(GB + B_HK)] + b + p)]
            i = p
        else:
            break
    D[u(A[u(GB + B_HD)] + b + i)] = d
    A[u(A[u(GB + B_HK)] + b + i)] = k


@njit(cache=True, _nrt=False)
def _heap_pop(A, t):
    D = A.view(np.float64)
    b = A[u((t) * NF + HPB)]
    n = A[u((t) * NF + HPN)] - 1
    A[u((t) * NF + HPN)] = n
    d, k = D[u(A[u(GB + B_HD)] + b + n)], A[u(A[u(GB + B_HK)] + b + n)]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _hless(D[u(A[u(GB + B_HD)] + b + c + 1)], A[u(A[u(GB + B_HK)] + b + c + 1)], D[u(A[u(GB + B_HD)] + b + c)], A[u(A[u(GB + B_HK)] + b + c)]):
            c += 1
        if _hless(D[u(A[u(GB + B_HD)] + b + c)], A[u(A[u(GB + B_HK)] + b + c)], d, k):
            D[u(A[u(GB + B_HD)] + b + i)] = D[u(A[u(GB + B_HD)] + b + c)]
            A[u(A[u(GB + B_HK)] + b + i)] = A[u(A[u(GB + B_HK)] + b + c)]
            i = c
        else:
            break
    if n > 0:
        D[u(A[u(GB + B_HD)] + b + i)] = d
        A[u(A[u(GB + B_HK)] + b + i)] = k


@njit(cache=True, _nrt=False)
def _live(A, t):
    """len(_IdleHeap.last): the keys the policy holds (small + main for S3-FIFO)."""
    if A[u((t) * NF + POL)] == POL_S3:
        return A[u((t) * NF + QL0)] + A[u((t) * NF + QL1)]
    return A[u((t) * NF + QL0)]


@njit(cache=True, _nrt=False)
def _touch(A, t, n, now):
    D = A.view(np.float64)
    nb = A[u((t) * NF + NB)]
    D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] = now
    _heap_push(A, t, now + D[u(A[u(GB + B_TTL)] + t)], A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_KEY)])
    if A[u((t) * NF + HPN)] > 2 * _live(A, t) + 64:        # rebuilt from the live keys, one entry each
        A[u((t) * NF + HPN)] = 0
        for q in range(2 if A[u((t) * NF + POL)] == POL_S3 else 1):
            m = A[u((t) * NF + QH0 + q)]
            while m >= 0:
                _heap_push(A, t, D[u(A[u(GB + B_NODE)] + NW * (nb + m) + O_LAST)] + D[u(A[u(GB + B_TTL)] + t)], A[u(A[u(GB + B_NODE)] + NW * (nb + m) + O_KEY)])
                m = A[u(A[u(GB + B_NODE)] + NW * (nb + m) + O_NEXT)]


@njit(cache=True, _nrt=False)
def _alive(A, t, n, now):
    D = A.view(np.float64)
    return now - D[u(A[u(GB + B_NODE)] + NW * (A[u((t) * NF + NB)] + n) + O_LAST)] <= D[u(A[u(GB + B_TTL)] + t)]


@njit(cache=True, _nrt=False)
def _pend_expired(A, t, key):
    A[u(A[u(GB + B_PEXP)] + A[u((t) * NF + PEB)] + A[u((t) * NF + PEN)])] = key
    A[u((t) * NF + PEN)] += 1


# ---- policies: lookup / insert / remove / expire ----------------------------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _p_lookup(A, t, key, now):
    D = A.view(np.float64)
    nb = A[u((t) * NF + NB)]
    n = _find(A, t, key)
    if n < 0:
        return False
    w = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)]
    if w == W_NONE or w == W_GHOST:
        return False
    pol = A[u((t) * NF + POL)]
    if pol == POL_LRU:
        if A[u((t) * NF + HASTTL)] and now - D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] > D[u(A[u(GB + B_TTL)] + t)]:
            _q_unlink(A, t, 0, n)
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
            _pend_expired(A, t, key)
            _release(A, t, n)
            return False
        D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] = now
        _q_unlink(A, t, 0, n)
        _q_append(A, t, 0, n)
        return True
    if A[u((t) * NF + HASTTL)]:
        if not _alive(A, t, n, now):
            _q_unlink(A, t, 0 if w == W_MAIN else 1, n)
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
            _pend_expired(A, t, key)
            _release(A, t, n)
            return False
        _touch(A, t, n, now)
    if pol == POL_S3 and A[u(A[u(GB + B_NFREQ)] + nb + n)] < 3:
        A[u(A[u(GB + B_NFREQ)] + nb + n)] += 1
    return True


@njit(cache=True, _nrt=False)
def _s3_evict_one(A, t):
    """S3-FIFO's eviction (the reference's _evict_one); returns the victim's node (now a ghost or free)."""
    nb = A[u((t) * NF + NB)]
    while True:
        if A[u((t) * NF + QL1)] > 0 and (A[u((t) * NF + QL1)] >= A[u((t) * NF + SCAP)] or A[u((t) * NF + QL0)] == 0):
            n = A[u((t) * NF + QH1)]
            _q_unlink(A, t, 1, n)
            if A[u(A[u(GB + B_NFREQ)] + nb + n)] > 1:
                A[u(A[u(GB + B_NFREQ)] + nb + n)] = 0
                A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_MAIN
                _q_append(A, t, 0, n)
                continue
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_GHOST
            _q_append(A, t, 2, n)
            while A[u((t) * NF + QL2)] > A[u((t) * NF + MCAP)]:
                g = A[u((t) * NF + QH2)]
                _q_unlink(A, t, 2, g)
                A[u(A[u(GB + B_NODE)] + NW * (nb + g) + O_WHERE)] = W_NONE
                if g != n:
                    _release(A, t, g)
            return n
        n = A[u((t) * NF + QH0)]
        _q_unlink(A, t, 0, n)
        f = A[u(A[u(GB + B_NFREQ)] + nb + n)]
        if f > 0:
            A[u(A[u(GB + B_NFREQ)] + nb + n)] = f - 1
            _q_append(A, t, 0, n)
            continue
        A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
        return n


@njit(cache=True, _nrt=False, inline="always")
def _p_insert(A, t, n, now):
    """Admit node n's key to the policy; returns the evicted key's node or -1 (at most one: one in, one out).

    The victim node is left for the caller, which must call _release on it once done with its key."""
    D = A.view(np.float64)
    nb = A[u((t) * NF + NB)]
    pol = A[u((t) * NF + POL)]
    w = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)]
    if w == W_MAIN or w == W_SMALL:
        if pol == POL_LRU:
            D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] = now
            _q_unlink(A, t, 0, n)
            _q_append(A, t, 0, n)
        elif A[u((t) * NF + HASTTL)]:
            _touch(A, t, n, now)
        return -1
    victim = -1
    if pol == POL_S3:
        was_ghost = w == W_GHOST
        if was_ghost:
            _q_unlink(A, t, 2, n)
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
        if A[u((t) * NF + QL0)] + A[u((t) * NF + QL1)] >= A[u((t) * NF + CAP)]:
            victim = _s3_evict_one(A, t)
        A[u(A[u(GB + B_NFREQ)] + nb + n)] = 0
        if was_ghost:
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_MAIN
            _q_append(A, t, 0, n)
        else:
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_SMALL
            _q_append(A, t, 1, n)
        if A[u((t) * NF + HASTTL)]:
            _touch(A, t, n, now)
        return victim
    if A[u((t) * NF + QL0)] >= A[u((t) * NF + CAP)]:
        victim = A[u((t) * NF + QH0)]
        _q_unlink(A, t, 0, victim)
        A[u(A[u(GB + B_NODE)] + NW * (nb + victim) + O_WHERE)] = W_NONE
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_MAIN
    _q_append(A, t, 0, n)
    if pol == POL_LRU:
        D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] = now
    elif A[u((t) * NF + HASTTL)]:
        _touch(A, t, n, now)
    return victim


@njit(cache=True, _nrt=False)
def _p_remove(A, t, n):
    """Take node n's key out of the policy (and S3-FIFO's ghost); the caller releases the node."""
    nb = A[u((t) * NF + NB)]
    w = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)]
    if w == W_MAIN:
        _q_unlink(A, t, 0, n)
    elif w == W_SMALL:
        _q_unlink(A, t, 1, n)
    elif w == W_GHOST:
        _q_unlink(A, t, 2, n)
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE


@njit(cache=True, _nrt=False)
def _p_expire(A, t, now, out):
    """Keys dropped by retention since the last call (pending lookup expiries first); returns how many."""
    D = A.view(np.float64)
    nb = A[u((t) * NF + NB)]
    k = 0
    for j in range(A[u((t) * NF + PEN)]):
        out[k] = A[u(A[u(GB + B_PEXP)] + A[u((t) * NF + PEB)] + j)]
        k += 1
    A[u((t) * NF + PEN)] = 0
    if not A[u((t) * NF + HASTTL)]:
        return k
    ttl = D[u(A[u(GB + B_TTL)] + t)]
    if A[u((t) * NF + POL)] == POL_LRU:
        while A[u((t) * NF + QL0)] > 0:
            n = A[u((t) * NF + QH0)]
            if now - D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] <= ttl:     # lookup's form, float for float
                break
            _q_unlink(A, t, 0, n)
            A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
            out[k] = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_KEY)]
            k += 1
            _release(A, t, n)
        return k
    # the heap's order (deadline = last + ttl) is the order of last: the first live entry still alive by
    # lookup's form (now - last <= ttl) ends the scan; stale entries (touched again, evicted) are dropped
    b = A[u((t) * NF + HPB)]
    while A[u((t) * NF + HPN)] > 0:
        deadline, key = D[u(A[u(GB + B_HD)] + b)], A[u(A[u(GB + B_HK)] + b)]
        n = _find(A, t, key)
        if n < 0:
            _heap_pop(A, t)
            continue
        w = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)]
        if w != W_MAIN and w != W_SMALL:          # not in last (ghost or meta only)
            _heap_pop(A, t)
            continue
        last = D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)]
        if last + ttl != deadline:
            _heap_pop(A, t)
            continue
        if now - last <= ttl:
            break
        _heap_pop(A, t)
        _q_unlink(A, t, 0 if w == W_MAIN else 1, n)
        A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)] = W_NONE
        out[k] = key
        k += 1
        _release(A, t, n)
    return k


# ---- stores -----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False)
def _trim_seg(A, t, seg):
    if A[u((t) * NF + TRIMF)]:
        j = A[u((t) * NF + TRN)]
        A[u((t) * NF + TR0F + 2 * j)] = seg * A[u((t) * NF + SEGS)]
        A[u((t) * NF + TR0N + 2 * j)] = A[u((t) * NF + SEGS)]
        A[u((t) * NF + TRN)] = j + 1


@njit(cache=True, _nrt=False)
def _sealed_append(A, t, seg):
    b = A[u((t) * NF + SEGB)]
    tail = A[u((t) * NF + SLT)]
    A[u(A[u(GB + B_SPREV)] + b + seg)] = tail
    A[u(A[u(GB + B_SNEXT)] + b + seg)] = -1
    if tail >= 0:
        A[u(A[u(GB + B_SNEXT)] + b + tail)] = seg
    else:
        A[u((t) * NF + SLH)] = seg
    A[u((t) * NF + SLT)] = seg
    A[u(A[u(GB + B_SEALED)] + b + seg)] = 1


@njit(cache=True, _nrt=False)
def _sealed_unlink(A, t, seg):
    b = A[u((t) * NF + SEGB)]
    p, x = A[u(A[u(GB + B_SPREV)] + b + seg)], A[u(A[u(GB + B_SNEXT)] + b + seg)]
    if p >= 0:
        A[u(A[u(GB + B_SNEXT)] + b + p)] = x
    else:
        A[u((t) * NF + SLH)] = x
    if x >= 0:
        A[u(A[u(GB + B_SPREV)] + b + x)] = p
    else:
        A[u((t) * NF + SLT)] = p
    A[u(A[u(GB + B_SEALED)] + b + seg)] = 0


@njit(cache=True, _nrt=False)
def _fseg_push(A, t, seg):
    n = A[u((t) * NF + NSEG)]
    A[u(A[u(GB + B_FSEGS)] + A[u((t) * NF + SEGB)] + (A[u((t) * NF + FSH)] + A[u((t) * NF + FSN)]) % n)] = seg
    A[u((t) * NF + FSN)] += 1


@njit(cache=True, _nrt=False, inline="always")
def _alloc(A, t, key):
    """A slot for ``key``; dropped keys (log reclaim) go to the tier's drop buffer, trims to TR*."""
    A[u((t) * NF + DRN)] = 0
    A[u((t) * NF + TRN)] = 0
    sb = A[u((t) * NF + SLOTB)]
    if A[u((t) * NF + STORE)] == STORE_SLOT:
        slot = A[u(A[u(GB + B_SFREE)] + sb + A[u((t) * NF + SFH)])]
        h = A[u((t) * NF + SFH)] + 1                    # ring buffer: a compare, not a division
        A[u((t) * NF + SFH)] = 0 if h == A[u((t) * NF + NSLOTS)] else h
        A[u((t) * NF + SFN)] -= 1
        A[u((t) * NF + USED)] += 1
        return slot
    segs = A[u((t) * NF + SEGS)]
    gb = A[u((t) * NF + SEGB)]
    if A[u((t) * NF + LPOS)] == segs:
        head = A[u((t) * NF + LHEAD)]
        if A[u(A[u(GB + B_SEGL)] + gb + head)] == 0:
            _fseg_push(A, t, head)
            _trim_seg(A, t, head)
        else:
            _sealed_append(A, t, head)
        if A[u((t) * NF + FSN)] > 0:
            A[u((t) * NF + LHEAD)] = A[u(A[u(GB + B_FSEGS)] + gb + A[u((t) * NF + FSH)])]
            A[u((t) * NF + FSH)] = (A[u((t) * NF + FSH)] + 1) % A[u((t) * NF + NSEG)]
            A[u((t) * NF + FSN)] -= 1
        else:
            seg = A[u((t) * NF + SLH)]
            _sealed_unlink(A, t, seg)
            lo = seg * segs
            db = A[u((t) * NF + DRB)]
            nd = 0
            for s in range(lo, lo + segs):
                if A[u(A[u(GB + B_SLIVE)] + sb + s)]:
                    A[u(A[u(GB + B_DROP)] + db + nd)] = A[u(A[u(GB + B_SKEY)] + sb + s)]
                    nd += 1
                    A[u(A[u(GB + B_SLIVE)] + sb + s)] = 0
            A[u((t) * NF + DRN)] = nd
            A[u((t) * NF + USED)] -= nd
            A[u(A[u(GB + B_SEGL)] + gb + seg)] = 0
            A[u((t) * NF + RECLAIMED)] += 1
            A[u((t) * NF + DROPPED)] += nd
            _trim_seg(A, t, seg)
            A[u((t) * NF + LHEAD)] = seg
        A[u((t) * NF + LPOS)] = 0
    slot = A[u((t) * NF + LHEAD)] * segs + A[u((t) * NF + LPOS)]
    A[u((t) * NF + LPOS)] += 1
    A[u(A[u(GB + B_SKEY)] + sb + slot)] = key
    A[u(A[u(GB + B_SLIVE)] + sb + slot)] = 1
    A[u(A[u(GB + B_SEGL)] + gb + A[u((t) * NF + LHEAD)])] += 1
    A[u((t) * NF + USED)] += 1
    return slot


@njit(cache=True, _nrt=False, inline="always")
def _free(A, t, slot):
    """Release a slot; trims go to TR* (TRN of them)."""
    A[u((t) * NF + TRN)] = 0
    sb = A[u((t) * NF + SLOTB)]
    if A[u((t) * NF + STORE)] == STORE_SLOT:
        j = A[u((t) * NF + SFH)] + A[u((t) * NF + SFN)]
        if j >= A[u((t) * NF + NSLOTS)]:
            j -= A[u((t) * NF + NSLOTS)]
        A[u(A[u(GB + B_SFREE)] + sb + j)] = slot
        A[u((t) * NF + SFN)] += 1
        A[u((t) * NF + USED)] -= 1
        if A[u((t) * NF + TRIMF)]:
            A[u((t) * NF + TR0F)] = slot
            A[u((t) * NF + TR0N)] = 1
            A[u((t) * NF + TRN)] = 1
        return
    if not A[u(A[u(GB + B_SLIVE)] + sb + slot)]:
        return
    A[u(A[u(GB + B_SLIVE)] + sb + slot)] = 0
    A[u((t) * NF + USED)] -= 1
    gb = A[u((t) * NF + SEGB)]
    seg = slot // A[u((t) * NF + SEGS)]
    A[u(A[u(GB + B_SEGL)] + gb + seg)] -= 1
    if A[u(A[u(GB + B_SEGL)] + gb + seg)] == 0 and seg != A[u((t) * NF + LHEAD)]:
        if not A[u(A[u(GB + B_SEALED)] + gb + seg)]:
            return
        _sealed_unlink(A, t, seg)
        _fseg_push(A, t, seg)
        _trim_seg(A, t, seg)


@njit(cache=True, _nrt=False)
def _emit_trims(A, t):
    for j in range(A[u((t) * NF + TRN)]):
        n = A[u((t) * NF + TR0N + 2 * j)]
        _emit(A, t, EV_TRIM, TRIM, A[u((t) * NF + TR0F + 2 * j)], n, 0, -1)
        A[u((t) * NF + C_TRIMS)] += n
    A[u((t) * NF + TRN)] = 0


# ---- events -----------------------------------------------------------------------------------------------
@njit(cache=True, _nrt=False, inline="always")
def _ev_row(A, row, t, op, kind, slot, nslots, key, version):
    """Write event row ``row`` (the request being simulated, on tier t)."""
    e = A[u(GB + B_EV)] + 8 * row
    A[u(e)] = A[u(GB + G_REQ)]
    A[u(e + 1)] = A[u((t) * NF + LEVEL)]
    A[u(e + 2)] = op
    A[u(e + 3)] = kind
    A[u(e + 4)] = slot
    A[u(e + 5)] = nslots
    A[u(e + 6)] = key
    A[u(e + 7)] = version


@njit(cache=True, _nrt=False, inline="always")
def _emit(A, t, op, kind, slot, nslots, key, version):
    i = A[u(GB + G_NEV)]
    if i >= A[u(GB + G_EVCAP)]:             # the room reserved per request was not enough: nothing is written
        A[u(GB + G_ERR)] = ERR_EVENTS
        return
    _ev_row(A, i, t, op, kind, slot, nslots, key, version)
    A[u(GB + G_NEV)] = i + 1
    if A[u(GB + G_PHASE)] and op == EV_WRITE:        # a slot written while the request's blocks were looked up
        A[u(A[u(GB + B_SWR)] + A[u((t) * NF + SLOTB)] + slot)] = A[u(GB + G_MARK)]


# ---- the hierarchy ----------------------------------------------------------------------------------------
# ---- admission: ghost lists, the frequency sketch, the policies -------------------------------------------
@njit(cache=True, _nrt=False)
def _g_find(A, q, key):
    """Node of ``key`` in ghost q (relative to its pool), or -1."""
    h = A[u(GB + B_GH)] + q * GHF
    ht, mask, nk = A[u(GB + B_GHT)] + A[u(h + GH_HB)], A[u(h + GH_HM)], A[u(GB + B_GKEY)] + A[u(h + GH_NB)]
    i = _home(key, mask)
    while True:
        v = A[u(ht + i)]
        if v == 0:
            return -1
        if A[u(nk + v - 1)] == key:
            return v - 1
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def _g_unlink(A, q, n):
    h = A[u(GB + B_GH)] + q * GHF
    nb = A[u(h + GH_NB)]
    pv, nx = A[u(GB + B_GPREV)] + nb, A[u(GB + B_GNEXT)] + nb
    p, x = A[u(pv + n)], A[u(nx + n)]
    if p >= 0:
        A[u(nx + p)] = x
    else:
        A[u(h + GH_HEAD)] = x
    if x >= 0:
        A[u(pv + x)] = p
    else:
        A[u(h + GH_TAIL)] = p


@njit(cache=True, _nrt=False)
def _g_append(A, q, n):
    h = A[u(GB + B_GH)] + q * GHF
    nb = A[u(h + GH_NB)]
    tail = A[u(h + GH_TAIL)]
    A[u(A[u(GB + B_GPREV)] + nb + n)] = tail
    A[u(A[u(GB + B_GNEXT)] + nb + n)] = -1
    if tail >= 0:
        A[u(A[u(GB + B_GNEXT)] + nb + tail)] = n
    else:
        A[u(h + GH_HEAD)] = n
    A[u(h + GH_TAIL)] = n


@njit(cache=True, _nrt=False)
def _g_drop(A, q, n):
    """Take node n out of ghost q: list, table (backward-shift delete) and pool."""
    h = A[u(GB + B_GH)] + q * GHF
    _g_unlink(A, q, n)
    ht, mask, nk = A[u(GB + B_GHT)] + A[u(h + GH_HB)], A[u(h + GH_HM)], A[u(GB + B_GKEY)] + A[u(h + GH_NB)]
    i = _home(A[u(nk + n)], mask)
    while A[u(ht + i)] != n + 1:
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        v = A[u(ht + j)]
        if v == 0:
            break
        k = _home(A[u(nk + v - 1)], mask)
        if (j > i and (k <= i or k > j)) or (j < i and (k <= i and k > j)):
            A[u(ht + i)] = v
            i = j
    A[u(ht + i)] = 0
    A[u(A[u(GB + B_GFREE)] + A[u(h + GH_NB)] + A[u(h + GH_FTOP)])] = n
    A[u(h + GH_FTOP)] += 1
    A[u(h + GH_LEN)] -= 1


@njit(cache=True, _nrt=False)
def _g_put(A, q, key, val):
    """The reference's _Ghost.put: remember ``key`` (value ``val``) as the newest; forget the oldest beyond
    the ghost's size."""
    D = A.view(np.float64)
    h = A[u(GB + B_GH)] + q * GHF
    nb = A[u(h + GH_NB)]
    ht, mask, nk = A[u(GB + B_GHT)] + A[u(h + GH_HB)], A[u(h + GH_HM)], A[u(GB + B_GKEY)] + nb
    i = _home(key, mask)
    while True:
        v = A[u(ht + i)]
        if v == 0:
            break
        if A[u(nk + v - 1)] == key:                     # present: move to the end, new value
            _g_unlink(A, q, v - 1)
            _g_append(A, q, v - 1)
            D[u(A[u(GB + B_GVAL)] + nb + v - 1)] = val
            return
        i = (i + 1) & mask
    top = A[u(h + GH_FTOP)] - 1                          # the pool holds size + 1 nodes: never empty here
    n = A[u(A[u(GB + B_GFREE)] + nb + top)]
    A[u(h + GH_FTOP)] = top
    A[u(nk + n)] = key
    D[u(A[u(GB + B_GVAL)] + nb + n)] = val
    A[u(ht + i)] = n + 1
    _g_append(A, q, n)
    A[u(h + GH_LEN)] += 1
    if A[u(h + GH_LEN)] > A[u(h + GH_CAP)]:
        _g_drop(A, q, A[u(h + GH_HEAD)])


_SEEDS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93], dtype=np.uint64)
_PY_HASH_MOD = np.uint64((1 << 61) - 1)        # CPython's hash of a non-negative int: the int mod 2**61 - 1
_NIBBLE_HALF = np.int64(0x7777777777777777)


@njit(cache=True, _nrt=False)
def _sk_word(A, t, row, key):
    """(word index in A, bit shift) of ``key``'s 4-bit counter in sketch row ``row`` of tier t."""
    k = np.uint64(key) % _PY_HASH_MOD
    j = np.int64((k * _SEEDS[row]) >> np.uint64(A[u((t) * NF + SKSH)]))
    return A[u(GB + B_SK)] + A[u((t) * NF + SKB)] + row * A[u((t) * NF + SKW)] + (j >> 4), (j & 15) * 4


@njit(cache=True, _nrt=False)
def _sk_estimate(A, t, key):
    est = 15
    for row in range(4):
        w, sh = _sk_word(A, t, row, key)
        c = (A[u(w)] >> sh) & 15
        if c < est:
            est = c
    return est


@njit(cache=True, _nrt=False)
def _sk_count(A, t, key):
    """TinyLFU.observe: count a lookup (saturating at 15); age (halve every counter) after SKSAMP counts."""
    for row in range(4):
        w, sh = _sk_word(A, t, row, key)
        if (A[u(w)] >> sh) & 15 < 15:
            A[u(w)] += np.int64(1) << sh
    A[u((t) * NF + SKINC)] += 1
    if A[u((t) * NF + SKINC)] >= A[u((t) * NF + SKSAMP)]:
        b = A[u(GB + B_SK)] + A[u((t) * NF + SKB)]
        for i in range(4 * A[u((t) * NF + SKW)]):
            A[u(b + i)] = (A[u(b + i)] >> 1) & _NIBBLE_HALF
        A[u((t) * NF + SKINC)] //= 2
        A[u((t) * NF + SKRES)] += 1


@njit(cache=True, _nrt=False)
def _adm_begin(A, t, keys, a, n):
    """PrefixDepth.begin_request with beyond_shared: the shared prefix (leading keys seen before) sets the
    request's depth limit; every key of the request is remembered."""
    q = A[u((t) * NF + ADMG0)]
    shared = 0
    while shared < n and _g_find(A, q, keys[u(a + shared)]) >= 0:
        shared += 1
    for i in range(n):
        _g_put(A, q, keys[u(a + i)], 0.0)
    limit = shared + A[u((t) * NF + ABEYOND)]
    if A[u((t) * NF + ADEPTH)] >= 0 and A[u((t) * NF + ADEPTH)] < limit:
        limit = A[u((t) * NF + ADEPTH)]
    A[u((t) * NF + ALIMIT)] = limit


@njit(cache=True, _nrt=False)
def _adm_observe(A, t, key, now, depth):
    """A lookup of ``key`` (``depth`` in the request's prefix) reached tier t: the policy's observe."""
    pol = A[u((t) * NF + ADM)]
    if pol == ADM_TINYLFU:
        _sk_count(A, t, key)
    elif pol == ADM_PREFIX:
        q = A[u((t) * NF + ADMG1)]
        if depth >= A[u((t) * NF + ALIMIT)]:
            _g_put(A, q, key, 0.0)
        else:
            n = _g_find(A, q, key)
            if n >= 0:
                _g_drop(A, q, n)
    elif pol == ADM_THRESHOLD and A[u((t) * NF + AWIN)]:
        D = A.view(np.float64)
        q = A[u((t) * NF + ADMG0)]
        n = _g_find(A, q, key)
        gap = np.inf
        if n >= 0:
            gap = now - D[u(A[u(GB + B_GVAL)] + A[u(A[u(GB + B_GH)] + q * GHF + GH_NB)] + n)]
        A[u((t) * NF + GAPK)] = key
        A[u((t) * NF + GAPSET)] = 1
        D[u(A[u(GB + B_ADMF)] + 2 * t + 1)] = gap
        _g_put(A, q, key, now)


@njit(cache=True, _nrt=False)
def _admit(A, t, key, now, depth):
    """May tier t take ``key`` (``depth`` in the request's prefix, -1 for a demotion)? The policies' admit."""
    pol = A[u((t) * NF + ADM)]
    if pol == ADM_SECOND:
        q = A[u((t) * NF + ADMG0)]
        if _g_find(A, q, key) >= 0:
            return True
        _g_put(A, q, key, 0.0)
        return False
    if pol == ADM_TINYLFU:
        if A[u((t) * NF + POL)] == POL_S3:
            if A[u((t) * NF + QL0)] + A[u((t) * NF + QL1)] < A[u((t) * NF + CAP)]:
                return True
            ql1 = A[u((t) * NF + QL1)]
            v = A[u((t) * NF + QH1)] if ql1 > 0 and (ql1 >= A[u((t) * NF + SCAP)] or A[u((t) * NF + QL0)] == 0) \
                else A[u((t) * NF + QH0)]
        else:
            if A[u((t) * NF + QL0)] < A[u((t) * NF + CAP)]:
                return True
            v = A[u((t) * NF + QH0)]
        victim = A[u(A[u(GB + B_NODE)] + NW * (A[u((t) * NF + NB)] + v) + O_KEY)]
        return _sk_estimate(A, t, key) > _sk_estimate(A, t, victim)
    if pol == ADM_PREFIX:
        if depth < 0:
            return _g_find(A, A[u((t) * NF + ADMG1)], key) < 0
        return depth < A[u((t) * NF + ALIMIT)]
    if pol == ADM_THRESHOLD:
        if depth >= 0 and A[u(GB + G_BLOCKS)] < A[u((t) * NF + AMINB)]:
            return False
        if not A[u((t) * NF + AWIN)]:
            return True
        D = A.view(np.float64)
        window = D[u(A[u(GB + B_ADMF)] + 2 * t)]
        if depth >= 0 and A[u((t) * NF + GAPSET)] and A[u((t) * NF + GAPK)] == key:
            return D[u(A[u(GB + B_ADMF)] + 2 * t + 1)] <= window
        q = A[u((t) * NF + ADMG0)]
        n = _g_find(A, q, key)
        return n >= 0 and now - D[u(A[u(GB + B_GVAL)] + A[u(A[u(GB + B_GH)] + q * GHF + GH_NB)] + n)] <= window
    return True


# The reference's _insert and _evict call each other (an eviction demotes into the next tier, which may evict
# in turn). numba cannot cache recursive functions (numba#6061: the cached code segfaults), so _cascade runs the
# recursion as a loop over an explicit stack: a chain goes down one tier per step, so a tier has at most one open
# insert frame and one open evict frame, kept in its row (FK..FPH, EN..EFREED). The steps below are the shared,
# non-recursive parts; each has one call site in _cascade and is inlined there (one copy of the whole chain, no
# calls between its steps).
@njit(cache=True, _nrt=False, inline="always")
def _ins_begin(A, t, key, kind, now, depth):
    """First half of an insert: refresh a resident key, or admit it and make room. Returns (node, victim
    node or -1); node -1 when the insert is over (refreshed, refused, or out of nodes)."""
    nb = A[u((t) * NF + NB)]
    n = _node(A, t, key)
    if n < 0:
        return -1, -1
    if A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_META)]:                       # already resident (same content): refresh only
        v = _p_insert(A, t, n, now)
        if v >= 0:
            _release(A, t, v)               # the reference ignores this eviction (it cannot happen in order)
        return -1, -1
    if A[u((t) * NF + ADM)] != ADM_ALL and not _admit(A, t, key, now, depth):
        A[u((t) * NF + C_REJECT)] += 1
        _release(A, t, n)
        return -1, -1
    v = _p_insert(A, t, n, now)
    if v >= 0:
        A[u((t) * NF + C_EVICT)] += 1
    return n, v


@njit(cache=True, _nrt=False, inline="always")
def _ins_alloc(A, t, key):
    """The insert's slot (-1 on L1); the keys a log reclaim dropped are in the tier's drop buffer (DRN)."""
    if A[u((t) * NF + STORE)] == STORE_NONE:
        A[u((t) * NF + DRN)] = 0
        return -1
    return _alloc(A, t, key)


@njit(cache=True, _nrt=False, inline="always")
def _ins_drop(A, t, j):
    """The j-th key a reclaim dropped: out of the policy; returns it and its node (the caller evicts it, freed)."""
    victim = A[u(A[u(GB + B_DROP)] + A[u((t) * NF + DRB)] + j)]
    n = _find(A, t, victim)
    _p_remove(A, t, n)
    A[u((t) * NF + C_RECLAIM)] += 1
    return victim, n


@njit(cache=True, _nrt=False, inline="always")
def _ins_finish(A, t, n, key, version, kind, slot):
    nb = A[u((t) * NF + NB)]
    A[u((t) * NF + DRN)] = 0
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_META)] = 1
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_SLOT)] = slot
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_VER)] = version
    A[u((t) * NF + NMETA)] += 1
    if A[u((t) * NF + STORE)] != STORE_NONE:
        if A[u((t) * NF + TRN)]:
            _emit_trims(A, t)
        _emit(A, t, EV_WRITE, kind, slot, 1, key, version)
    if kind == CREATE_WRITE:
        A[u((t) * NF + C_CREATE)] += 1
    elif kind == PROMOTE_WRITE:
        A[u((t) * NF + C_PROMOTE)] += 1
    else:
        A[u((t) * NF + C_DEMOTE_WRITES)] += 1
    if A[u((t) * NF + NMETA)] > A[u((t) * NF + C_PEAK)]:
        A[u((t) * NF + C_PEAK)] = A[u((t) * NF + NMETA)]


@njit(cache=True, _nrt=False, inline="always")
def _ev_begin(A, t, key, n):
    """First half of an eviction (the policy already dropped ``key``, whose node is ``n``, or -1: look it up):
    pop the meta, emit the demotion read. Returns (node, slot, version, demote?); node -1 when there is nothing
    more to do."""
    nb = A[u((t) * NF + NB)]
    if n < 0:
        n = _find(A, t, key)
    if n < 0:
        return -1, -1, -1, False
    if not A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_META)]:
        _release(A, t, n)
        return -1, -1, -1, False
    slot, version = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_SLOT)], A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_VER)]
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_META)] = 0
    A[u((t) * NF + NMETA)] -= 1
    demote = False
    if A[u(GB + G_DEMOTE)] and t + 1 < A[u(GB + G_NT)]:
        if not _resident(A, t + 1, key):
            if A[u((t) * NF + STORE)] != STORE_NONE:
                _emit(A, t, EV_READ, DEMOTE_READ, slot, 1, key, version)
                A[u((t) * NF + C_DEMOTE_READS)] += 1
            demote = True
    return n, slot, version, demote


@njit(cache=True, _nrt=False, inline="always")
def _ev_end(A, t, n, slot, freed):
    if A[u((t) * NF + STORE)] != STORE_NONE and not freed:
        _free(A, t, slot)
        if A[u((t) * NF + TRN)]:
            _emit_trims(A, t)
    _release(A, t, n)


OP_INS, OP_INS_NEXT, OP_EV, OP_RET_INS, OP_RET_EV = range(5)


@njit(cache=True, _nrt=False)
def _cascade(A, root_t, root_evict, key, version, kind, now, depth, node, freed):
    """An insert of ``key`` (content ``version``, write ``kind``, ``depth`` in the request's prefix) into tier
    ``root_t``, or with ``root_evict`` the eviction of ``key`` (its node or -1, ``freed``: its slot already
    reclaimed) from it, with every eviction, demotion and reclaim it causes, in the reference's order."""
    t = root_t
    op = OP_EV if root_evict else OP_INS
    ekey, enode, efreed = key, node, freed          # the eviction OP_EV begins
    while True:
        if op == OP_INS:                            # _insert(t, key, version, kind, depth): first half
            n, v = _ins_begin(A, t, key, kind, now, depth)
            if n < 0:
                op = OP_RET_INS
                continue
            row = t * NF
            A[u(row + FK)], A[u(row + FV)], A[u(row + FKIND)], A[u(row + FN)], A[u(row + FPH)] = key, version, kind, n, 0
            if v >= 0:                              # evict the policy's victim first
                ekey, enode, efreed = A[u(A[u(GB + B_NODE)] + NW * (A[u(row + NB)] + v) + O_KEY)], v, 0
                op = OP_EV
                continue
            op = OP_INS_NEXT
        elif op == OP_INS_NEXT:                     # the insert frame at t resumes: its slot, then log drops
            row = t * NF
            if A[u(row + FPH)] == 0:
                A[u(row + FSLOT)] = _ins_alloc(A, t, A[u(row + FK)])
                A[u(row + FPH)], A[u(row + FJ)], A[u(row + FJN)] = 1, 0, A[u(row + DRN)]
            j = A[u(row + FJ)]
            if j < A[u(row + FJN)]:
                A[u(row + FJ)] = j + 1
                ekey, enode = _ins_drop(A, t, j)
                efreed = 1
                op = OP_EV
                continue
            _ins_finish(A, t, A[u(row + FN)], A[u(row + FK)], A[u(row + FV)], A[u(row + FKIND)], A[u(row + FSLOT)])
            op = OP_RET_INS
        elif op == OP_EV:                           # _evict(t, ekey, efreed, enode)
            n, slot, ver, demote = _ev_begin(A, t, ekey, enode)
            if n < 0:
                op = OP_RET_EV
                continue
            if demote:                              # into the next tier; the slot is freed when that is over
                row = t * NF
                A[u(row + EN)], A[u(row + ESLOT)], A[u(row + EFREED)] = n, slot, efreed
                key, version, kind, depth = ekey, ver, DEMOTE_WRITE, -1
                t += 1
                op = OP_INS
                continue
            _ev_end(A, t, n, slot, efreed != 0)
            op = OP_RET_EV
        elif op == OP_RET_INS:                      # the insert at t is over
            if t == root_t:                         # (a root eviction's inserts are all below its tier)
                return
            t -= 1                                  # it was the demotion of the evict frame at t - 1
            row = t * NF
            _ev_end(A, t, A[u(row + EN)], A[u(row + ESLOT)], A[u(row + EFREED)] != 0)
            op = OP_RET_EV
        else:                                       # OP_RET_EV: the eviction at t is over
            if root_evict and t == root_t:
                return
            op = OP_INS_NEXT                        # back to the insert frame at t that evicted


@njit(cache=True, _nrt=False)
def _evict(A, t, key, freed, now, node):
    """``key`` left tier t (its policy already dropped it): demote it if asked, free its slot."""
    # root_evict as an int64, not a literal True/False: numba compiles a function once per literal argument, and
    # two copies of _cascade were 10 of the 34 CPU seconds run_requests took to compile (cold cache)
    _cascade(A, np.int64(t), np.int64(1), np.int64(key), np.int64(-1), np.int64(DEMOTE_WRITE), np.float64(now),
             np.int64(-1), np.int64(node), np.int64(1 if freed else 0))


@njit(cache=True, _nrt=False)
def _insert(A, t, key, version, kind, now, depth):
    """Put ``key`` (content ``version``, ``depth`` in the request's prefix) in tier t, evicting (and demoting)
    what it displaces."""
    _cascade(A, np.int64(t), np.int64(0), np.int64(key), np.int64(version), np.int64(kind), np.float64(now),
             np.int64(depth), np.int64(-1), np.int64(0))


@njit(cache=True, _nrt=False)
def _remove(A, t, key):
    """Take ``key`` out of tier t without demotion (exclusive promotion)."""
    nb = A[u((t) * NF + NB)]
    n = _find(A, t, key)
    _p_remove(A, t, n)
    A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_META)] = 0
    A[u((t) * NF + NMETA)] -= 1
    if A[u((t) * NF + STORE)] != STORE_NONE:
        _free(A, t, A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_SLOT)])
        if A[u((t) * NF + TRN)]:
            _emit_trims(A, t)
    _release(A, t, n)


@njit(cache=True, _nrt=False)
def _resident(A, t, key):
    n = _find(A, t, key)
    return n >= 0 and A[u(A[u(GB + B_NODE)] + NW * (A[u((t) * NF + NB)] + n) + O_META)] != 0


@njit(cache=True, _nrt=False)
def _shift_tail(A, a, b, by):
    """Move event rows [a, b) to [a + by, b + by) (overlapping: copy from the end)."""
    e = A[u(GB + B_EV)]
    for i in range(8 * b - 1, 8 * a - 1, -1):
        A[u(e + i + 8 * by)] = A[u(e + i)]


@njit(cache=True, _nrt=False)
def run_requests(A, times, offsets, keys, first_request, reqs, xbuf, found, versions, hitrow):
    """Simulate requests (CSR keys as int64 bit patterns); fills reqs (n, 8) and the event rows in A.

    Returns the number of requests done (fewer than asked only when A[GB + G_ERR] is set: the state is then
    inconsistent and the caller must rebuild it)."""
    nt = A[u(GB + G_NT)]
    nreq = times.shape[0]
    for r in range(nreq):
        now = times[r]
        a, b = offsets[r], offsets[r + 1]
        n = b - a
        # room for this request: free nodes in every pool (pools start small and grow as tiers fill) and event
        # rows (bounds of what a request of n blocks can take, as the caller's _ev_need); grown between requests
        A[u(GB + G_NEED)] = 8 * n + 256 + 4 * A[u(GB + G_MAXSEGS)]
        A[u(GB + G_EVNEED)] = (nt + 1) * (8 * (n + 1) + 8 * A[u(GB + G_SUMSEGS)]) + 64
        for t in range(nt):
            if A[u((t) * NF + FTOP)] < A[u(GB + G_NEED)] and A[u((t) * NF + NN)] < A[u((t) * NF + NNMAX)]:
                A[u(GB + G_ERR)] = NEED_GROW
                return r
        if A[u(GB + G_EVCAP)] - A[u(GB + G_NEV)] < A[u(GB + G_EVNEED)]:
            A[u(GB + G_ERR)] = NEED_GROW
            return r
        A[u(GB + G_REQ)] = first_request + r
        A[u(GB + G_MARK)] += 1
        A[u(GB + G_PHASE)] = 1
        start = A[u(GB + G_NEV)]
        for t in range(nt):
            k = _p_expire(A, t, now, xbuf)
            for j in range(k):
                A[u((t) * NF + C_EXPIRE)] += 1
                _evict(A, t, xbuf[u(j)], False, now, -1)
        A[u(GB + G_BLOCKS)] = n
        adm = False
        for t in range(nt):
            if A[u((t) * NF + ADM)] != ADM_ALL:
                adm = True
                if A[u((t) * NF + ADM)] == ADM_PREFIX and A[u((t) * NF + ABEYOND)] >= 0:
                    _adm_begin(A, t, keys, a, n)
        produced = 0
        for i in range(n - 1, -1, -1):
            key = keys[u(a + i)]
            found[u(i)] = -1
            for t in range(nt):
                if adm and A[u((t) * NF + ADM)] != ADM_ALL:
                    _adm_observe(A, t, key, now, i)
                if _p_lookup(A, t, key, now):
                    found[u(i)] = t
                    break
            if found[u(i)] < 0:
                version = A[u(GB + G_SEQ)]
                A[u(GB + G_SEQ)] += 1
                produced += 1
                for j in range(A[u(GB + G_NCREATE)]):
                    _insert(A, A[u(GB + G_CREATE0 + j)], key, version, CREATE_WRITE, now, i)
            if A[u(GB + G_ERR)]:
                return r
        h = 0
        while h < n and found[u(h)] >= 0:
            h += 1
        A[u(GB + G_PHASE)] = 0
        loop_end = A[u(GB + G_NEV)]
        # hit reads: loads first, then the loop's events, then reads of slots the loop wrote ("late")
        for lv in range(4):
            hitrow[u(lv)] = 0
        nload = 0
        nlate = 0
        req_mark = A[u(GB + G_MARK)]
        for i in range(h):
            t = found[u(i)]
            nb = A[u((t) * NF + NB)]
            nd = _find(A, t, keys[u(a + i)])
            if nd < 0 or not A[u(A[u(GB + B_NODE)] + NW * (nb + nd) + O_META)]:
                A[u(GB + G_ERR)] = ERR_META
                return r
            slot, version = A[u(A[u(GB + B_NODE)] + NW * (nb + nd) + O_SLOT)], A[u(A[u(GB + B_NODE)] + NW * (nb + nd) + O_VER)]
            versions[u(i)] = version
            hitrow[u(A[u((t) * NF + LEVEL)])] += 1
            A[u((t) * NF + C_HIT_BLOCKS)] += 1
            if A[u((t) * NF + STORE)] != STORE_NONE:
                A[u((t) * NF + C_HIT_READS)] += 1
                if loop_end > start and A[u(A[u(GB + B_SWR)] + A[u((t) * NF + SLOTB)] + slot)] == req_mark:
                    nlate += 1
                else:
                    nload += 1
        if nload + nlate:
            need = loop_end + nload + nlate
            if need > A[u(GB + G_EVCAP)]:
                A[u(GB + G_ERR)] = ERR_EVENTS
                return r
            _shift_tail(A, start, loop_end, nload)
            pl, pt = start, loop_end + nload
            for i in range(h):
                t = found[u(i)]
                if A[u((t) * NF + STORE)] == STORE_NONE:
                    continue
                nb = A[u((t) * NF + NB)]
                nd = _find(A, t, keys[u(a + i)])
                slot = A[u(A[u(GB + B_NODE)] + NW * (nb + nd) + O_SLOT)]
                late = loop_end > start and A[u(A[u(GB + B_SWR)] + A[u((t) * NF + SLOTB)] + slot)] == req_mark
                _ev_row(A, pt if late else pl, t, EV_READ, HIT_READ, slot, 1, keys[u(a + i)], versions[u(i)])
                if late:
                    pt += 1
                else:
                    pl += 1
            A[u(GB + G_NEV)] = need
        # promotion, deepest-first
        for i in range(h - 1, -1, -1):
            ti = found[u(i)]
            if ti == 0:
                continue
            key, version = keys[u(a + i)], versions[u(i)]
            if A[u(GB + G_EXCL)]:
                for tj in range(1, nt):
                    if _resident(A, tj, key):
                        _remove(A, tj, key)
                _insert(A, 0, key, version, PROMOTE_WRITE, now, i)
            elif A[u(GB + G_PROMOTE)]:
                for tj in range(ti - 1, -1, -1):
                    if not _resident(A, tj, key):
                        _insert(A, tj, key, version, PROMOTE_WRITE, now, i)
            elif A[u(GB + G_TOPL1)]:
                if not _resident(A, 0, key):
                    _insert(A, 0, key, version, PROMOTE_WRITE, now, i)
            if A[u(GB + G_ERR)]:
                return r
        A[u(GB + G_PRODUCED)] += produced
        reqs[r, 0] = first_request + r
        reqs[r, 1] = n
        reqs[r, 2] = h
        for lv in range(4):
            reqs[r, 3 + lv] = hitrow[u(lv)]
        reqs[r, 7] = produced
    return nreq


@njit(cache=True, _nrt=False)
def rehash(old_ht, old_hb, old_size, ht, hb, mask):
    """Enter the (node, key) entries of an old table region into a new (larger) one (arrays are the regions
    themselves)."""
    for i in range(old_size):
        v = old_ht[old_hb + 2 * i]
        if v == 0:
            continue
        key = old_ht[old_hb + 2 * i + 1]
        j = _home(key, mask)
        while ht[hb + 2 * j] != 0:
            j = (j + 1) & mask
        ht[hb + 2 * j] = v
        ht[hb + 2 * j + 1] = key


@njit(cache=True)
def tier_keys(A, t, meta_only):
    """Keys (int64 bit patterns) with meta in tier t, and their slots and versions."""
    nb = A[u((t) * NF + NB)]
    out = np.empty(A[u((t) * NF + NMETA)], np.int64)
    slots = np.empty(A[u((t) * NF + NMETA)], np.int64)
    vers = np.empty(A[u((t) * NF + NMETA)], np.int64)
    k = 0
    ht = A[u(GB + B_HT)] + A[u((t) * NF + HB)]
    for i in range(A[u((t) * NF + HM)] + 1):
        v = A[u(ht + 2 * i)]
        if v != 0:
            e = A[u(GB + B_NODE)] + NW * (nb + v - 1)
            if A[u(e + O_META)]:
                out[k] = A[u(e + O_KEY)]
                slots[k] = A[u(e + O_SLOT)]
                vers[k] = A[u(e + O_VER)]
                k += 1
    return out[:k], slots[:k], vers[:k]


@njit(cache=True)
def fill_events(A, out):
    """The event rows of A into ``out`` (an EVENT_DTYPE array of G_NEV rows): one pass, not a copy per field."""
    eb = A[u(GB + B_EV)]
    for i in range(out.shape[0]):
        e = eb + 8 * i
        r = out[i]
        r.request = A[u(e)]
        r.tier = A[u(e + 1)]
        r.op = A[u(e + 2)]
        r.kind = A[u(e + 3)]
        r.slot = A[u(e + 4)]
        r.nslots = A[u(e + 5)]
        r.key = A[u(e + 6)]
        r.version = A[u(e + 7)]


@njit(cache=True)
def count_events(A, n, slots):
    """The event rows of A (G_NEV of them) added to their (tier, op) cells as ``event_counts`` adds an EVENT_DTYPE
    array's: a run that needs only its planned I/O (a dry run) skips laying the rows out."""
    eb = A[u(GB + B_EV)]
    for i in range(A[u(GB + G_NEV)]):
        e = eb + 8 * i
        c = A[u(e + 1)] * 3 + A[u(e + 2)]
        n[u(c)] += 1
        slots[u(c)] += A[u(e + 5)]


@njit(cache=True, nogil=True)
def event_counts(events, n, slots):
    """Add each event row (EVENT_DTYPE) to its (tier, op) cell, ``tier * 3 + op``: ``n`` the rows, ``slots`` their
    slots (a segment trim covers several). One pass over the rows; a replay's planned I/O per window."""
    for i in range(events.shape[0]):
        e = events[i]
        c = np.int64(e.tier) * 3 + np.int64(e.op)
        n[c] += 1
        slots[c] += e.nslots


@njit(cache=True)
def fill_requests(rows, times, out):
    """run_requests' per-request rows (request, blocks, hits, hits per level, produced) into a REQUEST_DTYPE array."""
    for i in range(out.shape[0]):
        r = out[i]
        r.request = rows[i, 0]
        r.arrival_s = times[i]
        r.blocks = rows[i, 1]
        r.hit_blocks = rows[i, 2]
        r.hit_l1 = rows[i, 3]
        r.hit_l2 = rows[i, 4]
        r.hit_l3 = rows[i, 5]
        r.hit_l4 = rows[i, 6]
        r.produced = rows[i, 7]


@njit(cache=True, _nrt=False)
def sketch_estimate(A, t, key):
    """TinyLFU's estimate of ``key`` (int64 bit pattern) in tier t's compiled sketch (for inspection)."""
    return _sk_estimate(A, t, key)


@njit(cache=True, _nrt=False)
def _contains(A, t, key, now):
    """The policy's ``contains``: held (not a ghost) and within its retention; no recency change."""
    n = _find(A, t, key)
    if n < 0:
        return False
    nb = A[u((t) * NF + NB)]
    w = A[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_WHERE)]
    if w != W_MAIN and w != W_SMALL:
        return False
    if not A[u((t) * NF + HASTTL)]:
        return True
    D = A.view(np.float64)
    return now - D[u(A[u(GB + B_NODE)] + NW * (nb + n) + O_LAST)] <= D[u(A[u(GB + B_TTL)] + t)]


@njit(cache=True, _nrt=False)
def cached_prefix(A, tiers, keys, now):
    """Leading keys (int64 bit patterns) some tier in ``tiers`` holds (by the policies' contains)."""
    for i in range(keys.shape[0]):
        held = False
        for t in tiers:
            if _contains(A, t, keys[u(i)], now):
                held = True
                break
        if not held:
            return i
    return keys.shape[0]


@njit(cache=True)
def cached_prefix_nodes(A, hdr, tiers, keys, now, out):
    """:func:`cached_prefix` of every node of a shared pool's buffer (node j's state is A from j * hdr on:
    :class:`kvbench.sim.shared_pool.SharedPool`), into ``out[j]``: one call for a router's question to all nodes."""
    for j in range(out.shape[0]):
        out[j] = cached_prefix(A[j * hdr:], tiers, keys, now)
