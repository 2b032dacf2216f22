"""dualgraph: one numerical program, run define-by-run and as a compiled static graph.

    import dualgraph as dg
    x = dg.tensor(2.0, requires_grad=True)
    y = dg.tensor(3.0, requires_grad=True)
    z = x * y + y ** 2
    z.backward()          # x.grad == 3, y.grad == 8
"""

import typing as _typing

import numpy as _np

from . import autograd, nn, ops, optim, passes, testing, viz
from .compare import CompareReport, compare
from .compile import RetraceLimitError, StaleTraceError, compile
from .dtypes import bool_, float16, float32, float64, int32, int64
from .eager.autograd import detect_anomaly, record_locations
from .eager.creation import arange, full, ones, rand, randn, zeros
from .eager.export import graph_of
from .eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .eager.tensor import Tensor, backward, from_numpy, grad, tensor
from .errors import EagerOnlyError, ShapeError, TraceError
from .explain import explain
from .ir import Graph, GraphError, Node, interpret
from .ops.composite import log_softmax, softmax
from .ops.elementwise import (
    abs,
    cos,
    exp,
    log,
    maximum,
    minimum,
    relu,
    sigmoid,
    sin,
    sqrt,
    tanh,
)
from .ops.linalg import matmul
from .ops.reduce import amax, amin, argmax, argmin, max, mean, min, sum
from .ops.shape import concatenate, reshape, stack, transpose
from .trace.autodiff import differentiate
from .trace.tracer import trace

# isort: split
# math, tests, bitwise ops, casts and constructors (ops/math.py, eager/creation.py).
from .eager.creation import empty, empty_like, eye, full_like, linspace, ones_like, zeros_like
from .ops.math import (
    acos,
    acosh,
    add,
    all,
    allclose,
    any,
    arctan2,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clamp,
    clip,
    copysign,
    cosh,
    div,
    divide,
    erf,
    exp2,
    expm1,
    fix,
    floor,
    floor_divide,
    fmod,
    frac,
    isclose,
    isfinite,
    isinf,
    isnan,
    lerp,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    mul,
    multiply,
    pow,
    prod,
    reciprocal,
    remainder,
    round,
    rsqrt,
    sign,
    sinh,
    square,
    std,
    std_mean,
    sub,
    subtract,
    tan,
    true_divide,
    trunc,
    var,
    var_mean,
)

# isort: split
# scans and sorting (ops/scan.py).
# shape ops (ops/shape.py, ops/linalg.py, ops/einsum.py). The matrix trace is only the
# method t.trace(): dg.trace is the tracer (API.md B1).
from .ops.einsum import einsum
from .ops.linalg import cross, ger, kron, outer
from .ops.scan import (
    argsort,
    bucketize,
    count_nonzero,
    cummax,
    cummin,
    cumprod,
    cumsum,
    histc,
    kthvalue,
    logcumsumexp,
    median,
    msort,
    nanmedian,
    searchsorted,
    sort,
    topk,
)
from .ops.shape import (
    atleast_1d,
    atleast_2d,
    atleast_3d,
    chunk,
    column_stack,
    diag,
    diag_embed,
    diagonal,
    diff,
    dstack,
    flatten,
    flip,
    fliplr,
    flipud,
    hstack,
    meshgrid,
    moveaxis,
    movedim,
    narrow,
    repeat_interleave,
    roll,
    rot90,
    row_stack,
    split,
    swapaxes,
    swapdims,
    tensor_split,
    tile,
    tril,
    triu,
    unbind,
    unflatten,
    vstack,
)

bool = bool_  # noqa: A001 - PyTorch's spelling, dg.bool
cat = concatenate

__version__ = "0.1.0"


def sweep(*args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
    """Comparison grids on a Dask cluster: see `dualgraph.sweeps.sweep` (imported on
    first call, so ``import dualgraph`` never imports Dask)."""
    from .sweeps import sweep as run

    return run(*args, **kwargs)


__all__ = [
    "CompareReport", "EagerOnlyError", "Graph", "GraphError", "Node", "ShapeError", "Tensor",
    "TraceError",
    "autograd", "compare", "compile", "sweep",
    "RetraceLimitError", "StaleTraceError", "detect_anomaly", "differentiate", "explain",
    "record_locations",
    "interpret", "passes", "trace", "viz", "abs", "arange", "backward", "bool", "bool_",
    "cat", "concatenate", "cos", "enable_grad", "exp", "float16", "float32", "float64",
    "from_numpy", "full", "grad", "graph_of", "int32", "int64", "is_grad_enabled", "log",
    "log_softmax", "manual_seed", "matmul", "max", "maximum", "mean", "minimum", "nn",
    "amax", "amin", "argmax", "argmin", "min",
    "no_grad", "ones", "ops", "optim", "rand", "randn", "relu", "reshape", "set_grad_enabled",
    "sigmoid", "sin", "softmax", "sqrt", "stack", "sum", "tanh", "tensor", "testing", "transpose",
    "where", "zeros",
]
# Math and constructors (ops/math.py, eager/creation.py).
__all__ += [
    "empty", "empty_like", "eye", "full_like", "linspace", "ones_like", "zeros_like", "acos",
    "acosh", "add", "all", "allclose", "amax", "amin", "any", "arctan2", "asin", "asinh",
    "atan", "atan2", "atanh", "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clamp", "clip", "copysign", "cosh", "div",
    "divide", "erf",
    "exp2", "expm1", "fix", "floor", "floor_divide", "fmod", "frac", "isclose", "isfinite",
    "isinf", "isnan", "lerp", "log1p", "log2", "log10", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "logsumexp", "mul", "multiply", "pow", "prod",
    "reciprocal", "remainder", "round", "rsqrt", "sign", "sinh", "square", "std", "std_mean",
    "sub", "subtract", "tan", "true_divide", "trunc", "var", "var_mean",
]

# isort: split
# indexing (ops/index.py). dg.where also takes the condition alone (nonzero).
from .ops.index import (  # noqa: E402
    argwhere,
    gather,
    index_add,
    index_copy,
    index_fill,
    index_put,
    index_select,
    masked_fill,
    masked_select,
    nonzero,
    scatter,
    scatter_add,
    scatter_reduce,
    take_along_dim,
    where,
)

__all__ += [
    "argwhere", "gather", "index_add", "index_copy", "index_fill", "index_put", "index_select",
    "masked_fill", "masked_select", "nonzero", "scatter", "scatter_add", "scatter_reduce",
    "take_along_dim",
]

# scans and sorting (ops/scan.py).
__all__ += [
    "argsort", "bucketize", "count_nonzero", "cummax", "cummin", "cumprod", "cumsum", "histc",
    "kthvalue", "logcumsumexp", "median", "msort", "nanmedian", "searchsorted", "sort", "topk",
]

__all__ += [
    "atleast_1d", "atleast_2d", "atleast_3d", "chunk", "column_stack", "cross", "diag",
    "diag_embed", "diagonal", "diff", "dstack", "einsum", "flatten", "flip", "fliplr", "flipud",
    "ger", "hstack", "kron", "meshgrid", "moveaxis", "movedim", "narrow", "outer",
    "repeat_interleave", "roll", "rot90", "row_stack", "split", "swapaxes", "swapdims",
    "tensor_split", "tile", "tril", "triu", "unbind", "unflatten", "vstack",
]

# isort: split
# Devices (CPU only), dtype aliases, random generators, inference mode, data loading and
# serialization: PyTorch's everyday surface.
from . import accelerator, amp, backends, cuda, distributed, distributions, utils  # noqa: E402
from .dtypes import bfloat16, device, int8, int16, uint8  # noqa: E402
from .eager.creation import (  # noqa: E402
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    multinomial,
    rand_like,
    randint,
    randint_like,
    randn_like,
    randperm,
    seed,
    set_rng_state,
)
from .eager.grad_mode import inference_mode, is_inference_mode_enabled  # noqa: E402
from .ops.mixin import TensorOps as _TensorOps  # noqa: E402
from .serialization import load, save  # noqa: E402

# PyTorch's alternative dtype spellings: `dg.long is dg.int64`, `dg.float is dg.float32`.
long = int64
int = int32  # noqa: A001
float = float32  # noqa: A001
double = float64
half = float16
short = int16
dtype = _np.dtype
mm = _TensorOps.mm  # dg.mm(a, b): 2-D only, as torch.mm
bmm = _TensorOps.bmm


def get_default_dtype() -> _typing.Any:
    """The dtype Python floats and the float factories give: float32."""
    return float32


def is_tensor(obj: _typing.Any) -> bool:
    """Whether ``obj`` is a dualgraph tensor (a traced value inside ``dg.compile`` too)."""
    return isinstance(obj, _TensorOps)


__all__ += [
    "Generator", "accelerator", "amp", "backends", "bfloat16", "bmm", "cuda", "distributions",
    "default_generator", "device", "distributed", "double", "dtype",
    "float", "get_default_dtype", "get_rng_state", "half", "inference_mode", "initial_seed",
    "int", "int8", "int16", "is_inference_mode_enabled", "is_tensor", "load", "long", "mm",
    "multinomial", "rand_like", "randint", "randint_like", "randn_like", "randperm", "save",
    "seed", "set_rng_state", "short", "uint8", "utils",
]
# PyTorch's out= keyword on the elementwise functions (written into out, resized if needed;
# not differentiable): `dualgraph.ops.composite.with_out`.
from .ops.composite import with_out as _with_out  # noqa: E402

for _name in (
    "abs", "acos", "acosh", "add", "arctan2", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "ceil", "clamp", "clip", "copysign", "cos", "cosh", "div", "divide", "erf",
    "exp", "exp2", "expm1", "floor", "floor_divide", "fmod", "frac", "lerp", "log", "log1p",
    "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "maximum", "minimum", "mul", "multiply", "pow", "reciprocal", "remainder", "round",
    "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "sub", "subtract", "tan",
    "tanh", "true_divide", "trunc",
):
    globals()[_name] = _with_out(globals()[_name])
del _name
