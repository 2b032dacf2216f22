"""Layering rules: the package is a stack of layers, each importing only from below, and the
registry is the single source of truth (no op-name dispatch outside ``ops/``)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from ._support.sources import PKG, parsed, python_files, walked

FORBIDDEN = ("eager", "trace", "backend", "nn", "optim", "compile")
# simplify.py is a table of algebraic identities, each about particular ops by nature.
EXEMPT = {"simplify.py"}

DOC = PKG.parent / "docs" / "architecture.md"


def _layers_from_doc() -> list[tuple[str, ...]]:
    """The layers, lowest first, read from the table under "## Layering" in
    docs/architecture.md (the one place they are written): a unit (a top-level module or
    package of dualgraph) may import from its own layer or a lower one, never a higher one,
    at module level or inside a function."""
    text = DOC.read_text().split("## Layering", 1)[1].split("\n## ", 1)[0]
    layers = []
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        assert int(cells[0]) == len(layers), f"layer rows out of order at {row!r}"
        layers.append(tuple(u.rstrip("/") for u in re.findall(r"`([^`]+)`", cells[1])))
    return layers


LAYERS: list[tuple[str, ...]] = _layers_from_doc()
LAYER_OF = {unit: k for k, units in enumerate(LAYERS) for unit in units}

# Deliberate upward imports, as (importing unit, imported unit): each says why.
ALLOWED_UPWARD = {
    # The kernel cache header records dualgraph.__version__, read lazily on first write
    # (a top-level import would be circular: the package imports the backend).
    ("backend", "__init__"),
    # Eager mode's compiled routines (`eager/routines.py`) import the backend on their
    # first call, from a large enough operand: an eager program without one never does.
    ("eager", "backend"),
}


def _imports(path: Path) -> list[str]:
    """Every module a file imports (top level or inside functions), relative ones resolved."""
    return [mod for mod, _ in _imports_at(path)]


@functools.cache
def _imports_at(path: Path) -> list[tuple[str, int]]:
    """(module, line) for every import in a file, top level or inside functions; for
    ``from m import a`` both ``m`` and ``m.a`` (``a`` may be a submodule)."""
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    pkg_parts = parts[:-1]
    out = []
    for node in walked(path):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg_parts[: len(pkg_parts) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if node.module:  # `from . import x` imports x, not the package's __init__
                out.append((mod, node.lineno))
            out += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
    return out


def _unit(module: str) -> str | None:
    """The layer unit of a dualgraph module name (``dualgraph.ops.registry`` -> ``ops``;
    ``dualgraph`` itself and names defined in its ``__init__`` -> ``__init__``)."""
    parts = module.split(".")
    if parts[0] != "dualgraph":
        return None
    if len(parts) == 1 or parts[1] not in LAYER_OF:
        return "__init__"
    return parts[1]


def _unit_of_file(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("").parts
    return rel[0]


@functools.cache
def _edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for every import between two units (the
    callers only read it)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in python_files():
        src = _unit_of_file(path)
        for mod, line in _imports_at(path):
            dst = _unit(mod)
            if dst is None or dst == src:
                continue
            where = edges.setdefault((src, dst), [])
            loc = f"{path.relative_to(PKG.parent)}:{line}"
            if loc not in where:
                where.append(loc)
    return edges


def test_every_unit_has_a_layer():
    """A new top-level module or package must be placed in LAYERS."""
    units = {p.stem if p.is_file() else p.name for p in PKG.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert units - set(LAYER_OF) == set(), "add these to the layer table in docs/architecture.md"
    assert set(LAYER_OF) - units == set(), "the layer table names units that do not exist"


def test_no_module_imports_from_a_higher_layer():
    bad = []
    for (src, dst), where in sorted(_edges().items()):
        if LAYER_OF[dst] > LAYER_OF[src] and (src, dst) not in ALLOWED_UPWARD:
            bad += [f"{w}: {src} (layer {LAYER_OF[src]}) imports {dst} (layer "
                    f"{LAYER_OF[dst]})" for w in where]
    assert not bad, "\n".join(bad)


def test_the_upward_allowlist_is_still_needed():
    """An allowlisted edge that no longer exists must leave the list."""
    stale = ALLOWED_UPWARD - set(_edges())
    assert not stale, f"no longer imported, remove from ALLOWED_UPWARD: {sorted(stale)}"


def test_no_import_cycles_between_units():
    graph: dict[str, set[str]] = {}
    for src, dst in _edges():
        if (src, dst) not in ALLOWED_UPWARD:
            graph.setdefault(src, set()).add(dst)
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(unit: str, path: list[str]) -> None:
        state[unit] = 1
        for nxt in sorted(graph.get(unit, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [unit, nxt]))
            elif nxt not in state:
                visit(nxt, path + [unit])
        state[unit] = 2

    for unit in sorted(graph):
        if unit not in state:
            visit(unit, [])
    assert not cycles, "\n".join(cycles)


def test_the_checks_see_lazy_imports():
    """An import inside a function counts like one at the top of the file."""
    f = PKG / "compile" / "specialize.py"
    lazy = [m for m, _ in _imports_at(f) if m.startswith("dualgraph.backend")]
    assert lazy, "compile/specialize.py's lazy import of the backend is not seen"


@pytest.mark.parametrize("layer", ["ir", "ops"])
def test_ir_and_ops_do_not_import_modes_or_backends(layer: str) -> None:
    bad = []
    for path in python_files(PKG / layer):
        for mod in _imports(path):
            parts = mod.split(".")
            if parts[0] == "dualgraph" and len(parts) > 1 and parts[1] in FORBIDDEN:
                bad.append(f"{path.relative_to(PKG.parent)} imports {mod}")
    assert not bad, "\n".join(bad)


def test_no_op_name_dispatch_outside_the_registry() -> None:
    """Passes and engines read traits; nothing outside ops/ asks which op a node is, in any
    spelling: ``op == "mul"``, ``op.name == "mul"``, ``op is OPS["mul"]``,
    ``op in ("mul", "add")``, ``op.startswith("mul")``, ``{"mul": ...}[op]`` or
    ``match op: case "mul"``."""
    names = _op_names()
    bad = []
    for path in python_files():
        if "ops" in path.relative_to(PKG).parts or path.name in EXEMPT:
            continue
        bound = _bound_op_names(walked(path), names)
        rel = str(path.relative_to(PKG.parent))
        for node in walked(path):
            if _names_an_op(node, names, bound):
                where = f"{rel}:{node.lineno}: {ast.unparse(node)}"
                if (rel, ast.unparse(node)) not in NAME_TABLES:
                    bad.append(where)
    assert not bad, "\n".join(bad)


# Backend tables of op names, each a property of that backend's code for those ops (so not
# a registry trait), as (file, the test): each says why.
NAME_TABLES = {
    # The ops whose Numba scalar expression may come out in a wider dtype than the node's
    # (an integer power, scipy's special functions): a fact about the Numba functions the
    # scalar builders call.
    ("dualgraph/backend/numba/lowerings/__init__.py", "node.op in WIDENING"),
    # Whether the backend has a scalar builder for an op: a lookup in its lowering table,
    # which is keyed by op name by design (a second backend is a second table).
    ("dualgraph/backend/numba/lowerings/__init__.py", "op.name in SCALAR"),
    # The one pattern the batched product's strided result rewrites (`plan_joins`): which
    # ops play which part in it is a fact about that lowering.
    ("dualgraph/backend/numba/codegen.py", "_JOIN_ROLE.get(n.op)"),
}


def _bound_op_names(nodes: Iterable[ast.AST], names: set) -> dict[str, set]:
    """Names a module binds (``WIDE = frozenset({"pow"})``) to a collection of op names, so
    ``n.op in WIDE`` is seen as the dispatch it is; ``nodes``: every node of the module."""
    bound = {}
    for node in nodes:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and node.value is not None:
            value = node.value
            if isinstance(value, ast.Dict):  # a table keyed by op names
                value = ast.Set([k for k in value.keys if k is not None])
            found = _literal_names(value) & names
            if found:
                bound[target.id] = found
    return bound


def _is_op(expr: ast.AST, bare: bool = True) -> bool:
    """``expr`` reads a node's op or an op's name (``n.op``, ``op``, ``op.name``; with
    ``bare``, also a plain ``name``/``op_name``, as a loop over a view chain's
    ``(name, attrs)`` spells it: compared with an op's name, it asks which op it is)."""
    text = ast.unparse(expr)
    return (text in ("op", "op.name") or text.endswith((".op", ".op.name", ".op_name"))
            or (bare and text in ("name", "op_name")))


def _literal_names(expr: ast.AST) -> set:
    """The string constants ``expr`` spells out: one, or a tuple/list/set/frozenset of them."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.Call) and ast.unparse(expr.func) in ("frozenset", "set", "tuple"):
        return set().union(*(_literal_names(a) for a in expr.args)) if expr.args else set()
    if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literal_names(e) for e in expr.elts)) if expr.elts else set()
    if isinstance(expr, ast.Subscript) and ast.unparse(expr.value) == "OPS":
        return _literal_names(expr.slice)  # the registry entry of a named op
    return set()


def _names_an_op(node: ast.AST, names: set, bound: dict | None = None) -> bool:
    """Whether ``node`` asks which op a node is; ``bound``: the module's names bound to
    collections of op names (`_bound_op_names`)."""
    bound = bound or {}

    def literal(x: ast.AST) -> set:
        if isinstance(x, ast.Name) and x.id in bound:
            return bound[x.id]
        return _literal_names(x)

    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        return any(_is_op(x) for x in sides) and any(
            literal(x) & names for x in sides if not _is_op(x))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        # A prefix need not be an op's name, so a bare ``name`` is not taken for an op here.
        return (node.func.attr in ("startswith", "endswith") and _is_op(node.func.value, False)
                and any(_literal_names(a) for a in node.args))
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
        return _is_op(node.slice) and any(_literal_names(k) & names
                                          for k in node.value.keys if k is not None)
    if isinstance(node, ast.Match):
        return _is_op(node.subject)
    return False


def _op_names() -> set[str]:
    from dualgraph.ops import OPS

    return set(OPS)


def test_ir_imports_nothing_from_ops() -> None:
    """ops/ is built on ir/ (nodes, literals); the IR gets the op table injected instead."""
    bad = [f"{path.relative_to(PKG.parent)} imports {mod}"
           for path in python_files(PKG / "ir") for mod in _imports(path)
           if mod.split(".")[:2] == ["dualgraph", "ops"]]
    assert not bad, "\n".join(bad)


def test_the_backend_decides_on_structure_not_text() -> None:
    """No backend module searches or rewrites text with regular expressions: decisions are
    made on the kernel IR (`backend/kir.py`), and `backend/numba/printer.py` writes text
    last."""
    users = sorted(str(path.relative_to(PKG / "backend"))
                   for path in (PKG / "backend").rglob("*.py")
                   if any(m.split(".")[0] in ("re", "regex") for m in _imports(path)))
    assert not users, f"regular expressions in the backend: {users}"


def _lowerings() -> dict:
    from dualgraph.backend.numba.lowerings import LOWER

    return LOWER


def test_lowerings_are_annotated_to_return_kernel_ir() -> None:
    """Every registered lowering says it returns a `kir.Block` (never source lines)."""
    bad = sorted(f"{name}: {fn.__module__}.{fn.__name__} -> {fn.__annotations__.get('return')}"
                 for name, fn in _lowerings().items()
                 if fn.__annotations__.get("return") not in ("kir.Block", "Block"))
    assert not bad, "\n".join(bad)


def _sample_nodes() -> dict:
    """A node of each kernel op from the traced forward graphs of the op cases, with
    the values of its inputs."""
    from dualgraph.ops import OPS

    from ._support.graphs import traced_cases
    from .ops.cases import CASES

    lower, found = _lowerings(), {}
    for _, _, graph in traced_cases(c for c in CASES if c.op in lower and c.op not in found):
        for n in graph.nodes:
            if n.op in lower and n.op not in found and n.op in OPS:
                found[n.op] = n
    return found


def test_every_lowering_builds_kernel_ir() -> None:
    """Run every registered lowering on a sample node (literal inputs as kernel IR
    constants): each returns a `kir.Block` that `kir.verify` accepts."""
    from dualgraph.backend import kir
    from dualgraph.backend.numba.lowerings import Arg, ishape
    from dualgraph.ir.graph import Node

    samples = _sample_nodes()
    assert set(_lowerings()) <= set(samples), \
        f"no op case traces {sorted(set(_lowerings()) - set(samples))}"
    bad = []
    for name, node in sorted(samples.items()):
        args = [Arg(kir.Buffer(f"x{k}", ishape(i), i.dtype, kir.ARG, "A"))
                if isinstance(i, Node) else kir.const(i) for k, i in enumerate(node.inputs)]
        built = _lowerings()[name](node, args, "r")
        if not isinstance(built, kir.Block):
            bad.append(f"{name} returned {type(built).__name__}")
            continue
        kir.verify(built, [a.buf for a in args if isinstance(a, Arg)])
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("snippet, flagged", [
    ('n.op == "mul"', True),
    ('op != "add"', True),
    ('n.op in ("mul", "add")', True),
    ('n.op in frozenset({"mul"})', True),
    ('n.op.startswith("max_pool")', True),
    ('{"mul": 1, "add": 2}[n.op]', True),
    ('n.op == "input"', False),  # graph inputs and constants are not ops
    ('n.op in LOOP_OPS', False),  # a set named elsewhere: read through its traits
    ('x.name == "mul"', False),
    ('name == "broadcast_to"', True),
    ('op_name in ("mul", "add")', True),
    ('name == "weight"', False),  # not an op's name
    ('op.name == "reshape"', True),
    ('node.op.name != "mul"', True),
    ('op is OPS["reshape"]', True),
    ('n.op in (OPS["mul"], OPS["add"])', True),
    ('op is OPS[name]', False),
])
def test_the_dispatch_check_sees_every_spelling(snippet: str, flagged: bool) -> None:
    node = ast.parse(snippet, mode="eval").body
    assert _names_an_op(node, _op_names()) is flagged


def test_the_dispatch_check_sees_names_bound_to_op_names() -> None:
    """A module-level set (or table) of op names, tested against a node's op, is dispatch
    too; a set of other names is not."""
    tree = ast.parse('WIDE = frozenset({"pow", "lgamma"})\nKEYS = {"mul": 1}\n'
                     'OTHER = ("weight", "bias")\n'
                     'a = n.op in WIDE\nb = node.op not in KEYS\nc = n.op in OTHER\n')
    names = _op_names()
    bound = _bound_op_names(ast.walk(tree), names)
    flagged = [ast.unparse(x) for x in ast.walk(tree) if _names_an_op(x, names, bound)]
    assert flagged == ["n.op in WIDE", "node.op not in KEYS"]


def test_the_dispatch_check_sees_match_statements() -> None:
    tree = ast.parse('match n.op:\n    case "mul":\n        pass\n')
    assert any(_names_an_op(x, _op_names()) for x in ast.walk(tree))


# ------------------------------------------------------------- declared hooks on modes
MODE_GETTERS = ("current_trace", "current_mode")
PROBES = ("getattr", "hasattr")


def _mode_classes() -> set[str]:
    """The names of `dualgraph.modes.Mode` and every subclass of it in the package."""
    import dualgraph  # noqa: F401  (imports every mode)
    import dualgraph.compile.capture  # noqa: F401
    from dualgraph.modes import Mode

    found, todo = set(), [Mode]
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return found


def _is_mode_getter(expr: ast.AST | None) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    f = expr.func  # the last name of ``a.b.current_trace``, without unparsing the common cases
    last = (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute)
            else ast.unparse(f).rpartition(".")[2])
    return last in MODE_GETTERS


def _mode_params(fn: ast.FunctionDef | ast.AsyncFunctionDef, modes: set[str]) -> set[str]:
    """The parameters of ``fn`` annotated with a mode class."""
    args = fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs
    return {a.arg for a in args
            if a.annotation and set(re.findall(r"\w+", ast.unparse(a.annotation))) & modes}


def _mode_probes(tree: ast.AST, modes: set[str]) -> list[ast.Call]:
    """``getattr``/``hasattr`` calls on a mode: on ``current_trace()`` or ``current_mode()``
    itself, on a name bound from one anywhere in the module, or on a parameter annotated
    with a mode class of a function the call is in. One pass over the tree (a walk per
    function would walk nested code again for each function around it)."""
    bound = {t.id for n in ast.walk(tree)
             if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
             and _is_mode_getter(n.value)
             for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
             if isinstance(t, ast.Name)}
    found = []

    def visit(node: ast.AST, params: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = params | _mode_params(node, modes)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in PROBES and node.args
                and (_is_mode_getter(node.args[0])
                     or isinstance(node.args[0], ast.Name)
                     and (node.args[0].id in bound or node.args[0].id in params))):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child, params)

    visit(tree, frozenset())
    return found


def test_no_getattr_probing_of_a_mode() -> None:
    """A hook a lower layer calls on the current mode is declared in the `Mode` protocol
    with a default on the base mode (``note_training``, ``guard_value``, ...), and what a
    compiled call's trace records is read from its own class: no code asks a mode with
    ``getattr``/``hasattr`` whether it happens to have something."""
    modes = _mode_classes()
    bad = sorted({f"{path.relative_to(PKG.parent)}:{n.lineno}: {ast.unparse(n)}"
                  for path in python_files()
                  for n in _mode_probes(parsed(path), modes)})
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("snippet, flagged", [
    ('getattr(current_trace(), "note_training", None)', True),
    ('hasattr(modes.current_mode(), "guard_value")', True),
    ('ctx = current_trace()\nf = getattr(ctx, "note_attr", None)', True),
    ('def f(ctx: TraceContext):\n    return getattr(ctx, "reads", {})', True),
    ('def f(ctx: "CallTraceContext | None"):\n    return getattr(ctx, "runtime", ())', True),
    ('def f(m):\n    return getattr(m, "_fn", "")', False),  # not known to be a mode
    ('getattr(module, "training", True)', False),
])
def test_the_probe_check_sees_every_spelling(snippet: str, flagged: bool) -> None:
    assert bool(_mode_probes(ast.parse(snippet), _mode_classes())) is flagged
