"""The result contract (kvbench/metrics/results.py): every writer stamps ``schema``; the one reader reads a
folder each command writes, upgrades a pre-contract (version 0) folder in one place, and refuses a newer or
unknown version in one line naming the file, its version and the fix."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvbench.errors import UsageError
from kvbench.metrics.results import SCHEMAS, CheckResult, PlanResult, Summary, read_run
from tests.conftest import REPO

KVBENCH = REPO / "kvbench"


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):])


def _on_disk(path: Path) -> dict:
    return json.loads(path.read_text())


def _assert_stamped(run_dir) -> "object":
    """run.json and summary.json on disk carry the current schema, and the reader reads the folder."""
    run_dir = Path(run_dir)
    assert _on_disk(run_dir / "run.json")["schema"] == SCHEMAS["run"] == 1
    assert _on_disk(run_dir / "summary.json")["schema"] == SCHEMAS["summary"] == 1
    f = read_run(run_dir)
    assert f.summary.data["schema"] == 1 and f.run.data["schema"] == 1 and f.summary.run_dir == str(run_dir)
    return f


# --- every command's folder: stamped, and read back ----------------------------------------------------------

def test_io_folder(cli, tmp_path):
    s = _json(cli("io", "--target", "dram:8MiB", "--engine", "dram", "--runtime", "0.2", "--results",
                  tmp_path / "res", "--json"))
    f = _assert_stamped(s["run_dir"])
    assert f.summary.kind == "io" and f.run.kind == "io" and f.summary.status == s["status"]


def test_replay_engram_folder(cli, tmp_path):
    from tests.replay.test_engram import TEXT, TINY_TOML

    preset = tmp_path / "tiny-engram.toml"
    preset.write_text(TINY_TOML)
    s = _json(cli("replay", "engram", "--preset", preset, "--text", TEXT, "--batch", 4, "--seq-len", 128,
                  "--dram", "8KiB", "--dry-run", "--json", "--results", tmp_path / "res"))
    f = _assert_stamped(s["run_dir"])
    assert f.summary.kind == "replay-engram" and "curve" in f.analyses


def test_cluster_folder(cli, tmp_path):
    from tests.conftest import write_mooncake

    tr = write_mooncake(tmp_path / "t.jsonl", [(0, [1, 2]), (10, [1, 2, 3]), (20, [1, 2, 3, 4])])
    s = _json(cli("cluster", tr, "--model", "tiny-gqa", "--router", "session", "--l2", "1MiB", "--dry-run",
                  "--json", "--results", tmp_path / "res"))
    f = _assert_stamped(s["run_dir"])
    assert f.summary.kind == "cluster"


def test_qualify_folder_and_its_parts(cli, tmp_path, monkeypatch):
    """A job folder: its summary lists step folders (parts), each read through the same reader."""
    from tests.qualify.test_qualify import TINY

    monkeypatch.chdir(tmp_path)
    prof = tmp_path / "tiny.toml"
    prof.write_text(TINY.format(max_rounds=6, fill_min="1MB/s", iops_min=1))
    r = cli("qualify", prof, "--target", tmp_path / "drive.img", "--size", "16MiB", "--json", "-o", tmp_path / "q.html")
    s = json.loads(r.stdout)
    f = _assert_stamped(s["run_dir"])          # relative to the working directory, as recorded
    assert f.summary.kind == "qualify" and "qualify" in f.analyses and set(f.parts) == set(s["parts"])
    for part in f.parts.values():
        assert part.summary.data["schema"] == 1 and part.run.data["schema"] == 1


def test_replay_dry_run_folder_reads_as_a_typed_replay_summary(cli, tmp_path):
    """The fields plan --run and check --run take, each from its one place: model and slot size from the
    summary, block_tokens from run.json's config, the L3 capacity as given (8 blocks of 256 KiB)."""
    s = _json(cli("replay", "kv", "mooncake-sample", "--model", "tiny-gqa", "--l2", "1MiB", "--l3",
                  tmp_path / "l3.store", "--l3-capacity", "2MiB", "--dry-run", "--max-requests", "40",
                  "--results", tmp_path / "res", "--json"))
    assert s["schema"] == 1                              # --json prints the stamped summary
    rep = _assert_stamped(s["run_dir"]).replay
    assert rep.model == "tiny-gqa" and rep.block_tokens == 512 and rep.dry_run is True
    assert rep.requests == 40 and rep.sample_rate == 1.0
    l3 = rep.tiers["l3"]
    assert l3.capacity_bytes == 2 << 20 and l3.layout == "slot"
    assert l3.full_write_bytes == l3.write_bytes == s["tiers"]["l3"]["write_bytes"]


def test_real_replay_then_plan_and_check_read_it(cli, tmp_path):
    """replay kv (real O_DIRECT store) -> plan --run --report and check --run: both read the folder through the
    contract (plan's measured L3 capacity is the replay's 64 MiB) and stamp plan.json / check's JSON."""
    lines = []
    for t in range(24):
        ids = list(range(100 * (t % 3), 100 * (t % 3) + 6)) + [1000 + 2 * t, 1001 + 2 * t]
        lines.append(json.dumps({"timestamp": t * 10, "input_length": len(ids) * 512, "output_length": 1,
                                 "hash_ids": ids}))
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    s = _json(cli("replay", "kv", trace, "--model", "tiny-gqa", "--l2", "1MiB", "--l3", tmp_path / "l3.store",
                  "--l3-capacity", "64MiB", "--closed-loop", "--results", tmp_path / "results", "--json"))
    rep = _assert_stamped(s["run_dir"]).replay
    assert rep.tiers["l3"].capacity_bytes == 64 << 20 and rep.block_tokens == 512 and not rep.dry_run

    c = _json(cli("check", "--recompute-tokens-per-s", "20000", "--run", s["run_dir"], "--json"))
    assert c["schema"] == SCHEMAS["check"] == 1 and c["run"]["block_tokens"] == 512
    assert CheckResult.from_json(c).tiers.keys() == c["tiers"].keys()

    p = _json(cli("plan", "--trace", trace, "--model", "tiny-gqa", "--run", s["run_dir"], "--waf", "1.0",
                  "--sweep", "", "--report", tmp_path / "plan.html", "--results", tmp_path / "results", "--json"))
    assert p["schema"] == SCHEMAS["plan"] == 1 and p["measured"]["l3_capacity_bytes"] == 64 << 20
    assert p["measured"]["requests_replayed"] == 24
    folder = _assert_stamped(p["run_dir"])
    written = {k: v for k, v in p.items() if k not in ("run_dir", "report")}     # where it went: --json only
    assert folder.plan is not None and folder.plan.data == written == _on_disk(Path(p["run_dir"]) / "plan.json")


# --- refusals ------------------------------------------------------------------------------------------------

def _folder(tmp_path, summary=None, run=None, **files) -> Path:
    d = tmp_path / "replay-kv-x"
    d.mkdir(exist_ok=True)
    (d / "summary.json").write_text(json.dumps(summary if summary is not None else
                                               {"kind": "replay-kv", "status": "complete", "schema": 1}))
    if run is not None:
        (d / "run.json").write_text(json.dumps(run))
    for name, doc in files.items():
        (d / f"{name}.json").write_text(json.dumps(doc))
    return d


@pytest.mark.parametrize("name", ["summary", "run", "plan", "check"])
def test_a_newer_version_is_refused_naming_the_file_and_the_fix(tmp_path, name):
    docs = {"summary": {"kind": "io", "status": "complete", "schema": 1}, "run": {"kind": "io", "schema": 1}}
    docs[name] = {**docs.get(name, {}), "schema": 7}
    d = _folder(tmp_path, summary=docs["summary"], run=docs["run"],
                **{k: {"schema": 7} for k in ("plan", "check") if k == name})
    with pytest.raises(UsageError) as e:
        read_run(d)
    msg = str(e.value)
    assert f"{d / (name + '.json')}: schema 7 is newer than this kvbench reads ({name} layout 1)" in msg
    assert "upgrade kvbench" in msg and "\n" not in msg


@pytest.mark.parametrize("bad", ["1", 1.0, -1, True, None])
def test_a_schema_that_is_not_a_known_version_is_refused(tmp_path, bad):
    d = _folder(tmp_path, summary={"kind": "io", "status": "complete", "schema": bad})
    with pytest.raises(UsageError, match=r"summary.json: schema .* is not a summary layout version kvbench knows"):
        read_run(d)


def test_not_an_object_is_refused(tmp_path):
    d = _folder(tmp_path, check=[1, 2])
    with pytest.raises(UsageError, match=r"check.json: holds list, not a JSON object"):
        read_run(d)


@pytest.mark.parametrize("command", [["report"], ["plan", "--trace", "mooncake-sample", "--model", "tiny-gqa",
                                                  "--waf", "1", "--sweep", "", "--run"],
                                     ["check", "--recompute-tokens-per-s", "1000", "--run"]])
def test_commands_refuse_a_newer_folder_in_one_line(cli, tmp_path, command):
    d = _folder(tmp_path, summary={"kind": "replay-kv", "status": "complete", "schema": 2})
    args = [*command, d] + (["-o", tmp_path / "r.html"] if command == ["report"] else [])
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert "schema 2 is newer than this kvbench reads" in r.output and "Traceback" not in r.output
    assert r.output.strip().count("\n") == 0


def test_plan_run_refuses_a_folder_of_another_kind(cli, tmp_path):
    d = _folder(tmp_path, summary={"kind": "io", "status": "complete", "schema": 1})
    r = cli("plan", "--trace", "mooncake-sample", "--model", "tiny-gqa", "--waf", "1", "--sweep", "", "--run", d)
    assert r.exit_code == 2 and "summary.json: a 'io' run, not a replay kv run" in r.output


# --- version 0: read through the one upgrade ---------------------------------------------------------------

def test_a_pre_contract_replay_folder_is_upgraded(tmp_path):
    """No schema anywhere: capacity, layout and model from run.json's config; kind from run.json; the
    full-size write bytes are the measured ones (an unsampled run)."""
    d = _folder(tmp_path, summary={"status": "complete", "tiers": {"l3": {"write_bytes": 5000}}},
                run={"kind": "replay-kv", "config": {"model": "tiny-gqa", "block_tokens": 16, "l3_capacity": 123456,
                                                     "layout": "log"}})
    f = read_run(d)
    assert f.summary.data["schema"] == 1 and f.run.data["schema"] == 1 and f.summary.kind == "replay-kv"
    rep = f.replay
    assert (rep.model, rep.block_tokens) == ("tiny-gqa", 16)
    l3 = rep.tiers["l3"]
    assert (l3.capacity_bytes, l3.layout, l3.write_bytes, l3.full_write_bytes) == (123456, "log", 5000, 5000)
    assert _on_disk(d / "summary.json") == {"status": "complete", "tiers": {"l3": {"write_bytes": 5000}}}  # read only


def test_a_pre_contract_capacity_in_blocks_times_the_slot(tmp_path):
    # 10 blocks x 2 MiB slots = 20 MiB; the summary's own layout wins over the config's
    d = _folder(tmp_path, summary={"kind": "replay-kv", "status": "complete", "slot_bytes": 2 << 20,
                                   "tiers": {"l3": {"capacity_blocks": 10, "layout": "slot"}}},
                run={"config": {"layout": "log"}})
    l3 = read_run(d).replay.tiers["l3"]
    assert l3.capacity_bytes == 20 << 20 and l3.layout == "slot"


def test_a_current_summary_is_read_as_written(tmp_path):
    """Version 1 is not upgraded: a field the summary lacks stays absent (no fallback to run.json's config)."""
    d = _folder(tmp_path, summary={"kind": "replay-kv", "status": "complete", "schema": 1,
                                   "tiers": {"l3": {"write_bytes": 7}}},
                run={"schema": 1, "kind": "replay-kv", "config": {"l3_capacity": 999, "model": "x"}})
    rep = read_run(d).replay
    assert rep.tiers["l3"].capacity_bytes is None and rep.model is None and rep.tiers["l3"].full_write_bytes is None


def test_to_json_from_json_round_trip():
    s = Summary.from_json({"kind": "io", "status": "complete", "run_dir": "r", "iops": 5})
    assert s.to_json() == {"schema": 1, "kind": "io", "status": "complete", "run_dir": "r", "iops": 5}
    assert Summary.from_json(s.to_json()) == s and list(s.to_json())[0] == "schema"
    p = PlanResult.from_json({"answer": {"target": 0.9}})
    assert PlanResult.from_json(p.to_json()) == p and p.to_json()["schema"] == 1


# --- the answer: kvbench run's Answer, versioned on its own, read through the summary -------------------------

def test_the_answer_is_read_through_the_summary(tmp_path):
    from kvbench.analysis.answer import RECOMPUTE_STATEMENT, Answer

    a = Answer(decision="recompute", statement=RECOMPUTE_STATEMENT, binding="hit target", binding_statement="",
               figures={}, notes=("by hand",))
    d = _folder(tmp_path, summary={"kind": "run", "status": "complete", "schema": 1, "answer": a.to_json()})
    assert read_run(d).answer == a
    # a run written before the Answer record: its answer held the plan's sentences -> no Answer
    (d / "summary.json").write_text(json.dumps({"kind": "run", "status": "complete", "answer": {"sentences": ["x"]}}))
    assert read_run(d).answer is None
    (d / "summary.json").write_text(json.dumps({"kind": "run", "status": "complete", "schema": 1,
                                                "answer": {**a.to_json(), "schema": 9}}))
    with pytest.raises(UsageError, match=r"summary.json: answer: answer schema 9; this kvbench reads schema 1"):
        read_run(d).answer


# --- no .get() fallback chains over the same field ----------------------------------------------------------

def _same_key_get_chains(tree) -> list[tuple[int, str]]:
    """``a.get("k") or b.get("k")`` (or/and chains with two .get() of one constant key on different objects)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.BoolOp) or not isinstance(node.op, ast.Or):
            continue
        seen = {}
        for v in node.values:
            if (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "get" and v.args
                    and isinstance(v.args[0], ast.Constant) and isinstance(v.args[0].value, str)):
                key, recv = v.args[0].value, ast.dump(v.func.value)
                if key in seen and seen[key] != recv:
                    out.append((node.lineno, key))
                seen.setdefault(key, recv)
    return out


def test_the_chain_finder_finds_a_chain():
    assert _same_key_get_chains(ast.parse('m = summary.get("model") or config.get("model")')) == [(1, "model")]
    assert _same_key_get_chains(ast.parse('m = s.get("a") or s.get("b") or {}')) == []


def test_no_get_fallback_chains_over_the_same_field():
    """Older layouts are upgraded in results.upgrade(); nowhere else reads one field from two places."""
    from tests.conftest import package_asts
    found = []
    for path, tree in package_asts():
        if path.name == "results.py" and path.parent.name == "metrics":
            continue
        for line, key in _same_key_get_chains(tree):
            found.append(f"{path.relative_to(KVBENCH.parent)}:{line}: {key}")
    assert not found, found
