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
