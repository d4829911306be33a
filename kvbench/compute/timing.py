"""Time a prefill forward pass stage by stage: CUDA events on a GPU, ``perf_counter`` on the CPU.

Stages are the embedding, each built layer and the head; per-stage times let a partial stack be scaled to the
full model by layer kind. Warm-up passes (kernel selection, allocator growth, caches) are run and discarded.
"""

from __future__ import annotations

import time

import numpy as np


def time_stages(stack, n_tokens: int, *, warmup: int, reps: int) -> np.ndarray:
    """Seconds per stage for each repetition: array ``(reps, layers + 2)`` (embedding, layers..., head)."""
    torch = stack.torch
    ids, rope = stack.prepare(n_tokens)
    cuda = stack.device.type == "cuda"
    n_marks = len(stack.layers) + 3
    out = np.empty((reps, n_marks - 1))
    with torch.inference_mode():
        for _ in range(warmup):
            stack.forward(ids, rope)
        if cuda:
            torch.cuda.synchronize(stack.device)
        for r in range(reps):
            if cuda:
                events = [torch.cuda.Event(enable_timing=True) for _ in range(n_marks)]
                stack.forward(ids, rope, mark=lambda i: events[i].record())
                torch.cuda.synchronize(stack.device)
                out[r] = [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n_marks - 1)]
            else:
                stamps = np.empty(n_marks)

                def mark(i):
                    stamps[i] = time.perf_counter()

                stack.forward(ids, rope, mark=mark)
                out[r] = np.diff(stamps)
    return out


def scaled_totals(stage_seconds: np.ndarray, kinds: list[str], totals: dict[str, int]) -> np.ndarray:
    """Full-model prefill time per repetition: embedding + head + mean layer time x layer count, by kind."""
    embed, head = stage_seconds[:, 0], stage_seconds[:, -1]
    layers = stage_seconds[:, 1:-1]
    total = embed + head
    kinds_arr = np.asarray(kinds)
    for kind, count in totals.items():
        if count:
            total = total + layers[:, kinds_arr == kind].mean(axis=1) * count
    return total
