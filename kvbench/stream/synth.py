"""Generate a workload model's requests at any horizon, vectorised, streamed as ``Trace`` batches in time order.

Time is cut into windows of about ``WINDOW_REQUESTS`` requests. In each window the sessions that start in it
are drawn at once (the arrival process is a unit-rate renewal process, exponential or lognormal gaps, mapped
through the cumulative intensity of the daily and weekly cycles, its count held to the model's rate over each
rate window: ``Generator._session_starts``), and every one is expanded into all its requests at once (visits,
turns, think times, returns, context growth): numpy arrays, no Python loop per session or per block. Requests later than
the window wait in a pending table of per-request scalars (returns days later stay there until due), so memory
is bounded by the rate times the longest delay, never by the horizon. Block keys are computed only when a
request is emitted, from (system prompt, document, session, block index, prompt length):

- a block wholly inside a system prompt is shared by every session using that prompt;
- a block wholly inside system prompt + document is shared by the sessions attaching that document to it;
- any other full block belongs to its session (the same key in every later turn: the context is reused);
- the partial last block is keyed by its length too (in the next turn it holds more tokens: a new block).

So keys identify whole prefixes (equal keys, equal prefixes), as Mooncake's prefix-chained hash ids do, and a
trace written from them is a valid Mooncake trace. Timestamps are rounded to milliseconds first, so a ``gen:``
stream and the file ``trace gen`` writes from the same model and seed read back identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np

from kvbench.errors import UsageError
from kvbench.stream.workload import WorkloadModel

GEN_PREFIX = "gen:"
WINDOW_REQUESTS = 65_536
BATCH_REFS = 1 << 22            # at most this many block references per emitted batch
MAX_REQUESTS = 1e10             # a stream past this (weeks at thousands of requests/s) is a typo, not a workload
LINE_BYTES, ID_BYTES = 75, 11     # a Mooncake line without ids, and one id with its separator (estimates)
GRID_S = 60.0                   # resolution of the tabulated arrival intensity
KEY_MASK = np.uint64((1 << 63) - 1)   # keys fit a signed 64-bit JSON integer
_CALIBRATION_SESSIONS = 20_000
HOLD_SESSIONS = (1024, 1 << 20)  # a rate window holds this many sessions at least, and at most (memory)
HOLD_S = 86_400.0               # the rate window of a model that was not fitted: a day


# --- small samplers --------------------------------------------------------------------------------
# Every draw of a batch of sessions is stratified (Latin hypercube sampling): ``_strata`` gives n uniforms, one in
# each of the n equal strata of [0, 1), in random order, and each law is sampled through its inverse CDF. Each
# draw keeps its law exactly and the fields stay independent of each other (each one's order is its own random
# permutation), but a batch's empirical distribution is the law's, not a random sample's: a trace's share of
# sessions with a shared system prompt, its heavy-tailed first messages and its turns hold the model's
# proportions instead of straying by sqrt(n). That straying moved one 17-minute trace's write rate by 3-5% at
# every capacity, as far as the model's own error (``Generator._session_starts`` holds the sessions' count the
# same way).
def _strata(rng, n: int) -> np.ndarray:
    """n uniforms on [0, 1), one in each stratum [i/n, (i+1)/n), in random order."""
    if n <= 0:
        return np.zeros(0)
    return np.minimum((rng.permutation(n) + rng.random(n)) / n, _BELOW_1)   # (n - 1 + r) / n may round to 1


_BELOW_1 = 1.0 - 2.0 ** -53


# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9)
_NA = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
       -3.066479806614716e+01, 2.506628277459239e+00)
_NB = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
       -1.328068155288572e+01, 1.0)
_NC = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
       4.374664141464968e+00, 2.938163982698783e+00)
_ND = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1.0)
_NLOW = 0.02425


def norm_ppf(u: np.ndarray) -> np.ndarray:
    """The standard normal quantile of ``u`` in (0, 1) (0 and 1 are clipped to the doubles beside them)."""
    u = np.clip(np.asarray(u, dtype=np.float64), 1e-300, _BELOW_1)
    x = np.empty_like(u)
    lo, hi = u < _NLOW, u > 1.0 - _NLOW
    mid = ~(lo | hi)
    t = np.sqrt(-2.0 * np.log(u[lo]))
    x[lo] = np.polyval(_NC, t) / np.polyval(_ND, t)
    t = np.sqrt(-2.0 * np.log1p(-u[hi]))
    x[hi] = -np.polyval(_NC, t) / np.polyval(_ND, t)
    q = u[mid] - 0.5
    r = q * q
    x[mid] = np.polyval(_NA, r) * q / np.polyval(_NB, r)
    return x


def _lognormal(rng, mu: float | np.ndarray, sigma: float | np.ndarray, n: int) -> np.ndarray:
    """n lognormal draws of log-mean ``mu`` and log-sd ``sigma``, stratified."""
    return np.exp(mu + sigma * norm_ppf(_strata(rng, n)))


def _lognormal_mean(rng, mean: float, sigma: float, n: int, lo: int = 0) -> np.ndarray:
    """Integer lognormal draws with the given mean (0 when the mean is 0)."""
    if mean <= 0:
        return np.zeros(n, dtype=np.int64)
    x = _lognormal(rng, math.log(mean) - sigma * sigma / 2.0, sigma, n) if sigma > 0 else np.full(n, float(mean))
    return np.maximum(lo, np.rint(x)).astype(np.int64)


def _lengths(rng, mean: float, sigma: float, quantiles: tuple, n: int, lo: int = 0) -> np.ndarray:
    """Token counts: from the quantiles (inverse CDF, linear between them) when given, else lognormal."""
    if not quantiles:
        return _lognormal_mean(rng, mean, sigma, n, lo)
    q = np.asarray(quantiles, dtype=np.float64)
    x = np.interp(_strata(rng, n), np.linspace(0.0, 1.0, q.size), q)
    return np.maximum(lo, np.rint(x)).astype(np.int64)


def _lognormal_median(rng, median: float, sigma: float, n: int) -> np.ndarray:
    if median <= 0:
        return np.zeros(n)
    return _lognormal(rng, math.log(median), sigma, n) if sigma > 0 else np.full(n, float(median))


def _zipf_cdf(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    c = np.cumsum(w)
    return c / c[-1]


def _geometric(rng, mean: float, n: int) -> np.ndarray:
    """Counts >= 1 with the given mean (geometric: each one more with probability 1 - 1 / mean), stratified."""
    if not mean > 1:
        return np.ones(n, dtype=np.int64)
    return 1 + np.floor(np.log1p(-_strata(rng, n)) / math.log1p(-1.0 / mean)).astype(np.int64)


def intensity(model: WorkloadModel, t: np.ndarray) -> np.ndarray:
    """Relative arrival intensity at times ``t`` (seconds from the start): mean 1 over a week."""
    a = model.arrivals
    hour = (a.start_hour + np.asarray(t, dtype=np.float64) / 3600.0) % 24.0
    m = 1.0 + a.diurnal_amplitude * np.cos(2.0 * np.pi * (hour - a.peak_hour) / 24.0)
    if a.weekend_factor != 1.0:
        day = (a.start_weekday + np.floor((a.start_hour * 3600.0 + np.asarray(t)) / 86400.0)) % 7
        m = m * np.where(day >= 5, a.weekend_factor, 1.0) / ((5.0 + 2.0 * a.weekend_factor) / 7.0)
    return m


# --- sessions -> requests --------------------------------------------------------------------------
@dataclass
class _Rows:
    """Per-request scalars of requests not yet emitted (keys are computed at emission). Sessions are expanded
    whole, so the requests of sessions that come back hours later wait here: times and session ids are int64,
    the rest int32 (token counts and prompt/document indices), 40 bytes a waiting request instead of 64."""

    t_ms: np.ndarray
    session: np.ndarray
    system: np.ndarray
    system_len: np.ndarray
    shared_len: np.ndarray
    doc: np.ndarray
    prompt: np.ndarray
    output: np.ndarray

    @staticmethod
    def empty() -> "_Rows":
        i, j = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return _Rows(i, i, j, j, j, j, j, j)

    def __len__(self) -> int:
        return int(self.t_ms.shape[0])

    def take(self, idx) -> "_Rows":
        return _Rows(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    @staticmethod
    def concat(parts: list["_Rows"]) -> "_Rows":
        return _Rows(*(np.concatenate([getattr(p, f) for p in parts]) for f in _Rows.__dataclass_fields__))


class Generator:
    """A seeded stream of one model's requests over ``duration_s`` seconds at ``rate`` requests/s."""

    def __init__(self, model: WorkloadModel, *, duration_s: float, rate: float | None = None, seed: int = 0,
                 probe: tuple[float, float] | None = None):
        """``probe``: (requests per session, blocks per request) another seed's generator of the same model
        measured (``Generator.probe``), instead of expanding ``_CALIBRATION_SESSIONS`` sessions again: what a
        fit's calibration, which generates the same model under dozens of seeds, passes."""
        model = (model.with_rate(rate) if rate is not None else model).validate()
        if not duration_s > 0 or not math.isfinite(duration_s):
            raise UsageError(f"duration must be > 0 s, got {duration_s}", "give e.g. --duration 7d")
        self.model, self.duration_s, self.seed = model, float(duration_s), int(seed)
        p = model.prompts
        rng = np.random.default_rng([self.seed, 1])
        self.system_len = _lognormal_mean(rng, p.system_tokens, p.system_sigma, p.system_prompts)
        if p.system_prompt_tokens:
            self.system_len = np.rint(np.asarray(p.system_prompt_tokens)).astype(np.int64)
        self.system_cdf = _zipf_cdf(p.system_prompts, p.system_zipf)
        if p.system_prompt_weights:
            w = np.cumsum(np.asarray(p.system_prompt_weights, dtype=np.float64))
            self.system_cdf = w / w[-1]
        # each prompt's own first-message lengths (a mean of 0: the pooled distribution)
        self.system_user = (np.asarray(p.system_user_tokens, dtype=np.float64),
                            np.asarray(p.system_user_sigma, dtype=np.float64)) if p.system_user_tokens else None
        self.system_user_q = None
        if p.system_user_quantiles:
            q = np.asarray(p.system_user_quantiles, dtype=np.float64).reshape(p.system_prompts, -1)
            self.system_user_q = (q, q.max(axis=1) > 0)
        n_docs = p.documents if p.document_probability > 0 else 0
        self.doc_len = _lengths(rng, p.document_tokens, p.document_sigma, p.document_quantiles, n_docs, lo=1)
        self.doc_cdf = _zipf_cdf(n_docs, p.document_zipf) if n_docs else None
        self.salt = np.uint64(self.seed & 0xFFFF_FFFF_FFFF_FFFF)
        # requests a session really makes (context limits end some early): calibrates the session rate
        if probe is None:
            rows = self._expand(np.random.default_rng([self.seed, 2]), np.zeros(_CALIBRATION_SESSIONS),
                                np.arange(_CALIBRATION_SESSIONS), horizon_ms=None)
            self.requests_per_session = max(1.0, len(rows) / _CALIBRATION_SESSIONS)
            self.blocks_per_request = float(np.mean(np.ceil(rows.prompt / model.block_tokens))) if len(rows) else 0.0
        else:
            self.requests_per_session, self.blocks_per_request = max(1.0, float(probe[0])), float(probe[1])
        self.session_rate = model.arrivals.rate / self.requests_per_session
        # the rate window: the count of sessions the model's rate states is held over each one
        lo, hi = HOLD_SESSIONS
        self.hold_sessions = float(np.clip(self.session_rate * (model.fitted_span_s or HOLD_S), lo, hi))
        # what the stream holds, before any array of its size exists: refused when no machine could
        self.expected_requests = model.arrivals.rate * self.duration_s
        self.expected_bytes = self.expected_requests * (LINE_BYTES + ID_BYTES * self.blocks_per_request)
        if self.expected_requests > MAX_REQUESTS:
            from kvbench.units import format_bytes

            raise UsageError(f"{self.duration_s / 86400:,.3g} days at {model.arrivals.rate:,.4g} requests/s is "
                             f"{self.expected_requests:,.3g} requests (about {format_bytes(self.expected_bytes)} "
                             f"as text); kvbench generates at most {MAX_REQUESTS:,.0e}",
                             "give a lower --rate or a shorter --duration")
        # cumulative intensity on a grid: session arrivals in operational time map back through it
        grid = np.arange(0.0, self.duration_s + 2 * GRID_S, GRID_S)
        m = intensity(model, grid)
        self._grid = grid
        self._cum = np.concatenate([[0.0], np.cumsum((m[1:] + m[:-1]) * 0.5 * GRID_S)]) * self.session_rate

    @property
    def probe(self) -> tuple[float, float]:
        return self.requests_per_session, self.blocks_per_request

    @staticmethod
    def arrival_state() -> dict:
        """What ``_session_starts`` carries between calls: the drawn starts not due yet, the next rate window."""
        return {"carry": np.zeros(0), "window": 0}

    def _session_starts(self, rng, state: dict, t1: float) -> np.ndarray:
        """Start times (s) of the sessions arriving before ``t1`` not drawn yet (``state`` carries the rest).

        In operational time (unit rate: one session expected per unit), rate window ``b`` is the units
        (bK, (b + 1)K] of K = ``hold_sessions``: its round((b + 1)K) - round(bK) gaps are drawn from the law
        (exponential, or lognormal of CV ``burstiness``) and scaled to sum to K, so the window holds exactly the
        sessions the rate states (its last at (b + 1)K) while the gaps inside keep their law. A renewal process
        left free would let a trace's count stray as burstiness / sqrt(sessions): at a CV of 6.9, about 3% over a
        34-day trace, a write rate off by as much although the model states its rate. The model's rate is the
        count of the span it was fitted on (or a day's, ``HOLD_S``); the count varies within a window, not
        beyond it."""
        cv = self.model.arrivals.burstiness
        sigma = math.sqrt(math.log1p(cv * cv))         # lognormal gaps of this CV (their scale is the window's)
        k = self.hold_sessions
        target = float(np.interp(min(t1, self._grid[-1]), self._grid, self._cum))
        parts, b = [state["carry"]], state["window"]
        while b * k < target:
            n = int(round((b + 1) * k) - round(b * k))
            gaps = rng.standard_exponential(n) if cv == 1.0 else rng.lognormal(sigma=sigma, size=n)
            ops = np.cumsum(gaps)
            parts.append(b * k + ops * (k / ops[-1]))
            b += 1
        ops = np.concatenate(parts)
        due = ops < target
        state["carry"], state["window"] = ops[~due], b
        return np.interp(ops[due], self._cum, self._grid)

    def _expand(self, rng, start_s: np.ndarray, uid: np.ndarray, horizon_ms: int | None) -> _Rows:
        """Every request of the given sessions (vectorised): visits, turns, times, context growth."""
        m = self.model
        s, p = m.sessions, m.prompts
        n = start_s.shape[0]
        if n == 0:
            return _Rows.empty()
        system = np.searchsorted(self.system_cdf, _strata(rng, n), side="right").clip(0, p.system_prompts - 1)
        if p.system_probability < 1.0:
            system = np.where(_strata(rng, n) < p.system_probability, system, -1)
        doc = np.full(n, -1, dtype=np.int64)
        if self.doc_cdf is not None:
            has = _strata(rng, n) < p.document_probability
            doc[has] = np.searchsorted(self.doc_cdf, _strata(rng, int(has.sum())), side="right").clip(
                0, len(self.doc_len) - 1)
        system_len = np.where(system >= 0, self.system_len[np.maximum(system, 0)], 0)
        shared = system_len + np.where(doc >= 0, self.doc_len[np.maximum(doc, 0)] if len(self.doc_len) else 0, 0)
        visits = _geometric(rng, 1.0 / (1.0 - s.return_probability), n)
        v_session = np.repeat(np.arange(n), visits)
        turns = _geometric(rng, s.turns_mean, v_session.size)
        r_visit = np.repeat(np.arange(v_session.size), turns)
        r_session = v_session[r_visit]
        R = r_visit.size
        v_first = np.zeros(v_session.size + 1, dtype=np.int64)
        np.cumsum(turns, out=v_first[1:])
        s_first = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(r_session, minlength=n), out=s_first[1:])
        first_of_visit = np.zeros(R, dtype=bool)
        first_of_visit[v_first[:-1]] = True
        first_of_session = np.zeros(R, dtype=bool)
        first_of_session[s_first[:-1]] = True
        gaps = _lognormal_median(rng, s.think_time_s, s.think_sigma, R)
        returns = first_of_visit & ~first_of_session
        gaps[returns] = _lognormal_median(rng, s.return_time_s, s.return_sigma, int(returns.sum()))
        gaps[first_of_session] = 0.0
        cs = np.cumsum(gaps)
        t = start_s[r_session] + cs - cs[s_first[:-1]][r_session]
        user = np.empty(R, dtype=np.int64)
        user[first_of_session] = _lengths(rng, p.first_user_tokens, p.first_user_sigma, p.first_user_quantiles, n,
                                          lo=1)
        user[~first_of_session] = _lengths(rng, p.user_tokens, p.user_sigma, p.user_quantiles, R - n)
        if p.bare_user_tokens > 0 or p.bare_user_quantiles:
            # sessions with no shared system prompt: their own first-message lengths
            bare = first_of_session & (system[r_session] < 0)
            user[bare] = _lengths(rng, p.bare_user_tokens, p.bare_user_sigma, p.bare_user_quantiles,
                                  int(bare.sum()), lo=1)
        if self.system_user is not None:
            mean, sig = self.system_user
            k = system[r_session]
            own = first_of_session & (k >= 0)
            own[own] = mean[k[own]] > 0
            mu, sg = mean[k[own]], sig[k[own]]
            user[own] = np.maximum(1, np.rint(_lognormal(rng, np.log(mu) - sg * sg / 2.0, sg, mu.size)))
        if self.system_user_q is not None:
            # prompts whose sessions' first messages are measured quantiles (inverse CDF, linear between them)
            q, has = self.system_user_q
            k = system[r_session]
            own = first_of_session & (k >= 0)
            own[own] = has[k[own]]
            rows = q[k[own]]
            x = _strata(rng, int(own.sum())) * (q.shape[1] - 1)
            i = np.minimum(x.astype(np.int64), q.shape[1] - 2)
            j = np.arange(i.size)
            v = rows[j, i] + (x - i) * (rows[j, i + 1] - rows[j, i])
            user[own] = np.maximum(1, np.rint(v)).astype(np.int64)
        output = _lengths(rng, p.output_tokens, p.output_sigma, p.output_quantiles, R)
        growth = user + (output if p.append_output else 0)
        cg = np.cumsum(growth)
        before = cg - growth - (cg - growth)[s_first[:-1]][r_session]
        prompt = shared[r_session] + before + user
        prompt = np.where(first_of_session, np.minimum(prompt, s.max_context_tokens), prompt)
        keep = prompt <= s.max_context_tokens
        t_ms = np.rint(t * 1000.0).astype(np.int64)
        if horizon_ms is not None:
            keep &= t_ms < horizon_ms
        i32 = np.int32
        rows = _Rows(t_ms, uid[r_session].astype(np.int64), system[r_session].astype(i32),
                     system_len[r_session].astype(i32), shared[r_session].astype(i32), doc[r_session].astype(i32),
                     prompt.astype(i32), output.astype(i32))
        return rows.take(np.flatnonzero(keep))

    # --- keys -------------------------------------------------------------------------------------
    def _keys(self, rows: _Rows) -> tuple[np.ndarray, np.ndarray]:
        """(keys, offsets) of the requests' blocks: :func:`kvbench.stream.synth_kernel.block_keys`."""
        from kvbench.stream.synth_kernel import block_keys

        return block_keys(rows.prompt, rows.system, rows.system_len, rows.shared_len, rows.doc, rows.session,
                          int(self.model.block_tokens), np.uint64(self.salt), KEY_MASK)

    # --- the stream -------------------------------------------------------------------------------
    def batches(self, batch_requests: int = WINDOW_REQUESTS, limit: int | None = None,
                path: str = "gen:", meta: dict | None = None) -> Iterator:
        """``Trace`` batches in arrival order (at most ``batch_requests`` requests and ``BATCH_REFS`` blocks)."""
        from kvbench.stream.trace import Trace

        rng = np.random.default_rng([self.seed, 3])
        horizon_ms = int(round(self.duration_s * 1000.0))
        window_s = max(GRID_S, min(86_400.0, WINDOW_REQUESTS / self.model.arrivals.rate))
        state = self.arrival_state()
        pending = _Rows.empty()
        next_uid = 0
        emitted = 0
        first_ms = None
        t0 = 0.0
        meta = dict(meta or {})
        while t0 < self.duration_s:
            t1 = min(self.duration_s, t0 + window_s)
            starts = self._session_starts(rng, state, t1)
            uid = np.arange(next_uid, next_uid + starts.size, dtype=np.int64)
            next_uid += starts.size
            new = self._expand(rng, starts, uid, horizon_ms)
            pending = _Rows.concat([pending, new]) if len(new) else pending
            due = pending.t_ms < int(round(t1 * 1000.0)) if t1 < self.duration_s else np.ones(len(pending), bool)
            now = pending.take(np.flatnonzero(due))
            pending = pending.take(np.flatnonzero(~due))
            now = now.take(np.argsort(now.t_ms, kind="stable"))
            t0 = t1
            a = 0
            while a < len(now):
                # cut by request count and by block references
                nb = -(-now.prompt[a:a + batch_requests] // self.model.block_tokens)
                b = a + max(1, int(np.searchsorted(np.cumsum(nb), BATCH_REFS, side="right")))
                b = min(b, a + batch_requests)
                if limit is not None:
                    b = min(b, a + limit - emitted)
                part = now.take(slice(a, b))
                keys, offsets = self._keys(part)
                if first_ms is None:
                    first_ms = int(part.t_ms[0])
                # as every reader: seconds from the first request, t0 its time on the generator's clock
                yield Trace((part.t_ms - first_ms) / 1000.0, part.prompt.astype(np.int64),
                            part.output.astype(np.int64), offsets, keys,
                            self.model.block_tokens, "mooncake", path, {}, first_ms / 1000.0, meta=meta)
                emitted += b - a
                a = b
                if limit is not None and emitted >= limit:
                    return


# --- the gen: trace argument ----------------------------------------------------------------------
@dataclass(frozen=True)
class GenSource:
    """``gen:MODEL[,duration=7d][,rate=R][,seed=S][,sample=F]``: a model's stream in place of a trace file."""

    model: str
    duration_s: float | None = None    # unstated: the model's checked duration (:func:`gen_duration`)
    rate: float | None = None
    seed: int = 0
    sample: float | None = None
    text: str = ""

    OPTIONS = ("duration", "rate", "seed", "sample")


DEFAULT_GEN_DURATION_S = 86_400.0   # a model that states no checked duration generates a day


def gen_duration(stated: float | None, model: WorkloadModel) -> float:
    """The duration a model's stream is generated for: the one stated (``duration=``, ``--duration``), else the
    one its fit checked (``[calibration] gen_duration_s``: DWPD within the stated error of the trace's), else a
    day. Every command that generates from a model file (``trace gen --model-file``, a ``gen:`` trace argument)
    takes its duration from here."""
    if stated is not None:
        return float(stated)
    cal = model.calibration
    checked = cal.gen_duration_s if cal is not None else None
    return float(checked) if checked else DEFAULT_GEN_DURATION_S


def is_gen(text) -> bool:
    return isinstance(text, str) and text.startswith(GEN_PREFIX)


def gen_sample_rate(text) -> float | None:
    """The key sample rate a ``gen:...,sample=F`` trace argument carries (None: a whole stream, F >= 1 too)."""
    rate = parse_gen(text).sample if is_gen(text) else None
    return rate if rate is not None and rate < 1.0 else None


def require_whole_stream(text, command: str, why: str) -> None:
    """Refuse, in one line, a key-sampled ``gen:`` stream to a command that reads whole requests (``why``): a key
    sample keeps some of each request's blocks, so prefixes, sessions and a full-size store's writes cannot be
    read from it. Commands that honour a sample (mrc, plan, run, replay kv, trace stats) scale by its rate."""
    rate = gen_sample_rate(text)
    if rate is not None:
        raise UsageError(f"{command} needs the whole stream: {text} is a key sample at rate {rate:g} ({why})",
                         "drop sample= from the gen: argument (a shorter duration or a lower rate keeps it small)")


def parse_gen(text: str) -> GenSource:
    """Parse a ``gen:`` trace argument; a bad option is a one-line error naming it."""
    from kvbench.units import parse_duration

    body = text[len(GEN_PREFIX):]
    name, *opts = [x.strip() for x in body.split(",")]
    if not name:
        raise UsageError(f"{text!r} names no model", "write gen:MODEL.toml,duration=7d (or a preset: gen:chat)")
    src = GenSource(model=name, text=text)
    from kvbench.spec.fields import parse_fields

    fields = parse_fields(opts, option=repr(text), known=GenSource.OPTIONS, noun="option", error=UsageError,
                          fix="e.g. gen:chat,duration=7d")
    for k, v in fields.items():
        try:
            if k == "duration":
                src = replace(src, duration_s=parse_duration(v, what="gen: duration"))
            elif k == "rate":
                src = replace(src, rate=float(v))
            elif k == "seed":
                src = replace(src, seed=int(v))
            else:
                from kvbench.stream.sampling import check_rate

                src = replace(src, sample=check_rate(float(v), "gen: sample"))
        except ValueError:
            raise UsageError(f"{text!r}: {k}={v!r} is not a number", f"give e.g. {k}=1") from None
    if src.rate is not None and not src.rate > 0:
        raise UsageError(f"{text!r}: rate must be > 0 requests/s", "give e.g. rate=20")
    return src


def gen_meta(src: GenSource, model: WorkloadModel) -> dict:
    """What a generated trace says about itself (``Trace.meta``): where it came from and what it spans."""
    return {"source": "generated", "generated_from": src.model, "model": model.name, "seed": src.seed,
            "rate": model.arrivals.rate if src.rate is None else src.rate,
            "span_s": gen_duration(src.duration_s, model),
            "sample_rate": src.sample or 1.0, "spec": src.text,
            **({"fitted_span_s": model.fitted_span_s} if model.fitted_span_s else {})}


def iter_generated(text: str, batch_requests: int = WINDOW_REQUESTS, limit: int | None = None,
                   block_tokens: int | None = None) -> Iterator:
    """The ``Trace`` batches of a ``gen:`` argument (key-sampled when it says ``sample=``)."""
    from kvbench.stream.workload import load_model_file

    src = parse_gen(text)
    model = load_model_file(src.model)
    if block_tokens is not None and block_tokens != model.block_tokens:
        model = replace(model, block_tokens=int(block_tokens))
    src = replace(src, duration_s=gen_duration(src.duration_s, model))
    gen = Generator(model, duration_s=src.duration_s, rate=src.rate, seed=src.seed)
    meta = gen_meta(src, gen.model)
    for b in gen.batches(batch_requests, limit=limit, path=text, meta=meta):
        if src.sample is not None and src.sample < 1.0:
            from kvbench.stream.sampling import sample_keys

            b = sample_keys(b, src.sample)
        yield b


def write_stream(batches, path) -> dict:
    """Write ``Trace`` batches as a Mooncake trace (ms timestamps, prefix-chained ``hash_ids``), one line per
    request; returns what was written (requests, block references, span)."""
    from pathlib import Path

    from kvbench.stream.generators import open_output

    n = refs = 0
    last_ms = 0
    with open_output(path) as fh:
        for b in batches:
            ts = np.rint(b.timestamp_s * 1000.0).astype(np.int64).tolist()
            inp, out = b.input_tokens.tolist(), b.output_tokens.tolist()
            keys, off = b.keys.tolist(), b.offsets.tolist()
            fh.write("".join(
                f'{{"timestamp": {ts[i]}, "input_length": {inp[i]}, "output_length": {out[i]}, "hash_ids": ['
                + ", ".join(map(str, keys[off[i]:off[i + 1]])) + "]}\n" for i in range(len(ts))))
            n += len(ts)
            refs += len(keys)
            last_ms = ts[-1] if ts else last_ms
    return {"path": str(Path(path)), "requests": n, "block_references": refs, "span_s": last_ms / 1000.0}
