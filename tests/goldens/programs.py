"""The PyTorch parity programs: each written once against a library module.

A program is ``fn(lib, F, *inputs)`` where ``lib`` is ``torch`` or ``dualgraph`` and ``F``
its functional namespace (``torch.nn.functional`` / ``dualgraph.nn.functional``). Its
inputs are fixed arrays (no RNG) that `Program.build_inputs` turns into ``lib`` tensors, so
the compute part can be passed to ``dg.compile`` as it is. `execute` runs a program the same
way for both libraries: call it, then (unless it is a script, which calls autograd itself)
backward from every output that requires grad with a fixed non-uniform seed gradient (so a
swapped axis shows), and encode outputs, the inputs'
``.grad`` and any exception as plain JSON values.

Besides the programs written here, every row of the op case table (tests/ops/cases.py) is
a program (`case_row_programs`, at the end): a new op's case row is its golden program.

``record.py`` (needs torch) stores PyTorch's results in ``goldens.json``;
``test_goldens.py`` (never imports torch) checks dualgraph eager and compiled against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class In:
    """One tensor input: fixed values, converted with ``lib.tensor(values, requires_grad)``."""

    values: np.ndarray
    requires_grad: bool = False


def leaf(values: Any, dtype: str = "float32", rg: bool = True) -> In:
    return In(np.asarray(values, dtype=dtype), rg)


def const(values: Any, dtype: str = "float32") -> In:
    return In(np.asarray(values, dtype=dtype), False)


def grid(shape: tuple, lo: float, hi: float, dtype: str = "float32", rg: bool = True) -> In:
    """Distinct evenly spaced values (no ties, no RNG), reshaped."""
    return In(np.linspace(lo, hi, math.prod(shape)).astype(dtype).reshape(shape), rg)


@dataclass(frozen=True)
class Program:
    """A parity program. ``covers``: the registry ops (``dualgraph.ops.OPS``) whose forward
    and gradient it exercises through their public spelling (a hand-written program names
    only those no recorded case row covers: backward ops, bound internals). ``compile``: the
    program is a pure function of its inputs, so it also runs under ``dg.compile``.
    ``match``: a phrase (case-insensitive) both libraries' error messages must contain, when
    it raises."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple = ()
    covers: tuple[str, ...] = ()
    compile: bool = True
    match: str | None = None
    source: str = ""  # the program's group: "ops" (registry ops), "views", "losses", ...
    # Backward from every output that requires grad (a script calls autograd itself).
    backward: bool = True

    def build_inputs(self, lib: Any) -> tuple:
        out = []
        for a in self.inputs:
            if isinstance(a, In):
                out.append(lib.tensor(a.values.copy(), requires_grad=a.requires_grad))
            else:
                out.append(a)  # Python scalars pass as they are
        return tuple(out)


PROGRAMS: dict[str, Program] = {}


def program(*inputs: Any, covers: tuple = (), compile: bool = True,  # noqa: A002
            match: str | None = None, source: str = "ops") -> Callable:
    """Register ``fn(lib, F, *inputs)`` as a program named after the function (one that does
    not compile runs no backward of its outputs: it is a script, or recorded that way)."""
    def deco(fn: Callable) -> Callable:
        name = fn.__name__
        assert name not in PROGRAMS, name
        PROGRAMS[name] = Program(name, fn, tuple(inputs), tuple(covers), compile, match, source,
                                 backward=compile)
        return fn
    return deco


def script(covers: tuple = (), match: str | None = None, source: str = "ops") -> Callable:
    """A program that builds its own inputs and calls autograd itself (eager only)."""
    return program(covers=covers, compile=False, match=match, source=source)


# --------------------------------------------------------------------- spellings
# Only where the two libraries spell the same thing differently *on purpose*; programs that
# check dualgraph's PyTorch aliases (``dg.autograd.grad``) use ``lib.autograd`` directly.


def _is_torch(lib: Any) -> bool:
    return lib.__name__ == "torch"


def backward_fn(lib: Any) -> Callable:
    """``torch.autograd.backward`` / ``dg.backward``."""
    return lib.autograd.backward if _is_torch(lib) else lib.backward


def grad_fn(lib: Any) -> Callable:
    """``torch.autograd.grad`` / ``dg.grad``."""
    return lib.autograd.grad if _is_torch(lib) else lib.grad


# ---------------------------------------------------------------------- running


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and hasattr(v, "detach")


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.") if not isinstance(dtype, np.dtype) else dtype.name


def seed_for(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """The backward seed: 1.0 for a scalar, else distinct values in [1, 2]."""
    n = math.prod(shape)
    return np.linspace(1.0, 2.0, n).astype(dtype).reshape(shape) if n > 1 else \
        np.ones(shape, dtype)


def flatten(v: Any) -> list:
    if isinstance(v, (tuple, list)):
        return [x for item in v for x in flatten(item)]
    return [v]


def encode(v: Any) -> dict:
    """A JSON-able record of a value; floats stay exact (float32 widens to float64 exactly,
    and JSON keeps a float64's shortest repr, -0.0 and NaN included)."""
    if v is None:
        return {"kind": "none"}
    if isinstance(v, (tuple, list)):
        return {"kind": "tuple", "items": [encode(x) for x in v]}
    if isinstance(v, str):
        return {"kind": "str", "value": v}
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": v}
    if _is_tensor(v):
        data = np.asarray(v.detach().numpy())
        return {
            "kind": "tensor", "dtype": _dtype_name(v.dtype), "shape": list(v.shape),
            "requires_grad": bool(v.requires_grad), "data": data.ravel().tolist(),
        }
    raise TypeError(f"cannot encode a {type(v).__name__}")


def execute(lib: Any, F: Any, prog: Program, fn: Callable | None = None) -> dict:
    """Run ``prog`` (or ``fn``, its compiled form) on fresh inputs and encode the results."""
    inputs = prog.build_inputs(lib)
    run = fn if fn is not None else (lambda *a: prog.fn(lib, F, *a))
    grad_mode = lib.is_grad_enabled()
    try:
        out = run(*inputs)
        for o in flatten(out) if prog.backward else ():  # a script ran its own backward
            if _is_tensor(o) and o.requires_grad:
                seed = lib.tensor(seed_for(tuple(o.shape), np.dtype(_dtype_name(o.dtype))))
                o.backward(seed, retain_graph=True)
    except Exception as e:  # noqa: BLE001 - the error is the recorded result
        # The exception object itself is for isinstance checks; record.py drops it.
        return {"error": {"type": type(e).__name__, "message": str(e)[:300]}, "exception": e}
    finally:
        # A program that fails inside a grad-mode block must not leak the mode to the next.
        lib.set_grad_enabled(grad_mode)
    grads = [encode(x.grad) for x in inputs if _is_tensor(x) and x.requires_grad]
    return {"outputs": encode(out), "grads": grads}


# ============================================================================
# Registry ops, through their public spellings (forward and gradient).
# ============================================================================


@program(grid((2, 3), 0.3, 2.0))
def unary_math(lib, F, x):
    return lib.exp(x), x.log(), lib.sqrt(x), x.tanh(), lib.sigmoid(x), x.sin(), lib.cos(x)


@program(grid((2, 3), -2.1, 1.9), covers=("threshold_backward",))
def unary_kinks(lib, F, x):
    return lib.relu(x), x.abs(), -x, F.relu(x), x.neg()


@program(grid((2, 3), -1.5, 1.5), grid((2, 3), 0.5, 2.0), grid((3,), 0.7, 1.3))
def binary_arith(lib, F, a, b, c):
    return a + b, a - c, a * b, a / c, a ** 2, b ** a, 2.0 - a, 1.0 / b, 2.0 ** a, a.add(c)


@program(grid((3, 1), 0.5, 1.5), grid((3, 4), -1.0, 1.0))
def expand(lib, F, x, w):
    return x.expand(3, 4) * w, x.expand(-1, 4).sum()


@program(const([1.0, 2.0, 3.0, 4.0]), const([2.0, 2.0, 2.0, 5.0]), grid((4,), -1.0, 1.0))
def compare_where(lib, F, a, b, x):
    return a < b, a <= b, a > b, a >= b, a == b, a != b, lib.where(a > b, x, x * 2)


@program(leaf([1.0, -2.0, 3.0, 0.5]), leaf([2.0, -2.0, -1.0, 0.25]))
def maximum_minimum(lib, F, a, b):
    # index 1 is a tie: PyTorch splits the gradient half and half
    return lib.maximum(a, b), lib.minimum(a, b)


@program(leaf([1.0, -2.0, 3.0, 0.5, -1.0]), source="autograd")
def clamp_at_bounds(lib, F, x):
    # 1.0 and -1.0 sit on the bounds: PyTorch's clamp passes their whole gradient
    return x.clamp(-1.0, 1.0), x.clamp(min=0.0), x.clamp(max=0.75)


@program(grid((2, 3), -1.0, 2.0))
def reductions(lib, F, x):
    return x.sum(), x.sum(dim=1), x.mean(), x.mean(dim=0), x.max(), lib.sum(x, dim=0), \
        lib.mean(x), lib.max(x)


@program(leaf([1.0, 3.0, 3.0, 2.0]))
def max_ties(lib, F, x):
    return x.max()


@program(grid((2, 3), -1.0, 1.0))
def shape_ops(lib, F, x):
    return (x.reshape(3, 2), x.view(6), x.T, x.permute(1, 0), x.flatten(), x.unsqueeze(0),
            x.reshape(1, 2, 3).squeeze(0), x.reshape(-1, 2))


@program(grid((3, 4), -1.0, 1.0), covers=("scatter",))
def basic_indexing(lib, F, x):
    return x[1], x[0:2, 1:3], x[:, -1], x[None, 1], x[..., ::2], x[2, 3]


@program(grid((3, 2), -1.0, 1.0))
def advanced_indexing(lib, F, x):
    # A mask computed from the data has a data-dependent shape: eager only
    # (`advanced_indexing_data_mask`); a constant mask compiles.
    return x[lib.tensor([0, 2, 0])], x[lib.tensor([True, False, True])], x[[-1, 0], 1]


@program(grid((2, 3), -1.0, 1.0), grid((2, 3), 0.5, 1.5), grid((1, 3), 2.0, 3.0))
def cat_stack(lib, F, a, b, c):
    return lib.cat([a, c], dim=0), lib.stack([a, b], dim=1), lib.cat((a, b), 1), \
        lib.stack([a, b])


@program(grid((3,), 0.5, 1.5), grid((3,), -1.0, 1.0, "float64"), const([1, 2, 3], "int64"))
def astype(lib, F, x, d, i):
    return x.double() * d, x.to(lib.float64) + d, i.float() * x, d.float()


@program(grid((2, 3), -1.0, 1.0), grid((3, 4), 0.5, 1.5), grid((3,), -0.5, 0.5),
         grid((2, 2, 3), -1.0, 1.0))
def matmul(lib, F, a, b, v, t):
    return a @ b, lib.matmul(v, b), t @ b, a @ v


@program(grid((2, 3), -1.0, 1.0), grid((4, 3), -0.5, 0.5), grid((4,), 0.1, 0.4))
def linear(lib, F, x, w, b):
    return F.linear(x, w, b), F.linear(x, w)


@program(grid((3,), 0.5, 1.5), covers=("stop_gradient",))
def detach_constant(lib, F, x):
    c = x.detach() * 2
    return (x * c).sum()


@program(grid((2, 4), -1.0, 2.0))
def softmax_family(lib, F, x):
    return F.softmax(x, dim=1), F.log_softmax(x, dim=1), x.softmax(dim=0), \
        x.log_softmax(-1)


@program(grid((2, 3), -1.0, 1.0), grid((2, 3), 0.0, 0.5, rg=False), const([2, 0], "int64"),
         grid((2, 3), 0.0, 1.0, rg=False))
def losses(lib, F, x, y, labels, targets):
    return (F.mse_loss(x, y), F.mse_loss(x, y, reduction="sum"), F.cross_entropy(x, labels),
            F.cross_entropy(x, labels, reduction="sum"),
            F.binary_cross_entropy_with_logits(x, targets))


@script(covers=("scatter",), source="autograd")
def getitem_double_backward(lib, F):
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    (g,) = grad_fn(lib)((x[1:3] ** 2).sum(), [x], create_graph=True)
    (g * g).sum().backward()
    return g, x.grad


# ============================================================================
# Views and in-place ops, eager and compiled.
# ============================================================================
VIEWS = "views"


@program(leaf([1.0, 2.0, 3.0]), source=VIEWS, covers=("view_scatter",))
def inplace_mul_through_view(lib, F, x):
    y = x * 1
    y[0:2].mul_(10)
    return y


@program(leaf([1.0, 2.0, 3.0]), source=VIEWS)
def inplace_mul_through_view_sum(lib, F, x):
    y = x * 1
    y[0:2].mul_(10)
    return y.sum()


@program(leaf([1.0, 2.0, 3.0]), leaf([5.0, 7.0]), source=VIEWS, covers=("view_scatter",))
def copy_into_view(lib, F, x, w):
    y = x * 1
    y[0:2].copy_(w)
    return y


@program(leaf([1.0, 2.0, 3.0]), source=VIEWS)
def view_sees_base_inplace(lib, F, x):
    y = x * 1
    v = y[0:2]
    y.mul_(2)
    return (v * 3).sum()


@program(leaf([1.0, 2.0, 3.0]), source=VIEWS,
         match="leaf Variable that requires grad is being used in an in-place operation")
def inplace_on_view_of_leaf(lib, F, a):
    a[0:1].mul_(2)
    return a


@program(grid((2, 2), 1.0, 4.0), source=VIEWS,
         match="leaf Variable that requires grad is being used in an in-place operation")
def iadd_on_transpose_of_leaf(lib, F, a):
    t = a.T
    t += 1
    return t


@program(grid((3, 4), -1.0, 2.0), grid((3,), 0.5, 1.5), source=VIEWS, covers=("view_scatter",))
def write_through_transposed_view(lib, F, x, w):
    y = x * 1
    t = y.T
    t[1:3, 0].mul_(w[:2])
    t[0].copy_(w * 2)
    return y * y


@program(grid((6,), -1.0, 1.5), source=VIEWS)
def view_of_view_overlapping_write(lib, F, x):
    y = x * 2
    v = y.reshape(2, 3)[1]
    v[1:].add_(v[:2] * 3)
    return y * y


@program(grid((4,), 0.5, 2.0), source=VIEWS)
def sibling_views_see_writes(lib, F, x):
    y = x * 1
    a, b = y[0:3], y[1:4]
    a.mul_(2)
    b.add_(b * 1)
    z = y * 1
    y.mul_(3)
    return a * a, z


@program(grid((2, 3), -1.0, 1.0), grid((3,), 0.5, 1.5), source=VIEWS)
def setitem_rows(lib, F, x, w):
    y = x * 1
    y[0] = w
    y[1, 1:] = 0.5
    return y * 3


@program(leaf([1.0, 2.0, 3.0]), source=VIEWS,
         match="leaf Variable that requires grad is being used in an in-place operation")
def inplace_on_leaf(lib, F, a):
    a.mul_(2)
    return a


@script(source=VIEWS)
def backward_same_output_twice(lib, F):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    g = lib.tensor([1.0, 1.0, 1.0])
    backward_fn(lib)([y, y], [g, g])
    return x.grad


@program(leaf(3.0), source=VIEWS)
def div_then_iadd(lib, F, x):
    y = x / 2.0
    y += 1
    return y


@program(leaf([1.0, 2.0]), source=VIEWS)
def pow_then_iadd(lib, F, x):
    y = x ** 2
    y += 1
    return y


@program(leaf([1.0, 2.0]), source=VIEWS, match="modified by an inplace operation")
def exp_then_iadd(lib, F, x):
    y = x.exp()  # exp's gradient reads its output: changing it must raise
    y += 1
    return y


@program(leaf([1.0, float("nan"), 3.0]), source=VIEWS)
def max_with_nan(lib, F, x):
    return x.max()


@script(source=VIEWS, match="has changed the type of value")
def hook_changes_grad_dtype(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g.double())
    y.sum().backward()
    return x.grad


@script(source=VIEWS)
def zero_dim_grad_zero_(lib, F):
    x = lib.tensor(2.0, requires_grad=True)
    (x * x).backward()
    before = x.grad.clone()
    x.grad.zero_()
    return before, x.grad


@script(source=VIEWS)
def zero_dim_grad_inplace_add(lib, F):
    x = lib.tensor(2.0, requires_grad=True)
    (x * x).backward()
    x.grad.add_(1)
    x.grad.mul_(2)
    g = x.grad
    g += 1
    return x.grad


# ============================================================================
# Programs about values (compiled and eager must both match).
# ============================================================================
VALUES = "values"


@program(grid((3,), 0.5, 1.5), source=VALUES)
def no_grad_block(lib, F, x):
    with lib.no_grad():
        c = x * 2
    return (x * c).sum()


@program(const([-0.0, 1.0, -2.0, 0.0]), source=VALUES)
def add_zero_keeps_ieee(lib, F, x):
    return x + 0.0, x - 0.0, 0.0 + x


@program(const([1, 2, 3], "int64"), source=VALUES, match="negative integer powers")
def int_pow_negative(lib, F, x):
    return x ** -1


@program(grid((3,), 0.5, 1.5), source=VALUES)
def clone_and_data(lib, F, x):
    return x.clone() * 2, x.data * 3 + x


# ============================================================================
# Where a library could silently diverge from PyTorch.
# ============================================================================
DIVERGENCES = "divergences"


@program(grid((2, 3), -1.0, 1.0), source=DIVERGENCES)
def transpose_2d(lib, F, x):
    return x.transpose(0, 1)


@program(grid((2, 3, 4), -1.0, 1.0), source=DIVERGENCES)
def transpose_3d(lib, F, x):
    return x.transpose(0, 1), x.transpose(0, 2), x.transpose(-1, -2), x.transpose(1, 1)


@program(grid((2, 3), -1.0, 1.0), source=DIVERGENCES, match="out of range")
def transpose_dim_out_of_range(lib, F, x):
    return x.transpose(0, 5)


@program(grid((3, 4, 2), -1.0, 1.0), source=DIVERGENCES)
def permute_3d(lib, F, x):
    return x.permute(2, 0, 1), x.permute(0, 2, 1)


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def max_dim(lib, F, x):
    values, indices = x.max(dim=1)
    return values, indices


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def max_dim_named(lib, F, x):
    r = x.max(dim=0)
    return r.values, r.indices


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def max_dim_positional(lib, F, x):
    return lib.max(x, 1), x.max(-1)


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def min_dim(lib, F, x):
    values, indices = x.min(dim=1)
    return values, indices


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def min_full(lib, F, x):
    return x.min(), lib.min(x)


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def max_dim_keepdim(lib, F, x):
    return x.max(dim=1, keepdim=True)


@program(grid((3, 4), -1.0, 2.0), source=DIVERGENCES)
def arg_reductions(lib, F, x):
    v, i = x.min(dim=0)
    return (v, i, x.max(1, keepdim=True).values, lib.argmax(x), x.argmax(dim=1),
            lib.argmin(x, dim=0, keepdim=True), x.argmin(), lib.min(x), x.amin(dim=(0, 1)))


@program(leaf([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), source=DIVERGENCES)
def max_min_dim_ties(lib, F, x):
    # The values' gradient goes to the index returned (the first occurrence), not shared.
    return x.max(dim=1).values * lib.tensor([1.0, 2.0]), x.min(0).values, x.argmax(dim=1)


@program(leaf([[1.0, float("nan"), 3.0], [2.0, 5.0, float("nan")]]), source=DIVERGENCES)
def argmax_nan(lib, F, x):
    # A nan is the max (and the min): its index is returned and the gradient goes to it.
    return x.argmax(dim=1), x.argmin(dim=1), x.max(dim=1).values.sum() * 1, x.argmax()


@program(grid((2, 3), -1.0, 2.0), source=DIVERGENCES)
def sum_mean_keepdim(lib, F, x):
    return x.sum(dim=1, keepdim=True), x.mean(dim=0, keepdim=True), \
        lib.sum(x, dim=(0, 1), keepdim=True)


@program(grid((2, 1, 3), -1.0, 1.0), source=DIVERGENCES)
def squeeze_unsqueeze(lib, F, x):
    return x.squeeze(1), x.squeeze(0), x.squeeze(), x.unsqueeze(-1), x.unsqueeze(3), \
        x.squeeze(-2)


@program(grid((2, 1), -1.0, 1.0), source=DIVERGENCES, match="out of range")
def squeeze_dim_out_of_range(lib, F, x):
    return x.squeeze(5)


@program(grid((2, 3), -1.0, 1.0), source=DIVERGENCES, match="out of range")
def unsqueeze_dim_out_of_range(lib, F, x):
    return x.unsqueeze(4)


@program(grid((2, 3), -1.0, 1.0), source=DIVERGENCES, match="out of range")
def sum_dim_out_of_range(lib, F, x):
    return x.sum(dim=2)


@program(grid((3,), -1.0, 1.0), source=DIVERGENCES, match="out of bounds")
def index_out_of_range(lib, F, x):
    return x[3]


@program(grid((2, 3), -1.0, 1.0), grid((4,), 0.0, 1.0), source=DIVERGENCES)
def shape_mismatch_add(lib, F, a, b):
    return a + b


@program(grid((2, 3), -1.0, 1.0), grid((4, 2), 0.0, 1.0), source=DIVERGENCES)
def shape_mismatch_matmul(lib, F, a, b):
    return a @ b


@program(grid((2, 3), -1.0, 1.0), source=DIVERGENCES)
def shape_mismatch_reshape(lib, F, x):
    return x.reshape(4, 2)


@program(grid((2, 3), -1.0, 1.0), grid((2, 2), 0.0, 1.0), source=DIVERGENCES)
def shape_mismatch_cat(lib, F, a, b):
    return lib.cat([a, b], dim=0)


@program(grid((3,), 0.5, 1.5), source=DIVERGENCES)
def set_grad_enabled_context(lib, F, x):
    with lib.set_grad_enabled(False):
        y = x * 2
    z = x * 3
    return y, z


@script(source=DIVERGENCES)
def set_grad_enabled_function(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    lib.set_grad_enabled(False)
    try:
        y = x * 2
    finally:
        lib.set_grad_enabled(True)
    return y, x * 3


@script(source=DIVERGENCES)
def autograd_grad_alias(lib, F):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (g,) = lib.autograd.grad((x * x).sum(), [x])
    return g, x.grad


@script(source=DIVERGENCES)
def autograd_backward_alias(lib, F):
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    lib.autograd.backward([y], [lib.tensor([1.0, 0.5, 0.25])])
    return x.grad


@script(source=DIVERGENCES)
def format_zero_dim(lib, F):
    t = lib.tensor(2.5)
    x = lib.tensor(1.25, requires_grad=True)
    return f"{t:.4f}", f"{x * 2:.2f}", f"{lib.tensor(3, dtype=lib.int64):d}"


# dtype promotion: PyTorch's category rule (an int never widens a float, a Python number or
# a 0-d tensor of the same category never widens a dimensioned tensor).


@program(const([1, 2, 3], "int64"), const([2, 2, 2], "int64"), source=DIVERGENCES)
def promote_int_with_python_scalars(lib, F, i, j):
    return i * 2.5, i + 2, i * 2.0, i ** 0.5, i ** 2, i / j, i / 2, 2.5 - i


@program(const([1, 2, 3], "int64"), grid((3,), 0.5, 1.5), grid((3,), 0.5, 1.5, "float64"),
         source=DIVERGENCES)
def promote_int_with_float_tensors(lib, F, i, f, d):
    return i * f, i * d, f + i, lib.where(i > 1, i, f), lib.cat([i, f])


@program(grid((3,), 0.5, 1.5), leaf(2.0, "float64"), leaf(3.0, "float32"), source=DIVERGENCES)
def promote_zero_dim_double(lib, F, f, d0, f0):
    return f * d0, d0 + f, f0 * d0, f + f0


@program(const([True, False, True], "bool"), const([1, 2, 3], "int64"),
         const([1, 2, 3], "int32"), source=DIVERGENCES)
def promote_bool_and_int_widths(lib, F, b, i, i32):
    return b + i, b * 1.5, i32 + i, i32 * 2, i32.sum(), i.sum(), b.sum()


@program(const([1, 2, 3], "int64"), source=DIVERGENCES, match="floating point")
def int_mean_raises(lib, F, i):
    return i.mean()


@script(source=DIVERGENCES)
def creation_dtypes(lib, F):
    return (lib.tensor(2.0), lib.tensor([1, 2]), lib.tensor(True), lib.arange(5),
            lib.arange(0.0, 1.0, 0.25), lib.zeros(2, 3), lib.ones(2, dtype=lib.float64),
            lib.full((2,), 1.5), lib.tensor(np.array([1.0, 2.0])))


# ============================================================================
# Autograd behaviours PyTorch defines (API.md A2, A3).
# ============================================================================
AUTOGRAD = "autograd"


@script(source=AUTOGRAD, match="grad can be implicitly created only for scalar outputs")
def backward_non_scalar_raises(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward()


@script(source=AUTOGRAD, match="retain_graph")
def backward_twice_raises(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


@script(source=AUTOGRAD, match="modified by an inplace operation")
def saved_tensor_modified_raises(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = (y * y).sum()
    y.mul_(2)
    z.backward()


@script(source=AUTOGRAD)
def retain_grad_non_leaf(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward()
    return y.grad, x.grad


@script(source=AUTOGRAD)
def grad_of_grad(lib, F):
    x = lib.tensor(1.5, requires_grad=True)
    (g,) = grad_fn(lib)(x ** 3, [x], create_graph=True)
    g.backward()
    return g, x.grad


@script(source=AUTOGRAD)
def grad_accumulates(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    return x.grad



# ============================================================================
# Math, tests and bitwise ops, statistics, casts, constructors, activations.
# Inputs stay off every kink (no integer or half for the rounding ops, no bound of a
# clipped activation), where the two libraries' gradient conventions could differ.
# ============================================================================
SURFACE = "surface"


@program(grid((2, 3), 0.15, 0.85), source=SURFACE)
def unary_trig_hyperbolic(lib, F, x):
    return (lib.tan(x), x.asin(), lib.acos(x), x.atan(), lib.sinh(x), x.cosh(), lib.asinh(x),
            (x + 1.0).acosh(), lib.atanh(x), lib.erf(x - 0.5), x.erf())


@program(grid((2, 3), 0.3, 2.0), source=SURFACE)
def unary_logs_exps(lib, F, x):
    return (lib.log2(x), x.log10(), lib.log1p(x), x.expm1(), lib.exp2(x), x.rsqrt(),
            lib.square(x), x.reciprocal(), lib.rsqrt(x), x.square(), x.exp2())


@program(leaf([[-2.25, -1.75, -0.25], [0.25, 1.5, 2.5]]), const([-3, 0, 4], "int64"),
         source=SURFACE)
def unary_rounding(lib, F, x, k):
    # 1.5 and 2.5 round half to even; the rounding functions' gradient is 0.
    return (lib.sign(x), x.floor(), lib.ceil(x), x.round(), lib.trunc(x), x.frac(),
            lib.frac(x) * x, k.sign(), k.floor(), lib.round(k))


@program(grid((2, 3), -1.9, 2.1), grid((3,), 0.6, 1.4), const([7, -7, 5, -5], "int64"),
         const([2, 2, -3, -3], "int64"), source=SURFACE)
def binary_rounding_ops(lib, F, x, y, k, j):
    return (lib.copysign(x, y - 1.0), x.copysign(-1.0), lib.fmod(x, y), x.fmod(-y),
            x % y, x % -y, lib.remainder(x, y), 2.5 % y.detach(), lib.atan2(x, y - 1.0),
            x.atan2(y), k % j, k // j, lib.fmod(k, j), lib.remainder(k, j), k % 3, 7 // j,
            lib.div(k, j, rounding_mode="floor"), lib.div(k, j, rounding_mode="trunc"))


@program(const([[2.75, -2.75, 1.25], [-0.5, 3.5, -3.5]]), const([1.5, -1.5, 2.0]),
         source=SURFACE)
def floor_trunc_division(lib, F, x, y):
    return (x // y, lib.floor_divide(x, y), lib.div(x, y, rounding_mode="floor"),
            lib.div(x, y, rounding_mode="trunc"), x.div(y, rounding_mode="trunc"), x // 2,
            lib.div(x, y))


@program(grid((2, 3), -1.5, 1.5), grid((3,), -1.0, 2.0), grid((3,), 0.1, 0.9), source=SURFACE)
def binary_compositions(lib, F, a, b, w):
    return (lib.lerp(a, b, 0.3), a.lerp(b, 0.8), lib.lerp(a, b, w), lib.logaddexp(a, b),
            a.logaddexp(b * 3.0), lib.add(a, b, alpha=2.0), lib.sub(a, b, alpha=0.5),
            a.add(b, alpha=-1.5), a.sub(b, alpha=3), lib.mul(a, b), lib.div(a, w),
            lib.pow(w, b), lib.true_divide(a, w))


@program(const([1.0, float("nan"), float("inf"), -float("inf"), 0.0, -2.5]),
         const([1.0, float("nan"), float("inf"), float("inf"), 1e-9, -2.5000001]), source=SURFACE)
def tests_nan_inf_close(lib, F, x, y):
    return (lib.isnan(x), x.isinf(), lib.isfinite(x), lib.isclose(x, y),
            x.isclose(y, equal_nan=True), lib.isclose(x, y, rtol=0.0, atol=1e-6),
            lib.isnan(lib.tensor([1, 2])), lib.isfinite(lib.tensor([1, 2])))


@script(source=SURFACE)
def allclose_bool(lib, F):
    a = lib.tensor([1.0, 2.0, 3.0])
    return (lib.allclose(a, a + 1e-7), lib.allclose(a, a + 1e-3), a.allclose(a * 1.001, rtol=0.01),
            lib.allclose(lib.tensor([float("nan")]), lib.tensor([float("nan")]), equal_nan=True))


@program(const([5, -7, 3, 12], "int64"), const([6, 1, -2, 3], "int64"),
         const([True, False, True, False], "bool"), const([True, True, False, False], "bool"),
         source=SURFACE)
def bitwise_ops(lib, F, k, j, a, b):
    return (k & j, k | j, k ^ j, ~k, k << 2, k >> 1, a & b, a | b, a ^ b, ~a, k & 3, 1 | k,
            lib.bitwise_and(k, j), lib.bitwise_or(a, b), lib.bitwise_xor(k, 5),
            lib.bitwise_not(a), k << j.abs(), k >> j.abs())


@program(const([0.0, 1.5, -2.0, 0.0]), const([1, 0, 3, 0], "int64"),
         const([True, False, True, False], "bool"), source=SURFACE)
def logical_ops(lib, F, x, k, a):
    return (lib.logical_and(x, k), lib.logical_or(x, a), lib.logical_xor(k, a),
            lib.logical_not(x), x.logical_and(a), k.logical_or(x), lib.logical_not(a))


@program(grid((3, 4), -1.5, 2.0), source=SURFACE)
def statistics(lib, F, x):
    return (x.var(), x.std(), lib.var(x, 1), lib.std(x, 0, unbiased=False),
            x.var(dim=1, keepdim=True), lib.var(x, dim=(0, 1), correction=0),
            lib.std(x, dim=1, correction=2), *lib.var_mean(x, 1), *lib.std_mean(x, dim=0),
            *lib.var_mean(x), lib.logsumexp(x, 1), x.logsumexp(dim=0, keepdim=True),
            lib.logsumexp(x, (0, 1)))


@program(grid((3, 4), -1.5, 2.0), const([[0, 1, 2], [0, 0, 0]], "int64"), source=SURFACE)
def any_all_amax_amin(lib, F, x, k):
    return (lib.any(x > 1.5), (x > -2).all(), x.gt(1.0).any(dim=1), lib.all(x > 0, dim=0),
            k.any(1), k.all(), lib.any(k, 0, keepdim=True), lib.amax(x, 1), x.amin(0),
            lib.amin(x), x.amax(dim=(0, 1), keepdim=True))


@program(grid((2, 3), -2.6, 2.4), const([1, 0, 3], "int64"), source=SURFACE)
def casts(lib, F, x, k):
    return (x.int(), x.long(), x.bool(), x.type(lib.float64), k.bool(),
            k.type(lib.float32) * x, x.double().int(), x.long() * x, x.type(lib.int64))


@script(source=SURFACE)
def half_cast(lib, F):
    # Eager only: the Numba backend has no float16 arithmetic.
    x = lib.tensor([1.0, -2.5, 65504.0, 1e-8], requires_grad=True)
    k = lib.tensor([1, 0, 3])
    return x.half(), k.half() * 2, x.half().float() * x


@program(grid((2, 3), -1.0, 1.0), source=SURFACE)
def like_constructors(lib, F, x):
    return (lib.zeros_like(x), lib.ones_like(x), lib.full_like(x, 2.5), x + lib.ones_like(x),
            lib.zeros_like(x, dtype=lib.int64), lib.full_like(x, 7, dtype=lib.float64))


@script(source=SURFACE)
def constructors(lib, F):
    return (lib.eye(3), lib.eye(2, 3), lib.eye(3, dtype=lib.float64), lib.linspace(0, 1, 5),
            lib.linspace(-1.0, 2.0, 7), lib.linspace(0, 1, 1), lib.linspace(3, 1, 4),
            lib.linspace(0.0, 1.0, 4, dtype=lib.float64), lib.empty(2, 3).shape,
            lib.empty((4,)).shape, lib.empty_like(lib.ones(2, 1)).shape)


@program(grid((3, 5), -3.7, 3.3), covers=("gelu_backward",), source=SURFACE)
def activations(lib, F, x):
    return (F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.elu(x), F.elu(x, 0.5),
            F.celu(x, 0.7), F.selu(x), F.softplus(x), F.softplus(x, beta=2.0, threshold=3.0),
            F.softsign(x), F.hardtanh(x), F.hardtanh(x, -2.0, 0.5), F.relu6(x * 2.0),
            F.hardsigmoid(x), F.hardswish(x), F.leaky_relu(x), F.leaky_relu(x, 0.2),
            F.mish(x), F.logsigmoid(x), F.softmin(x, dim=1), F.normalize(x),
            F.normalize(x, p=1.0, dim=0))


@program(grid((3, 5), -3.7, 3.3), source=SURFACE)
def activation_modules(lib, F, x):
    nn = lib.nn
    mods = [nn.GELU(), nn.GELU(approximate="tanh"), nn.SiLU(), nn.ELU(alpha=0.5), nn.CELU(),
            nn.SELU(), nn.Softplus(beta=0.5), nn.Softsign(), nn.Hardtanh(-0.5, 0.5),
            nn.ReLU6(), nn.Hardsigmoid(), nn.Hardswish(), nn.LeakyReLU(0.3), nn.Mish(),
            nn.LogSigmoid(), nn.Softmax(dim=1), nn.LogSoftmax(dim=0), nn.Softmin(dim=-1)]
    return tuple(m(x) for m in mods)


@program(leaf([[1.0, 0.0, 3.0], [2.0, 0.0, 0.0], [1.5, 2.0, -1.0]]),
         const([[1, 2], [3, 4]], "int64"), source=SURFACE)
def prod_with_zeros(lib, F, x, k):
    # Rows with no, one and two zeros: PyTorch's three gradient cases.
    return x.prod(1), lib.prod(x), x.prod(0, keepdim=True), k.prod(), lib.prod(k, 1)


@program(grid((2, 3), -1.0, 2.0), const([[1, 2, 3], [4, 5, 6]], "int64"), source=SURFACE)
def reductions_dtype(lib, F, x, k):
    return (x.sum(dtype=lib.float64), lib.sum(x, 1, dtype=lib.float64),
            x.mean(dim=0, dtype=lib.float64), k.sum(dtype=lib.float32), k.mean(dtype=lib.float64),
            lib.mean(k, 1, keepdim=True, dtype=lib.float32))


@program(grid((2, 3), -1.0, 2.0), source=SURFACE)
def statistics_positional_unbiased(lib, F, x):
    # torch.var(x, False): the older (input, unbiased) overload.
    return x.var(False), lib.std(x, True), *lib.var_mean(x, False), x.var(1, False)


# ---- normalisation and modules


@program(grid((2, 3, 4), -2.0, 3.0), grid((4,), 0.5, 1.5), grid((4,), -0.3, 0.4), source=SURFACE)
def layer_norms(lib, F, x, w, b):
    return (F.layer_norm(x, (4,), w, b), F.layer_norm(x, [3, 4]), F.layer_norm(x, (4,), None, b),
            F.layer_norm(x, (4,), w, eps=0.5), F.layer_norm(x * 1000.0 + 5.0, (4,)))


@script(covers=("gelu_backward", "layer_norm_backward", "layer_norm_weight_grad"),
        source=SURFACE)
def layer_norm_gelu_double_backward(lib, F):
    x = lib.tensor([[0.5, -1.0, 2.0, 0.25], [1.5, 0.75, -0.5, -2.0], [0.1, 0.2, -0.3, 0.45]],
                   requires_grad=True)
    w = lib.tensor([0.5, 2.0, 1.5, -1.0], requires_grad=True)
    b = lib.tensor([0.1, -0.2, 0.3, 0.0], requires_grad=True)
    c = lib.tensor([[1.0, -0.5, 0.25, 2.0], [0.5, 1.5, -1.0, 0.75], [-0.25, 0.5, 1.0, -1.5]])
    y = F.gelu(F.layer_norm(x, (4,), w, b))
    gx, gw = grad_fn(lib)((y * c).sum(), [x, w], create_graph=True)
    ((gx * gx).sum() + (gw * gw * c[0]).sum()).backward()
    return gx, gw, x.grad, w.grad, b.grad



@script(covers=("batch_norm_backward", "batch_norm_param_grads", "batch_norm_stats"),
        source=SURFACE)
def batch_norm_double_backward(lib, F):
    x = lib.tensor([[[0.5, -1.0], [2.0, 0.25]], [[1.5, 0.75], [-0.5, -2.0]],
                    [[0.1, 0.2], [-0.3, 0.45]]], dtype=lib.float64, requires_grad=True)
    w = lib.tensor([0.5, 2.0], dtype=lib.float64, requires_grad=True)
    b = lib.tensor([0.1, -0.2], dtype=lib.float64, requires_grad=True)
    rm, rv = lib.zeros(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64)
    c = lib.tensor([[[1.0, -0.5], [0.25, 2.0]], [[0.5, 1.5], [-1.0, 0.75]],
                    [[-0.25, 0.5], [1.0, -1.5]]], dtype=lib.float64)
    y = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)
    gx, gw, gb = grad_fn(lib)((y * y * c).sum(), [x, w, b], create_graph=True)
    ((gx * gx).sum() + (gw * gw).sum() + (gb * gw).sum()).backward()
    return gx, gw, gb, x.grad, w.grad, b.grad, rm, rv


@program(grid((4, 3, 2), -1.5, 2.5), grid((3,), 0.5, 1.5), grid((3,), -0.3, 0.4),
         const([0.1, -0.2, 0.3]), const([1.0, 2.0, 0.5]), source=SURFACE)
def batch_norm_functional(lib, F, x, w, b, rm, rv):
    train = F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2)
    stats_after = (rm * 1.0, rv * 1.0)
    evaluated = F.batch_norm(x, rm, rv, w, b)
    return train, stats_after, evaluated, F.batch_norm(x[:, :, 0], None, None, training=True)


# float64: a normalisation's input gradient is a difference of terms scaled by 1 / std,
# so float32 rounding (PyTorch's and ours, ~1e-5 here) exceeds the float32 tolerance.
@program(grid((2, 4, 6), -2.0, 2.0, "float64"), grid((4,), 0.5, 1.5, "float64"),
         grid((4,), -0.3, 0.4, "float64"), source=SURFACE)
def group_instance_norms(lib, F, x, w, b):
    # exp: channels of evenly spaced values would centre to exact zeros (signs of zero).
    x = lib.exp(x)
    return F.group_norm(x, 2, w, b), F.group_norm(x * 1.0, 1, eps=0.1)


@program(grid((2, 3, 8), -2.0, 2.0, "float64"), grid((3,), 0.5, 1.5, "float64"),
         grid((3,), -0.3, 0.4, "float64"), source=SURFACE)
def instance_norms(lib, F, x, w, b):
    return F.instance_norm(lib.exp(x), weight=w, bias=b)


@script(source=SURFACE)
def batch_norm_modules_train_eval(lib, F):
    # Running statistics over three training steps (momentum 0.1 and cumulative), then eval.
    nn = lib.nn
    x = lib.tensor(np.linspace(-2.0, 3.0, 24, dtype=np.float32).reshape(4, 3, 2) ** 2)
    out = []
    for bn in (nn.BatchNorm1d(3), nn.BatchNorm1d(3, momentum=None),
               nn.BatchNorm1d(3, affine=False, track_running_stats=False)):
        for k in range(3):
            y = bn(x * (k + 1.0) - k)
        out += [y, *bn.state_dict().values()]
        bn.eval()
        out.append(bn(x))
    bn2 = nn.BatchNorm2d(2)
    x4 = lib.tensor(np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(2, 2, 2, 4) ** 3,
                    requires_grad=True)
    y = bn2(x4)
    (y * lib.arange(4.0)).sum().backward()
    return out + [y, bn2.running_var, x4.grad, bn2.weight.grad, bn2.bias.grad]


@script(source=SURFACE)
def norm_module_errors(lib, F):
    nn = lib.nn
    out = []
    for fn in (lambda: nn.BatchNorm1d(3)(lib.ones(2)), lambda: nn.BatchNorm2d(3)(lib.ones(2, 3, 4)),
               lambda: nn.BatchNorm1d(3)(lib.ones(1, 3)), lambda: nn.GroupNorm(3, 4),
               lambda: F.layer_norm(lib.ones(4, 3), (4,)),
               lambda: F.group_norm(lib.ones(2, 4, 3), 3)):
        try:
            fn()
            out.append("no error")
        except Exception as e:  # noqa: BLE001 - the error type is the result
            out.append("RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__)
    return out
# ---- convolution
@program(grid((2, 4, 5, 6), -1.0, 1.0), grid((6, 2, 3, 2), -0.5, 0.7), grid((6,), -0.3, 0.3),
         grid((3, 4, 2, 3), -0.6, 0.4), source=SURFACE,
         covers=("conv2d_input", "conv2d_weight"))
def conv2d_options(lib, F, x, w, b, w2):
    return (F.conv2d(x, w, b, stride=2, padding=1, groups=2),
            F.conv2d(x, w2, padding="same", dilation=(2, 1)),
            F.conv2d(x, w2, None, (1, 2), (0, 1)), F.conv2d(x, w2, padding="valid"),
            F.conv2d(x[1], w2, stride=2))


@program(grid((2, 4, 7), -1.0, 1.0), grid((3, 2, 3), -0.5, 0.7), grid((3,), -0.3, 0.3),
         grid((3, 4, 2), -0.6, 0.4), source=SURFACE)
def conv1d_options(lib, F, x, w, b, w2):
    return (F.conv1d(x, w, b, stride=2, padding=1, groups=2),
            F.conv1d(x, w2, padding="same", dilation=2), F.conv1d(x[1], w2, b))


@program(grid((2, 4, 3, 3), -1.0, 1.0), grid((4, 3, 3, 2), -0.5, 0.7), grid((6,), -0.3, 0.3),
         source=SURFACE)
def conv_transpose2d_options(lib, F, x, w, b):
    # dilation 2 with output_padding 1 > padding 0: the last row and column get no input.
    return (F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
            F.conv_transpose2d(x, w, dilation=2, output_padding=1),
            F.conv_transpose2d(x[0], w, None, (2, 3), (1, 0)))


@program(grid((2, 3, 5, 4), -1.0, 1.0), grid((2, 12, 6), -1.0, 1.0), source=SURFACE)
def unfold_fold(lib, F, x, c):
    return (F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
            F.fold(F.unfold(x, 2) * 1.5, (5, 4), 2), F.unfold(x[0], 3, padding=(1, 0)),
            F.fold(c, (4, 6), (2, 3), padding=(1, 0), stride=(2, 3)), F.fold(c[1], (3, 4), 2))


@script(source=SURFACE)
def conv_modules(lib, F):
    nn = lib.nn
    x = lib.tensor(np.linspace(-1.0, 1.0, 2 * 2 * 5 * 4, dtype=np.float32).reshape(2, 2, 5, 4),
                   requires_grad=True)
    w = lib.tensor(np.linspace(-0.5, 0.5, 3 * 2 * 3 * 3, dtype=np.float32).reshape(3, 2, 3, 3))
    outs = []
    for mode in ("zeros", "reflect", "replicate", "circular"):
        m = nn.Conv2d(2, 3, 3, padding=(2, 1), padding_mode=mode)
        m1 = nn.Conv1d(2, 3, 3, padding="same", padding_mode=mode, bias=False)
        with lib.no_grad():
            m.weight.copy_(w)
            m.bias.fill_(0.25)
            m1.weight.copy_(w[:, :, 1])
        outs += [m(x), m1(x[:, :, 0])]
    t = nn.ConvTranspose2d(2, 4, (2, 3), stride=2, groups=2)
    outs.append(tuple(t.weight.shape))
    outs.append(tuple(t(x, output_size=(10, 10)).shape))
    c = nn.Conv2d(4, 6, (3, 2), groups=2)
    outs += [tuple(c.weight.shape), tuple(c.bias.shape), str(c), str(t), str(m1),
             str(nn.Conv2d(4, 6, 3, padding="same", bias=False))]
    u = nn.Unfold(2, padding=1)
    outs += [u(x), nn.Fold((5, 4), 2, padding=1)(u(x)), str(u)]
    sum(o.sum() for o in outs if hasattr(o, "sum")).backward()
    return tuple(outs) + (x.grad,)


@program(grid((2, 4, 5, 5), -1.0, 1.0), grid((6, 3, 3, 3), -1.0, 1.0), source=SURFACE,
         match="to have 3 channels, but got 4 channels instead")
def conv2d_channel_mismatch(lib, F, x, w):
    return F.conv2d(x, w)


@program(grid((2, 4, 5, 5), -1.0, 1.0), grid((6, 4, 3, 3), -1.0, 1.0), source=SURFACE,
         match="padding='same' is not supported for strided convolutions")
def conv2d_same_strided(lib, F, x, w):
    return F.conv2d(x, w, padding="same", stride=2)


@program(grid((2, 4, 3, 3), -1.0, 1.0), grid((6, 4, 5, 5), -1.0, 1.0), source=SURFACE,
         match="Kernel size can't be greater than actual input size")
def conv2d_kernel_too_large(lib, F, x, w):
    return F.conv2d(x, w)
# ---- indexing (dualgraph/ops/index.py)
@program(grid((3, 2), -1.0, 1.0), compile=False, source=SURFACE)
def advanced_indexing_data_mask(lib, F, x):
    return x[x[:, 0] > 0], x[x > 0.5], lib.masked_select(x, x < 0.0)


@program(grid((2, 3, 4), -1.0, 1.0), const([[0], [3]], "int64"),
         source=SURFACE)
def advanced_indexing_shapes(lib, F, x, k):
    # Ints select first, then the index tensors' block goes in place when they are
    # adjacent, first when a slice separates them (PyTorch's rule, not NumPy's).
    i = lib.tensor([1, 0])
    return (x[0, :, i], x[:, 1, k], x[i, :, i], x[:, i, None], x[..., k], x[i, 2],
            x[:, lib.tensor([True, False, True])], x[lib.tensor([[1], [0]]), :, k[:, 0]])


@program(grid((3, 4), -1.0, 1.0), grid((2, 4), 0.5, 1.5),
         const([[0, 2], [1, 1], [3, 0]], "int64"), source=SURFACE)
def indexing_family(lib, F, x, v, k):
    y = x * 1.0
    y[lib.tensor([2, 0])] = v
    y[1, [0, 3]] = -2.0
    z = x * 1.0
    z.index_put_((lib.tensor([0, 0]),), v[0], accumulate=True)
    z[lib.tensor([False, True, False])] = 3.0
    src = x[:, :2] * 2.0
    return (y, z, x.gather(1, k), lib.take_along_dim(x, k[:, :1], 1),
            x.index_select(1, lib.tensor([3, 0])),
            x.scatter(1, lib.tensor([[0, 2], [1, 3], [3, 0]]), src),
            x.scatter(0, k[:2], 1.5), x.scatter_add(1, k, src),
            x.scatter_reduce(1, k, src, "sum"),
            x.scatter_reduce(1, k, src, "mean", include_self=False),
            x.index_add(0, lib.tensor([2, 2]), v, alpha=0.5),
            x.index_copy(0, lib.tensor([1, 0]), v),
            x.index_fill(1, lib.tensor([0, 2]), -1.0), x.masked_fill(x > 0, 0.5),
            lib.index_put(x, (lib.tensor([1]), lib.tensor([2])), lib.tensor(9.0)))


@program(leaf([[1.0, 2.0, 2.0, 0.5], [2.0, -1.0, 0.0, 0.0], [0.5, 0.5, 3.0, 1.0]]),
         leaf([[2.0, 2.0, 1.0], [0.0, -1.0, 4.0], [3.0, 0.5, 0.5]]),
         const([[1, 1, 3], [0, 0, 2], [2, 3, 2]], "int64"),
         source=SURFACE)
def scatter_reduce_extremes(lib, F, x, v, k):
    """amax/amin with ties (own value included or not) and prod with a zero."""
    k0 = lib.tensor([[1, 0, 2], [0, 2, 2], [2, 1, 0]])
    return (x.scatter_reduce(1, k, v, "amax"),
            x.scatter_reduce(1, k, v, "amax", include_self=False),
            x.scatter_reduce(0, k0, v, "amin"),
            x.scatter_reduce(0, k0, v, "amin", include_self=False),
            x.scatter_reduce(1, k, v, "prod"),
            x.scatter_reduce(1, k, v, "prod", include_self=False))


@program(grid((3, 4), -1.0, 1.0), const([[2, 0], [1, 2]], "int64"), source=SURFACE)
def embedding_one_hot(lib, F, w, k):
    return (F.embedding(k, w), F.embedding(k, w, padding_idx=2), F.one_hot(k, 4),
            F.one_hot(k[0], 3) * w[0, :3])


@program(grid((3, 4), -1.0, 1.0), compile=False, source=SURFACE)
def nonzero_family(lib, F, x):
    m = x > 0.2
    return (lib.nonzero(m), lib.nonzero(m, as_tuple=True), lib.where(m), lib.argwhere(m),
            F.one_hot(lib.tensor([0, 3, 1])), m.nonzero(), x[lib.nonzero(m, as_tuple=True)])


@program(grid((3, 2), -1.0, 1.0), match="out of bounds", source=SURFACE)
def index_tensor_out_of_range(lib, F, x):
    return x[lib.tensor([0, 3])]


@program(grid((3, 2), -1.0, 1.0), match="out of bounds", source=SURFACE)
def index_negative_out_of_range(lib, F, x):
    return x[:, [-3]]


@program(grid((3, 2), -1.0, 1.0), match="broadcast", source=SURFACE)
def index_put_shape_mismatch(lib, F, x):
    y = x * 1.0
    y[lib.tensor([0, 1])] = lib.ones(3, 2)
    return y


@program(grid((3,), -1.0, 1.0), match="in-place", source=SURFACE)
def index_put_leaf(lib, F, x):
    x[lib.tensor([0])] = 1.0
    return x
# ---- scans and sorting (dualgraph/ops/scan.py)
@program(leaf([[1.0, 0.0, 3.0, 0.0], [2.0, 3.0, 0.0, 4.0], [0.5, 2.0, 3.0, 1.0]]),
         const([[1, 2, 3], [4, 5, 6]], "int32"), source=SURFACE)
def cumulative(lib, F, x, k):
    # Rows with two zeros, one zero and none: cumprod's three gradient cases.
    return (x.cumsum(1), lib.cumsum(x, 0), x.cumprod(1), lib.cumprod(x, -2), k.cumsum(1),
            k.cumprod(0), lib.cumsum(k, 1, dtype=lib.float32), x.cumsum(dim=-1, dtype=lib.float64))


@program(grid((2, 5), -3.0, 2.0), covers=("logcumsumexp",), source=SURFACE)
def logcumsumexp_large(lib, F, x):
    return lib.logcumsumexp(x, 1), (x * 500.0).logcumsumexp(1), lib.logcumsumexp(x - 800.0, 0)


@program(leaf([[2.0, 1.0, 1.0, 3.0, 3.0, 0.0, 0.0], [1.0, 3.0, 3.0, 2.0, 5.0, 3.0, 4.0]]),
         covers=("scatter_add_axis",), source=SURFACE)
def cummax_ties(lib, F, x):
    # Ties move the index to the later element; each value's gradient goes to its index.
    a, b = x.cummax(1), lib.cummin(x, 1)
    return a.values, a.indices, b.values, b.indices, lib.cummax(x, 0)[0]


@program(const([[1.0, 3.0, math.nan, 2.0, 5.0, math.nan, 3.0]]), source=SURFACE)
def scans_with_nan(lib, F, x):
    a, b = lib.cummax(x, 1), x.cummin(-1)
    return (a.values, a.indices, b.values, b.indices, x.cumsum(1), lib.logcumsumexp(x, 1),
            lib.sort(x).values, lib.sort(x).indices, lib.sort(x, descending=True).indices,
            lib.argsort(x, stable=True), lib.median(x), lib.median(x, 1).indices,
            lib.nanmedian(x), lib.nanmedian(x, 1).indices, lib.topk(x, 2).values)


@program(leaf([[2.0, 1.0, 1.0, 3.0, 3.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.5, 0.5]]),
         covers=("scatter_add_axis",), source=SURFACE)
def sort_stable_ties(lib, F, x):
    s = lib.sort(x, stable=True)
    d = x.sort(dim=1, descending=True, stable=True)
    return (s.values, s.indices, d.values, d.indices, lib.argsort(x, dim=0, stable=True),
            x.argsort(descending=True, stable=True), lib.msort(x))


@program(grid((3, 5), -2.0, 1.5), source=SURFACE)
def topk_kthvalue_median(lib, F, x):
    t, u = lib.topk(x, 2), x.topk(3, dim=0, largest=False)
    kv = lib.kthvalue(x, 2, 1)
    m = x.median(0, keepdim=True)
    return (t.values, t.indices, u.values, u.indices, kv.values, kv.indices,
            x.kthvalue(3, 0, True).values, x.median(), m.values, m.indices,
            lib.median(x, -1).values, x.nanmedian(), lib.nanmedian(x, 1)[0])


@program(const([[1.0, 2.0, 2.0, 3.0], [0.0, 5.0, 6.0, 7.0]]),
         const([[2.0, 0.5, math.nan], [5.0, 9.0, -1.0]]), const([1.0, 2.0, 2.0, 3.0]),
         source=SURFACE)
def searchsorted_bucketize(lib, F, seq, v, b):
    return (lib.searchsorted(seq, v), lib.searchsorted(seq, v, right=True),
            lib.searchsorted(b, v, side="right"), lib.searchsorted(b, v, out_int32=True),
            lib.bucketize(v, b), lib.bucketize(v, b, right=True))


@program(const([[0.0, 1.0, 2.0, 3.0, 3.0], [0.5, -1.0, 7.0, 2.5, 0.0]]),
         source=SURFACE)
def histc_count_nonzero(lib, F, x):
    return (lib.histc(x, bins=4, min=0, max=3), x.histc(3), lib.count_nonzero(x),
            lib.count_nonzero(x, 1), x.count_nonzero(dim=(0, 1)))


@script(match="out of range", source=SURFACE)
def topk_k_too_large(lib, F):
    return lib.topk(lib.tensor([1.0, 2.0]), 3)


@script(match="out of range", source=SURFACE)
def kthvalue_k_too_large(lib, F):
    return lib.kthvalue(lib.tensor([1.0, 2.0]), 3)


@script(source=SURFACE)
def cumsum_bad_dim(lib, F):
    return lib.cumsum(lib.tensor([1.0, 2.0]), 1)


@script(source=SURFACE)
def cumsum_inplace(lib, F):
    k = lib.tensor([3, 1, 2], dtype=lib.int32)
    k.cumsum_(0)
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 1.0
    y.cumsum_(1)
    y.cumprod_(0)
    y.sum().backward()
    return k, y, x.grad
# ---- pooling and padding


@program(leaf([[[[1.0, 3.0, 3.0, 0.0, 2.0], [3.0, 1.0, 2.0, 2.0, -1.0],
                 [0.0, 0.5, 3.0, 4.0, 4.0], [2.0, 2.0, 1.0, 4.0, -2.0]]]]),
         covers=("pool_scatter",), source=SURFACE)
def max_pool2d_ties(lib, F, x):
    # Ties keep the first max; overlapping windows add their gradients up.
    v, i = F.max_pool2d(x, 2, 1, return_indices=True)
    w, j = F.max_pool2d(x, (3, 2), (1, 2), (1, 1), dilation=(1, 2), ceil_mode=True,
                        return_indices=True)
    return v, i, w, j, F.max_pool2d(x[0], 3, 2, 1), lib.nn.MaxPool2d(2, ceil_mode=True)(x)


@program(grid((2, 3, 7), -2.0, 3.0), source=SURFACE)
def max_pool1d_adaptive_max(lib, F, x):
    v, i = F.max_pool1d(x, 3, 2, 1, return_indices=True)
    a, k = F.adaptive_max_pool1d(x, 3, return_indices=True)
    return v, i, a, k, lib.nn.MaxPool1d(2)(x), F.adaptive_max_pool2d(x, (2, 4))


@program(grid((2, 2, 5, 7), -2.0, 3.0), source=SURFACE)
def adaptive_max_pool2d_indices(lib, F, x):
    v, i = F.adaptive_max_pool2d(x, (3, 4), return_indices=True)
    return v, i, lib.nn.AdaptiveMaxPool2d((None, 2))(x)


@program(grid((2, 2, 5, 7), -2.0, 3.0),
         covers=("avg_pool2d_backward", "adaptive_avg_pool2d_backward"), source=SURFACE)
def avg_pools(lib, F, x):
    return (F.avg_pool2d(x, 2), F.avg_pool2d(x, 3, 2, 1),
            F.avg_pool2d(x, (3, 2), (2, 3), (1, 1), ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x[0], 3, 2, 1, ceil_mode=True), F.avg_pool2d(x, 2, divisor_override=3),
            F.adaptive_avg_pool2d(x, (3, 4)), F.adaptive_avg_pool2d(x, (None, 9)),
            lib.nn.AdaptiveAvgPool2d(1)(x), lib.nn.AvgPool2d(3, 1, 1)(x))


@program(grid((2, 3, 7), -2.0, 3.0), source=SURFACE)
def avg_pools_1d(lib, F, x):
    return (F.avg_pool1d(x, 3, 2, 1), F.avg_pool1d(x, 2, ceil_mode=True,
                                                  count_include_pad=False),
            F.adaptive_avg_pool1d(x, 4), lib.nn.AvgPool1d(3)(x), lib.nn.AdaptiveAvgPool1d(5)(x))


@program(grid((2, 3, 4, 5), -2.0, 3.0), grid((2, 3, 6), -1.0, 1.0),
         covers=("pad_index_backward",), source=SURFACE)
def pads(lib, F, x, s):
    return (F.pad(x, (1, 2)), F.pad(x, (1, -2, 0, 3), value=0.5), F.pad(x, (1, 1, 1, 1, 1, 1)),
            F.pad(x, (-1, -1, -1, -1), mode="constant"),
            F.pad(x, (2, 1, 3, 0), mode="reflect"), F.pad(s, (5, -1), mode="reflect"),
            F.pad(x, (2, 1, 0, 4), mode="replicate"), F.pad(s, (-2, 3), mode="replicate"),
            F.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"), F.pad(x, (2, 3, 4, 0),
                                                                 mode="circular"),
            F.pad(s, (-1, 2), mode="circular"), F.pad(s[0], (2, 2), mode="reflect"))


@program(const([[1, 2, 3], [4, 5, 6]], "int64"), const([True, False]), source=SURFACE)
def pad_integers_and_bools(lib, F, k, m):
    return F.pad(k, (1, 2), value=2.7), F.pad(k, (0, 0, 1, 0)), F.pad(m, (1, 1), value=1)


@program(grid((2, 7, 3), -2.0, 3.0), covers=("unfold_backward",), source=SURFACE)
def unfolds(lib, F, x):
    return (x.unfold(1, 3, 2), x.unfold(-1, 2, 1), x.unfold(0, 1, 1), x.unfold(1, 7, 3),
            x[0, :, 0].unfold(0, 4, 1))


@program(grid((2, 3, 4, 5), -2.0, 3.0), grid((2, 3, 5), -1.0, 1.0), source=SURFACE)
def interpolates(lib, F, x, s):
    return (F.interpolate(x, scale_factor=2), F.interpolate(x, size=(5, 9)),
            F.interpolate(x, scale_factor=1.7), F.interpolate(x, scale_factor=(0.5, 2.5)),
            F.interpolate(x, size=(7, 3), mode="bilinear"),
            F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
            F.interpolate(x, size=(3, 8), mode="bilinear", align_corners=True),
            F.interpolate(x, scale_factor=1.5, mode="bilinear"),
            F.interpolate(s, scale_factor=2.5), F.interpolate(s, size=8, mode="linear"),
            F.interpolate(s, size=4, mode="linear", align_corners=True),
            lib.nn.Upsample(scale_factor=2, mode="bilinear")(x))


@program(grid((2, 3, 4), -2.0, 3.0), source=SURFACE)
def flatten_unflatten_modules(lib, F, x):
    nn = lib.nn
    return (nn.Flatten()(x), nn.Flatten(0, 1)(x), nn.Flatten(-2)(x),
            nn.Unflatten(1, (1, 3))(x), nn.Unflatten(-1, (2, -1))(x),
            nn.Sequential(nn.Flatten(), nn.Unflatten(1, (4, 3)))(x))


@script(source=SURFACE)
def pooling_double_backward(lib, F):
    # The backward ops' own VJPs (each the forward again), through create_graph.
    x = lib.tensor(np.linspace(-2.0, 3.0, 60).astype("float32").reshape(1, 3, 4, 5),
                   requires_grad=True)
    y = (F.max_pool2d(x, 2, 1) ** 2).sum() + (F.avg_pool2d(x, 3, 2, 1) ** 2).sum()
    y = y + (F.adaptive_avg_pool2d(x, (3, 2)) ** 2).sum()
    y = y + (F.pad(x, (2, 1, 1, 2), mode="reflect") ** 2).sum() + (x.unfold(3, 2, 1) ** 3).sum()
    (g,) = grad_fn(lib)(y, [x], create_graph=True)
    (g * g).sum().backward()
    return g, x.grad


@program(grid((1, 1, 5), -1.0, 1.0), source=SURFACE, match="Padding size should be less than")
def pad_reflect_too_wide(lib, F, x):
    return F.pad(x, (5, 0), mode="reflect")


@program(grid((1, 2, 5, 5), -1.0, 1.0), source=SURFACE,
         match="pad should be at most half of effective kernel size")
def max_pool2d_pad_too_wide(lib, F, x):
    return F.max_pool2d(x, 2, padding=2)


@program(grid((2, 1, 1), -1.0, 1.0), source=SURFACE, match="Output size is too small")
def avg_pool2d_output_too_small(lib, F, x):
    return F.avg_pool2d(x, 2)


@program(grid((2, 3, 7), -1.0, 1.0), source=SURFACE, match="maximum size for tensor at dimension")
def unfold_size_too_large(lib, F, x):
    return x.unfold(2, 8, 1)


@program(grid((1, 1, 3, 3), -1.0, 1.0), source=SURFACE,
         match="only one of size or scale_factor should be defined")
def interpolate_size_and_scale(lib, F, x):
    return F.interpolate(x, size=3, scale_factor=2)
# ---- shape (dualgraph/ops/shape.py, ops/linalg.py, ops/einsum.py)


@program(grid((2, 3, 4), -1.2, 1.1), grid((3,), 0.5, 1.5), source=SURFACE)
def shape_views_and_stacks(lib, F, x, v):
    a, b = x.split([1, 3], dim=2)
    c = x.chunk(2, 1)
    return (x.flatten(), lib.flatten(x, 1), x.flatten(0, 1), x.unflatten(2, (2, -1)),
            x.movedim(0, -1), lib.movedim(x, (0, 1), (2, 0)), x.moveaxis(1, 0),
            x.swapaxes(0, 2), lib.swapdims(x, 1, 2), a * 2.0, b, c[0], c[1] * 3.0,
            lib.split(x, 3, -1)[1], x.unbind(1)[2], lib.unbind(x)[0], x.narrow(2, -3, 2),
            lib.narrow(x, 0, 1, 1), x.tensor_split(3, 2)[0], lib.tensor_split(x, [1, 3], 2)[2],
            x[:, :1, None].squeeze((1, 2)), v.expand_as(x[:, :, 0]), v.view_as(x[0, :, 0]),
            x[0].reshape_as(x[0].T), v.type_as(x), lib.hstack([v, v]), lib.vstack([v, v * 2.0]),
            lib.dstack([x[0], x[1]]), lib.column_stack([v, v, x[0, :, :2]]),
            lib.atleast_3d(v), lib.atleast_2d(v[0]))


@program(grid((2, 3), -1.0, 1.5), grid((2, 3, 4), 0.1, 2.4), source=SURFACE)
def shape_repeats_rolls_flips(lib, F, x, y):
    return (x.repeat(2, 1), x.repeat(1, 2, 2), lib.tile(x, (2,)), x.tile((2, 1, 1)),
            x.repeat_interleave(2), x.repeat_interleave(3, dim=1), lib.repeat_interleave(x, 2, 0),
            x.roll(1), lib.roll(x, -1, 1), y.roll((1, 2), (0, -1)), x.flip(0), lib.flip(y, (0, 2)),
            lib.fliplr(x), x.flipud(), x.rot90(), lib.rot90(y, 2, (1, 2)), y.rot90(-1, (2, 0)),
            x.rot90(4))


@program(grid((3, 4), -1.0, 1.5), grid((2, 3, 3), 0.1, 2.4), grid((3,), 0.5, 1.5), source=SURFACE)
def shape_triangles_diagonals(lib, F, x, y, v):
    return (x.tril(), lib.tril(x, 1), x.triu(-1), lib.triu(y, 1), y.tril(-1), x.diagonal(),
            lib.diagonal(x, 1), y.diagonal(0, 1, 2), y.diagonal(-1, -1, 0), lib.diag(x),
            x.diag(-1), lib.diag(v), v.diag(2), lib.diag_embed(x), lib.diag_embed(y, -1, 0, 2),
            x.trace(), *lib.meshgrid(v, x[0], indexing="ij"),
            *lib.meshgrid(v, x[0], v[:2], indexing="xy"))


@program(const([[1.0, -2.5, 0.0], [3.25, 1e-3, -7.0]]), const([[1, -2], [300, 70000]], "int32"),
         source=SURFACE)
def shape_view_dtype(lib, F, x, k):
    return (x.view(lib.int32), x.view(lib.float32), k.view(lib.float32), x.T.view(lib.int32),
            x.double().view(lib.int64), k.view(lib.int64), x.reshape(3, 2).view(lib.float64))


@program(grid((2, 3, 4), -1.0, 1.0), grid((2, 4, 5), -0.5, 1.5), grid((4,), 0.5, 2.0),
         grid((3, 3), -2.0, 1.0), source=SURFACE)
def einsum_table(lib, F, a, b, c, s):
    return (lib.einsum("bij,bjk->bik", a, b), lib.einsum("bij,bjk", a, b),
            lib.einsum("ii->i", s), lib.einsum("ii", s), lib.einsum("ij->ji", s),
            lib.einsum("bij,j->bi", a, c), lib.einsum("i,j->ij", c, c), lib.einsum("i,i", c, c),
            lib.einsum("...j,j", a, c), lib.einsum("b...j,bjk->b...k", a, b),
            lib.einsum("bij,bkj->bik", a, a), lib.einsum("bij,bjk,k->bi", a, b, b[0, 0]),
            lib.einsum("bij->", a), lib.einsum("bij->jb", a), lib.einsum("ij,ij->i", s, s),
            lib.einsum("bij, bjk -> bki", [a, b]), lib.einsum("iij->j", a.reshape(4, 2, 3)[:2, :2]),
            lib.einsum("ab,cd->abcd", s[:2, :2], s[1:, 1:]), lib.einsum("ji", s))


@program(grid((3, 4), -1.0, 1.5), grid((2, 3), 0.1, 2.4), grid((3,), 0.5, 1.5), source=SURFACE)
def shape_products_differences(lib, F, x, y, v):
    return (lib.diff(x), x.diff(2, 0), lib.diff(x, dim=0, prepend=x[:1], append=x[1:]),
            lib.cross(y, y.flip(1), dim=1), lib.cross(v, v * v, dim=0),
            lib.cross(y, v[None], dim=-1),
            lib.outer(v, x[0]), v.outer(v), lib.ger(v, v), lib.kron(y, x[:2, :2]),
            lib.kron(v, v), lib.diff(lib.tensor([True, False, False, True])))


@program(grid((3, 4), -1.0, 1.5), grid((2, 3, 3), 0.1, 2.4), grid((4,), 0.5, 1.5), source=SURFACE,
         covers=("view_scatter",))
def shape_writes_through_views(lib, F, x, y, w):
    # PyTorch returns views from all of these: writes must reach the base and its gradient.
    a = x * 1.0
    a.diagonal().mul_(3.0)
    a.narrow(1, 1, 2).mul_(2.0)
    b = y * 1.0
    b.movedim(0, -1)[0].add_(w[:2])
    b.swapaxes(1, 2)[1, 0].mul_(5.0)
    b.flatten(1)[:, 4].mul_(0.5)
    b.diagonal(1, 1, 2).add_(1.0)
    c = x * 1.0
    c.tril_(-1)
    d = y * 1.0
    d.triu_()
    return a, b, c, d, a.unflatten(1, (2, 2))[:, 1].sum()


@program(grid((3, 4), -1.0, 1.5, rg=False), grid((4,), 0.5, 1.5, rg=False), source=SURFACE)
def shape_writes_through_split_views(lib, F, x, w):
    # Outputs of split/chunk/unbind are views of their base. (With grad, PyTorch refuses
    # in-place writes to them; dualgraph allows them and gets the gradient right.)
    a = x * 1.0
    a.split(2, 1)[1].add_(w[:2])
    a.chunk(3, 0)[2].mul_(-1.0)
    a.unbind(1)[0].copy_(w[1:])
    a.tensor_split(2, 1)[0].mul_(2.0)
    return a


@program(grid((3, 4), -1.0, 1.5), source=SURFACE, match="split_with_sizes expects split_sizes")
def split_sizes_must_add_up(lib, F, x):
    return x.split([1, 1], dim=0)


@program(grid((3, 4), -1.0, 1.5), source=SURFACE, match="exceeds dimension size")
def narrow_out_of_range(lib, F, x):
    return x.narrow(1, 3, 2)


@program(grid((3, 4), -1.0, 1.5), source=SURFACE, match="start_dim cannot come after end_dim")
def flatten_dims_reversed(lib, F, x):
    return x.flatten(1, 0)


@program(grid((3, 4), -1.0, 1.5), source=SURFACE, match="does not appear in the equation")
def einsum_unknown_output_label(lib, F, x):
    return lib.einsum("ij->ijk", x)


@program(grid((3, 4), -1.0, 1.5), source=SURFACE, match="Dimension out of range")
def movedim_bad_dim(lib, F, x):
    return x.movedim(2, 0)
# ============================================================================
# Losses and attention (dualgraph/ops/softmax.py, ops/loss.py).
# ============================================================================
LOSSES = "losses"


@program(grid((5, 3), -1.5, 2.0), const([0, 2, 1, -100, 2], "int64"), const([0.5, 2.0, 1.5]),
         grid((2, 3, 4), -1.0, 1.5), const([[0, 2, 1, 1], [2, 0, 0, 1]], "int64"),
         grid((5, 3), 0.0, 1.0, rg=False), grid((3,), -1.0, 1.0), source=LOSSES)
def cross_entropy_forms(lib, F, x, k, w, x3, k3, p, v):
    nn = lib.nn
    return (F.cross_entropy(x, k), F.cross_entropy(x, k, reduction="sum"),
            F.cross_entropy(x, k, reduction="none"), F.cross_entropy(x, k, weight=w),
            F.cross_entropy(x3, k3, w, ignore_index=1, reduction="none"),
            F.cross_entropy(x, k, label_smoothing=0.1),
            F.cross_entropy(x, k, w, label_smoothing=0.3, reduction="none"),
            F.cross_entropy(x, k, w, label_smoothing=0.2, reduction="sum"),
            F.cross_entropy(x3, k3), F.cross_entropy(x3, k3, w, reduction="none"),
            F.cross_entropy(x3, k3, ignore_index=0, label_smoothing=0.25),
            F.cross_entropy(x, p), F.cross_entropy(x, p, w, reduction="none"),
            F.cross_entropy(x, p, label_smoothing=0.3, reduction="sum"),
            F.cross_entropy(v, k[1]), F.cross_entropy(v, p[0]),
            nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)(x, k),
            nn.CrossEntropyLoss(reduction="none", ignore_index=2)(x3, k3))


@program(grid((5, 3), -1.5, 0.0), const([0, 2, 1, -100, 2], "int64"), const([0.5, 2.0, 1.5]),
         grid((2, 3, 2, 2), -2.0, 0.0), const([[[0, 2], [1, 1]], [[2, 0], [0, 1]]], "int64"),
         source=LOSSES)
def nll_loss_forms(lib, F, x, k, w, x4, k4):
    nn = lib.nn
    return (F.nll_loss(x, k), F.nll_loss(x, k, w), F.nll_loss(x, k, w, reduction="sum"),
            F.nll_loss(x, k, reduction="none"), F.nll_loss(x4, k4),
            F.nll_loss(x4, k4, w, ignore_index=1, reduction="none"),
            nn.NLLLoss(w, reduction="sum")(x, k), nn.NLLLoss(ignore_index=0)(x4, k4))


@program(grid((3, 4), -2.0, 3.0), grid((2, 3, 2), -1.0, 1.0), source=LOSSES)
def softmax_dims(lib, F, x, y):
    return (lib.softmax(x, 0), lib.log_softmax(x, -1), F.softmax(y, dim=1),
            F.log_softmax(y, 1), y.softmax(-1), y.log_softmax(0),
            F.softmax(x, 1, dtype=lib.float64), lib.nn.Softmax(dim=1)(y))


@script(source=LOSSES, covers=("log_softmax_backward", "softmax_backward", "nll_loss_backward"))
def loss_double_backward(lib, F):
    x = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
    k = lib.tensor([2, 0])
    w = lib.tensor([0.5, 2.0, 1.5])
    (g,) = grad_fn(lib)(F.cross_entropy(x, k, w), [x], create_graph=True)
    (h,) = grad_fn(lib)(F.softmax(x, 1)[:, 0].sum(), [x], create_graph=True)
    ((g * g).sum() + (h * x).sum()).backward()
    return g, h, x.grad


@script(source=LOSSES)
def cross_entropy_all_ignored(lib, F):
    x = lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], requires_grad=True)
    k = lib.tensor([-100, -100])
    loss = F.cross_entropy(x, k)
    loss.backward()
    return loss, x.grad, F.cross_entropy(x, k, reduction="sum")


@script(source=LOSSES, match="out of bounds")
def cross_entropy_target_out_of_bounds(lib, F):
    return F.cross_entropy(lib.ones(2, 3), lib.tensor([0, 3]))


@script(source=LOSSES, match="batch_size")
def cross_entropy_batch_mismatch(lib, F):
    return F.cross_entropy(lib.ones(4, 3), lib.tensor([0, 1]))


@script(source=LOSSES, match="Long or Byte")
def cross_entropy_float_class_target(lib, F):
    return F.cross_entropy(lib.ones(2, 3), lib.ones(2))


@script(source=LOSSES, match="ignore_index is not supported")
def cross_entropy_probs_ignore_index(lib, F):
    return F.cross_entropy(lib.ones(2, 3), lib.ones(2, 3) / 3, ignore_index=1)


@script(source=LOSSES, match="label_smoothing must be between")
def cross_entropy_bad_smoothing(lib, F):
    return F.cross_entropy(lib.ones(2, 3), lib.tensor([0, 1]), label_smoothing=1.5)


@script(source=LOSSES, match="not a valid value for reduction")
def nll_loss_bad_reduction(lib, F):
    return F.nll_loss(lib.ones(2, 3), lib.tensor([0, 1]), reduction="avg")


@script(source=LOSSES, match="weight tensor should be defined")
def nll_loss_bad_weight(lib, F):
    return F.nll_loss(lib.ones(2, 3), lib.tensor([0, 1]), weight=lib.ones(2))


_BOOL_MASK = [[True, False, True, True, False], [False] * 5, [True, True, False, True, True]]


@program(grid((2, 2, 3, 4), -1.0, 1.0), grid((2, 2, 5, 4), -1.5, 1.0),
         grid((2, 2, 5, 3), -1.0, 2.0), const(_BOOL_MASK, "bool"),
         grid((2, 1, 3, 5), -2.0, 1.0, rg=False), source=LOSSES)
def attention(lib, F, q, k, v, bm, fm):
    # The bool mask hides every key of query 1: PyTorch gives zeros there.
    return (F.scaled_dot_product_attention(q, k, v),
            F.scaled_dot_product_attention(q, k, v, is_causal=True),
            F.scaled_dot_product_attention(q, k, v, attn_mask=bm),
            F.scaled_dot_product_attention(q, k, v, attn_mask=fm, scale=0.3),
            F.scaled_dot_product_attention(q[0], k[0, :, :3], v[0, :, :3], is_causal=True),
            F.scaled_dot_product_attention(q[1, 0], k[1, 0], v[1, 0], attn_mask=bm[2]))


@script(source=LOSSES, match="should not be set when is_causal")
def attention_mask_and_causal(lib, F):
    q = lib.ones(1, 3, 4)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=lib.ones(3, 3) > 0, is_causal=True)


def _mha(lib, e, h, **kwargs):
    """An nn.MultiheadAttention with fixed weights (its random init differs by library)."""
    m = lib.nn.MultiheadAttention(e, h, **kwargs)
    w = np.sin(np.arange(3 * e * e, dtype=np.float32)).reshape(3 * e, e) * 0.5
    with lib.no_grad():
        m.in_proj_weight.copy_(lib.tensor(w))
        m.in_proj_bias.copy_(lib.tensor(np.linspace(-0.2, 0.3, 3 * e, dtype=np.float32)))
        m.out_proj.weight.copy_(lib.tensor(np.cos(w[:e]) * 0.3))
        m.out_proj.bias.copy_(lib.tensor(np.linspace(0.1, -0.1, e, dtype=np.float32)))
    return m


@script(source=LOSSES)
def multihead_attention(lib, F):
    x = lib.tensor(np.linspace(-1, 1, 2 * 3 * 4, dtype=np.float32).reshape(3, 2, 4),
                   requires_grad=True)
    kv = lib.tensor(np.cos(np.arange(5 * 2 * 4, dtype=np.float32)).reshape(5, 2, 4),
                    requires_grad=True)
    m = _mha(lib, 4, 2)
    out, w = m(x, kv, kv)
    causal = lib.tensor(np.triu(np.ones((3, 5), bool), 1))
    pad = lib.tensor(np.array([[False, False, False, True, True], [False] * 5]))
    out2, w2 = m(x, kv, kv, attn_mask=causal, key_padding_mask=pad, average_attn_weights=False)
    mb = _mha(lib, 4, 1, batch_first=True)
    out3, _ = mb(x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), need_weights=False)
    out4, w4 = m(x[:, 0], kv[:, 0], kv[:, 0])  # unbatched
    (out.sum() + (out2 * out2).sum() + out3.sum() + out4.sum()).backward()
    return out, w, out2, w2, out3, out4, w4, x.grad, kv.grad, m.in_proj_weight.grad


@program(grid((3, 4), -2.1, 1.9), grid((3, 4), -1.0, 1.3, rg=False),
         grid((3, 4), 0.05, 0.95), grid((3, 4), 0.0, 1.0, rg=False), const([0.5, 2.0, 1.0, 1.5]),
         grid((3, 4), -3.0, -0.5), grid((3, 4), 0.0, 0.4, rg=False), source=LOSSES)
def everyday_losses(lib, F, x, y, p, t, w, lp, q):
    nn = lib.nn
    sign = (y > 0).float() * 2 - 1
    return (F.l1_loss(x, y), F.l1_loss(x, y, reduction="none"), F.smooth_l1_loss(x, y),
            F.smooth_l1_loss(x, y, beta=0.5, reduction="sum"), F.smooth_l1_loss(x, y, beta=0.0),
            F.huber_loss(x, y), F.huber_loss(x, y, delta=0.7, reduction="none"),
            F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t, weight=w, reduction="sum"),
            F.kl_div(lp, q, reduction="batchmean"), F.kl_div(lp, q, reduction="none"),
            F.kl_div(lp, lp * 0.5, reduction="sum", log_target=True),
            F.soft_margin_loss(x, sign), F.cosine_similarity(x, y), F.cosine_similarity(x, p, 0),
            F.pairwise_distance(x, y), F.pairwise_distance(x, p, p=1.0, keepdim=True),
            nn.L1Loss(reduction="sum")(x, y), nn.SmoothL1Loss(beta=2.0)(x, y),
            nn.HuberLoss(delta=0.5)(x, y), nn.BCELoss(w)(p, t), nn.KLDivLoss("batchmean")(lp, q),
            nn.SoftMarginLoss()(x, sign), nn.CosineSimilarity(dim=0)(x, y),
            nn.PairwiseDistance(p=3.0)(x, y))


@script(source=LOSSES)
def binary_cross_entropy_at_zero_and_one(lib, F):
    p = lib.tensor([0.0, 1.0, 0.5, 1.0])
    t = lib.tensor([1.0, 0.0, 1.0, 1.0])
    return F.binary_cross_entropy(p, t, reduction="none"), F.binary_cross_entropy(p, t)


# ============================================================================
# IEEE and dtype edges: infinities, NaN, signed zeros, integer sums, axis= spellings.
# ============================================================================
IEEE = "ieee edges"
INF, NAN = math.inf, math.nan


@program(const([-INF, INF, INF, -INF, 1.0, -INF]), const([-INF, INF, -INF, 0.0, 1.0, 2.0]),
         source=IEEE)
def logaddexp_infinities(lib, F, a, b):
    return lib.logaddexp(a, b), lib.logaddexp(b, a)


@program(leaf([1.0, -2.0, 3.0, 0.5]), leaf([1.0, 3.0, -1.0, 0.5]), source=IEEE)
def logaddexp_ties_gradient(lib, F, a, b):
    return lib.logaddexp(a, b)


@program(leaf([NAN, 1.0, 2.0, NAN, -1.0]), leaf([1.0, NAN, 2.0, NAN, 3.0]), source=IEEE)
def maximum_minimum_nan_gradient(lib, F, a, b):
    return lib.maximum(a, b) * 2 + lib.minimum(a, b)


# NaN and infinities through the piecewise activations: PyTorch's kernels compare
# (``x <= t ? 0 : g``), so a NaN takes the branch its comparison's falsity picks. 32
# values: PyTorch's vectorized kernels (what a tensor of any size mostly runs) see them all;
# its scalar loop, for the last few elements, passes a NaN's gradient through the clipping
# activations (hardtanh, relu6, the shrinks), its vector loop does not.
EDGES = [NAN, -1.0, 0.0, 1.0, 6.0, 7.0, INF, -INF] * 4


@program(leaf(EDGES), leaf(EDGES), leaf(EDGES), leaf(EDGES), source=IEEE)
def relu_family_at_nan(lib, F, a, b, c, d):
    return lib.relu(a), F.hardtanh(b), F.relu6(c), F.threshold(d, 0.5, -2.0)


# amax/amin (AmaxBackward0): ties share the gradient, and a slice holding a NaN gets NaN
# gradients throughout (no element equals the NaN result, and PyTorch divides by that
# count). max(dim)/min(dim) give the gradient to the index returned.
ROWS = [[1.0, NAN, 3.0], [2.0, 5.0, 5.0], [NAN, NAN, 1.0], [INF, INF, -INF], [0.5, 0.5, 0.5]]


@program(leaf(ROWS, "float64"), leaf(ROWS, "float64"), leaf(ROWS, "float64"),
         leaf(ROWS, "float64"), source=IEEE)
def amax_amin_rows_at_nan(lib, F, a, b, c, d):
    return a.amax(1), b.amin(1), c.max(1), d.min(1)


# The max of all elements (MaxBackward1) shares its gradient among the NaNs; amax() of
# all elements is amax's rule (NaN everywhere).
@program(leaf([1.0, NAN, 3.0, NAN], "float64"), leaf([1.0, NAN, 3.0, NAN], "float64"),
         leaf([-INF, 2.0, 2.0, -1.0], "float64"), leaf([-INF, 2.0, -INF, -1.0], "float64"),
         source=IEEE)
def max_and_amax_of_all_at_nan(lib, F, a, b, c, d):
    return a.max(), b.amax(), c.amax(), d.amin(), lib.amax(c, (0,))


# float64 hardsigmoid: relu6(x + 3) / 6 forward; the backward multiplies by 1/6 rounded to
# float32 (PyTorch's literal), not float64's 1/6.
@program(leaf([-3.0, -2.9, 0.0, 1.0, 2.9999999, 3.0, 3.1, 1e-17, 1 / 3, NAN, INF, -INF,
               -0.0, -2.9999999], "float64"), source=IEEE)
def hardsigmoid_float64_edges(lib, F, x):
    return F.hardsigmoid(x)


@program(leaf(EDGES), leaf(EDGES), leaf(EDGES), leaf(EDGES), leaf(EDGES), source=IEEE)
def shrinks_and_elus_at_nan_and_inf(lib, F, a, b, c, d, e):
    return (F.hardshrink(a), F.softshrink(b), F.elu(c), F.celu(c, 2.0),
            F.rrelu(d, training=False), F.hardsigmoid(e))


@program(leaf(EDGES), leaf(EDGES), leaf(EDGES), leaf(EDGES), source=IEEE)
def abs_and_losses_at_nan_and_inf(lib, F, a, b, c, f):
    z = lib.zeros(32)
    return (lib.sqrt(lib.abs(a)), F.smooth_l1_loss(b, z, reduction="none"),
            F.huber_loss(c, z, reduction="none"), lib.fmax(f, lib.full((32,), 1.0)),
            lib.fmin(f, lib.full((32,), 1.0)))


# One output: a compiled function's backward from one output runs its whole backward
# kernel, the other outputs' cotangents zero, and 0 * inf there would be NaN.
@program(leaf(EDGES), leaf(EDGES), source=IEEE)
def step_functions_and_norm_at_nan_and_inf(lib, F, d, e):
    return lib.linalg.vector_norm(d) + (lib.floor(e) * e + lib.sign(e) * e).sum()


@program(leaf([0.0, 0.0, 1.0, -0.0, 2.0]), leaf([0.0, -0.0, 0.0, 0.0, -1.0]), source=IEEE)
def atan2_at_the_origin(lib, F, y, x):
    return lib.atan2(y, x)


@program(const([200, 100, 255, 7], "uint8"), const([[True, False], [True, True]], "bool"),
         const([100, 100, -128], "int8"), source=IEEE)
def integer_sums_are_int64(lib, F, u, b, i):
    return u.sum(), u.sum(0), b.sum(), b.sum(1), i.sum()


@program(leaf([300.0, 350.0, 400.0, 21.0, 19.0, -5.0, -400.0]), source=IEEE)
def softplus_large_inputs(lib, F, x):
    return F.softplus(x), F.softplus(x, beta=2.0, threshold=10.0)


@program(grid((3, 4), -1.5, 2.5), source=IEEE)
def axis_spelling_of_dim(lib, F, x):
    values, indices = x.max(axis=1)
    low = x.min(axis=0)
    return (values, indices, low[0], low[1], x.max(axis=1)[0], x.var(axis=1), x.std(axis=0),
            lib.std_mean(x, axis=1), (x > 0).any(axis=1), (x > 0).all(axis=0),
            x.argmax(axis=1), lib.cumsum(x, axis=1), x.logsumexp(axis=1),
            x.softmax(axis=1))


@script(source=IEEE)
def cummax_cummin_empty_axis(lib, F):
    x = lib.zeros(2, 0)
    return lib.cummax(x, 1), lib.cummin(x, 1), lib.cummax(lib.zeros(0, 3), 0)


@program(leaf([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]), source=IEEE)
def normalize_zero_row(lib, F, x):
    return (F.normalize(x), F.normalize(x, p=1.0), F.normalize(x, p=0.0),
            F.normalize(x, p=INF), F.normalize(x, p=3.0))


@program(leaf([-2.0, -0.5, 0.0, 0.5, 2.0, NAN]), source=IEEE)
def clamp_function(lib, F, x):
    return lib.clamp(x, -0.5, 0.5), lib.clamp(x, min=0.0), lib.clamp(x, max=-1.0)


@script(match="element 0", source=IEEE)
def stack_of_numbers_is_a_type_error(lib, F):
    return lib.stack([1.0, 2.0])


@script(match="must be", source=IEEE)
def full_with_a_string_is_a_type_error(lib, F):
    return lib.full((2,), "a")


@script(match="must be", source=IEEE)
def full_with_none_is_a_type_error(lib, F):
    return lib.full((2,), None)




# ============================================================================
# PyTorch programs' surface: custom autograd Functions, autograd.functional, module hooks,
# and the ops PyTorch code uses (volumetric conv/pooling, unpooling, resampling modes,
# gated and pixel layers, scatter reductions, clip, shifts, out=).
# ============================================================================
SURF = "torch surface"
SURF_OPS = "ops"  # compiled runs of the heavy volumetric programs are marked slow


def _square_fn(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * scale, x.sum()

        @staticmethod
        def backward(ctx, g, gs):
            (x,) = ctx.saved_tensors
            return 2 * x * g * ctx.scale + gs, None

    return Square


@program(grid((2, 3), -1.5, 1.3), covers=("custom_function",), source=SURF)
def autograd_function_two_outputs(lib, F, x):
    y, s = _square_fn(lib).apply(x.tanh(), 1.5)
    return y, s


@script(source=SURF)
def autograd_function_node_names(lib, F):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y, s = _square_fn(lib).apply(x, 2.0)
    z, t = _square_fn(lib).apply(lib.tensor([1.0]), 2.0)
    return y.grad_fn.name(), s.grad_fn.name(), z.requires_grad, z.grad_fn is None


@script(source=SURF)
def autograd_function_needs_input_grad_and_double_backward(lib, F):
    seen = []

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x ** 3 * w

        @staticmethod
        def backward(ctx, g):
            seen.append(tuple(ctx.needs_input_grad))
            x, w = ctx.saved_tensors
            return 3 * x ** 2 * w * g, (x ** 3 * g if ctx.needs_input_grad[1] else None)

    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = lib.tensor([1.0, 2.0, 3.0])
    (g,) = grad_fn(lib)(Cube.apply(x, w).sum(), [x], create_graph=True)
    (gg,) = grad_fn(lib)(g.sum(), [x])
    return g.detach(), gg, len(seen), seen[0][0], seen[0][1]


@script(source=SURF)
def autograd_functional(lib, F):
    AF = lib.autograd.functional
    x = lib.tensor([0.3, -1.2, 2.0])
    y = lib.tensor([0.5, 0.1, -0.7])
    v = lib.tensor([1.0, -2.0, 0.5])

    def f(a, b):
        return a ** 2 * b.sin()

    def s(a):
        return (a ** 3).sum() * a.sum()

    return (AF.jacobian(f, (x, y)), AF.hessian(s, x), AF.vjp(lambda a: a.exp() * a, x, v),
            AF.jvp(lambda a: a.exp() * a, x, v), AF.hvp(s, x, v), AF.vhp(s, x, v),
            AF.hessian(lambda a, b: (a * a * b.exp()).sum(), (x, y)))


def _fixed_linear(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.5, -1.0, 0.25], [1.5, 0.75, -0.5]]))
        lin.bias.copy_(lib.tensor([0.1, -0.2]))
    return lin


@script(source=SURF)
def module_hooks(lib, F):
    lin = _fixed_linear(lib)
    got = []
    lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    lin.register_forward_hook(lambda m, args, out: out.tanh())
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    lin.register_full_backward_hook(lambda m, gi, go: got.append((gi[0], go[0])) or
                                    (gi[0] * 0.5,))
    h = lin.register_forward_hook(lambda m, args, out: out + 100.0)
    h.remove()
    x = lib.tensor([[0.1, 0.2, -0.3], [1.0, -0.5, 0.25]], requires_grad=True)
    y = lin(x)
    (y * lib.tensor([[1.0, 2.0], [-1.0, 0.5]])).sum().backward()
    return y, x.grad, got[0][0], got[0][1], lin.weight.grad


@program(grid((2, 3), -2.0, 2.0), source=SURF)
def clip_and_clamp(lib, F, x):
    return x.clip(-1.0, 1.2), lib.clip(x, min=-0.5), lib.clamp(x, max=0.3), x.clamp(-1.1, 0.9)


@script(source=SURF)
def shifts_and_out(lib, F):
    x = lib.tensor([1, -8, 3, 12])
    a, b = x.bitwise_left_shift(2), x.bitwise_right_shift(1)
    c = lib.bitwise_left_shift(x, lib.tensor([0, 1, 2, 3]))
    y = x.clone()
    y <<= 1
    out = lib.zeros(4)
    r = lib.add(lib.ones(4), lib.tensor([1.0, 2.0, 3.0, 4.0]), out=out)
    empty = lib.zeros(0)
    lib.exp(lib.tensor([[0.0, 1.0], [2.0, -1.0]]), out=empty)
    return a, b, c, y, r, out, empty


@program(grid((2, 3), 0.5, 2.0), grid((2, 3), -1.0, 1.5), source=SURF)
def scatter_with_reduce(lib, F, x, s):
    idx = lib.tensor([[0, 1, 0], [1, 1, 0]])
    return (x.detach().scatter(0, idx, s.detach(), reduce="add"),
            x.detach().scatter(0, idx, s.detach(), reduce="multiply"),
            x.detach().scatter(1, idx[:1], 2.5, reduce="multiply"))


@program(grid((2, 4, 3), -1.5, 1.5), grid((1, 8, 2, 3), -1.0, 1.0), source=SURF)
def glu_and_pixel_shuffle(lib, F, x, p):
    return (F.glu(x, 1), F.glu(x), lib.nn.GLU(1)(x), F.pixel_shuffle(p, 2),
            F.pixel_unshuffle(F.pixel_shuffle(p, 2) * 2.0, 2), lib.nn.PixelShuffle(2)(p),
            lib.nn.PixelUnshuffle(2)(p[:, :, :, :2]))


@program(grid((3, 4), -2.0, 2.5), const([[1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0],
                                         [1.0, 1.0, 0.0, 1.0]]),
         const([0.5, 2.0, 3.0, 1.0]), grid((3, 4), 0.2, 1.5, rg=False), source=SURF)
def bce_with_logits_pos_weight(lib, F, x, y, pw, w):
    return (F.binary_cross_entropy_with_logits(x, y, pos_weight=pw),
            F.binary_cross_entropy_with_logits(x, y, w, reduction="none", pos_weight=pw),
            lib.nn.BCEWithLogitsLoss(weight=w, pos_weight=pw, reduction="sum")(x, y))


@program(grid((2, 4, 3, 5), -1.0, 1.0), grid((2, 2, 6, 5), -1.2, 0.8),
         grid((2, 2, 6, 5), -0.5, 1.5), source=SURF)
def sdpa_grouped_query(lib, F, q, k, v):
    return (F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True))


@program(grid((1, 2, 3, 4, 5), -1.0, 1.0), grid((2, 3, 5, 4), -2.0, 2.0), source=SURF_OPS)
def interpolate_modes(lib, F, v, x):
    return (F.interpolate(v, size=(5, 3, 7), mode="trilinear"),
            F.interpolate(v, scale_factor=2, mode="trilinear", align_corners=True),
            F.interpolate(v, size=(2, 6, 3), mode="nearest"),
            F.interpolate(v, size=(4, 3, 8), mode="nearest-exact"),
            F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
            F.interpolate(x[:, :, 0], size=9, mode="nearest-exact"),
            F.interpolate(x, size=(3, 2), mode="area"))


@program(grid((2, 4, 5, 6, 4), -1.0, 1.0), grid((6, 2, 3, 2, 3), -0.5, 0.5),
         grid((6,), -0.2, 0.3), source=SURF_OPS)
def conv3d_forms(lib, F, x, w, b):
    return (F.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1),
                     groups=2),
            F.conv3d(x[:, :2], w[:, :1, :1].expand(6, 2, 1, 2, 3), padding="same"))


@program(grid((1, 4, 3, 4, 3), -1.0, 1.0), grid((4, 3, 3, 2, 2), -0.5, 0.5),
         grid((6,), -0.2, 0.3), source=SURF_OPS)
def conv_transpose3d_forms(lib, F, x, w, b):
    return (F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 1),
                               output_padding=(1, 0, 0), groups=2, dilation=(1, 2, 1)),
            F.conv_transpose3d(x, w[:, :2]))


@program(grid((2, 3, 5, 6, 7), -2.0, 2.0), source=SURF_OPS)
def pool3d_forms(lib, F, x):
    return (F.avg_pool3d(x, 2), F.avg_pool3d(x, 3, stride=2, padding=1),
            F.avg_pool3d(x, (3, 2, 3), stride=2, padding=1, ceil_mode=True,
                         count_include_pad=False),
            F.avg_pool3d(x, 2, divisor_override=3), F.max_pool3d(x, 2),
            F.max_pool3d(x, (3, 2, 3), stride=2, padding=1, dilation=(2, 1, 1),
                         ceil_mode=True),
            lib.nn.MaxPool3d(2)(x[0]), lib.nn.AvgPool3d(3, 1, 1)(x))


@program(grid((2, 3, 6, 8), -3.0, 2.0), source=SURF)
def max_unpool(lib, F, x):
    pooled, idx = F.max_pool2d(x, 2, return_indices=True)
    return (F.max_unpool2d(pooled, idx, 2), F.max_unpool2d(pooled, idx, 2, output_size=(7, 9)),
            lib.nn.MaxUnpool2d(2)(pooled * 2.0, idx))


# ============================================================================
# PyTorch's wider top-level and Tensor surface: special functions, linear algebra,
# products, elementwise compositions, statistics, factories and queries.
# ============================================================================
NAMES = "torch names"


@program(grid((2, 3), 0.3, 2.7), grid((2, 3), -0.9, 0.9), source=SURF_OPS)
def special_functions(lib, F, p, u):
    S = lib.special
    return (lib.lgamma(p), (p - 3.1).lgamma(), lib.digamma(p), (p - 3.1).digamma(),
            lib.polygamma(1, p), p.polygamma(2), lib.erfc(u * 3.0), lib.erfinv(u),
            S.gammaln(p), S.psi(p), S.expit(u), S.logit(p / 3.0), S.logit(u, eps=0.2),
            S.ndtr(u), S.ndtri(p / 3.0), S.log_ndtr(u), S.entr(p), S.xlogy(p, u.abs() + 0.1),
            S.xlog1py(u, p), S.multigammaln(p + 1.0, 3), lib.mvlgamma(p + 1.0, 2),
            S.erfcx(u), S.sinc(u), S.erfinv(u * 0.99), S.round(u * 10.0, decimals=1),
            lib.erfc(u).erfinv())


@program(grid((2, 5), -4.0, 4.0), grid((7,), -30.0, 30.0, dtype="float64"), source=SURF_OPS)
def bessel_functions(lib, F, x, w):
    S = lib.special
    return (lib.i0(x), x.i0(), S.i0(x), S.i0e(x), S.i1(x), S.i1e(x), S.modified_bessel_i0(x),
            S.modified_bessel_i1(x), S.i0e(w), S.i1e(w), S.i0(w * 0.5), S.i1(w * 0.5),
            lib.i0(lib.arange(3)))


@program(grid((3, 3), -1.0, 1.0), grid((3, 2), -1.0, 1.0), source=SURF_OPS,
         covers=("cholesky", "cholesky_info", "solve_triangular", "eigh", "svd", "qr"))
def decompositions(lib, F, a, b):
    # Only values that do not depend on the sign of an eigen- or singular vector, so the
    # gradients are the same whatever sign LAPACK picks.
    L = lib.linalg
    c = a + 1.5 * lib.eye(3)
    m = c @ c.mT * 0.25 + lib.eye(3)
    low = L.cholesky(m)
    qr = L.qr(c)
    return (low, L.cholesky_ex(m).L, L.solve_triangular(low, b, upper=False),
            L.eigvalsh(m), L.eigh(m).eigenvalues, L.svdvals(c), qr.Q @ qr.R, L.pinv(c),
            L.matrix_exp(c * 0.3))


@program(grid((3, 3), -1.0, 1.0), grid((3, 2), -1.0, 1.0), source=SURF_OPS, covers=("lu",))
def lu_factorizations(lib, F, a, b):
    # rows flipped under a dominant diagonal: every column pivots, without near-ties
    c = (a * 0.5 + 2.0 * lib.eye(3)).flip(0)
    tall = lib.cat([c, a[:1] * 0.25], 0)
    LU, piv = lib.linalg.lu_factor(c)  # noqa: N806
    P, L, U = lib.linalg.lu(tall)  # noqa: N806
    return (LU, piv, L, U, P, lib.linalg.lu(c.mT).U, lib.linalg.lu_solve(LU, piv, b),
            lib.lu_unpack(LU, piv).L)

@program(grid((2, 3, 3), -1.0, 1.0), grid((3, 2), -1.0, 1.0), grid((4, 3), -2.0, 2.0),
         source=SURF_OPS, covers=("inv",))
def matrix_functions(lib, F, a, b, x):
    L = lib.linalg
    m = a * 0.3 + 2.0 * lib.eye(3)
    return (L.inv(m), lib.inverse(m[0]), L.det(m), lib.det(m[1]), lib.logdet(m),
            L.slogdet(m).logabsdet, L.slogdet(m).sign, L.solve(m[0], b), L.solve(m, b[:, 0]),
            L.matrix_power(m[0], 3), L.matrix_power(m[0], -2), L.matrix_power(m, 0),
            L.vector_norm(x), L.vector_norm(x, 1, dim=1), L.vector_norm(x, float("inf"), dim=0,
                                                                        keepdim=True),
            L.vector_norm(x, 3.0), L.vector_norm(x, -1, dim=1), L.vector_norm(x, 0),
            L.matrix_norm(x), L.matrix_norm(x, 1), L.matrix_norm(x, -float("inf")),
            L.norm(x), L.norm(x, "fro"), L.norm(x[0], 3), L.norm(x, dim=(0, 1), keepdim=True),
            x.norm(), lib.norm(x, dim=1), lib.norm(x, p=1, dim=0, keepdim=True), x.norm(2, 1),
            x.renorm(2, 0, 2.0), x.renorm(1, 1, 3.0), lib.cdist(x, x[:2] * 0.5),
            lib.cdist(x, x[1:] + 0.1, p=1), lib.dist(x, x.flip(0)), lib.dist(x, x * 0.5, 3),
            L.multi_dot([x, x.T, x]), L.vecdot(x, x.flip(1)), x.mT, m.mT, x.H)


@program(grid((3, 4), -1.0, 1.0), grid((4, 2), -1.5, 1.0), grid((2, 3, 4), -1.0, 1.0),
         grid((2, 4, 2), -1.0, 0.5), grid((3, 2), 0.1, 1.0), source=SURF_OPS)
def products(lib, F, a, b, ba, bb, c):
    return (lib.addmm(c, a, b), lib.addmm(c, a, b, beta=0.5, alpha=2.0), c.addmm(a, b, beta=0),
            lib.baddbmm(c, ba, bb, alpha=0.5), ba.bmm(bb).baddbmm(ba, bb, beta=2.0),
            lib.addbmm(c, ba, bb), lib.addmv(c[:, 0], a, b[:, 0]), lib.addr(c, c[:, 0], c[0]),
            lib.mv(a, b[:, 1]), a.mv(b[:, 0]), lib.dot(a[0], a[1]), lib.vdot(a[0], a[2]),
            lib.inner(a, a), a.inner(b.T), lib.tensordot(ba, bb, dims=([0, 2], [0, 1])),
            lib.tensordot(a, b, dims=1), lib.tensordot(ba, ba, 3), lib.chain_matmul(a, b, b.T))


@program(grid((2, 3), -1.5, 1.5), grid((2, 3), 0.5, 2.0), source=SURF_OPS)
def pointwise_names(lib, F, x, p):
    return (lib.addcmul(x, x, p, value=0.5), lib.addcdiv(x, x, p, value=-2),
            x.addcmul(p, p), lib.hypot(x, p), lib.signbit(x),
            lib.heaviside(x.detach(), p.detach()),
            lib.fmax(x, p), lib.fmin(x, p), lib.float_power(p, 2.5), lib.logaddexp2(x, p),
            lib.xlogy(p, p), lib.xlogy(x * 0.0, p), lib.sinc(x), lib.deg2rad(x), lib.rad2deg(x),
            lib.clamp_min(x, 0.1), lib.clamp_max(x, 0.2), x.clamp_min(-0.5),
            lib.ldexp(x, lib.tensor([1, 2, 3])), lib.rsub(x, p, alpha=2),
            x.masked_scatter(x > 0, p * 3.0), lib.take(x, lib.tensor([[0, 5], [3, 2]])),
            x.put(lib.tensor([1, 4]), p[0, :2]), x.put(lib.tensor([1, 1]), p[0, :2],
                                                        accumulate=True),
            x.select(1, 2), lib.select(x, 0, -1), x.sum_to_size(1, 3), x.sum_to_size((2, 1)),
            x.ravel(), lib.nan_to_num(x), lib.nan_to_num(p * 2.0, 1.5),
            lib.isin(x, x[0]), lib.isreal(x), x.absolute(), (x * 0.5).arccos(), x.arctan(),
            x.negative(), x.sgn(), x.true_divide(p), lib.subtract(x, p, alpha=3),
            lib.multiply(x, p), lib.divide(x, p, rounding_mode="floor"), x.greater(0.2),
            lib.less_equal(x, p), x.not_equal(p), lib.positive(x), (x * 0.3 + 0.5).logit(),
            x.lgamma(),
            lib.broadcast_tensors(x, p[:1]),
            x.where(x > 0, p), lib.trapezoid(x), lib.trapezoid(x, dx=0.5, dim=0),
            lib.cumulative_trapezoid(x), lib.vander(x[0].detach(), 4), lib.diagflat(x[0], -1),
            lib.block_diag(x, p[0]), lib.cartesian_prod(x[0], p[1, :2]), lib.clone(x), lib.t(x),
            lib.squeeze(x[None]),
            lib.unsqueeze(x, 1), lib.permute(x, (1, 0)), lib.ravel(x), lib.real(x))


@program(grid((), 1.5, 1.5), grid((2, 3), -1.0, 1.0), source=SURF_OPS)
def index_ops_on_scalars_and_empty(lib, F, s, x):
    i0, none = lib.tensor(0), lib.zeros(0, dtype=lib.long)
    five = s * 2.0 + 2.0
    return (lib.index_select(s, 0, i0), lib.index_select(s, 0, lib.tensor([0])),
            lib.index_select(x, 0, none), lib.index_add(s, 0, i0, five),
            lib.index_copy(s, 0, i0, five), lib.index_fill(s, 0, i0, 2.0),
            lib.index_add(x, 0, none, lib.ones(0, 3)), lib.gather(s, 0, i0),
            lib.gather(x, 1, lib.zeros(2, 0, dtype=lib.long)), lib.scatter(s, 0, i0, five),
            lib.scatter_add(s, 0, i0, five), lib.scatter_reduce(s, 0, i0, five, "amax"),
            lib.scatter_reduce(s, 0, i0, five, "prod", include_self=False),
            lib.take_along_dim(x, lib.tensor([1, 4])),
            lib.take_along_dim(x, lib.zeros(2, 0, dtype=lib.long), 1),
            (x * 1.0).index_put((i0,), five), x.index_put((i0, lib.tensor(2)), s, True),
            lib.take(s, i0), lib.gather(x, 1, lib.tensor([[2, 0]], dtype=lib.int32)),
            lib.scatter(x, 0, lib.tensor([[1, 0, 1]], dtype=lib.int32), 4.0))


@program(grid((4, 5), -1.3, 2.2), grid((4,), 0.0, 3.0), source=SURF_OPS)
def finite_differences(lib, F, x, c):
    t = lib.cumsum(lib.exp(c), 0)  # increasing coordinates
    return (*lib.gradient(x), *lib.gradient(x, spacing=2.0, edge_order=2),
            *lib.gradient(x, dim=1, spacing=[0.5]), *lib.gradient(x, spacing=(t,), dim=0),
            *lib.gradient(x, spacing=(t, lib.arange(5.0) ** 1.5), edge_order=2))


@program(grid((2, 3, 4), -1.0, 1.2), source=SURF_OPS)
def view_copies(lib, F, x):
    return (lib.narrow_copy(x, 1, 1, 2), x.narrow_copy(2, 1, 2),
            lib.expand_copy(x[:, :1], (2, 3, 4)), lib.slice_copy(x, 2, 1, None, 2),
            lib.slice_copy(x, 0, -1), lib.view_copy(x, (6, 4)), lib.permute_copy(x, (2, 0, 1)),
            lib.transpose_copy(x, 0, 2), lib.t_copy(x[0]), lib.select_copy(x, 1, 2),
            lib.diagonal_copy(x, 1, 1, 2), lib.squeeze_copy(x[:, :1]),
            lib.unsqueeze_copy(x, 1), lib.unfold_copy(x, 2, 2, 1), lib.alias_copy(x),
            lib.as_strided_copy(x, (2, 2), (1, 3)),
            *lib.split_copy(x, 2, 2), *lib.split_with_sizes_copy(x, [1, 2], 1),
            *lib.unbind_copy(x, 0))


@program(grid((3, 5), -2.0, 2.1), grid((5,), 0.2, 1.9), source=SURF_OPS)
def cov_weighted(lib, F, x, a):
    f = lib.tensor([1, 2, 0, 3, 1])
    return (lib.cov(x, fweights=f), lib.cov(x, aweights=a), x.cov(fweights=f, aweights=a),
            lib.cov(x, fweights=f, aweights=a, correction=0), lib.cov(x[1], aweights=a),
            lib.cov(x, aweights=a, correction=3))


@program(grid((3, 5), -2.0, 2.1), source=SURF_OPS)
def statistics_names(lib, F, x):
    y = lib.where(x > 1.0, lib.tensor(float("nan")), x)
    return (lib.nansum(y), lib.nanmean(y, 1), y.nansum(0, keepdim=True), lib.nanmean(y),
            lib.aminmax(x).min, lib.aminmax(x, dim=1, keepdim=True).max,
            lib.quantile(x, 0.3), lib.quantile(x, 0.75, dim=1, keepdim=True),
            x.quantile(0.5, dim=0, interpolation="lower"),
            lib.quantile(x, 0.4, 1, interpolation="nearest"),
            lib.quantile(x, 0.45, 1, interpolation="midpoint"),
            lib.quantile(x, 0.45, 1, interpolation="higher"),
            lib.nanquantile(y, 0.5, dim=1), lib.quantile(y, 0.5, dim=1),
            lib.nanquantile(y, 0.2), lib.cov(x), lib.corrcoef(x), x.cov(correction=0),
            lib.cov(x[0]))


@script(source=NAMES)
def quantile_q_gradient(lib, F):
    # The quantiles' gradient with respect to a tensor q (linear interpolation only).
    x = lib.tensor([[0.3, -1.2, 2.5, 0.7, -0.4], [1.1, 0.2, -2.0, 3.3, 0.9]],
                   dtype=lib.float64, requires_grad=True)
    y = lib.where(x > 2.0, lib.tensor(float("nan"), dtype=lib.float64), x)
    q = lib.tensor([0.15, 0.5, 0.8], dtype=lib.float64, requires_grad=True)
    outs = (lib.quantile(x, q, dim=1), lib.nanquantile(y, q, dim=1, keepdim=True),
            lib.quantile(x, q), lib.quantile(x, q[1], dim=0),
            lib.quantile(x, q, dim=1, interpolation="midpoint"))
    sum(((o * o).sum() for o in outs), lib.tensor(0.0, dtype=lib.float64)).backward()
    return (*outs, q.grad, x.grad)


@script(source=NAMES)
def eager_only_names(lib, F):
    x = lib.tensor([[1, 2, 2, 1, 3], [4, 4, 0, 0, 1]])
    v = lib.tensor([3.0, 1.0, 1.0, 2.0, 5.0])
    q = lib.tensor([[1.0, -2.0, 0.5, 3.0], [2.0, 0.0, -1.0, 4.0]], requires_grad=True)
    m = lib.mode(x, 1)
    u, inv, cnt = lib.unique(x, return_inverse=True, return_counts=True)
    mq = lib.mode(q.round(), 1).values.sum()
    qs = lib.quantile(q, lib.tensor([0.25, 0.5, 0.9]), dim=1, keepdim=True)
    (mq + qs.sum()).backward()
    return (m.values, m.indices, lib.mode(v), x.mode(0), u, inv, cnt, lib.unique(x, dim=1),
            v.unique(), lib.unique_consecutive(lib.tensor([1, 1, 2, 2, 3, 1, 1])),
            lib.unique_consecutive(lib.tensor([1, 1, 2, 2, 3, 1, 1]), return_inverse=True,
                                   return_counts=True),
            lib.bincount(lib.tensor([0, 2, 2, 5])),
            lib.bincount(lib.tensor([0, 2, 2]), weights=lib.tensor([0.5, 1.0, 2.0]), minlength=5),
            qs, q.grad,
            lib.tril_indices(3, 4, 1), lib.triu_indices(4, 3, -1), lib.logspace(0, 2, 5),
            lib.logspace(1, 3, 4, base=2.0), lib.hann_window(5), lib.hamming_window(6, False),
            lib.blackman_window(7), lib.bartlett_window(5), lib.kaiser_window(6),
            lib.unravel_index(lib.tensor([4, 7, 11]), (3, 4)),
            lib.nan_to_num(lib.tensor([float("nan"), float("inf"), -float("inf"), 1.0])),
            lib.nan_to_num(lib.tensor([float("nan"), float("inf"), -float("inf")]), 2.0, 3.0, -4.0),
            lib.isposinf(lib.tensor([1.0, float("inf"), -float("inf")])),
            lib.isneginf(lib.tensor([1.0, float("inf"), -float("inf")])),
            lib.signbit(lib.tensor([-0.0, 0.0, -1.0, 2.0])),
            lib.finfo(lib.float32).eps, lib.finfo(lib.float64).max, lib.finfo().tiny,
            lib.finfo(lib.float16).bits, lib.iinfo(lib.int32).min, lib.iinfo(lib.uint8).max,
            lib.promote_types(lib.int32, lib.float32) == lib.float32,
            lib.promote_types(lib.uint8, lib.int8) == lib.int16,
            lib.can_cast(lib.float32, lib.int32), lib.can_cast(lib.int32, lib.float64),
            lib.result_type(lib.tensor([1, 2]), 1.5) == lib.float32,
            lib.is_floating_point(v), lib.is_nonzero(lib.tensor([1.5])),
            lib.equal(v, v.clone()), lib.equal(v, v[:2]), lib.numel(x), x.size(),
            x.size().numel(), x.size()[1:], x.stride(), x.t().stride(), x.element_size(),
            v.nelement(), x.ndimension(), lib.LongTensor([1, 2]), lib.FloatTensor(2, 3).shape,
            isinstance(v, lib.FloatTensor), isinstance(v, lib.LongTensor), v.type(),
            v.type(lib.LongTensor), x.type(lib.DoubleTensor), lib.as_tensor([1.5, 2.0]),
            lib.as_tensor(v) is v, lib.scalar_tensor(3), lib.bernoulli(lib.tensor([0.0, 1.0])),
            lib.normal(lib.tensor([1.0, 2.0]), 0.0), lib.normal(2.0, 0.0, size=(2,)),
            lib.poisson(lib.zeros(3)), lib.zeros(2, 3).fill_diagonal_(5.0),
            lib.zeros(5, 2).fill_diagonal_(1.0, wrap=True), x.byte(), x.char(), x.short(),
            lib.sum(input=v), lib.maximum(v, other=v.flip(0)), lib.mean(input=v, dim=0),
            v.clone().addcmul_(v, v, value=2.0), v.clone().lerp_(v * 2.0, 0.25),
            v.clone().clamp_max_(2.0), v.clone().hypot_(v), v.clone().eq_(1.0),
            lib.zeros(3).bernoulli_(1.0), lib.zeros(3).random_(5, 6), v.new(2, 3).shape,
            lib.dsplit(lib.ones(1, 2, 4), 2)[1], lib.vsplit(lib.ones(4, 2), [1, 3])[2],
            lib.hsplit(lib.ones(2, 4), 2)[0], lib.broadcast_shapes((2, 1), (1, 3)),
            lib.combinations(v, 2),
            lib.combinations(v[:3], with_replacement=True), lib.combinations(v, 4))


# ---- recurrences: nn.LSTM, nn.GRU and nn.RNN (one `rnn_layer` op per layer and direction)
# loaded with fixed weights; the gradients of the input and initial states go through
# `rnn_layer_backward` (the weights' gradients are compared in tests/nn/test_rnn.py).
def _with_weights(lib: Any, module: Any, weights: tuple) -> Any:
    with lib.no_grad():
        for p, w in zip(module.parameters(), weights):
            p.copy_(w)
    return module


def _fixed(shape: tuple, lo: float, hi: float) -> In:
    return grid(shape, lo, hi, rg=False)


_LSTM_W = (_fixed((8, 3), -0.6, 0.5), _fixed((8, 2), -0.5, 0.7), _fixed((8,), -0.3, 0.4),
           _fixed((8,), -0.2, 0.1), _fixed((8, 3), 0.5, -0.6), _fixed((8, 2), 0.4, -0.4),
           _fixed((8,), 0.3, -0.2), _fixed((8,), -0.1, 0.3))
_GRU_W = (_fixed((6, 4), -0.5, 0.6), _fixed((6, 2), -0.7, 0.5), _fixed((6,), -0.2, 0.3),
          _fixed((6,), 0.2, -0.4))
_RNN_W = (_fixed((2, 2), -0.8, 0.6), _fixed((2, 2), 0.5, -0.5), _fixed((2,), -0.3, 0.3),
          _fixed((2,), 0.1, -0.1))


@program(grid((4, 2, 3), -1.0, 1.0), grid((2, 2, 2), -0.4, 0.4), grid((2, 2, 2), 0.5, -0.5),
         grid((1, 2, 2), 0.3, -0.2), *_LSTM_W, *_GRU_W, *_RNN_W,
         covers=("rnn_layer", "rnn_layer_backward", "rnn_layer_weight_grads"), source=SURFACE)
def recurrent_layers(lib, F, x, h0, c0, g0, *weights):
    lstm = _with_weights(lib, lib.nn.LSTM(3, 2, bidirectional=True), weights[:8])
    gru = _with_weights(lib, lib.nn.GRU(4, 2, batch_first=True), weights[8:12])
    rnn = _with_weights(lib, lib.nn.RNN(2, 2, nonlinearity="relu"), weights[12:])
    y, (h, c) = lstm(x, (h0, c0))
    z, hg = gru(y.transpose(0, 1), g0)
    r, hr = rnn(z.transpose(0, 1))
    return y, h, c, z, hg, r, hr


# The LSTM with a projection (`rnn_layer_proj`) over a packed batch (per-sequence lengths),
# both directions, from given states.
_PROJ_W = (_fixed((8, 3), -0.6, 0.5), _fixed((8, 1), -0.5, 0.7), _fixed((8,), -0.3, 0.4),
           _fixed((8,), -0.2, 0.1), _fixed((1, 2), 0.6, -0.4), _fixed((8, 3), 0.5, -0.6),
           _fixed((8, 1), 0.4, -0.4), _fixed((8,), 0.3, -0.2), _fixed((8,), -0.1, 0.3),
           _fixed((1, 2), -0.5, 0.5))


@program(grid((4, 2, 3), -1.0, 1.0), grid((2, 2, 1), -0.4, 0.4), grid((2, 2, 2), 0.5, -0.5),
         *_PROJ_W, covers=("rnn_layer_proj",), source=SURFACE)
def recurrent_projected_packed(lib, F, x, h0, c0, *weights):
    lstm = _with_weights(lib, lib.nn.LSTM(3, 2, proj_size=1, bidirectional=True), weights)
    packed = lib.nn.utils.rnn.pack_padded_sequence(x, [2, 4], enforce_sorted=False)
    y, (h, c) = lstm(packed, (h0, c0))
    padded, _ = lib.nn.utils.rnn.pad_packed_sequence(y, batch_first=True)
    return padded, h, c


# ============================================================================
# Complex tensors: inputs and outputs are real (complex values are built inside with
# view_as_complex / complex and leave through view_as_real, abs, angle), so the gradients
# recorded are those of real leaves through complex intermediates.
# ============================================================================
COMPLEX = "complex"


@program(grid((2, 3, 2), -1.2, 1.4), grid((3, 2), 0.4, 1.7), source=COMPLEX)
def complex_arithmetic(lib, F, x, y):
    z, w = lib.view_as_complex(x), lib.view_as_complex(y)
    r = y[:, 0]
    return (lib.view_as_real(z * w), lib.view_as_real(z / w), lib.view_as_real(z + r),
            lib.view_as_real(r - z), lib.view_as_real(z * (0.5 - 2j)),
            lib.view_as_real(2.0 / z), lib.view_as_real((1 + 1j) - z), z.abs(), w.angle(),
            lib.view_as_real(lib.exp(z)), lib.view_as_real(z.conj() * r), z.real * z.imag,
            lib.view_as_real(z.sum(1)), lib.view_as_real(z.mean()),
            lib.view_as_real(z ** 2), lib.view_as_real(z.reciprocal()))


@program(grid((2, 3, 2), -1.2, 1.4), source=COMPLEX)
def complex_trigonometric(lib, F, x):
    z = lib.view_as_complex(x)
    return (lib.view_as_real(lib.sin(z)), lib.view_as_real(z.cos()),
            lib.view_as_real(lib.tanh(z)), lib.view_as_real(lib.sigmoid(z * 2.0)),
            lib.view_as_real(z.tanh() * z.sin()))


@program(grid((2, 3, 2), -1.2, 1.4), grid((3, 4, 2), 0.4, 1.7), grid((3, 4), -0.5, 0.6),
         source=COMPLEX)
def complex_products(lib, F, x, y, m):
    a, b = lib.view_as_complex(x), lib.view_as_complex(y)
    mc = m.to(lib.cfloat)
    return (lib.view_as_real(a @ b), lib.view_as_real(lib.matmul(a, mc)),
            lib.view_as_real(lib.einsum("ij,jk->ik", a, b)),
            lib.view_as_real(lib.einsum("ij,jk,kl->il", a, b, b.t())),
            lib.view_as_real(lib.einsum("ij,jk->ik", a, mc)))


@program(grid((2, 3, 2), -1.2, 1.4), grid((3, 4), -0.5, 0.6), source=COMPLEX,
         match="same dtype", compile=False)
def complex_matmul_mixed_dtypes(lib, F, x, m):
    return lib.view_as_complex(x) @ m


@program(grid((4, 3), -1.0, 2.0), grid((4, 3), 0.5, 1.5), source=COMPLEX)
def complex_polar_and_shapes(lib, F, r, theta):
    z = lib.polar(r.abs() + 0.1, theta)
    c = lib.complex(r, theta)
    return (lib.view_as_real(z.reshape(2, 6)), lib.view_as_real(z.flatten()),
            lib.view_as_real(z[1:, ::2]), lib.view_as_real(z.t()), lib.view_as_real(z[:, 1]),
            lib.view_as_real(z.unsqueeze(0).permute(2, 0, 1)),
            lib.view_as_real(lib.cat([z, c], 0)), lib.view_as_real(lib.stack([z, c], 1)),
            lib.view_as_real(z.view(3, 4)), lib.view_as_real(c.to(lib.complex128)).double())


@program(grid((2, 5, 2, 8), -1.0, 1.0), grid((5, 4), 0.0, 3.0), source=COMPLEX)
def rotary_embedding(lib, F, xq, freqs):
    # Meta's LLaMA rotary embedding, as written there.
    freqs_cis = lib.polar(lib.ones_like(freqs), freqs)
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    xq_out = lib.view_as_real(xq_ * freqs_cis.view(*shape)).flatten(3)
    return xq_out.type_as(xq)


@script(source=COMPLEX)
def complex_leaf_gradient(lib, F):
    # The gradient of a real loss with respect to a complex leaf: dL/dre + i dL/dim.
    z = lib.tensor([1 + 2j, -0.5 + 0.25j, 3 - 1j], requires_grad=True)
    w = lib.tensor([0.5 - 1j, 2 + 0j, -1 + 1j])
    loss = (z * w).abs().sum() + (z.conj() * z).real.sum() + lib.view_as_real(z.exp()).sum()
    loss.backward()
    return loss, lib.view_as_real(z.grad), str(z.dtype).removeprefix("torch.")


@script(source=COMPLEX)
def complex_creation(lib, F):
    a = lib.zeros(2, 3, dtype=lib.cfloat)
    b = lib.ones(2, dtype=lib.complex128)
    c = lib.full((2,), 1 - 2j)
    d = lib.tensor([1.0, 2.0]).to(lib.cfloat) * 1j
    e = lib.tensor([[1 + 1j]])
    x = lib.tensor([1.0, 2.0])
    names = [str(t.dtype).removeprefix("torch.") for t in (a, b, c, d, e, x * 1j,
                                                              x.double() * 1j)]
    return (lib.view_as_real(a), lib.view_as_real(b), lib.view_as_real(c),
            lib.view_as_real(d), lib.view_as_real(e), " ".join(names),
            lib.is_complex(a), lib.is_complex(x), a.is_complex())


@script(source=COMPLEX)
def complex_views_share_memory(lib, F):
    x = lib.zeros(3, 2)
    z = lib.view_as_complex(x)
    z[1] = 2 - 3j
    z.imag[0] = 5.0
    r = lib.view_as_real(z)
    r[2, 0] = 7.0
    return x, z.real.clone(), z.imag.clone()


@program(grid((3, 8), -1.0, 1.3), grid((3, 5, 2), -0.7, 0.9), source=COMPLEX, compile=False)
def fft_transforms(lib, F, x, y):
    # compiled (DFT products): tests/compile/test_complex.py
    # exp: no spectral value is zero by symmetry, so none is a rounding-signed zero
    fft, x, c = lib.fft, x.exp(), lib.view_as_complex(y.exp())
    return (lib.view_as_real(fft.fft(x)), lib.view_as_real(fft.ifft(c, n=6, norm="ortho")),
            lib.view_as_real(fft.rfft(x, n=7, norm="forward")), fft.irfft(c),
            fft.irfft(c, n=9, dim=1), lib.view_as_real(fft.fft2(c)),
            lib.view_as_real(fft.rfft2(x)), fft.irfft2(c, s=(3, 4)),
            lib.view_as_real(fft.fftn(x, s=(2, 4))), lib.view_as_real(fft.ifftn(c)),
            fft.irfftn(c, norm="ortho"), lib.view_as_real(fft.rfftn(x, dim=0)),
            fft.fftshift(x), lib.view_as_real(fft.ifftshift(c, dim=1)),
            fft.fftfreq(7, 0.5), fft.rfftfreq(8))


@script(source=COMPLEX)
def fft_gradients(lib, F):
    # Each transform's gradient is the adjoint transform; irfft's doubles the mirrored bins.
    x = lib.tensor(np.linspace(-1.0, 1.3, 24).reshape(3, 8) ** 2, dtype=lib.float32,
                   requires_grad=True)
    c = lib.tensor(np.exp(np.linspace(-0.7, 0.9, 15)).reshape(3, 5) * (1 - 0.5j),
                   dtype=lib.cfloat, requires_grad=True)
    fft = lib.fft
    y = fft.irfft(fft.rfft(x, n=10) * 2j, n=7)
    w = fft.fft(c, dim=0, norm="ortho")
    loss = ((y * y).sum() + fft.ifft2(w).abs().sum() + fft.irfft2(w, s=(3, 4)).sum()
            + lib.view_as_real(fft.rfft2(x, norm="forward")).pow(2).sum()
            + fft.irfft(c).pow(2).sum())
    loss.backward()
    return loss, x.grad, lib.view_as_real(c.grad)


@script(source=COMPLEX)
def stft_istft(lib, F):
    x = lib.tensor(np.sin(np.linspace(0.0, 9.0, 60)).reshape(2, 30) + np.linspace(0, 1, 60)
                   .reshape(2, 30), dtype=lib.float64, requires_grad=True)
    window = lib.hann_window(12, dtype=lib.float64)
    spec = lib.stft(x, 16, hop_length=5, win_length=12, window=window, return_complex=True)
    back = lib.istft(spec * (1 + 0.5j), 16, hop_length=5, win_length=12, window=window,
                     length=30)
    plain = lib.stft(x[0], 8, center=False, normalized=True, onesided=False,
                     return_complex=True)
    loss = spec.abs().sum() + back.pow(2).sum() + lib.view_as_real(plain).pow(2).sum()
    loss.backward()
    return lib.view_as_real(spec), back, lib.view_as_real(plain), x.grad


@program(grid((3, 3), -1.0, 1.0, rg=False), source=COMPLEX, match="last dimension of size 2",
         compile=False)
def view_as_complex_bad_last_dim(lib, F, x):
    return lib.view_as_complex(x)


@program(grid((4, 2), -1.0, 1.0, rg=False), source=COMPLEX, match="only supported for complex",
         compile=False)
def view_as_real_of_real(lib, F, x):
    return lib.view_as_real(x)


@program(grid((4, 3), -1.0, 1.0, rg=False), source=COMPLEX, match="stride divisible by 2",
         compile=False)
def view_as_complex_bad_stride(lib, F, x):
    return lib.view_as_complex(x[:, :2])


# ============================================================================
# One program per case row (tests/ops/cases.py), derived, never written here.
# ============================================================================
# Each row's function runs with ``dg`` and ``F`` read as ``torch`` and
# ``torch.nn.functional``; a row that cannot run in PyTorch that way (a dualgraph-only
# spelling, a helper of cases.py) has no golden. record.py decides which rows those are and
# lists them in goldens.json (`NO_TORCH_KEY`), so adding a case row adds its golden program
# here, and test_goldens_cover_every_program asks for a new recording.
CASE_PREFIX = "case:"
NO_TORCH_KEY = "_case_rows_without_torch"
_DUALGRAPH_PREFIXES = {"dualgraph.nn.functional": "torch.nn.functional",
                       "dualgraph.linalg": "torch.linalg", "dualgraph.special": "torch.special"}


def _torch_spelling(fn: Callable, lib: Any, F: Any) -> Callable:
    """``fn`` with dualgraph read as ``lib``: a public function by its name, a lambda with
    its globals ``dg``/``F`` rebound. Anything else stays as it is (and fails in torch)."""
    import types

    module = getattr(fn, "__module__", "") or ""
    if isinstance(fn, types.FunctionType) and fn.__name__ == "<lambda>":
        env = dict(fn.__globals__, dg=lib, F=F)
        return types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__,
                                  fn.__closure__)
    if isinstance(fn, types.FunctionType) and module.startswith("dualgraph"):
        import importlib

        for prefix, target in _DUALGRAPH_PREFIXES.items():
            if module.startswith(prefix) and hasattr(importlib.import_module(target),
                                                     fn.__name__):
                return getattr(importlib.import_module(target), fn.__name__)
        return getattr(lib, fn.__name__)
    return fn


def _row_program(row: Any) -> Program:
    rng = np.random.default_rng(sum(row.id.encode()))
    inputs = tuple(In(a, row.grad and a.dtype.kind == "f")
                   for a in row.arrays(rng, np.float32))

    def fn(lib: Any, F: Any, *xs: Any) -> Any:
        run = row.fn if not _is_torch(lib) else _torch_spelling(row.fn, lib, F)
        out = run(*xs)
        if _is_torch(lib) and not all(type(o).__module__.startswith("torch")
                                      for o in flatten(out) if _is_tensor(o)):
            # A dualgraph helper ran on torch tensors: nothing torch computed to record.
            raise TypeError("the row's function is not PyTorch's")
        return out

    fn.__name__ = CASE_PREFIX + row.id
    from dualgraph.ops import OPS
    from tests._support.rows import traces

    return Program(CASE_PREFIX + row.id, fn, inputs, (row.op,) if row.op in OPS else (),
                   compile=traces(row), source="ops")


@script(source=NAMES)
def histograms(lib, F):
    x = lib.tensor([1.0, 2.0, 1.0, 4.0, 2.5, 7.0, -1.0, 3.0])
    w = lib.tensor([0.5, 1.0, 2.0, 1.0, 3.0, 0.25, 1.0, 2.0])
    edges = lib.tensor([0.0, 1.5, 3.0, 8.0])
    y = lib.tensor([[0.1, 0.7, 0.3], [0.9, 0.5, 0.5]], dtype=lib.float64)
    return (*lib.histogram(x, 4), *lib.histogram(x, 3, range=(0.0, 3.0), density=True),
            *lib.histogram(x, bins=5, weight=w), *lib.histogram(x, edges, weight=w, density=True),
            *x.histogram(edges), *lib.histogram(y, 4), *lib.histogram(lib.tensor([2.0, 2.0]), 2),
            lib.histc(x, 4))


@script(source=NAMES)
def fractional_max_pool(lib, F):
    x = lib.linspace(-3.0, 4.0, 2 * 3 * 7 * 9).reshape(2, 3, 7, 9).sin().requires_grad_()
    u = lib.tensor([[[0.1, 0.9], [0.5, 0.25], [0.75, 0.0]], [[0.3, 0.6], [0.99, 0.4],
                                                              [0.2, 0.8]]])
    out, idx = F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True,
                                       _random_samples=u)
    ratio = F.fractional_max_pool2d(x, (3, 2), output_ratio=(0.5, 0.5), _random_samples=u)
    one = F.fractional_max_pool2d(x[0], 2, output_size=3, _random_samples=u[:1])
    ((out * out).sum() + ratio.sum() + one.sum()).backward()
    return out, idx, ratio, one, x.grad

@program(grid((2, 3, 6), -0.5, 0.5), grid((2, 3), -1.0, 2.0), source=SURF_OPS)
def tensorsolve(lib, F, a, b):
    a = a + lib.eye(6).reshape(2, 3, 6) * 3.0
    return (lib.linalg.tensorsolve(a, b),
            lib.linalg.tensorsolve(a.permute(2, 0, 1), b, dims=(0,)),
            lib.linalg.tensorinv(a.reshape(6, 2, 3), ind=1))

# Rows whose PyTorch result is not a parity check: row id -> why.
ROWS_WITHOUT_GOLDEN = {
    "as_strided_scatter-overlap_free": "PyTorch 2.13's gradient of the input is 1 where src "
                                       "was written and 0 elsewhere (its own gradcheck "
                                       "fails); the row's finite-difference check holds",
    "logcumsumexp-large": "float32 gradients of exp(100 x) ratios: the two libraries' "
                          "rounding differs by 1e-5 relative, more than a golden allows",
}


def case_row_programs() -> dict[str, Program]:
    """A program for every row of the case table (recorded or not); a row whose result
    shape depends on the data runs eagerly only."""
    from tests.ops.cases import CASES, COMPOSITES

    rows = [r for r in CASES + COMPOSITES if r.id not in ROWS_WITHOUT_GOLDEN]
    return {p.name: p for p in map(_row_program, rows)}


def _recorded_without_torch() -> set[str]:
    import json
    from pathlib import Path

    path = Path(__file__).with_name("goldens.json")
    return set(json.loads(path.read_text()).get(NO_TORCH_KEY, ())) if path.exists() else set()


_NO_TORCH = _recorded_without_torch()
PROGRAMS.update({name: p for name, p in case_row_programs().items() if name not in _NO_TORCH})
