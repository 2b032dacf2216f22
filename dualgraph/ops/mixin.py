"""`TensorOps`: operators and methods shared by eager tensors and tracers.

Every method goes through `bind`, and every in-place method through the active mode's
`inplace` (`dualgraph.modes.Mode`), so an eager tensor and a tracer running the same
program issue the same sequence of registry ops. The in-place errors every mode raises
are written here once.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from .. import dtypes
from ..ir.graph import Literal
from ..modes import bind, current_mode
from . import composite as C
from . import elementwise as E
from . import index as I
from . import linalg as L
from . import math as M
from . import pool as P
from . import reduce as R
from . import scan as SC
from . import shape as S
from . import strided as ST
from .broadcast import broadcasts_to, check_python_int, normalize_axis, normalize_dim
from .layout import check_view, contiguous_copy
from .precision import AUTOCAST
from .size import strided


def _operand(x: Any) -> Any:
    """Python numbers stay literals, arrays become constants; others are not supported."""
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        # A NumPy scalar is a Python number to PyTorch's operators (``np.float64(0.3) *
        # x`` keeps x's float32), not a 0-d array.
        return x.item()
    if isinstance(x, (TensorOps, np.ndarray, np.generic)) or isinstance(x, Literal):
        return x
    if isinstance(x, (list, tuple)):
        return np.asarray(x)
    return NotImplemented


def _bin(op: Any, a: Any, b: Any, reflected: bool = False) -> Any:
    """A binary operator: one ``bind`` call, with the operand check first (hot path)."""
    if not isinstance(b, _FAST) or type(b) is np.float64:
        if isinstance(b, (complex, np.complexfloating)):
            return _complex_operand(op, a, b, reflected)
        b = _operand(b)
        if b is NotImplemented:
            return NotImplemented
    return bind(op, b, a) if reflected else bind(op, a, b)


def _complex_operand(op: Any, a: Any, b: Any, reflected: bool) -> Any:
    """A real tensor with a Python complex number: the complex result, as PyTorch."""
    from .complex import binary

    return binary(op.name, a, b, reflected)


def _matmul(a: Any, b: Any, reflected: bool) -> Any:
    """``a @ b`` (``b @ a`` when ``reflected``): inside an autocast region through
    `linalg.matmul`, which rounds the operands and the product to the region's format."""
    if AUTOCAST.value is None:
        return _bin(L.MATMUL, a, b, reflected)
    if not isinstance(b, _FAST):
        b = _operand(b)
        if b is NotImplemented:
            return NotImplemented
    return L.matmul(b, a) if reflected else L.matmul(a, b)


# ------------------------------------------------------------------ in-place errors
# The texts every mode raises for an in-place op it refuses (PyTorch's wording).


def leaf_inplace_error() -> RuntimeError:
    return RuntimeError(
        "a leaf Variable that requires grad is being used in an in-place operation "
        "(wrap the update in `with dg.no_grad():`)"
    )


def view_leaf_inplace_error() -> RuntimeError:
    return RuntimeError(
        "a view of a leaf Variable that requires grad is being used in an in-place "
        "operation (wrap the update in `with dg.no_grad():`)"
    )


def expanded_write_error(name: str) -> RuntimeError:
    return RuntimeError(f"in-place {name}: unsupported operation: more than one element of "
                        "the written-to tensor refers to a single memory location (a view "
                        "made by expand/broadcast_to); clone() it first")


def writes_expanded(chain: tuple) -> bool:
    """Whether a view chain (`dualgraph.ops.shape.view_step`) broadcasts its base."""
    return any(name == "broadcast_to" for name, _ in chain)


def shape_of(x: Any) -> tuple:
    """The shape of an in-place op's other operand (a tensor, array, list or number, a
    traced number argument too)."""
    if hasattr(type(x), "trace_value"):  # a traced number argument: asking it for a
        return ()  # .shape would make the trace key it by value
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def check_inplace_shape(name: str, shape: tuple, other: tuple) -> None:
    """``t (op)= x`` must leave ``t``'s shape as it is: ``x``'s shape must broadcast to it."""
    if other == shape or not other:
        return
    try:
        out = tuple(np.broadcast_shapes(shape, other))
    except ValueError:
        raise RuntimeError(f"in-place {name}: shapes {shape} and {other} cannot be broadcast "
                           "together") from None
    if out != shape:
        raise RuntimeError(f"in-place {name}: output with shape {tuple(shape)} doesn't match "
                           f"the broadcast shape {tuple(out)}")


def check_copy_shape(shape: tuple, src: tuple) -> None:
    """``t.copy_(src)``: ``src`` must broadcast to ``t``'s shape."""
    if src == shape or not src:
        return
    if not broadcasts_to(src, shape):
        raise RuntimeError(f"copy_: source of shape {tuple(src)} cannot be broadcast to "
                           f"{tuple(shape)}")


def cast_error(name: str, result: np.dtype, dtype: np.dtype) -> RuntimeError:
    return RuntimeError(f"in-place {name}: result type {result} can't be cast to {dtype}")


def _alpha_first(name: str, o: Any, alpha: Any) -> tuple[Any, Any]:
    """PyTorch's deprecated ``add_(Number alpha, Tensor other)`` (old tutorials'
    ``p.data.add_(-lr, p.grad.data)``): a number then a tensor are the scale and the
    tensor, with PyTorch's deprecation warning."""
    if isinstance(alpha, TensorOps) and not isinstance(o, TensorOps):
        warnings.warn(f"This overload of {name} is deprecated: {name}(Number alpha, Tensor "
                      f"other). Consider using {name}(Tensor other, *, Number alpha) instead.",
                      UserWarning, stacklevel=3)
        return alpha, o
    return o, alpha


class TensorOps:
    """Arithmetic, comparisons, reductions and shape methods, all via ``bind``."""

    __slots__ = ()
    __array_priority__ = 1000  # ndarray (op) Tensor defers to our reflected operators
    __hash__ = object.__hash__  # == is elementwise; identity hashing keeps dict keys working

    # ------------------------------------------------------------------ arithmetic
    def __add__(self, o): return _bin(E.ADD, self, o)  # noqa: E704
    def __radd__(self, o): return _bin(E.ADD, self, o, True)  # noqa: E704
    def __sub__(self, o): return _bin(E.SUB, self, o)  # noqa: E704
    def __rsub__(self, o): return _bin(E.SUB, self, o, True)  # noqa: E704
    def __mul__(self, o): return _bin(E.MUL, self, o)  # noqa: E704
    def __rmul__(self, o): return _bin(E.MUL, self, o, True)  # noqa: E704
    def __truediv__(self, o): return _bin(E.DIV, self, o)  # noqa: E704
    def __rtruediv__(self, o): return _bin(E.DIV, self, o, True)  # noqa: E704
    def __pow__(self, o): return _bin(E.POW, self, o)  # noqa: E704
    def __rpow__(self, o): return _bin(E.POW, self, o, True)  # noqa: E704
    def __matmul__(self, o): return _matmul(self, o, False)  # noqa: E704
    def __rmatmul__(self, o): return _matmul(self, o, True)  # noqa: E704

    def __lt__(self, o): return _bin(E.LT, self, o)  # noqa: E704
    def __le__(self, o): return _bin(E.LE, self, o)  # noqa: E704
    def __gt__(self, o): return _bin(E.GT, self, o)  # noqa: E704
    def __ge__(self, o): return _bin(E.GE, self, o)  # noqa: E704
    def __eq__(self, o): return _bin(E.EQ, self, o)  # noqa: E704
    def __ne__(self, o): return _bin(E.NE, self, o)  # noqa: E704

    def __neg__(self) -> Any:
        return E.neg(self)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        return E.abs(self)

    # PyTorch's method spellings.
    def add(self, o: Any, *, alpha: Any = 1) -> Any:
        return self + o if M.is_one(alpha) else M.add(self, o, alpha=alpha)

    def sub(self, o: Any, *, alpha: Any = 1) -> Any:
        return self - o if M.is_one(alpha) else M.sub(self, o, alpha=alpha)

    def mul(self, o: Any) -> Any:
        return self * o

    def div(self, o: Any, *, rounding_mode: str | None = None) -> Any:
        return self / o if rounding_mode is None else M.div(self, o, rounding_mode=rounding_mode)

    def pow(self, o: Any) -> Any:
        return self ** o

    def neg(self) -> Any:
        return E.neg(self)

    def matmul(self, o: Any) -> Any:
        return self @ o

    # ------------------------------------------------------------------ in place
    # The active mode checks, computes and writes (`Mode.inplace`): one spelling for all.
    def __iadd__(self, o): return current_mode().inplace(self, E.ADD, o)  # noqa: E704
    def __isub__(self, o): return current_mode().inplace(self, E.SUB, o)  # noqa: E704
    def __imul__(self, o): return current_mode().inplace(self, E.MUL, o)  # noqa: E704
    def __itruediv__(self, o): return current_mode().inplace(self, E.DIV, o)  # noqa: E704

    def add_(self, o: Any, alpha: Any = 1) -> Any:
        o, alpha = _alpha_first("add_", o, alpha)
        return current_mode().inplace(self, E.ADD, o if M.is_one(alpha) else o * alpha)

    def sub_(self, o: Any, alpha: Any = 1) -> Any:
        o, alpha = _alpha_first("sub_", o, alpha)
        return current_mode().inplace(self, E.SUB, o if M.is_one(alpha) else o * alpha)

    def mul_(self, o: Any) -> Any:
        return current_mode().inplace(self, E.MUL, o)

    def div_(self, o: Any) -> Any:
        return current_mode().inplace(self, E.DIV, o)

    def zero_(self) -> Any:
        return current_mode().inplace(self, None, 0)

    def fill_(self, value: Any) -> Any:
        if type(value) is int:
            check_python_int(value)
        return current_mode().inplace(self, None, value)

    def copy_(self, src: Any) -> Any:
        """Copy ``src`` (broadcast, cast) into this tensor in place."""
        return current_mode().inplace(self, None, src)

    # --------------------------------------------------------------------- unary
    def exp(self) -> Any:
        return E.exp(self)

    def log(self) -> Any:
        return E.log(self)

    def tanh(self) -> Any:
        return E.tanh(self)

    def sigmoid(self) -> Any:
        return E.sigmoid(self)

    def relu(self) -> Any:
        return E.relu(self)

    def sqrt(self) -> Any:
        return E.sqrt(self)

    def abs(self) -> Any:
        return E.abs(self)

    def sin(self) -> Any:
        return E.sin(self)

    def cos(self) -> Any:
        return E.cos(self)

    def clamp(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        """Limit to ``[min, max]``: ``t.clamp(0.0, 1.0)``. As in PyTorch, an element on a
        bound passes its whole gradient (``maximum``/``minimum`` would split the tie), a
        bound gets the gradient where it replaced the element, and nan stays nan."""
        out = self
        if min is None and max is None:
            return out
        if out.dtype.kind == "f":
            # A nan stays nan but passes no gradient (PyTorch's rule: nan is in no range).
            out = E.where(E.eq(out, out), out, math.nan)
        # where(x < lo, lo, x), not maximum: a tie keeps x, so x gets all of the gradient.
        if min is not None:
            out = E.where(E.lt(out, min), min, out)
        if max is not None:
            out = E.where(E.gt(out, max), max, out)
        return out

    # ---------------------------------------------------------------- reductions
    def sum(self, axis: Any = None, keepdims: bool | None = None, *, dim: Any = None,
            keepdim: bool | None = None, dtype: Any = None) -> Any:
        return R.sum(self, axis, keepdims, dim=dim, keepdim=keepdim, dtype=dtype)

    def mean(self, axis: Any = None, keepdims: bool | None = None, *, dim: Any = None,
             keepdim: bool | None = None, dtype: Any = None) -> Any:
        return R.mean(self, axis, keepdims, dim=dim, keepdim=keepdim, dtype=dtype)

    def max(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:
        """The max, or ``(values, indices)`` for one int dim (see `dg.max`)."""
        return R.max(self, dim, keepdim, axis=axis, keepdims=keepdims)

    def min(self, dim: Any = None, keepdim: bool | None = None, *, axis: Any = None,
            keepdims: bool | None = None) -> Any:
        """The min, or ``(values, indices)`` for one int dim (see `dg.min`)."""
        return R.min(self, dim, keepdim, axis=axis, keepdims=keepdims)

    def amax(self, axis: Any = None, keepdims: bool | None = None, *, dim: Any = None,
             keepdim: bool | None = None) -> Any:
        return R.amax(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def amin(self, axis: Any = None, keepdims: bool | None = None, *, dim: Any = None,
             keepdim: bool | None = None) -> Any:
        return R.amin(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def argmax(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.argmax(self, dim, keepdim)

    def argmin(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.argmin(self, dim, keepdim)

    def softmax(self, axis: Any = None, *, dim: Any = None) -> Any:
        return C.softmax(self, axis, dim=dim)

    def log_softmax(self, axis: Any = None, *, dim: Any = None) -> Any:
        return C.log_softmax(self, axis, dim=dim)

    # --------------------------------------------------------------------- shape
    def reshape(self, *dims: Any, shape: Any = None) -> Any:
        return S.reshape(self, *dims, shape=shape)

    def view(self, *shape: Any, dtype: Any = None, size: Any = None) -> Any:
        """``view(*shape)`` (or ``view(size=shape)``) reshapes; ``view(dtype)`` reinterprets
        the bits (`view_dtype`)."""
        if size is not None:
            if shape or dtype is not None:
                raise TypeError("view() takes a shape or a dtype, not both, and the shape "
                                "either positionally or as size=")
            shape = (size,)
        elif dtype is not None or (len(shape) == 1 and _is_dtype(shape[0])):
            return S.view_dtype(self, shape[0] if dtype is None else dtype)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        # As PyTorch: a view of a layout the new shape cannot stride raises (reshape
        # copies instead).
        check_view(self, S._resolve_shape(tuple(self.shape), shape))
        return S.reshape(self, shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Any:
        return S.flatten(self, start_dim, end_dim)

    def unsqueeze(self, dim: int) -> Any:
        shape = list(self.shape)
        # A new dimension can go at any of ndim + 1 places.
        dim = normalize_dim("unsqueeze", dim, len(shape) + 1)
        return S.torch_named(S.reshape(self, tuple(shape[:dim] + [1] + shape[dim:])), self,
                             "UnsqueezeBackward0")

    def squeeze(self, dim: Any = None) -> Any:
        shape = tuple(self.shape)
        if dim is None:
            return S.torch_named(S.reshape(self, tuple(d for d in shape if d != 1)), self,
                                 "SqueezeBackward0")
        # As PyTorch: a dim whose size is not 1 is left alone, one out of range raises.
        dims = normalize_axis("squeeze", dim, len(shape)) or ()
        # PyTorch's overloads: one dim (SqueezeBackward1), a sequence of dims (2).
        name = "SqueezeBackward2" if isinstance(dim, (tuple, list)) else "SqueezeBackward1"
        return S.torch_named(S.reshape(self, tuple(d for i, d in enumerate(shape)
                                                   if i not in dims or d != 1)), self, name)

    def transpose(self, *dims: Any) -> Any:
        """Swap two dims, as PyTorch (``t.transpose(0, 1)``); `permute` reorders all."""
        return S.transpose(self, *dims)

    def permute(self, *args: Any, dims: Any = None) -> Any:
        return S.permute(self, *args, dims=dims)

    def t(self) -> Any:
        if len(self.shape) > 2:
            raise ValueError(f"t() expects a tensor with <= 2 dimensions, got {tuple(self.shape)}")
        return S.transpose(self) if len(self.shape) == 2 else self

    @property
    def T(self) -> Any:  # noqa: N802 - NumPy's and PyTorch's name
        return S.torch_named(S.transpose(self), self, "PermuteBackward0")

    def expand(self, *shape: Any) -> Any:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        lead = len(shape) - len(self.shape)
        shape = tuple(
            self.shape[i - lead] if d == -1 else d for i, d in enumerate(shape)
        )
        return S.broadcast_to(self, shape)

    def broadcast_to(self, shape: tuple) -> Any:
        return S.broadcast_to(self, shape)

    def astype(self, dtype: Any) -> Any:
        from ..dtypes import as_dtype

        dtype = as_dtype(dtype)
        if dtype.kind == "c":
            from .complex import from_parts, real_dtype

            part = S.astype(self, real_dtype(dtype))
            return from_parts(part, E.mul(part, 0.0))
        return self if dtype == self.dtype else S.astype(self, dtype)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """PyTorch's ``Tensor.to``: a dtype (``x.to(dg.float64)``, ``x.to(other)``) casts,
        ``"cpu"`` is accepted (the only device); the tensor itself when nothing changes."""
        from ..dtypes import to_target

        # Positional booleans after the target are ``non_blocking`` then ``copy``.
        flags = [a for a in args if isinstance(a, bool)]
        copy = kwargs.get("copy", flags[1] if len(flags) > 1 else False)
        dtype = to_target(tuple(a for a in args if not isinstance(a, bool)), kwargs)
        out = self if dtype is None else self.astype(dtype)
        return out.clone() if copy and out is self else out

    def float(self, memory_format: Any = None) -> Any:
        return self.astype(np.float32)

    def double(self, memory_format: Any = None) -> Any:
        return self.astype(np.float64)

    def __getitem__(self, index: Any) -> Any:
        if _is_basic(index):
            return S.getitem(self, index)
        return I.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        """``t[index] = value``: a copy into the view ``t[index]`` (basic indexing), or an
        in-place ``index_put`` (advanced indexing)."""
        if _is_basic(index):
            current_mode().inplace(S.getitem(self, index), None, value)
        else:
            I.setitem(self, index, value)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (S.getitem(self, i) for i in range(self.shape[0]))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None) -> Any:
        """The shape as a `dg.Size` (a tuple), or the size of dim ``dim``."""
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return int(np.prod(self.shape))

    # ---- PyTorch's shape family (dualgraph/ops/shape.py, ops/linalg.py, ops/einsum.py).
    # Views stay views.
    def unflatten(self, dim: int, sizes: Any) -> Any:
        return S.unflatten(self, dim, sizes)

    def movedim(self, source: Any, destination: Any) -> Any:
        return S.movedim(self, source, destination)

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Any:
        return S.swapaxes(self, axis0, axis1)

    swapdims = swapaxes

    def split(self, split_size: Any, dim: int = 0) -> tuple:
        return S.split(self, split_size, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        return S.chunk(self, chunks, dim)

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple:
        return S.tensor_split(self, indices_or_sections, dim)

    def unbind(self, dim: int = 0) -> tuple:
        return S.unbind(self, dim)

    def narrow(self, dim: int, start: Any, length: int) -> Any:
        return S.narrow(self, dim, start, length)

    def expand_as(self, other: Any) -> Any:
        return self.expand(tuple(other.shape))

    def view_as(self, other: Any) -> Any:
        return self.view(tuple(other.shape))

    def reshape_as(self, other: Any) -> Any:
        return S.reshape(self, tuple(other.shape))

    def type_as(self, other: Any) -> Any:
        return _cast(self, other.dtype)

    def repeat(self, *sizes: Any) -> Any:
        return S.repeat(self, *sizes)

    def repeat_interleave(self, repeats: Any, dim: int | None = None, *,
                          output_size: int | None = None) -> Any:
        return S.repeat_interleave(self, repeats, dim, output_size=output_size)

    def tile(self, dims: Any) -> Any:
        return S.tile(self, dims)

    def roll(self, shifts: Any, dims: Any = None) -> Any:
        return S.roll(self, shifts, dims)

    def flip(self, *args: Any, dims: Any = None) -> Any:
        return S.flip(self, *args, dims=dims)

    def fliplr(self) -> Any:
        return S.fliplr(self)

    def flipud(self) -> Any:
        return S.flipud(self)

    def rot90(self, k: int = 1, dims: Any = (0, 1)) -> Any:
        return S.rot90(self, k, dims)

    def tril(self, diagonal: int = 0) -> Any:
        return S.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Any:
        return S.triu(self, diagonal)

    def tril_(self, diagonal: int = 0) -> Any:
        return self.copy_(S.tril(self, diagonal))

    def triu_(self, diagonal: int = 0) -> Any:
        return self.copy_(S.triu(self, diagonal))

    def diag(self, diagonal: int = 0) -> Any:
        return S.diag(self, diagonal)

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
        return S.diagonal(self, offset, dim1, dim2)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
        return S.diag_embed(self, offset, dim1, dim2)

    def trace(self) -> Any:
        return L.trace(self)

    def diff(self, n: int = 1, dim: int = -1, prepend: Any = None, append: Any = None) -> Any:
        return S.diff(self, n, dim, prepend, append)

    def cross(self, other: Any, dim: int | None = None) -> Any:
        return L.cross(self, other, dim)

    def outer(self, other: Any) -> Any:
        return L.outer(self, other)

    ger = outer

    def kron(self, other: Any) -> Any:
        return L.kron(self, other)

    # ------------------------------------------------- math, tests, bitwise and casts
    # Math, tests, bitwise and casts (dualgraph/ops/math.py). Methods are the functions;
    # in-place forms compute then `copy_` (one recorded op, as PyTorch's history shows).
    def __mod__(self, o): return _bin(E.REMAINDER, self, o)  # noqa: E704
    def __rmod__(self, o): return _bin(E.REMAINDER, self, o, True)  # noqa: E704
    def __floordiv__(self, o): return _bin(E.FLOOR_DIVIDE, self, o)  # noqa: E704
    def __rfloordiv__(self, o): return _bin(E.FLOOR_DIVIDE, self, o, True)  # noqa: E704
    def __and__(self, o): return _bin(E.BITWISE_AND, self, o)  # noqa: E704
    def __rand__(self, o): return _bin(E.BITWISE_AND, self, o, True)  # noqa: E704
    def __or__(self, o): return _bin(E.BITWISE_OR, self, o)  # noqa: E704
    def __ror__(self, o): return _bin(E.BITWISE_OR, self, o, True)  # noqa: E704
    def __xor__(self, o): return _bin(E.BITWISE_XOR, self, o)  # noqa: E704
    def __rxor__(self, o): return _bin(E.BITWISE_XOR, self, o, True)  # noqa: E704
    def __lshift__(self, o): return _bin(E.LEFT_SHIFT, self, o)  # noqa: E704
    def __rlshift__(self, o): return _bin(E.LEFT_SHIFT, self, o, True)  # noqa: E704
    def __rshift__(self, o): return _bin(E.RIGHT_SHIFT, self, o)  # noqa: E704
    def __rrshift__(self, o): return _bin(E.RIGHT_SHIFT, self, o, True)  # noqa: E704

    def __invert__(self) -> Any:
        return E.bitwise_not(self)

    def tan(self): return E.tan(self)  # noqa: E704
    def asin(self): return E.asin(self)  # noqa: E704
    def acos(self): return E.acos(self)  # noqa: E704
    def atan(self): return E.atan(self)  # noqa: E704
    def sinh(self): return E.sinh(self)  # noqa: E704
    def cosh(self): return E.cosh(self)  # noqa: E704
    def asinh(self): return E.asinh(self)  # noqa: E704
    def acosh(self): return E.acosh(self)  # noqa: E704
    def atanh(self): return E.atanh(self)  # noqa: E704
    def erf(self): return E.erf(self)  # noqa: E704
    def log2(self): return E.log2(self)  # noqa: E704
    def log10(self): return E.log10(self)  # noqa: E704
    def exp2(self): return M.exp2(self)  # noqa: E704
    def rsqrt(self): return M.rsqrt(self)  # noqa: E704
    def log1p(self): return E.log1p(self)  # noqa: E704
    def expm1(self): return E.expm1(self)  # noqa: E704
    def sign(self): return E.sign(self)  # noqa: E704
    def floor(self): return E.floor(self)  # noqa: E704
    def ceil(self): return E.ceil(self)  # noqa: E704
    def round(self, decimals: int = 0): return E.round(self, decimals=decimals)  # noqa: E704
    def trunc(self): return E.trunc(self)  # noqa: E704
    def frac(self): return M.frac(self)  # noqa: E704
    def square(self): return M.square(self)  # noqa: E704
    def reciprocal(self): return M.reciprocal(self)  # noqa: E704
    def isnan(self): return M.isnan(self)  # noqa: E704
    def isinf(self): return M.isinf(self)  # noqa: E704
    def isfinite(self): return M.isfinite(self)  # noqa: E704
    def logical_not(self): return M.logical_not(self)  # noqa: E704
    def bitwise_not(self): return E.bitwise_not(self)  # noqa: E704

    def tan_(self): return self.copy_(_kept(self).tan())  # noqa: E704
    def asin_(self): return self.copy_(_kept(self).asin())  # noqa: E704
    def acos_(self): return self.copy_(_kept(self).acos())  # noqa: E704
    def atan_(self): return self.copy_(_kept(self).atan())  # noqa: E704
    def sinh_(self): return self.copy_(_kept(self).sinh())  # noqa: E704
    def cosh_(self): return self.copy_(_kept(self).cosh())  # noqa: E704
    def asinh_(self): return self.copy_(_kept(self).asinh())  # noqa: E704
    def acosh_(self): return self.copy_(_kept(self).acosh())  # noqa: E704
    def atanh_(self): return self.copy_(_kept(self).atanh())  # noqa: E704
    def erf_(self): return self.copy_(_kept(self).erf())  # noqa: E704
    def log2_(self): return self.copy_(_kept(self).log2())  # noqa: E704
    def log10_(self): return self.copy_(_kept(self).log10())  # noqa: E704
    def exp2_(self): return self.copy_(_kept(self).exp2())  # noqa: E704
    def rsqrt_(self): return self.copy_(_kept(self).rsqrt())  # noqa: E704
    def log1p_(self): return self.copy_(_kept(self).log1p())  # noqa: E704
    def expm1_(self): return self.copy_(_kept(self).expm1())  # noqa: E704
    def sign_(self): return self.copy_(_kept(self).sign())  # noqa: E704
    def floor_(self): return self.copy_(_kept(self).floor())  # noqa: E704
    def ceil_(self): return self.copy_(_kept(self).ceil())  # noqa: E704
    def round_(self, decimals: int = 0): return self.copy_(_kept(self).round(decimals))  # noqa: E704
    def trunc_(self): return self.copy_(_kept(self).trunc())  # noqa: E704
    def frac_(self): return self.copy_(_kept(self).frac())  # noqa: E704
    def square_(self): return self.copy_(_kept(self).square())  # noqa: E704
    def reciprocal_(self): return self.copy_(_kept(self).reciprocal())  # noqa: E704
    def exp_(self): return self.copy_(_kept(self).exp())  # noqa: E704
    def log_(self): return self.copy_(_kept(self).log())  # noqa: E704
    def tanh_(self): return self.copy_(_kept(self).tanh())  # noqa: E704
    def sigmoid_(self): return self.copy_(_kept(self).sigmoid())  # noqa: E704
    def relu_(self): return self.copy_(_kept(self).relu())  # noqa: E704
    def sqrt_(self): return self.copy_(_kept(self).sqrt())  # noqa: E704
    def abs_(self): return self.copy_(_kept(self).abs())  # noqa: E704
    def sin_(self): return self.copy_(_kept(self).sin())  # noqa: E704
    def cos_(self): return self.copy_(_kept(self).cos())  # noqa: E704
    def neg_(self): return self.copy_(_kept(self).neg())  # noqa: E704

    def copysign(self, o: Any) -> Any:
        return E.copysign(self, o)

    def fmod(self, o: Any) -> Any:
        return E.fmod(self, o)

    def remainder(self, o: Any) -> Any:
        return E.remainder(self, o)

    def floor_divide(self, o: Any) -> Any:
        return E.floor_divide(self, o)

    def atan2(self, o: Any) -> Any:
        return E.atan2(self, o)

    arctan2 = atan2

    def lerp(self, end: Any, weight: Any) -> Any:
        return M.lerp(self, end, weight)

    def logaddexp(self, o: Any) -> Any:
        return M.logaddexp(self, o)

    def bitwise_and(self, o: Any) -> Any:
        return E.bitwise_and(self, o)

    def bitwise_or(self, o: Any) -> Any:
        return E.bitwise_or(self, o)

    def bitwise_xor(self, o: Any) -> Any:
        return E.bitwise_xor(self, o)

    def logical_and(self, o: Any) -> Any:
        return M.logical_and(self, o)

    def logical_or(self, o: Any) -> Any:
        return M.logical_or(self, o)

    def logical_xor(self, o: Any) -> Any:
        return M.logical_xor(self, o)

    def isclose(self, o: Any, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Any:
        return M.isclose(self, o, rtol, atol, equal_nan)

    def allclose(self, o: Any, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        return M.allclose(self, o, rtol, atol, equal_nan)

    def var(self, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
            correction: Any = None) -> Any:
        return R.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
            correction: Any = None) -> Any:
        return R.std(self, dim, unbiased, keepdim, correction=correction)

    def logsumexp(self, dim: Any, keepdim: bool = False) -> Any:
        return R.logsumexp(self, dim, keepdim)

    def any(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.any(self, dim, keepdim)

    def all(self, dim: Any = None, keepdim: bool = False) -> Any:
        return R.all(self, dim, keepdim)

    def prod(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        return R.prod(self, dim, keepdim, dtype=dtype)

    # Comparisons by name (PyTorch's methods).
    def lt(self, o: Any) -> Any: return self < o  # noqa: E704
    def le(self, o: Any) -> Any: return self <= o  # noqa: E704
    def gt(self, o: Any) -> Any: return self > o  # noqa: E704
    def ge(self, o: Any) -> Any: return self >= o  # noqa: E704
    def eq(self, o: Any) -> Any: return self == o  # noqa: E704
    def ne(self, o: Any) -> Any: return self != o  # noqa: E704

    # Casts (PyTorch's spellings of `astype`).
    def int(self, memory_format: Any = None) -> Any:
        return _cast(self, np.int32)

    def long(self, memory_format: Any = None) -> Any:
        return _cast(self, np.int64)

    def bool(self, memory_format: Any = None) -> Any:
        return _cast(self, np.bool_)

    def half(self, memory_format: Any = None) -> Any:
        return _cast(self, np.float16)

    # Casts to dtypes dualgraph cannot hold: each raises `TypeError` naming the dtype.
    def bfloat16(self, memory_format: Any = None) -> Any:
        return _cast(self, dtypes.bfloat16)

    def chalf(self, memory_format: Any = None) -> Any:
        return _cast(self, dtypes.complex32)

    def cfloat(self, memory_format: Any = None) -> Any:
        return _cast(self, dtypes.complex64)

    def cdouble(self, memory_format: Any = None) -> Any:
        return _cast(self, dtypes.complex128)

    def type(self, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """With no argument, PyTorch's type name (``"torch.FloatTensor"``); else the tensor
        cast to ``dtype``: a dtype, a legacy type (``dg.LongTensor``) or its name."""
        if dtype is None:
            return _TYPE_NAMES.get(np.dtype(self.dtype), f"torch.{np.dtype(self.dtype)}")
        if isinstance(dtype, str) and dtype.split(".")[-1] in _LEGACY:
            dtype = _LEGACY[dtype.split(".")[-1]]
        return _cast(self, dtype)

    # ---- indexing (dualgraph/ops/index.py). In-place forms compute the new
    # value from self and `assign` it (one IndexPut-like node, as PyTorch records).
    def gather(self, dim: int, index: Any) -> Any:
        return I.gather(self, dim, index)

    def take_along_dim(self, indices: Any, dim: int | None = None) -> Any:
        return I.take_along_dim(self, indices, dim)

    def as_strided(self, size: Any, stride: Any, storage_offset: int | None = None) -> Any:
        return ST.as_strided(self, size, stride, storage_offset)

    def index_select(self, dim: int, index: Any) -> Any:
        return I.index_select(self, dim, index)

    def masked_fill(self, mask: Any, value: Any) -> Any:
        return I.masked_fill(self, mask, value)

    def masked_fill_(self, mask: Any, value: Any) -> Any:
        out = I.masked_fill(self, mask, value)
        if tuple(out.shape) != tuple(self.shape):
            check_inplace_shape("masked_fill_", tuple(self.shape), tuple(out.shape))
        return self.copy_(out)

    def masked_select(self, mask: Any) -> Any:
        return I.masked_select(self, mask)

    def scatter(self, dim: int, index: Any, src: Any = None, *, value: Any = None,
                reduce: str | None = None) -> Any:
        return I.scatter(self, dim, index, src, value=value, reduce=reduce)

    def scatter_(self, dim: int, index: Any, src: Any = None, *, value: Any = None,
                 reduce: str | None = None) -> Any:
        return current_mode().assign(self, I.scatter(self, dim, index, src, value=value,
                                                     reduce=reduce))

    def scatter_add(self, dim: int, index: Any, src: Any) -> Any:
        return I.scatter_add(self, dim, index, src)

    def scatter_add_(self, dim: int, index: Any, src: Any) -> Any:
        return current_mode().assign(self, I.scatter_add(self, dim, index, src))

    def scatter_reduce(self, dim: int, index: Any, src: Any, reduce: str, *,
                       include_self: bool = True) -> Any:
        return I.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)

    def scatter_reduce_(self, dim: int, index: Any, src: Any, reduce: str, *,
                        include_self: bool = True) -> Any:
        return current_mode().assign(self, I.scatter_reduce(
            self, dim, index, src, reduce, include_self=include_self))

    def index_add(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        return I.index_add(self, dim, index, source, alpha=alpha)

    def index_add_(self, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
        return current_mode().assign(self, I.index_add(self, dim, index, source, alpha=alpha))

    def index_copy(self, dim: int, index: Any, source: Any) -> Any:
        return I.index_copy(self, dim, index, source)

    def index_copy_(self, dim: int, index: Any, source: Any) -> Any:
        return current_mode().assign(self, I.index_copy(self, dim, index, source))

    def index_fill(self, dim: int, index: Any, value: Any) -> Any:
        return I.index_fill(self, dim, index, value)

    def index_fill_(self, dim: int, index: Any, value: Any) -> Any:
        return current_mode().assign(self, I.index_fill(self, dim, index, value))

    def index_put(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        return I.index_put(self, indices, values, accumulate)

    def index_put_(self, indices: Any, values: Any, accumulate: bool = False) -> Any:
        return I.index_put_(self, indices, values, accumulate)

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        return I.nonzero(self, as_tuple=as_tuple)

    def argwhere(self) -> Any:
        return I.argwhere(self)
    # ---- end of indexing

    # ---- scans and sorting (dualgraph/ops/scan.py)
    def cumsum(self, dim: int, *, dtype: Any = None) -> Any:
        return SC.cumsum(self, dim, dtype=dtype)

    def cumprod(self, dim: int, *, dtype: Any = None) -> Any:
        return SC.cumprod(self, dim, dtype=dtype)

    def cumsum_(self, dim: int, *, dtype: Any = None) -> Any:
        return self.copy_(_kept(self).cumsum(dim, dtype=dtype))

    def cumprod_(self, dim: int, *, dtype: Any = None) -> Any:
        # A clone: cumprod saves its input, which the copy_ would overwrite.
        return self.copy_(_kept(self).clone().cumprod(dim, dtype=dtype))

    def logcumsumexp(self, dim: int) -> Any:
        return SC.logcumsumexp(self, dim)

    def cummax(self, dim: int) -> Any:
        return SC.cummax(self, dim)

    def cummin(self, dim: int) -> Any:
        return SC.cummin(self, dim)

    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
        return SC.sort(self, dim, descending, stable=stable)

    def argsort(self, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Any:
        return SC.argsort(self, dim, descending, stable=stable)

    def msort(self) -> Any:
        return SC.msort(self)

    def topk(self, k: int, dim: Any = None, largest: bool = True,
             sorted: bool = True) -> Any:  # noqa: A002
        return SC.topk(self, k, dim, largest, sorted)

    def kthvalue(self, k: int, dim: Any = None, keepdim: bool = False) -> Any:
        return SC.kthvalue(self, k, dim, keepdim)

    def median(self, dim: Any = None, keepdim: bool = False) -> Any:
        return SC.median(self, dim, keepdim)

    def nanmedian(self, dim: Any = None, keepdim: bool = False) -> Any:
        return SC.nanmedian(self, dim, keepdim)

    def count_nonzero(self, dim: Any = None) -> Any:
        return SC.count_nonzero(self, dim)

    def histc(self, bins: int = 100, min: float = 0, max: float = 0) -> Any:  # noqa: A002
        return SC.histc(self, bins, min, max)
    # ---- end of scans and sorting
    # ---- pooling and padding
    def unfold(self, dimension: int, size: int, step: int) -> Any:
        """Windows of ``size`` along ``dimension``, ``step`` apart, as a new last dim."""
        return P.unfold(self, dimension, size, step)

    # ---------------------------------------------- PyTorch aliases and in-place forms
    def clip(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        """PyTorch's alias of `clamp`."""
        return self.clamp(min, max)

    def clamp_(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        return current_mode().assign(self, self.clamp(min, max))

    def clip_(self, min: Any = None, max: Any = None) -> Any:  # noqa: A002
        return current_mode().assign(self, self.clamp(min, max))

    def bitwise_left_shift(self, o: Any) -> Any:
        return E.bitwise_left_shift(self, o)

    def bitwise_right_shift(self, o: Any) -> Any:
        return E.bitwise_right_shift(self, o)

    def bitwise_left_shift_(self, o: Any) -> Any:
        return current_mode().assign(self, E.bitwise_left_shift(self, o))

    def bitwise_right_shift_(self, o: Any) -> Any:
        return current_mode().assign(self, E.bitwise_right_shift(self, o))

    def gcd(self, o: Any) -> Any:
        return E.gcd(self, o)

    def gcd_(self, o: Any) -> Any:
        return current_mode().assign(self, E.gcd(self, o))

    def lcm(self, o: Any) -> Any:
        return E.lcm(self, o)

    def lcm_(self, o: Any) -> Any:
        return current_mode().assign(self, E.lcm(self, o))

    def nextafter(self, o: Any) -> Any:
        return E.nextafter(self, o)

    def nextafter_(self, o: Any) -> Any:
        return current_mode().assign(self, E.nextafter(self, o))

    def frexp(self) -> Any:
        return M.frexp(self)

    def __ilshift__(self, o: Any) -> Any:
        return current_mode().assign(self, E.bitwise_left_shift(self, o))

    def __irshift__(self, o: Any) -> Any:
        return current_mode().assign(self, E.bitwise_right_shift(self, o))

    # ---- devices (CPU only, as a CPU build of PyTorch) and memory layout
    @property
    def device(self) -> Any:
        """Where the tensor lives: always ``dg.device("cpu")``."""
        from ..dtypes import CPU

        return CPU

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def is_cpu(self) -> bool:
        return True

    # The other accelerators a CPU build of PyTorch asks about (``x.is_cuda or x.is_xpu``).
    @property
    def is_xpu(self) -> bool:
        return False

    @property
    def is_mps(self) -> bool:
        return False

    @property
    def is_meta(self) -> bool:
        return False

    def get_device(self) -> int:
        """PyTorch's ``-1`` for a CPU tensor."""
        return -1

    def cpu(self, memory_format: Any = None) -> Any:
        """The tensor itself: it is on the CPU already."""
        return self

    def to_dense(self, dtype: Any = None, *, masked_grad: bool | None = None) -> Any:
        """The tensor itself (``dg.sparse_coo_tensor`` builds dense tensors), or a copy in
        ``dtype``."""
        return self if dtype is None else self.to(dtype)

    def coalesce(self) -> Any:
        """The tensor itself: `dg.sparse_coo_tensor` sums repeated indices as it builds the
        dense tensor, which is what coalescing does."""
        return self

    def is_coalesced(self) -> bool:
        return True

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Any:
        from ..dtypes import check_device

        check_device(f"cuda:{device}" if isinstance(device, int) else device or "cuda",
                     "cuda()")
        return self

    def contiguous(self, memory_format: Any = None) -> Any:
        """Eager tensors copy when their data is not C-ordered; a traced value copies
        when the layout eager mode would give it is not (`layout.contiguous_copy`), so
        that `view` of the result succeeds as eager mode's does."""
        return contiguous_copy(self)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        return True

    def is_floating_point(self) -> bool:
        return np.dtype(self.dtype).kind == "f"

    def mm(self, mat2: Any) -> Any:
        """The matrix product of two 2-D tensors (`matmul` without broadcasting)."""
        _check_ndim("mm", self, 2, "self")
        _check_ndim("mm", mat2, 2, "mat2")
        return L.matmul(self, mat2)

    def bmm(self, mat2: Any) -> Any:
        """Batched matrix product of two 3-D tensors with the same batch size."""
        _check_ndim("bmm", self, 3, "batch1")
        _check_ndim("bmm", mat2, 3, "batch2")
        if self.shape[0] != mat2.shape[0]:
            raise _shape_error(f"bmm: batch sizes differ: {tuple(self.shape)} and "
                               f"{tuple(mat2.shape)}")
        return L.matmul(self, mat2)

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> Any:
        from ..errors import TraceError

        raise TraceError("uniform_() fills a tensor with NumPy draws, eagerly: initialise "
                         "parameters outside the compiled function")

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator: Any = None) -> Any:
        from ..errors import TraceError

        raise TraceError("normal_() fills a tensor with NumPy draws, eagerly: initialise "
                         "parameters outside the compiled function (or use dg.randn_like)")

    def squeeze_(self, dim: Any = None) -> Any:
        from ..errors import EagerOnlyError

        # Eager-only, not an error: the tutorials' ``target.unsqueeze_(-1)`` on a step's
        # argument then runs, eagerly, with a warning.
        raise EagerOnlyError("squeeze_() changes a tensor's shape in place, which a compiled "
                             "function cannot do; use x = x.squeeze(...)")

    def unsqueeze_(self, dim: int) -> Any:
        _shape_inplace("unsqueeze")

    def transpose_(self, dim0: int, dim1: int) -> Any:
        _shape_inplace("transpose")

    def swapaxes_(self, axis0: int, axis1: int) -> Any:
        _shape_inplace("swapaxes")

    def swapdims_(self, dim0: int, dim1: int) -> Any:
        _shape_inplace("swapdims")

    def t_(self) -> Any:
        _shape_inplace("t")


def _shape_inplace(name: str) -> None:
    from ..errors import EagerOnlyError

    raise EagerOnlyError(f"{name}_() changes a tensor's shape in place, which a compiled "
                         f"function cannot do; use x = x.{name}(...)")


def _shape_error(msg: str) -> Exception:
    from ..errors import ShapeError

    return ShapeError(msg)


def _check_ndim(fn: str, x: Any, ndim: int, name: str) -> None:
    if len(x.shape) != ndim:
        raise _shape_error(f"{fn}: {name} must be a {ndim}-D tensor, got shape "
                           f"{tuple(x.shape)}")


# PyTorch's legacy type names, by dtype, and the dtypes of those names.
_LEGACY = {"FloatTensor": np.float32, "DoubleTensor": np.float64, "HalfTensor": np.float16,
           "LongTensor": np.int64, "IntTensor": np.int32, "ShortTensor": np.int16,
           "CharTensor": np.int8, "ByteTensor": np.uint8, "BoolTensor": np.bool_}
_TYPE_NAMES = {np.dtype(v): "torch." + k for k, v in _LEGACY.items()}

_BASIC = frozenset({int, slice, type(None), type(Ellipsis)})


def _is_basic(index: Any) -> bool:
    """Ints, slices, None and ``...`` only (the fast view path; bools are advanced)."""
    if type(index) in _BASIC:
        return True
    return type(index) is tuple and all(type(e) in _BASIC for e in index)


def _is_dtype(x: Any) -> bool:
    """A dtype spelling (``dg.int32``, ``np.float64``), not a shape."""
    return isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic))


def _cast(t: TensorOps, dtype: Any) -> Any:
    """``t`` as ``dtype``; a cast to an integer or bool dtype is not differentiable, so its
    result never requires grad (PyTorch; `astype` alone would carry the tape on)."""
    from ..dtypes import as_dtype

    if as_dtype(dtype).kind in "biu" and t.requires_grad:
        t = t.detach()
    return t.astype(dtype)


_FAST = (TensorOps, float, int)


def _add_axis_aliases() -> None:
    """``axis=`` is ``dim=`` for every method that takes ``dim`` (PyTorch's parser)."""
    from .broadcast import add_axis_aliases

    methods = {k: v for k, v in vars(TensorOps).items()}
    add_axis_aliases(methods)
    for k, v in methods.items():
        if v is not vars(TensorOps)[k]:
            setattr(TensorOps, k, v)


_add_axis_aliases()


# ------------------------------------------------------------------------------------
# PyTorch's remaining method surface (`ops/surface.py`): functions as methods, their
# in-place forms, and the layout and storage queries of a CPU tensor.


def _method(fn: Any, name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = getattr(fn, "__doc__", None)
    return method


def _kept(x: Any) -> Any:
    """What an in-place op ``x.f_()`` computes from: a copy of an ``x`` that requires grad.
    ``f``'s backward may save its input, and the write into ``x`` would change that saved
    value (PyTorch's in-place derivatives keep the original ``self`` the same way)."""
    return x.clone() if getattr(x, "requires_grad", False) else x


def _inplace_method(fn: Any, name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self.copy_(fn(_kept(self), *args, **kwargs))

    method.__name__ = name + "_"
    method.__doc__ = f"In-place `{name}`: the result is written into the tensor."
    return method


def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


class _Layout:
    """Layout and storage queries, as a C-ordered CPU tensor answers them (an eager tensor
    reports its own array's strides; see `dualgraph.eager.tensor.Tensor.stride`)."""

    def stride(self, dim: int | None = None) -> Any:
        st = _contiguous_strides(tuple(self.shape))
        return st if dim is None else st[normalize_dim("stride", dim, len(self.shape))]

    def storage_offset(self) -> int:
        return 0

    def element_size(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        return np.dtype(self.dtype).itemsize * math.prod(self.shape)

    def nelement(self) -> int:
        return math.prod(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    def byte(self, memory_format: Any = None) -> Any:
        return _cast(self, np.uint8)

    def char(self, memory_format: Any = None) -> Any:
        return _cast(self, np.int8)

    def short(self, memory_format: Any = None) -> Any:
        return _cast(self, np.int16)

    @property
    def mT(self) -> Any:  # noqa: N802 - PyTorch's name
        """The matrices transposed: the last two dims swapped."""
        if len(self.shape) < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of "
                               f"matrices. Got {len(self.shape)}-D tensor.")
        return self.transpose(-2, -1)

    @property
    def mH(self) -> Any:  # noqa: N802 - PyTorch's name
        """The conjugate transpose of the matrices: `mT` for real tensors."""
        return self.mT

    @property
    def H(self) -> Any:  # noqa: N802 - PyTorch's name
        """The conjugate transpose of a matrix: `T` of a 2-D (or 0-d) real tensor."""
        if len(self.shape) not in (0, 2):
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                               f"{len(self.shape)}-D tensor.")
        return self if not self.shape else self.transpose(0, 1)

    def adjoint(self) -> Any:
        return self.mT

    def is_complex(self) -> bool:
        return False

    def is_signed(self) -> bool:
        return np.dtype(self.dtype).kind in "if"

    def is_pinned(self, device: Any = None) -> bool:
        return False

    def pin_memory(self, device: Any = None) -> Any:
        """The tensor itself (pinned memory is a CUDA transfer optimisation)."""
        return self

    def share_memory_(self) -> Any:
        """The tensor itself (CPU tensors of one process need no sharing)."""
        return self

    def is_shared(self) -> bool:
        return False

    def is_set_to(self, tensor: Any) -> bool:
        return self is tensor

    def is_same_size(self, other: Any) -> bool:
        return tuple(self.shape) == tuple(other.shape)

    @property
    def is_sparse(self) -> bool:
        return False

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_nested(self) -> bool:
        return False

    def is_inference(self) -> bool:
        return False

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def conj(self) -> Any:
        return self

    def resolve_conj(self) -> Any:
        return self

    def resolve_neg(self) -> Any:
        return self

    @property
    def real(self) -> Any:
        return self

    @property
    def layout(self) -> Any:
        return strided

    def lerp_(self, end: Any, weight: Any) -> Any:
        return self.copy_(_kept(self).lerp(end, weight))

    def clamp_min_(self, min: Any) -> Any:  # noqa: A002
        return self.copy_(_kept(self).clamp(min=min))

    def clamp_max_(self, max: Any) -> Any:  # noqa: A002
        return self.copy_(_kept(self).clamp(max=max))


def _install_surface() -> None:
    from .surface import INPLACE, METHODS

    own = vars(TensorOps)
    for name, member in vars(_Layout).items():
        if not name.startswith("__") and name not in own:
            setattr(TensorOps, name, member)
    for name, fn in METHODS.items():
        if name not in own:
            setattr(TensorOps, name, _method(fn, name))
    for name in INPLACE:
        if name + "_" not in own:
            setattr(TensorOps, name + "_", _inplace_method(METHODS[name], name))


_install_surface()
