"""Helpers for report, run and qualify tests: run folders that follow the team's run-folder contract
(run.json, summary.json with kind/status/run_dir, timeseries.csv, histograms.json, requests.csv, attached
analyses), and a headless-Chromium check of a written report. No tests live here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium is not installed (bash .ci/install installs Debian's chromium)")
    return exe


def open_in_chromium(html_path: Path, tmp: Path, *, screenshot: bool = True, size=(1280, 2400)):
    """Load the report in headless Chromium: returns (dumped DOM after scripts ran, screenshot pixels or None).

    JavaScript errors reach the DOM through the report's own error hook (``#kvbench-js-errors``); Chromium's
    console errors are captured from stderr as well and returned in the DOM check's caller.
    """
    exe = chromium()
    url = html_path.resolve().as_uri()
    base = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", "--virtual-time-budget=20000",
            "--enable-logging=stderr", "--v=0"]
    env = {**os.environ, "HOME": str(tmp)}
    png = tmp / "shot.png"
    extra = [f"--screenshot={png}", f"--window-size={size[0]},{size[1]}"] if screenshot else []
    # one launch does both: the DOM after the scripts ran on stdout, the screenshot to a file
    dom = subprocess.run([*base, *extra, "--dump-dom", url], capture_output=True, text=True, timeout=120, env=env)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console_errors = [ln for ln in dom.stderr.splitlines()
                      if "CONSOLE" in ln and ("Uncaught" in ln or "ERROR:CONSOLE" in ln)]
    pixels = None
    if screenshot:
        assert png.is_file(), dom.stderr[-2000:]
        from PIL import Image

        pixels = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    return dom.stdout, console_errors, pixels


def assert_report_renders(html_path: Path, tmp: Path, *, min_plots: int, screenshot: bool = True) -> str:
    """No JavaScript errors, at least ``min_plots`` plotly figures rendered, a screenshot that is not blank."""
    dom, console_errors, pixels = open_in_chromium(html_path, tmp, screenshot=screenshot)
    m = re.search(r'<pre id="kvbench-js-errors">(.*?)</pre>', dom, re.S)
    assert m is not None, "error hook element missing from the DOM"
    assert m.group(1).strip() == "", f"JavaScript errors: {m.group(1)[:2000]}"
    assert not console_errors, console_errors[:5]
    assert 'data-kvbench-ready="1"' in dom, "report scripts did not finish"
    plots = int(re.search(r'data-kvbench-plots="(\d+)"', dom).group(1))
    assert plots >= min_plots, f"only {plots} plots rendered, expected >= {min_plots}"
    if pixels is not None:
        # a blank page is one colour: demand real variation and a fair share of non-white pixels
        assert pixels.std() > 10.0, f"screenshot looks blank (pixel std {pixels.std():.2f})"
        non_white = float(np.mean(pixels.min(axis=2) < 235))
        assert non_white > 0.02, f"screenshot is {100 * (1 - non_white):.1f}% white"
    return dom


# --- run folders following the contract ------------------------------------------------------------------

ENV = {"kernel": "6.1.0-27-amd64", "cpu": "Intel Xeon (2 cores)", "memory_bytes": 8 * 2**30, "hostname": "testbox",
       "targets": [{"path": "/dev/loop7", "filesystem": None, "device_model": "loop (throttled 500 MB/s)",
                    "size_bytes": 2 * 2**30, "logical_block_size": 512}]}


def _write(d: Path, name: str, obj) -> None:
    (d / name).write_text(json.dumps(obj, indent=2))


def _pcts(p50_us: float, spread: float = 1.0) -> dict:
    return {"p50": p50_us, "p90": p50_us * (1 + 0.6 * spread), "p99": p50_us * (1 + 2.5 * spread),
            "p99.9": p50_us * (1 + 6 * spread), "p99.99": p50_us * (1 + 12 * spread),
            "max": p50_us * (1 + 30 * spread), "mean": p50_us * 1.2}


def make_io_run(root: Path, name: str, *, iops: float = 50_000, p50_us: float = 600.0, status="complete",
                seconds: int = 10, seed: int = 0) -> Path:
    """A ``kvbench io`` run: 4 KiB randread, per-second series, one histogram per target/op."""
    d = root / name
    d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    _write(d, "run.json", {"kind": "io", "command": ["kvbench", "io", "--target", "/dev/loop7", "--rw", "randread",
                                                     "--bs", "4k", "--qd", "32"],
                           "kvbench_version": "0.1.0", "environment": ENV,
                           "config": {"rw": "randread", "bs": 4096, "qd": 32, "workers": 1, "engine": "libaio"}})
    n = seconds if status == "complete" else seconds // 2
    s = iops * (1 + rng.normal(0, 0.03, n))
    pd.DataFrame({"t_s": np.arange(1, n + 1, dtype=float), "iops": s, "read_bytes_per_s": s * 4096,
                  "p99_us": p50_us * 3.5 * (1 + rng.normal(0, 0.05, n)), "cpu_percent": 60 + rng.normal(0, 3, n)}
                 ).to_csv(d / "timeseries.csv", index=False)
    # a real engine histogram of lognormal latencies around p50_us (the engine's own histograms.json format)
    from kvbench.metrics.histogram import LatencyHistogram

    h = LatencyHistogram()
    h.record((rng.lognormal(np.log(p50_us * 1e3), 0.6, 200_000)).astype(np.int64))
    _write(d, "histograms.json", {"target0.read": h.to_dict()})
    _write(d, "summary.json", {"kind": "io", "status": status, "run_dir": str(d), "iops": float(s.mean()),
                               "bw_bytes_per_s": float(s.mean() * 4096), "ios": int(s.sum()), "runtime_s": float(n),
                               "lat_us": _pcts(p50_us)})
    return d


def make_replay_run(root: Path, name: str, *, l3_bw: float = 2e9, status="complete", seed: int = 1,
                    n_requests: int = 400, analyses: bool = True) -> Path:
    """A ``kvbench replay kv`` run with tiers l2/l3, requests.csv and the analyses ``kvbench run`` attaches."""
    d = root / name
    d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    bpt = 131_072
    block = 512 * bpt
    _write(d, "run.json", {"kind": "replay-kv", "command": ["kvbench", "replay", "kv", "trace.jsonl", "--model", "llama-3.1-8b"],
                           "kvbench_version": "0.1.0", "environment": ENV,
                           "config": {"model": "llama-3.1-8b", "l2": 2 * 2**30, "l3": 16 * 2**30, "policy": "lru",
                                      "block_tokens": 512, "write_policy": "through"}})
    hit2 = rng.integers(0, 4, n_requests)
    hit3 = rng.integers(0, 8, n_requests) * (rng.random(n_requests) < 0.6)
    load_ms = (hit2 * block / 20e9 + hit3 * block / l3_bw) * 1e3 + 0.05 + rng.exponential(0.2, n_requests)
    load_ms[(hit2 + hit3) == 0] = 0.0
    pd.DataFrame({"arrival_s": np.sort(rng.uniform(0, 60, n_requests)), "input_tokens": rng.integers(600, 9000, n_requests),
                  "hit_blocks_l2": hit2, "hit_blocks_l3": hit3, "miss_blocks": rng.integers(0, 6, n_requests),
                  "load_time_ms": load_ms}).to_csv(d / "requests.csv", index=False)
    t = np.arange(1, 61, dtype=float)
    pd.DataFrame({"t_s": t, "l2_read_bytes_per_s": 4e9 + rng.normal(0, 2e8, 60), "l3_read_bytes_per_s": l3_bw * 0.4 + rng.normal(0, 5e7, 60),
                  "l3_write_bytes_per_s": 3e8 + rng.normal(0, 2e7, 60), "l3_read_iops": l3_bw * 0.4 / block * 64 + rng.normal(0, 10, 60)}
                 ).to_csv(d / "timeseries.csv", index=False)
    _write(d, "histograms.json", {"l2.read": {"percentiles": _pcts(40.0, 0.5)}, "l3.read": {"percentiles": _pcts(block / l3_bw * 1e6 / 16, 1.5)},
                                  "l3.write": {"percentiles": _pcts(900.0, 2.0)}})
    tiers = {"l2": {"hit_ratio": 0.31, "capacity_bytes": 2 * 2**30, "read_bytes": int(hit2.sum() * block), "write_bytes": 0,
                    "read_bw_bytes_per_s": 4e9, "write_bw_bytes_per_s": 0.0, "read_lat_us": {"p50": 40.0, "p99": 90.0, "p99.9": 160.0}},
             "l3": {"hit_ratio": 0.22, "capacity_bytes": 16 * 2**30, "read_bytes": int(hit3.sum() * block), "write_bytes": int(2e9),
                    "read_bw_bytes_per_s": l3_bw * 0.4, "write_bw_bytes_per_s": 3e8,
                    "read_lat_us": {"p50": 2000.0, "p99": 6000.0, "p99.9": 9000.0}}}
    _write(d, "summary.json", {"kind": "replay-kv", "status": status, "run_dir": str(d), "requests": n_requests,
                               "block_tokens": 512, "bytes_per_token": bpt,
                               "load_time_ms": {"p50": float(np.median(load_ms)), "p99": float(np.quantile(load_ms, 0.99))},
                               "app_write_amplification": 1.04, "verify_errors": 0, "tiers": tiers})
    if analyses:
        cap = np.unique(np.geomspace(block, 64 * 2**30, 60).astype(np.int64))
        hr = 0.62 * (1 - np.exp(-cap / (3 * 2**30)))
        _write(d, "mrc.json", {"capacities": cap.tolist(), "hit_ratio": hr.tolist(), "infinite_hit_ratio": 0.62,
                               "references": 90000, "unit": "bytes"})
        _write(d, "plan.json", {"capacity_bytes": {"l3": {"0.9": 7.4e9, "0.95": 9.6e9, "0.99": 14.8e9}}, "dwpd": 3.2,
                                "waf": 1.3, "lifetime_years": 4.6})
        _write(d, "check.json", {"profile": "h200-trtllm-llama-3.1-8b-fp8", "recompute_tokens_per_s": 39000.0,
                                 "bytes_per_token": bpt,
                                 "tiers": {"l2": {"break_even_tokens": 3.0, "verdict": "load wins above 3 tokens",
                                                  "bw_bytes_per_s": 20e9, "latency_us": 40.0},
                                           "l3": {"break_even_tokens": 196.0, "verdict": "load wins above 196 tokens",
                                                  "bw_bytes_per_s": l3_bw, "latency_us": 2000.0}}})
        _write(d, "retention.json", [{"retention_s": r, "dwpd": 0.5 + 1.1 * np.log10(r / 60 + 1), "capacity_bytes": 2e9 * np.log10(r / 30 + 1)}
                                     for r in (60.0, 600.0, 3600.0, 6 * 3600.0, 86400.0)])
    return d
