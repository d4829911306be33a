"""The compiled tier simulation equals the Python reference on randomized traces, for every policy combination.

Requests, block events (order included), per-tier counters, residency, store occupancy and production must be
identical: :class:`Hierarchy` is a transcription of :class:`ReferenceHierarchy`, which is the definition.
"""

from __future__ import annotations

from tests.conftest import pairwise_lanes

import numpy as np
import pytest

from kvbench.sim.tiers import Hierarchy, HierarchySpec, ReferenceHierarchy, TierSpec

BB = 8192


def _random_trace(seed: int, n_req: int = 160, long_tail: bool = False):
    """Conversations sharing prefixes (so there are hits), random lengths, float arrival gaps."""
    rng = np.random.default_rng(seed)
    convs = [list(rng.integers(1, 2**63, 3)) for _ in range(6)]
    reqs, times, t = [], [], 0.0
    for _ in range(n_req):
        c = convs[rng.integers(len(convs))]
        grow = int(rng.integers(0, 4))
        c.extend(rng.integers(1, 2**64 - 1, grow, dtype=np.uint64).tolist())
        cut = int(rng.integers(1, len(c) + 1))
        keys = list(c[:cut])
        if long_tail and rng.random() < 0.05:
            keys += rng.integers(1, 2**64 - 1, 60, dtype=np.uint64).tolist()
        reqs.append(keys)
        t += float(rng.exponential(1.0))
        times.append(t)
        if rng.random() < 0.1:
            convs[rng.integers(len(convs))] = list(rng.integers(1, 2**63, 2))
    offsets = np.cumsum([0] + [len(r) for r in reqs]).astype(np.int64)
    keys = np.array([int(k) for r in reqs for k in r], dtype=np.uint64)
    return np.array(times), offsets, keys


def _spec(seed, policy, ttl, wp_incl, promote, layout):
    rng = np.random.default_rng(seed)
    names = [n for n in ("l1", "l2", "l3", "l4") if rng.random() < 0.7] or ["l2"]
    if len(names) == 1 and rng.random() < 0.5:
        names.append("l3")
    names = sorted(set(names))
    pols = policy if isinstance(policy, tuple) else (policy,) * 4
    seg = int(rng.integers(2, 6)) * BB
    caps = [int(rng.integers(2, 24)) * BB for _ in names]
    # log stores of two segments or more (the spare segment is on top)
    caps = [max(c, 2 * seg + int(rng.integers(0, 3)) * BB) if layout == "log" and n in ("l3", "l4") else c
            for c, n in zip(caps, names)]
    tiers = tuple(TierSpec(n, caps[i], pols[i % len(pols)],
                           ttl_s=(ttl if rng.random() < 0.8 else None) if ttl else None,
                           layout=layout, trim=bool(rng.random() < 0.5))
                  for i, n in enumerate(names))
    wp, incl = wp_incl
    return HierarchySpec(tiers, BB, write_policy=wp, inclusion=incl, promote=promote, segment_bytes=seg,
                         spare_slots=int(rng.integers(0, 3)))


def _same(spec, times, offsets, keys, batches=(None,)):
    ref, jit = ReferenceHierarchy(spec), Hierarchy(spec)
    r_req, r_ev = ref.run(times, offsets, keys)
    parts = []
    cuts = [0, *[c for c in batches if c is not None], len(times)]
    for a, b in zip(cuts, cuts[1:]):
        parts.append(jit.run(times[a:b], offsets[a:b + 1] - offsets[a], keys[offsets[a]:offsets[b]],
                             first_request=a))
    j_req = np.concatenate([p[0] for p in parts])
    j_ev = np.concatenate([p[1] for p in parts])
    assert np.array_equal(r_req, j_req)
    assert r_ev.shape == j_ev.shape and np.array_equal(r_ev, j_ev)
    assert ref.produced == jit.produced
    for rt, jt in zip(ref.tiers, jit.tiers):
        assert rt.c == jt.c, rt.spec.name
        assert set(rt.meta) == set(jt.meta) and rt.meta == jt.meta
        if rt.store is not None:
            assert rt.store.used == jt.store.used and rt.store.n_slots == jt.store.n_slots
            assert rt.store.footprint_bytes == jt.store.footprint_bytes
    return r_req, r_ev


WP_INCL = [("through", "inclusive"), ("back", "inclusive"), ("back", "exclusive")]


@pytest.mark.parametrize("policy,ttl,wp_incl,promote,layout",
                         pairwise_lanes(("lru", "fifo", "s3fifo"), (None, 3.0), WP_INCL, (True, False), ("slot", "log")))
def test_compiled_equals_reference(policy, ttl, wp_incl, promote, layout):
    hits = events = 0
    for seed in range(3):
        salt = sum(map(ord, f"{policy}{ttl}{wp_incl}{promote}{layout}"))
        spec = _spec(seed * 7919 + salt, policy, ttl, wp_incl, promote, layout)
        req, ev = _same(spec, *_random_trace(seed))
        hits += int(req["hit_blocks"].sum())
        events += len(ev)
    assert hits > 0 and events > 0                  # the traces exercised the tiers


@pytest.mark.parametrize("seed", range(6))
def test_mixed_policies_batches_and_growing_requests(seed):
    """Per-tier policies differ; the compiled side runs in several batches (state carried over) and meets
    requests longer than any before (its pools are laid out again mid-run)."""
    pols = [("lru", "s3fifo", "fifo", "lru"), ("s3fifo", "fifo", "lru", "s3fifo")][seed % 2]
    times, offsets, keys = _random_trace(100 + seed, n_req=300, long_tail=True)
    for wp_incl in WP_INCL:
        spec = _spec(seed, pols, 2.0 if seed % 3 else None, wp_incl, bool(seed % 2), ("slot", "log")[seed % 2])
        _same(spec, times, offsets, keys, batches=(7, 40, 41, 200))


# every admission policy, with parameters small enough for the random traces' tiny tiers to exercise the ghost
# lists' bound, the sketch's ageing and both thresholds
ADMISSIONS = {
    "second-access": ("second-access", "second-access:ghost=0.5", "second-access:ghost=3"),
    "tinylfu": ("tinylfu", "tinylfu:width=0.5:sample=2", "tinylfu:width=4:sample=0.5"),
    "prefix-depth": ("prefix-depth:depth=3", "prefix-depth:beyond_shared=1:ghost=0.5",
                     "prefix-depth:depth=5:beyond_shared=0"),
    "threshold": ("threshold:min_blocks=3", "threshold:window=1.5:ghost=0.5", "threshold:min_blocks=2:window=4"),
}


def _admission_spec(seed, admission, policy, wp_incl):
    """A random spec (as _spec) whose L3 and/or L4 tiers have ``admission``."""
    rng = np.random.default_rng(seed)
    spec = _spec(seed, policy, 3.0 if rng.random() < 0.4 else None, wp_incl, bool(rng.random() < 0.7),
                 ("slot", "log")[int(rng.integers(2))])
    tiers = [t for t in spec.tiers if t.name in ("l1", "l2")]
    if not tiers or rng.random() < 0.3:
        tiers = [TierSpec("l2", int(rng.integers(2, 10)) * BB, policy)] if rng.random() < 0.5 else tiers
    deep = [n for n in ("l3", "l4") if rng.random() < 0.7] or ["l3"]
    seg = spec.segment_bytes
    for j, n in enumerate(deep):
        layout = ("slot", "log")[int(rng.integers(2))]
        cap = int(rng.integers(3, 30)) * BB
        if layout == "log":
            cap = max(cap, 2 * seg + BB)
        tiers.append(TierSpec(n, cap, policy, ttl_s=3.0 if rng.random() < 0.3 else None, layout=layout,
                              trim=bool(rng.random() < 0.5),
                              admission=admission if j == 0 or rng.random() < 0.7 else "all"))
    return HierarchySpec(tuple(tiers), BB, write_policy=spec.write_policy, inclusion=spec.inclusion,
                         promote=spec.promote, segment_bytes=seg, spare_slots=spec.spare_slots)


@pytest.mark.parametrize("admission,policy,wp_incl", pairwise_lanes(ADMISSIONS, ("lru", "fifo", "s3fifo"), WP_INCL))
def test_compiled_admission_equals_reference(admission, policy, wp_incl):
    hits = 0
    for seed, variant in enumerate(ADMISSIONS[admission]):
        salt = sum(map(ord, f"{admission}{policy}{wp_incl}"))
        spec = _admission_spec(seed * 104729 + salt, variant, policy, wp_incl)
        jit = Hierarchy(spec)
        assert not isinstance(jit, ReferenceHierarchy) and jit.admission_active
        req, _ = _same(spec, *_random_trace(seed + salt, n_req=220, long_tail=True), batches=(50, 51, 130))
        hits += int(req["hit_blocks"].sum())
    assert hits > 0


@pytest.mark.parametrize("admission", list(ADMISSIONS))
def test_admission_rejects_are_counted_alike(admission):
    """The policies do refuse blocks on these traces (so the equivalence above covers refusals), and the compiled
    counters say how many exactly as the reference's."""
    total = 0
    for seed, variant in enumerate(ADMISSIONS[admission]):
        spec = HierarchySpec((TierSpec("l2", 3 * BB), TierSpec("l3", 6 * BB, admission=variant)), BB)
        times, offsets, keys = _random_trace(seed, n_req=200)
        ref, jit = ReferenceHierarchy(spec), Hierarchy(spec)
        ref.run(times, offsets, keys)
        jit.run(times, offsets, keys)
        assert ref.tier("l3").c == jit.tier("l3").c
        total += jit.tier("l3").c.admission_rejects
    assert total > 0


def test_admission_runs_compiled():
    spec = HierarchySpec((TierSpec("l2", 4 * BB), TierSpec("l3", 16 * BB, admission="second-access")), BB)
    h = Hierarchy(spec)
    assert not isinstance(h, ReferenceHierarchy) and h.admission_active
    assert h.tier("l3").admission.describe() == "second-access:ghost=1"
    plain = HierarchySpec((TierSpec("l2", 4 * BB), TierSpec("l3", 16 * BB)), BB)
    assert not isinstance(Hierarchy(plain), ReferenceHierarchy) and not Hierarchy(plain).admission_active


def test_single_requests_api_matches():
    spec = _spec(5, "s3fifo", 2.0, ("back", "inclusive"), True, "log")
    times, offsets, keys = _random_trace(9, n_req=80)
    ref, jit = ReferenceHierarchy(spec), Hierarchy(spec)
    for r in range(len(times)):
        k = keys[offsets[r]:offsets[r + 1]].tolist()
        assert ref.request(float(times[r]), k) == jit.request(float(times[r]), k)
    for rt in ref.tiers:
        assert ref.resident(rt.spec.name) == jit.resident(rt.spec.name)


@pytest.mark.parametrize("seed", range(4))
def test_state_growth_between_requests(seed, monkeypatch):
    """Node pools that start below what the tiers need and an event buffer a batch outgrows: the kernel stops
    before the request that might not fit (its own bound), the caller grows the pools (relayout) or only the
    event room (the state copied as it is) and the kernel resumes; results stay the reference's."""
    from kvbench.sim import tiers

    monkeypatch.setattr(tiers, "POOL_START", 1)              # pools start at one request's need
    grown = {"pools": 0, "events": 0}
    build, grow_events = tiers.Hierarchy._build, tiers.Hierarchy._grow_events

    def counting_build(self, pec):
        grown["pools"] += self._A is not None
        return build(self, pec)

    def counting_grow_events(self):
        grown["events"] += 1
        return grow_events(self)

    monkeypatch.setattr(tiers.Hierarchy, "_build", counting_build)
    monkeypatch.setattr(tiers.Hierarchy, "_grow_events", counting_grow_events)
    times, offsets, keys = _random_trace(300 + seed, n_req=400)
    rng = np.random.default_rng(seed)
    caps = [int(c) * BB for c in rng.integers(200, 400, 3)]     # tiers larger than a request's need of nodes
    wp, incl = WP_INCL[seed % 3]
    spec = HierarchySpec((TierSpec("l1", caps[0], ("lru", "s3fifo")[seed % 2]), TierSpec("l2", caps[1], "fifo"),
                          TierSpec("l3", caps[2], ttl_s=40.0 if seed % 2 else None, layout=("slot", "log")[seed % 2])),
                         BB, write_policy=wp, inclusion=incl, segment_bytes=4 * BB)
    _same(spec, times, offsets, keys, batches=(3, 150))
    assert grown["pools"] > 0 and grown["events"] > 0


@pytest.mark.parametrize("cap", [10, 25])
def test_tinylfu_on_s3fifo_weighs_the_small_queues_head_when_it_is_at_its_share(cap):
    """A targeted trace for TinyLFU's victim under S3-FIFO: at 10 blocks the small queue's share is 1 block, so
    the cache is full with exactly one key in S most of the time - the case where the victim is S's head, not
    M's (the randomized traces' prefix-chained requests rarely reach it). Single-block Zipf-like requests over
    40 keys: admission refuses some newcomers and admits others, identically in both hierarchies."""
    rng = np.random.default_rng(11)
    keys = (np.minimum(rng.zipf(1.3, 600), 40) * 7919).astype(np.uint64)
    times = np.arange(600, dtype=float)
    offsets = np.arange(601, dtype=np.int64)
    spec = HierarchySpec((TierSpec("l3", cap * BB, "s3fifo", admission="tinylfu:sample=2"),), BB, spare_slots=0)
    req, _ = _same(spec, times, offsets, keys)
    c = ReferenceHierarchy(spec)
    c.run(times, offsets, keys)
    assert c.tier("l3").c.admission_rejects > 0 and int(req["hit_blocks"].sum()) > 0


def _splitmix_home(keys: np.ndarray, mask: int) -> np.ndarray:
    """The node table's home slot of each key, computed apart from the kernel (splitmix64's finalizer)."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z & np.uint64(mask)).astype(np.int64)


def test_node_table_under_clustered_keys_agrees_with_a_dict():
    """The compiled tier's key -> node table (linear probing, backward-shift deletes) against a dict, with keys
    chosen so their home slots crowd the table's last and first 6 slots: long clusters that wrap around its end,
    entries displaced past their home, deletes that must shift the right ones back (and leave those at their
    home). 4,000 random creates and releases; after each, every key of the set is looked up (absent ones must
    give -1) and no node is handed out twice."""
    from kvbench.sim import tiers_kernel as K

    h = Hierarchy(HierarchySpec((TierSpec("l2", 64 * BB),), BB))
    A, t = h._A, 0
    mask, room = int(A[t * K.NF + K.HM]), int(A[t * K.NF + K.FTOP])
    rng = np.random.default_rng(11)
    cand = rng.integers(1, 2**63, 3_000_000, dtype=np.int64)
    home = _splitmix_home(cand, mask)
    keys = cand[(home >= mask - 5) | (home <= 5)][:160]
    assert keys.size == 160 and room >= 100
    live: dict[int, int] = {}
    for step in range(4000):
        if live and (len(live) >= 100 or rng.random() < 0.45):
            k = list(live)[int(rng.integers(len(live)))]
            K._release(A, t, live.pop(k))
        else:
            k = int(keys[int(rng.integers(keys.size))])
            n = int(K._node(A, t, k))
            if k in live:
                assert n == live[k], f"step {step}: a live key got another node"
            else:
                assert n >= 0 and n not in live.values(), f"step {step}: node {n} handed out twice"
                live[k] = n
        found = [int(K._find(A, t, int(k))) for k in keys]
        assert found == [live.get(int(k), -1) for k in keys], f"step {step}: the table and the dict disagree"
    assert int(A[K.GB + K.G_ERR]) == 0


def test_the_registries_own_the_kernel_codes():
    """Each registered cache and admission policy carries the code the compiled kernel branches on (one place to
    add a policy: its class and its registry line); the codes are the kernel's constants, each used once, and a
    policy without a compiled form sends the hierarchy to the Python reference."""
    from kvbench.sim import tiers_kernel as K
    from kvbench.sim.admission import ADMISSIONS, Admission
    from kvbench.sim.policies import POLICIES

    assert {n: c.kernel_code for n, c in POLICIES.items()} == {"lru": K.POL_LRU, "fifo": K.POL_FIFO,
                                                                 "s3fifo": K.POL_S3}
    compiled = {n: c.kernel_code for n, c in ADMISSIONS.items() if not c.trivial}
    assert compiled == {"second-access": K.ADM_SECOND, "tinylfu": K.ADM_TINYLFU, "prefix-depth": K.ADM_PREFIX,
                        "threshold": K.ADM_THRESHOLD}
    for name, cls in ADMISSIONS.items():
        if cls.trivial:
            continue
        params = "depth=4" if name == "prefix-depth" else "min_blocks=2" if name == "threshold" else ""
        from kvbench.sim.admission import make_admission

        p = make_admission(f"{name}:{params}" if params else name, 64)
        assert p.kernel_params()["code"] == cls.kernel_code

    class Uncompiled(Admission):
        name = "uncompiled"

        def admit(self, key, now, depth, blocks, victim):
            return depth < 2

    ADMISSIONS["uncompiled"] = Uncompiled
    try:
        spec = HierarchySpec((TierSpec("l2", 4 * BB), TierSpec("l3", 16 * BB, admission="uncompiled")), BB)
        assert isinstance(Hierarchy(spec), ReferenceHierarchy)
    finally:
        del ADMISSIONS["uncompiled"]
