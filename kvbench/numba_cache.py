"""Where numba caches kvbench's compiled kernels: once per machine, not once per checkout.

numba's default cache lives in ``__pycache__`` beside each source file, and with ``NUMBA_CACHE_DIR`` in a
folder named by a hash of the source folder's absolute path; either way a fresh checkout, a worktree, a CI
runner's clone or a copy of the tree compiles every kernel again (the tier simulation alone takes 20-35 CPU
seconds, minutes on a loaded machine). This locator keys a kernel by what it is made of instead:

- the folder is ``<root>/<path inside the kvbench package>/<module>-<stamp>``, with ``<root>``
  ``$KVBENCH_NUMBA_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvbench/numba``, else ``~/.cache/kvbench/numba``;
- ``<stamp>`` is a SHA-256 over the kernel's source file, every kvbench module it imports and, through the
  imported modules that hold compiled code, theirs (parsed, not executed). numba's own index keys on the
  function's bytecode and argument types but not on what it calls or inlines from other files
  (``kvbench.kernels.u``) or the constants it imports: a copy of the tree with a changed helper must not load a
  kernel compiled against the old one, and with these files in the stamp it cannot. Two trees with different versions of a file keep two folders side by side, so switching
  branches does not recompile what was compiled before.

``kvbench/__init__.py`` installs it through ``NUMBA_CACHE_LOCATOR_CLASSES`` (numba's hook in
``numba.core.caching``, read when a cached function is decorated; a numba without it ignores the variable and
caches in ``__pycache__`` as before) unless the user chose ``NUMBA_CACHE_DIR`` or a locator list of their own;
functions outside the kvbench package, or a cache folder that cannot be written, fall through to numba's
locators. Folders of a module's other stamps not written to for :data:`PRUNE_AFTER_S` are removed when a new
stamp's folder is made; removing the whole cache folder is always safe (the kernels compile again).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import shutil
import time
from pathlib import Path

from numba.core.caching import _CacheLocator

PACKAGE = Path(__file__).resolve().parent
PRUNE_AFTER_S = 14 * 86400


def cache_root() -> Path:
    d = os.environ.get("KVBENCH_NUMBA_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvbench" / "numba"


def _module_file(name: str) -> Path | None:
    """The source file of kvbench module ``name`` (dotted), or None when it is not one of the package's."""
    parts = name.split(".")
    if parts[0] != PACKAGE.name:
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _imports(path: Path) -> set[Path]:
    """The kvbench source files ``path`` imports (anywhere in it: top level or inside a function)."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    here = path.relative_to(PACKAGE).with_suffix("").parts
    pkg = [PACKAGE.name, *here[:-1]]                                     # the package `from .` is relative to
    out: set[Path] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - (node.level - 1)] if node.level else []
            mod = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [mod, *(f"{mod}.{a.name}" for a in node.names)]     # `from kvbench.sim import tiers_kernel`
        for n in names:
            parts = n.split(".")
            for i in range(1, len(parts) + 1):                           # a package's __init__ runs too
                f = _module_file(".".join(parts[:i]))
                if f is not None:
                    out.add(f)
    return out


@functools.lru_cache(maxsize=None)
def _file(path: Path, mtime_ns: int, size: int) -> tuple[bytes, frozenset[Path]]:
    """A source file's bytes and the kvbench files it imports (memoized per file version)."""
    return path.read_bytes(), frozenset(_imports(path))


def _read(p: Path) -> tuple[bytes, frozenset[Path]]:
    st = p.stat()
    return _file(p, st.st_mtime_ns, st.st_size)


def source_stamp(py_file: str | os.PathLike) -> str:
    """SHA-256 over ``py_file``, the kvbench modules it imports, and theirs while they hold compiled code, each
    as (path in the package, bytes). A kernel reads constants from what its file imports and compiles the
    jitted functions it calls from theirs; a module without numba is hashed but not followed, so that an edit
    of plain Python far away does not recompile a kernel."""
    root = Path(py_file).resolve()
    seen: dict[Path, bytes] = {}
    todo = [root]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen[p], deps = _read(p)
        if p == root or b"numba" in seen[p]:
            todo.extend(deps - seen.keys())
    h = hashlib.sha256()
    for p in sorted(seen):
        h.update(p.relative_to(PACKAGE).as_posix().encode() + b"\0" + seen[p] + b"\0")
    return h.hexdigest()


def _prune(folder: Path) -> None:
    """Remove the module's folders of other stamps that nothing has written to for PRUNE_AFTER_S."""
    stem = folder.name.rsplit("-", 1)[0]
    now = time.time()
    for d in folder.parent.glob(f"{stem}-*"):
        try:
            if d != folder and now - d.stat().st_mtime > PRUNE_AFTER_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


class PackageCacheLocator(_CacheLocator):
    """numba cache locator for functions defined in the kvbench package (see the module docstring)."""

    def __init__(self, py_func, py_file):
        path = Path(py_file).resolve()
        self._lineno = py_func.__code__.co_firstlineno
        self._stamp = source_stamp(path)
        rel = path.relative_to(PACKAGE)
        self._cache_path = str(cache_root().joinpath(*rel.parts[:-1], f"{rel.stem}-{self._stamp[:20]}"))

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        return self._stamp

    def get_disambiguator(self):
        return str(self._lineno)

    def ensure_cache_path(self):
        fresh = not os.path.isdir(self._cache_path)
        super().ensure_cache_path()
        if fresh:
            _prune(Path(self._cache_path))

    @classmethod
    def from_function(cls, py_func, py_file):
        if os.environ.get("NUMBA_CACHE_DIR"):          # the user's explicit choice wins
            return None
        try:
            Path(py_file).resolve().relative_to(PACKAGE)
        except (ValueError, OSError):
            return None                                 # not kvbench's: numba's own locators
        try:
            self = cls(py_func, py_file)
            self.ensure_cache_path()
        except (OSError, SyntaxError):
            return None
        return self
