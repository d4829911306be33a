"""kvbench.spec.fields: the one key=value parser (every option's sites are walked in tests/cli/test_validation.py)."""

from __future__ import annotations

import pytest

from kvbench.errors import SpecError, UsageError
from kvbench.spec.fields import norm_key, parse_fields, split_parts

KNOWN = ("gpus", "drive_capacity", "rule")


def test_spaces_around_equals_and_separators_read_alike():
    want = {"gpus": "8", "drive_capacity": "7.68TB"}
    for text in ("gpus=8,drive_capacity=7.68TB", " gpus = 8 , drive_capacity = 7.68TB ",
                 "gpus=8,drive_capacity=7.68TB,", "gpus =8,  ,drive_capacity= 7.68TB"):
        assert parse_fields(text, option="--x", known=KNOWN) == want, text
    assert list(parse_fields("drive_capacity=1,gpus=2", option="--x", known=KNOWN)) == ["drive_capacity", "gpus"]


def test_dash_and_underscore_alike_and_the_site_spelling_returned():
    assert parse_fields("drive-capacity=1", option="--x", known=KNOWN) == {"drive_capacity": "1"}
    assert parse_fields("a-b=1", option="--x", known=("a-b",)) == {"a-b": "1"}     # the site spells it with '-'
    assert parse_fields("a_b=1", option="--x", known=("a-b",)) == {"a-b": "1"}
    assert parse_fields(" my-key = v ", option="--x") == {"my_key": "v"}            # open keys: normalised
    assert norm_key(" a-b-c ") == "a_b_c"
    with pytest.raises(UsageError, match="'drive_capacity' given twice"):
        parse_fields("drive_capacity=1,drive-capacity=2", option="--x", known=KNOWN)


def test_a_sequence_is_one_part_per_item_and_the_separator_is_the_sites():
    assert parse_fields(["nodes=4,8", " l2 = 1GiB "], option="--sweep") == {"nodes": "4,8", "l2": "1GiB"}
    assert parse_fields("width = 0.5 : sample=2", option="adm", sep=":") == {"width": "0.5", "sample": "2"}
    assert parse_fields("k=a=b", option="--x") == {"k": "a=b"}                     # split at the first '='
    assert split_parts("a, ,b,") == ["a", "b"] and split_parts(("a", " ", " b ")) == ["a", "b"]
    assert split_parts(None) == [] and parse_fields((), option="--x") == {}


@pytest.mark.parametrize("text, match", [
    ("gpus=8,rule", r"^--x: malformed field 'rule' \(not KEY=VALUE\)$"),
    ("=8", r"^--x: malformed field '=8'"),
    ("gpus=8,disks=2", r"^--x: unknown field 'disks'$"),
    ("gpus=8,gpus=4", r"^--x: field 'gpus' given twice$"),
    ("gpus=", r"^--x: field 'gpus' has no value$"),
    ("rule=a", r"^--x: missing gpus, drive_capacity$"),
    ("", r"^--x: missing gpus, drive_capacity$"),
])
def test_each_fault_is_one_line_naming_the_option_and_the_key(text, match):
    with pytest.raises(SpecError) as e:
        parse_fields(text, option="--x", known=KNOWN, required=("gpus", "drive_capacity"), error=SpecError)
    assert e.value.problem == e.value.problem.strip() and "\n" not in str(e.value)
    assert __import__("re").search(match, e.value.problem), e.value.problem
    assert e.value.exit_code == 2 and e.value.fix


def test_the_fix_lists_the_known_keys_and_the_sites_example():
    with pytest.raises(UsageError) as e:
        parse_fields("zz=1", option="--x", known=KNOWN, fix="e.g. gpus=8")
    assert e.value.fix == "known fields: gpus, drive_capacity, rule; e.g. gpus=8"
    with pytest.raises(UsageError) as e:
        parse_fields("zz=1", option="--x", known=("a",), known_text="", fix="a only", noun="parameter")
    assert e.value.problem == "--x: unknown parameter 'zz'" and e.value.fix == "a only"
    with pytest.raises(UsageError) as e:
        parse_fields("a=1,a=2", option="--x", known=("a",))
    assert e.value.fix == "give each field once"
    with pytest.raises(UsageError) as e:
        parse_fields("a=", option="--x")
    assert e.value.fix == "write a=VALUE"


def test_allow_empty_and_a_lookup_function():
    assert parse_fields("a=,b=", option="--x", allow_empty=True) == {"a": "", "b": ""}
    assert parse_fields("a=", option="--x", allow_empty=("a",)) == {"a": ""}
    with pytest.raises(UsageError, match="'b' has no value"):
        parse_fields("a=,b=", option="--x", allow_empty=("a",))

    def lookup(key):
        return key.upper() if key.startswith("ok") else None

    assert parse_fields("ok-1=2", option="--x", known=lookup) == {"OK_1": "2"}
    with pytest.raises(UsageError) as e:
        parse_fields("no=2", option="--x", known=lookup, known_text="ok<anything>")
    assert e.value.problem == "--x: unknown field 'no'" and e.value.fix == "known fields: ok<anything>"


# mutation survivors
def test_allow_empty_false_refuses_every_empty_value():
    with pytest.raises(UsageError, match="'a' has no value"):
        parse_fields("a=", option="--x", allow_empty=False)
    assert parse_fields("a=1", option="--x", allow_empty=False) == {"a": "1"}
