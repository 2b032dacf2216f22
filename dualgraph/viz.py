"""Pictures of tapes and graphs: Graphviz DOT source, rendering, torchviz's ``make_dot``.

Nodes made by the same line of user code share a colour, in every picture, so an eager
tape and its optimized graph can be read side by side; fused kernels are clusters.
Drawing needs the ``graphviz`` Python package (``pip install 'dualgraph[viz]'``) and the
Graphviz ``dot`` program; without them the DOT source is still there (``.source``, or
written next to the picture by `render`), and drawing raises one error naming both.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from .ir.graph import Graph, Node, format_attr, format_const

_PALETTE = ["#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7",
            "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"]


def _colour(loc: str | None) -> str:
    if not loc:
        return "white"
    # By line number (offset per file): neighbouring lines, the ones a reader compares,
    # always differ, and the same line gets the same colour in every drawing.
    name, _, line = os.path.basename(loc).rpartition(":")
    offset = int(hashlib.md5(name.encode()).hexdigest(), 16)
    n = int(line) if line.isdigit() else int(hashlib.md5(line.encode()).hexdigest(), 16)
    return _PALETTE[(offset + n) % len(_PALETTE)]


def _label(n: Node) -> str:
    if n.op == "const":
        return f"const {format_const(n.attrs['value'])}\\n{n.type_str}".replace('"', "'")
    attrs = {k: v for k, v in n.attrs.items() if k != "body" and not k.startswith("_")}
    extra = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(attrs.items()))
    where = f"\\n{os.path.basename(n.loc)}" if n.loc else ""
    return f"{n.op}{'[' + extra + ']' if extra else ''}\\n{n.type_str}{where}".replace('"', "'")


def to_dot(x: Any, name: str = "dualgraph", params: dict | None = None) -> str:
    """DOT source for a `Graph`, or for the tape behind a tensor (via `dg.graph_of`).

    ``params`` (name -> tensor) labels the leaves that are those tensors, as torchviz does.
    """
    if not isinstance(x, Graph):
        from .eager.export import graph_of

        x = graph_of(x)
    names = {id(t): k for k, t in (params or {}).items()}
    lines = [f'digraph "{name}" {{', "  rankdir=TB;",
             '  node [fontname="monospace", style=filled, fillcolor=white];']
    counter = [0]

    def input_label(n: Node) -> str:
        var = n.attrs.get("_variable")
        t = var() if callable(var) else None
        if t is not None and id(t) in names:
            return f"{names[id(t)]}\\n{n.type_str}"
        return f"input\\n{n.type_str}"

    def emit(g: Graph, prefix: str, indent: str) -> dict[int, str]:
        ids: dict[int, str] = {}
        for n in g.inputs:
            ids[id(n)] = f"{prefix}n{counter[0]}"
            counter[0] += 1
            lines.append(f'{indent}{ids[id(n)]} [label="{input_label(n)}", shape=box, '
                         'fillcolor="#e0e0ff"];')
        for n in g.nodes:
            nid = f"{prefix}n{counter[0]}"
            counter[0] += 1
            ids[id(n)] = nid
            if n.op == "fused":
                lines.append(f"{indent}subgraph cluster_{nid} {{")
                lines.append(f'{indent}  label="fused kernel ({n.attrs.get("kind", "")})"; '
                             "style=rounded; color=blue;")
                body = n.attrs["body"]
                inner = emit(body, nid + "_", indent + "  ")
                lines.append(f"{indent}}}")
                for src, b_in in zip(n.inputs, body.inputs):
                    if isinstance(src, Node):
                        lines.append(f"{indent}{ids[id(src)]} -> {inner[id(b_in)]};")
                ids[id(n)] = inner[id(body.outputs[0])]
                continue
            fill = "lightgrey" if n.op == "const" else _colour(n.loc)
            lines.append(f'{indent}{nid} [label="{_label(n)}", fillcolor="{fill}"];')
            for i in n.inputs:
                if isinstance(i, Node):
                    lines.append(f"{indent}{ids[id(i)]} -> {nid};")
        return ids

    ids = emit(x, "", "  ")
    for k, o in enumerate(x.outputs):
        lines.append(f'  out{k} [label="output {k}", shape=box, style=dashed];')
        lines.append(f"  {ids[id(o)]} -> out{k};")
    lines.append("}")
    return "\n".join(lines)


def render(x: Any, path: str, format: str = "png", params: dict | None = None) -> str:  # noqa: A002
    """Draw ``x`` (tensor or `Graph`) to ``path``; returns the path written.

    The DOT source is always written next to it (``path`` with ``.dot``), so a machine
    without Graphviz still gets something to render elsewhere.
    """
    dot = to_dot(x, params=params)
    root, _ = os.path.splitext(path)
    dot_path = root + ".dot"
    with open(dot_path, "w") as f:
        f.write(dot)
    try:
        return _drawable(dot).render(outfile=path, format=format, cleanup=True)
    except RuntimeError as e:
        raise RuntimeError(f"{e} The DOT source was written to {dot_path}.") from None


def _size_str(shape: tuple) -> str:
    # torchviz's spelling: (3, 2), a vector (3), a scalar ().
    return "(" + ", ".join(str(int(d)) for d in shape) + ")"


def make_dot_source(y: Any, params: dict | None = None, show_attrs: bool = False) -> str:
    """The DOT source `make_dot` draws: torchviz's picture of the tape behind ``y``.

    Tape nodes are labelled with their backward names (``MulBackward0``), each leaf that
    requires grad is an ``AccumulateGrad`` node fed by a blue box with the tensor's name
    from ``params`` and its shape (``weight\\n (3, 2)``), and ``y`` itself is the green box
    at the bottom. ``show_attrs`` adds each node's attributes (``axis``, ``shape``...).
    The IR op names stay in `to_dot`'s pictures of graphs.
    """
    from .eager.internal import tape_node
    from .eager.tensor import Tensor

    if not isinstance(y, Tensor):
        raise TypeError(f"make_dot expects a Tensor, got {type(y).__name__}")
    names = {id(t): k for k, t in (params or {}).items()}
    lines = ["digraph {", '  graph [size="12,12"];',
             "  node [align=left, fontname=monospace, fontsize=10, height=0.2, ranksep=0.1, "
             "shape=box, style=filled];"]

    def var_label(t: Any) -> str:
        return f"{names.get(id(t), '')}\\n {_size_str(t.shape)}".replace('"', "'")

    def fn_label(fn: Any) -> str:
        label = fn.name()
        if show_attrs:
            attrs = {k: v for k, v in getattr(fn, "attrs", {}).items()
                     if k != "body" and not k.startswith("_")}
            label += "".join(f"\\n{k}: {format_attr(v)}" for k, v in sorted(attrs.items()))
        return label.replace('"', "'")

    lines.append(f'  "{id(y)}" [label="{var_label(y)}", fillcolor=darkolivegreen1];')
    if y.grad_fn is not None:
        lines.append(f'  "{id(y.grad_fn)}" -> "{id(y)}";')
    # Iterative walk over next_functions (a long chain must not hit the recursion limit).
    stack = [y.grad_fn if y.grad_fn is not None else
             (tape_node(y) if y.requires_grad else None)]
    seen: set[int] = set()
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        fill = _colour(getattr(fn, "loc", None))
        lines.append(f'  "{id(fn)}" [label="{fn_label(fn)}", fillcolor="'
                     f'{"lightgrey" if fill == "white" else fill}"];')
        var = getattr(fn, "variable", None)
        if var is not None:
            lines.append(f'  "{id(var)}" [label="{var_label(var)}", fillcolor=lightblue];')
            lines.append(f'  "{id(var)}" -> "{id(fn)}";')
        for nxt, _ in getattr(fn, "next_functions", ()):
            if nxt is not None:
                lines.append(f'  "{id(nxt)}" -> "{id(fn)}";')
                stack.append(nxt)
    lines.append("}")
    return "\n".join(lines)


INSTALL = ("drawing needs both Graphviz installs: the Python package (pip install graphviz, "
           "or pip install 'dualgraph[viz]') and the dot program (apt-get install graphviz, "
           "or brew install graphviz); {missing}. The DOT text is available without them "
           "(.source, or dg.viz.to_dot).")


class DotSource:
    """DOT text with `graphviz.Source`'s drawing methods, for a machine without the
    graphviz package: ``.source`` works, drawing raises the error naming both installs."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __str__(self) -> str:
        return self.source

    def _missing(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(INSTALL.format(missing="the graphviz Python package is missing"))

    render = pipe = view = _missing


_SOURCE_CLASS: Any = None


def _drawable(dot: str) -> Any:
    """A `graphviz.Source` of ``dot`` whose drawing methods turn a missing ``dot`` program
    into the error naming both installs (Graphviz's own `ExecutableNotFound` names neither
    package), or a `DotSource` when the graphviz package is missing."""
    global _SOURCE_CLASS
    try:
        import graphviz
    except ImportError:
        return DotSource(dot)
    if _SOURCE_CLASS is None:
        def guard(method: Any) -> Any:
            def drawing(self: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return method(self, *args, **kwargs)
                except graphviz.ExecutableNotFound:
                    raise RuntimeError(INSTALL.format(
                        missing="the dot program is not on PATH")) from None
            drawing.__name__ = method.__name__
            drawing.__doc__ = method.__doc__
            return drawing

        _SOURCE_CLASS = type("Source", (graphviz.Source,), {
            "__doc__": graphviz.Source.__doc__, "__module__": __name__,
            **{m: guard(getattr(graphviz.Source, m))
               for m in ("render", "pipe", "view", "_repr_mimebundle_")}})
    return _SOURCE_CLASS(dot)


def make_dot(y: Any, params: dict | None = None, show_attrs: bool = False) -> Any:
    """torchviz's call and picture: a ``graphviz.Source`` of the tape behind ``y``, with
    backward names (``MulBackward0``) and ``AccumulateGrad`` leaves named by ``params``
    (e.g. ``dict(model.named_parameters())``).

    ``.source`` is the DOT text on any machine; drawing (``render``, ``pipe``, a notebook's
    display) needs the graphviz package and the ``dot`` program, and without either raises
    a `RuntimeError` naming both installs. Without the package the result is a `DotSource`.
    """
    return _drawable(make_dot_source(y, params=params, show_attrs=show_attrs))
