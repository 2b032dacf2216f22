"""Pictures of tapes and graphs: Graphviz DOT source, rendering, torchviz's ``make_dot``.

Nodes made by the same line of user code share a colour, in every picture, so an eager
tape and its optimized graph can be read side by side; fused kernels are clusters.
Rendering needs the ``graphviz`` Python package (``pip install 'dualgraph[viz]'``) and the
Graphviz ``dot`` program; without them the DOT source is still written.
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
        import graphviz
    except ImportError:
        raise RuntimeError(
            "rendering needs the graphviz Python package: pip install graphviz (or "
            f"'dualgraph[viz]'); the DOT source was written to {dot_path}") from None
    try:
        out = graphviz.Source(dot).render(outfile=path, format=format, cleanup=True)
    except graphviz.ExecutableNotFound:
        raise RuntimeError(
            "rendering needs the Graphviz 'dot' program (apt-get install graphviz, brew "
            f"install graphviz); the DOT source was written to {dot_path}") from None
    return out


def make_dot(y: Any, params: dict | None = None) -> Any:
    """torchviz's call: a ``graphviz.Source`` of the tape behind ``y``, leaves named by
    ``params`` (e.g. ``dict(model.named_parameters())``)."""
    dot = to_dot(y, params=params)
    try:
        import graphviz
    except ImportError:
        raise RuntimeError("make_dot needs the graphviz Python package: pip install graphviz "
                           "(or 'dualgraph[viz]'); dg.viz.to_dot(y) gives the DOT source "
                           "without it") from None
    return graphviz.Source(dot)
