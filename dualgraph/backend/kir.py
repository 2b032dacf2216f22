"""The kernel IR: what a kernel computes, as data, between the graph and generated source.

A lowering builds a `Block` of statements over named `Buffer`s; scheduling passes read and
rewrite blocks; one printer per target turns them into source (`backend/numba/printer.py`
for Numba). Nothing here writes or reads source text, so every decision a pass makes is
made on structure:

- **buffers** carry shape, dtype, layout and a role (`ARG`, `OUT`, `SCRATCH`, `LOCAL`,
  `VIEW`); a view names its base and how it is derived (`View`);
- **expressions** are trees of `Const`, `Var` (a loop index or a scalar), `Load` (a buffer
  at an index), `Un`, `Bin`, `Call` (a math function), `Select` and `Cast`; an index is an
  expression too, and `affine` reads it as ``sum(coeff * var) + const`` where it can;
- **statements**: `Alloc`, `View`, `Let`, `Store` (``=`` or a combine such as ``+=``),
  `Loop` (extent, parallel flag), `If`, `Accum` (fold a value into a scalar with a
  `Reduction` combine), `Gemm` (a library call with transpose flags, leading dimensions and
  batch strides), `LibCall` (any other library routine: sort, searchsorted, fold_lanes),
  `Table` (a constant 1-D table the lowering computed, such as window starts; a target
  passes it as a kernel constant), `Raise`, `Jump` and `Comment` (the graph line a block
  comes from).

``verify(block, params)`` checks a block is well formed; ``format_block`` prints it
readably (``dg.explain`` shows it beside the source); ``digest`` content-addresses it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

__all__ = [
    "ARG", "LOCAL", "OUT", "ROLES", "SCRATCH", "VIEW", "Accum", "Alloc", "Bin", "Block",
    "Buffer", "Call", "Cast", "Comment", "Const", "Expr", "Fresh", "Gemm", "If", "IRError",
    "Jump", "Let", "LibCall", "Load", "Loop", "Operand", "Raise", "Select", "Stmt", "Store",
    "Table", "Un", "Var", "View", "affine", "const", "digest", "format_block", "format_expr",
    "scalar_names", "table", "verify", "walk",
]

ARG, OUT, SCRATCH, LOCAL, VIEW = "arg", "out", "scratch", "local", "view"
# arg: a kernel argument (read, or updated in place); out: an output buffer the caller
# passes; scratch: a work array the caller allocates once and passes; local: allocated by
# the kernel; view: another buffer's memory seen through a reshape, transpose or slice.
ROLES = frozenset({ARG, OUT, SCRATCH, LOCAL, VIEW})


class IRError(ValueError):
    """A kernel IR block is malformed (`verify`)."""


def _dt(dtype: Any) -> np.dtype:
    return np.dtype(dtype)


@dataclass(frozen=True)
class Buffer:
    """A named n-d array. ``layout``: "C", "F" (a transposed C array) or "A" (strided)."""

    name: str
    shape: tuple
    dtype: np.dtype
    role: str = LOCAL
    layout: str = "C"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", _dt(self.dtype))

    def __getitem__(self, index: Any) -> Load:
        index = index if isinstance(index, tuple) else (index,)
        return Load(self, tuple(const(i) for i in index))

    @property
    def size(self) -> int:
        return math.prod(self.shape)


# --------------------------------------------------------------------- expressions
class Expr:
    """A scalar expression. ``+ - * /`` and unary ``-`` build `Bin`/`Un` nodes; equality
    is structural (expressions are frozen dataclasses), so use `Bin` for comparisons."""

    dtype: np.dtype

    def __add__(self, o: Any) -> Expr:
        return Bin("+", self, const(o, self.dtype))

    def __radd__(self, o: Any) -> Expr:
        return Bin("+", const(o, self.dtype), self)

    def __sub__(self, o: Any) -> Expr:
        return Bin("-", self, const(o, self.dtype))

    def __rsub__(self, o: Any) -> Expr:
        return Bin("-", const(o, self.dtype), self)

    def __mul__(self, o: Any) -> Expr:
        return Bin("*", self, const(o, self.dtype))

    def __rmul__(self, o: Any) -> Expr:
        return Bin("*", const(o, self.dtype), self)

    def __truediv__(self, o: Any) -> Expr:
        return Bin("/", self, const(o, self.dtype))

    def __floordiv__(self, o: Any) -> Expr:
        return Bin("//", self, const(o, self.dtype))

    def __neg__(self) -> Expr:
        return Un("-", self)


INDEX = np.dtype(np.int64)


def const(value: Any, dtype: Any = None) -> Expr:
    """``value`` as an expression (an `Expr` is returned as it is); a Python int is an
    index-typed constant unless ``dtype`` says otherwise."""
    if isinstance(value, Expr):
        return value
    if dtype is None:
        dtype = (np.bool_ if isinstance(value, (bool, np.bool_)) else
                 INDEX if isinstance(value, (int, np.integer)) else np.float64)
    return Const(value.item() if isinstance(value, np.generic) else value, _dt(dtype))


@dataclass(frozen=True, eq=True)
class Const(Expr):
    value: Any
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A loop index or a scalar bound by `Let`/`Accum`/`Loop`."""

    name: str
    dtype: np.dtype = INDEX

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _dt(self.dtype))


@dataclass(frozen=True, eq=True)
class Load(Expr):
    buf: Buffer
    index: tuple

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        return self.buf.dtype


ARITH = frozenset({"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"})
COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
LOGIC = frozenset({"and", "or"})


@dataclass(frozen=True, eq=True)
class Bin(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        if self.op in COMPARE or self.op in LOGIC:
            return np.dtype(np.bool_)
        return np.result_type(self.a.dtype, self.b.dtype)


@dataclass(frozen=True, eq=True)
class Un(Expr):
    op: str  # "-", "~", "not"
    a: Expr

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        return np.dtype(np.bool_) if self.op == "not" else self.a.dtype


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """A scalar math function by its NumPy name (``exp``, ``log1p``, ``erf``, ``abs``,
    ``copysign``); the printer chooses the target's implementation for ``dtype``."""

    fn: str
    args: tuple
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr

    @property
    def dtype(self) -> np.dtype:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    a: Expr
    dtype: np.dtype


# ---------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Alloc:
    """A new array for ``buf`` (role local or scratch), filled with ``fill`` when given."""

    buf: Buffer
    fill: Any = None


@dataclass(frozen=True)
class View:
    """``buf`` is ``base`` seen differently: ``how`` is "reshape" (a contiguous copy when
    ``base`` is not C-ordered), "transpose" (``arg``: the axes), "slice" (``arg``: one
    (start, stop, step) or int per dim), "bitcast" (the bytes of ``base`` in C order read
    as ``buf``'s dtype and shape) or "alias" (the same array under a new name)."""

    buf: Buffer
    base: Buffer
    how: str
    arg: Any = None


@dataclass(frozen=True)
class Let:
    """``var = value``; ``note`` names what it computes (the graph op of a fused member),
    printed beside it so a reader, and `dg.explain`'s source map, can find it."""

    var: Var
    value: Expr
    note: str = ""


@dataclass(frozen=True)
class Store:
    """``buf[index] = value``, or with ``combine`` ("+", "*", ...) ``buf[index] op= value``."""

    buf: Buffer
    index: tuple
    value: Expr
    combine: str | None = None


@dataclass(frozen=True)
class Loop:
    """``for var in range(start, extent, step)``; ``parallel``: the iterations are
    independent and may run on several threads."""

    var: Var
    extent: Any  # int or Expr
    body: tuple
    parallel: bool = False
    start: Any = 0
    step: int = 1


@dataclass(frozen=True)
class If:
    cond: Expr
    then: tuple
    orelse: tuple = ()


@dataclass(frozen=True)
class Accum:
    """Fold ``value`` into the scalar ``var`` with a `Reduction` combine: "add", "mul",
    "maximum", "minimum" (``nan_propagates``: a nan wins, as in ``np.max``)."""

    var: Var
    combine: str
    value: Expr
    nan_propagates: bool = True


@dataclass(frozen=True)
class Operand:
    """A matrix for `Gemm`: ``buf`` from element ``offset``, rows ``ld`` elements apart,
    consecutive batch items ``batch_stride`` elements apart (0: the same matrix).

    ``ld=None``: ``buf`` is a 2-D matrix whose strides are known only when the target
    types the kernel (an argument, or a view of one); the target then reads it in place,
    transposed or not by its layout, and copies it only where no BLAS layout fits."""

    buf: Buffer
    ld: int | None
    offset: Any = 0
    batch_stride: int = 0

    @property
    def resolved(self) -> bool:
        return self.ld is not None


@dataclass(frozen=True)
class Gemm:
    """``c = op(a) @ op(b) + beta * c`` for ``batch`` items, row-major (cblas's
    convention); ``ta``/``tb``: the operand is read transposed."""

    m: int
    n: int
    k: int
    a: Operand
    b: Operand
    c: Operand
    ta: bool = False
    tb: bool = False
    beta: float = 0.0
    batch: int = 1
    # (p, r0, r1, c0, c1) Vars: only block ``p`` of the target's fixed cut of the result
    # into blocks of rows or columns, binding the block's rows r0:r1 and columns c0:c1
    # (the statements after it work on that block); () for the whole product.
    part: tuple = ()


@dataclass(frozen=True)
class LibCall:
    """A library routine the target provides, by name, over buffers and scalars
    (``outs``: the buffers it writes)."""

    fn: str
    args: tuple
    outs: tuple = ()


@dataclass(frozen=True)
class Raise:
    kind: str  # an exception type name: "IndexError", "ValueError"
    message: str


@dataclass(frozen=True)
class Jump:
    kind: str  # "break" or "continue"


@dataclass(frozen=True)
class Comment:
    """A line for the reader; ``node``: the graph value (``%3``) whose block starts here,
    which the printer's source map records."""

    text: str
    node: str | None = None


@dataclass(frozen=True)
class Table:
    """``buf`` (1-D, role local) holds the constant ``values``: data a lowering computed
    when it built the block (window starts, a padding map). A target passes it to the
    kernel as a constant, built once, not per call."""

    buf: Buffer
    values: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(
            v.item() if isinstance(v, np.generic) else v for v in self.values))


def table(name: str, values: Any, dtype: Any = INDEX) -> tuple[Table, Buffer]:
    """A `Table` statement of ``values`` as ``dtype`` and its buffer."""
    values = tuple(np.asarray(values, dtype).reshape(-1).tolist())
    buf = Buffer(name, (len(values),), dtype)
    return Table(buf, values), buf


Stmt = Union[Alloc, View, Let, Store, Loop, If, Accum, Gemm, LibCall, Table, Raise, Jump,
             Comment]


@dataclass
class Block:
    """A lowered node: its statements, and the buffer that holds its value."""

    stmts: list = field(default_factory=list)
    result: Buffer | None = None

    def add(self, *stmts: Any) -> Block:
        self.stmts.extend(stmts)
        return self

    def fills(self, buf: Buffer) -> bool:
        """The block allocates ``buf`` first (unfilled) and only writes its elements, so
        it can fill an array it is given instead (the buffer planner's question)."""
        first = next((s for s in self.stmts if not isinstance(s, Comment)), None)
        if not (isinstance(first, Alloc) and first.buf == buf and first.fill is None):
            return False
        return not any(isinstance(s, (Alloc, View)) and s.buf.name == buf.name
                       for s in walk(self.stmts) if s is not first)


# ---------------------------------------------------------------------- traversal
def walk(stmts: Any) -> Any:
    """Every statement of ``stmts``, nested ones included, in order."""
    for s in stmts:
        yield s
        if isinstance(s, Loop):
            yield from walk(s.body)
        elif isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)


def exprs_of(s: Any) -> list:
    """The expressions a statement reads directly (indices included)."""
    if isinstance(s, Let):
        return [s.value]
    if isinstance(s, Store):
        return list(s.index) + [s.value]
    if isinstance(s, Loop):
        return [const(s.extent), const(s.start)]
    if isinstance(s, If):
        return [s.cond]
    if isinstance(s, Accum):
        return [s.value]
    if isinstance(s, Gemm):
        return [const(o.offset) for o in (s.a, s.b, s.c)] + list(s.part[:1])
    if isinstance(s, LibCall):
        return [a for a in s.args if isinstance(a, Expr)]
    return []


def subexprs(e: Expr) -> Any:
    """``e`` and every expression inside it."""
    yield e
    kids: tuple = ()
    if isinstance(e, Load):
        kids = e.index
    elif isinstance(e, Bin):
        kids = (e.a, e.b)
    elif isinstance(e, (Un, Cast)):
        kids = (e.a,)
    elif isinstance(e, Call):
        kids = e.args
    elif isinstance(e, Select):
        kids = (e.cond, e.a, e.b)
    for k in kids:
        yield from subexprs(k)


def scalar_names(stmts: Any) -> set:
    """Every scalar name ``stmts`` reads or binds (a `Let`, `Loop` or `Accum` variable),
    nested statements included."""
    names = {x.name for s in walk(stmts) for e in exprs_of(s) for x in subexprs(e)
             if isinstance(x, Var)}
    return names | {s.var.name for s in walk(stmts) if isinstance(s, (Let, Loop, Accum))} | {
        v.name for s in walk(stmts) if isinstance(s, Gemm) for v in s.part}


class Fresh:
    """New scalar names for a pass: ``prefix`` and a count, skipping every name in
    ``taken`` (a set the generator extends with each name it hands out).

    >>> Fresh("cs", {"cs1"}).var(np.float32).name
    'cs2'
    """

    def __init__(self, prefix: str, taken: set) -> None:
        self.prefix = prefix
        self.taken = taken
        self.count = 0

    def var(self, dtype: Any) -> Var:
        while True:
            self.count += 1
            name = f"{self.prefix}{self.count}"
            if name not in self.taken:
                self.taken.add(name)
                return Var(name, _dt(dtype))


def affine(e: Expr) -> tuple[dict, int] | None:
    """``e`` as ``({var name: coefficient}, constant)`` when it is an integer affine
    function of variables, else None (a load, a division, a product of two variables)."""
    if isinstance(e, Const) and isinstance(e.value, (int, np.integer)) and not isinstance(
            e.value, bool):
        return {}, int(e.value)
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Un) and e.op == "-":
        inner = affine(e.a)
        return None if inner is None else ({k: -v for k, v in inner[0].items()}, -inner[1])
    if isinstance(e, Bin) and e.op in ("+", "-"):
        x, y = affine(e.a), affine(e.b)
        if x is None or y is None:
            return None
        sign = 1 if e.op == "+" else -1
        coeffs = dict(x[0])
        for k, v in y[0].items():
            coeffs[k] = coeffs.get(k, 0) + sign * v
        return {k: v for k, v in coeffs.items() if v}, x[1] + sign * y[1]
    if isinstance(e, Bin) and e.op == "*":
        x, y = affine(e.a), affine(e.b)
        if x is None or y is None:
            return None
        if not x[0]:
            x, y = y, x
        if y[0]:
            return None  # a product of two variables
        return {k: v * y[1] for k, v in x[0].items() if v * y[1]}, x[1] * y[1]
    return None


# ------------------------------------------------------------------------- verify
def verify(stmts: Any, params: Any = ()) -> None:
    """Check ``stmts`` (a `Block` or a statement list) is well formed: every buffer is a
    parameter or defined before use, one name means one buffer, variables are bound
    before they are read, loads and stores index every dimension, GEMM shapes fit their
    operands, roles are known. Raises `IRError`."""
    stmts = stmts.stmts if isinstance(stmts, Block) else stmts
    bufs: dict[str, Buffer] = {}
    for p in params:
        _define(bufs, p)
    _verify(list(stmts), bufs, set())


def _define(bufs: dict, b: Buffer) -> None:
    if b.role not in ROLES:
        raise IRError(f"buffer {b.name}: unknown role {b.role!r}")
    if b.layout not in ("C", "F", "A"):
        raise IRError(f"buffer {b.name}: unknown layout {b.layout!r}")
    old = bufs.get(b.name)
    if old is not None and old != b:
        raise IRError(f"buffer {b.name} is defined twice with different types")
    bufs[b.name] = b


def _use(bufs: dict, b: Buffer, what: str) -> None:
    if bufs.get(b.name) != b:
        raise IRError(f"{what} of buffer {b.name}, which is not defined before it")


def _verify_expr(e: Expr, bufs: dict, scope: set) -> None:
    for x in subexprs(e):
        if isinstance(x, Var) and x.name not in scope:
            raise IRError(f"variable {x.name} is read before it is bound")
        if isinstance(x, Load):
            _use(bufs, x.buf, "a load")
            _check_index(x.buf, x.index)
        if isinstance(x, Bin) and x.op not in ARITH | COMPARE | LOGIC:
            raise IRError(f"unknown binary operator {x.op!r}")


def _check_index(b: Buffer, index: tuple) -> None:
    if len(index) != max(len(b.shape), 1):
        raise IRError(f"buffer {b.name} of rank {len(b.shape)} indexed with {len(index)} "
                      "indices")
    for i, d in zip(index, b.shape):
        if isinstance(i, Const) and not 0 <= int(i.value) < max(d, 1):
            raise IRError(f"index {i.value} out of range for {b.name}{list(b.shape)}")


def _verify(stmts: list, bufs: dict, scope: set) -> None:
    scope = set(scope)
    for s in stmts:
        for e in exprs_of(s):
            _verify_expr(e, bufs, scope)
        if isinstance(s, Alloc):
            if s.buf.role not in (LOCAL, SCRATCH):
                raise IRError(f"allocation of {s.buf.name}, a buffer of role {s.buf.role}")
            _define(bufs, s.buf)
        elif isinstance(s, View):
            _use(bufs, s.base, "a view")
            if s.how == "reshape" and s.buf.size != s.base.size:
                raise IRError(f"reshape of {s.base.name}{list(s.base.shape)} to "
                              f"{list(s.buf.shape)}")
            if s.how == "transpose" and sorted(s.arg) != list(range(len(s.base.shape))):
                raise IRError(f"transpose of {s.base.name} by {s.arg}")
            if s.how == "bitcast" and (s.buf.size * s.buf.dtype.itemsize
                                       != s.base.size * s.base.dtype.itemsize):
                raise IRError(f"bitcast of {s.base.name} to {_buf(s.buf)}: not the same bytes")
            if s.how not in ("reshape", "transpose", "slice", "bitcast", "alias"):
                raise IRError(f"unknown view {s.how!r}")
            _define(bufs, s.buf)
        elif isinstance(s, Let):
            scope.add(s.var.name)
        elif isinstance(s, Store):
            _use(bufs, s.buf, "a store")
            _check_index(s.buf, s.index)
        elif isinstance(s, Accum):
            if s.var.name not in scope:
                raise IRError(f"accumulator {s.var.name} is not initialised")
            if s.combine not in ("add", "mul", "maximum", "minimum"):
                raise IRError(f"unknown combine {s.combine!r}")
        elif isinstance(s, Loop):
            _verify(list(s.body), bufs, scope | {s.var.name})
        elif isinstance(s, If):
            _verify(list(s.then), bufs, scope)
            _verify(list(s.orelse), bufs, scope)
        elif isinstance(s, Gemm):
            _verify_gemm(s, bufs)
            if s.part and (s.batch != 1 or len(s.part) != 5):
                raise IRError("a GEMM block: one product, (part, r0, r1, c0, c1)")
            scope.update(v.name for v in s.part[1:])
        elif isinstance(s, LibCall):
            for a in s.args + s.outs:
                if isinstance(a, Buffer):
                    _use(bufs, a, f"{s.fn}'s argument")
        elif isinstance(s, Jump) and s.kind not in ("break", "continue"):
            raise IRError(f"unknown jump {s.kind!r}")
        elif isinstance(s, Table):
            if s.buf.role != LOCAL or len(s.buf.shape) != 1 or len(s.values) != s.buf.size:
                raise IRError(f"table {_buf(s.buf)}: a local 1-D buffer of its "
                              f"{len(s.values)} values")
            _define(bufs, s.buf)
        elif not isinstance(s, (Raise, Jump, Comment)):
            raise IRError(f"not a kernel IR statement: {s!r}")


def _verify_gemm(g: Gemm, bufs: dict) -> None:
    for name, o, rows, cols in (("a", g.a, *((g.k, g.m) if g.ta else (g.m, g.k))),
                                ("b", g.b, *((g.n, g.k) if g.tb else (g.k, g.n))),
                                ("c", g.c, g.m, g.n)):
        _use(bufs, o.buf, f"GEMM operand {name}")
        if not o.resolved:
            if (name == "a" and g.ta) or (name == "b" and g.tb) or name == "c" or g.batch != 1:
                raise IRError(f"GEMM operand {name}: a layout resolved by the target needs "
                              "no transpose flag, a single product, and an input operand")
            if o.buf.shape != (rows, cols):
                raise IRError(f"GEMM operand {name}: {o.buf.name}{list(o.buf.shape)} is not "
                              f"[{rows}, {cols}]")
            continue
        if o.buf.layout != "C":
            raise IRError(f"GEMM operand {name} ({o.buf.name}) is not C-ordered: pass its "
                          "C-ordered base with a transpose flag")
        if o.buf.dtype != g.c.buf.dtype:
            raise IRError(f"GEMM operand {name} of dtype {o.buf.dtype}, c {g.c.buf.dtype}")
        if o.ld < max(cols, 1):
            raise IRError(f"GEMM operand {name}: leading dimension {o.ld} < {cols} columns")
        if isinstance(o.offset, int):
            last = o.offset + (g.batch - 1) * o.batch_stride + (rows - 1) * o.ld + cols
            if rows and cols and last > o.buf.size:
                raise IRError(f"GEMM operand {name} reads past {o.buf.name} "
                              f"({last} > {o.buf.size} elements)")
    if g.c.batch_stride == 0 and g.batch > 1:
        raise IRError("a batched GEMM writes every item into the same c")


# ------------------------------------------------------------------------ printing
_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4, "|": 5,
         "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10,
         "%": 10, "**": 12}


def _short(dtype: np.dtype) -> str:
    return {"bool": "b1"}.get(dtype.name, dtype.str[1:])


def format_expr(e: Any) -> str:
    """``e`` readably: ``x[i0, (2*i1 + 1)] * 2.0:f4``."""
    if isinstance(e, Const):
        return f"{e.value!r}" if e.dtype == INDEX else f"{e.value!r}:{_short(e.dtype)}"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Load):
        return f"{e.buf.name}[{', '.join(format_expr(i) for i in e.index)}]"
    if isinstance(e, Bin):
        return f"({format_expr(e.a)} {e.op} {format_expr(e.b)})"
    if isinstance(e, Un):
        return f"({e.op}{' ' if e.op == 'not' else ''}{format_expr(e.a)})"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Cast):
        return f"{_short(e.dtype)}({format_expr(e.a)})"
    if isinstance(e, Buffer):
        return e.name
    return repr(e)


def _buf(b: Buffer) -> str:
    lay = "" if b.layout == "C" else f" {b.layout}"
    return f"{b.name}:{_short(b.dtype)}{list(b.shape)}{lay}"


def _op(o: Operand) -> str:
    if not o.resolved:
        return f"{o.buf.name} ld=?"
    extra = f"+{format_expr(const(o.offset))}" if o.offset != 0 else ""
    batch = f" bs={o.batch_stride}" if o.batch_stride else ""
    return f"{o.buf.name}{extra} ld={o.ld}{batch}"


def format_block(stmts: Any, indent: int = 0) -> str:
    """The statements readably, one per line, loop bodies indented."""
    stmts = stmts.stmts if isinstance(stmts, Block) else stmts
    return "\n".join(_format(list(stmts), indent))


def _format(stmts: list, depth: int) -> list:
    pad = "  " * depth
    out = []
    for s in stmts:
        if isinstance(s, Alloc):
            fill = "" if s.fill is None else f" fill {s.fill!r}"
            out.append(f"{pad}alloc {s.buf.role} {_buf(s.buf)}{fill}")
        elif isinstance(s, View):
            arg = "" if s.arg is None else f" {s.arg}"
            out.append(f"{pad}{_buf(s.buf)} = {s.how} {s.base.name}{arg}")
        elif isinstance(s, Let):
            note = f"  # {s.note}" if s.note else ""
            out.append(f"{pad}{s.var.name} = {format_expr(s.value)}{note}")
        elif isinstance(s, Store):
            op = f"{s.combine}=" if s.combine else "="
            idx = ", ".join(format_expr(i) for i in s.index)
            out.append(f"{pad}{s.buf.name}[{idx}] {op} {format_expr(s.value)}")
        elif isinstance(s, Loop):
            kind = "parallel for" if s.parallel else "for"
            start = "" if s.start == 0 else f"{format_expr(const(s.start))}, "
            step = "" if s.step == 1 else f", step {s.step}"
            out.append(f"{pad}{kind} {s.var.name} in {start}"
                       f"{format_expr(const(s.extent))}{step}:")
            out += _format(list(s.body), depth + 1)
        elif isinstance(s, If):
            out.append(f"{pad}if {format_expr(s.cond)}:")
            out += _format(list(s.then), depth + 1)
            if s.orelse:
                out.append(f"{pad}else:")
                out += _format(list(s.orelse), depth + 1)
        elif isinstance(s, Accum):
            out.append(f"{pad}{s.var.name} = {s.combine}({s.var.name}, "
                       f"{format_expr(s.value)})")
        elif isinstance(s, Gemm):
            batch = f" x{s.batch}" if s.batch != 1 else ""
            flags = ("T" if s.ta else "N") + ("T" if s.tb else "N")
            beta = f" beta={s.beta}" if s.beta else ""
            part = ""
            if s.part:
                p, r0, r1, c0, c1 = (v.name for v in s.part)
                part = f" block {p} -> rows {r0}:{r1} cols {c0}:{c1}"
            out.append(f"{pad}gemm{batch} {flags} {s.m}x{s.n}x{s.k} {_op(s.c)} = "
                       f"{_op(s.a)} @ {_op(s.b)}{beta}{part}")
        elif isinstance(s, LibCall):
            args = ", ".join(format_expr(a) for a in s.args)
            outs = ", ".join(b.name for b in s.outs)
            out.append(f"{pad}{outs + ' <- ' if outs else ''}{s.fn}({args})")
        elif isinstance(s, Raise):
            out.append(f"{pad}raise {s.kind}({s.message!r})")
        elif isinstance(s, Jump):
            out.append(f"{pad}{s.kind}")
        elif isinstance(s, Comment):
            out.append(f"{pad}# {s.text}")
        elif isinstance(s, Table):
            out.append(f"{pad}table {_buf(s.buf)} = {s.values!r}")
    return out


def digest(stmts: Any, params: Any = ()) -> str:
    """A content address for a kernel: the same statements over the same parameter types
    give the same digest (buffer names included, so rename consistently first)."""
    text = format_block(stmts) + "\n" + "\n".join(_buf(p) + p.role for p in params)
    return hashlib.sha256(text.encode()).hexdigest()[:24]
