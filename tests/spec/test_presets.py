"""Presets: where the shipped ones are found, names and paths resolved, TOML read (and its errors) and written.
Expected values are typed by hand (file names, TOML text); tomllib reads back what dump_toml writes."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from kvbench.errors import SpecError
from kvbench.spec.presets import (dump_toml, load_preset, load_toml, preset_names, preset_path, toml_value,
                                  workloads_dir)
from tests.conftest import REPO


@pytest.fixture
def shelf(tmp_path, monkeypatch):
    """A workloads folder of our own (KVBENCH_WORKLOADS): models a.toml, b.toml and a stray c.txt; no engram."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "a.toml").write_text('name = "a"\nlayers = 2\n')
    (tmp_path / "models" / "b.toml").write_text('name = "b"\n')
    (tmp_path / "models" / "c.txt").write_text("not a preset\n")
    monkeypatch.setenv("KVBENCH_WORKLOADS", str(tmp_path))
    return tmp_path


def test_workloads_dir_is_the_checkouts_folder_unless_the_environment_names_one(monkeypatch, tmp_path):
    monkeypatch.delenv("KVBENCH_WORKLOADS", raising=False)
    assert workloads_dir() == REPO / "workloads"
    monkeypatch.setenv("KVBENCH_WORKLOADS", "")             # empty: not set
    assert workloads_dir() == REPO / "workloads"
    monkeypatch.setenv("KVBENCH_WORKLOADS", str(tmp_path))
    assert workloads_dir() == tmp_path


def test_preset_names_are_the_sorted_toml_stems_of_the_kinds_folder(shelf, monkeypatch):
    assert preset_names("models") == ["a", "b"]
    assert preset_names("engram") == []                     # no such folder
    monkeypatch.delenv("KVBENCH_WORKLOADS")
    shipped = sorted(p.name[:-5] for p in os.scandir(REPO / "workloads" / "models") if p.name.endswith(".toml"))
    assert preset_names("models") == shipped and "llama-3.1-8b" in shipped


def test_a_name_resolves_in_the_kinds_folder(shelf):
    assert preset_path("models", "a") == shelf / "models" / "a.toml"
    assert load_preset("models", "a") == ({"name": "a", "layers": 2}, shelf / "models" / "a.toml")
    with pytest.raises(SpecError, match=r"unknown models preset 'zz'.*choose one of: a, b or give a \.toml path"):
        preset_path("models", "zz")
    with pytest.raises(SpecError, match=r"unknown engram preset 'zz'.*\(none shipped\)"):
        preset_path("engram", "zz")
    with pytest.raises(SpecError, match="unknown models preset 'c'"):   # c.txt is no preset
        preset_path("models", "c")


def test_a_path_is_taken_as_given(shelf, tmp_path, monkeypatch):
    # a .toml or .json suffix, or a folder separator, makes it a path; the kind's folder is not searched
    own = tmp_path / "own"
    own.mkdir()
    (own / "a.toml").write_text('name = "mine"\n')
    (own / "x.json").write_text("{}\n")
    (own / "plain").write_text('name = "plain"\n')
    assert preset_path("models", str(own / "a.toml")) == own / "a.toml"
    assert preset_path("models", str(own / "x.json")) == own / "x.json"
    assert preset_path("models", str(own / "plain")) == own / "plain"          # no suffix, but a separator
    assert load_preset("models", str(own / "plain"))[0] == {"name": "plain"}
    monkeypatch.chdir(own)
    assert preset_path("models", "a.toml") == Path("a.toml")          # a suffix, no separator
    assert load_preset("models", "a.toml")[0] == {"name": "mine"}               # not the shelf's a.toml
    for missing in (str(own / "none.toml"), "none.json", str(own / "none"), f"a{os.sep}"):
        with pytest.raises(SpecError, match="models preset file not found"):
            preset_path("models", missing)


def test_load_toml_reads_utf8_with_a_bom_and_names_the_file_on_errors(tmp_path):
    good = tmp_path / "g.toml"
    good.write_bytes(b"\xef\xbb\xbfx = 1\n")
    assert load_toml(good) == {"x": 1}
    bad = tmp_path / "b.toml"
    bad.write_text("x = 1\ny = \n")
    with pytest.raises(SpecError, match=r"b\.toml: invalid TOML: .*line 2"):
        load_toml(bad)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"x = 1\n\xff\xfe")
    with pytest.raises(SpecError, match=r"bin\.toml: not a UTF-8 text file \(byte 6: binary data\?\)"):
        load_toml(binary)
    with pytest.raises(SpecError, match=r"none\.toml: cannot read"):
        load_toml(tmp_path / "none.toml")


def test_toml_values_by_hand():
    assert [toml_value(v) for v in (True, False, 0, -3, 2.5, 1e-07, "a\"b")] == \
        ["true", "false", "0", "-3", "2.5", "1e-07", '"a\\"b"']
    assert toml_value([1, 2.5, -3]) == "[1, 2.5, -3]" and toml_value(()) == "[]"
    assert toml_value(["x", 1]) == '[\n  "x",\n  1,\n]'
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(SpecError, match="non-finite"):
            toml_value(bad)
    for bad in (None, {"a": 1}, b"x"):
        with pytest.raises(TypeError, match="cannot write"):
            toml_value(bad)


def test_dump_toml_by_hand_and_read_back():
    d = {"name": "m", "skip": None, "layers": 4, "t": {"a": 1.5, "b": None, "c": [1, 2]}, "ok": True,
         "u": {"z": "q"}}
    text = dump_toml(d, comments={"layers": "per rank", "t.a": "ms", "t": "never used"}, header="one\ntwo")
    assert text == ('# one\n# two\nname = "m"\nlayers = 4   # per rank\nok = true\n\n[t]\na = 1.5   # ms\n'
                    'c = [1, 2]\n\n[u]\nz = "q"\n')
    assert tomllib.loads(text) == {"name": "m", "layers": 4, "ok": True, "t": {"a": 1.5, "c": [1, 2]},
                                   "u": {"z": "q"}}
    # no comments, no header; a file of tables only starts with its first table (no blank line on top)
    assert dump_toml({"x": 1}) == "x = 1\n"
    assert dump_toml({"t": {"x": 1}}) == "[t]\nx = 1\n"
    assert dump_toml({}) == "\n"
