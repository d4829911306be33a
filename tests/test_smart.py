"""SMART / OCP C0h parsing on sample outputs in nvme-cli's JSON formats, and device WAF from two readings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvbench.errors import SpecError
from kvbench.metrics.smart import (DATA_UNIT_BYTES, DeviceCounters, delta, nvme_device_for, parse_ocp_log,
                                   parse_smart_log, try_read_counters)

FIX = Path(__file__).resolve().parent / "fixtures" / "smart"


def text(name: str) -> str:
    return (FIX / name).read_text()


def test_parse_nvme_cli_2_smart_log():
    s = parse_smart_log(text("nvme-cli-2-smart-log.json"))
    assert s.data_units_written == 98765432
    assert s.host_bytes_written == 98765432 * 512_000
    assert s.percent_used == 3 and s.media_errors == 0 and s.available_spare == 100
    assert s.host_write_commands == 1122334455 and s.power_on_hours == 8760


def test_parse_nvme_cli_1_floats_and_smartctl():
    s = parse_smart_log(text("nvme-cli-1-smart-log.json"))
    assert s.data_units_written == 4412311 and s.percent_used == 0 and s.power_on_hours == 1024
    c = parse_smart_log(text("smartctl-nvme.json"))
    assert c.data_units_written == 2_000_000 and c.percent_used == 2 and c.host_write_commands == 40_000_000


def test_parse_ocp_both_spellings_and_128_bit():
    o = parse_ocp_log(text("ocp-smart-add-log-v1.json"))
    assert o.physical_media_bytes_written == 151024680960000 and o.percent_free_blocks == 14
    o2 = parse_ocp_log(text("ocp-smart-add-log-v2.json"))
    assert o2.physical_media_bytes_written == (1 << 64) + 5 and o2.physical_media_bytes_read == 7


def test_delta_gives_device_waf_wear_and_errors():
    before = DeviceCounters("/dev/nvme0n1", parse_smart_log(text("nvme-cli-2-smart-log.json")),
                            parse_ocp_log(text("ocp-smart-add-log-v1.json")))
    after = DeviceCounters("/dev/nvme0n1", parse_smart_log(text("nvme-cli-2-smart-log-after.json")),
                           parse_ocp_log(text("ocp-smart-add-log-v1-after.json")))
    d = delta(before, after)
    assert d.host_bytes_written == 20_000 * DATA_UNIT_BYTES == 10_240_000_000
    assert d.nand_bytes_written == 20_480_000_000
    assert d.device_waf == pytest.approx(2.0)
    assert d.percent_used_delta == 1 and d.media_errors_delta == 1
    # round trip through the run-folder form
    assert DeviceCounters.from_dict(after.to_dict()) == after
    # without the OCP log there is no NAND counter: no device WAF
    d2 = delta(DeviceCounters("x", before.smart, None), DeviceCounters("x", after.smart, None))
    assert d2.device_waf is None and d2.host_bytes_written == 10_240_000_000


def test_bad_documents_raise_spec_errors():
    with pytest.raises(SpecError, match="data_units_written"):
        parse_smart_log({"temperature": 300})
    with pytest.raises(SpecError, match="not JSON"):
        parse_smart_log("Smart Log for NVME device:nvme0")
    with pytest.raises(SpecError, match="Physical media units written"):
        parse_ocp_log({"foo": 1})
    with pytest.raises(SpecError, match="not a number"):
        parse_smart_log({"data_units_written": "lots"})


def test_live_reading_is_none_off_nvme(tmp_path):
    # a file on whatever backs tmp_path here (not NVMe in CI): no counters, no exception
    f = tmp_path / "x"
    f.write_bytes(b"0")
    if nvme_device_for(f) is None:
        assert try_read_counters(f) is None
    assert nvme_device_for(tmp_path / "missing") is None


@pytest.mark.skipif(not shutil.which("nvme") or not list(Path("/dev").glob("nvme*n1")), reason="no NVMe drive")
def test_live_nvme_drive_reads():  # pragma: no cover - only on machines with an NVMe drive
    dev = sorted(Path("/dev").glob("nvme*n1"))[0]
    c = try_read_counters(dev)
    assert c is not None and c.smart is not None            # nvme-cli and a drive: the SMART log is read
    assert c.smart.host_bytes_written == c.smart.data_units_written * DATA_UNIT_BYTES > 0


def test_read_counters_runs_nvme_cli_and_parses_its_output(tmp_path):
    """The live path without a drive: an executable answering like nvme-cli (its captured JSON) is run."""
    from kvbench.metrics.smart import read_counters

    exe = tmp_path / "nvme"
    exe.write_text(f"""#!/bin/sh
case "$1" in
  smart-log) cat {FIX / "nvme-cli-2-smart-log.json"} ;;
  ocp) cat {FIX / "ocp-smart-add-log-v1.json"} ;;
  *) exit 1 ;;
esac
""")
    exe.chmod(0o755)
    c = read_counters("/dev/nvme9n1", nvme=str(exe))
    assert c.device == "/dev/nvme9n1" and c.smart.data_units_written == 98765432
    assert c.ocp is not None and c.ocp.physical_media_bytes_written > 0
    exe.write_text("#!/bin/sh\necho 'not json'\n")
    c = read_counters("/dev/nvme9n1", nvme=str(exe))      # a drive that answers garbage: no counters, no raise
    assert c.smart is None and c.ocp is None


def test_device_watch_off_nvme_gives_none(tmp_path):
    from kvbench.metrics.smart import DeviceWatch

    f = tmp_path / "store"
    f.write_bytes(b"0")
    w = DeviceWatch({"l3": f})
    if nvme_device_for(f) is None:
        assert w.stop() == {"l3": None}
