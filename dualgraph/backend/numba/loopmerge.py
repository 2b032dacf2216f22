"""Merge adjacent loop nests of generated kernel source that run over the same ranges.

Numba's compile time grows with every loop nest it types and optimises (about 50 ms each),
and a training step has runs of them: an Adam update is three nests of one parameter's
shape (``m``, ``v``, the parameter), a fused epilogue is followed by a reduction of its
result. Two nests with the same headers become one when no iteration of the second can
read or write what another iteration of the first writes or reads:

- every array both touch, where either writes it, is accessed at the loop's own index
  (``x[i0, i1]``) and through plain renames of one array (``v7 = w3``), never through a
  view (``v7 = a2.T`` reads other elements);
- neither body jumps (``continue``, ``break``) or indexes with a nested subscript.

Between the two nests only comments and renames may stand; renames move above the merged
nest (their right side is an array bound before it), comments move into its body, so
`dg.explain`'s source map still finds each node's block.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^(\s*)for (\w+) in (range|numba\.prange)\((\d+)\):$")
_RENAME = re.compile(r"^    (\w+) = (\w+)$")
_BIND = re.compile(r"^    (\w+(?:, \w+)*) = ")
_ACCESS = re.compile(r"\b(\w+)\[([^\[\]]*)\]")
_WRITE = re.compile(r"^\s*(\w+)\[([^\[\]]*)\] *(?:[-+*/]|//)?= ")
_JUMP = re.compile(r"\b(continue|break)\b")
_NESTED = re.compile(r"\[[^\]]*\[")


class _Nest:
    """A perfect loop nest: its header lines, the index it runs over, and its body."""

    def __init__(self, headers: list, body: list) -> None:
        self.headers = headers  # (text, tag)
        self.body = body  # (text, tag)
        self.index = ", ".join(_HEADER.match(h).group(2) for h, _ in headers)


def _nest_at(lines: list, k: int) -> tuple[_Nest | None, int]:
    """The perfect nest starting at ``lines[k]`` (a top-level ``for``) and the position
    after it, or (None, end) when the nest is not perfect."""
    headers = []
    j = k
    depth = 1
    while j < len(lines):
        m = _HEADER.match(lines[j][0])
        if not m or len(m.group(1)) != 4 * depth:
            break
        headers.append(lines[j])
        depth += 1
        j += 1
    inner = 4 * depth
    body = []
    perfect = True
    while j < len(lines):
        text = lines[j][0]
        lead = len(text) - len(text.lstrip())
        if text.strip() and lead <= 4:
            break
        if text.strip() and lead < inner:
            perfect = False
        body.append(lines[j])
        j += 1
    return (_Nest(headers, body) if perfect and body else None), j


def _accesses(nest: _Nest, roots: dict) -> tuple[dict, dict, set, set] | None:
    """Per array root: the (index, pure) pairs written and read; then the bare names the
    body assigns and every name it mentions. None if the body is unsafe to merge."""
    writes: dict = {}
    reads: dict = {}
    assigned: set = set()
    names: set = set()

    def note(table: dict, name: str, index: str) -> None:
        rs, pure = roots.get(name, (frozenset((name,)), True))
        for r in rs:
            table.setdefault(r, set()).add((index.strip(), pure))

    for text, _ in nest.body:
        code = text.split("#", 1)[0]
        if _JUMP.search(code) or _NESTED.search(code):
            return None
        names.update(re.findall(r"\b[A-Za-z_]\w*\b", code))
        a = re.match(r"^\s*(\w+) *(?:[-+*/]|//)?= ", code)
        if a:
            assigned.add(a.group(1))
        w = _WRITE.match(code)
        rhs = code
        if w:
            note(writes, w.group(1), w.group(2))
            if re.match(r"^\s*\w+\[[^\[\]]*\] *(?:[-+*/]|//)= ", code):
                note(reads, w.group(1), w.group(2))
            rhs = code[w.end():]
        for m in _ACCESS.finditer(rhs):
            note(reads, m.group(1), m.group(2))
    return writes, reads, assigned, names


def _independent(a: _Nest, b: _Nest, roots: dict) -> bool:
    ax, bx = _accesses(a, roots), _accesses(b, roots)
    if ax is None or bx is None:
        return False
    (aw, ar, aset, anames), (bw, br, bset, bnames) = ax, bx
    if aset & bnames or bset & anames:
        return False  # a scalar one body assigns and the other reads or assigns
    own = a.index
    for root in set(aw) | set(bw):
        if (root in aw and (root in bw or root in br)) or (root in bw and root in ar):
            refs = (aw.get(root, set()) | ar.get(root, set()) | bw.get(root, set())
                    | br.get(root, set()))
            if not all(index == own and pure for index, pure in refs):
                return False
    return True


def merge_loops(lines: list[str], tags: dict[int, str],
                params: set[str]) -> tuple[list[str], dict[str, int]]:
    """``lines`` (a kernel body, indent 4) with adjacent compatible nests merged, and the
    new 1-based line of each tagged line (``tags``: 1-based line -> IR name)."""
    items = [(text, tags.get(k + 1)) for k, text in enumerate(lines)]
    # name -> (the arrays it may share memory with, whether it is a plain rename of one)
    roots: dict[str, tuple[frozenset, bool]] = {p: (frozenset((p,)), True) for p in params}
    bound = set(params)
    out: list = []
    k = 0
    last: tuple[int, _Nest] | None = None  # the last nest in ``out``: its position
    pending: list = []  # comments and renames seen since that nest
    while k < len(items):
        text, tag = items[k]
        if _HEADER.match(text) and text.startswith("    for "):
            nest, end = _nest_at(items, k)
            if (nest is not None and last is not None and last[1].headers == [
                    (h, t) for h, t in nest.headers] and _movable(pending, bound)
                    and _independent(last[1], nest, roots)):
                start, prev = last
                renames = [p for p in pending if not p[0].lstrip().startswith("#")]
                comments = [p for p in pending if p[0].lstrip().startswith("#")]
                indent = " " * (4 * (len(prev.headers) + 1))
                body = prev.body + [(indent + c.lstrip(), t) for c, t in comments] + nest.body
                merged = _Nest(prev.headers, body)
                del out[start:]
                out += renames
                start = len(out)
                out += merged.headers + merged.body
                last = (start, merged)
                pending = []
                k = end
                continue
            out_start = len(out)
            out += items[k:end]
            last = (out_start, nest) if nest is not None else None
            pending = []
            k = end
            continue
        out.append(items[k])
        stripped = text.strip()
        r = _RENAME.match(text)
        if r and r.group(1) in bound:
            r = None  # a rebinding: the nest above may read the old value, so it stays
        if r:
            roots[r.group(1)] = roots.get(r.group(2), (frozenset((r.group(2),)), True))
            pending.append(items[k])
        elif stripped.startswith("#") and text.startswith("    #"):
            pending.append(items[k])
        else:
            b = _BIND.match(text)
            if b:
                # Anything computed may be a view of any array it mentions (a reshape, a
                # transpose, np.ascontiguousarray of a contiguous array): never pure.
                used = frozenset().union(*(roots[n][0] for n in re.findall(
                    r"\b[A-Za-z_]\w*\b", text[b.end():]) if n in roots))
                for name in b.group(1).split(", "):
                    roots[name] = (used, False) if used else (frozenset((name,)), True)
            last = None
            pending = []
        if r:
            bound.add(r.group(1))
        elif _BIND.match(text):
            bound.update(_BIND.match(text).group(1).split(", "))
        k += 1
    new_tags = {t: k + 1 for k, (_, t) in enumerate(out) if t is not None}
    return [t for t, _ in out], new_tags


def _movable(pending: list, bound: set) -> bool:
    """Only comments and renames of arrays bound before stand between the two nests."""
    for text, _ in pending:
        r = _RENAME.match(text)
        if r and r.group(2) not in bound:
            return False
    return True
