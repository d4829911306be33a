"""Guarded inputs (issue 29, part 4): tier probes checked against the replay (a real injected stall), the L2 -> GPU
load path (a measured pinned copy or a stated PCIe link model, never host memcpy), and a fitted first byte of 0
said as "not resolved by the fit"."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from kvbench.analysis.loadpath import (DEFAULT_LINK, choose_load_paths, guard_probes, l2_load_tier, link_names,
                                       load_link, probe_suspicions)
from kvbench.analysis.recompute import NOT_RESOLVED, Tier, analyse_tiers, first_byte_text
from kvbench.compute.profile import load_profile
from kvbench.errors import SpecError
from kvbench.qualify.probe import TierProbe, probe_tier

MiB = 1 << 20


@pytest.fixture
def store(tmp_path):
    """A 32 MiB file of written data on a device-backed filesystem (what the replay leaves behind)."""
    path = tmp_path / "store.bin"
    with open(path, "wb") as f:
        f.write(os.urandom(32 * MiB))
    return str(path)


def _probe(name="l3", bw=2e9, first=80e-6, p50_us=500.0):
    return TierProbe(name, "x", first, bw, MiB, 32, {"p50": first * 1e6}, {"p50": p50_us})


def test_a_stalled_probe_is_suspect_rerun_once_and_excluded(store):
    # a real stall in the engine: after each submission the driver stops 1.2 s with its reads in flight
    stalled = probe_tier("l3", store, io_size=MiB, seconds=0.5, faults="stall-every=1:1.2s")
    assert stalled.bandwidth_lat_us["p50"] > 1e6 and stalled.first_byte_s > 1.0
    replay = {"l3": {"read_bw_bytes_per_s": 270e6, "read_bytes": 10 * MiB}}
    why = probe_suspicions(stalled, replay["l3"])
    assert len(why) == 2 and "below 1/5 of the 270 MB/s" in why[0] and "a stall" in why[1]
    reruns = []

    def rerun(p):              # the same stall again: the probe stays suspect
        reruns.append(p.name)
        return probe_tier("l3", store, io_size=MiB, seconds=0.5, faults="stall-every=1:1.2s")

    kept, notes, excluded = guard_probes([stalled], replay, rerun)
    assert reruns == ["l3"] and kept == [] and len(excluded) == 1 and excluded[0]["suspect"] == why
    assert notes[0].startswith("l3 probe suspect, excluded:") and "no load path uses it" in notes[0]
    # excluded, it is no load path: with nothing else measured, the run has no L3 path (never the stalled one)
    paths = choose_load_paths([], kept, has_l2=False, profile=load_profile("llama-3.1-8b-h200-trtllm-fp8"),
                              link=None, notes=notes, excluded=excluded)
    assert "l3" not in paths.tiers and paths.to_json()["excluded_probes"][0]["suspect"] == why


def test_a_suspect_probe_that_agrees_on_its_rerun_is_used(store):
    stalled = probe_tier("l3", store, io_size=MiB, seconds=0.5, faults="stall-every=1:1.2s")
    replay = {"l3": {"read_bw_bytes_per_s": 1e6}}          # the replay's own (slow) tier: a healthy probe beats it
    kept, notes, excluded = guard_probes([stalled], replay,
                                         lambda p: probe_tier("l3", store, io_size=MiB, seconds=0.5))
    assert len(kept) == 1 and kept[0] is not stalled and not excluded
    assert kept[0].bandwidth_lat_us["p50"] < 1e6 and "rerun once, it agreed with the replay" in notes[0]
    paths = choose_load_paths([], kept, has_l2=False, profile=load_profile("llama-3.1-8b-h200-trtllm-fp8"), link=None)
    assert paths.tiers["l3"].bandwidth_bytes_per_s == kept[0].bandwidth_bytes_per_s
    assert paths.tiers["l3"].source.startswith("tier probe")


def test_probe_rules_by_hand():
    ok = _probe(bw=2e9)
    assert probe_suspicions(ok, {"read_bw_bytes_per_s": 10e9}) == []          # exactly 1/5: not below it
    assert probe_suspicions(ok, {"read_bw_bytes_per_s": 10.1e9})[0].startswith("bandwidth 2 GB/s is below 1/5")
    assert probe_suspicions(ok, None) == [] and probe_suspicions(ok, {"read_bw_bytes_per_s": None}) == []
    assert probe_suspicions(_probe(p50_us=1.0e6), None) == []                  # 1 s exactly: not above
    assert "a median I/O took 1.1 s" in probe_suspicions(_probe(p50_us=1.1e6), None)[0]
    timed_out = replace(_probe(), timed_out=True)                             # no read completed in its time
    assert probe_suspicions(timed_out, None) == ["a phase of the probe completed no read in its time (a stall, "
                                                 "not a device)"]
    dram = _probe("l2", bw=8e9, first=64e-6)
    assert "below DRAM's (64 us)" in probe_suspicions(_probe(first=38e-6), None, dram)[0]
    assert probe_suspicions(_probe(first=64e-6), None, dram) == []
    # the rule compares NVMe to DRAM, not DRAM to itself; a healthy probe is never rerun
    kept, notes, excluded = guard_probes([dram, _probe(first=90e-6)], {}, lambda p: pytest.fail("rerun"))
    assert [p.name for p in kept] == ["l2", "l3"] and notes == [] and excluded == []


def test_l2_to_gpu_is_the_measured_copy_or_a_stated_link_never_memcpy():
    measured = load_profile("llama-3.1-8b-nvidia-h200")         # an H200 profile with its pinned H2D copy
    t = l2_load_tier(measured)
    assert (t.bandwidth_bytes_per_s, t.latency_s) == (measured.copy.bandwidth_bytes_per_s, measured.copy.latency_s)
    assert t.source.startswith("measured pinned host->device copy on NVIDIA H200") and t.fitted
    published = load_profile("llama-3.1-8b-h200-trtllm-fp8")    # no GPU measured: the default link, stated
    d = l2_load_tier(published)
    gen5 = load_link(DEFAULT_LINK)
    assert (d.bandwidth_bytes_per_s, d.latency_s) == (50e9, 17e-6) == (gen5.practical_bytes_per_s, gen5.latency_s)
    assert "PCIe Gen5 x16 link model" in d.source and "stated, not measured" in d.source and "default" in d.source
    g4 = l2_load_tier(measured, "pcie-gen4-x16")               # an explicit link wins over the copy
    assert g4.bandwidth_bytes_per_s == 25e9 and "Gen4 x16" in g4.source
    # theoretical rates are the signalling rates: 32 / 16 GT/s x 128/130 / 8 x 16 lanes
    assert gen5.theoretical_bytes_per_s == pytest.approx(32 * 128 / 130 / 8 * 16 * 1e9, rel=1e-3)
    assert load_link("pcie-gen4-x16").theoretical_bytes_per_s == pytest.approx(16 * 128 / 130 / 8 * 16 * 1e9, rel=1e-3)
    assert {"pcie-gen5-x16", "pcie-gen4-x16"} <= set(link_names())
    # a replay's L2 (a memcpy into its DRAM arena) is replaced by the path wherever a run's tiers are used
    from kvbench.analysis.loadpath import load_path_tiers
    out, notes = load_path_tiers([Tier("l2", 8e9, 1e-6), Tier("l3", 2e9, 1e-4)], published, None)
    assert [t.bandwidth_bytes_per_s for t in out] == [50e9, 2e9] and "host memcpy" in notes[0]


@pytest.mark.parametrize("body, match", [
    ('generation = 5\nlanes = 16\ntheoretical_bytes_per_s = 1e9\npractical_bytes_per_s = 2e9\nlatency_s = 0\n'
     'sources = ["s"]\n', "practical_bytes_per_s exceeds"),
    ('generation = 5\nlanes = 16\ntheoretical_bytes_per_s = 1e9\npractical_bytes_per_s = 1e9\nlatency_s = 0\n',
     "'sources'"),
    ('generation = 5\nlanes = 0\ntheoretical_bytes_per_s = 1e9\npractical_bytes_per_s = 1e9\nlatency_s = 0\n'
     'sources = ["s"]\n', "'lanes' must be a number > 0"),
    ('generation = 5\nlanes = 16\ntheoretical_bytes_per_s = 1e9\npractical_bytes_per_s = "fast"\nlatency_s = 0\n'
     'sources = ["s"]\n', "'practical_bytes_per_s'"),
])
def test_a_bad_link_file_is_refused_naming_the_field(tmp_path, body, match):
    p = tmp_path / "l.toml"
    p.write_text(body)
    with pytest.raises(SpecError, match=match):
        load_link(str(p))
    with pytest.raises(SpecError, match="unknown links preset"):
        load_link("pcie-gen9-x1")


def test_a_fitted_first_byte_of_zero_is_not_resolved_never_0_ns():
    from kvbench.analysis.recompute import Inequality
    from kvbench.spec.models import load_model

    fit0 = Tier("l2", 2.81e9, 0.0, source="fit to l2's load times of 40 requests", fitted=True)
    given0 = Tier("ram", 2.81e9, 0.0)                           # a stated 0 is a stated 0
    assert first_byte_text(fit0) == NOT_RESOLVED and first_byte_text(given0) == "0 ns"
    assert first_byte_text(replace(fit0, latency_s=38e-6)) == "38 us"
    m = load_model("llama-3.1-8b")
    res = analyse_tiers(Inequality(load_profile("llama-3.1-8b-h200-trtllm-fp8"), m.bytes_per_token, m.layers, kv=m),
                        [fit0, given0], lengths=[4096])
    assert res["l2"]["first_byte"] == NOT_RESOLVED and res["l2"]["latency_resolved"] is False
    assert "first byte not resolved by the fit" in res["l2"]["verdict"] and "0 ns" not in res["l2"]["verdict"]
    assert res["ram"]["latency_resolved"] is True and "0 ns" in res["ram"]["verdict"]


def test_the_run_note_on_first_bytes_says_unresolved_not_0_ns():
    from kvbench.cli.run import first_byte_notes

    fit0 = {"latency_s": 0.0, "latency_resolved": False, "first_byte": NOT_RESOLVED, "source": "fit to l3's loads"}
    notes = first_byte_notes([_probe(first=38e-6)], {"l3": fit0})
    assert "probe 38 us" in notes[0] and "vs check not resolved by the fit" in notes[0] and "0 ns" not in notes[0]


def test_an_unresolved_first_byte_travels_between_commands():
    from kvbench.analysis.loadpath import LoadPaths
    from kvbench.analysis.recompute import parse_tier

    paths = LoadPaths({"l3": Tier("l3", 2.36e9, 0.0, fitted=True), "l2": Tier("l2", 50e9, 17e-6)})
    assert paths.tier_arg("l3") == "l3=2.36e+09B/s,unresolved" and paths.tier_arg("l2") == "l2=5e+10B/s,17us"
    back = parse_tier(paths.tier_arg("l3"))                    # what plan --load-tier and check --tier read
    assert (back.bandwidth_bytes_per_s, back.latency_s, first_byte_text(back)) == (2.36e9, 0.0, NOT_RESOLVED)
    assert first_byte_text(parse_tier(paths.tier_arg("l2"))) == "17 us" and paths.tier_arg("l4") is None


def test_a_run_whose_probes_stall_excludes_them_and_says_so(tmp_path, cli, monkeypatch):
    """The main job with a real stall injected into its tier probes (hidden --probe-fault): each probe is suspect,
    rerun once, suspect again, and excluded: the note is on the terminal, in summary.json and in the report, and
    no load path (plan, check) carries the stalled bandwidth."""
    import json

    monkeypatch.chdir(tmp_path)
    r = cli("run", "--model", "tiny-gqa", "--max-requests", "60", "--duration", "10s", "--l2", "16MiB",
            "--l3-capacity", "256MiB", "--retentions", "1h", "--probe-seconds", "0.2", "--probe-fault",
            "stall-every=1:1.2s", "-o", tmp_path / "run.html", "--json")
    assert r.exit_code == 0, r.output[-3000:]
    summary = json.loads(r.stdout[r.stdout.index("{"):])
    job = tmp_path / summary["run_dir"]
    # the NVMe probe's reads wait out the stall in flight; the DRAM arena copies synchronously, before it, so its
    # latency shows none (its probe is no load path either way: L2 -> GPU is the link)
    probes = [p for p in json.loads((job / "probes.json").read_text()) if p.get("excluded")]
    assert [p["name"] for p in probes if p["name"] == "l3"] == ["l3"]
    assert all(p["suspect"] and p["rerun"]["suspect"] for p in probes)
    stalled = {p["bandwidth_bytes_per_s"] for p in probes} | {p["rerun"]["bandwidth_bytes_per_s"] for p in probes}
    notes = [n for n in summary["notes"] if "probe suspect, excluded" in n]
    assert {n.split()[0] for n in notes} == {p["name"] for p in probes}
    assert all(n in r.output for n in notes)                                     # the terminal said it
    paths = json.loads((job / "load_paths.json").read_text())
    assert len(paths["excluded_probes"]) == len(probes)
    assert "tier probe" not in (paths["tiers"].get("l3") or {}).get("source", "")
    used = [t["bandwidth_bytes_per_s"] for t in paths["tiers"].values()]
    check = json.loads((job / "check.json").read_text())
    used += [t["bandwidth_bytes_per_s"] for t in check["tiers"].values()]
    plan_lt = json.loads((job / "plan.json").read_text()).get("load_tier")
    used += [plan_lt["bandwidth_bytes_per_s"]] if plan_lt else []
    assert not stalled & set(used)
    assert "probe (suspect, excluded)" in (tmp_path / "run.html").read_text()


def test_a_replay_folder_that_cannot_be_read_is_said_not_swallowed(tmp_path):
    """The probes stand in for a replay whose loads cannot be read, and the load paths say why."""
    from kvbench.analysis.loadpath import job_load_paths
    from kvbench.spec.models import load_model

    probe = _probe()
    lp = job_load_paths(str(tmp_path / "no-such-replay"), load_model("llama-3.1-8b"), [probe], has_l2=False,
                        profile_name="llama-3.1-8b-nvidia-h200", link=None)
    assert lp.tiers["l3"].bandwidth_bytes_per_s == 2e9 and "tier probe" in lp.tiers["l3"].source
    assert len(lp.notes) == 1 and "replay's own loads were not used" in lp.notes[0]
    assert "no-such-replay" in lp.notes[0]


# mutation survivors
def test_guard_probes_reruns_a_probe_below_drams_first_byte_and_keeps_or_excludes_it_by_hand():
    """The DRAM rule in guard_probes: the L2 probe is the reference (wherever it sits in the list), the L3 probe
    below it is rerun once; a rerun that is still below DRAM is excluded with both reasons, one at or above it is
    used (the rerun, not the first try)."""
    dram, fast = _probe("l2", bw=8e9, first=64e-6), _probe(first=38e-6)
    reruns = []

    def again(first):
        def rerun(p):
            reruns.append(p.name)
            return _probe(first=first)
        return rerun

    kept, notes, excluded = guard_probes([fast, dram], {}, again(30e-6))      # L3 listed before L2
    assert reruns == ["l3"] and [p.name for p in kept] == ["l2"] and len(excluded) == 1
    assert "below DRAM's (64 us)" in excluded[0]["suspect"][0]
    rerun = excluded[0]["rerun"]
    assert "below DRAM's (64 us)" in rerun["suspect"][0] and rerun["first_byte_s"] == 30e-6
    assert notes == [f"l3 probe suspect, excluded: {excluded[0]['rerun']['suspect'][0]} (and on the first try: "
                     f"{excluded[0]['suspect'][0]}); no load path uses it"]
    kept, notes, excluded = guard_probes([dram, fast], {}, again(70e-6))
    assert [(p.name, p.first_byte_s) for p in kept] == [("l2", 64e-6), ("l3", 70e-6)] and excluded == []
    assert notes[0].startswith("l3 probe was suspect (its first byte 38 us is below DRAM's (64 us)); rerun once, "
                               "it agreed with the replay: the rerun is used")


def test_probe_rules_at_small_and_missing_figures_by_hand():
    none = _probe(bw=0.0)
    assert probe_suspicions(none, None) == []                                 # no replay: nothing to compare with
    assert probe_suspicions(none, {"read_bw_bytes_per_s": 10e9})[0].startswith("bandwidth 0 B/s is below 1/5")
    assert probe_suspicions(replace(none, bandwidth_bytes_per_s=None), {"read_bw_bytes_per_s": 5.0}) != []
    # a replay that read at 1 B/s still judges a probe at 0.1 B/s (any replay rate > 0 counts)
    assert probe_suspicions(_probe(bw=0.1), {"read_bw_bytes_per_s": 1.0})[0].startswith("bandwidth 0.1 B/s")
    assert probe_suspicions(_probe(bw=0.3), {"read_bw_bytes_per_s": 1.0}) == []
    # without a loaded-latency figure the first byte alone decides: 1.2 s is a stall
    slow = replace(_probe(first=1.2), bandwidth_lat_us=None)
    assert "a median I/O took 1.2 s" in probe_suspicions(slow, None)[0]


def _link(tmp_path, **fields):
    body = {"generation": 5, "lanes": 16, "theoretical_bytes_per_s": 63e9, "practical_bytes_per_s": 50e9,
            "latency_s": 17e-6, "sources": ["s"], **fields}
    toml = lambda v: str(v).lower() if isinstance(v, bool) else repr(v).replace("'", '"')  # noqa: E731
    text = "".join(f"{k} = {toml(v)}\n" for k, v in body.items())
    p = tmp_path / "my-link.toml"
    p.write_text(text)
    return str(p)


def test_a_link_file_of_small_figures_loads_and_its_name_is_its_own(tmp_path):
    """Only numbers <= 0 are refused (0 allowed for the latency): a Gen1 x1 link of 0.5 B/s with no fixed part is a
    link; equal practical and theoretical rates are allowed; the name is the file's own, else its stem."""
    ln = load_link(_link(tmp_path, generation=1, lanes=1, theoretical_bytes_per_s=0.5, practical_bytes_per_s=0.5,
                         latency_s=0.0))
    assert (ln.generation, ln.lanes, ln.theoretical_bytes_per_s, ln.practical_bytes_per_s, ln.latency_s) == \
        (1, 1, 0.5, 0.5, 0.0)
    assert ln.name == "my-link" and ln.sources == ("s",)
    assert load_link(_link(tmp_path, name="gen5-lab")).name == "gen5-lab"
    for bad in ([""], [1]):                                      # every source is a non-empty string
        with pytest.raises(SpecError, match="'sources'"):
            load_link(_link(tmp_path, sources=bad))
    with pytest.raises(SpecError, match="'latency_s'"):
        load_link(_link(tmp_path, latency_s=-1e-6))
    with pytest.raises(SpecError, match="'generation'"):
        load_link(_link(tmp_path, generation=True))           # a boolean is not a number


def test_a_stated_zero_first_byte_travels_as_zero_and_a_fitted_one_as_a_time():
    from kvbench.analysis.loadpath import LoadPaths

    paths = LoadPaths({"l2": Tier("l2", 1e9, 0.0), "l3": Tier("l3", 2e9, 38e-6, fitted=True)})
    assert paths.tier_arg("l2") == "l2=1e+09B/s,0us" and paths.tier_arg("l3") == "l3=2e+09B/s,38us"


def test_the_l3_path_is_the_first_l3_probe_with_a_bandwidth():
    """No L3 loads in the replay: the L3 path is the first probe named l3 with a bandwidth > 0 (any, however small),
    never the L2 probe; a zero-bandwidth probe is no path."""
    prof = load_profile("llama-3.1-8b-h200-trtllm-fp8")
    dram, zero, tiny = _probe("l2", bw=8e9), _probe(bw=0.0), _probe(bw=1.0, first=90e-6)
    paths = choose_load_paths([], [dram, zero, tiny], has_l2=False, profile=prof, link=None)
    assert list(paths.tiers) == ["l3"] and paths.tiers["l3"].bandwidth_bytes_per_s == 1.0
    assert paths.tiers["l3"].latency_s == 90e-6 and "reads of 1 MiB at QD32" in paths.tiers["l3"].source
    assert choose_load_paths([], [dram, zero], has_l2=False, profile=prof, link=None).tiers == {}
    # an I/O size under 1 KiB is labelled by its size (">> 10" once said "0 KiB")
    small = TierProbe("l3", "x", 90e-6, 1e6, 512, 1, {"p50": 90.0}, {"p50": 500.0})
    src = choose_load_paths([], [small], has_l2=False, profile=prof, link=None).tiers["l3"].source
    assert "reads of 512 B at QD1, first byte" in src
    # the replay's own L3 wins over any probe; has_l2 adds the L2 -> GPU path (the default link here)
    own = Tier("l3", 3e9, 1e-4)
    paths = choose_load_paths([own], [tiny], has_l2=True, profile=prof, link=None)
    assert paths.tiers["l3"] is own and paths.tiers["l2"].bandwidth_bytes_per_s == 50e9


def test_run_tiers_fit_the_requests_load_times_else_keep_the_run_average():
    """A run whose requests.csv holds l3's own load times of 8 requests of 1 and 2 blocks (16,000 B each,
    80 us + bytes / 2 GB/s): the tier is the fit; without per-request hits it is the run average, with a note."""
    from types import SimpleNamespace

    from kvbench.analysis.loadpath import run_tiers
    from kvbench.analysis.recompute import RunHits

    import numpy as np

    blocks = np.array([1, 2] * 4)
    hits = RunHits({"l3": blocks}, None, None, tier_load_s={"l3": 80e-6 + blocks * 16_000 / 2e9})
    model = SimpleNamespace(block_bytes=lambda bt: bt * 1000)
    avg = Tier("l3", 1e9, 5e-4, source="summary.json: run-average bandwidth")
    tiers, notes = run_tiers(SimpleNamespace(block_tokens=16, tiers=[avg], hits=hits), model)
    assert tiers[0].bandwidth_bytes_per_s == pytest.approx(2e9, rel=1e-9) and tiers[0].fitted and notes == []
    for run in (SimpleNamespace(block_tokens=16, tiers=[avg], hits=None),
                SimpleNamespace(block_tokens=None, tiers=[avg], hits=hits)):
        tiers, notes = run_tiers(run, model)
        assert tiers == [avg] and notes == ["tier l3: bandwidth is the run average (bytes / wall time), a lower "
                                            "bound on what the tier delivers per request"]


def test_the_l2_note_names_the_replays_memcpy_and_the_link_that_replaces_it():
    from kvbench.analysis.loadpath import load_path_tiers

    out, notes = load_path_tiers([Tier("l2", 8e9, 1e-6)], load_profile("llama-3.1-8b-h200-trtllm-fp8"), None)
    assert notes == ["l2: the replay's DRAM arena copy (8 GB/s, a host memcpy) is not a load path; L2 -> GPU is the "
                     "PCIe Gen5 x16 link model (pcie-gen5-x16: 50 GB/s practical of 63 GB/s per direction, 17 us; "
                     "stated, not measured) (the default: give --link); pcie-gen5-x16.toml"]
