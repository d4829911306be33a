"""The binary columnar trace form (.kvbt) and the ingest cache: exact round trips, invalidation, damage."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pytest

from kvbench.errors import TraceError, UsageError
from kvbench.stream import tracebin
from kvbench.stream.traces import convert_trace, iter_trace, parse_field_mapping, read_trace

from tests.conftest import FIXTURES, REPO

SAMPLE = REPO / "workloads" / "traces" / "mooncake-sample.jsonl"
SYNTH = REPO / "workloads" / "traces" / "mooncake-synthetic.jsonl.gz"
FIELDS = ("timestamp_s", "input_tokens", "output_tokens", "offsets", "keys")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("KVBENCH_CACHE_DIR", str(d))
    monkeypatch.setenv("KVBENCH_TRACE_CACHE", "1")
    return d / "traces"


def _parsed(path, **kw):
    """The trace read from its text with the cache off: the reference every binary path must equal."""
    old = os.environ.get("KVBENCH_TRACE_CACHE")
    os.environ["KVBENCH_TRACE_CACHE"] = "0"
    try:
        return read_trace(path, **kw)
    finally:
        os.environ["KVBENCH_TRACE_CACHE"] = old if old is not None else "1"


def _same(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f
    assert set(a.extras) == set(b.extras)
    for k in a.extras:
        assert np.array_equal(a.extras[k], b.extras[k]), k
    assert (a.block_tokens, a.fmt, a.t0, a.n_requests) == (b.block_tokens, b.fmt, b.t0, b.n_requests)


def _generic(tmp_path):
    js = tmp_path / "g.jsonl"
    js.write_text('{"t": 1.5, "in": 40, "blocks": [5, 6, 7]}\n\n{"t": 2.25, "in": 20, "blocks": [5, 6]}\n'
                  '{"t": 3.0, "in": 0, "blocks": []}\n')
    cs = tmp_path / "g.csv"
    cs.write_text("timestamp,input_length,output_length,hash_ids\n0,40,3,5 6 7\n250,20,1,5;6\n"
                  "300,9,1,18446744073709551615\n")
    m = parse_field_mapping(["timestamp=t", "input_length=in", "hash_ids=blocks", "output_length="])
    return [(js, {"fmt": "jsonl", "fields": m, "time_unit": "s", "block_tokens": 16}),
            (cs, {"block_tokens": 16, "time_unit": "ms"})]


def _cases(tmp_path):
    gz = tmp_path / "s.jsonl.gz"
    with open(SAMPLE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return [(SAMPLE, {}), (gz, {}), (SYNTH, {}), (FIXTURES / "traces" / "bailian_sample.jsonl", {}),
            (FIXTURES / "traces" / "lmbench_sample.jsonl", {}), (FIXTURES / "traces" / "lmbench_sample.jsonl",
                                                                 {"chain": False}), *_generic(tmp_path)]


def test_cache_and_convert_round_trip_every_format_exactly(tmp_path, cache):
    for i, (src, kw) in enumerate(_cases(tmp_path)):
        ref = _parsed(src, **kw)
        first = read_trace(src, **kw)                    # parses and writes the cache
        assert len(list(cache.glob("*.kvbt"))) >= 1
        again = read_trace(src, **kw)                    # from the cache
        _same(ref, first)
        _same(ref, again)
        out = tmp_path / f"c{i}.kvbt"
        conv = {k: v for k, v in kw.items() if k != "fmt"}
        convert_trace(src, out, kw.get("fmt", "auto"), **conv)
        _same(ref, read_trace(out, chain=kw.get("chain")))
        # batches from the binary cut at the same places as the text's
        for a, b in zip(iter_trace(src, batch_requests=3, **kw), iter_trace(out, batch_requests=3,
                                                                             chain=kw.get("chain"))):
            _same(a, b)


def test_cache_is_used_and_a_changed_source_invalidates_it(tmp_path, cache):
    p = tmp_path / "m.jsonl"
    recs = [{"timestamp": 10 * i, "input_length": 512, "output_length": 1, "hash_ids": [1, 2 + i]} for i in range(5)]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    read_trace(p)
    (entry,) = cache.glob("*.kvbt")
    meta = tracebin.Reader(entry).meta
    assert meta["source"]["size"] == p.stat().st_size and meta["requests"] == 5
    # same size, new content and mtime: the cache must not be used
    recs[4]["hash_ids"] = [1, 9]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert read_trace(p).keys[-1] == 9
    assert tracebin.Reader(entry).meta["source"]["mtime_ns"] == p.stat().st_mtime_ns    # rewritten in place
    # a longer file
    with open(p, "a") as fh:
        fh.write(json.dumps({"timestamp": 99, "input_length": 5, "output_length": 1, "hash_ids": [7]}) + "\n")
    assert read_trace(p).n_requests == 6


def test_a_same_length_edit_with_the_mtime_put_back_is_seen(tmp_path, cache):
    """Issue 30: the cache was keyed on size and mtime, so an edit of the same length whose mtime was restored
    (cp -p, rsync -a, tar do this) served the old trace. Every such edit is seen: in place (ctime moves, the
    edges' hash changes), by a copy over it (a new inode), and where only the content's hash can tell."""
    p = tmp_path / "m.jsonl"
    recs = [{"timestamp": 10 * i, "input_length": 512, "output_length": 1, "hash_ids": [1, 2 + i]} for i in range(5)]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    st0 = p.stat()
    assert read_trace(p).keys[-1] == 6                           # cached now
    for i, new_id in enumerate((8, 9)):
        recs[4]["hash_ids"] = [1, new_id]
        if i == 0:                                                # edit in place, then the mtime put back
            p.write_text("".join(json.dumps(r) + "\n" for r in recs))
        else:                                                     # a copy with its times (cp -p) over it
            other = tmp_path / "other.jsonl"
            other.write_text("".join(json.dumps(r) + "\n" for r in recs))
            os.utime(other, ns=(st0.st_atime_ns, st0.st_mtime_ns))
            os.replace(other, p)
        os.utime(p, ns=(st0.st_atime_ns, st0.st_mtime_ns))
        assert (p.stat().st_size, p.stat().st_mtime_ns) == (st0.st_size, st0.st_mtime_ns)
        assert read_trace(p).keys[-1] == new_id
    # the content's hash alone: identity fields as they were, only the bytes differ
    real = tracebin.source_key(p)
    recs[4]["hash_ids"] = [1, 7]
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    key = tracebin.source_key(p)
    assert key["edges_sha256"] != real["edges_sha256"]
    assert {k: v for k, v in key.items() if k not in ("edges_sha256", "ctime_ns")} == \
        {k: v for k, v in real.items() if k not in ("edges_sha256", "ctime_ns")} | {"mtime_ns": key["mtime_ns"]}


def test_the_source_hash_covers_the_first_and_last_mib(tmp_path):
    p = tmp_path / "big.bin"
    data = bytearray(os.urandom(3 << 20))
    p.write_bytes(bytes(data))
    k0 = tracebin.source_key(p)["edges_sha256"]
    for where, changes in ((10, True), ((3 << 20) - 10, True), ((3 << 20) // 2, False)):
        d = bytearray(data)
        d[where] ^= 1
        p.write_bytes(bytes(d))
        assert (tracebin.source_key(p)["edges_sha256"] != k0) == changes, where


def _damage(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncate":
        path.write_bytes(bytes(data[:len(data) - 100]))
    elif how == "flip":
        data[-200] ^= 0x5A                       # inside the last column's data
        path.write_bytes(bytes(data))
    elif how == "header":
        data[20] ^= 0xFF                         # inside the JSON header
        path.write_bytes(bytes(data))
    elif how == "magic":
        path.write_bytes(b"NOTATRACE" + bytes(data[9:]))


@pytest.mark.parametrize("how", ["truncate", "flip", "header", "magic"])
def test_corrupt_cache_is_detected_and_rebuilt_with_one_warning(tmp_path, cache, capsys, how):
    src = tmp_path / "s.jsonl"
    shutil.copy(SAMPLE, src)
    ref = _parsed(src)
    read_trace(src)
    capsys.readouterr()
    (entry,) = cache.glob("*.kvbt")
    _damage(entry, how)
    got = read_trace(src)
    _same(ref, got)
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("kvbench: warning: trace cache") and "rebuilding" in err[0]
    tracebin.Reader(entry)                       # rebuilt: intact again
    read_trace(src)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("how", ["truncate", "flip", "header"])
def test_damaged_kvbt_file_is_a_one_line_error(tmp_path, how):
    out = tmp_path / "s.kvbt"
    convert_trace(SAMPLE, out)
    _damage(out, how)
    with pytest.raises(TraceError, match="damaged binary trace") as e:
        read_trace(out)
    assert "\n" not in str(e.value) and "kvbench trace convert" in str(e.value)


def test_cache_off_unwritable_or_failed_reads_leave_nothing(tmp_path, cache, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1,\n')
    with pytest.raises(TraceError):
        read_trace(bad)
    assert not list(cache.glob("*")) if cache.exists() else True
    read_trace(SAMPLE, limit=10)                 # a partial read caches nothing
    assert not cache.exists() or not list(cache.glob("*"))
    monkeypatch.setenv("KVBENCH_TRACE_CACHE", "0")
    read_trace(SAMPLE)
    assert not cache.exists() or not list(cache.glob("*"))


def test_mixed_timestamp_types_are_read_but_not_stored(tmp_path, cache):
    # an integer batch then a fractional one: the binary form cannot hold both exactly, so it is not written
    p = tmp_path / "m.jsonl"
    p.write_text('{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
                 '{"timestamp": 2.5, "input_length": 1, "output_length": 1, "hash_ids": [2]}\n')
    assert [b.timestamp_s.tolist() for b in iter_trace(p, batch_requests=1)] == [[0.0], [0.0015]]
    assert not list(cache.glob("*.kvbt"))
    assert read_trace(p).timestamp_s.tolist() == [0.0, 0.0015]        # one batch: one float column, cached
    assert len(list(cache.glob("*.kvbt"))) == 1


def test_convert_cli(tmp_path, cli):
    out = tmp_path / "s.kvbt"
    r = cli("trace", "convert", "mooncake-sample", "-o", out, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["requests"] == 1000 and d["block_references"] == 23787 and d["format"] == "mooncake"
    r = cli("mrc", out, "--json")
    assert r.exit_code == 0 and json.loads(r.output)["references"] == 23787
    other = tmp_path / "keep.txt"
    other.write_text("precious")
    with pytest.raises(UsageError, match="was not written by kvbench"):
        convert_trace(SAMPLE, other)
    assert other.read_text() == "precious"
    with pytest.raises(UsageError, match="binary mooncake trace, not csv"):
        read_trace(out, "csv")


@pytest.mark.parametrize("batch", [1, 7, 1 << 18])
def test_compiled_id_parse_equals_the_json_parse(tmp_path, monkeypatch, batch):
    """Every chunk through the compiled id-list parser (threshold 0) reads exactly what orjson reads, for every
    JSON Lines case (gzip, Bailian, LMBench chained and not, a generic mapping with blank lines and an empty
    list), in any batch size; a line the kernel refuses falls back to the ordinary parse."""
    from kvbench.stream import traces

    jsonl = [(p, kw) for p, kw in _cases(tmp_path) if not str(p).endswith(".csv")]
    mixed = tmp_path / "mixed.jsonl"       # kernel-refused lines (float, spaces, nested key in a string) too
    mixed.write_text('{"timestamp": 0, "input_length": 9, "output_length": 1, "hash_ids": [ 1 ,2,\t3 ]}\n'
                     '{"timestamp": 1, "input_length": 9, "output_length": 1, "hash_ids": [18446744073709551615]}\n'
                     '{"timestamp": 2, "input_length": 9, "output_length": 1, "hash_ids": []}\n')
    jsonl.append((mixed, {}))
    for path, kw in jsonl:
        want = _parsed(path, batch_requests=batch, **kw)
        monkeypatch.setattr(traces, "FAST_IDS_BYTES", 0)
        got = _parsed(path, batch_requests=batch, **kw)
        monkeypatch.setattr(traces, "FAST_IDS_BYTES", 1 << 60)
        _same(got, want)
    assert _parsed(mixed).keys.tolist() == [1, 2, 3, 2**64 - 1]
    import orjson
    lines = SAMPLE.read_bytes().splitlines()       # the kernel itself takes the shipped sample whole
    recs, flat, counts = traces._parse_ids_fast(lines, b'"hash_ids"', orjson.loads)
    want = [json.loads(x)["hash_ids"] for x in lines]
    assert flat.tolist() == [i for h in want for i in h] and counts.tolist() == [len(h) for h in want]
    assert all(r["hash_ids"] == [] and r["timestamp"] == json.loads(x)["timestamp"] for r, x in zip(recs, lines))


@pytest.mark.parametrize("ids, message", [
    ("[1, -2]", "block id -2 is not an integer"),
    ("[1, 2.5]", "block id 2.5 is not an integer"),
    ('[1, "x"]', "block id 'x' is not an integer"),
    ("[18446744073709551616]", "block id 1.8446744073709552e+19 is not an integer"),   # orjson: a float
    ("[1,, 2]", "not valid JSON"),
    ("[01]", "not valid JSON"),
    ("[1, [2]]", "block id [2] is not an integer"),
])
def test_compiled_id_parse_refusals_name_the_line(tmp_path, monkeypatch, ids, message):
    """A bad id list in a chunk the compiled parser reads is refused by it and reported by the ordinary parse:
    the same one-line error naming the line."""
    from kvbench.stream import traces

    p = tmp_path / "bad.jsonl"
    good = '{"timestamp": %d, "input_length": 9, "output_length": 1, "hash_ids": [%d, 7]}\n'
    p.write_text(good % (0, 3) + good % (1, 4) +
                 '{"timestamp": 2, "input_length": 9, "output_length": 1, "hash_ids": %s}\n' % ids)
    monkeypatch.setattr(traces, "FAST_IDS_BYTES", 0)
    with pytest.raises(TraceError, match=r"bad\.jsonl:3: ") as e:
        _parsed(p)
    assert message in str(e.value)
