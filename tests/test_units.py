import math

import pytest

from kvbench import units
from kvbench.errors import UnitError


@pytest.mark.parametrize("text,value", [
    ("4096", 4096), ("4k", 4096), ("4K", 4096), ("4KiB", 4096), ("64GiB", 64 << 30), ("1.5MiB", 3 << 19),
    ("10GB", 10**10), ("4KB", 4000), ("0", 0), ("1T", 1 << 40), (512, 512),
])
def test_parse_size(text, value):
    assert units.parse_size(text) == value


@pytest.mark.parametrize("text", ["4kb", "4 KiB", "abc", "4XB", "-4k", "1.3", "1e300GiB", ""])
def test_parse_size_rejects(text):
    with pytest.raises(UnitError) as e:
        units.parse_size(text, what="--bs")
    assert "--bs" in str(e.value) and "fix:" in str(e.value)


def test_bits_typo_names_the_fix():
    with pytest.raises(UnitError, match="4KiB"):
        units.parse_size("4kb")


@pytest.mark.parametrize("text,value", [("250us", 250e-6), ("5ms", 5e-3), ("10", 10.0), ("10m", 600.0),
                                        ("1h", 3600.0), ("2d", 172800.0), ("1.5s", 1.5)])
def test_parse_duration(text, value):
    assert math.isclose(units.parse_duration(text), value)


@pytest.mark.parametrize("text", ["10 s", "1y", "fast", "-1s"])
def test_parse_duration_rejects(text):
    with pytest.raises(UnitError):
        units.parse_duration(text)


def test_parse_rate():
    assert units.parse_rate("10GB/s") == 10e9
    assert units.parse_rate("2GiB/s") == 2 * 2**30
    with pytest.raises(UnitError):
        units.parse_rate("10GB")
    # network links are quoted in decimal bits: 400 Gb/s RDMA moves 50 GB/s
    assert units.parse_rate("400Gb/s") == 50e9 and units.parse_rate("100Mb/s") == 12.5e6
    with pytest.raises(UnitError):
        units.parse_size("4kb")                    # bits stay refused for sizes


def test_format():
    assert units.format_bytes(65536) == "64 KiB"
    assert units.format_rate(2e9) == "2 GB/s"
    assert units.format_duration(250e-6) == "250 us"
