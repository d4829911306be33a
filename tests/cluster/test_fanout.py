"""kvbench io / qualify --ray-address: the job on every host for every drive, side by side with the spread."""

from __future__ import annotations

import json
from pathlib import Path

from tests.qualify.test_qualify import TINY


def _json(r):
    assert r.exit_code == 0, r.output
    return json.loads(r.output[r.output.index("{"):])


def test_io_on_every_host_and_drive_side_by_side(cli, tmp_path, ray_cluster):
    s = _json(cli("io", "--ray-address", ray_cluster, "--target", "dram:8MiB,dram:16MiB", "--engine", "dram",
                  "--prefill", "--qd", "1", "--runtime", "0.3", "--results", tmp_path / "res", "--json"))
    # the local test cluster is two Ray nodes on one machine: one host
    assert s["hosts"] == 1 and s["status"] == "complete" and [d["target"] for d in s["drives"]] == \
        ["dram:8MiB", "dram:16MiB"]
    iops = [d["iops"] for d in s["drives"]]
    assert all(v > 0 for v in iops)
    sp = s["spread"]["iops"]
    assert sp["n"] == 2 and sp["min"] == min(iops) and sp["max"] == max(iops)
    assert abs(sp["max_over_min"] - max(iops) / min(iops)) < 1e-12
    for d in s["drives"]:
        run = json.loads((Path(d["run_dir"]) / "summary.json").read_text())
        assert run["kind"] == "io" and run["iops"] == d["iops"]
    assert Path(s["report"]).is_file() and set(s["parts"]) == {Path(d["run_dir"]).parent.name for d in s["drives"]}


def test_io_lost_host_is_reported(cli, tmp_path, ray_cluster):
    r = cli("io", "--ray-address", ray_cluster, "--target", "dram:8MiB", "--engine", "dram", "--runtime", "0.2",
            "--results", tmp_path / "res", "--inject-host-loss", "0")
    assert r.exit_code == 1 and "1 of 1 hosts did not finish" in r.output and "Ray actor died" in r.output
    run = next((tmp_path / "res").iterdir())
    assert json.loads((run / "summary.json").read_text())["status"] == "partial"


def test_io_fan_out_needs_a_target(cli, tmp_path, ray_cluster):
    r = cli("io", "--ray-address", ray_cluster, "--results", tmp_path / "res")
    assert r.exit_code == 2 and "--ray-address needs --target" in r.output


def test_qualify_on_every_drive_side_by_side(cli, tmp_path, ray_cluster, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prof = tmp_path / "tiny.toml"
    prof.write_text(TINY.format(max_rounds=5, fill_min="1MB/s", iops_min=10))
    drives = f"{tmp_path / 'a.img'},{tmp_path / 'b.img'}"
    s = _json(cli("qualify", prof, "--target", drives, "--size", "16MiB", "--ray-address", ray_cluster,
                  "--results", tmp_path / "res", "-o", tmp_path / "q.html", "--json"))
    assert len(s["drives"]) == 2 and all(d["passed"] for d in s["drives"])
    assert s["spread"]["criterion.4 KiB read IOPS"]["n"] == 2
    assert (tmp_path / "q.html").is_file()
    for d in s["drives"]:
        q = json.loads((Path(d["run_dir"]) / "qualify.json").read_text())
        assert q["passed"] and len(q["criteria"]) == 4
