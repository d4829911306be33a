"""SMART / OCP C0h parsing on sample outputs in nvme-cli's JSON formats, and device WAF from two readings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvbench.errors import SpecError
from kvbench.metrics.smart import (DATA_UNIT_BYTES, DeviceCounters, delta, nvme_device_for, parse_ocp_log,
                                   parse_smart_log, try_read_counters)
from tests.conftest import FIXTURES

FIX = FIXTURES / "smart"


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


# --- FDP statistics (nvme fdp stats -o json) ------------------------------------------------------------
def test_parse_fdp_stats_both_number_forms_and_128_bit():
    from kvbench.metrics.smart import parse_fdp_stats

    a = parse_fdp_stats(text("fdp-stats.json"))           # older nvme-cli: 128-bit values as decimal strings
    assert (a.host_bytes_written, a.media_bytes_written, a.media_bytes_erased) == (2**64, 5 * 2**62, 20 * 2**40)
    b = parse_fdp_stats(text("fdp-stats-after.json"))     # newer nvme-cli: bare numbers
    assert b.host_bytes_written == 2**64 + 10_000_000_000
    long_names = {"Host Bytes with Metadata Written": "5", "Media Bytes with Metadata Written": "7",
                  "Media Bytes Erased": "0"}
    assert parse_fdp_stats(long_names).media_bytes_written == 7
    with pytest.raises(SpecError, match="FDP statistics log has no 'mbmw'"):
        parse_fdp_stats({"hbmw": "1", "mbe": "0"})
    with pytest.raises(SpecError, match="fdp stats: not JSON"):
        parse_fdp_stats("NVMe status: Invalid Log Page(0x109)")


def test_fdp_delta_gives_measured_waf_and_says_when_the_drive_has_none():
    from kvbench.metrics.smart import parse_fdp_stats

    smart = parse_smart_log(text("nvme-cli-2-smart-log.json"))
    before = DeviceCounters("/dev/nvme0n1", smart, None, parse_fdp_stats(text("fdp-stats.json")))
    after = DeviceCounters("/dev/nvme0n1", smart, None, parse_fdp_stats(text("fdp-stats-after.json")))
    d = delta(before, after)
    assert (d.fdp_host_bytes_written, d.fdp_media_bytes_written) == (10_000_000_000, 12_500_000_000)
    assert d.fdp_waf == 1.25 and d.fdp_media_bytes_erased == 21990232555520000 - 21990232555520
    assert d.to_dict()["fdp_waf"] == 1.25 and d.fdp_note.startswith("measured: FDP statistics log")
    assert DeviceCounters.from_dict(after.to_dict()) == after
    plain = delta(DeviceCounters("/dev/nvme0n1", smart, None), DeviceCounters("/dev/nvme0n1", smart, None))
    assert plain.fdp_waf is None and plain.to_dict()["fdp_waf"] is None
    assert "reports no FDP statistics" in plain.fdp_note
    assert delta(before, DeviceCounters("/dev/nvme0n1", smart, None)).fdp_waf is None   # one reading lacks it


def test_read_counters_reads_fdp_stats_and_a_drive_without_fdp_has_none(tmp_path):
    from kvbench.metrics.smart import read_counters

    exe = tmp_path / "nvme"
    exe.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path / "calls"}
case "$1" in
  smart-log) cat {FIX / "nvme-cli-2-smart-log.json"} ;;
  fdp) cat {FIX / "fdp-stats.json"} ;;
  *) exit 1 ;;
esac
""")
    exe.chmod(0o755)
    c = read_counters("/dev/nvme9n1", nvme=str(exe), endurance_group=2)
    assert c.fdp is not None and c.fdp.host_bytes_written == 2**64 and c.ocp is None
    assert "fdp stats /dev/nvme9n1 --endgrp-id=2 -o json" in (tmp_path / "calls").read_text()
    # a drive without FDP: nvme-cli prints an NVMe status and exits non-zero
    exe.write_text(f"""#!/bin/sh
case "$1" in
  smart-log) cat {FIX / "nvme-cli-2-smart-log.json"} ;;
  fdp) echo "NVMe status: Invalid Log Page: The log page indicated is invalid(0x109)" >&2; exit 9 ;;
  *) exit 1 ;;
esac
""")
    c = read_counters("/dev/nvme9n1", nvme=str(exe))
    assert c.smart is not None and c.fdp is None


def test_fdp_edges_name_the_field_and_a_zero_host_delta_has_no_waf():
    from kvbench.metrics.smart import CounterDelta, parse_fdp_stats

    with pytest.raises(SpecError, match="SMART field 'mbmw' is not a number"):
        parse_fdp_stats({"hbmw": "1", "mbmw": "lots", "mbe": "0"})
    d = CounterDelta("/dev/nvme0n1", 0, None, 0, 0, fdp_host_bytes_written=0, fdp_media_bytes_written=4096,
                     fdp_media_bytes_erased=0)
    assert d.fdp_waf is None                       # GC with no host writes in the window: no ratio


def test_read_counters_defaults_to_endurance_group_1_and_ignores_json_from_a_failed_command(tmp_path):
    from kvbench.metrics.smart import read_counters

    exe = tmp_path / "nvme"
    exe.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path / "calls"}
case "$1" in
  smart-log) cat {FIX / "nvme-cli-2-smart-log.json"} ;;
  fdp) cat {FIX / "fdp-stats.json"}; exit 1 ;;
  *) exit 1 ;;
esac
""")
    exe.chmod(0o755)
    c = read_counters("/dev/nvme9n1", nvme=str(exe))
    assert "fdp stats /dev/nvme9n1 --endgrp-id=1 -o json" in (tmp_path / "calls").read_text()
    assert c.smart is not None and c.fdp is None       # the command failed: its output is not a reading
