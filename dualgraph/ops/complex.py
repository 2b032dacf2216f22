"""Complex tensors as pairs of real tensors.

A `ComplexTensor` holds its real and imaginary parts as real dualgraph values, either
interleaved in one real tensor of shape ``(*shape, 2)`` (its storage, what `view_as_real`
returns and `view_as_complex` wraps, so both are views sharing memory) or as two tensors of
``shape`` (the result of arithmetic, stacked into storage only when something asks for it).
Every complex op is a composition of real registry ops, as JAX lowers complex arithmetic,
so:

- eager autograd needs no rule of its own, and the gradient of a real loss with respect to
  a complex tensor is ``dL/dre + i dL/dim``, the conjugate Wirtinger form PyTorch returns;
- inside ``dg.compile`` a complex value is a pair of traced real values and the backend
  sees only real kernels.

Dtypes promote as PyTorch's do because each part is computed by the real op with the same
operands: ``complex64 * float64`` tensor gives complex128, a float32 tensor times a Python
complex gives complex64.
"""

from __future__ import annotations

import math
import sys
import warnings
from typing import Any

import numpy as np

from .. import dtypes
from .._location import PKG
from ..modes import current_trace, eager_section
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .broadcast import normalize_dim
from .einsum import einsum as _real_einsum
from .linalg import matmul as _real_matmul
from .mixin import TensorOps

_REAL_OF = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}
_COMPLEX_OF = {v: k for k, v in _REAL_OF.items()}
_SCALARS = (complex, np.complexfloating)
_REAL_SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def is_complex_dtype(dtype: Any) -> bool:
    """True for ``dg.complex64``/``dg.complex128`` (``cfloat``, ``cdouble``) and NumPy's
    complex dtypes; ``dg.complex32`` (``chalf``) raises, as NumPy has no complex half."""
    if isinstance(dtype, dtypes.UnsupportedDtype):
        dtypes.as_dtype(dtype)  # raises, naming it
    try:
        return np.dtype(dtype).kind == "c"
    except TypeError:
        return False


def real_dtype(dtype: Any) -> np.dtype:
    """The dtype of each part of complex ``dtype``: float32 for complex64."""
    return _REAL_OF[np.dtype(dtype)]


class ComplexTensor:
    """A complex tensor (``complex64`` or ``complex128``), PyTorch-style.

    >>> z = dg.complex(dg.tensor([1.0, 0.0]), dg.tensor([0.0, 2.0]))
    >>> (z * 1j).imag
    tensor([1., 0.])
    """

    __slots__ = ("_ri", "_re", "_im", "__weakref__")
    __array_priority__ = 1000  # NumPy defers ``array * z`` to `__rmul__`

    # The class user code sees as ``dg.Tensor``: set by the eager mode, which sits above
    # the ops.
    public_class: type | None = None

    def __init__(self, ri: Any = None, re: Any = None, im: Any = None) -> None:
        self._ri, self._re, self._im = ri, re, im

    @property
    def __class__(self) -> type:  # noqa: D105
        # ``isinstance(z, dg.Tensor)`` consults ``__class__`` when the type itself does not
        # match: user code sees a tensor, as PyTorch's complex tensors are tensors;
        # dualgraph's own code, which must not treat the pair as a real tensor, sees a
        # ComplexTensor. ``isinstance(z, dg.ComplexTensor)`` matches the type directly.
        cls = type(self)
        if sys._getframe(1).f_code.co_filename.startswith(PKG):
            return cls
        return cls.public_class or cls

    # ------------------------------------------------------------------ parts
    def _parts(self) -> tuple:
        """(real part, imaginary part) as real values of this tensor's shape."""
        if self._ri is None:
            return self._re, self._im
        return S.getitem(self._ri, (Ellipsis, 0)), S.getitem(self._ri, (Ellipsis, 1))

    def _storage(self) -> Any:
        """The interleaved ``(*shape, 2)`` real tensor; a pair is stacked into it once, and
        from then on the storage is the truth (writes to it are seen by later reads)."""
        if self._ri is None:
            re, im = self._re, self._im
            trace = current_trace()
            if trace is not None and not (trace.is_traced(re) or trace.is_traced(im)
                                          or re.requires_grad or im.requires_grad):
                # A pair made outside a compiled function (``torch.polar`` in a module's
                # ``__init__``) and first stacked inside it keeps an eager storage, which
                # the trace then reads as it reads any tensor from outside: a traced
                # stack would stay on the object after the call.
                with eager_section():
                    self._ri = S.stack([re, im], -1)
            else:
                self._ri = S.stack([re, im], -1)
            self._re = self._im = None
        return self._ri

    # ------------------------------------------------------------- inspection
    @property
    def shape(self) -> Any:
        if self._ri is None:
            return self._re.shape
        return type(self._ri.shape)(self._ri.shape[:-1])

    def size(self, dim: int | None = None) -> Any:
        shape = self.shape
        return shape if dim is None else shape[normalize_dim("size", dim, len(shape))]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self) -> np.dtype:
        part = self._ri if self._ri is not None else self._re
        return _COMPLEX_OF[np.dtype(part.dtype)]

    @property
    def device(self) -> Any:
        return dtypes.CPU

    is_cuda = False

    def is_complex(self) -> bool:
        return True

    def is_floating_point(self) -> bool:
        return False

    def element_size(self) -> int:
        return self.dtype.itemsize

    # -------------------------------------------------------------- autograd
    @property
    def requires_grad(self) -> bool:
        if self._ri is not None:
            return bool(self._ri.requires_grad)
        return bool(self._re.requires_grad or self._im.requires_grad)

    def requires_grad_(self, requires_grad: bool = True) -> ComplexTensor:
        self._storage().requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._ri is not None and self._ri.is_leaf

    @property
    def grad_fn(self) -> Any:
        return self._ri.grad_fn if self._ri is not None else (self._re.grad_fn
                                                              or self._im.grad_fn)

    @property
    def grad(self) -> ComplexTensor | None:
        """``dL/dre + i dL/dim`` (PyTorch's convention) for a leaf, else None."""
        g = self._ri.grad if self._ri is not None else None
        return None if g is None else ComplexTensor(g)

    @grad.setter
    def grad(self, value: Any) -> None:
        self._storage().grad = None if value is None else _as_complex(value)._storage()

    def backward(self, gradient: Any = None, retain_graph: Any = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Backward from a complex result needs ``gradient`` (PyTorch refuses the implicit
        one: a loss must be real)."""
        if gradient is None:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs")
        self._storage().backward(_as_complex(gradient)._storage(), retain_graph=retain_graph,
                                 create_graph=create_graph, inputs=inputs)

    def detach(self) -> ComplexTensor:
        return ComplexTensor(self._storage().detach())

    def clone(self, memory_format: Any = None) -> ComplexTensor:
        return ComplexTensor(self._storage().clone())

    def contiguous(self, memory_format: Any = None) -> ComplexTensor:
        return self

    def retain_grad(self) -> None:
        self._storage().retain_grad()

    # ------------------------------------------------------------ conversion
    def numpy(self, force: bool = False) -> np.ndarray:
        re, im = self._parts()
        return re.numpy() + 1j * im.numpy().astype(self.dtype)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self) -> complex:
        return complex(self.numpy().item())

    def tolist(self) -> Any:
        return self.numpy().tolist()

    def __complex__(self) -> complex:
        return self.item()

    def __bool__(self) -> bool:
        return bool(self.item())

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", precision=4, prefix="tensor(")
        extra = ""
        if self.dtype != _COMPLEX_OF[dtypes.default_float()]:
            extra = f", dtype=dg.{self.dtype.name}"
        if self.grad_fn is not None:
            extra += f", grad_fn=<{self.grad_fn.name()}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """A dtype casts (to a real dtype: the real part, with PyTorch's warning); the CPU is
        the only device."""
        target = dtypes.to_target(tuple(a for a in args if not isinstance(a, bool)),
                                  kwargs)
        return self if target is None else self.astype(target)

    def astype(self, dtype: Any) -> Any:
        if is_complex_dtype(dtype):
            if np.dtype(dtype) == self.dtype:
                return self
            part = real_dtype(dtype)
            if self._ri is not None:
                return ComplexTensor(S.astype(self._ri, part))
            return ComplexTensor(None, S.astype(self._re, part), S.astype(self._im, part))
        warnings.warn("Casting complex values to real discards the imaginary part",
                      UserWarning, stacklevel=2)
        return S.astype(self._parts()[0], dtypes.as_dtype(dtype))

    def type_as(self, other: Any) -> Any:
        return self.astype(other.dtype)

    def cfloat(self) -> ComplexTensor:
        return self.astype(np.complex64)

    def cdouble(self) -> ComplexTensor:
        return self.astype(np.complex128)

    def float(self) -> Any:
        return self.astype(np.float32)

    def double(self) -> Any:
        return self.astype(np.float64)

    def cpu(self) -> ComplexTensor:
        return self

    # ------------------------------------------------------- complex parts
    @property
    def real(self) -> Any:
        """The real part: a view (writes to it change this tensor)."""
        return S.getitem(self._storage(), (Ellipsis, 0))

    @property
    def imag(self) -> Any:
        """The imaginary part: a view (writes to it change this tensor)."""
        return S.getitem(self._storage(), (Ellipsis, 1))

    def conj(self) -> ComplexTensor:
        re, im = self._parts()
        return ComplexTensor(None, re, E.neg(im))

    conj_physical = conj

    def resolve_conj(self) -> ComplexTensor:
        return self

    def is_conj(self) -> bool:
        return False

    def abs(self) -> Any:
        """``|z|``; its gradient at 0 is 0, as PyTorch's."""
        re, im = self._parts()
        r2 = E.add(E.mul(re, re), E.mul(im, im))
        zero = E.eq(r2, 0.0)
        return E.where(zero, 0.0, E.sqrt(E.where(zero, 1.0, r2)))

    absolute = abs  # noqa: A003

    def angle(self) -> Any:
        re, im = self._parts()
        return E.atan2(im, re)

    def exp(self) -> ComplexTensor:
        re, im = self._parts()
        m = E.exp(re)
        return ComplexTensor(None, E.mul(m, E.cos(im)), E.mul(m, E.sin(im)))

    def sin(self) -> ComplexTensor:
        re, im = self._parts()
        return ComplexTensor(None, E.mul(E.sin(re), E.cosh(im)), E.mul(E.cos(re), E.sinh(im)))

    def cos(self) -> ComplexTensor:
        re, im = self._parts()
        return ComplexTensor(None, E.mul(E.cos(re), E.cosh(im)),
                             E.neg(E.mul(E.sin(re), E.sinh(im))))

    def tanh(self) -> ComplexTensor:
        # (sinh 2a + i sin 2b) / (cosh 2a + cos 2b), divided through by cosh 2a: it
        # overflows for large |a|, where the quotient is still finite (tanh 2a + 0i).
        re, im = self._parts()
        a2, b2 = E.mul(re, 2.0), E.mul(im, 2.0)
        r = E.div(1.0, E.cosh(a2))
        den = E.add(E.mul(E.cos(b2), r), 1.0)
        return ComplexTensor(None, E.div(E.tanh(a2), den), E.div(E.mul(E.sin(b2), r), den))

    def sigmoid(self) -> ComplexTensor:
        return _divide(1.0, _add((-self).exp(), 1.0))

    def log(self) -> ComplexTensor:
        re, im = self._parts()
        return ComplexTensor(None, E.mul(E.log(E.add(E.mul(re, re), E.mul(im, im))), 0.5),
                             E.atan2(im, re))

    def sgn(self) -> ComplexTensor:
        """``z / |z|``, 0 where ``z`` is 0."""
        re, im = self._parts()
        r = self.abs()
        safe = E.where(E.eq(r, 0.0), 1.0, r)
        return ComplexTensor(None, E.div(re, safe), E.div(im, safe))

    def reciprocal(self) -> ComplexTensor:
        return _divide(1.0, self)

    def square(self) -> ComplexTensor:
        return _multiply(self, self)

    def sqrt(self) -> ComplexTensor:
        return polar(E.sqrt(self.abs()), E.mul(self.angle(), 0.5))

    def __neg__(self) -> ComplexTensor:
        re, im = self._parts()
        return ComplexTensor(None, E.neg(re), E.neg(im))

    neg = negative = __neg__

    def __pos__(self) -> ComplexTensor:
        return self

    # ----------------------------------------------------------- arithmetic
    def __add__(self, o: Any) -> Any:
        return _add(self, o)

    def __radd__(self, o: Any) -> Any:
        return _add(o, self)

    def __sub__(self, o: Any) -> Any:
        return _sub(self, o)

    def __rsub__(self, o: Any) -> Any:
        return _sub(o, self)

    def __mul__(self, o: Any) -> Any:
        return _multiply(self, o)

    def __rmul__(self, o: Any) -> Any:
        return _multiply(o, self)

    def __truediv__(self, o: Any) -> Any:
        return _divide(self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return _divide(o, self)

    def __pow__(self, o: Any) -> Any:
        return _power(self, o)

    def __matmul__(self, o: Any) -> Any:
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> Any:
        return matmul(o, self)

    def add(self, o: Any, *, alpha: Any = 1) -> Any:
        return _add(self, o if alpha == 1 else _multiply(o, alpha))

    def sub(self, o: Any, *, alpha: Any = 1) -> Any:
        return _sub(self, o if alpha == 1 else _multiply(o, alpha))

    def mul(self, o: Any) -> Any:
        return _multiply(self, o)

    def div(self, o: Any) -> Any:
        return _divide(self, o)

    def pow(self, o: Any) -> Any:
        return _power(self, o)

    def matmul(self, o: Any) -> Any:
        return matmul(self, o)

    multiply, divide, true_divide, subtract = mul, div, div, sub

    def __eq__(self, o: Any) -> Any:  # type: ignore[override]
        a, b = _parts_of(self), _parts_of(o)
        return E.eq(a[0], b[0]) & E.eq(a[1], 0.0 if b[1] is None else b[1])

    def __ne__(self, o: Any) -> Any:  # type: ignore[override]
        return ~(self == o)

    __hash__ = object.__hash__

    # ------------------------------------------------------------ reductions
    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
            axis: Any = None) -> ComplexTensor:
        z = self if dtype is None else self.astype(dtype)
        return z._map(lambda p: R.sum(p, dim if axis is None else axis, keepdim))

    def mean(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None,
             axis: Any = None) -> ComplexTensor:
        z = self if dtype is None else self.astype(dtype)
        return z._map(lambda p: R.mean(p, dim if axis is None else axis, keepdim))

    def _map(self, fn: Any) -> ComplexTensor:
        """The complex tensor whose parts are ``fn`` of this one's (a real-linear op)."""
        re, im = self._parts()
        return ComplexTensor(None, fn(re), fn(im))

    # ----------------------------------------------------------------- shape
    def _dims(self, name: str, dims: Any) -> tuple:
        return tuple(normalize_dim(name, d, self.ndim) for d in dims)

    def reshape(self, *shape: Any) -> ComplexTensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._map(lambda p: S.reshape(p, shape))

    def view(self, *shape: Any) -> Any:
        """A view of a new shape, or with a dtype, the storage reinterpreted: only
        ``view(float dtype)`` is not supported (use `view_as_real`)."""
        if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int, np.integer)):
            if np.dtype(shape[0]) == self.dtype:
                return self
            raise RuntimeError(f"view(dtype): viewing {self.dtype} as {shape[0]} is not "
                               "supported; use dg.view_as_real")
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        ri = self._storage()
        return ComplexTensor(ri.view(*S._resolve_shape(tuple(self.shape), shape), 2))

    def view_as(self, other: Any) -> ComplexTensor:
        return self.view(tuple(other.shape))

    def reshape_as(self, other: Any) -> ComplexTensor:
        return self.reshape(tuple(other.shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> ComplexTensor:
        return self._map(lambda p: S.flatten(p, start_dim, end_dim))

    def unflatten(self, dim: int, sizes: Any) -> ComplexTensor:
        return self._map(lambda p: S.unflatten(p, dim, sizes))

    def squeeze(self, dim: Any = None) -> ComplexTensor:
        return self._map(lambda p: p.squeeze(dim))

    def unsqueeze(self, dim: int) -> ComplexTensor:
        return self._map(lambda p: p.unsqueeze(dim))

    def permute(self, *dims: Any) -> ComplexTensor:
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        return self._map(lambda p: S.permute(p, dims))

    def transpose(self, dim0: int, dim1: int) -> ComplexTensor:
        return self._map(lambda p: p.transpose(dim0, dim1))

    swapaxes = swapdims = transpose

    def t(self) -> ComplexTensor:
        return self._map(lambda p: p.t())

    @property
    def T(self) -> ComplexTensor:  # noqa: N802 - PyTorch's name
        return self._map(lambda p: p.T)

    @property
    def mT(self) -> ComplexTensor:  # noqa: N802 - PyTorch's name
        return self._map(lambda p: p.mT)

    @property
    def mH(self) -> ComplexTensor:  # noqa: N802 - PyTorch's name
        return self.mT.conj()

    @property
    def H(self) -> ComplexTensor:  # noqa: N802 - PyTorch's name
        return self.T.conj()

    def expand(self, *sizes: Any) -> ComplexTensor:
        return self._map(lambda p: p.expand(*sizes))

    def expand_as(self, other: Any) -> ComplexTensor:
        return self.expand(*other.shape)

    def repeat(self, *sizes: Any) -> ComplexTensor:
        return self._map(lambda p: p.repeat(*sizes))

    def flip(self, *dims: Any) -> ComplexTensor:
        return self._map(lambda p: p.flip(*dims))

    def roll(self, shifts: Any, dims: Any = None) -> ComplexTensor:
        return self._map(lambda p: S.roll(p, shifts, dims))

    def chunk(self, chunks: int, dim: int = 0) -> tuple:
        re, im = self._parts()
        return tuple(ComplexTensor(None, a, b)
                     for a, b in zip(re.chunk(chunks, dim), im.chunk(chunks, dim)))

    def split(self, size: Any, dim: int = 0) -> tuple:
        re, im = self._parts()
        return tuple(ComplexTensor(None, a, b)
                     for a, b in zip(re.split(size, dim), im.split(size, dim)))

    def unbind(self, dim: int = 0) -> tuple:
        re, im = self._parts()
        return tuple(ComplexTensor(None, a, b) for a, b in zip(re.unbind(dim), im.unbind(dim)))

    def __getitem__(self, index: Any) -> ComplexTensor:
        index = index if isinstance(index, tuple) else (index,)
        return ComplexTensor(self._storage()[index + (slice(None),)])

    def __iter__(self) -> Any:
        return iter(self.unbind(0))

    # -------------------------------------------------------------- in place
    def __setitem__(self, index: Any, value: Any) -> None:
        index = index if isinstance(index, tuple) else (index,)
        self._storage()[index + (slice(None),)] = _as_complex(value, self.dtype)._storage()

    def copy_(self, src: Any, non_blocking: bool = False) -> ComplexTensor:
        src = _as_complex(src, self.dtype)._storage()
        self._storage().copy_(S.broadcast_to(src, tuple(self.shape) + (2,)))
        return self

    def zero_(self) -> ComplexTensor:
        self._storage().zero_()
        return self

    def fill_(self, value: Any) -> ComplexTensor:
        return self.copy_(_as_complex(value, self.dtype))

    def _inplace(self, result: ComplexTensor) -> ComplexTensor:
        return self.copy_(result)

    def add_(self, o: Any, *, alpha: Any = 1) -> ComplexTensor:
        return self._inplace(self.add(o, alpha=alpha))

    def sub_(self, o: Any, *, alpha: Any = 1) -> ComplexTensor:
        return self._inplace(self.sub(o, alpha=alpha))

    def mul_(self, o: Any) -> ComplexTensor:
        return self._inplace(self.mul(o))

    def div_(self, o: Any) -> ComplexTensor:
        return self._inplace(self.div(o))

    __iadd__, __isub__, __imul__, __itruediv__ = add_, sub_, mul_, div_


# ------------------------------------------------------------------ operands


def _parts_of(x: Any) -> tuple:
    """(real, imaginary or None) of an operand: a complex tensor, a real tensor or array,
    a Python or NumPy number."""
    if isinstance(x, ComplexTensor):
        return x._parts()
    if isinstance(x, _SCALARS):
        return float(x.real), float(x.imag)
    if isinstance(x, (TensorOps, *_REAL_SCALARS)):
        return x, None
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "c":
            return np.ascontiguousarray(x.real), np.ascontiguousarray(x.imag)
        return x, None
    raise TypeError(f"unsupported operand for a complex tensor: {type(x).__name__}")


def _is_operand(x: Any) -> bool:
    return isinstance(x, (ComplexTensor, TensorOps, np.ndarray, *_SCALARS, *_REAL_SCALARS))


def _pair(re: Any, im: Any) -> ComplexTensor:
    """The complex tensor of parts ``re`` and ``im`` (tensors or numbers, broadcast)."""
    if im is None:
        im = 0.0
    if not isinstance(re, TensorOps):
        re = E.add(E.mul(im, 0.0), re)
    if not isinstance(im, TensorOps):
        im = E.add(E.mul(re, 0.0), im)
    if tuple(re.shape) != tuple(im.shape):
        shape = tuple(np.broadcast_shapes(tuple(re.shape), tuple(im.shape)))
        re, im = S.broadcast_to(re, shape), S.broadcast_to(im, shape)
    if re.dtype != im.dtype:
        wide = np.promote_types(re.dtype, im.dtype)
        re, im = S.astype(re, wide), S.astype(im, wide)
    return ComplexTensor(None, re, im)


def _sum(a: Any, b: Any, sign: float) -> Any:
    if b is None:
        return a
    if a is None:
        return E.neg(b) if sign < 0 else b
    return E.sub(a, b) if sign < 0 else E.add(a, b)


def _prod(a: Any, b: Any) -> Any:
    return None if a is None or b is None else E.mul(a, b)


def _add(x: Any, y: Any) -> Any:
    if not (_is_operand(x) and _is_operand(y)):
        return NotImplemented
    (a, b), (c, d) = _parts_of(x), _parts_of(y)
    return _pair(E.add(a, c), _sum(b, d, 1.0))


def _sub(x: Any, y: Any) -> Any:
    if not (_is_operand(x) and _is_operand(y)):
        return NotImplemented
    (a, b), (c, d) = _parts_of(x), _parts_of(y)
    return _pair(E.sub(a, c), _sum(b, d, -1.0))


def _multiply(x: Any, y: Any) -> Any:
    if not (_is_operand(x) and _is_operand(y)):
        return NotImplemented
    (a, b), (c, d) = _parts_of(x), _parts_of(y)
    return _pair(_sum(E.mul(a, c), _prod(b, d), -1.0), _sum(_prod(a, d), _prod(b, c), 1.0))


def _divide(x: Any, y: Any) -> Any:
    if not (_is_operand(x) and _is_operand(y)):
        return NotImplemented
    (a, b), (c, d) = _parts_of(x), _parts_of(y)
    if d is None:
        return _pair(E.div(a, c), None if b is None else E.div(b, c))
    den = E.add(E.mul(c, c), E.mul(d, d))
    re = _sum(E.mul(a, c), _prod(b, d), 1.0)
    im = _sum(_prod(b, c), E.mul(a, d), -1.0)
    return _pair(E.div(re, den), E.div(im, den))


def _power(x: Any, p: Any) -> Any:
    if isinstance(p, (int, np.integer)) and not isinstance(p, bool) and 0 < p <= 4:
        out = x
        for _ in range(int(p) - 1):
            out = _multiply(out, x)
        return out
    if isinstance(p, _REAL_SCALARS):
        return polar(E.pow(x.abs(), float(p)), E.mul(x.angle(), float(p)))
    return exp(_multiply(p, x.log()))


def binary(name: str, a: Any, b: Any, reflected: bool = False) -> Any:
    """Real tensor ``a`` with complex operand ``b`` under operator ``name`` (``"mul"``):
    what the real operators hand over when the other side is complex."""
    fn = _BINARY.get(name)
    if fn is None:
        return NotImplemented
    return fn(b, a) if reflected else fn(a, b)


_BINARY = {"add": _add, "sub": _sub, "mul": _multiply, "div": _divide}


def _as_complex(x: Any, dtype: Any = None) -> ComplexTensor:
    """``x`` (complex or real tensor, number) as a complex tensor, of ``dtype`` if given."""
    if not isinstance(x, ComplexTensor):
        re, im = _parts_of(x)
        if not isinstance(re, TensorOps) and not isinstance(im, TensorOps):
            part = real_dtype(dtype) if dtype is not None else dtypes.default_float()
            re = E.add(np.zeros((), part), re)  # a tensor: NumPy arrays are lifted
        x = _pair(re, im)
    return x if dtype is None else x.astype(dtype)


def unsupported() -> TypeError:
    """The error of a real op given a complex tensor (the same eagerly and traced)."""
    return TypeError("this op does not take complex tensors: dualgraph's complex support "
                     "covers arithmetic, exp/log/sqrt/abs/angle/conj, sin/cos/tanh/sigmoid, "
                     "matmul/einsum, sum/mean, "
                     "the shape ops and dg.fft (docs/eager.md); apply real ops to z.real and "
                     "z.imag, or dg.view_as_real(z)")


# ---------------------------------------------------------------- public ops


def complex(real: Any, imag: Any) -> ComplexTensor:  # noqa: A001 - PyTorch's name
    """``real + i imag`` from two float tensors of one dtype (PyTorch's ``torch.complex``).

    >>> dg.complex(dg.tensor([1.0]), dg.tensor([2.0])).dtype
    dtype('complex64')
    """
    for t in (real, imag):
        if not isinstance(t, TensorOps) or np.dtype(t.dtype) not in _COMPLEX_OF:
            name = getattr(t, "dtype", type(t).__name__)
            raise RuntimeError(f"complex(): expected both inputs to be float or double "
                               f"tensors but got {name}")
    if real.dtype != imag.dtype:
        raise RuntimeError(f"complex(): expected object of scalar type {real.dtype} but got "
                           f"{imag.dtype} for the imaginary part")
    return _pair(real, imag)


def polar(abs: Any, angle: Any) -> ComplexTensor:  # noqa: A002 - PyTorch's names
    """``abs * (cos(angle) + i sin(angle))``: ``dg.polar(dg.ones(2), theta)``."""
    return complex(E.mul(abs, E.cos(angle)), E.mul(abs, E.sin(angle)))


def view_as_real(input: Any) -> Any:  # noqa: A002
    """The ``(*shape, 2)`` real view of complex ``input`` (shares its memory)."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("view_as_real is only supported for complex tensors")
    ri = input._storage()
    return ri.view(*ri.shape)


def view_as_complex(input: Any) -> ComplexTensor:  # noqa: A002
    """Complex view of a float tensor whose last dimension has size 2 (shares its memory):
    ``dg.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))``."""
    if not isinstance(input, TensorOps):
        raise TypeError(f"view_as_complex(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if np.dtype(input.dtype) not in _COMPLEX_OF:
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {input.dtype}")
    shape = tuple(input.shape)
    if not shape:
        raise RuntimeError("Input tensor must have one or more dimensions")
    if shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    strides = input.stride() if hasattr(input, "stride") and callable(input.stride) else None
    if strides is not None and shape[-1] > 1:
        if strides[-1] != 1:
            raise RuntimeError("Tensor must have a last dimension with stride 1")
        if any(s % 2 for s, n in zip(strides[:-1], shape[:-1]) if n > 1):
            raise RuntimeError("Tensor must have a stride divisible by 2 for all but last "
                               "dimension")
    return ComplexTensor(input)


def real(input: Any) -> Any:  # noqa: A002
    """The real part (a view for a complex tensor; a real tensor itself)."""
    return input.real


def imag(input: Any) -> Any:  # noqa: A002
    """The imaginary part of a complex tensor (a view); a real tensor raises, as PyTorch."""
    if not isinstance(input, ComplexTensor):
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return input.imag


def conj(input: Any) -> Any:  # noqa: A002
    return input.conj()


def angle(input: Any) -> Any:  # noqa: A002
    """The argument of each element; for a real tensor ``pi`` where it is negative, else
    0, as PyTorch."""
    if isinstance(input, ComplexTensor):
        return input.angle()
    zero = E.mul(input, 0.0)  # NaN stays NaN
    return E.where(E.lt(input, 0.0), E.add(zero, math.pi), zero)


def exp(input: Any) -> Any:  # noqa: A002
    return input.exp()


def _same_dtype(name: str, operands: tuple) -> None:
    """PyTorch's products take operands of one dtype: no promotion."""
    kinds = {np.dtype(x.dtype) for x in operands}
    if len(kinds) > 1:
        first, other = (np.dtype(x.dtype) for x in operands[:2])
        if name == "matmul":
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {first} "
                               f"!= {other}")
        raise RuntimeError(f"{name}(): expected scalar type {first} but found {other}")


def matmul(a: Any, b: Any) -> Any:
    """Matrix product of complex operands of one dtype (four real products)."""
    _same_dtype("matmul", (a, b))
    (p, q), (r, s) = _parts_of(a), _parts_of(b)
    mm = _real_matmul
    return _pair(_sum(mm(p, r), _prod_mm(q, s), -1.0), _sum(_prod_mm(p, s), _prod_mm(q, r), 1.0))


def _prod_mm(a: Any, b: Any) -> Any:
    return None if a is None or b is None else _real_matmul(a, b)


def einsum(equation: str, *operands: Any) -> Any:
    """Einstein summation over complex operands of one dtype: the sum of the real einsums
    of every choice of parts, each signed by its power of ``i``."""
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    _same_dtype("einsum", operands)
    parts = [_parts_of(x) for x in operands]
    terms: list = [[(), 0]]  # (chosen parts, number of imaginary parts)
    for re, im in parts:
        nxt = [[chosen + (re,), k] for chosen, k in terms]
        if im is not None:
            nxt += [[chosen + (im,), k + 1] for chosen, k in terms]
        terms = nxt
    out: list = [None, None]
    for chosen, k in terms:
        value = _real_einsum(equation, *chosen)
        # i**k: k % 4 picks the part (0, 2 real; 1, 3 imaginary) and the sign (2, 3 minus)
        out[k % 2] = _sum(out[k % 2], value, -1.0 if k % 4 >= 2 else 1.0)
    return _pair(out[0], out[1])


def from_parts(re: Any, im: Any) -> ComplexTensor:
    """A complex tensor of real parts ``re`` and ``im`` (same shape and dtype)."""
    return ComplexTensor(None, re, im)


def cat(tensors: Any, dim: int = 0) -> ComplexTensor:
    """`dg.cat` of complex (and real) tensors."""
    zs = [_as_complex(t) for t in tensors]
    parts = [z._parts() for z in zs]
    return _pair(S.concatenate([p[0] for p in parts], dim),
                 S.concatenate([p[1] for p in parts], dim))


def stack(tensors: Any, dim: int = 0) -> ComplexTensor:
    """`dg.stack` of complex (and real) tensors."""
    zs = [_as_complex(t) for t in tensors]
    parts = [z._parts() for z in zs]
    return _pair(S.stack([p[0] for p in parts], dim), S.stack([p[1] for p in parts], dim))


# ------------------------------------------------------ the top-level functions
def _method(name: str) -> Any:
    def call(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
        return getattr(input, name)(*args, **kwargs)
    return call


def _binary_function(fn: Any) -> Any:
    def call(input: Any, other: Any, *, alpha: Any = 1, out: Any = None) -> Any:  # noqa: A002
        if out is not None:
            raise RuntimeError("out= is not supported with complex tensors")
        return fn(input, other if alpha == 1 else _multiply(other, alpha))
    return call


# What ``dg.<name>`` does when an argument is complex.
FUNCTIONS: dict = {
    **{n: _method(n) for n in (
        "exp", "log", "sin", "cos", "tanh", "sigmoid", "abs", "absolute", "sqrt", "square",
        "reciprocal", "sgn", "neg", "negative", "sum", "mean", "reshape", "flatten", "unflatten",
        "squeeze", "unsqueeze", "permute", "transpose", "swapaxes", "swapdims", "t", "flip",
        "roll", "chunk", "split", "unbind", "clone", "conj_physical", "resolve_conj", "detach")},
    "add": _binary_function(_add), "sub": _binary_function(_sub),
    "subtract": _binary_function(_sub), "mul": _binary_function(_multiply),
    "multiply": _binary_function(_multiply), "div": _binary_function(_divide),
    "divide": _binary_function(_divide), "true_divide": _binary_function(_divide),
    "pow": _power,
    "matmul": matmul, "mm": matmul, "bmm": matmul, "einsum": einsum, "cat": cat,
    "concat": cat, "concatenate": cat, "stack": stack, "real": real, "conj": conj,
    "angle": angle, "imag": imag,
}


def _holds_complex(args: tuple) -> bool:
    for a in args:
        if isinstance(a, ComplexTensor):
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(x, ComplexTensor) for x in a):
            return True
    return False


def dispatch(name: str, fn: Any) -> Any:
    """``fn`` (a real ``dg.<name>``) that hands complex arguments to `FUNCTIONS`."""
    complex_fn = FUNCTIONS[name]
    complex_type, sequences = ComplexTensor, (list, tuple)

    # Every real call pays this check, so it stays inline: one type test per positional
    # argument, and the keywords only when there are any.
    def call(*args: Any, **kwargs: Any) -> Any:
        for a in args:
            if isinstance(a, complex_type) or (
                    isinstance(a, sequences) and _holds_complex(a)):
                return complex_fn(*args, **kwargs)
        if kwargs and _holds_complex(tuple(kwargs.values())):
            return complex_fn(*args, **kwargs)
        return fn(*args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__module__, call.__wrapped__ = fn.__module__, fn
    return call
