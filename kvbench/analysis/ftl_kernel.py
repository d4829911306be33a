"""The FTL model's compiled kernel (:class:`kvbench.analysis.ftl.Ftl` calls it through ``ftl._kernel``).

A module of its own, with the kernel at module level, so that numba's on-disk cache finds it again in the next
process: defined inside a function, it closed over ``kvbench.kernels.u`` (a dispatcher), and numba keys a
closure's cache entry on the pickled bytes of its cells, which differ in every process, so each process
compiled it again (1.4 s) and appended one more entry to the cache index (280 of them on the dev VM).

One monolithic loop with the scalar state (frontier, free ring, FIFO ring, counters) in locals: helper
functions taking the arrays made numba reference-count every array on every page (5x slower).
"""

from __future__ import annotations

from numba import njit

from kvbench.kernels import u


@njit(cache=True, nogil=True)
def apply(ops, starts, counts, streams, l2p, p2l, valid, state, head, nxt, prv, ring, rmeta, free, fmeta,
          cur, bstream, counters, bp, kind, min_free, gc_age):
    nb = free.shape[0]
    ns = cur.shape[0] // 2
    f_head, f_tail, f_count = fmeta[0], fmeta[1], fmeta[2]
    r_head, r_tail, r_count = rmeta[0], rmeta[1], rmeta[2]
    n_host, n_nand, n_gc, n_erase, n_trim, err = (counters[0], counters[1], counters[2], counters[3],
                                                 counters[4], counters[5])
    for i in range(ops.shape[0]):
        op = ops[u(i)]
        if op != 1 and op != 2:
            continue
        s = starts[u(i)]
        for lpn in range(s, s + counts[u(i)]):
            old = l2p[u(lpn)]
            if old >= 0:  # invalidate the old copy; a closed block moves down one valid-count bucket
                ob = old // bp
                p2l[u(old)] = -1
                v = valid[u(ob)]
                valid[u(ob)] = v - 1
                if kind == 0 and state[u(ob)] == 2:
                    if prv[u(ob)] >= 0:
                        nxt[u(prv[u(ob)])] = nxt[u(ob)]
                    else:
                        head[u(v)] = nxt[u(ob)]
                    if nxt[u(ob)] >= 0:
                        prv[u(nxt[u(ob)])] = prv[u(ob)]
                    nxt[u(ob)] = head[u(v - 1)]
                    prv[u(ob)] = -1
                    if head[u(v - 1)] >= 0:
                        prv[u(head[u(v - 1)])] = ob
                    head[u(v - 1)] = ob
            if op == 2:
                if old >= 0:
                    l2p[u(lpn)] = -1
                    n_trim += 1
                continue
            # the host page, then (GC) each valid page of a victim: append at its stream's write frontier
            victim = -1
            vi = 0
            vs = 0
            page = lpn
            while True:
                ws = streams[u(i)] if victim < 0 else vs
                blk, wp = cur[u(2 * ws)], cur[u(2 * ws + 1)]
                if wp == bp:  # close the open block, open the next free one
                    state[u(blk)] = 2
                    v = valid[u(blk)]
                    if kind == 0:
                        nxt[u(blk)] = head[u(v)]
                        prv[u(blk)] = -1
                        if head[u(v)] >= 0:
                            prv[u(head[u(v)])] = blk
                        head[u(v)] = blk
                    else:
                        ring[u(r_tail)] = blk
                        r_tail = (r_tail + 1) % nb
                        r_count += 1
                    if f_count == 0:
                        err = 1  # out of free blocks: validate() makes this impossible
                        break
                    blk = free[u(f_head)]
                    f_head = (f_head + 1) % nb
                    f_count -= 1
                    state[u(blk)] = 1
                    bstream[u(blk)] = ws
                    wp = 0
                ppn = blk * bp + wp
                wp += 1
                cur[u(2 * ws)], cur[u(2 * ws + 1)] = blk, wp
                l2p[u(page)] = ppn
                p2l[u(ppn)] = page
                valid[u(blk)] += 1
                n_nand += 1
                if victim < 0:
                    n_host += 1
                else:
                    n_gc += 1
                # next page to copy: continue the victim's scan, or pick a victim when free blocks ran low
                page = -1
                while page < 0:
                    if victim >= 0:
                        while vi < bp and p2l[u(victim * bp + vi)] < 0:
                            vi += 1
                        if vi < bp:
                            q = victim * bp + vi
                            page = p2l[u(q)]
                            p2l[u(q)] = -1
                            valid[u(victim)] -= 1
                            vi += 1
                            break
                        state[u(victim)] = 0  # victim empty: erase it
                        valid[u(victim)] = 0
                        free[u(f_tail)] = victim
                        f_tail = (f_tail + 1) % nb
                        f_count += 1
                        n_erase += 1
                        victim = -1
                    if f_count >= min_free:
                        break
                    if kind == 0:
                        for v in range(bp + 1):
                            if head[u(v)] >= 0:
                                victim = head[u(v)]
                                head[u(v)] = nxt[u(victim)]
                                if nxt[u(victim)] >= 0:
                                    prv[u(nxt[u(victim)])] = -1
                                break
                    elif r_count > 0:
                        victim = ring[u(r_head)]
                        r_head = (r_head + 1) % nb
                        r_count -= 1
                    if victim < 0:
                        err = 2
                        break
                    state[u(victim)] = 3  # being cleaned: invalidations no longer move it between buckets
                    vi = 0
                    vs = bstream[u(victim)]
                    if gc_age != 0 and vs < ns - 1:
                        vs += 1
                if page < 0 or err != 0:
                    break
            if err != 0:
                break
        if err != 0:
            break
    fmeta[0], fmeta[1], fmeta[2] = f_head, f_tail, f_count
    rmeta[0], rmeta[1], rmeta[2] = r_head, r_tail, r_count
    counters[0], counters[1], counters[2], counters[3], counters[4], counters[5] = (n_host, n_nand, n_gc,
                                                                                 n_erase, n_trim, err)
