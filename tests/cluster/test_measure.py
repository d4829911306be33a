"""kvbench cluster without --dry-run: every node replays its requests' I/O on its own store, locally or on a
local two-node Ray cluster; histograms merge exactly; a lost node leaves the others' results; Ray errors are
one line before any I/O."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest


BLOCK = 262144


def _args(d: Path, *extra):
    return ["cluster", "mooncake-sample", "--model", "tiny-gqa", "--nodes", "2", "--router", "session",
            "--l2", str(40 * BLOCK), "--l3", str(d / "l3.store"), "--l3-capacity", str(200 * BLOCK),
            "--max-requests", "60", "--closed-loop", "--chunk", "256KiB", "--results", str(d / "res"), *extra]


def _check_merged(s):
    run = Path(s["run_dir"])
    merged = json.loads((run / "histograms.json").read_text())
    nodes = [json.loads((run / f"node-{i}" / "histograms.json").read_text()) for i in (0, 1)]
    assert merged and set(merged) == set(nodes[0]) | set(nodes[1])
    for name, h in merged.items():
        assert h["count"] == sum(n[name]["count"] for n in nodes if name in n), name
        total = {}
        for n in nodes:
            if name in n:
                for b, c in zip(n[name]["buckets"], n[name]["counts"]):
                    total[b] = total.get(b, 0) + c
        assert dict(zip(h["buckets"], h["counts"])) == total, name
        assert h["sum_ns"] == sum(n[name]["sum_ns"] for n in nodes if name in n)


def test_local_nodes_measure_their_own_stores(cli, store_dir):  # noqa: F811
    r = cli(*_args(store_dir), "--json")
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    assert s["status"] == "complete" and s["measured"]["where"] == "local processes"
    assert (store_dir / "l3.store.node0").is_file() and (store_dir / "l3.store.node1").is_file()
    for n in s["measured"]["nodes"]:
        assert n["status"] == "complete" and n["hit_ratio"] == n["simulated_hit_ratio"]
        assert Path(n["run_dir"], "requests.csv").is_file()
    assert sum(n["requests"] for n in s["measured"]["nodes"]) == 60
    assert set(s["parts"]) == {"node-0", "node-1"}
    _check_merged(s)
    # measured TTFT: each node's single lane replayed with its measured load times and the simulated prefill
    import numpy as np
    import pandas as pd
    sim = pd.read_csv(Path(s["run_dir"]) / "requests-session.csv")
    every = []
    for i in (0, 1):
        mine = sim[sim["node"] == i].reset_index(drop=True)
        meas = pd.read_csv(Path(s["run_dir"]) / f"node-{i}" / "requests.csv")
        free = 0.0
        for j, row in meas.iterrows():
            arr, pre = mine.loc[j, "arrival_s"], mine.loc[j, "prefill_ms"] / 1e3
            load = 0.0 if np.isnan(row["load_ms"]) else row["load_ms"] / 1e3
            free = max(arr, free) + load + pre
            every.append((free - arr) * 1e3)
    assert s["measured"]["ttft_ms"]["requests"] == len(every) == 60
    assert s["measured"]["ttft_ms"]["p50"] == pytest.approx(float(np.percentile(every, 50, method="inverted_cdf")))
    assert s["measured"]["ttft_ms"]["p99"] == pytest.approx(float(np.percentile(every, 99, method="inverted_cdf")))


def test_ray_two_nodes_merge_histograms(cli, store_dir, ray_cluster):  # noqa: F811
    r = cli(*_args(store_dir, "--ray-address", ray_cluster, "--placement", "strict-spread", "--json"))
    assert r.exit_code == 0, r.output
    s = json.loads(r.output[r.output.index("{"):])
    assert s["measured"]["where"].startswith("ray ")
    for n in s["measured"]["nodes"]:
        assert n["status"] == "complete" and n["host"] and n["hit_ratio"] == n["simulated_hit_ratio"]
    _check_merged(s)


@pytest.mark.parametrize("where, lose", [("local", 1), ("ray", 0)])
def test_lost_node_keeps_the_others(cli, store_dir, request, where, lose):  # noqa: F811
    extra = ("--ray-address", request.getfixturevalue("ray_cluster")) if where == "ray" else ()
    r = cli(*_args(store_dir, *extra), "--inject-node-loss", str(lose))
    assert r.exit_code == 1
    assert f"node {lose} lost: " + ("Ray actor died" if where == "ray" else "worker process exited") in r.output
    run = Path(r.output.split("results are in ")[1].split(" (fix")[0])
    s = json.loads((run / "summary.json").read_text())
    assert s["status"] == "partial"
    nodes = {n["node"]: n for n in s["measured"]["nodes"]}
    kept = 1 - lose
    assert nodes[lose]["status"] == "lost" and nodes[kept]["status"] == "complete"
    assert (run / f"node-{kept}" / "histograms.json").is_file() and not (run / f"node-{lose}").exists()
    assert json.loads((run / "histograms.json").read_text())        # the kept node's histograms, merged


def test_unreachable_ray_address_one_line_before_io(cli, store_dir):  # noqa: F811
    r = cli(*_args(store_dir, "--ray-address", "127.0.0.1:1"))
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot reach the Ray cluster at 127.0.0.1:1" in lines[0]
    assert not list(store_dir.glob("l3.store*")) and not (store_dir / "res").exists()


def test_without_ray_the_error_names_the_extra(cli, store_dir, monkeypatch):  # noqa: F811
    monkeypatch.setitem(sys.modules, "ray", None)             # import ray -> ImportError
    r = cli(*_args(store_dir, "--ray-address", "10.0.0.1:6379"))
    assert r.exit_code == 1
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "kvbench[cluster]" in lines[0]
    assert not list(store_dir.glob("l3.store*"))
