"""Seeded synthetic serving traces, written in Mooncake format so every later stage has one path.

Kinds (a registry of parameter sets): multi-turn ``chat``, coding ``agent`` (long sessions over a large shared
tool prompt and repository context: very high reuse), long-document ``docqa`` (Zipf-popular documents shared
across users) and single-turn ``qa`` (short shared system prompts, unique questions: low reuse).

Sessions start by an arrival process (``poisson``, or ``bursty``: gamma inter-arrivals with a coefficient of
variation > 1) at ``rate / mean turns`` per second, so requests arrive at about ``rate`` per second; turns
follow after exponential think times. Each request's prompt is the session context so far (system prompt,
earlier messages and answers) plus a new message. Block ids are content-addressed and prefix-chained like
Mooncake's: block i's id is interned from (id of block i-1, the content pieces of block i), so equal prefixes
share ids and a block that was partial in one turn and full in the next gets a new id.
"""

from __future__ import annotations

import gzip
import heapq
import json
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from kvbench.errors import UsageError


@dataclass(frozen=True)
class KindParams:
    """Token and session distributions of one workload kind (means; lognormal sizes with ``sigma``)."""

    system_prompts: int            # distinct shared system prompts
    system_tokens: int             # tokens per system prompt
    turns_mean: float              # mean turns per session (geometric, >= 1; 1 = single turn)
    first_user_tokens: int         # first message (pasted context, repository files, question)
    user_tokens: int               # later messages (follow-ups, tool outputs)
    output_tokens: int             # answers
    think_s: float                 # mean time between a turn's arrival and the session's next turn
    sigma: float = 0.8             # lognormal shape of token counts
    documents: int = 0             # docqa: shared documents
    document_tokens: int = 0
    document_zipf: float = 1.0     # popularity exponent of documents
    max_context: int = 131072      # a session ends when its context would exceed this


KINDS: dict[str, KindParams] = {
    "chat": KindParams(system_prompts=3, system_tokens=800, turns_mean=5, first_user_tokens=400,
                       user_tokens=150, output_tokens=250, think_s=30.0),
    "agent": KindParams(system_prompts=2, system_tokens=6000, turns_mean=25, first_user_tokens=12000,
                        user_tokens=1500, output_tokens=300, think_s=4.0),
    "docqa": KindParams(system_prompts=1, system_tokens=300, turns_mean=1.5, first_user_tokens=60,
                        user_tokens=60, output_tokens=200, think_s=20.0, documents=200, document_tokens=15000,
                        sigma=0.6),
    "qa": KindParams(system_prompts=4, system_tokens=600, turns_mean=1, first_user_tokens=800, user_tokens=0,
                     output_tokens=150, think_s=0.0),
}
ARRIVALS = ("poisson", "bursty")


@dataclass(frozen=True)
class GenSpec:
    """What to generate: kind, size, arrival process, seed, block size (and optional parameter overrides)."""

    kind: str
    requests: int = 1000
    rate: float = 1.0              # requests per second (long-run mean)
    arrival: str = "poisson"
    burstiness: float = 4.0        # bursty: coefficient of variation of session inter-arrival times
    seed: int = 0
    block_tokens: int = 512
    params: KindParams | None = None

    def validate(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"unknown trace kind {self.kind!r}", f"use one of {', '.join(KINDS)}")
        if self.requests < 1:
            raise UsageError(f"requests must be >= 1, got {self.requests}", "give --requests N")
        if not self.rate > 0:
            raise UsageError(f"rate must be > 0 requests/s, got {self.rate}", "give --rate 2")
        if self.arrival not in ARRIVALS:
            raise UsageError(f"unknown arrival process {self.arrival!r}", f"use one of {', '.join(ARRIVALS)}")
        if self.arrival == "bursty" and not self.burstiness > 1:
            raise UsageError(f"burstiness (CV) must be > 1 for bursty arrivals, got {self.burstiness}",
                             "give e.g. --burstiness 4")
        if self.block_tokens < 1:
            raise UsageError(f"block_tokens must be >= 1, got {self.block_tokens}", "give e.g. 512")

    @property
    def kind_params(self) -> KindParams:
        return self.params or KINDS[self.kind]


def override_params(kind: str, **kw) -> KindParams:
    """The kind's parameters with some replaced (unknown names are a one-line error)."""
    if kind not in KINDS:
        raise UsageError(f"unknown trace kind {kind!r}", f"use one of {', '.join(KINDS)}")
    names = {f.name for f in fields(KindParams)}
    bad = set(kw) - names
    if bad:
        raise UsageError(f"unknown generator parameter(s) {', '.join(sorted(bad))}",
                         f"valid: {', '.join(sorted(names))}")
    return replace(KINDS[kind], **kw)


class _Interner:
    """Prefix-chained, content-addressed block ids: (parent id, content pieces) -> sequential id."""

    def __init__(self):
        self.ids: dict = {}

    def block_ids(self, parent: int, segments: list, start_block: int, n_tokens: int, bt: int) -> list[int]:
        """Ids of blocks ``start_block..ceil(n_tokens/bt)-1`` of a context made of ``segments``."""
        out = []
        # locate the segment holding token start_block * bt
        pos = start_block * bt
        si, seg_start = 0, 0
        while si < len(segments) and seg_start + segments[si][1] <= pos:
            seg_start += segments[si][1]
            si += 1
        ids = self.ids
        for blk in range(start_block, -(-n_tokens // bt)):
            lo, hi = blk * bt, min((blk + 1) * bt, n_tokens)
            pieces = []
            j, js = si, seg_start
            while lo < hi:
                sid, length = segments[j]
                take = min(hi, js + length) - lo
                pieces.append((sid, lo - js, take))
                lo += take
                if lo >= js + length:
                    js += length
                    j += 1
            if (blk + 1) * bt <= n_tokens:          # the next block starts where this one ended
                si, seg_start = j, js
            key = (parent, tuple(pieces))
            parent = ids.get(key)
            if parent is None:
                parent = ids[key] = len(ids)
            out.append(parent)
        return out


def _lognormal(rng, mean: float, sigma: float) -> int:
    if mean <= 0:
        return 0
    return max(1, int(round(rng.lognormal(math.log(mean) - sigma * sigma / 2, sigma))))


def generate(spec: GenSpec) -> list[dict]:
    """Requests (Mooncake fields, ``timestamp`` in ms), sorted by arrival; deterministic for a seed."""
    spec.validate()
    p = spec.kind_params
    rng = np.random.default_rng(spec.seed)
    bt = spec.block_tokens
    interner = _Interner()
    seg_counter = [0]

    def new_segment(length: int) -> tuple[int, int]:
        seg_counter[0] += 1
        return (seg_counter[0], length)

    system = [new_segment(p.system_tokens) for _ in range(max(1, p.system_prompts))]
    docs = [new_segment(_lognormal(rng, p.document_tokens, p.sigma)) for _ in range(p.documents)]
    if docs:
        w = 1.0 / np.arange(1, len(docs) + 1) ** p.document_zipf
        doc_cdf = np.cumsum(w / w.sum())
    session_rate = spec.rate / max(1.0, p.turns_mean)
    shape = 1.0 / spec.burstiness ** 2 if spec.arrival == "bursty" else 1.0

    def gap() -> float:
        return float(rng.gamma(shape, 1.0 / (session_rate * shape)))

    # events: (time, seq, session state); a session is [segments, full_ids, tokens, turns_left, turn]
    events: list = []
    seq = 0
    t_next_session = gap()
    out: list[dict] = []
    while len(out) < spec.requests:
        if not events or t_next_session <= events[0][0]:
            t = t_next_session
            t_next_session += gap()
            segs = [system[int(rng.integers(len(system)))]]
            if docs:
                segs.append(docs[int(np.searchsorted(doc_cdf, rng.random()))])
            turns = 1 if p.turns_mean <= 1 else int(rng.geometric(1.0 / p.turns_mean))
            state = [segs, [], sum(s[1] for s in segs), turns, 0]
        else:
            t, _, state = heapq.heappop(events)
        segs, full_ids, tokens, turns_left, turn = state
        msg = _lognormal(rng, p.first_user_tokens if turn == 0 else p.user_tokens, p.sigma)
        segs = segs + [new_segment(msg)]
        prompt = tokens + msg
        if prompt > p.max_context and turn > 0:
            continue                                  # the session ran out of context: it ends
        start = len(full_ids)
        parent = full_ids[-1] if full_ids else -1
        new_ids = interner.block_ids(parent, segs, start, prompt, bt)
        hash_ids = full_ids + new_ids
        output = _lognormal(rng, p.output_tokens, p.sigma)
        out.append({"timestamp": int(round(t * 1000)), "input_length": prompt, "output_length": output,
                    "hash_ids": hash_ids})
        turns_left -= 1
        if turns_left > 0:
            segs = segs + [new_segment(output)]
            n_full = prompt // bt
            state = [segs, hash_ids[:n_full], prompt + output, turns_left, turn + 1]
            seq += 1
            heapq.heappush(events, (t + float(rng.exponential(p.think_s)) if p.think_s > 0 else t, seq, state))
    out.sort(key=lambda r: r["timestamp"])
    return out


def write_trace(records: list[dict], path: str | Path) -> Path:
    """Write Mooncake-format JSONL (gzip when the name ends in .gz)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise UsageError(f"output folder does not exist: {path.parent}", "create it or choose another path")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(", ", ": ")) + "\n")
    from kvbench.engine.safety import mark_output
    mark_output(path)
    return path


def spec_dict(spec: GenSpec) -> dict:
    d = asdict(spec)
    d["params"] = asdict(spec.kind_params)
    return d
