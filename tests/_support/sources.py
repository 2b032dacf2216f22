"""Python source files as syntax trees, parsed and walked once per test process.

The static checks of the package (layering, dispatch, cache keys, graph metadata) read every
file of ``dualgraph/``: parsing them all is seconds of CPU and walking the trees about a
second more, so each check doing its own would repeat that work several times a run. A
file's tree is cached while its modification time and size are unchanged. Callers must not
modify the trees they get.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "dualgraph"


def python_files(under: Path = PKG) -> list[Path]:
    """Every ``.py`` file under ``under`` (the package by default), sorted."""
    return sorted(under.rglob("*.py"))


def parsed(path: Path) -> ast.Module:
    """The syntax tree of the file at ``path``."""
    return _trees(path)[0]


def walked(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the file's tree, in `ast.walk` order."""
    return _trees(path)[1]


def _trees(path: Path) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    stat = Path(path).stat()
    return _parse(str(path), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _parse(path: str, mtime_ns: int, size: int) -> tuple[ast.Module, tuple[ast.AST, ...]]:
    tree = ast.parse(Path(path).read_text())
    return tree, tuple(ast.walk(tree))
