"""Trace readers: formats, auto-detection, gzip, batching, prefix chaining, and one-line errors on bad input."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest

from kvbench.errors import TraceError, UsageError
from kvbench.stream.chain import SEED, chain_ids, mix
from kvbench.stream.traces import (Trace, builtin_traces, detect_format, iter_trace, parse_field_mapping,
                                   read_trace, resolve_trace)

from tests.conftest import FIXTURES, REPO

SAMPLE = REPO / "workloads" / "traces" / "mooncake-sample.jsonl"
BAILIAN = FIXTURES / "traces" / "bailian_sample.jsonl"
LMBENCH = FIXTURES / "traces" / "lmbench_sample.jsonl"


def _lines(path):
    return [json.loads(x) for x in open(path) if x.strip()]


def _chain_ref(ids):
    """Pure-Python chaining of one request's ids (the reference for the vectorised one)."""
    out, prev = [], np.array([SEED], dtype=np.uint64)
    for i in ids:
        prev = mix(prev, np.array([i], dtype=np.uint64))
        out.append(int(prev[0]))
    return out


def test_mooncake_sample_reads_exactly():
    t = read_trace(SAMPLE)
    recs = _lines(SAMPLE)
    assert t.fmt == "mooncake" and t.block_tokens == 512 and t.n_requests == 1000 == len(recs)
    assert t.keys.dtype == np.uint64 and t.offsets.dtype == np.int64 and t.timestamp_s.dtype == np.float64
    assert t.input_tokens.tolist() == [r["input_length"] for r in recs]
    assert t.output_tokens.tolist() == [r["output_length"] for r in recs]
    assert np.allclose(t.timestamp_s, [r["timestamp"] / 1000 for r in recs], rtol=0, atol=1e-12)
    # Mooncake ids are prefix-chained already: keys are the ids themselves
    assert t.keys.tolist() == [h for r in recs for h in r["hash_ids"]]
    assert t.offsets[-1] == t.n_blocks and np.all(np.diff(t.offsets) == [len(r["hash_ids"]) for r in recs])
    assert "mooncake-sample" in builtin_traces() and resolve_trace("mooncake-sample") == SAMPLE


def test_gzip_is_transparent_and_batches_join(tmp_path):
    gz = tmp_path / "trace.jsonl.gz"
    with open(SAMPLE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain, zipped = read_trace(SAMPLE), read_trace(gz)
    assert detect_format(gz) == "mooncake"
    for name in ("timestamp_s", "input_tokens", "output_tokens", "offsets", "keys"):
        assert np.array_equal(getattr(plain, name), getattr(zipped, name))
    batches = list(iter_trace(gz, batch_requests=97))
    assert [b.n_requests for b in batches][:2] == [97, 97] and sum(len(b) for b in batches) == 1000
    joined = Trace.concat(batches)
    assert np.array_equal(joined.keys, plain.keys) and np.array_equal(joined.timestamp_s, plain.timestamp_s)
    assert batches[3].timestamp_s[0] == plain.timestamp_s[3 * 97]      # one time origin for every batch


def test_lmbench_ns_timestamps_and_chaining():
    recs = _lines(LMBENCH)
    t = read_trace(LMBENCH)
    assert t.fmt == "lmbench" and t.block_tokens == 32
    t0 = int(recs[0]["timestamp"])
    assert t.timestamp_s.tolist() == [(int(r["timestamp"]) - t0) * 1e-9 for r in recs]
    assert t.t0 == pytest.approx(t0 * 1e-9)
    assert t.keys.tolist() == [k for r in recs for k in _chain_ref(r["hash_ids"])]
    # chained keys are equal exactly when the whole id prefix is equal
    prefix_of = {}
    for r in recs:
        for i, k in enumerate(_chain_ref(r["hash_ids"])):
            prefix_of.setdefault(k, set()).add(tuple(r["hash_ids"][: i + 1]))
    assert all(len(v) == 1 for v in prefix_of.values())
    raw = read_trace(LMBENCH, chain=False)
    assert raw.keys.tolist() == [k for r in recs for k in r["hash_ids"]]
    assert len(set(raw.keys.tolist())) < len(set(t.keys.tolist()))   # raw ids conflate different prefixes


def test_bailian_schema():
    recs = _lines(BAILIAN)
    t = read_trace(BAILIAN)
    assert t.fmt == "bailian" and t.block_tokens == 16 and t.n_requests == len(recs)
    assert t.extras["chat_id"].tolist() == [r["chat_id"] for r in recs]
    assert t.extras["parent_chat_id"].tolist() == [r["parent_chat_id"] for r in recs]
    assert t.extras["turn"].tolist() == [r["turn"] for r in recs]
    assert np.allclose(t.timestamp_s, [r["timestamp"] - recs[0]["timestamp"] for r in recs], atol=1e-9)
    # the shared system prompt (first 8 blocks) maps to the same keys in every request
    first8 = {tuple(t.keys[t.offsets[r]:t.offsets[r] + 8].tolist()) for r in range(t.n_requests)}
    assert len(first8) == 1


def test_generic_jsonl_and_csv_with_mapping(tmp_path):
    js = tmp_path / "g.jsonl"
    js.write_text('{"t": 1.5, "in": 40, "blocks": [5, 6, 7]}\n\n{"t": 2.0, "in": 20, "blocks": [5, 6]}\n')
    m = parse_field_mapping(["timestamp=t", "input_length=in", "hash_ids=blocks", "output_length="])
    t = read_trace(js, "jsonl", fields=m, time_unit="s", block_tokens=16)
    assert t.timestamp_s.tolist() == [0.0, 0.5] and t.output_tokens.tolist() == [0, 0]
    assert t.keys[:2].tolist() == t.keys[3:5].tolist()                 # chained: same prefix, same keys
    cs = tmp_path / "g.csv"
    cs.write_text("timestamp,input_length,output_length,hash_ids\n0,40,3,5 6 7\n250,20,1,5;6\n")
    assert detect_format(cs) == "csv"                                    # auto: CSV with canonical header
    c = read_trace(cs, block_tokens=16, time_unit="ms")
    assert c.fmt == "csv" and c.timestamp_s.tolist() == [0.0, 0.25] and np.array_equal(c.keys, t.keys)


def test_csv_needs_block_size(tmp_path):
    cs = tmp_path / "g.csv"
    cs.write_text("timestamp,input_length,output_length,hash_ids\n0,40,3,5 6 7\n")
    with pytest.raises(UsageError, match="block-tokens"):
        read_trace(cs, time_unit="ms")


def test_sort_and_order_check(tmp_path):
    p = tmp_path / "m.jsonl"
    rows = [(0, [1, 2]), (50, [1, 3]), (20, [4])]
    p.write_text("".join(json.dumps({"timestamp": ts, "input_length": 10, "output_length": 1, "hash_ids": h}) + "\n"
                         for ts, h in rows))
    with pytest.raises(TraceError, match=r"m.jsonl:3: field 'timestamp': out-of-order"):
        read_trace(p)
    s = read_trace(p, order="sort")
    assert s.timestamp_s.tolist() == [0.0, 0.02, 0.05] and s.keys.tolist() == [1, 2, 4, 1, 3]
    k = read_trace(p, order="keep")
    assert k.timestamp_s.tolist() == [0.0, 0.05, 0.02]
    # across a batch boundary too
    with pytest.raises(TraceError, match=":3:"):
        list(iter_trace(p, batch_requests=2))


def test_touch_order_is_deepest_first():
    t = read_trace(BAILIAN, chain=False)
    order = t.touch_order()
    refs = t.keys[order]
    expect = [k for r in range(t.n_requests) for k in t.keys[t.offsets[r]:t.offsets[r + 1]][::-1].tolist()]
    assert refs.tolist() == expect
    assert np.array_equal(t.request_of_block()[order], t.request_of_block())


def test_chain_ids_matches_reference():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 9, 200)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    ids = rng.integers(0, 5, int(offsets[-1])).astype(np.uint64)
    keys = chain_ids(ids, offsets)
    for r in range(200):
        a, b = offsets[r], offsets[r + 1]
        assert keys[a:b].tolist() == _chain_ref(ids[a:b].tolist())


def test_slice_take_limit():
    t = read_trace(SAMPLE, limit=50)
    assert t.n_requests == 50
    s = t.slice(10, 20)
    assert s.n_requests == 10 and np.array_equal(s.keys, t.keys[t.offsets[10]:t.offsets[20]])
    rows = np.array([5, 2, 9])
    k = t.take(rows)
    assert k.keys.tolist() == [x for r in rows for x in t.keys[t.offsets[r]:t.offsets[r + 1]].tolist()]


@pytest.mark.parametrize("text,match", [
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1, "inp',
     r"bad.jsonl:2: not valid JSON"),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
     '{"timestamp": 1, "output_length": 1, "hash_ids": [1]}\n', r"bad.jsonl:2: field 'input_length': missing"),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
     '{"timestamp": 1, "input_length": -4, "output_length": 1, "hash_ids": [1]}\n',
     r"bad.jsonl:2: field 'input_length': expected a token count"),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
     '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": [1, "x"]}\n',
     r"bad.jsonl:2: field 'hash_ids': block id 'x'"),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
     '{"timestamp": 1, "input_length": 4, "output_length": 1, "hash_ids": 7}\n',
     r"bad.jsonl:2: field 'hash_ids': expected a list"),
    ('{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]}\n'
     '{"timestamp": "x", "input_length": 4, "output_length": 1, "hash_ids": [1]}\n',
     r"bad.jsonl:2: field 'timestamp'"),
    ("\n\n", r"bad.jsonl: the trace is empty"),
    ('{"ts": 0, "blocks": [1]}\n', r"bad.jsonl:1: cannot detect the trace format"),
    ("a,b\n1,2\n", r"cannot detect the trace format"),
])
def test_bad_input_names_file_line_field(tmp_path, text, match):
    p = tmp_path / "bad.jsonl"
    p.write_text(text)
    with pytest.raises(TraceError, match=match) as e:
        read_trace(p)
    assert "\n" not in str(e.value) and "fix:" in str(e.value)


def test_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="unknown trace format 'parquet'"):
        read_trace(SAMPLE, "parquet")
    with pytest.raises(TraceError, match="trace not found"):
        read_trace(tmp_path / "nope.jsonl")
    with pytest.raises(UsageError, match="unknown trace field"):
        read_trace(SAMPLE, fields={"when": "t"})
    with pytest.raises(UsageError, match=r"--field: malformed field 'timestamp' \(not KEY=VALUE\)"):
        parse_field_mapping(["timestamp"])
    with pytest.raises(UsageError, match="--field: unknown field 'when'"):
        parse_field_mapping(["when=t"])
    with pytest.raises(UsageError, match="--field: field 'timestamp' given twice"):
        parse_field_mapping(["timestamp=t", "timestamp=u"])
    assert parse_field_mapping([" timestamp = t ", "output-length="]) == {"timestamp": "t", "output_length": None}
    with pytest.raises(UsageError, match="block_tokens must be > 0"):
        read_trace(SAMPLE, block_tokens=0)


def test_shared_traces(shared_dir):
    mc = read_trace(shared_dir / "traces" / "mooncake-fast25" / "synthetic_trace.jsonl")
    assert (mc.n_requests, mc.n_blocks, np.unique(mc.keys).size) == (3993, 121877, 43924)
    assert mc.duration_s == pytest.approx(1022.025)
    gmi = read_trace(shared_dir / "traces" / "lmbench-gmi" / "gmi_trace.jsonl")
    assert gmi.fmt == "lmbench" and (gmi.n_requests, gmi.n_blocks) == (1931, 119692)
    # README: infinite-cache reuse 0.645 when a block hits only if its whole id-prefix was seen before
    assert 1 - np.unique(gmi.keys).size / gmi.n_blocks == pytest.approx(0.645, abs=5e-4)
    assert gmi.duration_s == pytest.approx(86245, abs=1)


def test_shared_gmi_stats(shared_dir):
    from kvbench.stream.stats import prefix_chaining, trace_stats

    raw = read_trace(shared_dir / "traces" / "lmbench-gmi" / "gmi_trace.jsonl", chain=False)
    chk = prefix_chaining(raw)           # README: 1,336 ids in several contexts, 16 requests repeat an id
    assert (chk["prefix_chained"], chk["ids_in_several_contexts"], chk["repeated_ids_within_requests"]) == \
        (False, 1336, 16)
    s = trace_stats(raw)
    assert s["tokens_per_block_id"]["p50"] == pytest.approx(34.1, abs=0.05)
    assert s["tokens_per_block_id"]["max"] == pytest.approx(101.6, abs=0.05)
    assert s["lines_matching_block_size"] == pytest.approx(758 / 1931)


def test_trace_type_sits_outside_the_readers_import_circle():
    """Trace lives in kvbench/stream/trace.py, which imports no other kvbench module but the errors; key sampling
    and the generator take it from there and never import the readers (kvbench.stream.traces), which import them:
    no circle left to break with function-level imports. traces.Trace is the same class."""
    import ast
    from pathlib import Path

    import kvbench.stream.trace as tmod
    from kvbench.stream import traces

    def kvbench_imports(path):
        tree = ast.parse(Path(path).read_text())
        out = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kvbench"):
                out.add(n.module)
            elif isinstance(n, ast.Import):
                out |= {a.name for a in n.names if a.name.startswith("kvbench")}
        return out

    root = Path(tmod.__file__).parent
    assert kvbench_imports(root / "trace.py") == {"kvbench.errors"}
    for name in ("sampling.py", "synth.py"):
        assert "kvbench.stream.traces" not in kvbench_imports(root / name), name
    assert traces.Trace is tmod.Trace


def test_trace_errors_name_the_real_problem(cli, tmp_path):
    body = b"".join(json.dumps({"timestamp": i, "input_length": 512, "output_length": 1,
                                "hash_ids": [i]}).encode() + b"\n" for i in range(2000))
    bad = bytearray(gzip.compress(body))
    bad[20:60] = b"\x00" * 40                       # valid magic, broken deflate data
    (tmp_path / "bad.jsonl.gz").write_bytes(bytes(bad))
    r = cli("trace", "stats", tmp_path / "bad.jsonl.gz")
    assert r.exit_code == 2 and "corrupt gzip data" in r.output and "internal error" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = cli("trace", "stats", "/dev/null")
    assert r.exit_code == 2 and "/dev/null is not a regular file" in r.output and "not found" not in r.output
    (tmp_path / "o.jsonl").write_text('{"timestamp": 5, "input_length": 512, "output_length": 1, "hash_ids": [1]}\n'
                                      '{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [2]}\n')
    r = cli("trace", "stats", tmp_path / "o.jsonl")
    assert r.exit_code == 2 and "out-of-order timestamp" in r.output and "--sort" in r.output
    assert "--order keep" not in r.output
