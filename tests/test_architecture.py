"""Layering rules that keep the registry the single source of truth."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "dualgraph"
FORBIDDEN = ("eager", "trace", "backend", "nn", "optim", "compile")
# simplify.py is a table of algebraic identities, each about particular ops by nature.
EXEMPT = {"simplify.py"}


def _imports(path: Path) -> list[str]:
    """Every module a file imports (top level or inside functions), relative ones resolved."""
    tree = ast.parse(path.read_text())
    pkg_parts = path.relative_to(PKG.parent).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg_parts[: len(pkg_parts) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names]
    return out


@pytest.mark.parametrize("layer", ["ir", "ops"])
def test_ir_and_ops_do_not_import_modes_or_backends(layer: str) -> None:
    bad = []
    for path in sorted((PKG / layer).rglob("*.py")):
        for mod in _imports(path):
            parts = mod.split(".")
            if parts[0] == "dualgraph" and len(parts) > 1 and parts[1] in FORBIDDEN:
                bad.append(f"{path.relative_to(PKG.parent)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_no_op_name_dispatch_outside_the_registry() -> None:
    """Passes and engines read traits; nothing outside ops/ says `if op == "mul"`."""
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if "ops" in path.relative_to(PKG).parts or path.name in EXEMPT:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in _op_names() for c in node.comparators
            ):
                left = ast.unparse(node.left)
                if left.endswith(".op") or left == "op":
                    bad.append(f"{path.relative_to(PKG.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, "\n".join(bad)


def _op_names() -> set[str]:
    from dualgraph.ops import OPS

    return set(OPS)


def test_ir_imports_nothing_from_ops() -> None:
    """ops/ is built on ir/ (nodes, literals); the IR gets the op table injected instead."""
    bad = [f"{path.relative_to(PKG.parent)} imports {mod}"
           for path in sorted((PKG / "ir").rglob("*.py")) for mod in _imports(path)
           if mod.split(".")[:2] == ["dualgraph", "ops"]]
    assert not bad, "\n".join(bad)
