"""dualgraph: one numerical program, run define-by-run and as a compiled static graph.

    import dualgraph as dg
    x = dg.tensor(2.0, requires_grad=True)
    y = dg.tensor(3.0, requires_grad=True)
    z = x * y + y ** 2
    z.backward()          # x.grad == 3, y.grad == 8
"""

import sys as _sys
import typing as _typing

import numpy as _np

from . import autograd, nn, ops, optim, passes, testing, viz
from . import dtypes as _dtypes
from .autograd import grad  # torch.autograd.grad under both names
from .compare import CompareReport, compare
from .compile import RetraceLimitError, StaleTraceError, compile
from .dtypes import bool_, float16, float32, float64, int32, int64
from .eager.autograd import detect_anomaly, record_locations
from .eager.creation import arange, full, ones, rand, randn, zeros
from .eager.export import graph_of
from .eager.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .eager.tensor import Tensor, backward, from_numpy, tensor
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
# math, tests, bitwise ops, casts and constructors (ops/elementwise.py, ops/math.py,
# ops/reduce.py, eager/creation.py).
from .eager.creation import empty, empty_like, eye, full_like, linspace, ones_like, zeros_like
from .ops.elementwise import (
    acos,
    acosh,
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
    copysign,
    cosh,
    erf,
    expm1,
    fix,
    floor,
    floor_divide,
    fmod,
    gcd,
    lcm,
    log1p,
    log2,
    log10,
    nextafter,
    remainder,
    round,
    sign,
    sinh,
    tan,
    trunc,
)
from .ops.math import (
    add,
    allclose,
    clamp,
    clip,
    div,
    divide,
    exp2,
    frac,
    isclose,
    isfinite,
    isinf,
    isnan,
    lerp,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    mul,
    multiply,
    pow,
    reciprocal,
    rsqrt,
    square,
    sub,
    subtract,
    true_divide,
)
from .ops.reduce import (
    all,
    any,
    logsumexp,
    prod,
    std,
    std_mean,
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

from .version import __version__ as __version__  # noqa: E402


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
# Math and constructors (ops/elementwise.py, ops/math.py, ops/reduce.py, eager/creation.py).
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
# serialization: PyTorch's everyday surface; torch.func's transforms (and `vmap`),
# torch.compiler's controls (and the torch._dynamo settings programs set),
# torch.multiprocessing and torch.random.
# PyTorch's own (underscored) name: loaded as a submodule, so ``dg._dynamo`` is there.
import dualgraph._dynamo  # noqa: E402, F401, I001
from . import (  # noqa: E402
    accelerator,
    amp,
    backends,
    compiler,
    cpu,
    cuda,
    distributed,
    distributions,
    func,
    mps,
    multiprocessing,
    profiler,
    random,
    utils,
    version,
)
from .dtypes import (  # noqa: E402
    bfloat16,
    complex32,
    complex64,
    complex128,
    device,
    int8,
    int16,
    uint8,
)
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
from .func import vmap  # noqa: E402
from .ops.mixin import TensorOps as _TensorOps  # noqa: E402
from .serialization import load, save  # noqa: E402

# PyTorch's alternative dtype spellings: `dg.long is dg.int64`, `dg.float is dg.float32`.
long = int64
int = int32  # noqa: A001
float = float32  # noqa: A001
double = float64
half = float16
short = int16
chalf, cfloat, cdouble = complex32, complex64, complex128
dtype = _np.dtype
mm = _TensorOps.mm  # dg.mm(a, b): 2-D only, as torch.mm
spmm = _TensorOps.mm  # torch.spmm: sparse_coo_tensor builds dense tensors (dg.sparse)
bmm = _TensorOps.bmm


def get_default_dtype() -> _typing.Any:
    """The dtype Python floats and the float factories give (`set_default_dtype`)."""
    return _dtypes.default_float()


def is_tensor(obj: _typing.Any) -> bool:
    """Whether ``obj`` is a dualgraph tensor (a traced value inside ``dg.compile`` and a
    complex tensor too)."""
    return isinstance(obj, (_TensorOps, ComplexTensor))


__all__ += [
    "Generator", "accelerator", "amp", "backends", "bfloat16", "bmm", "cpu", "cuda",
    "cdouble", "cfloat", "chalf", "complex32", "complex64", "complex128",
    "distributions", "version",
    "default_generator", "device", "distributed", "double", "dtype",
    "float", "get_default_dtype", "get_rng_state", "half", "inference_mode", "initial_seed",
    "int", "int8", "int16", "is_inference_mode_enabled", "is_tensor", "load", "long", "mm", "spmm",
    "multinomial", "rand_like", "randint", "randint_like", "randn_like", "randperm", "save",
    "seed", "set_rng_state", "short", "uint8", "utils",
    "compiler", "func", "mps", "multiprocessing", "profiler", "random", "vmap",
]
# PyTorch's out= keyword on the elementwise functions (written into out, resized if needed;
# not differentiable): `dualgraph.ops.composite.with_out`.
from .ops.composite import with_out as _with_out  # noqa: E402

for _name in (
    "abs", "acos", "acosh", "add", "arctan2", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "ceil", "clamp", "clip", "copysign", "cos", "cosh", "div", "divide", "erf",
    "exp", "exp2", "expm1", "floor", "floor_divide", "fmod", "frac", "gcd", "lcm", "lerp",
    "log", "log1p", "nextafter",
    "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "maximum", "minimum", "mul", "multiply", "pow", "reciprocal", "remainder", "round",
    "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "sub", "subtract", "tan",
    "tanh", "true_divide", "trunc",
    # and on the products and joins tutorials write into a buffer with
    "matmul", "mm", "bmm", "cat", "stack",
):
    globals()[_name] = _with_out(globals()[_name])
del _name

# isort: split
# The rest of PyTorch's top-level surface: linear algebra, special functions, statistics,
# sampling, dtype queries, settings, legacy tensor types, the ``linalg``/``special``/``jit``
# namespaces, and functions of tensor methods (``dg.t``, ``dg.squeeze``, ...).
import builtins as _builtins  # noqa: E402
import math as _math  # noqa: E402
import warnings as _warnings  # noqa: E402

from . import jit, linalg, sparse, special  # noqa: E402
from .eager.sampling import bernoulli, normal, poisson  # noqa: E402
from .nn import functional as _F  # noqa: E402
from .ops.decomp import (  # noqa: E402
    cholesky_inverse,
    cholesky_solve,
    lu_unpack,
    matrix_exp,
    pinverse,
    triangular_solve,
)
from .ops.decomp import torch_cholesky as cholesky  # noqa: E402
from .ops.decomp import torch_lu as lu  # noqa: E402
from .ops.decomp import torch_lu_solve as lu_solve  # noqa: E402
from .ops.decomp import torch_qr as qr  # noqa: E402
from .ops.decomp import torch_svd as svd  # noqa: E402
from .ops.math import (  # noqa: E402
    addcdiv,
    addcmul,
    clamp_max,
    clamp_min,
    deg2rad,
    float_power,
    fmax,
    fmin,
    frexp,
    heaviside,
    hypot,
    isin,
    isneginf,
    isposinf,
    isreal,
    ldexp,
    logaddexp2,
    nan_to_num,
    rad2deg,
    rsub,
    signbit,
    sinc,
    xlogy,
)
from .ops.matrix import det, logdet, matrix_power, renorm, slogdet  # noqa: E402
from .ops.matrix import inv as inverse  # noqa: E402
from .ops.matrix import torch_norm as norm  # noqa: E402
from .ops.products import (  # noqa: E402
    addbmm,
    addmm,
    addmv,
    addr,
    baddbmm,
    cdist,
    chain_matmul,
    dist,
    dot,
    inner,
    mv,
    tensordot,
    vdot,
)
from .ops.size import (  # noqa: E402
    Size,
    channels_last,
    channels_last_3d,
    contiguous_format,
    layout,
    memory_format,
    preserve_format,
    strided,
)
from .ops.special import digamma, erfc, erfinv, i0, lgamma, logit, polygamma  # noqa: E402
from .ops.special import multigammaln as mvlgamma  # noqa: E402
from .ops.statistics import (  # noqa: E402
    aminmax,
    bincount,
    corrcoef,
    cov,
    histogram,
    mode,
    nanmean,
    nanquantile,
    nansum,
    quantile,
    unique,
    unique_consecutive,
)
from .ops.strided import as_strided  # noqa: E402
from .ops.surface import FUNCTION_METHODS as _FUNCTION_METHODS  # noqa: E402
from .ops.surface import (  # noqa: E402
    as_strided_scatter,
    bartlett_window,
    blackman_window,
    block_diag,
    broadcast_shapes,
    broadcast_tensors,
    cartesian_prod,
    combinations,
    cumulative_trapezoid,
    diagflat,
    diagonal_scatter,
    dsplit,
    equal,
    function_of_method,
    gradient,
    hamming_window,
    hann_window,
    hsplit,
    index_reduce,
    is_nonzero,
    kaiser_window,
    logspace,
    masked_scatter,
    put,
    ravel,
    real,
    select,
    select_scatter,
    slice_scatter,
    split_with_sizes,
    take,
    trapezoid,
    tril_indices,
    triu_indices,
    unravel_index,
    vander,
    vsplit,
)
from .settings import (  # noqa: E402
    are_deterministic_algorithms_enabled,
    get_default_device,
    get_deterministic_debug_mode,
    get_float32_matmul_precision,
    get_num_interop_threads,
    get_num_threads,
    is_deterministic_algorithms_warn_only_enabled,
    is_warn_always_enabled,
    set_default_device,
    set_default_dtype,
    set_default_tensor_type,
    set_deterministic_debug_mode,
    set_float32_matmul_precision,
    set_flush_denormal,
    set_num_interop_threads,
    set_num_threads,
    set_printoptions,
    set_warn_always,
    use_deterministic_algorithms,
)
from .tensor_types import (  # noqa: E402
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from .typeinfo import (  # noqa: E402
    can_cast,
    finfo,
    iinfo,
    is_complex,
    is_floating_point,
    is_signed,
    promote_types,
    result_type,
)

for _name in _FUNCTION_METHODS:
    globals()[_name] = function_of_method(_name)
del _name
from .ops.surface import COPIES as _COPIES  # noqa: E402

globals().update(_COPIES)
__all__ += sorted(_COPIES)

uint16 = _np.dtype(_np.uint16)
uint32 = _np.dtype(_np.uint32)
uint64 = _np.dtype(_np.uint64)
e = _math.e
pi = _math.pi
inf = _math.inf
nan = _math.nan
newaxis = None
trapz = trapezoid
concat = concatenate
absolute = abs
arccos, arcsin, arctan = acos, asin, atan
arccosh, arcsinh, arctanh = acosh, asinh, atanh
negative = globals()["neg"]
sgn = sign
greater, greater_equal = globals()["gt"], globals()["ge"]
less, less_equal, not_equal = globals()["lt"], globals()["le"], globals()["ne"]


autocast = amp.autocast
is_autocast_enabled, is_autocast_cpu_enabled = amp.is_autocast_enabled, amp.is_autocast_cpu_enabled
get_autocast_dtype, is_autocast_available = amp.get_autocast_dtype, amp.is_autocast_available


def scalar_tensor(s: _typing.Any, *, dtype: _typing.Any = None, device: _typing.Any = None,
                  requires_grad: bool = False, **kwargs: _typing.Any) -> _typing.Any:
    """A 0-d tensor of the number ``s`` (float32 unless ``dtype`` says otherwise)."""
    return full((), s, dtype=dtype or float32, device=device, requires_grad=requires_grad)


def _pool(fn: _typing.Any) -> _typing.Any:
    """``torch.max_pool2d`` and kin: `nn.functional`'s, where an empty ``stride`` (the
    default of PyTorch's signature) means the kernel size."""
    def pool(input: _typing.Any, kernel_size: _typing.Any, stride: _typing.Any = (),  # noqa: A002
             *args: _typing.Any, **kwargs: _typing.Any) -> _typing.Any:
        return fn(input, kernel_size, None if stride in ((), []) else stride, *args, **kwargs)

    pool.__name__ = fn.__name__
    pool.__doc__ = fn.__doc__
    return pool


max_pool1d = _pool(_F.max_pool1d)
max_pool2d = _pool(_F.max_pool2d)
max_pool3d = _pool(_F.max_pool3d)
avg_pool1d = _pool(_F.avg_pool1d)


def numel(input: _typing.Any) -> int:  # noqa: A002
    """The number of elements of ``input``."""
    return input.numel()


def positive(input: _typing.Any) -> _typing.Any:  # noqa: A002
    """``input`` itself (``+input``)."""
    return input


def as_tensor(data: _typing.Any, dtype: _typing.Any = None,
              device: _typing.Any = None) -> _typing.Any:
    """``data`` as a tensor, without a copy when it already is one of ``dtype``."""
    from .dtypes import as_dtype, check_device

    check_device(device, "as_tensor()")
    if is_tensor(data):
        return data if dtype is None or as_dtype(dtype) == _np.dtype(data.dtype) else \
            data.to(dtype)
    return tensor(data, dtype=dtype)


asarray = as_tensor


def range(start: _typing.Any = 0, end: _typing.Any = None, step: _typing.Any = 1, *,  # noqa: A001
          out: _typing.Any = None, dtype: _typing.Any = None, layout: _typing.Any = None,
          device: _typing.Any = None, requires_grad: bool = False) -> _typing.Any:
    """PyTorch's deprecated ``torch.range``: ``start, start + step, ...`` up to and
    including ``end``, of the default float dtype unless ``dtype`` says otherwise.

    >>> dg.range(1, 4)
    tensor([1., 2., 3., 4.])
    """
    import warnings

    from .dtypes import as_dtype, check_device

    check_device(device, "range()")
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    if end is None:
        raise TypeError('range() missing 1 required positional arguments: "end"')
    start, end, step = (v.item() if is_tensor(v) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    n = _math.floor((end - start) / step) + 1
    values = start + _np.arange(n, dtype=_np.float64) * step
    result = tensor(values.astype(as_dtype(dtype) if dtype is not None
                                  else get_default_dtype()), requires_grad=requires_grad)
    if out is not None:
        out.resize_(tuple(result.shape))
        out.copy_(result)
        return out
    return result


def frombuffer(buffer: _typing.Any, *, dtype: _typing.Any, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> _typing.Any:
    """A 1-D tensor over the bytes of ``buffer`` (an object with the buffer protocol:
    ``bytearray``, ``array.array``, ``memoryview``, a NumPy array), from byte ``offset``,
    ``count`` elements (-1: all that fit). It shares the buffer's memory; a read-only
    buffer (``bytes``) is copied, with PyTorch's warning that it is not writable.

    >>> dg.frombuffer(bytearray(8), dtype=dg.int32)
    tensor([0, 0], dtype=dg.int32)
    """
    import warnings

    from .dtypes import as_dtype

    dt = as_dtype(dtype)
    view = memoryview(buffer)
    size = view.nbytes
    if count == 0 or count < -1:
        raise ValueError(f"both buffer length ({size}) and count ({count}) must not be 0")
    if not 0 <= offset < size:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({size} bytes) minus 1")
    if count == -1 and (size - offset) % dt.itemsize:
        raise ValueError(f"buffer length ({size - offset} bytes) after offset ({offset} bytes) "
                         f"must be a multiple of element size ({dt.itemsize})")
    if count > 0 and count * dt.itemsize > size - offset:
        raise ValueError(f"requested buffer length ({count} * {dt.itemsize} bytes) after "
                         f"offset ({offset} bytes) must not be greater than actual buffer "
                         f"length ({size} bytes)")
    a = _np.frombuffer(view.cast("B"), dtype=dt, count=count, offset=offset)
    if view.readonly:
        warnings.warn("The given buffer is not writable, and PyTorch does not support "
                      "non-writable tensors. This means you can write to the underlying "
                      "(supposedly non-writable) buffer using the tensor. You may want to copy "
                      "the buffer to protect its data or make it writable before converting it "
                      "to a tensor.", UserWarning, stacklevel=2)
        a = a.copy()
    return from_numpy(a, requires_grad=requires_grad)


def empty_strided(size: _typing.Any, stride: _typing.Any, *, dtype: _typing.Any = None,
                  layout: _typing.Any = None, device: _typing.Any = None,
                  requires_grad: bool = False, pin_memory: bool = False) -> _typing.Any:
    """An uninitialized tensor of ``size`` whose ``stride()`` is ``stride`` (elements), over
    a fresh buffer just large enough.

    >>> dg.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    from .dtypes import as_dtype, check_device

    check_device(device, "empty_strided()")
    size, stride = (tuple(_builtins.int(v) for v in size),
                    tuple(_builtins.int(v) for v in stride))
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, "
                           f"{len(stride)} strides")
    if _builtins.any(v < 0 for v in size) or _builtins.any(v < 0 for v in stride):
        raise RuntimeError(f"empty_strided: negative size or stride (size={list(size)}, "
                           f"stride={list(stride)})")
    dt = as_dtype(dtype) if dtype is not None else get_default_dtype()
    needed = 0 if 0 in size else 1 + _builtins.sum((n - 1) * s for n, s in zip(size, stride))
    base = _np.empty(_builtins.max(needed, 1), dt)
    a = _np.lib.stride_tricks.as_strided(base, size, tuple(s * dt.itemsize for s in stride))
    return from_numpy(a, requires_grad=requires_grad)


_REDUCTIONS = ("none", "mean", "sum")


def _reduction_name(fn: str, reduction: _typing.Any) -> _typing.Any:
    """PyTorch's reduction enum number (0 none, 1 mean, 2 sum) of its top-level losses."""
    if isinstance(reduction, str) or reduction not in (0, 1, 2):
        raise TypeError(f"{fn}(): argument 'reduction' must be 0, 1 or 2, not {reduction!r}")
    return _REDUCTIONS[reduction]


def kl_div(input: _typing.Any, target: _typing.Any, reduction: _typing.Any = 0, *,  # noqa: A002
           log_target: _typing.Any = False) -> _typing.Any:
    """``torch.kl_div``: `nn.functional.kl_div` with the reduction as PyTorch's enum number
    (0 ``'none'``, the default here as in PyTorch's function; 1 ``'mean'``, over every
    element; 2 ``'sum'``)."""
    name = _reduction_name("kl_div", reduction)
    with _warnings.catch_warnings():
        # F.kl_div warns that 'mean' is not 'batchmean'; the enum has no batchmean.
        _warnings.simplefilter("ignore", UserWarning)
        return _F.kl_div(input, target, reduction=name, log_target=log_target)


def typename(obj: _typing.Any) -> _typing.Any:
    """PyTorch's type name: ``"torch.FloatTensor"`` for a float32 tensor."""
    return obj.type() if is_tensor(obj) else type(obj).__name__


def dropout(input: _typing.Any, p: _typing.Any = 0.5, train: _typing.Any = True) -> _typing.Any:  # noqa: A002
    """``torch.dropout``: `nn.functional.dropout` with PyTorch's ``train`` spelling."""
    return _F.dropout(input, p, train)


def layer_norm(input: _typing.Any, normalized_shape: _typing.Any,  # noqa: A002
               weight: _typing.Any = None, bias: _typing.Any = None, eps: _typing.Any = 1e-5,
               cudnn_enable: _typing.Any = True) -> _typing.Any:
    """``torch.layer_norm``: `nn.functional.layer_norm`."""
    return _F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: _typing.Any, num_groups: _typing.Any, weight: _typing.Any = None,  # noqa: A002
               bias: _typing.Any = None, eps: _typing.Any = 1e-5,
               cudnn_enabled: _typing.Any = True) -> _typing.Any:
    """``torch.group_norm``: `nn.functional.group_norm`."""
    return _F.group_norm(input, num_groups, weight, bias, eps)


def embedding(weight: _typing.Any, indices: _typing.Any, padding_idx: _typing.Any = -1,
              scale_grad_by_freq: _typing.Any = False, sparse: _typing.Any = False) -> _typing.Any:
    """``torch.embedding(weight, indices)``: the rows of ``weight`` (note the order)."""
    return _F.embedding(indices, weight, None if padding_idx < 0 else padding_idx)


def cosine_embedding_loss(input1: _typing.Any, input2: _typing.Any, target: _typing.Any,
                          margin: _typing.Any = 0.0, reduction: _typing.Any = 0) -> _typing.Any:
    """``torch.cosine_embedding_loss``: `nn.functional.cosine_embedding_loss` with the
    reduction as an enum number (0, the default, is ``'none'``)."""
    return _F.cosine_embedding_loss(input1, input2, target, margin,
                                    reduction=_reduction_name("cosine_embedding_loss", reduction))


def hinge_embedding_loss(input: _typing.Any, target: _typing.Any,  # noqa: A002
                         margin: _typing.Any = 1.0, reduction: _typing.Any = 0) -> _typing.Any:
    """``torch.hinge_embedding_loss`` (reduction as an enum number; see `kl_div`)."""
    return _F.hinge_embedding_loss(input, target, margin,
                                   reduction=_reduction_name("hinge_embedding_loss", reduction))


def margin_ranking_loss(input1: _typing.Any, input2: _typing.Any, target: _typing.Any,
                        margin: _typing.Any = 0.0, reduction: _typing.Any = 0) -> _typing.Any:
    """``torch.margin_ranking_loss`` (reduction as an enum number; see `kl_div`)."""
    return _F.margin_ranking_loss(input1, input2, target, margin,
                                  reduction=_reduction_name("margin_ranking_loss", reduction))


def triplet_margin_loss(anchor: _typing.Any, positive: _typing.Any, negative: _typing.Any,
                        margin: _typing.Any = 1.0, p: _typing.Any = 2.0, eps: _typing.Any = 1e-6,
                        swap: _typing.Any = False, reduction: _typing.Any = 0) -> _typing.Any:
    """``torch.triplet_margin_loss`` (reduction as an enum number; see `kl_div`)."""
    return _F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction=_reduction_name("triplet_margin_loss", reduction))


def poisson_nll_loss(input: _typing.Any, target: _typing.Any, log_input: _typing.Any,  # noqa: A002
                     full: _typing.Any, eps: _typing.Any, reduction: _typing.Any) -> _typing.Any:
    """``torch.poisson_nll_loss``: every argument positional, the reduction an enum number."""
    return _F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_reduction_name("poisson_nll_loss", reduction))


def ctc_loss(log_probs: _typing.Any, targets: _typing.Any, input_lengths: _typing.Any,
             target_lengths: _typing.Any, blank: _typing.Any = 0, reduction: _typing.Any = 0,
             zero_infinity: _typing.Any = False) -> _typing.Any:
    """``torch.ctc_loss`` (reduction as an enum number; see `kl_div`)."""
    return _F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                       _reduction_name("ctc_loss", reduction), zero_infinity)


def batch_norm(input: _typing.Any, weight: _typing.Any, bias: _typing.Any,  # noqa: A002
               running_mean: _typing.Any, running_var: _typing.Any, training: _typing.Any,
               momentum: _typing.Any, eps: _typing.Any, cudnn_enabled: _typing.Any) -> _typing.Any:
    """``torch.batch_norm``: `nn.functional.batch_norm` with the parameters before the
    running statistics, every argument positional."""
    return _F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: _typing.Any, weight: _typing.Any, bias: _typing.Any,  # noqa: A002
                  running_mean: _typing.Any, running_var: _typing.Any,
                  use_input_stats: _typing.Any, momentum: _typing.Any, eps: _typing.Any,
                  cudnn_enabled: _typing.Any) -> _typing.Any:
    """``torch.instance_norm``: `nn.functional.instance_norm` in `batch_norm`'s order."""
    return _F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                            momentum, eps)


def rms_norm(input: _typing.Any, normalized_shape: _typing.Any,  # noqa: A002
             weight: _typing.Any = None, eps: _typing.Any = None) -> _typing.Any:
    """``torch.rms_norm``: `nn.functional.rms_norm`."""
    return _F.rms_norm(input, normalized_shape, weight, eps)


def _train_spelling(fn: _typing.Any, name: str, inplace: _typing.Any) -> _typing.Any:
    """``torch.alpha_dropout(input, p, train)`` and kin: `nn.functional`'s with every
    argument positional and ``train`` for ``training``."""
    def dropout_fn(input: _typing.Any, p: _typing.Any, train: _typing.Any) -> _typing.Any:  # noqa: A002
        return fn(input, p, train, inplace)

    dropout_fn.__name__ = dropout_fn.__qualname__ = name
    dropout_fn.__doc__ = f"``torch.{name}``: `nn.functional.{fn.__name__}`" + \
        (", writing into ``input``." if inplace else ".")
    return dropout_fn


dropout_ = _train_spelling(_F.dropout, "dropout_", True)
alpha_dropout = _train_spelling(_F.alpha_dropout, "alpha_dropout", False)
alpha_dropout_ = _train_spelling(_F.alpha_dropout, "alpha_dropout_", True)
feature_alpha_dropout = _train_spelling(_F.feature_alpha_dropout, "feature_alpha_dropout", False)
feature_alpha_dropout_ = _train_spelling(_F.feature_alpha_dropout, "feature_alpha_dropout_",
                                         True)


def constant_pad_nd(input: _typing.Any, pad: _typing.Any,  # noqa: A002
                    value: _typing.Any = 0) -> _typing.Any:
    """``torch.constant_pad_nd``: `nn.functional.pad` with a constant."""
    return _F.pad(input, list(pad), "constant", value)


def convolution(input: _typing.Any, weight: _typing.Any, bias: _typing.Any,  # noqa: A002
                stride: _typing.Any, padding: _typing.Any, dilation: _typing.Any,
                transposed: _typing.Any, output_padding: _typing.Any,
                groups: _typing.Any) -> _typing.Any:
    """``torch.convolution``: the 1-, 2- or 3-D convolution (or, ``transposed``, transposed
    convolution) of `nn.functional` that ``weight``'s rank selects."""
    n = len(weight.shape) - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution(): expected a 3-D, 4-D or 5-D weight, got shape "
                           f"{tuple(weight.shape)}")
    if transposed:
        fn = (_F.conv_transpose1d, _F.conv_transpose2d, _F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (_F.conv1d, _F.conv2d, _F.conv3d)[n - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)


def fill(input: _typing.Any, value: _typing.Any) -> _typing.Any:  # noqa: A002
    """A new tensor of ``input``'s shape and dtype, every element ``value`` (a number or a
    0-d tensor, whose gradient is the sum of the result's).

    >>> dg.fill(dg.zeros(2), 3.0)
    tensor([3., 3.])
    """
    if is_tensor(value):
        if value.shape:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {len(value.shape)} dimensions.")
        return value.to(input.dtype).expand(tuple(input.shape)).clone()
    return full_like(input, value)


def set_anomaly_enabled(enabled: _typing.Any, check_nan: _typing.Any = True) -> None:
    """``torch.set_anomaly_enabled``: anomaly mode on or off (`autograd.set_detect_anomaly`)."""
    autograd.set_detect_anomaly(enabled, check_nan)


def is_anomaly_enabled() -> _typing.Any:
    """Whether anomaly mode is on."""
    from .eager.autograd import ANOMALY

    return _builtins.bool(ANOMALY[0])


def is_anomaly_check_nan_enabled() -> _typing.Any:
    """Whether anomaly mode checks for nan: whenever it is on."""
    return is_anomaly_enabled()


# nn.functional's ops that torch also exports at the top level with the same signature.
for _name in ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "pixel_shuffle", "pixel_unshuffle", "prelu", "selu", "celu",
              "cosine_similarity", "pairwise_distance", "threshold", "hardshrink",
              "adaptive_avg_pool1d", "adaptive_max_pool1d", "bilinear", "rrelu", "pdist",
              "celu_", "selu_", "rrelu_", "threshold_", "channel_shuffle"):
    globals()[_name] = getattr(_F, _name)
del _name
__all__ += ["alpha_dropout", "alpha_dropout_", "batch_norm", "celu_", "channel_shuffle",
            "constant_pad_nd", "convolution", "cosine_embedding_loss", "ctc_loss", "dropout_",
            "feature_alpha_dropout", "feature_alpha_dropout_", "fill", "hinge_embedding_loss",
            "instance_norm", "is_anomaly_check_nan_enabled", "is_anomaly_enabled",
            "margin_ranking_loss", "poisson_nll_loss", "rms_norm", "rrelu_", "selu_",
            "set_anomaly_enabled", "threshold_", "triplet_margin_loss",
            "get_deterministic_debug_mode", "is_warn_always_enabled",
            "set_deterministic_debug_mode", "set_warn_always"]
__all__ += ["bilinear", "pdist", "rrelu", "empty_strided", "frexp", "frombuffer", "gcd",
            "kl_div", "lcm", "nextafter", "range"]

__all__ += [
    "BoolTensor", "ByteTensor", "CharTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
    "IntTensor", "LongTensor", "ShortTensor", "Size", "absolute", "adaptive_avg_pool1d",
    "adaptive_max_pool1d", "autocast", "get_autocast_dtype", "is_autocast_available",
    "is_autocast_cpu_enabled", "is_autocast_enabled", "avg_pool1d", "bartlett_window",
    "blackman_window",
    "channels_last", "channels_last_3d", "combinations", "contiguous_format", "hamming_window",
    "hann_window", "kaiser_window", "max_pool1d", "max_pool2d", "max_pool3d", "memory_format",
    "preserve_format", "real", "scalar_tensor", "unravel_index", "addbmm", "addcdiv",
    "addcmul", "addmm", "addmv", "addr", "aminmax", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctanh", "are_deterministic_algorithms_enabled", "as_tensor", "asarray",
    "baddbmm", "bernoulli", "bincount", "histogram", "block_diag", "broadcast_shapes",
    "broadcast_tensors",
    "can_cast", "cartesian_prod", "cdist", "celu", "chain_matmul", "clamp_max", "clamp_min",
    "concat", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "corrcoef", "cosine_similarity", "cov", "cumulative_trapezoid",
    "deg2rad", "det", "diagflat", "digamma", "dist", "dot", "dropout", "dsplit", "e",
    "embedding", "equal", "erfc", "erfinv", "finfo", "float_power", "fmax", "fmin",
    "get_default_device", "get_float32_matmul_precision", "get_num_interop_threads",
    "get_num_threads", "greater", "greater_equal", "group_norm", "hardshrink", "heaviside",
    "hsplit", "hypot", "i0", "iinfo", "inf", "inner", "inverse", "is_complex",
    "is_deterministic_algorithms_warn_only_enabled", "is_floating_point", "is_nonzero",
    "is_signed", "isin", "isneginf", "isposinf", "isreal", "jit", "layer_norm", "layout",
    "ldexp", "less", "less_equal", "lgamma", "linalg", "logaddexp2", "logdet", "logit",
    "logspace", "masked_scatter", "matrix_power", "mode", "mv", "mvlgamma", "nan",
    "nan_to_num", "nanmean", "nanquantile", "nansum", "negative", "newaxis", "norm",
    "normal", "not_equal", "numel", "pairwise_distance", "pi", "pixel_shuffle",
    "pixel_unshuffle", "poisson", "polygamma", "positive", "prelu", "promote_types", "put",
    "quantile", "as_strided", "rad2deg", "ravel", "renorm", "result_type", "rsub", "select", "selu",
    "set_default_device", "set_default_dtype", "set_default_tensor_type",
    "set_float32_matmul_precision", "set_flush_denormal", "set_num_interop_threads",
    "set_num_threads", "set_printoptions", "sgn", "signbit", "sinc", "slogdet", "special",
    "split_with_sizes", "strided", "take", "tensordot", "threshold", "trapezoid", "trapz",
    "tril_indices", "triu_indices", "typename", "uint16", "uint32", "uint64", "unique",
    "unique_consecutive", "use_deterministic_algorithms", "vander", "vdot", "vsplit", "xlogy",
    *_FUNCTION_METHODS,
]
__all__ += ["gradient"]
__all__ += ["as_strided_scatter", "diagonal_scatter", "index_reduce", "select_scatter",
            "slice_scatter"]
__all__ += ["cholesky", "cholesky_inverse", "cholesky_solve", "matrix_exp", "pinverse", "qr",
            "svd", "triangular_solve", "lu", "lu_solve", "lu_unpack"]
sparse_coo_tensor = sparse.sparse_coo_tensor
sparse.torch = _sys.modules[__name__]  # torch.sparse.torch is torch
__all__ += ["sparse", "sparse_coo_tensor"]

# torch._foreach_mul_(ema, 0.99) and the rest of the list-at-once functions.
from .ops.foreach import FOREACH as _FOREACH  # noqa: E402

globals().update(_FOREACH)
del _FOREACH

# out= on the reductions and scans, as on the elementwise functions above; a function of
# two results (``dg.max(x, 1)``) takes ``out=(values, indices)``.
for _name in (
    "sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "logsumexp",
    "std", "var", "all", "any", "median", "nanmedian", "nansum", "nanmean", "norm", "mode",
    "aminmax", "quantile", "nanquantile", "kthvalue", "cumsum", "cumprod", "logcumsumexp",
    "cummax", "cummin", "sort", "topk",
):
    globals()[_name] = _with_out(globals()[_name])
del _name

# PyTorch's keyword spellings of the tensor arguments, ``dg.sum(input=x)`` and
# ``dg.maximum(x, other=y)``, for the functions whose parameters are named otherwise.
from .ops.surface import accept_input_keyword as _accept_input_keyword  # noqa: E402

for _name in __all__:
    _fn = globals().get(_name)
    if _accept_input_keyword.applies(_fn):
        globals()[_name] = _accept_input_keyword(_fn)
del _name, _fn

# Complex tensors (`dualgraph.ops.complex`): their constructors and views, and the functions
# above taking complex arguments, which they hand to the complex compositions.
from .ops import complex as _complex  # noqa: E402
from .ops.complex import ComplexTensor, angle, imag, polar, view_as_complex, view_as_real  # noqa: E402
from .ops.complex import complex as complex  # noqa: E402, A004 - PyTorch's name

for _name in _complex.FUNCTIONS:
    if _name in globals():
        globals()[_name] = _complex.dispatch(_name, globals()[_name])
del _name
__all__ += ["ComplexTensor", "angle", "complex", "imag", "polar", "view_as_complex",
            "view_as_real"]
from . import fft  # noqa: E402
from .fft import istft, stft  # noqa: E402

__all__ += ["fft", "istft", "stft"]
