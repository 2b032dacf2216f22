"""Kernel IR to Numba source: the one place where the backend turns values into Python text.

Generated source is read by people (``dg.explain`` prints it), so statements print as a
person would write them: loops as ``for i in range(n):``, a scalar as a named local, a
typed constant as ``np.float32(0.5)``. `literal` is the only literal printer: infinities
and nan have no Python literal (``repr`` gives a bare ``inf``, a ``NameError`` in the
generated module), so they print as ``np.inf`` and ``np.nan``.

Sizes are read from the kernel's arrays when it runs (`Sizes`): a loop over 384 rows of
an argument prints as ``for i in range(n0):`` with ``n0 = a2.shape[0]`` at the function's
top, so kernels that differ only in their sizes (Adam's update of every parameter shape,
the same layer at two widths) print the same code (`function`'s ``code``: comments name
the graph node only) and share one compiled function.
Extents of at most `KEEP_LITERAL` stay literal: a short inner loop with a known trip count
is unrolled and vectorized by LLVM without a remainder loop.

The module namespace the source runs in (`cache.load`'s header) provides ``np``, ``math``,
``numba``, ``dgb`` (BLAS), ``dgk`` (vectorizable math), ``dgl`` (LAPACK) and
``dgc``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import kir
from .blas import HAVE_CBLAS

__all__ = ["KEEP_LITERAL", "MATH", "Sizes", "block_lines", "dtype_name", "expr", "function",
           "literal"]

# cblas transpose flags.
NO_TRANS, TRANS = 111, 112


def dtype_name(dtype: Any) -> str:
    """The NumPy dtype as generated code names it (``np.float32``, ``np.bool_``)."""
    dtype = np.dtype(dtype)
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def literal(value: Any, dtype: Any = None) -> str:
    """``value`` as source: with ``dtype``, a constant of that dtype (a bare ``2.0`` would
    make a float32 loop float64; an index-typed int stays bare); without, a plain Python
    literal. Infinities and nan print as ``np.inf``/``np.nan``, never as bare names."""
    value = value.item() if isinstance(value, np.generic) else value
    if dtype is None:
        if isinstance(value, float) and not math.isfinite(value):
            return "np.nan" if value != value else ("np.inf" if value > 0 else "-np.inf")
        return repr(value)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "f":
        return f"{dtype_name(dtype)}({literal(float(value))})"
    if dtype.kind == "c":
        return f"{dtype_name(dtype)}({literal(complex(value))})"
    if dtype == kir.INDEX:
        return str(int(value))
    return f"{dtype_name(dtype)}({int(value)})"


# Sizes up to this stay literals in generated code (the lanes of a reduction, a head's
# width, a pooling window), larger ones are read from the arrays (`Sizes`).
KEEP_LITERAL = 16


class Sizes:
    """The sizes a kernel reads from its array arguments instead of printing them: each
    dimension of each argument, then each product of consecutive dimensions (a flattened
    view's length), first found first. ``sizes(n)`` is the source of the integer ``n``: a
    local bound at the function's top (``n0 = a1.shape[0]``, in order of first use) when
    an argument has that size and ``n > KEEP_LITERAL``, else the literal.

    Any choice is correct: the local holds ``n`` whenever the kernel runs on arrays of the
    shapes it was generated for, and two kernels that print the same source compute the
    same function of their arrays. Choosing by argument position makes kernels of the same
    structure print the same names."""

    def __init__(self, arrays: list[tuple[str, tuple]], keep: int = KEEP_LITERAL) -> None:
        self.keep = keep
        self.known: dict[int, str] = {}
        for name, shape in arrays:
            for d, n in enumerate(shape):
                self.known.setdefault(int(n), f"{name}.shape[{d}]")
        for name, shape in arrays:
            for i in range(len(shape)):
                for j in range(i + 2, len(shape) + 1):
                    self.known.setdefault(math.prod(shape[i:j]), " * ".join(
                        f"{name}.shape[{d}]" for d in range(i, j)))
        self.names: dict[int, str] = {}
        self.defs: list[str] = []
        self.values: list[int] = []  # the size each of `defs` binds

    def symbol(self, n: Any) -> str | None:
        """The local holding ``n``, or None when ``n`` prints as a literal."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            return None
        n = int(n)
        if n <= self.keep or n not in self.known:
            return None
        name = self.names.get(n)
        if name is None:
            name = self.names[n] = f"n{len(self.names)}"
            self.defs.append(f"{name} = {self.known[n]}")
            self.values.append(n)
        return name

    def __call__(self, n: Any) -> str:
        return self.symbol(n) or str(n)


def _literal_size(n: Any) -> str:
    return str(n)


# The math functions a `kir.Call` names, by dtype: float32 gets dualgraph's vectorizable
# versions (see kernels.py), everything else NumPy's (scalar libm calls in a loop).
MATH = {
    True: {"exp": "dgk.exp_f32", "tanh": "dgk.tanh_f32", "sigmoid": "dgk.sigmoid_f32",
           "erf": "dgk.erf_f32"},
    False: {"exp": "np.exp", "tanh": "np.tanh", "sigmoid": "dgk.sigmoid_f64", "erf": "math.erf"},
}
_CALLS = {"abs": "abs", "erf": "math.erf", "min": "min", "max": "max", "int": "int",
          "float": "float", "bool": "bool", "lgamma": "math.lgamma", "erfc": "math.erfc",
          "polygamma": "dgk.polygamma", "erfinv": "dgk.erfinv", "bessel_i": "dgk.bessel_i",
          "reduce_precision": "dgk.reduce_precision"}


def call_name(fn: str, dtype: Any) -> str:
    """The generated name of math function ``fn`` at ``dtype``."""
    table = MATH[np.dtype(dtype) == np.float32]
    return table.get(fn) or _CALLS.get(fn) or f"np.{fn}"


def _const(e: kir.Const, sz: Callable[[Any], str]) -> str:
    if isinstance(sz, Sizes):
        dtype = np.dtype(e.dtype)
        if dtype == kir.INDEX:
            return sz(e.value)
        if dtype.kind == "f" and isinstance(e.value, float) and e.value.is_integer():
            # A count as a float (a mean's divisor): exact in float32 up to 2**24.
            name = sz.symbol(int(e.value)) if abs(e.value) < 2 ** 24 else None
            if name is not None:
                return f"{dtype_name(dtype)}({name})"
    return literal(e.value, e.dtype)


def expr(e: Any, sz: Callable[[Any], str] = _literal_size) -> str:
    """An expression as Numba source (fully parenthesised where it nests); ``sz`` prints
    index constants (a `Sizes` reads them from the arguments)."""
    if isinstance(e, kir.Const):
        return _const(e, sz)
    if isinstance(e, kir.Var):
        return e.name
    if isinstance(e, kir.Load):
        return f"{e.buf.name}[{', '.join(expr(i, sz) for i in e.index)}]"
    if isinstance(e, kir.Bin):
        return f"({expr(e.a, sz)} {e.op} {expr(e.b, sz)})"
    if isinstance(e, kir.Un):
        return f"({e.op}{' ' if e.op == 'not' else ''}{expr(e.a, sz)})"
    if isinstance(e, kir.Call):
        return f"{call_name(e.fn, e.dtype)}({', '.join(_bare(a, sz) for a in e.args)})"
    if isinstance(e, kir.Select):
        return f"({expr(e.a, sz)} if {expr(e.cond, sz)} else {expr(e.b, sz)})"
    if isinstance(e, kir.Cast):
        if e.dtype == np.bool_:
            return f"bool({_bare(e.a, sz)})"
        return f"{dtype_name(e.dtype)}({_bare(e.a, sz)})"
    if isinstance(e, kir.Buffer):
        return e.name
    if isinstance(e, (int, float, bool, np.generic)):
        return literal(e)
    raise TypeError(f"not a kernel IR expression: {e!r}")


def _bare(e: Any, sz: Callable[[Any], str] = _literal_size) -> str:
    """An argument of a call: without the parentheses a nested expression prints with."""
    text = expr(e, sz)
    return text[1:-1] if isinstance(e, (kir.Bin, kir.Un, kir.Select)) else text


def _shape(shape: tuple, sz: Callable[[Any], str] = _literal_size) -> str:
    dims = [sz(d) for d in tuple(shape) or (1,)]
    return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def _slice(arg: tuple, sz: Callable[[Any], str] = _literal_size) -> str:
    parts = []
    for e in arg:
        if isinstance(e, tuple):
            start, stop, step = e
            parts.append(f"{sz(start)}:{'' if stop is None else sz(stop)}:{step}")
        else:
            parts.append(expr(kir.const(e), sz))
    return ", ".join(parts)


def _operand(o: kir.Operand, item: str | None, flat: bool = False,
             sz: Callable[[Any], str] = _literal_size, views: bool = True) -> str:
    """A GEMM operand as the array whose first element is the matrix's first element
    (``flat``: always a 1-D view; ``views``: through `kernels.flat`, else Numba's
    ``reshape``)."""
    off = kir.const(o.offset)
    if item is not None and o.batch_stride:
        step = kir.Bin("*", kir.Var(item), kir.const(o.batch_stride))
        off = step if off == kir.const(0) else off + step
    if off == kir.const(0) and o.buf.layout == "C" and not flat:
        return o.buf.name
    if not views:
        return f"{o.buf.name}.reshape({sz(o.buf.size)})[{expr(off, sz)}:]"
    return f"dgk.flat({o.buf.name})[{expr(off, sz)}:]"


class Printer:
    """Prints statements as indented lines. ``work(buf)``, when given, names the work
    array a top-level allocation (or a scratch buffer's, at any depth) takes: an array the
    caller passes once instead of an allocation per call; None allocates in the kernel.
    ``sizes`` prints the integer sizes (`Sizes`: read from the arguments). ``marks``: the
    1-based line of each `kir.Comment` that names a graph node. ``code``: the comment
    lines as the compiled module has them (index -> text): the node's name, not its graph
    line, whose shapes and attributes would keep kernels of the same code apart.
    ``views``: reshapes print as `kernels.reshaped`/`kernels.flat` views; False prints
    Numba's ``reshape``, which Numba's parallel loops know to alias its array (a view
    made by an intrinsic and written in a ``prange`` loop did not reach the array).
    ``parts``: a parallel kernel's products are cut in that many blocks over the threads
    (`blas_parallel.gemm_blocks`, `gemm_part`); None: one call each."""

    def __init__(self, work: Callable[[kir.Buffer], str | None] | None = None,
                 sizes: Callable[[Any], str] = _literal_size, views: bool = True,
                 parts: int | None = None) -> None:
        self.work = work
        self.parts = parts
        self.extents: dict[str, str | None] = {}  # loop variable -> its count of iterations
        self.sz = sizes
        self.views = views
        self.lines: list[str] = []
        self.marks: dict[str, int] = {}
        self.code: dict[int, str] = {}
        self.tmp = 0

    def emit(self, text: str, indent: int) -> None:
        self.lines.append("    " * indent + text)

    def block(self, stmts: Any, indent: int) -> None:
        for s in stmts:
            self.stmt(s, indent)

    def stmt(self, s: Any, indent: int) -> None:  # noqa: C901 - one case per statement
        if isinstance(s, kir.Alloc):
            b = s.buf
            if s.fill is None:
                top = indent == 1 or b.role == kir.SCRATCH
                worked = self.work is not None and top
                name = self.work(b) if worked else None
                # A work array the kernel allocates itself (`work` says None): the
                # allocation lowered in place, with no NumPy function compiled for it.
                new = "dgk.empty" if worked else "np.empty"
                self.emit(f"{b.name} = {name}" if name else
                          f"{b.name} = {new}({_shape(b.shape, self.sz)}, {dtype_name(b.dtype)})",
                          indent)
            elif self.work is not None and (indent == 1 or b.role == kir.SCRATCH):
                # A work array filled by a flat loop: Numba's np.full is a function of
                # its own, compiled once per process and type and linked into each
                # kernel that calls it.
                flat = f"{b.name}_fill"
                name = self.work(b) or \
                    f"dgk.empty({_shape(b.shape, self.sz)}, {dtype_name(b.dtype)})"
                self.emit(f"{b.name} = {name}", indent)
                self.emit(f"{flat} = dgk.flat({b.name})" if self.views else
                          f"{flat} = {b.name}.reshape({b.name}.size)", indent)
                self.emit(f"for {flat}_i in range({b.name}.size):", indent)
                self.emit(f"{flat}[{flat}_i] = {literal(s.fill, b.dtype)}", indent + 1)
            else:
                self.emit(f"{b.name} = np.full({_shape(b.shape, self.sz)}, "
                          f"{literal(s.fill, b.dtype)}, {dtype_name(b.dtype)})", indent)
        elif isinstance(s, kir.View):
            self.emit(f"{s.buf.name} = {self.view(s)}", indent)
        elif isinstance(s, kir.Let):
            note = f"  # {s.note}" if s.note else ""
            self.emit(f"{s.var.name} = {expr(s.value, self.sz)}{note}", indent)
        elif isinstance(s, kir.Store):
            op = f"{s.combine}=" if s.combine else "="
            idx = ", ".join(expr(i, self.sz) for i in s.index) or "0"
            self.emit(f"{s.buf.name}[{idx}] {op} {expr(s.value, self.sz)}", indent)
        elif isinstance(s, kir.Loop):
            rng = "numba.prange" if s.parallel else "range"
            bounds = [_bare(kir.const(s.extent), self.sz)]
            if s.start != 0 or s.step != 1:
                bounds.insert(0, _bare(kir.const(s.start), self.sz))
            if s.step != 1:
                bounds.append(str(s.step))
            self.emit(f"for {s.var.name} in {rng}({', '.join(bounds)}):", indent)
            self.extents[s.var.name] = bounds[-1] if len(bounds) == 1 else None
            self.block(s.body, indent + 1)
            if not s.body:
                self.emit("pass", indent + 1)
        elif isinstance(s, kir.If):
            self.emit(f"if {expr(s.cond, self.sz)}:", indent)
            self.block(s.then, indent + 1)
            if not s.then:
                self.emit("pass", indent + 1)
            if s.orelse:
                self.emit("else:", indent)
                self.block(s.orelse, indent + 1)
        elif isinstance(s, kir.Accum):
            self.accum(s, indent)
        elif isinstance(s, kir.Gemm):
            self.gemm(s, indent)
        elif isinstance(s, kir.LibCall):
            self.libcall(s, indent)
        elif isinstance(s, kir.Table):
            # A kernel's tables are constants it is passed (the writer lifts them); a
            # table printed here is built where it stands.
            values = ", ".join(literal(v) for v in s.values)
            self.emit(f"{s.buf.name} = np.array([{values}], {dtype_name(s.buf.dtype)})",
                      indent)
        elif isinstance(s, kir.Raise):
            self.emit(f"raise {s.kind}({s.message!r})", indent)
        elif isinstance(s, kir.Jump):
            self.emit(s.kind, indent)
        elif isinstance(s, kir.Comment):
            if s.node is not None:
                self.marks[s.node] = len(self.lines) + 1
            self.code[len(self.lines)] = "    " * indent + (f"# {s.node}" if s.node else "#")
            self.emit(f"# {s.text}", indent)
        else:
            raise TypeError(f"not a kernel IR statement: {s!r}")

    def view(self, s: kir.View) -> str:
        base = s.base.name
        if s.how == "alias":
            return base
        if s.how == "reshape":
            if not self.views:
                src = base if s.base.layout == "C" else f"dgk.contiguous({base})"
                return f"{src}.reshape({_shape(s.buf.shape, self.sz)})"
            if s.arg is not None:
                return f"dgk.strided({base}, {_shape(s.buf.shape, self.sz)}, " \
                       f"{self.split_strides(s)})"
            if len(s.buf.shape) == 1:
                return f"dgk.flat({base})"
            return f"dgk.reshaped({base}, {_shape(s.buf.shape, self.sz)})"
        if s.how == "bitcast":
            return (f"dgk.contiguous({base}).reshape({self.sz(s.base.size)}).view("
                    f"{dtype_name(s.buf.dtype)}).reshape({_shape(s.buf.shape, self.sz)})")
        if s.how == "transpose":
            axes = tuple(s.arg)
            if len(axes) < 2:
                return base
            if axes == tuple(reversed(range(len(axes)))):
                # .T keeps Numba's layout exact (C becomes F).
                return f"{base}.T"
            return f"dgk.permuted({base}, {axes})"
        return f"{base}[{_slice(s.arg, self.sz)}]"

    def split_strides(self, s: kir.View) -> str:
        """The byte strides of a reshape that splits each dim ``d`` of its base into
        ``s.arg[d]`` dims: within a group, the base dim's stride times the sizes of the
        dims after it."""
        steps, k = [], 0
        for d, n in enumerate(s.arg):
            for j in range(k, k + n):
                inner = [self.sz(e) for e in s.buf.shape[j + 1:k + n]]
                steps.append(" * ".join([f"{s.base.name}.strides[{d}]", *inner]))
            k += n
        return f"({steps[0]},)" if len(steps) == 1 else f"({', '.join(steps)})"

    def accum(self, s: kir.Accum, indent: int) -> None:
        acc = s.var.name
        if s.combine in ("add", "mul"):
            op = "+=" if s.combine == "add" else "*="
            value = s.value
            if value.dtype != s.var.dtype:
                value = kir.Cast(value, s.var.dtype)
            self.emit(f"{acc} {op} {expr(value, self.sz)}", indent)
            return
        better = ">" if s.combine == "maximum" else "<"
        self.tmp += 1
        tmp = f"{acc}_m{self.tmp}"
        self.emit(f"{tmp} = {expr(s.value, self.sz)}", indent)
        # A comparison is false against nan: where nan must win (np.max), test for it.
        nan = f" or {tmp} != {tmp}" if s.nan_propagates else ""
        self.emit(f"if {tmp} {better} {acc}{nan}:", indent)
        self.emit(f"{acc} = {tmp}", indent + 1)

    def gemm(self, g: kir.Gemm, indent: int) -> None:
        if g.m == 0 or g.n == 0 or g.batch == 0:
            return
        sz = self.sz
        m, n, k = sz(g.m), sz(g.n), sz(g.k)
        item = None
        if g.batch != 1:
            self.tmp += 1
            item = f"_g{self.tmp}"
            self.emit(f"for {item} in range({sz(g.batch)}):", indent)
            indent += 1
        c = g.c
        ldc = sz(c.ld) if c.ld is not None else None

        def opnd(o: kir.Operand, flat: bool = False) -> str:
            return _operand(o, item, flat=flat, sz=sz, views=self.views)

        if g.k == 0:
            if g.beta == 0:
                flat = opnd(c, True)
                self.emit(f"for _i in range({m}):", indent)
                self.emit(f"{flat}[_i * {ldc}:_i * {ldc} + {n}] = 0", indent + 1)
            return
        beta = literal(float(g.beta))
        call = "dgb.gemm_call("
        if g.part:
            # One block of `blas_parallel.gemm_part`'s fixed cut, inside the loop over them.
            p, *bounds = (v.name for v in g.part)
            call = f"{', '.join(bounds)} = dgb.gemm_part({p}, {self.extents[p]}, "
        elif self.parts:
            call = f"dgb.gemm_blocks({self.parts}, "
        if not (g.a.resolved and g.b.resolved):
            # Operand layouts known when Numba types the kernel (`dgb.operand`).
            if not HAVE_CBLAS:
                self.emit(f"dgb.gemm({g.a.buf.name}, {g.b.buf.name}, "
                          f"{opnd(c)}.reshape(({m}, {n})), {beta})", indent)
                return
            ops = []
            for o, t in ((g.a, g.ta), (g.b, g.tb)):
                name = o.buf.name
                if o.resolved:
                    ops.append((opnd(o), str(TRANS if t else NO_TRANS),
                                sz(o.ld)))
                else:
                    self.emit(f"{name}_o, {name}_t, {name}_l = dgb.operand({name})", indent)
                    ops.append((f"{name}_o", f"{name}_t", f"{name}_l"))
            (a, ta, la), (b, tb, lb) = ops
            self.emit(f"{call}{ta}, {tb}, {m}, {n}, {k}, {a}, {la}, {b}, {lb}, "
                      f"{beta}, {opnd(c)}, {ldc})", indent)
            return
        lda, ldb = sz(g.a.ld), sz(g.b.ld)
        if HAVE_CBLAS:
            self.emit(f"{call}{TRANS if g.ta else NO_TRANS}, "
                      f"{TRANS if g.tb else NO_TRANS}, {m}, {n}, {k}, "
                      f"{opnd(g.a)}, {lda}, {opnd(g.b)}, "
                      f"{ldb}, {beta}, {opnd(c)}, {ldc})", indent)
            return
        # No cblas: the product as loops over flat views (a fallback, not a fast path).
        a, b, cc = (opnd(o, True) for o in (g.a, g.b, c))
        at = (lambda i, p: f"{a}[{p} * {lda} + {i}]") if g.ta else (
            lambda i, p: f"{a}[{i} * {lda} + {p}]")
        bt = (lambda p, j: f"{b}[{j} * {ldb} + {p}]") if g.tb else (
            lambda p, j: f"{b}[{p} * {ldb} + {j}]")
        self.emit(f"for _i in range({m}):", indent)
        self.emit(f"for _j in range({n}):", indent + 1)
        init = f"{cc}[_i * {ldc} + _j]" if g.beta else literal(0, c.buf.dtype)
        self.emit(f"_s = {init}", indent + 2)
        self.emit(f"for _p in range({k}):", indent + 2)
        self.emit(f"_s += {at('_i', '_p')} * {bt('_p', '_j')}", indent + 3)
        self.emit(f"{cc}[_i * {ldc} + _j] = _s", indent + 2)

    def libcall(self, s: kir.LibCall, indent: int) -> None:
        try:
            template = LIBRARY[s.fn]
        except KeyError:
            raise TypeError(f"the Numba printer has no library routine {s.fn!r}") from None
        args = [expr(a, self.sz) if isinstance(a, (kir.Expr, kir.Buffer)) else
                self.sz(a) if isinstance(a, int) and not isinstance(a, bool) else literal(a)
                for a in s.args]
        outs = [b.name for b in s.outs]
        dtype = np.dtype(s.outs[0].dtype).name if s.outs else None
        self.emit(template.format(*args, out=outs[0] if outs else None, dtype=dtype), indent)


# Library routines a `kir.LibCall` names: the source template over its arguments ({0},
# {1}, ...), its first output ({out}) and that output's dtype ({dtype}).
LIBRARY: dict[str, str] = {
    # adds a float32 block to its float64 lanes as one vector (kernels.fold_lanes)
    "fold_lanes": "dgk.fold_lanes({out}, {0}, {1})",
    # a stable sort's permutation of each row of a (lines, length) buffer, ascending or
    # descending (kernels.argsort_lines); the flag a run-time bool, so that one compile
    # serves both orders (Numba compiles a function called with a literal once per value)
    "argsort_lines": "dgk.argsort_lines({0}, {out}, np.bool_({1}))",
    # ``out = x @ y`` over a batch: one BLAS call per item on the operands' memory, each
    # operand's layout (transpose flag, leading dimension) decided once; a call into a C
    # function compiled once, named by dtype so that the module's header can register
    # it before the kernel is loaded (blas.gemm_batched)
    "gemm_batched": "dgb.gemm_batched_{dtype}({0}, {1}, {out})",
    # the copy of a whole buffer into another of the same size
    "copy": "{out}.reshape({out}.size)[:] = dgk.contiguous({0}).reshape({0}.size)",
    # the inverse / determinant of each matrix of a (batch, n, n) buffer
    "inv": "dgk.batched_inv({0}, {out})",
    "det": "dgk.batched_det({0}, {out})",
    # the decompositions of each matrix of (batch, m, n) buffers, into the ops' packed
    # layouts, through NumPy's LAPACKE (lapack.py)
    "cholesky": "dgl.cholesky({0}, {out}, {1})",
    "cholesky_info": "dgl.cholesky_info({0}, {out})",
    "solve_triangular": "dgl.solve_triangular({0}, {1}, {out}, {2}, {3})",
    "eigh": "dgl.eigh({0}, {out}, {1})",
    "svd": "dgl.svd({0}, {out}, {1})",
    "qr": "dgl.qr({0}, {out}, {1})",
    "pinv": "dgl.pinv({0}, {out}, {1}, {2})",
    "matrix_exp": "dgl.matrix_exp({0}, {out})",
    "lu": "dgl.lu({0}, {out})",
    # max-pool loops, compiled once as helpers (blas.py): the indices of in-plane
    # windows, the gather of their values and the gradient's scatter-add
    "max_pool_indices": "dgb.max_pool_indices({0}, {out}, {1})",
    "max_pool_indices_2x2": "dgb.max_pool_indices_2x2({0}, {out}, {1})",
    "pool_gather": "dgb.pool_gather({0}, {1}, {out})",
    "pool_scatter": "dgb.pool_scatter({0}, {1}, {out})",
    # a convolution's window copies and its per-sample products: calls into C functions
    # compiled once, named by dtype as gemm_batched is (blas.conv_*)
    "conv_im2col": "dgb.conv_im2col_{dtype}({0}, {out}, {1})",
    "conv_col2im": "dgb.conv_col2im_{dtype}({0}, {out}, {1})",
    "conv_conv2d": "dgb.conv_conv2d_{dtype}({0}, {1}, {2}, {out}, {3})",
    "conv_wgrad": "dgb.conv_wgrad_{dtype}({0}, {1}, {out}, {2})",
    "conv_dgrad": "dgb.conv_dgrad_{dtype}({0}, {1}, {out}, {2})",
    # a recurrent layer's time loop, forward and backward: calls into C functions
    # compiled once, named by dtype as the batched product is (recurrent_kernels); the
    # first five arguments are the flags, the arrays are passed C-ordered
    "rnn_forward": ("dgr.rnn_forward_{dtype}({0}, {1}, {2}, {3}, {4}, "
                    "dgk.contiguous({5}), dgk.contiguous({6}), "
                    "dgk.contiguous({7}), dgk.contiguous({8}), "
                    "dgk.contiguous({9}), dgk.contiguous({10}), "
                    "dgk.contiguous({11}), dgk.contiguous({12}), "
                    "dgk.contiguous({13}), {out})"),
    "rnn_backward": ("dgr.rnn_backward_{dtype}({0}, {1}, {2}, {3}, {4}, "
                    "dgk.contiguous({5}), dgk.contiguous({6}), "
                    "dgk.contiguous({7}), dgk.contiguous({8}), "
                    "dgk.contiguous({9}), dgk.contiguous({10}), "
                    "dgk.contiguous({11}), {out})"),
    "rnn_weight_grads": ("dgr.rnn_weight_grads_{dtype}({0}, {1}, {2}, {3}, {4}, "
                         "dgk.contiguous({5}), dgk.contiguous({6}), "
                         "dgk.contiguous({7}), {out}, {8})"),
}


def block_lines(stmts: Any, indent: int = 1,
                work: Callable[[kir.Buffer], str | None] | None = None) -> list[str]:
    """Statements (a `kir.Block` or a list) as source lines at ``indent``."""
    p = Printer(work)
    p.block(stmts.stmts if isinstance(stmts, kir.Block) else stmts, indent)
    return p.lines


def function(name: str, params: Callable[[], list[str]], stmts: Any,
             work: Callable[[kir.Buffer], str | None] | None = None,
             sizes: Sizes | None = None, code: list | None = None,
             parts: int | None = None, zero_d: tuple = ()) -> tuple[list[str], dict[str, int]]:
    """A kernel: ``def name(params):``, the sizes it reads from its arguments (``sizes``;
    None prints them as literals), the statements, ``return 0``. ``params()`` is called
    after the body is printed (the work arrays are named while printing). Returns the
    lines and the 1-based line of each graph node's comment (`Printer.marks`); ``code``,
    when given, receives the lines as the compiled module has them: the same lines with
    comments reduced to the node's name, so that kernels differing only in their sizes
    and comments are one module. ``parts``: as `Printer`'s. ``zero_d``: the parameters
    that hold 0-d values, taken as 0-d arrays (or ``(1,)`` ones) and indexed as ``(1,)``
    through `kernels.one_d`."""
    parallel = any(isinstance(s, kir.Loop) and s.parallel for s in kir.walk(stmts))
    p = Printer(work, sizes if sizes is not None else _literal_size, views=not parallel,
                parts=parts)
    p.block(stmts, 1)
    p.emit("return 0", 1)
    head = [f"def {name}({', '.join(params())}):", *zero_d_views(zero_d)]
    defs = list(zip(sizes.defs, sizes.values)) if sizes is not None else []
    if code is not None:
        code[:] = head + ["    " + d for d, _ in defs] + [p.code.get(k, line)
                                                           for k, line in enumerate(p.lines)]
    # The reader's copy says what each size is here.
    head += [f"    {d}  # {v}" for d, v in defs]
    return head + p.lines, {k: v + len(head) for k, v in p.marks.items()}


def zero_d_views(names: tuple) -> list[str]:
    """The lines rebinding each 0-d parameter in ``names`` to its ``(1,)`` view."""
    return [f"    {p} = dgk.one_d({p})" for p in names]
