"""Graphviz DOT for tapes and graphs."""

from __future__ import annotations

from typing import Any

from .ir.graph import Graph, Node, format_attr, format_const


def _label(n: Node) -> str:
    if n.op == "const":
        return f"const {format_const(n.attrs['value'])}\\n{n.type_str}"
    attrs = {k: v for k, v in n.attrs.items() if k not in ("body",) and not k.startswith("_")}
    extra = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(attrs.items()))
    return f"{n.op}{'[' + extra + ']' if extra else ''}\\n{n.type_str}".replace('"', "'")


def to_dot(x: Any, name: str = "dualgraph") -> str:
    """DOT source for a `Graph`, or for the tape behind a tensor (via `dg.graph_of`).

    Inputs are boxes, constants grey, fused kernels clusters holding their bodies.
    """
    if not isinstance(x, Graph):
        from .eager.export import graph_of

        x = graph_of(x)
    lines = [f'digraph "{name}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
    counter = [0]

    def emit(g: Graph, prefix: str, indent: str) -> dict[int, str]:
        ids: dict[int, str] = {}
        for n in g.inputs:
            ids[id(n)] = f"{prefix}n{counter[0]}"
            counter[0] += 1
            lines.append(f'{indent}{ids[id(n)]} [label="input\\n{n.type_str}", shape=box];')
        for n in g.nodes:
            nid = f"{prefix}n{counter[0]}"
            counter[0] += 1
            ids[id(n)] = nid
            if n.op == "fused":
                cl = f"cluster_{nid}"
                lines.append(f"{indent}subgraph {cl} {{")
                lines.append(f'{indent}  label="fused ({n.attrs.get("kind", "")})"; '
                             "style=rounded; color=blue;")
                inner = emit(n.attrs["body"], nid + "_", indent + "  ")
                lines.append(f"{indent}}}")
                body = n.attrs["body"]
                for src, b_in in zip(n.inputs, body.inputs):
                    if isinstance(src, Node):
                        lines.append(f"{indent}{ids[id(src)]} -> {inner[id(b_in)]};")
                ids[id(n)] = inner[id(body.outputs[0])]
                continue
            style = ", style=filled, fillcolor=lightgrey" if n.op == "const" else ""
            lines.append(f'{indent}{nid} [label="{_label(n)}"{style}];')
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
