"""The tests mirror the package (tests/README.md, "Layout"): ``tests/<package>/test_<module>.py`` tests
``kvbench/<package>/<module>.py``, so the tests of a module are found by its name and the layout cannot drift back
to files named by history (``test_audit_defects.py``, ``test_ftl_edges.py``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO

# Files that test no one module, by folder: the CLI's cross-command walkers (every command's bad inputs, the
# validation table, every OUTPUT option) and, at the top, the shared fixtures' own tests and this file.
CROSS_CUTTING = {
    ("cli",): {"bad_inputs", "validation", "outputs"},
    (): {"conftest", "layout"},
}


def layout_problems(tests: Path, package: Path, benchmarks: Path) -> list[str]:
    """Every test file under ``tests`` that is outside the mirrored layout, and every test folder without an
    ``__init__.py`` (test basenames repeat across folders), one line each."""
    problems = []
    for path in sorted(tests.rglob("*.py")):
        rel = path.relative_to(tests)
        folder = rel.parts[:-1]
        if "__pycache__" in folder:
            continue
        if not (path.parent / "__init__.py").is_file():
            problems.append(f"{rel}: its folder has no __init__.py")
        if not path.name.startswith("test_"):
            continue                                    # conftest.py, __init__.py, helpers beside the tests
        name = path.stem.removeprefix("test_")
        if name in CROSS_CUTTING.get(folder, ()):
            continue
        if folder[:1] == ("benchmarks",):
            # tests of a script in benchmarks/: tests/benchmarks/test_<script>.py
            if len(folder) != 1 or not any(benchmarks.glob(f"{name}.*")):
                problems.append(f"{rel}: no script benchmarks/{name}.* (tests/benchmarks/test_<script>.py)")
            continue
        pkg = package.joinpath(*folder)
        if not (pkg / "__init__.py").is_file():
            problems.append(f"{rel}: no package kvbench/{'/'.join(folder)}/ (tests/<package>/test_<module>.py)")
            continue
        if (pkg / f"{name}.py").is_file() or (pkg / name / "__init__.py").is_file():
            continue                                    # a module, or a subpackage tested as a whole
        if folder and name == folder[-1]:
            continue                                    # the package itself (its __init__): tests/engine/test_engine.py
        where = f"kvbench/{'/'.join(folder)}/" if folder else "kvbench/"
        problems.append(f"{rel}: {where} has no module {name}.py (name a test file after the module it tests)")
    return problems


def test_the_tests_mirror_the_package():
    problems = layout_problems(REPO / "tests", REPO / "kvbench", REPO / "benchmarks")
    assert not problems, "\n".join(problems)


def test_files_outside_the_layout_are_named(tmp_path):
    """The check on a made-up tree: each kind of misplaced file is reported, the well-placed ones are not."""
    pkg, tests, bench = tmp_path / "kvbench", tmp_path / "tests", tmp_path / "benchmarks"
    for d in (pkg, pkg / "sim", pkg / "sim" / "curves", tests, tests / "sim", tests / "sim" / "curves",
              tests / "nopkg", tests / "benchmarks"):
        d.mkdir()
        (d / "__init__.py").write_text("")
    for f in (pkg / "units.py", pkg / "sim" / "tiers.py", pkg / "sim" / "curves" / "stack.py", bench / "tier_sim.py"):
        f.parent.mkdir(exist_ok=True)
        f.write_text("")
    good = ["test_units.py", "test_conftest.py", "sim/test_tiers.py", "sim/test_sim.py", "sim/test_curves.py",
            "sim/curves/test_stack.py", "benchmarks/test_tier_sim.py", "sim/helpers.py"]
    named = " (name a test file after the module it tests)"
    bad = {"test_audit_defects.py": "kvbench/ has no module audit_defects.py" + named,
           "sim/test_tiers_edges.py": "kvbench/sim/ has no module tiers_edges.py" + named,
           "sim/test_bad_inputs.py": "kvbench/sim/ has no module bad_inputs.py" + named,
           "nopkg/test_x.py": "no package kvbench/nopkg/ (tests/<package>/test_<module>.py)",
           "benchmarks/test_nothing.py": "no script benchmarks/nothing.* (tests/benchmarks/test_<script>.py)"}
    for rel in good + list(bad):
        (tests / rel).write_text("")
    (tests / "loose").mkdir()
    (tests / "loose" / "helpers.py").write_text("")
    want = [f"{rel}: {why}" for rel, why in bad.items()] + ["loose/helpers.py: its folder has no __init__.py"]
    assert sorted(layout_problems(tests, pkg, bench)) == sorted(want)
