"""Only `dualgraph/eager/` touches the private state of tensors and tape nodes.

Everything else (compile, compare, optim, nn, testing, the tracer) goes through
`dualgraph.eager.internal`, so how a tensor stores its array, gradient and version can
change in one package.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "dualgraph"

# Listed by name: other classes have private attributes of their own (the tracer's `_ctx`,
# a module's `_parameters`), which are no concern of this test.
TENSOR_PRIVATES = {"_data", "_rg", "_grad", "_version", "_node", "_input_node"}
TAPE_NODE_PRIVATES = {"_saved", "_versions", "_out", "_out_version", "_freed", "_hooks",
                      "_retain", "_def", "_var"}
PRIVATES = TENSOR_PRIVATES | TAPE_NODE_PRIVATES
# A class deriving from one of these inherits the privates above: its `self._data` counts.
OWNERS = {"Tensor", "Parameter", "TensorOps", "Function", "AccumulateGrad"}
ATTR_FUNCTIONS = {"getattr", "setattr", "hasattr", "delattr"}


class _Finder(ast.NodeVisitor):
    """Collects every read or write of a listed private attribute."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.own_class = [False]  # inside a class with private attributes of its own
        self.found: list[str] = []

    def visit_ClassDef(self, node: ast.ClassDef) -> None:  # noqa: N802 - ast's name
        bases = {ast.unparse(b).split(".")[-1] for b in node.bases}
        self.own_class.append(not bases & OWNERS)
        self.generic_visit(node)
        self.own_class.pop()

    def visit_Attribute(self, node: ast.Attribute) -> None:  # noqa: N802
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        if node.attr in PRIVATES and not (on_self and self.own_class[-1]):
            self._add(node, f".{node.attr}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:  # noqa: N802
        name = ast.unparse(node.func).split(".")[-1]
        if name in ATTR_FUNCTIONS | {"__setattr__", "__getattribute__"}:
            for a in node.args:
                if isinstance(a, ast.Constant) and a.value in PRIVATES:
                    self._add(node, f"{name}(..., {a.value!r})")
        self.generic_visit(node)

    def _add(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.where}:{node.lineno}: {what}")


def private_uses(root: Path) -> list[str]:
    """Every use of a listed private attribute in ``root`` outside ``root/eager``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "eager":
            continue
        finder = _Finder(f"dualgraph/{rel}")
        finder.visit(ast.parse(path.read_text()))
        found += finder.found
    return found


def test_no_tensor_privates_outside_eager() -> None:
    found = private_uses(PKG)
    assert not found, ("use dualgraph.eager.internal instead of a tensor's or tape node's "
                       "private attributes:\n" + "\n".join(found))


def test_the_check_sees_reads_writes_and_getattr(tmp_path: Path) -> None:
    (tmp_path / "eager").mkdir()
    (tmp_path / "eager" / "tensor.py").write_text("t._data = 1\n")  # eager/ may
    (tmp_path / "user.py").write_text(
        "a = t._data\n"
        "t._grad = None\n"
        "hasattr(x, '_rg')\n"
        "fn._saved\n"
        "class Own:\n"
        "    def f(self):\n"
        "        return self._out, self._ctx\n"  # its own attributes: fine
        "class P(Tensor):\n"
        "    def f(self):\n"
        "        return self._version\n"
        "ctx._ctx, t.grad, t.shape\n"
    )
    assert private_uses(tmp_path) == [
        "dualgraph/user.py:1: ._data",
        "dualgraph/user.py:2: ._grad",
        "dualgraph/user.py:3: hasattr(..., '_rg')",
        "dualgraph/user.py:4: ._saved",
        "dualgraph/user.py:10: ._version",
    ]


def private_names_across_units(root: Path) -> list[str]:
    """Every private name (``_x``, not dunders) one unit of ``root`` imports from another
    unit (``from ..compare import _size``), or reads off another unit's module
    (``cache._KERNELS``). A unit is a top-level module or package of ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("").parts
        here = rel[0] if len(rel) > 1 or rel[0] != "__init__" else "__init__"
        pkg = rel[:-1]
        tree = ast.parse(path.read_text())
        module_unit: dict[str, str] = {}  # local name of an imported module -> its unit
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = list(pkg[: len(pkg) - node.level + 1])
                target = base + (node.module.split(".") if node.module else [])
                for a in node.names:
                    unit = (target + [a.name])[0]
                    if a.name.startswith("_") and not a.name.startswith("__") and unit != here:
                        found.append(f"dualgraph/{'/'.join(rel)}.py:{node.lineno}: "
                                     f"imports {a.name} from {'.'.join(target)}")
                    module_unit[a.asname or a.name] = unit
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and module_unit.get(node.value.id, here) != here
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"dualgraph/{'/'.join(rel)}.py:{node.lineno}: "
                             f"{node.value.id}.{node.attr}")
    return found


def test_no_private_names_cross_units() -> None:
    found = private_names_across_units(PKG)
    assert not found, ("make the name public (and documented) where it is defined, or keep "
                       "its use inside its own package:\n" + "\n".join(found))


def test_the_name_check_sees_imports_and_module_attributes(tmp_path: Path) -> None:
    (tmp_path / "backend").mkdir()
    (tmp_path / "backend" / "cache.py").write_text("_KERNELS = {}\n")
    (tmp_path / "backend" / "user.py").write_text("from .cache import _KERNELS\n")  # own unit
    (tmp_path / "compare.py").write_text(
        "from .backend import cache\n"
        "from .backend.cache import _KERNELS\n"
        "cache._KERNELS, cache.loaded, cache.__name__\n"
    )
    assert private_names_across_units(tmp_path) == [
        "dualgraph/compare.py:2: imports _KERNELS from backend.cache",
        "dualgraph/compare.py:3: cache._KERNELS",
    ]
