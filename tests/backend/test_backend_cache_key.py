"""The backend's own cached Numba functions are keyed on the source of every backend module
holding compiled code: an edit to a module a function compiles in (an inlined helper, an
intrinsic) builds the function again, though its own file did not change."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import dualgraph
from dualgraph.backend.numba import cache_key

from .._support.sources import parsed, python_files, walked

_PACKAGE = Path(dualgraph.__file__).parent
_BACKEND = Path(cache_key.__file__).parent
# What makes Numba compile a function: as a decorator, or called on a function at module level.
_COMPILERS = {"njit", "jit", "cfunc", "intrinsic", "overload", "overload_method",
              "register_jitable", "generated_jit", "vectorize", "cached_njit", "cached_cfunc"}


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _defines_compiled_code(path: Path) -> bool:
    for node in walked(path):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                _name(d) in _COMPILERS for d in node.decorator_list):
            return True
    # ``gemm = numba.njit(...)(impl)``: a compiled function made at module level.
    return any(isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and _name(node.value.func) in _COMPILERS for node in parsed(path).body)


def test_every_backend_module_with_compiled_code_is_in_the_digest():
    compiled = {p.stem for p in _BACKEND.glob("*.py")
                if _defines_compiled_code(p)}
    assert compiled == set(cache_key.SOURCES)
    assert all(os.path.exists(f) for f in cache_key.source_files())


def test_every_cached_function_of_the_backend_is_keyed_on_its_sources():
    # However its options were spelled (``numba.njit(**options)`` included).
    import importlib

    from numba.core import caching

    plain = []
    for name in cache_key.SOURCES:
        module = importlib.import_module(f"dualgraph.backend.numba.{name}")
        for attr, obj in vars(module).items():
            cache = getattr(obj, "_cache", None)
            if (isinstance(cache, caching.Cache)
                    and not isinstance(cache, cache_key.KeyedCache)):
                plain.append(f"{name}.{attr}")
    assert plain == []


def test_the_package_asks_numba_for_no_disk_cache_of_its_own():
    # Numba's own ``cache=True`` would key a function on its file alone.
    plain = []
    for path in python_files(_PACKAGE):
        for node in walked(path):
            if (isinstance(node, ast.Call) and _name(node) in _COMPILERS
                    and any(k.arg == "cache" and not (isinstance(k.value, ast.Constant)
                                                      and k.value.value is False)
                            for k in node.keywords)):
                plain.append(f"{path.relative_to(_PACKAGE)}:{node.lineno}")
    assert plain == []


# A small package laid out as the backend is: its own copy of the keying module, whose
# digest covers ``dep`` (an inlined helper) and ``user`` (cached functions calling it).
_DEP = "import numba\n\n\n@numba.njit(inline='always')\ndef f():\n    return {}\n"
_USER = """\
from numba import types

from . import dep
from .cache_key import cached_cfunc, cached_njit


@cached_njit()
def g():
    return dep.f()


@cached_cfunc(types.int64())
def h():
    return dep.f()
"""
_RUN = """\
from pkg import user
g = user.g
print(g(), g.stats.cache_hits.get((), 0), user.h.ctypes(), user.h.cache_hits)
"""


def test_an_edited_dependency_builds_its_dependents_again(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = Path(cache_key.__file__).read_text()
    start = source.index("SOURCES = (")
    end = source.index(")", start) + 1
    (pkg / "cache_key.py").write_text(f"{source[:start]}SOURCES = ('dep', 'user'){source[end:]}")
    (pkg / "user.py").write_text(_USER)
    (pkg / "dep.py").write_text(_DEP.format(1))
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PYTHONDONTWRITEBYTECODE="1")
    env.pop("NUMBA_CACHE_DIR", None)  # Numba's files go beside the package, in tmp_path

    def run() -> list[str]:
        return subprocess.run([sys.executable, "-c", _RUN], env=env, cwd=tmp_path, check=True,
                              capture_output=True, text=True).stdout.split()

    assert run() == ["1", "0", "1", "0"]  # compiled, then saved
    assert run() == ["1", "1", "1", "1"]  # loaded
    (pkg / "dep.py").write_text(_DEP.format(20))
    assert run() == ["20", "0", "20", "0"]  # user.py is unchanged: compiled again
    assert run() == ["20", "1", "20", "1"]
