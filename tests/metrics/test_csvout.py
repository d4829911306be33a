"""The compiled CSV writer: byte for byte what pandas' to_csv (and C's %.Nf) write, and the iolog built on it."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from kvbench.engine.iolog import IologWriter, write_iolog
from kvbench.engine.plan import OP_NAMES
from kvbench.errors import UsageError
from kvbench.metrics import csvout
from kvbench.metrics.csvout import format_csv, write_csv

pytestmark = pytest.mark.timeout(120)


def pandas_csv(cols: dict, d: int, header: bool = True, sep: str = ",") -> bytes:
    return pd.DataFrame(cols).to_csv(index=False, float_format=f"%.{d}f", header=header, sep=sep).encode()


def c_format(values, d: int) -> list[str]:
    """C's %.Nf through Python's % operator (the oracle for floats), NaN as an empty field."""
    return ["" if np.isnan(v) else ("%.*f" % (d, v)) for v in values]


# values whose scaled product lies on or next to a half: %.Nf rounds their exact binary value half to even
HALVES = [0.125, 0.375, 2.675, 1.005, 0.00005, 0.00015, 0.00025, 1.00005, 2.5e-5, 0.5, 1.5, 2.5, -0.5, -2.5,
          0.045, 1.0000500000000001, 123456.78125, 9007199254.740993]


@pytest.mark.parametrize("d", [0, 1, 2, 4, 6, 9])
def test_floats_round_as_c_does(d):
    rng = np.random.default_rng(d)
    x = np.concatenate([HALVES, [-0.0, 0.0, -1e-9, 1e-9, -0.00004, 7.0, -7.25],
                        rng.normal(0, 1e3, 3000), rng.random(3000) * 1e-3,
                        np.round(rng.integers(0, 10 ** 6, 3000) / 10 ** (d + 1) + 5 * 10.0 ** -(d + 1), d + 1)])
    got = format_csv({"x": x}, decimals=d, header=False).decode().splitlines()
    assert got == c_format(x, d)


@pytest.mark.parametrize("d", [4, 6])
def test_floats_beyond_two_to_the_53_scaled_round_exactly(d):
    """Scaled past 2^53 a double cannot hold every integer, so the product is rounded from the exact value."""
    x = np.random.default_rng(d).uniform(2.0 ** 53 / 10 ** d, 2.0 ** 62 / 10 ** d, 500)
    assert format_csv({"x": x}, decimals=d, header=False).decode().splitlines() == c_format(x, d)


def test_eighteen_decimals_print_every_digit():
    x = np.array([0.123456789012345678, 0.999999999999999889, 1e-18, 0.5, 9.2])
    assert format_csv({"x": x}, decimals=18, header=False).decode().splitlines() == c_format(x, 18)


def test_four_decimals_by_default():
    assert format_csv({"x": np.array([0.5, 2.25])}) == b"x\n0.5000\n2.2500\n"
    assert format_csv({"x": np.array([1.0])}, header=False) == format_csv({"x": np.array([1.0])}, decimals=4,
                                                                          header=False)


def test_rows_at_their_widest_fill_the_buffer_exactly():
    """Every field at its widest in all rows but the last (whose text columns hold a short value, so that a
    width taken from the shortest value is too small): the buffer is sized for every row at its widest, and a
    kernel write past it would be an IndexError."""
    from kvbench.metrics.csvout import Labels

    n = 100
    longest = np.array(["longest"] * (n - 1) + ["s"], dtype=object)
    cols = {"i": np.full(n, np.iinfo(np.int64).min), "u": np.full(n, 2 ** 64 - 1, dtype=np.uint64),
            "f": np.full(n, -9.2e14), "f1": np.full(n, -9.2e17), "f0": np.full(n, -9.2e18), "s": longest,
            "l": Labels(np.r_[np.zeros(n - 1, np.int64), 1], ("longest", "s")),
            "big": np.r_[np.full(n - 1, -1e20), 1.5]}
    d = {"f": 4, "f1": 1, "f0": 0, "big": 4}
    plain = {**cols, "l": longest}
    # pandas column by column (each at its own decimals), joined into rows
    per_column = [pd.DataFrame({k: v}).to_csv(index=False, header=False, float_format=f"%.{d.get(k, 4)}f")
                  .splitlines() for k, v in plain.items()]
    want = "".join(",".join(row) + "\n" for row in zip(*per_column)).encode()
    assert format_csv(cols, decimals=d, header=False) == want
    first = format_csv(cols, decimals=d, header=False).split(b"\n")[0].decode().split(",")
    assert first == ["-9223372036854775808", "18446744073709551615", "-920000000000000.0000",
                     "-920000000000000000.0", "-9200000000000000000", "longest", "longest",
                     "-100000000000000000000.0000"]


def test_one_integer_column():
    assert format_csv({"i": np.array([0, -3, 12])}) == b"i\n0\n-3\n12\n"


def test_a_column_too_large_for_the_kernel_but_not_for_a_double():
    """1e20 x 10^4 is past 2^64: the column is printed by Python (the kernel's uint64 would overflow)."""
    x = np.array([1e20, 1.5, -2.5e19])
    assert format_csv({"x": x, "n": np.arange(3)}, header=False).decode().splitlines() == \
        [f"{v},{i}" for i, v in enumerate(c_format(x, 4))]


def test_write_csv_writes_four_decimals_by_default(tmp_path):
    write_csv(tmp_path / "a.csv", {"x": np.array([0.5])})
    assert (tmp_path / "a.csv").read_bytes() == b"x\n0.5000\n"


def test_none_and_nan_in_an_object_column_are_empty():
    cols = {"s": np.array(["a", None, float("nan"), "b", 1.5], dtype=object), "n": np.arange(5)}
    assert format_csv(cols) == pandas_csv(cols, 4) == b"s,n\na,0\n,1\n,2\nb,3\n1.5,4\n"


@pytest.mark.parametrize("col", [np.array(["a", "", None], dtype=object), np.array([1.5, np.nan, 2.0])])
def test_a_lone_empty_field_is_quoted_as_pandas_quotes_it(col):
    """An empty line would read back as no row at all."""
    assert format_csv({"x": col}) == pandas_csv({"x": col}, 4)
    assert pd.read_csv(io.BytesIO(format_csv({"x": col}))).shape == (3, 1)


def test_negative_zero_and_tiny_negatives_keep_their_sign():
    got = format_csv({"x": np.array([-0.0, -0.00004, 0.00004, -0.00005])}, decimals=4, header=False)
    assert got == b"-0.0000\n-0.0000\n0.0000\n-0.0001\n"


def test_nan_is_an_empty_field_and_infinities_are_named():
    got = format_csv({"a": np.array([np.nan, np.inf, -np.inf, 1.0]), "b": np.arange(4)}, decimals=2)
    assert got == b"a,b\n,0\ninf,1\n-inf,2\n1.00,3\n"


def test_integers_at_their_limits():
    i = np.array([np.iinfo(np.int64).min, -1, 0, 1, np.iinfo(np.int64).max], dtype=np.int64)
    u = np.array([0, 1, 10, 2 ** 63, 2 ** 64 - 1], dtype=np.uint64)
    small = np.array([-128, -1, 0, 1, 127], dtype=np.int8)
    got = format_csv({"i": i, "u": u, "s": small}, header=False).decode().splitlines()
    assert got == [f"{a},{b},{c}" for a, b, c in zip(i.tolist(), u.tolist(), small.tolist())]


def test_every_kind_of_column_matches_pandas():
    rng = np.random.default_rng(7)
    n = 5000
    cols = {"request": np.arange(n), "arrival_s": np.cumsum(rng.random(n)),
            "load_ms": np.where(rng.random(n) < 0.3, np.nan, rng.random(n) * 100),
            "neg": rng.normal(0, 1, n), "i32": rng.integers(-5, 5, n).astype(np.int32),
            "u64": rng.integers(0, 2 ** 62, n).astype(np.uint64) * np.uint64(3),
            "ok": rng.random(n) < 0.5,
            "op": rng.choice(np.array(["read", "write", "trim"], dtype=object), n),
            "uni": rng.choice(np.array(["l2", "l3", "l4"]), n)}
    for d in (4, 6):
        assert format_csv(cols, decimals=d) == pandas_csv(cols, d)
    assert format_csv(cols, decimals=4, header=False, sep=";") == pandas_csv(cols, 4, header=False, sep=";")


def test_per_column_decimals():
    cols = {"a": np.array([1.23456]), "b": np.array([1.23456]), "c": np.array([1.23456])}
    assert format_csv(cols, decimals={"a": 1, "b": 3}) == b"a,b,c\n1.2,1.235,1.2346\n"


def test_a_value_too_large_for_the_kernel_is_printed_by_python():
    x = np.array([1e300, -3e18, 1.5, np.nan, np.inf])
    got = format_csv({"x": x, "i": np.arange(5)}, decimals=4, header=False).decode().splitlines()
    assert got == [f"{v},{i}" for i, v in enumerate(c_format(x, 4))]
    assert format_csv({"x": x}, header=False) == pandas_csv({"x": x}, 4, header=False)


def test_chunks_join_seamlessly(monkeypatch):
    from kvbench.metrics.csvout import Labels

    monkeypatch.setattr(csvout, "CHUNK_ROWS", 7)
    rng = np.random.default_rng(3)
    cols = {"i": np.arange(50), "x": rng.random(50), "s": rng.choice(np.array(["a", "bb"], dtype=object), 50)}
    assert format_csv(cols, decimals=3) == pandas_csv(cols, 3)
    k = rng.integers(0, 2, 50)
    as_labels = format_csv({"i": cols["i"], "s": Labels(k, ("a", "bb"))})
    assert as_labels == pandas_csv({"i": cols["i"], "s": np.array(["a", "bb"], dtype=object)[k]}, 3)


def test_empty_and_header_only():
    assert format_csv({"a": np.zeros(0), "b": np.zeros(0, np.int64)}) == b"a,b\n"
    assert format_csv({"a": np.zeros(0)}, header=False) == b""


@pytest.mark.parametrize("value,sep", [("a,b", ","), ('say "x"', ","), ("two words", " "), ("line\nbreak", ",")])
def test_a_string_that_needs_quoting_is_refused(value, sep):
    with pytest.raises(ValueError, match="quoting"):
        format_csv({"s": np.array([value, "ok"], dtype=object)}, sep=sep)


def test_strings_pandas_does_not_quote_pass_as_they_are():
    cols = {"s": np.array(["two words", "semi;colon", "tab\there"], dtype=object), "n": np.arange(3)}
    assert format_csv(cols) == pandas_csv(cols, 4)


def test_labels_write_names_by_code():
    from kvbench.metrics.csvout import Labels

    codes = np.array([2, 0, 1, 1, 0])
    names = ("read", "write", "trim")
    got = format_csv({"op": Labels(codes, names), "n": np.arange(5)}, header=False)
    assert got == b"trim,0\nread,1\nwrite,2\nwrite,3\nread,4\n"
    with pytest.raises(ValueError, match="outside"):
        format_csv({"op": Labels(np.array([0, 3]), names)})
    with pytest.raises(ValueError, match="quoting"):
        format_csv({"op": Labels(np.array([0]), ("a b",))}, sep=" ")


def test_columns_of_two_dimensions_or_lengths_are_refused():
    with pytest.raises(ValueError, match="1-d and of one length"):
        format_csv({"a": np.zeros(3), "b": np.zeros(2)})
    with pytest.raises(ValueError, match="1-d and of one length"):
        format_csv({"a": np.zeros((2, 2))})


def test_eighteen_decimals_at_most():
    assert format_csv({"a": np.zeros(1)}, decimals=18, header=False) == b"0." + b"0" * 18 + b"\n"
    with pytest.raises(ValueError, match="0..18"):
        format_csv({"a": np.zeros(1)}, decimals=19)


@pytest.mark.parametrize("bad", [
    lambda: format_csv({"a": np.zeros(2)}, sep=", "),
    lambda: format_csv({"a": np.zeros(2)}, decimals=19),
    lambda: format_csv({"a": np.zeros(2)}, decimals={"a": -1}),
    lambda: format_csv({"a": np.zeros(2, dtype=np.complex128)}),
])
def test_bad_calls_raise(bad):
    with pytest.raises(ValueError):
        bad()


def test_write_and_append_to_paths_and_open_files(tmp_path):
    a = {"n": np.array([1, 2]), "x": np.array([0.5, np.nan])}
    b = {"n": np.array([3]), "x": np.array([-1.25])}
    p = tmp_path / "t.csv"
    write_csv(p, a, decimals=2)
    write_csv(p, b, decimals=2, header=False, mode="a")
    want = b"n,x\n1,0.50\n2,\n3,-1.25\n"
    assert p.read_bytes() == want
    text = io.StringIO()
    write_csv(text, a, decimals=2)
    write_csv(text, b, decimals=2, header=False)
    assert text.getvalue().encode() == want
    raw = io.BytesIO()
    write_csv(raw, a, decimals=2)
    assert raw.getvalue() == b"n,x\n1,0.50\n2,\n"


# --- the fio iolog on top of it ---------------------------------------------------------------------------
def _plan(n: int, targets) -> np.ndarray:
    from kvbench.engine.plan import make_plan

    rng = np.random.default_rng(n)
    return make_plan(rng.integers(0, 3, n), rng.integers(0, 1 << 20, n) * 4096, rng.integers(1, 64, n) * 4096,
                     target=rng.choice(np.asarray(targets), n),
                     issue_ns=np.sort(rng.integers(0, 5_000_000_000, n)))


def test_iolog_lines_are_fios_v3(tmp_path):
    plan = _plan(300, [0, 1])
    names = [str(tmp_path / "a.store"), str(tmp_path / "b.store")]
    p = tmp_path / "x.iolog"
    assert write_iolog(p, plan, names, repeat=2) == 600
    ms = plan["issue_ns"] // 1_000_000
    body = [f"{t} {names[g]} {OP_NAMES[o]} {off} {ln}" for t, g, o, off, ln in
            zip(ms.tolist(), plan["target"].tolist(), plan["op"].tolist(), plan["offset"].tolist(),
                plan["length"].tolist())]
    want = (["fio version 3 iolog"] + [f"0 {f} add" for f in names] + [f"0 {f} open" for f in names]
            + body + body + [f"{int(ms.max())} {f} close" for f in names])
    assert p.read_text().splitlines() == want


def test_iolog_writer_skips_other_targets_and_tracks_the_last_time(tmp_path):
    plan = _plan(200, [0, 1, 2])
    w = IologWriter(tmp_path / "x.iolog", {1: "/dev/nvme9n1", 2: "/mnt/l4/kv.bin"})
    half = len(plan) // 2
    assert w.write(plan[:half]) + w.write(plan[half:]) == int((plan["target"] > 0).sum())
    w.close()
    lines = (tmp_path / "x.iolog").read_text().splitlines()
    body = [ln for ln in lines[5:-2]]
    kept = plan[plan["target"] > 0]
    assert [ln.split()[1] for ln in body] == ["/dev/nvme9n1" if g == 1 else "/mnt/l4/kv.bin"
                                              for g in kept["target"].tolist()]
    assert lines[-1] == f"{int(kept['issue_ns'].max() // 1_000_000)} /mnt/l4/kv.bin close"


def test_iolog_times_are_whole_milliseconds_and_repeat_defaults_to_once(tmp_path):
    from kvbench.engine.plan import make_plan

    plan = make_plan([0, 1, 0], [0, 4096, 8192], [4096, 4096, 4096], issue_ns=[999_999, 5_000_000_000, 7_000_999_999])
    p = tmp_path / "x.iolog"
    assert write_iolog(p, plan, ["/dev/x"]) == 3
    lines = p.read_text().splitlines()
    assert [ln.split()[0] for ln in lines[3:]] == ["0", "5000", "7000", "7000"]
    assert write_iolog(p, plan, ["/dev/x"], times_ns=np.array([-5, 2_000_000, 3_999_999])) == 3
    assert [ln.split()[0] for ln in p.read_text().splitlines()[3:]] == ["0", "2", "3", "3"]


def test_an_iolog_with_nothing_written_closes_at_zero(tmp_path):
    from kvbench.engine.plan import PLAN_DTYPE

    w = IologWriter(tmp_path / "x.iolog", {0: "/dev/x"})
    assert w.write(np.zeros(0, dtype=PLAN_DTYPE)) == 0
    w.close()
    assert (tmp_path / "x.iolog").read_text() == "fio version 3 iolog\n0 /dev/x add\n0 /dev/x open\n0 /dev/x close\n"


def test_iolog_refuses_a_target_name_with_white_space(tmp_path):
    with pytest.raises(UsageError, match="white space"):
        IologWriter(tmp_path / "x.iolog", {0: "/tmp/my store"})
    assert not (tmp_path / "x.iolog").exists()
