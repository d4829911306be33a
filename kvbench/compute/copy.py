"""Pinned host -> device copy (the L2 DRAM -> L1 HBM path), timed with CUDA events per block size.

``seconds(size) = latency + size / bandwidth`` is fitted over the sizes (non-negative, relative error), so the
copy tier enters ``kvbench check`` exactly like a storage tier.
"""

from __future__ import annotations

import numpy as np

from kvbench.compute.fit import fit_line
from kvbench.compute.profile import CopyProfile

DEFAULT_SIZES = tuple(4096 * 4**i for i in range(9))  # 4 KiB .. 256 MiB


def measure_h2d(torch, device: str = "cuda", sizes=DEFAULT_SIZES, *, warmup: int = 3, reps: int = 20) -> CopyProfile:
    """Median time of one pinned host-to-device copy at each size; needs CUDA."""
    dev = torch.device(device)
    biggest = int(max(sizes))
    host = torch.empty(biggest, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    dst = torch.empty(biggest, dtype=torch.uint8, device=dev)
    medians = []
    for size in sizes:
        size = int(size)
        src, out = host[:size], dst[:size]
        for _ in range(warmup):
            out.copy_(src, non_blocking=True)
        torch.cuda.synchronize(dev)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out.copy_(src, non_blocking=True)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        medians.append(float(np.median(times)))
    del host, dst
    return copy_profile_from_points(sizes, medians, device=torch.cuda.get_device_name(dev))


def copy_profile_from_points(sizes, seconds, *, device: str = "") -> CopyProfile:
    """Fit latency + size/bandwidth to measured copy times (pure; tested without a GPU)."""
    a, b = fit_line(sizes, seconds)
    return CopyProfile(tuple(int(s) for s in sizes), tuple(float(t) for t in seconds),
                       float(1.0 / b) if b > 0 else float("inf"), float(a), True, device)
