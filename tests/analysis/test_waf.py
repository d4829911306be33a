"""Write amplification layers: application, host, device, and their product; reading a replay summary."""

from __future__ import annotations

import pytest

from kvbench.analysis.waf import WriteAmplification, from_summary
from kvbench.errors import SpecError


def test_layers_and_product():
    w = WriteAmplification(unique_kv_bytes=100, store_bytes=150, engine_bytes=150, device_bytes=165, nand_bytes=330,
                           device_waf_source="smart/ocp")
    assert w.app == pytest.approx(1.5) and w.host == pytest.approx(1.1) and w.device == pytest.approx(2.0)
    assert w.total == pytest.approx(3.3)
    d = w.to_dict()
    assert d["bytes"]["nand"] == 330 and d["device_source"] == "smart/ocp"


def test_missing_layers_are_none_and_ftl_override():
    w = WriteAmplification(unique_kv_bytes=100, store_bytes=200)
    assert w.app == 2.0 and w.host is None and w.device is None and w.total == 2.0
    w = WriteAmplification(unique_kv_bytes=100, store_bytes=200, device_waf_override=3.0,
                           device_waf_source="ftl model")
    assert w.total == pytest.approx(6.0)
    assert WriteAmplification().total is None


def test_from_replay_summary():
    s = {"kind": "replay-kv", "app_write_amplification": 1.25,
         "tiers": {"l3": {"write_bytes": 1000}}, "host_bytes": {"write_bytes": 1100, "device": "nvme0n1"},
         "device_counters": {"l3": {"host_bytes_written": 1100, "nand_bytes_written": 2200}}}
    w = from_summary(s)
    assert w.unique_kv_bytes == pytest.approx(800) and w.app == pytest.approx(1.25)
    assert w.host == pytest.approx(1.1) and w.device == pytest.approx(2.0) and w.device_waf_source == "smart/ocp"
    with pytest.raises(SpecError):
        from_summary([])


# mutation survivors ------------------------------------------------------------------------------------------
def test_a_ratio_needs_both_counts_and_a_nonzero_denominator():
    # numerator missing, denominator missing, denominator 0: not measured (None), never 0 or an error
    assert WriteAmplification(unique_kv_bytes=100).app is None
    assert WriteAmplification(store_bytes=100).app is None
    assert WriteAmplification(unique_kv_bytes=0, store_bytes=100).app is None
    assert WriteAmplification(engine_bytes=0, device_bytes=100).host is None
    assert WriteAmplification(unique_kv_bytes=80, store_bytes=100).app == 1.25      # 100 / 80, not 100 x 80


def test_device_waf_falls_back_to_engine_bytes_and_the_total_is_the_product_of_measured_layers():
    # no diskstats: NAND 300 over the engine's 150 bytes = 2; with diskstats (200) the device bytes divide
    assert WriteAmplification(engine_bytes=150, nand_bytes=300).device == 2.0
    assert WriteAmplification(engine_bytes=150, device_bytes=200, nand_bytes=300).device == 1.5
    assert WriteAmplification(nand_bytes=300).device is None
    # the override wins over byte counts
    assert WriteAmplification(engine_bytes=150, nand_bytes=300, device_waf_override=4.0).device == 4.0
    # app 2 (200/100) x host 1.5 (150/100), no device layer: 3; host alone: 1.5
    w = WriteAmplification(unique_kv_bytes=100, store_bytes=200, engine_bytes=100, device_bytes=150)
    assert w.total == 3.0 and w.device is None
    assert WriteAmplification(engine_bytes=100, device_bytes=150).total == 1.5
    d = WriteAmplification(unique_kv_bytes=100, store_bytes=200).to_dict()
    assert (d["app"], d["host"], d["device"], d["total"], d["device_source"]) == (2.0, None, None, 2.0, "")
    assert d["bytes"] == {"unique_kv": 100, "store": 200, "engine": None, "device": None, "nand": None}


def test_a_summary_without_some_layers():
    # no app WA: the unique bytes are unknown (not store / None); no counters: no NAND layer, no source
    w = from_summary({"tiers": {"l3": {"write_bytes": 1000}}, "host_bytes": {"write_bytes": 1100}})
    assert (w.unique_kv_bytes, w.store_bytes, w.engine_bytes, w.device_bytes) == (None, 1000, 1000, 1100)
    assert (w.nand_bytes, w.device_waf_source, w.app, w.device) == (None, "", None, None)
    assert w.host == pytest.approx(1.1)
    # app WA given but no store bytes (another tier): nothing to divide
    w = from_summary({"app_write_amplification": 1.25, "tiers": {"l2": {"write_bytes": 1000}}})
    assert (w.unique_kv_bytes, w.store_bytes) == (None, None)
    assert from_summary({"app_write_amplification": 1.25, "tiers": {"l2": {"write_bytes": 1000}}},
                        tier="l2").unique_kv_bytes == 800
    # a path through a value that is not a table, or a missing key: the default (None)
    assert from_summary({"tiers": {"l3": 5}, "host_bytes": 7}).store_bytes is None
    assert from_summary({"tiers": "x"}).store_bytes is None


def test_summary_device_counters_without_nand_bytes_and_smart_host_bytes():
    base = {"tiers": {"l3": {"write_bytes": 1000}}}
    # counters without NAND bytes: no device layer, the source stays empty, diskstats untouched
    w = from_summary({**base, "device_counters": {"l3": {"host_bytes_written": 1500, "nand_bytes_written": None}}})
    assert (w.nand_bytes, w.device_waf_source, w.device_bytes) == (None, "", None)
    w = from_summary({**base, "device_counters": {"l3": "n/a"}})
    assert (w.nand_bytes, w.device_waf_source) == (None, "")
    # no diskstats: SMART's host bytes stand in; with diskstats, diskstats wins
    w = from_summary({**base, "device_counters": {"l3": {"host_bytes_written": 1250, "nand_bytes_written": 2500}}})
    assert (w.device_bytes, w.device, w.host) == (1250, 2.0, 1.25)
    w = from_summary({**base, "host_bytes": {"write_bytes": 1100},
                      "device_counters": {"l3": {"host_bytes_written": 1250, "nand_bytes_written": 2200}}})
    assert (w.device_bytes, w.device) == (1100, 2.0)
