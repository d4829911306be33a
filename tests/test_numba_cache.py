"""The per-machine cache of compiled kernels (kvbench/numba_cache.py): a copy of the tree loads what another
copy compiled, and a changed kernel - or a changed module it imports - never loads a stale one."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kvbench

PKG = Path(kvbench.__file__).resolve().parent


def _copy(dst: Path) -> Path:
    shutil.copytree(PKG, dst / "kvbench", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dst / "kvbench"


def _locator_module(pkg: Path, name: str):
    """The copy's numba_cache module, loaded under its own name (its PACKAGE is the copy)."""
    spec = importlib.util.spec_from_file_location(name, pkg / "numba_cache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_stamp_is_the_source_and_its_kvbench_imports_not_the_path(tmp_path):
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    na, nb = _locator_module(a, "_nc_a"), _locator_module(b, "_nc_b")
    kern = Path("sim") / "tiers_kernel.py"
    # tiers_kernel imports kvbench.kernels (u, inlined into every subscript) and, through it, the package
    assert na._imports(a / kern) == {a / "__init__.py", a / "kernels.py"}
    # by hand: SHA-256 over (relative path, NUL, bytes, NUL) of the three files in path order
    h = hashlib.sha256()
    for rel in ("__init__.py", "kernels.py", "sim/tiers_kernel.py"):
        h.update(rel.encode() + b"\0" + (a / rel).read_bytes() + b"\0")
    assert na.source_stamp(a / kern) == nb.source_stamp(b / kern) == h.hexdigest()   # a copy: the same stamp
    (b / "analysis" / "plan.py").write_text((b / "analysis" / "plan.py").read_text() + "\n# edited\n")
    assert nb.source_stamp(b / kern) == h.hexdigest()                                # not an import: same
    (b / "kernels.py").write_text((b / "kernels.py").read_text() + "\n# edited\n")
    assert nb.source_stamp(b / kern) != h.hexdigest()                                # an inlined helper changed


def test_plain_python_imports_are_hashed_but_not_followed(tmp_path):
    """A kernel's file imports units (no numba): units is in the stamp, what units imports (errors) is not;
    through kernels.py (compiled code) the walk goes on."""
    pkg = _copy(tmp_path)
    nc = _locator_module(pkg, "_nc_plain")
    probe = pkg / "sim" / "_probe.py"
    probe.write_text("from numba import njit\nfrom kvbench.units import format_bytes\n")
    before = nc.source_stamp(probe)
    (pkg / "errors.py").write_text((pkg / "errors.py").read_text() + "\n# edited\n")
    assert nc.source_stamp(probe) == before
    (pkg / "units.py").write_text((pkg / "units.py").read_text() + "\n# edited\n")
    assert nc.source_stamp(probe) != before


def test_imports_are_found_anywhere_relative_or_absolute(tmp_path):
    pkg = _copy(tmp_path)
    nc = _locator_module(pkg, "_nc_rel")
    probe = pkg / "sim" / "_probe.py"
    probe.write_text("from . import policies\nfrom ..units import format_bytes\nimport numpy as np\n"
                     "def f():\n    import kvbench.errors\n    from kvbench.analysis.curves import profile\n")
    assert nc._imports(probe) == {pkg / "__init__.py", pkg / "sim" / "__init__.py", pkg / "sim" / "policies.py",
                                  pkg / "units.py", pkg / "errors.py", pkg / "analysis" / "__init__.py",
                                  pkg / "analysis" / "curves" / "__init__.py", pkg / "analysis" / "curves" / "profile.py"}


def test_the_folder_is_the_package_path_and_the_stamp(tmp_path, monkeypatch):
    monkeypatch.setenv("KVBENCH_NUMBA_CACHE_DIR", str(tmp_path / "nb"))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    from kvbench import numba_cache as nc
    from kvbench.sim import tiers_kernel

    loc = nc.PackageCacheLocator.from_function(tiers_kernel.run_requests.py_func, tiers_kernel.__file__)
    stamp = nc.source_stamp(tiers_kernel.__file__)
    assert loc.get_cache_path() == str(tmp_path / "nb" / "sim" / f"tiers_kernel-{stamp[:20]}")
    assert loc.get_source_stamp() == stamp and Path(loc.get_cache_path()).is_dir()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba-own"))      # the user's choice: numba's locators
    assert nc.PackageCacheLocator.from_function(tiers_kernel.run_requests.py_func, tiers_kernel.__file__) is None
    assert nc.PackageCacheLocator.from_function(test_the_folder_is_the_package_path_and_the_stamp,
                                                __file__) is None         # not kvbench's: numba's locators


_PROBE = ("from kvbench.kernels import u\nu(3)\n"
          "print(sum(u.stats.cache_hits.values()), sum(u.stats.cache_misses.values()))\n")


def _hits_misses(root: Path, env: dict) -> tuple[int, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=root, env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr
    hits, misses = out.stdout.split()
    return int(hits), int(misses)


@pytest.mark.integration
def test_a_copy_of_the_tree_loads_what_another_compiled(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["KVBENCH_NUMBA_CACHE_DIR"] = str(tmp_path / "nb")
    trees = [tmp_path / n for n in ("a", "b", "c")]
    for t in trees:
        _copy(t)
    assert _hits_misses(trees[0], {**env, "PYTHONPATH": str(trees[0])}) == (0, 1)       # compiled
    assert _hits_misses(trees[1], {**env, "PYTHONPATH": str(trees[1])}) == (1, 0)       # another path: loaded
    k = trees[2] / "kvbench" / "kernels.py"
    k.write_text(k.read_text().replace("return np.uint64(i)", "return np.uint64(i + 0)"))
    assert _hits_misses(trees[2], {**env, "PYTHONPATH": str(trees[2])}) == (0, 1)       # changed: compiled
    # NUMBA_CACHE_DIR set: numba's own folder (keyed by the tree's path), nothing in kvbench's
    own = {**env, "PYTHONPATH": str(trees[1]), "NUMBA_CACHE_DIR": str(tmp_path / "own")}
    before = sorted(p.name for p in (tmp_path / "nb").rglob("*"))
    assert _hits_misses(trees[1], own) == (0, 1)
    assert sorted(p.name for p in (tmp_path / "nb").rglob("*")) == before
    assert any((tmp_path / "own").rglob("kernels.u-*.nbi"))


def test_a_new_stamp_prunes_the_modules_folders_left_unwritten_for_two_weeks(tmp_path, monkeypatch):
    monkeypatch.setenv("KVBENCH_NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    from kvbench import numba_cache as nc
    from kvbench.sim import tiers_kernel

    old, recent, other = tmp_path / "sim" / "tiers_kernel-0", tmp_path / "sim" / "tiers_kernel-1", tmp_path / "sim" / "tiers-0"
    for d in (old, recent, other):
        d.mkdir(parents=True)
    ago = nc.time.time() - nc.PRUNE_AFTER_S
    os.utime(old, (ago - 60, ago - 60))
    os.utime(other, (ago - 60, ago - 60))
    os.utime(recent, (ago + 60, ago + 60))
    loc = nc.PackageCacheLocator.from_function(tiers_kernel.run_requests.py_func, tiers_kernel.__file__)
    assert sorted(p.name for p in (tmp_path / "sim").iterdir()) == sorted(
        ["tiers_kernel-1", "tiers-0", Path(loc.get_cache_path()).name])


def _closure_names(outer, inner) -> set[str]:
    """Names ``inner`` loads that ``outer`` binds (imports, assignments, arguments): its closure cells."""
    import ast

    bound = {a.arg for a in outer.args.args + outer.args.kwonlyargs}
    for node in ast.walk(outer):
        if node is inner:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    inner_own = {a.arg for a in inner.args.args + inner.args.kwonlyargs} | {
        n.id for n in ast.walk(inner) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    loaded = {n.id for stmt in inner.body for n in ast.walk(stmt)          # the body: the decorator runs outside
              if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return (loaded & bound) - inner_own


def test_no_cached_kernel_closes_over_a_variable():
    """numba keys a closure's cache entry on the pickled bytes of its cells, which differ in every process: a cached
    kernel defined inside a function that uses one of that function's names (as the FTL kernel once used
    kvbench.kernels.u) compiles again in every process and grows its cache index without bound."""
    import ast

    from tests.conftest import package_asts
    bad = []

    def visit(node, outers, path):
        for child in ast.iter_child_nodes(node):
            if outers and isinstance(child, ast.FunctionDef) and \
                    any("jit" in ast.unparse(d) for d in child.decorator_list):
                for outer in outers:
                    names = _closure_names(outer, child)
                    if names:
                        bad.append(f"{path.name}:{child.lineno} {child.name} closes over {sorted(names)}")
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, outers + [child] if inner else outers, path)

    for path, tree in package_asts():
        visit(tree, [], path)
    assert not bad, bad


def test_the_ftl_kernel_loads_from_the_cache_in_a_second_process(tmp_path):
    """Compiled in one process, the FTL kernel is loaded, not compiled, in the next (the cache index keeps one
    entry per signature)."""
    code = ("import numpy as np\nfrom kvbench.analysis.ftl_kernel import apply\nfrom kvbench.analysis import ftl\n"
            "f = ftl.FtlModel(ftl.FtlConfig(user_bytes=256 * 4096, block_pages=16, op=0.25))\n"
            "f.fill_sequential()\n"
            "print(len(apply.stats.cache_hits), len(apply.stats.cache_misses))\n")
    env = {**os.environ, "KVBENCH_NUMBA_CACHE_DIR": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert first.stdout.split() == ["0", "1"] and second.stdout.split() == ["1", "0"]
