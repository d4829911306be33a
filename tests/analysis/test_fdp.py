"""NVMe FDP modelled (issue 28, part 3): placement handles in the FTL on a hand-worked two-class stream, the store's
own writes with and without handles, ``--fdp`` parsing and ``plan --fdp``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvbench.analysis import ftl
from kvbench.analysis.fdp import FdpSpec, handle_of, parse_fdp, store_fdp
from kvbench.analysis.trace_waf import StoreWrites, store_waf
from kvbench.errors import SpecError

pytestmark = pytest.mark.timeout(600)

# Hot page 0 and cold pages 1..7 on a drive of 8 user pages, 2 pages per erase unit and op 1.25: int(8 x 2.25)
# = 18 pages = 9 erase units (5 spare: the GC reserve of 2, and one open unit per handle, 2 handles).
# The host writes 0,1, 0,2, ..., 0,7 (a forward pass over the cold pages, the hot page between each), then
# 0,7, 0,6, ..., 0,1 (a backward pass): 28 writes, 14 of page 0 (class 0, hot) and 14 cold (class 1).
HOT_COLD = [p for c in range(1, 8) for p in (0, c)] + [p for c in range(7, 0, -1) for p in (0, c)]


def _run(streams: int):
    seq = np.array(HOT_COLD, np.int64)
    cfg = ftl.FtlConfig(user_bytes=8 * 4096, page_size=4096, op=1.25, block_pages=2, streams=streams)
    assert cfg.blocks == 9
    m = ftl.FtlModel(cfg)
    handle = (seq != 0).astype(np.int64) if streams == 2 else np.zeros(seq.size, np.int64)
    m.apply_pages(np.full(seq.size, ftl.OP_WRITE, np.uint8), seq, np.ones(seq.size, np.int64), handle)
    m.check()
    return m.counters


def test_two_class_stream_counted_by_hand_without_placement_handles():
    """One write frontier (no FDP). Units b0..b6 fill as [0,1], [0,2], ..., [0,7]: opening b1..b6 leaves b7, b8
    free, and each hot write kills the 0 before it, so b0..b5 close with one valid (cold) page each.
    write 15 (0): b6 closes with 1 valid (7); b7 opens, 1 free left -> GC: every closed unit has 1 valid page,
      the last one filed (b6) is the victim: move 1 (page 7 -> b7); erase b6.
    write 16 (7): b7 = [0, 7'] closes holding the 0 (the copied 7 just died); b8 opens -> GC: victim b7:
      move 2 (page 0 -> b8); erase b7.
    write 17 (0): b8 = [7, 0'] closes holding 7; b6 opens -> GC: victim b8: move 3 (page 7 -> b6); erase b8.
    writes 18-28: each cold write (6, 5, ..., 1) kills the last valid page of the unit it was first written to
      (b5, b4, ..., b0); the GC that follows erases that unit with nothing to move.
    Host 28 pages, NAND 28 + 3 = 31, 3 + 6 = 9 erases: WAF 31/28."""
    c = _run(1)
    assert (c.host_pages, c.gc_pages, c.nand_pages, c.erases) == (28, 3, 31, 9)
    assert c.waf == 31 / 28


def test_two_class_stream_counted_by_hand_with_a_handle_per_class():
    """Hot writes on handle 0, cold on handle 1 (b0, b1 open). Hot units hold [0,0] and are dead as soon as the next
    copy of 0 lands in the next unit; cold units hold [1,2], [3,4], [5,6], [7,7'] (the first 7 dead), then
    [6,5], [4,3], [2,1] and each earlier one dies when the backward pass rewrites both its pages. So at every GC
    a unit with no valid page exists and is the victim: no page moves. 7 hot + 7 cold units opened on 9:
    7 erases. Host 28 pages, NAND 28: WAF 1."""
    c = _run(2)
    assert (c.host_pages, c.gc_pages, c.nand_pages, c.erases) == (28, 0, 28, 7)
    assert c.waf == 1.0


# --- the store's own stream through store_waf -------------------------------------------------------------
def _two_lifetimes(seed: int = 0, n_hot: int = 64, n_cold: int = 960, writes: int = 40_000) -> StoreWrites:
    """A slot store whose hot slots (1/16 of them) take 80% of the overwrites: two lifetimes, mixed in time."""
    rng = np.random.default_rng(seed)
    n = n_hot + n_cold
    hot = rng.random(writes) < 0.8
    later = np.where(hot, rng.integers(0, n_hot, writes), n_hot + rng.integers(0, n_cold, writes))
    slots = np.concatenate([np.arange(n), later]).astype(np.int64)
    k = slots.size
    return StoreWrites(ops=np.full(k, ftl.OP_WRITE, np.uint8), slots=slots, nslots=np.ones(k, np.int64),
                       request=np.arange(k), slot_bytes=4 << 20, capacity_blocks=n, n_slots=n, sample_rate=1.0,
                       layout="slot", policy="synthetic", trim=False, origin="synthetic",
                       note="two lifetime classes", warm_writes=2 * n)


def test_store_fdp_is_store_waf_with_and_without_handles():
    sw = _two_lifetimes()
    spec = FdpSpec(handles=2, ru_bytes=64 << 20)
    out = store_fdp(sw, spec, op=0.28)
    assert out["waf_without"] == store_waf(sw, op=0.28, erase_block_bytes=64 << 20).waf
    assert out["waf_with"] == store_waf(sw, op=0.28, erase_block_bytes=64 << 20, streams=2,
                                        stream_of=handle_of(sw, spec)).waf
    # separating the two lifetimes buys: the hot slots' units die together
    assert out["waf_with"] < 0.9 * out["waf_without"] and out["waf_without"] > 1.2
    assert out["waf_reduction"] == pytest.approx(1 - out["waf_with"] / out["waf_without"])
    assert "lifetime classes from the lifetimes the simulation measured" in out["source"]
    # handle_of: the lifetime rule's classes, shortest first (hot slots are rewritten sooner)
    h = handle_of(sw, spec)
    assert h.shape == sw.slots.shape and set(np.unique(h).tolist()) <= {0, 1}


@pytest.mark.parametrize("text,want", [
    ("handles=4,ru=1GiB", FdpSpec(4, 1 << 30, "lifetime")),
    ("handles=2, ru=256MiB, rule=age", FdpSpec(2, 256 << 20, "age")),
    ("ru=64MB,handles=8", FdpSpec(8, 64 << 20, "lifetime")),          # I/O sizes: MB is 1024-based
])
def test_parse_fdp(text, want):
    assert parse_fdp(text) == want


def test_the_smallest_reclaim_unit_is_1_mib():
    assert parse_fdp("handles=2,ru=1MiB").ru_bytes == 1 << 20
    assert parse_fdp("handles=64,ru=1GiB").handles == 64
    with pytest.raises(SpecError, match="below 1 MiB"):
        FdpSpec(2, (1 << 20) - 1).validate()


@pytest.mark.parametrize("text,match", [
    ("handles=4", "--fdp: missing ru"),
    ("handles=four,ru=1GiB", "not a whole number"),
    ("handles=1,ru=1GiB", "outside 2..64"),
    ("handles=65,ru=1GiB", "outside 2..64"),
    ("handles=4,ru=4KiB", "below 1 MiB"),
    ("handles=4,ru=1500000", "ru=1500000 B is not a whole number of 4 KiB pages"),     # the model's unit: exact
    ("handles=4,ru=1GiB,rule=tier", "does not separate one store's writes"),
    ("handles=4,ru=1GiB,rule=hot", "unknown placement rule"),
    ("handles=4,ru=1GiB,streams=2", r"--fdp: unknown field 'streams' \(fix: known fields: handles, ru, rule;"),
    ("handles=4,handles=2,ru=1GiB", "--fdp: field 'handles' given twice"),
    ("handles=4,ru=", "--fdp: field 'ru' has no value"),
])
def test_bad_fdp_specs_are_one_line_errors(text, match):
    with pytest.raises(SpecError, match=match):
        parse_fdp(text)


def test_plan_fdp_reports_waf_and_dwpd_with_and_without(cli):
    r = cli("plan", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--sweep", "", "--target-hit", "0.9",
            "--fdp", "handles=2,ru=64MiB", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    fd = out["fdp"]
    pick = next(d for d in out["drives"] if d["class"] == out["ssd_class"])
    assert (fd["handles"], fd["ru_bytes"], fd["rule"], fd["class"]) == (2, 64 << 20, "lifetime", pick["class"])
    for key in ("without", "with"):
        assert fd[f"waf_{key}"] >= 1.0
        assert fd[f"dwpd_rating_equivalent_{key}"] == pytest.approx(
            pick["dwpd_host"] * fd[f"waf_{key}"] / pick["reference_waf"], rel=1e-12)
        assert fd[f"nand_bytes_per_day_{key}"] == pytest.approx(pick["write_bytes_per_s"] * 86400 * fd[f"waf_{key}"])
    assert fd["op"] == pytest.approx(pick["over_provisioning"])
    assert fd["trace_blocks"] > 1                  # the store simulated at the picked class's size, not one block
    assert fd["measured"] == {"waf": None, "note": "no replay run given (--run): nothing measured on a drive"}
    bad = cli("plan", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--fdp", "handles=1,ru=64MiB")
    assert bad.exit_code != 0 and "outside 2..64" in bad.output and "Traceback" not in bad.output


def test_a_bad_fdp_is_refused_before_the_trace_is_read(cli, tmp_path):
    """--fdp is validated when the option is read: a bad one is named even when the trace would fail too."""
    r = cli("plan", "--trace", tmp_path / "missing.jsonl", "--model", "tiny-gqa", "--fdp", "handles=4,ru=512KiB")
    assert r.exit_code == 2 and "--fdp ru=524288 B is below 1 MiB" in r.output and "missing.jsonl" not in r.output


def test_measured_fdp_from_a_replays_counters():
    from kvbench.analysis.fdp import measured_fdp
    from kvbench.metrics.smart import CounterDelta

    d = CounterDelta("/dev/nvme0n1", 10, None, 0, 0, fdp_host_bytes_written=8_000, fdp_media_bytes_written=10_000,
                     fdp_media_bytes_erased=0).to_dict()
    m = measured_fdp({"device_counters": {"l3": d}})
    assert (m["waf"], m["host_bytes"], m["media_bytes"]) == (1.25, 8_000, 10_000)
    assert m["note"] == "measured: FDP statistics log, media / host bytes with metadata written"
    none = measured_fdp({"device_counters": {"l3": CounterDelta("/dev/nvme0n1", 10, None, 0, 0).to_dict()}})
    assert none["waf"] is None and "reports no FDP statistics" in none["note"]
    assert "not on an NVMe drive" in measured_fdp({"device_counters": {"l3": None}})["note"]


# mutation survivors ------------------------------------------------------------------------------------------
def test_fdp_for_plan_by_hand(monkeypatch):
    """The plan's FDP answer around store_fdp (stubbed here: its WAFs are tested above): the store it models holds
    round(blocks) slots of the trace (at least one), and NAND bytes per day and rating-equivalent DWPD follow from
    each WAF by hand."""
    from kvbench.analysis import fdp, trace_waf
    from kvbench.sim.blockstore import slot_bytes_for

    calls = []
    monkeypatch.setattr(trace_waf, "store_writes", lambda tr, **kw: calls.append(kw) or "sw")
    monkeypatch.setattr(fdp, "store_fdp", lambda sw, spec, *, op, gc: {"waf_without": 3.0, "waf_with": 1.5,
                                                                        "seen": (sw, spec.handles, op, gc)})
    spec = FdpSpec(handles=2, ru_bytes=1 << 20)
    pick = {"class": "c", "store_bytes": 5e6, "dwpd_host": 2.0, "reference_waf": 4.0, "write_bytes_per_s": 1000.0}
    out = fdp.fdp_for_plan("trace", spec, pick=pick, blocks=63.6, block_bytes=65536, layout="log", op=0.28,
                           gc="fifo", measured={"device_counters": {"l3": {"fdp_waf": 1.1}}})
    assert calls == [{"block_bytes": 65536, "capacity_bytes": 64 * slot_bytes_for(65536), "layout": "log",
                      "from_request": 0}]
    fdp.fdp_for_plan("trace", spec, pick=pick, blocks=63.6, block_bytes=65536, layout="log", op=0.28, gc="fifo",
                     from_request=7)
    assert calls[-1]["from_request"] == 7             # a plan's warm-up: the store measured from its end
    assert out["seen"] == ("sw", 2, 0.28, "fifo") and out["trace_blocks"] == 64
    # 1,000 B/s = 86.4 MB a day, x WAF 3 and 1.5; rating-equivalent 2 x 3 / 4 = 1.5 and 2 x 1.5 / 4 = 0.75
    assert out["nand_bytes_per_day_without"] == pytest.approx(259.2e6, rel=1e-12)
    assert out["nand_bytes_per_day_with"] == pytest.approx(129.6e6, rel=1e-12)
    assert out["dwpd_rating_equivalent_without"] == pytest.approx(1.5, rel=1e-12)
    assert out["dwpd_rating_equivalent_with"] == pytest.approx(0.75, rel=1e-12)
    assert (out["class"], out["store_bytes"], out["dwpd_host"], out["reference_waf"]) == ("c", 5e6, 2.0, 4.0)
    assert (out["op"], out["layout"], out["measured"]["waf"]) == (0.28, "log", 1.1)
    # no host DWPD or write rate: those answers are None; a fraction of a block is still one block
    calls.clear()
    bare = fdp.fdp_for_plan("trace", spec, pick={"class": "c", "store_bytes": 1.0, "reference_waf": 4.0},
                            blocks=0.3, block_bytes=65536, layout="slot", op=0.28, gc="greedy")
    assert bare["trace_blocks"] == 1 and calls[0]["capacity_bytes"] == slot_bytes_for(65536)
    assert bare["dwpd_host"] is None and bare["measured"]["waf"] is None
    for key in ("without", "with"):
        assert bare[f"nand_bytes_per_day_{key}"] is None and bare[f"dwpd_rating_equivalent_{key}"] is None


def test_the_age_rule_on_the_store():
    sw = _two_lifetimes()
    out = store_fdp(sw, FdpSpec(handles=2, ru_bytes=64 << 20, rule="age"), op=0.28)
    assert out["rule"] == "age" and out["statement"].startswith("host writes to stream 0")
    assert "an oracle" not in out["source"] and out["source"].startswith("FTL model, 2 handles vs one stream: ")
    assert out["waf_reduction"] == pytest.approx(1 - out["waf_with"] / out["waf_without"], rel=1e-12)
    # age: every host write on handle 0
    from kvbench.analysis.fdp import handle_of

    assert not handle_of(sw, FdpSpec(handles=2, ru_bytes=64 << 20, rule="age")).any()


def test_lifetime_handles_of_a_stream_with_trims():
    from kvbench.analysis.fdp import handle_of

    # write s0, write s1, write s0, trim s1, write s2, write s0 (lifetimes 2, 2, 3, -, never, never): the median
    # of the finite ones is 2, so the writes living 2 events are handle 0, the rest (and never) handle 1; trims 0
    sw = StoreWrites(ops=np.array([ftl.OP_WRITE, ftl.OP_WRITE, ftl.OP_WRITE, ftl.OP_TRIM, ftl.OP_WRITE,
                                   ftl.OP_WRITE], np.uint8), slots=np.array([0, 1, 0, 1, 2, 0], np.int64),
                     nslots=np.ones(6, np.int64), request=np.arange(6), slot_bytes=4096, capacity_blocks=3,
                     n_slots=3, sample_rate=1.0, layout="slot", policy="lru", trim=True, origin="hand", note="",
                     warm_writes=1)
    assert handle_of(sw, FdpSpec(handles=2, ru_bytes=1 << 20)).tolist() == [0, 0, 1, 0, 1, 1]


def test_parse_fdp_malformed_and_missing_fields():
    for text, match in (("handles,ru=1GiB", "malformed field 'handles'"), ("ru=1GiB", "missing handles"),
                        ("handles=4,ru=1GiB,rule=none", "rule=none does not separate"),
                        ("handles=4,ru=1GiB,ru=2GiB", "'ru' given twice")):
        with pytest.raises(SpecError, match=match):
            parse_fdp(text)
    assert parse_fdp(" handles=3 , ru= 2MiB ,rule=AGE ") == FdpSpec(3, 2 << 20, "AGE")    # values and parts trimmed
    assert parse_fdp("handles =4, ru = 1GiB") == FdpSpec(4, 1 << 30)                      # and keys (was refused)


def test_measured_fdp_without_a_run_or_counters():
    from kvbench.analysis.fdp import measured_fdp

    for m in (None, {}):
        assert measured_fdp(m) == {"waf": None, "note": "no replay run given (--run): nothing measured on a drive"}
    for m in ({"device_counters": None}, {"device_counters": {}}, {"kind": "replay-kv"}):
        assert "not on an NVMe drive" in measured_fdp(m)["note"]
    out = measured_fdp({"device_counters": {"l3": {"fdp_waf": 1.2, "fdp_note": "measured here"}}})
    assert out == {"waf": 1.2, "host_bytes": None, "media_bytes": None, "note": "measured here"}
