import math

import pytest

from kvbench import units
from kvbench.errors import UnitError
from kvbench.cli._common import IO_SIZE
from kvbench.cli._common import SIZE
from kvbench.units import parse_rate
from kvbench.units import parse_size


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
    # every link suffix, 8 bits to the byte, decimal: 8 kb/s = 1000 B/s ... 8 Tb/s = 10^12 B/s
    assert [units.parse_rate(f"8{s}/s") for s in ("b", "kb", "Kb", "Mb", "Gb", "Tb")] == \
        [1.0, 1e3, 1e3, 1e6, 1e9, 1e12]
    with pytest.raises(UnitError):
        units.parse_size("4kb")                    # bits stay refused for sizes


def test_format():
    assert units.format_bytes(65536) == "64 KiB"
    assert units.format_rate(2e9) == "2 GB/s"
    assert units.format_duration(250e-6) == "250 us"


# Every size suffix, written out by hand (not read from the module): binary for k/K, KiB/KIB; decimal for KB.
SUFFIXES = [
    ("1", 1), ("1B", 1),
    ("1k", 1024), ("1K", 1024), ("1KiB", 1024), ("1KIB", 1024), ("1kB", 1000), ("1KB", 1000),
    ("1m", 1048576), ("1M", 1048576), ("1MiB", 1048576), ("1MIB", 1048576), ("1MB", 1000000),
    ("1g", 1073741824), ("1G", 1073741824), ("1GiB", 1073741824), ("1GIB", 1073741824), ("1GB", 1000000000),
    ("1t", 1099511627776), ("1T", 1099511627776), ("1TiB", 1099511627776), ("1TIB", 1099511627776),
    ("1TB", 1000000000000),
    ("1p", 1125899906842624), ("1P", 1125899906842624), ("1PiB", 1125899906842624),
    ("1PIB", 1125899906842624), ("1PB", 1000000000000000),
    ("1e", 1152921504606846976), ("1E", 1152921504606846976), ("1EiB", 1152921504606846976),
    ("1EIB", 1152921504606846976), ("1EB", 1000000000000000000),
]


@pytest.mark.parametrize("text,value", SUFFIXES)
def test_every_size_suffix_decimal_vs_binary(text, value):
    assert units.parse_size(text) == value
    assert units.parse_rate(text + "/s") == value


@pytest.mark.parametrize("text", ["1Mb", "1gb", "1Tb", "1pb", "1eb", "1kib", "1Kb"])
def test_every_bits_spelling_is_refused_with_both_fixes(text):
    with pytest.raises(UnitError) as e:
        units.parse_size(text)
    n = text[1].upper()
    if text.endswith("b") and text[1:-1].lower() in "kmgtpe":
        assert f"1{n}iB" in str(e.value) and f"1{n}B" in str(e.value) and "bits" in str(e.value)


@pytest.mark.parametrize("text,value", [
    ("7ns", 7e-9), ("7us", 7e-6), ("7µs", 7e-6), ("7ms", 7e-3), ("7s", 7.0), ("7sec", 7.0), ("7", 7.0),
    ("7m", 420.0), ("7min", 420.0), ("7h", 25200.0), ("7d", 604800.0), ("7w", 4233600.0), ("2.5e1s", 25.0),
])
def test_every_duration_suffix(text, value):
    assert units.parse_duration(text) == pytest.approx(value, rel=1e-15)


def test_size_edges():
    assert units.parse_size("8EiB") == 2**63                     # the largest accepted
    with pytest.raises(UnitError, match="too large"):
        units.parse_size("9EiB")
    assert units.parse_size("0.5KiB") == 512 and units.parse_size(" 4k ") == 4096
    with pytest.raises(UnitError, match="whole number"):
        units.parse_size("0.5")
    with pytest.raises(UnitError, match="negative"):
        units.parse_size(-1)
    with pytest.raises(UnitError):
        units.parse_size(True)
    with pytest.raises(UnitError, match="no space"):
        units.parse_size("4 k")
    assert units.parse_duration(0) == 0.0 and units.parse_duration(2) == 2.0
    for bad in (-1, float("inf"), float("nan")):
        with pytest.raises(UnitError):
            units.parse_duration(bad)
    with pytest.raises(UnitError, match="too large"):
        units.parse_duration("1e400s")
    assert units.parse_rate(5) == 5.0 and units.parse_rate("1.5KB/s") == 1500.0
    with pytest.raises(UnitError):
        units.parse_rate("10XB/s")


@pytest.mark.parametrize("n,binary,text", [
    (0, True, "0 B"), (1023, True, "1.02e+03 B"), (1024, True, "1 KiB"), (1536, True, "1.5 KiB"),
    (3 << 30, True, "3 GiB"), (5 << 60, True, "5 EiB"), (6 << 70, True, "6.14e+03 EiB"), (-2048, True, "-2 KiB"),
    (999, False, "999 B"), (1000, False, "1 KB"), (7.68e12, False, "7.68 TB"), (2.5e18, False, "2.5 EB"),
])
def test_format_bytes_table(n, binary, text):
    assert units.format_bytes(n, binary=binary) == text


@pytest.mark.parametrize("s,text", [
    (5e-7, "500 ns"), (1e-6, "1 us"), (999e-6, "999 us"), (1e-3, "1 ms"), (0.5, "500 ms"), (1.0, "1 s"),
    (119.0, "119 s"), (120.0, "2 min"), (3600.0, "60 min"), (7200.0, "2 h"), (172799.0, "48 h"),
    (172800.0, "2 d"), (-0.002, "-2 ms"),
])
def test_format_duration_table(s, text):
    assert units.format_duration(s) == text


def test_format_says_a_missing_figure_in_a_word_and_passes_infinity_through():
    # a figure not stated reads "n/a" in every view, never the string "None"
    assert units.format_bytes(None) == "n/a" and units.format_bytes(float("inf")) == "inf"
    assert units.format_duration(None) == "n/a" and units.format_duration(float("nan")) == "nan"
    assert units.format_rate(None) == "n/a" and units.format_optional(None) == "n/a"
    assert units.format_optional(None, "unmeasured") == "unmeasured" and units.format_optional(0) == "0"
    # a lifetime: infinite (nothing written) in words, never "inf years"; a stated 0 years is 0
    assert units.format_years(float("inf")) == "no writes: unbounded" and units.format_years(None) == "n/a"
    assert units.format_years(5.4) == "5.4 years" and units.format_years(0.0) == "0 years"
    assert units.format_years(12345.0) == "1.23e+04 years" and units.format_years(2.0 / 3, digits=2) == "0.67 years"
    # after a drive's name: "lasts 5.4 years"; unbounded or unstated as a lifetime in words
    assert units.format_lasts(5.4) == "lasts 5.4 years" and units.format_lasts(0.0) == "lasts 0 years"
    assert units.format_lasts(float("inf")) == "lifetime: no writes: unbounded"
    assert units.format_lasts(None) == "lifetime: n/a"
    assert units.format_bytes(1234, digits=2) == "1.2 KiB" and units.format_duration(1.2345, digits=2) == "1.2 s"
    assert units.format_rate(6.5e9) == "6.5 GB/s"


def test_boundaries_the_mutation_run_found_unpinned():
    assert units.parse_size(0) == 0                                # an int 0 is a size, not a negative one
    with pytest.raises(UnitError, match="unknown size unit"):
        units.parse_size("1kib")                                   # not bits: an unknown unit, not "use KiB"
    with pytest.raises(UnitError, match="unknown size unit"):
        units.parse_size("1Kx")
    assert units.parse_size("1.1KB") == 1100                       # 1100.0000000000002: float noise is whole
    assert units.parse_size("0.000001") == 0                       # within the 1e-6-byte tolerance (inclusive)
    with pytest.raises(UnitError, match="whole number"):
        units.parse_size("1.0000015")                              # 1.5e-6 of a byte off: not whole
    with pytest.raises(UnitError):
        units.parse_duration(True)
    assert units.format_bytes(1024) == "1 KiB" and units.format_bytes(1234567) == "1.18 MiB"   # binary, 3 digits
    assert units.format_duration(36000.0, digits=5) == "10 h" and units.format_duration(1.23456) == "1.23 s"


@pytest.mark.parametrize("text,capacity,io_size", [
    ("4KB", 4000, 4096), ("4kB", 4000, 4096), ("1MB", 10**6, 1 << 20), ("2TB", 2 * 10**12, 2 << 40),
    ("4k", 4096, 4096), ("4K", 4096, 4096), ("4KiB", 4096, 4096), ("64GiB", 64 << 30, 64 << 30), ("512", 512, 512),
])
def test_io_sizes_read_kb_1024_based_and_capacities_si(text, capacity, io_size):
    assert parse_size(text) == capacity and parse_size(text, kb_base=1024) == io_size
    assert SIZE.convert(text, None, None) == capacity and IO_SIZE.convert(text, None, None) == io_size


def test_rates_follow_the_same_rule():
    assert parse_rate("100MB/s") == 100e6 and parse_rate("100MB/s", kb_base=1024) == 100 * 2**20
    assert parse_rate("400Gb/s", kb_base=1024) == 50e9            # a link's bits stay decimal
    with pytest.raises(ValueError):
        parse_size("4k", kb_base=1001)


def test_format_residence_says_a_store_never_written_in_words():
    """KV kept: 11,052 s reads 3.07 h; infinite (nothing written) or unstated beside a stated write rate of 0 reads
    'never rewritten (no writes)', never "inf" nor "n/a"; unstated with an unstated or non-zero rate is n/a."""
    assert units.format_residence(11052.0) == "3.07 h" and units.format_residence(11052.0, 0.0) == "3.07 h"
    assert units.format_residence(math.inf) == "never rewritten (no writes)" == units.NEVER_REWRITTEN
    assert units.format_residence(None, 0.0) == "never rewritten (no writes)"
    assert units.format_residence(None) == "n/a" and units.format_residence(None, 5e8) == "n/a"
    assert units.format_residence(0.0) == "0 ns"


def test_every_rate_of_bytes_is_format_rates_decimal_one():
    """Drives are rated in decimal units, and the answer prints 506 MB/s: a byte rate printed as
    format_bytes(...) + "/s" (binary: 483 MiB/s for the same writes) beside it made two figures of one rate. The
    package's code holds no such rate (plan's capacity table, deployment line, write-policy and admission rows
    once did); a per-step or per-request figure (".../step") is not a rate per second."""
    import re

    from tests.conftest import REPO

    pat = re.compile(r"format_bytes\((?:[^()]|\([^()]*\))*\)\s*(?:\}/s|\+\s*[\"']/s)(?![a-z])")
    found = [f"{p.relative_to(REPO)}:{i}: {line.strip()}" for p in sorted((REPO / "kvbench").rglob("*.py"))
             if p != REPO / "kvbench" / "units.py"                  # format_rate itself
             for i, line in enumerate(p.read_text().splitlines(), 1) if pat.search(line)]
    assert not found, "\n".join(found)
    assert pat.search('f"{format_bytes(w)}/s"') and pat.search("format_bytes(r['w']) + \"/s\"")
    assert not pat.search('f"({format_bytes(v["bytes_per_step"])}/step)"')
