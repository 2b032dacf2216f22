"""Eager tensors: NumPy data, run at once, recorded on the tape when they require grad."""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes
from .._location import user_location
from ..dtypes import as_dtype, check_device, default_float
from ..errors import EagerOnlyError
from ..ir.graph import Literal, Node
from ..modes import Mode
from ..ops import gather as G
from ..ops import reduce as _R
from ..ops import shape as S
from ..ops.broadcast import normalize_dim
from ..ops.complex import ComplexTensor as _ComplexTensor
from ..ops.elementwise import impl_into
from ..ops.mixin import (
    TensorOps,
    cast_error,
    check_copy_shape,
    check_inplace_shape,
    expanded_write_error,
    leaf_inplace_error,
    view_leaf_inplace_error,
    writes_expanded,
)
from ..ops.size import Size
from . import allocator, grad_mode, routines
from . import autograd as _autograd
from .autograd import (
    _QUIET,
    HOOK_EPOCH,
    RULES_RUNNING,
    AccumulateGrad,
    Function,
    PostAccumulateHook,
    RemovableHandle,
    _reset_errstate,
    _set_errstate,
    run_backward,
)
from .saved_hooks import STACK as _SAVED_HOOKS
from .saved_hooks import pack_node, repack_overwritten
from .storage import TypedStorage, UntypedStorage, root_array

_GRAD = grad_mode.GRAD_ENABLED
_SUM_IMPL = _R.SUM.impl
_RULES = RULES_RUNNING


# Size's own constructor checks its elements; an array's shape needs no check.
_new_size = tuple.__new__


class Tensor(TensorOps):
    """An eager tensor: a NumPy array plus autograd state, PyTorch-style.

    >>> x = dg.tensor(2.0, requires_grad=True)
    >>> y = x * x
    >>> y.backward(); x.grad
    tensor(4.)
    """

    __slots__ = ("_data", "_rg", "_grad", "grad_fn", "_version", "_node", "__weakref__")

    def __init__(self, data: Any = None, *sizes: int, requires_grad: bool = False) -> None:
        if sizes or data is None or type(data) is int:
            # PyTorch's legacy form ``torch.Tensor(3, 2)`` / ``torch.Tensor(5)``: a float32
            # tensor of that shape (uninitialised in PyTorch, zeros here), the idiom of
            # ``nn.Parameter(torch.Tensor(n_in, n_out))`` followed by an init.
            dims = () if data is None else (data, *sizes)
            if not all(type(d) is int and d >= 0 for d in dims):
                raise TypeError(f"Tensor(): expected data or non-negative int sizes, got "
                                f"{dims!r}")
            data = np.zeros(dims if dims else (0,), default_float())
        elif type(data) in (list, tuple):
            # ``torch.Tensor([0])`` is the legacy float constructor: the default float
            # dtype whatever the Python numbers are (``torch.tensor([0])`` is int64).
            data = np.asarray(data, default_float())
        _init(self, np.asarray(data), False, None)
        if requires_grad:
            self.requires_grad_(True)

    # ---------------------------------------------------------------- inspection
    @property
    def shape(self) -> Size:
        """The shape, a `dg.Size` (a tuple of ints)."""
        if modes.ABOVE_BASE:
            _note_shape_read(self)
        return _new_size(Size, self._data.shape)

    # The library's own hot paths read ``_data.dtype``; a program's read of a captured
    # tensor's dtype or rank alone is baked into a trace, so the trace guards it.
    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype."""
        if modes.ABOVE_BASE:
            _note_shape_read(self)
        return self._data.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        if modes.ABOVE_BASE:
            _note_shape_read(self)
        return self._data.ndim

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's data, outside autograd (PyTorch's ``.data``)."""
        trace = modes.current_trace()
        if trace is not None and self._rg:
            trace.note_data_alias(self)
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        # PyTorch's `p.data = t`: p keeps its identity (and autograd flags) and now shares
        # t's data, whose shape and dtype it takes.
        if (isinstance(value, TensorOps) and modes.current_trace() is not None
                and not (isinstance(value, Tensor) and value._data is self._data)):
            # The swap would happen once, when the call is traced (an eager tensor's array
            # taken then, say an optimizer's state tensor the compiled call fills later),
            # and later reads in the trace would not all see it: run this call eagerly.
            # Assigning the tensor's own data back (``p.grad.data *= s``) swaps nothing.
            raise data_swap_error()
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if type(self) is _ViewTensor:
            raise RuntimeError("setting .data of a view is not supported: set it on the base")
        if self._rg and value._data.dtype.kind not in "fc":
            raise TypeError(f"cannot set .data of a tensor that requires grad to data of "
                            f"dtype {value._data.dtype}: only floating point tensors can "
                            "require gradients")
        self._data = value._data
        self._version[0] += 1
        self._node = None

    def contiguous(self, memory_format: Any = None) -> "Tensor":
        """The tensor itself when its data is C-ordered, else a C-ordered copy (recorded
        as a copy when it requires grad), as PyTorch."""
        if self._data.flags.c_contiguous:
            return self
        if self._rg and _GRAD.value:
            out = self.clone()
            # The recorded copy keeps the layout (as an elementwise result does): C-order
            # it, so that a view of it exists wherever one of a contiguous tensor does.
            if not out._data.flags.c_contiguous:
                out._data = np.ascontiguousarray(out._data)
            return out
        return _make(np.ascontiguousarray(self._data), False, None)

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False, **kwargs: Any) -> "Tensor":
        """Zeros of ``size`` with this tensor's dtype unless ``dtype`` is given (PyTorch's
        ``Tensor.new_zeros``)."""
        from .creation import zeros  # creation.py builds on Tensor: imported on use

        return zeros(*size, dtype=self.dtype if dtype is None else dtype, device=device,
                     requires_grad=requires_grad, **kwargs)

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False, **kwargs: Any) -> "Tensor":
        """Ones of ``size`` with this tensor's dtype unless ``dtype`` is given."""
        from .creation import ones

        return ones(*size, dtype=self.dtype if dtype is None else dtype, device=device,
                    requires_grad=requires_grad, **kwargs)

    def new_full(self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
                 requires_grad: bool = False, **kwargs: Any) -> "Tensor":
        """``fill_value`` in ``size`` with this tensor's dtype unless ``dtype`` is given."""
        from .creation import full

        return full(size, fill_value, dtype=self.dtype if dtype is None else dtype,
                    device=device, requires_grad=requires_grad, **kwargs)

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False, **kwargs: Any) -> "Tensor":
        """`new_zeros` (dualgraph never hands out uninitialised memory)."""
        return self.new_zeros(*size, dtype=dtype, device=device, requires_grad=requires_grad,
                              **kwargs)

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None,
                   requires_grad: bool = False) -> "Tensor":
        """A copy of ``data`` with this tensor's dtype unless ``dtype`` is given."""
        return tensor(data, dtype=self.dtype if dtype is None else dtype, device=device,
                      requires_grad=requires_grad)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        if modes.ABOVE_BASE:
            _note_layout_read(self)
        return bool(self._data.flags.c_contiguous)

    def squeeze_(self, dim: Any = None) -> "Tensor":
        """`squeeze` in place: this tensor takes the squeezed shape (and, when recorded,
        the view's history), as PyTorch."""
        return self._reshape_inplace(self.squeeze(dim))

    def unsqueeze_(self, dim: int) -> "Tensor":
        """`unsqueeze` in place (see `squeeze_`)."""
        return self._reshape_inplace(self.unsqueeze(dim))

    def transpose_(self, dim0: int, dim1: int) -> "Tensor":
        """`transpose` in place (see `squeeze_`)."""
        return self._reshape_inplace(self.transpose(dim0, dim1))

    def swapaxes_(self, axis0: int, axis1: int) -> "Tensor":
        """`swapaxes` in place (see `squeeze_`)."""
        return self._reshape_inplace(self.transpose(axis0, axis1))

    swapdims_ = swapaxes_

    def t_(self) -> "Tensor":
        """`t` in place (see `squeeze_`)."""
        return self._reshape_inplace(self.t())

    def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator: Any = None) -> "Tensor":
        """Fill with samples uniform in ``[a, b)`` from ``generator`` (a `dg.Generator`) or
        the default one; an in-place write, so a leaf that requires grad needs ``no_grad``."""
        return self._fill_random(numpy_generator(generator).uniform(a, b, self.shape))

    def normal_(self, mean: float = 0.0, std: float = 1.0, *,
                generator: Any = None) -> "Tensor":
        """Fill with normal samples of ``mean`` and ``std`` (see `uniform_`)."""
        if std < 0:
            raise RuntimeError(f"normal_ expects std >= 0.0, but found std {std}")
        return self._fill_random(numpy_generator(generator).normal(mean, std, self.shape))

    def bernoulli_(self, p: Any = 0.5, *, generator: Any = None) -> "Tensor":
        """Fill with 0/1 draws that are 1 with probability ``p`` (a number or a tensor)."""
        prob = np.asarray(p.numpy() if isinstance(p, Tensor) else p, np.float64)
        if np.any((prob < 0) | (prob > 1)):
            raise RuntimeError("bernoulli_ expects p to be in [0, 1]")
        draws = numpy_generator(generator).random(self.shape) < prob
        return self._fill_any(draws)

    def exponential_(self, lambd: float = 1.0, *, generator: Any = None) -> "Tensor":
        """Fill with exponential samples of rate ``lambd``."""
        if lambd <= 0:
            raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        return self._fill_random(numpy_generator(generator).exponential(1.0 / lambd,
                                                                          self.shape))

    def geometric_(self, p: float, *, generator: Any = None) -> "Tensor":
        """Fill with the number of Bernoulli(``p``) trials up to the first success."""
        if not 0 < p < 1:
            raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
        return self._fill_any(numpy_generator(generator).geometric(p, self.shape))

    def log_normal_(self, mean: float = 1.0, std: float = 2.0, *,
                    generator: Any = None) -> "Tensor":
        """Fill with ``exp`` of normal samples of ``mean`` and ``std``."""
        return self._fill_random(numpy_generator(generator).lognormal(mean, std, self.shape))

    def cauchy_(self, median: float = 0.0, sigma: float = 1.0, *,
                generator: Any = None) -> "Tensor":
        """Fill with Cauchy samples of ``median`` and scale ``sigma``."""
        draws = numpy_generator(generator).standard_cauchy(self.shape)
        return self._fill_random(median + sigma * draws)

    def random_(self, from_: int = 0, to: Any = None, *, generator: Any = None) -> "Tensor":
        """Fill with integers uniform in ``[from_, to)``; ``random_(to)`` is ``[0, to)``,
        and without bounds the range is ``[0, 2**mantissa]`` for floats (as PyTorch) or the
        dtype's for integers."""
        if to is None and from_ != 0:
            from_, to = 0, from_
        dtype = self._data.dtype
        if to is None:
            if dtype.kind == "f":
                to = 2 ** (np.finfo(dtype).nmant + 1) + 1
            elif dtype.kind == "b":
                to = 2
            else:
                to = int(np.iinfo(dtype).max) + 1
        if to <= from_:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={from_} >= to={to}")
        return self._fill_any(numpy_generator(generator).integers(from_, to, self.shape))

    def apply_(self, callable: Callable) -> "Tensor":  # noqa: A002
        """Apply ``callable`` to each element (a Python number) in place; slow, CPU only."""
        flat = [callable(v) for v in self._data.reshape(-1).tolist()]
        return self._fill_any(np.asarray(flat).reshape(self.shape))

    def map_(self, other: "Tensor", callable: Callable) -> "Tensor":  # noqa: A002
        """``self[i] = callable(self[i], other[i])`` in place (``other`` broadcasts)."""
        o = np.broadcast_to(np.asarray(other), self.shape).reshape(-1).tolist()
        flat = [callable(a, b) for a, b in zip(self._data.reshape(-1).tolist(), o)]
        return self._fill_any(np.asarray(flat).reshape(self.shape))

    def new(self, *args: Any, **kwargs: Any) -> "Tensor":
        """The legacy constructor: ``x.new(2, 3)`` (zeros of that shape) or
        ``x.new(data)``, in this tensor's dtype."""
        from .creation import legacy_construct

        return legacy_construct(self._data.dtype, "new", args)

    def resize_as_(self, other: "Tensor") -> "Tensor":
        """`resize_` to ``other``'s shape."""
        return self.resize_(tuple(other.shape))

    def stride(self, dim: int | None = None) -> Any:
        """The step in elements between neighbours along each dim of the underlying
        array (a transposed view's strides are swapped, as in PyTorch)."""
        if modes.ABOVE_BASE:
            _note_layout_read(self)
        item = self._data.dtype.itemsize
        st = tuple(s // item for s in self._data.strides)
        if dim is None:
            return st
        return st[normalize_dim("stride", dim, self._data.ndim)] if self._data.ndim else 1

    def data_ptr(self) -> int:
        """The address of the first element."""
        return int(self._data.__array_interface__["data"][0])

    def untyped_storage(self) -> UntypedStorage:
        """The buffer under this tensor and its views (one per base array): views of one
        tensor report the same ``data_ptr()``."""
        return UntypedStorage(root_array(self._data))

    def storage(self) -> TypedStorage:
        """`untyped_storage` read as elements of this tensor's dtype (PyTorch's legacy
        typed storage)."""
        return TypedStorage(root_array(self._data), self._data.dtype)

    def storage_offset(self) -> int:
        """Where this tensor's first element sits in its storage, in elements."""
        if modes.ABOVE_BASE:
            _note_layout_read(self)
        root = root_array(self._data)
        start = root.__array_interface__["data"][0]
        return (self.data_ptr() - start) // self._data.dtype.itemsize

    def _fill_any(self, values: np.ndarray) -> "Tensor":
        return self.copy_(_make(np.asarray(values).astype(self._data.dtype), False, None))

    def _fill_random(self, values: np.ndarray) -> "Tensor":
        if self._data.dtype.kind != "f":
            raise TypeError(f"random fill of a {self._data.dtype} tensor: floating point only")
        return self.copy_(_make(np.asarray(values).astype(self._data.dtype), False, None))

    def _reshape_inplace(self, view: "Tensor") -> "Tensor":
        if self._rg and _GRAD.value and self.grad_fn is None:
            raise leaf_inplace_error()
        if type(self) is _ViewTensor:
            if _GRAD.value and _views_a_leaf(self):
                raise view_leaf_inplace_error()
            if type(view) is not _ViewTensor:  # an empty result NumPy did not make a view
                raise RuntimeError("an in-place change of an empty view's shape (squeeze_, "
                                   "transpose_, ...) is not supported: use x = "
                                   "x.squeeze(...) instead")
            # The view becomes the new one: same base, one more step in its chain, so a
            # later write to the base regenerates its history with the new shape.
            self._data = view._data
            self._vchain = view._vchain
            self._vseen = view._vseen
            self._vgrad = view._vgrad
            _GRAD_FN.__set__(self, _GRAD_FN.__get__(view))
            _RG.__set__(self, _RG.__get__(view))
            self._node = None
            return self
        self._data = view._data
        if view.grad_fn is not None:
            self.grad_fn = view.grad_fn
            self._node = None
        return self

    def _set_grad(self, value: "Tensor | None") -> None:
        # As PyTorch checks: a wrong .grad would surface much later, inside an optimizer step.
        if value is not None:
            if not isinstance(value, TensorOps):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"{type(value).__name__}")
            if tuple(value.shape) != self.shape:
                raise RuntimeError(f"assigned grad has data of a different size: got shape "
                                   f"{tuple(value.shape)}, the tensor has shape "
                                   f"{tuple(self.shape)}")
        # `current_mode()` written out: a training step sets `.grad` once per parameter.
        if modes.ABOVE_BASE:  # the thread's own stack only when some thread pushed a mode
            mode = modes.MODE_STACKS.stack[-1]
            if mode is not EAGER:  # tracing: the write becomes an output
                mode.note_grad_write(self)
        self._grad = value

    # The getter is the slot read, run in C: no Python frame for a read every training
    # step makes once per parameter.
    grad = property(operator.attrgetter("_grad"), _set_grad,
                    doc="Accumulated gradient (``None`` until a backward reaches this leaf).")
    del _set_grad

    @property
    def requires_grad(self) -> bool:
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if self.grad_fn is not None and not value:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to "
                "use a computed variable in a subgraph that doesn't require differentiation "
                "use var_no_grad = var.detach()."
            )
        self.requires_grad_(value)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self.grad_fn is not None:
            if not requires_grad:
                raise RuntimeError("requires_grad_(False) is only allowed on leaf tensors")
            return self
        if requires_grad and self._data.dtype.kind not in "fc":
            raise TypeError(
                "only tensors of floating point dtype can require gradients, got "
                f"{self._data.dtype} (convert with .float() first)"
            )
        if bool(requires_grad) != self._rg:
            _note_requires_grad(self, bool(requires_grad))
        self._rg = bool(requires_grad)
        self._node = None
        return self

    def sum(self, axis: Any = None, keepdims: bool | None = None, *, dim: Any = None,
            keepdim: bool | None = None, dtype: Any = None) -> "Tensor":
        if (axis is None and dim is None and keepdims is None and keepdim is None
                and dtype is None and not modes.ABOVE_BASE):
            out = _sum_all(self)
            if out is not None:
                return out
        return _R.sum(self, axis, keepdims, dim=dim, keepdim=keepdim, dtype=dtype)

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (shared, or a copy when the tensor requires grad)."""
        return self._data.copy() if self._rg else self._data

    def item(self) -> Any:
        data = self._data
        # `current_trace()` written out: a training loop reads its loss every step.
        if modes.ABOVE_BASE:
            if data.size != 1:
                raise _item_error(self)
            mode = modes.MODE_STACKS.stack[-1]
            if mode.tracing:  # a traced program depends on the values it reads
                mode.read_data(self)
        # NumPy checks the size (a ValueError): no size test of our own on every read.
        try:
            return data.item()
        except ValueError:
            raise _item_error(self) from None

    def tolist(self) -> Any:
        trace = modes.current_trace()
        if trace is not None:  # a traced program depends on the values it reads
            trace.read_data(self)
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        # A one-element integer tensor indexes Python and NumPy sequences (nanoGPT's
        # `data[i:i + block_size]` with `i` from a tensor), as in PyTorch.
        if self._data.size != 1 or self._data.dtype.kind not in "iub":
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        trace = modes.current_trace()
        if trace is not None:  # a traced program depends on the values it reads
            trace.read_data(self)
        return int(self._data.reshape(()).item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of a tensor of shape {tuple(self.shape)} with more than one value "
                "is ambiguous: use .any() / .all() on the NumPy array, or dg.where"
            )
        trace = modes.current_trace()
        if trace is not None:  # a traced program depends on the values it reads
            trace.read_data(self)
        return bool(self._data.reshape(()).item())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __repr__(self) -> str:
        return _format_tensor(self)

    def __format__(self, spec: str) -> str:
        # PyTorch's rule: a 0-d tensor formats as its Python number (f"{loss:.4f}"); any
        # other tensor only takes the empty spec, which gives its repr.
        if self._data.ndim == 0:
            return format(self._data.item(), spec)
        return object.__format__(self, spec)

    # ------------------------------------------------------------------ autograd
    def detach(self) -> "Tensor":
        """A new tensor sharing data and version counter, outside the tape."""
        t = _make(self._data, False, None)
        t._version = self._version
        return t

    def detach_(self) -> "Tensor":
        if self._rg:
            _note_requires_grad(self, False)
        self.grad_fn = None
        self._rg = False
        self._node = None
        return self

    def resize_(self, *sizes: Any) -> "Tensor":
        """Give this tensor shape ``sizes`` in place, keeping its leading elements in flat
        order (new ones are zero); what an ``out=`` argument of the wrong shape gets."""
        shape = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], int) else sizes
        shape = tuple(int(n) for n in shape)
        if self._rg:
            raise RuntimeError("cannot resize variables that require grad")
        if shape != self._data.shape:
            if modes.current_trace() is not None:
                raise _resize_error()
            new = np.zeros(shape, self._data.dtype)
            n = min(new.size, self._data.size)
            new.reshape(-1)[:n] = self._data.reshape(-1)[:n]
            self._data = new
            self._version[0] += 1
        return self

    def clone(self) -> "Tensor":
        # While tracing, a copy is a graph value: a buffer written earlier in the trace
        # (power iteration's ``u.copy_``) must be cloned with its new value, not its data.
        if self._rg or modes.current_trace() is not None:
            return self * 1
        return _make(self._data.copy(), False, None)

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor after backward."""
        if not self._rg:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        if self.grad_fn is not None:
            self.grad_fn._retain = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        return self.grad_fn is not None and self.grad_fn._retain is not None

    def register_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(grad)`` when this tensor's gradient is computed; it may return a
        replacement gradient."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        node = self.grad_fn if self.grad_fn is not None else self._input_node()
        if isinstance(node, Function):
            return node.register_hook(hook)
        node._hooks.append(hook)
        HOOK_EPOCH[0] += 1
        return RemovableHandle(node._hooks, hook, leaf=True)

    def register_post_accumulate_grad_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(tensor)`` on this leaf once a backward has added its gradient into
        ``.grad`` (an optimizer step per parameter, inside backward)."""
        if not self._rg:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        node = self._input_node()
        wrapped = PostAccumulateHook(hook)
        node._hooks.append(wrapped)
        HOOK_EPOCH[0] += 1
        return RemovableHandle(node._hooks, wrapped, leaf=True)

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
    ) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``."""
        fn = self.grad_fn
        if gradient is None and not create_graph and fn is not None:
            # `hand_out` only tests `retain_graph`'s truth: no `bool()` call per step.
            if fn.hands_out and fn.hand_out(retain_graph):
                return
            data = self._data
            if data.size == 1:
                # `backward` and `_check_root` for the usual call (a scalar loss with a
                # history), written out: every training step pays them.
                seed = _ONES.get((data.shape, data.dtype))
                if seed is None:
                    seed = _ones(data.shape, data.dtype)
                g = _make(seed, False, None)
                run_backward((fn,), (g,), bool(retain_graph), False)
                return
        backward(self, gradient, retain_graph, create_graph)

    def _input_node(self) -> Node:
        """The node this tensor is as an op input: its grad_fn, a leaf, or a constant."""
        fn = self.grad_fn
        if fn is not None:
            return fn
        n = self._node
        if n is None:
            if self._rg:
                n = AccumulateGrad(self)
            else:
                n = Node("const", (), {"value": self._data}, self._data.shape, self._data.dtype)
            self._node = n
        return n


def _note_requires_grad(t: Tensor, value: bool) -> None:
    """``t``'s ``requires_grad`` is about to become ``value`` (``requires_grad_``,
    ``detach_``): a running trace is told first, and may refuse."""
    trace = modes.current_trace()
    if trace is not None:
        trace.note_requires_grad(t, value)


def _note_shape_read(t: Tensor) -> None:
    """``t.shape`` or ``t.dtype`` is read (``size()``, ``dim()``, ``numel()``, ``len()``,
    ``ndim`` too): a running trace is told, since the program may use them without reading
    ``t``'s data (``x.to(buf.dtype)``)."""
    trace = modes.current_trace()
    if trace is not None:
        trace.note_shape_read(t)


def _note_layout_read(t: Tensor) -> None:
    """``t``'s strides, contiguity or storage offset are read: a running trace is told, as
    the program may branch on them."""
    trace = modes.current_trace()
    if trace is not None:
        trace.note_layout_read(t)


def data_swap_error() -> EagerOnlyError:
    """The error of ``p.data = value`` inside a traced call, naming the user's line: the
    compiled call would not swap the data, so the call runs eagerly."""
    return _eager_only_at(
        "p.data = value inside a compiled function swaps the tensor's data, which the "
        "compiled call does not follow; this signature runs eagerly. Write the values in "
        "place instead (with torch.no_grad(): p.copy_(value))")


def _resize_error() -> EagerOnlyError:
    """The error of ``t.resize_(shape)`` to a new shape inside a traced call: the trace
    would resize ``t`` once, and the compiled call never."""
    return _eager_only_at(
        "resize_() to a new shape inside a compiled function gives the tensor a new "
        "array, which the compiled call does not follow; this signature runs eagerly. "
        "Resize outside the compiled function, or make a new tensor of the shape inside")


def _eager_only_at(what: str) -> EagerOnlyError:
    loc = user_location(4)
    return EagerOnlyError(f"{loc + ': ' if loc else ''}{what}")


def _item_error(t: Tensor) -> ValueError:
    return ValueError(f"item(): only one-element tensors can be converted to Python scalars, "
                      f"got shape {tuple(t.shape)}")


_GRAD_FN = Tensor.grad_fn  # the slots behind _ViewTensor's properties
_RG = Tensor._rg


class _ViewTensor(Tensor):
    """A tensor made by a view op: it shares its base's data and version counter, and
    remembers how to see it from the base (PyTorch's ``_base`` and view function).

    Its history is regenerated lazily from the base's current one when the shared version
    counter moved since it was made (an in-place op on the base or a sibling view), so a
    view made before a write sees it in backward. Only views pay for this: plain tensors
    keep plain slots."""

    __slots__ = ("_vbase", "_vchain", "_vseen", "_vgrad")

    @property
    def grad_fn(self) -> Any:
        if self._vseen != self._version[0]:
            self._regenerate()
        return _GRAD_FN.__get__(self)

    @grad_fn.setter
    def grad_fn(self, fn: Any) -> None:
        _GRAD_FN.__set__(self, fn)

    @property
    def _rg(self) -> bool:
        if self._vseen != self._version[0]:
            self._regenerate()
        return _RG.__get__(self)

    @_rg.setter
    def _rg(self, value: bool) -> None:
        _RG.__set__(self, value)

    @property
    def _base(self) -> Tensor:
        return self._vbase

    def _regenerate(self) -> None:
        """Re-derive the view's history from its base (a view made under no_grad keeps
        none, as in PyTorch)."""
        self._vseen = self._version[0]
        base = self._vbase
        if not self._vgrad or not base._rg:
            return
        prev = _GRAD.value
        _GRAD.value = True
        try:
            fresh = S.replay_view(base, self._vchain)
        finally:
            _GRAD.value = prev
        _GRAD_FN.__set__(self, fresh.grad_fn)
        _RG.__set__(self, True)
        self._node = None


def _views_a_leaf(view: "_ViewTensor") -> bool:
    """Whether ``view``'s history is view steps down to a leaf that requires grad (its
    base may be an earlier tensor that does not: ``arange(6).reshape(2, 3)`` made a leaf
    by ``requires_grad_()``)."""
    fn = view.grad_fn
    for _ in range(len(view._vchain) + 1):
        if fn is None:
            return False
        if fn.name() == "AccumulateGrad":
            return True
        nxt = [f for f, _ in fn.next_functions if f is not None]
        if len(nxt) != 1:
            return False
        fn = nxt[0]
    return False


def _new_view(op: Any, src: Tensor, attrs: dict, out: np.ndarray) -> Tensor:
    """The result tensor of view op ``op`` on ``src``: a `_ViewTensor` when ``out`` really
    shares ``src``'s memory (a reshape NumPy had to copy is a new tensor)."""
    base = out.base
    # A non-empty NumPy view of the source array (or of its own base) shares memory for
    # sure: only the other cases need the bounds test (a microsecond; VJPs make many
    # transposes).
    data = src._data
    if base is None or (base is not data and base is not data.base) or not out.size:
        if not np.may_share_memory(out, data):
            t = Tensor.__new__(Tensor)
            t._version = [0]
            t.grad_fn = None
            t._rg = False
            return t
    t = _ViewTensor.__new__(_ViewTensor)
    # Through the slots: a view's grad_fn and _rg are properties, slower to set.
    _GRAD_FN.__set__(t, None)
    _RG.__set__(t, False)
    # `S.view_step`, inlined for the common one-attribute view (transpose, reshape).
    step = (op.name, tuple(attrs.items())) if len(attrs) < 2 else S.view_step(op, attrs)
    if type(src) is _ViewTensor:
        t._vbase = src._vbase
        t._vchain = src._vchain + (step,)
    else:
        t._vbase = src
        t._vchain = (step,)
    t._version = src._version
    t._vseen = src._version[0]
    t._vgrad = _GRAD.value
    return t


_OPERAND = (Tensor,) + Literal
_autograd._TENSOR[0] = Tensor


def _init(t: Tensor, data: np.ndarray, rg: bool, grad_fn: Any) -> None:
    t._data = data
    t._rg = rg
    t._grad = None
    t.grad_fn = grad_fn
    t._version = [0]
    t._node = None


def _make(data: np.ndarray, rg: bool, grad_fn: Any) -> Tensor:
    t = Tensor.__new__(Tensor)
    # NumPy gives scalars for 0-d arithmetic (a 0-d .grad accumulated by `old + g`); a
    # tensor always owns an ndarray, so zero_() and add_() work on every tensor.
    t._data = data if type(data) is np.ndarray else np.asarray(data)
    t._rg = rg
    t._grad = None
    t.grad_fn = grad_fn
    t._version = [0]
    t._node = None
    return t


def _set_new_grads(tensors: tuple, arrays: tuple, add: bool = False) -> None:
    """Set ``tensors[i]``'s gradient to a new tensor holding ``arrays[i]``, with no setter
    checks; with ``add``, a tensor that has a gradient gets the sum instead (in order: a
    tensor listed twice gets both). `_make` written out, so that the gradients of a step
    cost one Python call in all, not one each."""
    new = Tensor.__new__
    for t, a in zip(tensors, arrays):
        if add:
            old = t._grad
            if old is not None:
                t._grad = _make(old._data + a, False, None)
                continue
        g = new(Tensor)
        g._data = a
        g._rg = False
        g._grad = None
        g.grad_fn = None
        g._version = [0]
        g._node = None
        t._grad = g

# ------------------------------------------------------------------------- eager mode


def _lift(a: Any) -> Any:
    if isinstance(a, (np.ndarray, np.generic)):
        return _make(np.asarray(a), False, None)
    from ..errors import TraceError

    if isinstance(a, TensorOps):
        raise TraceError(
            "a tracer escaped its traced function and was used in eager code; return it "
            "from the function instead of storing it"
        )
    from ..ops.complex import ComplexTensor, unsupported

    if isinstance(a, ComplexTensor):
        raise unsupported()
    raise TypeError(f"expected a Tensor, NumPy array or Python number, got {type(a).__name__}")


# Signatures (op, argument shapes and dtypes, literals, attributes) whose shape rule has
# accepted them. The NumPy kernel computes the result's shape and dtype itself, so eager
# mode needs no shape inference; but a rule may refuse what NumPy accepts (layer_norm of an
# integer tensor), and eager must raise what tracing raises. The rule depends only on
# those (it runs on tracers, which have no values), so it runs once per signature: a
# training loop repeats its signatures and pays a dictionary lookup per op.
_CHECKED: dict = {}
_CHECKED_MAX = 4096  # literals that change every step (a schedule) must not grow it forever


def _check_signature(op: Any, args: tuple, attrs: dict, sig: tuple | None) -> None:
    """Run ``op``'s shape rule on ``args``; remember signature ``sig`` if it passes."""
    op.infer(*args, **attrs)
    if sig is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[sig] = True


def eager_process(op: Any, args: tuple, attrs: dict) -> Tensor:
    """Run ``op`` now with its NumPy kernel; record a tape node if a result needs grad."""
    # This is the per-op cost every eager user pays: keep it to one pass over the args and
    # no generator expressions or helper calls on the common path.
    datas = []
    # The signature the shape rule sees (see _CHECKED); not for a gradient rule's ops.
    key = None if _RULES.value else [op]
    rg = False
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            datas.append(d)
            if key is not None:
                key.append(d.shape)
                key.append(d.dtype)
            if type(a) is _ViewTensor:
                # The view's properties, read through their slots once its history is
                # current: no property call per view input (linear's transposed weight).
                if a._vseen != a._version[0]:
                    a._regenerate()
                if _RG.__get__(a):
                    rg = True
            elif a._rg:
                rg = True
        elif isinstance(a, Literal):
            datas.append(a)
            if key is not None:
                key.append(type(a))  # 1, 1.0 and True are equal keys
                key.append(a)
        else:
            args = tuple([b if isinstance(b, (Tensor,) + Literal) else _lift(b) for b in args])
            return eager_process(op, args, attrs)
    # PyTorch computes inf and NaN silently (log(0), 0 / 0): no NumPy warnings. A view
    # does no arithmetic, so it leaves the floating-point state alone.
    quiet = None if op.view else _set_errstate(_QUIET)
    extra = None
    try:
        if rg and op.impl_keep is not None and _GRAD.value and (
                op.keeps_for is None or _keeps(args[op.keeps_for])):
            out, extra = op.impl_keep(*datas, **attrs)
        else:
            out = op.impl(*datas, **attrs)
    except Exception as e:
        op.infer(*args, **attrs)  # raises the clear error when the shapes are at fault
        raise RuntimeError(f"{op.name}: {e}") from e
    finally:
        if quiet is not None:
            _reset_errstate(quiet)
    if key is not None:
        if attrs:
            key.append(tuple(attrs.items()))
        try:
            sig = tuple(key)
            checked = sig in _CHECKED
        except TypeError:  # an unhashable attribute (an array): check every time
            sig = None
            checked = False
        if not checked:
            _check_signature(op, args, attrs, sig)
    if type(out) is not np.ndarray:
        out = np.asarray(out)
    if op.view:
        t = _new_view(op, args[0], attrs, out)
    else:
        t = Tensor.__new__(Tensor)
        t._version = [0]
        t.grad_fn = None
        t._rg = False
    t._data = out
    t._grad = None
    t._node = None
    if not rg or not _GRAD.value or not op.differentiable:
        return t
    saves = op.saves
    out_version = None
    if not saves:
        saved = ()
        versions = []
    else:
        sf = op.saves_for
        if sf is None:
            # Every input saved, in order (mul, matmul): the argument tuple itself.
            n = len(args)
            saved = (args if n < 16 and saves == _IN_ORDER[n]
                     else tuple([args[i] for i in saves]))
            versions = [s._version[0] if isinstance(s, Tensor) else None for s in saved]
        else:  # only what a wanted gradient reads
            kept = []
            versions = []
            for i, j in zip(saves, sf):
                s = args[i]
                if j is not None:
                    b = args[j]
                    if not isinstance(b, Tensor) or not (
                            _RG.__get__(b) if type(b) is _ViewTensor else b._rg):
                        s = None
                kept.append(s)
                versions.append(s._version[0] if isinstance(s, Tensor) else None)
            saved = tuple(kept)
    if op.saves_out:
        out_version = t._version
        versions.append(out_version[0])
    # Each input's tape node: its history, its leaf node (kept on the tensor once made), or
    # a constant; `_input_node` makes the node the first time.
    inputs = []
    for a in args:
        if isinstance(a, Tensor):
            n = (_GRAD_FN.__get__(a) if type(a) is _ViewTensor else a.grad_fn) or a._node
            inputs.append(n if n is not None else a._input_node())
        else:
            inputs.append(a)
    fn = Function(op, tuple(inputs), attrs, out, saved, versions or (), out_version)
    if extra is not None:
        fn._kept = extra
    if _SAVED_HOOKS:
        pack_node(fn, t)
    _attach(t, fn)
    return t


def _sum_all(x: Tensor) -> Tensor | None:
    """``x.sum()`` of a plain (not a view) eager float tensor, in eager mode: the ``sum``
    op's kernel, result and ``SumBackward0`` node, without the generic steps a reduction
    over everything needs none of (the argument spellings, the signature's shape rule,
    which accepts every such input). A training loop's ``loss.sum()``. ``None`` for any
    other tensor: the op runs."""
    if type(x) is not Tensor:
        return None
    d = x._data
    if d.dtype.kind != "f":
        return None  # integer sums widen to int64 (the op's rule)
    quiet = _set_errstate(_QUIET)
    try:
        out = np.asarray(_SUM_IMPL(d, None, False))
    finally:
        _reset_errstate(quiet)
    return record_unary(_R.SUM, x, out, {"axis": None, "keepdims": False}, False)


def record_unary(op: Any, x: Tensor, out: np.ndarray, attrs: dict, saves_out: bool) -> Tensor:
    """The result tensor of one-input op ``op`` (which saves no input) on the plain eager
    tensor ``x``, holding ``out``, and its tape node when ``x`` needs grad: what
    `eager_process` records for such an op (``saves_out``: the op saves its output, at
    version 0)."""
    t = Tensor.__new__(Tensor)
    t._version = [0]
    t._data = out
    t._grad = None
    t._node = None
    if not x._rg or not _GRAD.value:
        t.grad_fn = None
        t._rg = False
        return t
    fn = Function(op, (x.grad_fn or x._node or x._input_node(),), attrs, out, (),
                  [0] if saves_out else (), t._version if saves_out else None)
    if _SAVED_HOOKS:
        pack_node(fn, t)
    t.grad_fn = fn
    t._rg = True
    return t


def _attach(t: Tensor, fn: Any) -> None:
    """Make ``fn`` the tape node of ``t``, which now requires grad."""
    if type(t) is _ViewTensor:  # through the slots, as `_new_view` sets them
        _GRAD_FN.__set__(t, fn)
        _RG.__set__(t, True)
    else:
        t.grad_fn = fn
        t._rg = True


def _keeps(a: Any) -> bool:
    """Whether input ``a`` of an op with ``impl_keep`` needs a gradient (the one its kept
    arrays serve)."""
    if not isinstance(a, Tensor):
        return False
    return _RG.__get__(a) if type(a) is _ViewTensor else a._rg


# ``saves`` that lists every input in order, by input count.
_IN_ORDER = [tuple(range(n)) for n in range(16)]


class EagerMode(Mode):
    """The base mode: ops run now (`eager_process`); in-place ops write into the tensor's
    array, recorded on the tape when autograd needs them."""

    __slots__ = ()
    process = staticmethod(eager_process)  # `bind` calls it directly: no extra frame

    def _check_write(self, t: Tensor, name: str) -> None:
        """The in-place errors: a leaf that requires grad, a view autograd cannot follow."""
        try:
            if t._rg and _GRAD.value and t.grad_fn is None:
                raise leaf_inplace_error()
        except AttributeError:
            _lift(t)  # not a Tensor (a tracer that escaped its trace): raises saying so
            raise
        if type(t) is _ViewTensor:
            if writes_expanded(t._vchain):
                raise expanded_write_error(name)
            if _GRAD.value:
                _check_view_write(t)

    def assign(self, t: Tensor, value: Tensor) -> Tensor:
        """``t := value`` (computed from ``t``, e.g. by ``index_put``): ``t`` takes over
        ``value``'s history, so its node is ``value``'s (PyTorch's IndexPutBackward0)."""
        self._check_write(t, "index_put_")
        return self.write(t, value)

    def inplace(self, t: Tensor, op: Any, other: Any) -> Tensor:
        self._check_write(t, op.name if op is not None else "copy_")
        if op is None:
            return self._copy(t, other)
        if not isinstance(other, _OPERAND):
            other = tensor(other)
        data = t._data
        if isinstance(other, Tensor):
            o = other._data
            oshape = o.shape
            record = _GRAD.value and (t._rg or other._rg)
        else:
            o, oshape = other, ()
            record = t._rg and _GRAD.value
        if oshape != data.shape:
            check_inplace_shape(op.name, data.shape, oshape)
        if record:
            return self.write(t, modes.bind(op, t, other), op)
        # Nothing to record (an optimizer step under no_grad): the op's own kernel writes
        # straight into the buffer, without a temporary tensor.
        try:
            impl_into(op, data, data, o)
        except TypeError:
            result = op.infer(t, other)[1]
            if np.can_cast(result, data.dtype, casting="same_kind"):
                raise
            raise cast_error(op.name, result, data.dtype) from None
        t._version[0] += 1
        return t

    def _copy(self, t: Tensor, src: Any) -> Tensor:
        """``t.copy_(src)``, or ``t.fill_(src)`` for a Python number."""
        if isinstance(src, Literal):
            if t._rg and _GRAD.value:  # the overwritten history gets a zero gradient
                return self.write(t, G.view_scatter(t, src, ()))
            t._data[...] = src
            t._version[0] += 1
            return t
        src = src if isinstance(src, Tensor) else tensor(np.asarray(src))
        check_copy_shape(t.shape, src.shape)
        if (src._rg or t._rg) and _GRAD.value:
            # One CopyBackwards node: the gradient goes to src, none to t's old value.
            return self.write(t, G.view_scatter(t, src, ()))
        np.copyto(t._data, src._data, casting="unsafe")
        t._version[0] += 1
        return t

    def write(self, t: Tensor, value: Tensor, op: Any = None) -> Tensor:
        """Write ``value`` into ``t``'s data; if ``value`` was recorded, ``t`` takes over its
        history (the place where a write through a view would rebase its base's)."""
        name = op.name if op is not None else "copy_"
        if value.shape != t.shape:
            check_inplace_shape(name, t.shape, value.shape)
        if not np.can_cast(value.dtype, t.dtype, casting="same_kind"):
            raise cast_error(name, value.dtype, t.dtype)
        fn = value.grad_fn
        if fn is not None and fn._saved:
            # The new node saved this tensor by reference; it is about to change, so give
            # the node a copy of the old value (with the old history) instead.
            old = _make(t._data.copy(), t._rg, t.grad_fn)
            old._node = t._node
            # The node recorded t's version when it saved t: the copy stands for that value.
            old._version[0] = t._version[0]
            fn._saved = tuple(old if s is t else s for s in fn._saved)
            if _SAVED_HOOKS:
                repack_overwritten(fn, t, old)
        view = type(t) is _ViewTensor and fn is not None
        if view:
            base = t._vbase
            old = base.grad_fn
            if old is None and base._rg:
                old = base._input_node()
            elif old is None:  # a constant base: its node keeps the value before the write
                d = base._data
                old = Node("const", (), {"value": d.copy()}, d.shape, d.dtype)
        np.copyto(t._data, value._data, casting="same_kind")
        t._version[0] += 1
        if fn is None:
            return t
        if view:
            # PyTorch's CopySlices: the base's history becomes "the old base with the view
            # replaced by value"; the view (and its siblings) re-derive theirs from it.
            node = Function(G.VIEW_SCATTER, (old, fn), {"chain": t._vchain}, base._data,
                            (), (), None)
            base.grad_fn = node
            base._rg = True
            base._node = None
            return t
        t.grad_fn = fn
        t._rg = True
        t._node = None
        return t

    def note_grad_write(self, t: Tensor) -> None:
        pass  # nothing to record: the setter stores the value


def _check_view_write(t: _ViewTensor) -> None:
    """In-place writes through a view that autograd could not follow raise (PyTorch's)."""
    base = t._vbase
    if base._rg and base.grad_fn is None:
        raise view_leaf_inplace_error()
    if not t._vgrad and base._rg:
        raise RuntimeError(
            "a view was created in no_grad mode and is being modified in place with grad "
            "mode enabled: its base's gradient would be wrong. Make the view outside "
            "no_grad, or modify it inside no_grad"
        )


EAGER = EagerMode()
modes.push_mode(EAGER)
allocator.tune()  # eager temporaries reuse freed heap instead of faulting pages in again
routines.install()  # large GELU and row scatter-adds as compiled loops, built on first use


# --------------------------------------------------------------------------- backward


def _check_root(t: Tensor, gradient: Any, i: int = 0) -> tuple:
    if not isinstance(t, Tensor):
        raise TypeError(f"backward: expected a Tensor, got {type(t).__name__}")
    if not t._rg:
        raise RuntimeError(
            f"element {i} of tensors does not require grad and does not have a grad_fn"
        )
    if gradient is None:
        if t._data.size != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs (got shape "
                f"{tuple(t.shape)}); "
                "pass gradient= of the same shape"
            )
        g = _make(_ones(t._data.shape, t._data.dtype), False, None)
    else:
        g = gradient if isinstance(gradient, Tensor) else tensor(np.asarray(gradient))
        if g.shape != t.shape:
            raise RuntimeError(
                f"Mismatch in shape: gradient has a shape of {tuple(g.shape)} and output has a "
                f"shape of {tuple(t.shape)}"
            )
        if g.dtype != t.dtype:
            g = g.astype(t.dtype)
    return t._input_node(), g


_ONES: dict = {}


def _ones(shape: tuple, dtype: np.dtype) -> np.ndarray:
    """A shared read-only seed gradient (the engine copies before giving it to a leaf)."""
    key = (shape, dtype)
    a = _ONES.get(key)
    if a is None:
        a = _ONES[key] = np.ones(shape, dtype)
        a.flags.writeable = False
    return a


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
) -> None:
    """Accumulate gradients of ``tensors`` into the leaves' ``.grad`` (``torch.autograd``)."""
    if retain_graph is None:
        retain_graph = create_graph
    if isinstance(tensors, Tensor) and not isinstance(grad_tensors, (list, tuple)):
        root, g = _check_root(tensors, grad_tensors)
        run_backward((root,), (g,), retain_graph, create_graph)
        return
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if grad_tensors is None or isinstance(grad_tensors, (Tensor, np.ndarray, float, int)):
        grad_tensors = [grad_tensors] * len(tensors) if grad_tensors is None else [grad_tensors]
    roots, grads = zip(*[_check_root(t, g, i) for i, (t, g) in
                         enumerate(zip(tensors, grad_tensors))])
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(roots, grads, retain_graph, create_graph)


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
) -> tuple:
    """Gradients of ``outputs`` with respect to ``inputs``, without touching ``.grad``.

    >>> (gx,) = dg.grad(x * x, [x])
    """
    trace = modes.current_trace()
    if trace is not None:  # differentiate the traced graph
        return trace.grad(outputs, inputs, grad_outputs, create_graph, allow_unused)
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs] * len(outputs)
    for x in inputs:
        if not isinstance(x, Tensor) or not x._rg:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    roots, gs = zip(*[_check_root(t, g, i) for i, (t, g) in enumerate(zip(outputs, grad_outputs))])
    targets = [x._input_node() for x in inputs]
    if retain_graph is None:
        retain_graph = create_graph
    return run_backward(roots, gs, retain_graph, create_graph, targets, allow_unused)


# ------------------------------------------------------------ tensors from data


# Kinds NumPy can hold but a tensor cannot: object, str/bytes, void (records),
# datetime/timedelta, complex. They would fail later, deep inside NumPy or Numba.
_REJECTED_KINDS = {"O": "object", "U": "string", "S": "bytes", "V": "void (structured)",
                   "M": "datetime", "m": "timedelta", "c": "complex"}
# PyTorch has only limited support for unsigned types wider than a byte, and NumPy promotes
# uint64 with int64 to float64: such arrays are refused rather than silently changing type.
_REJECTED_UINTS = (np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


def _check_dtype(fn: str, dtype: np.dtype) -> None:
    """Refuse the NumPy dtypes a tensor cannot hold, naming the dtype."""
    kind = _REJECTED_KINDS.get(dtype.kind)
    if kind == "complex":
        raise TypeError(f"{fn}: complex tensors are not supported (dtype {dtype}); pass the "
                        "real and imaginary parts as two tensors")
    if kind is not None:
        raise TypeError(f"{fn}: cannot build a numeric tensor from {kind} data (dtype "
                        f"{dtype}); convert it to a number dtype first")
    if dtype in _REJECTED_UINTS:
        raise TypeError(f"{fn}: dtype {dtype} is not supported (unsigned types wider than "
                        "uint8); convert with .astype(np.int64) first")


def _from_python(data: Any, dtype: Any) -> np.ndarray:
    """A NumPy array for a Python number or nested list, with PyTorch's dtype defaults."""
    try:
        arr = np.array(data)
    except ValueError as e:
        raise ValueError(f"tensor(): cannot build a tensor from {data!r}: {e}") from None
    if arr.dtype == np.float64 and dtype is None:
        return arr.astype(default_float())
    if arr.dtype == np.uint64 or arr.dtype.kind == "O":
        # NumPy makes uint64 (or object) for ints beyond int64, where PyTorch raises.
        target = np.int64 if dtype is None else as_dtype(dtype)
        try:
            return np.array(data, dtype=target)
        except OverflowError:
            raise RuntimeError(f"tensor(): Overflow when unpacking long: {data!r} holds an "
                               f"integer outside the range of {np.dtype(target)}") from None
        except (TypeError, ValueError):
            pass
        if arr.dtype.kind == "O":
            raise TypeError(f"tensor(): cannot build a numeric tensor from {data!r}")
    return arr


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, *, device: Any = None,
           pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (number, nested list, NumPy array).

    Python floats become float32 and ints int64; NumPy arrays keep their dtype. Object,
    string, datetime, complex and wide unsigned arrays raise `TypeError`; a Python int
    outside int64 raises `RuntimeError`, as in PyTorch.

    >>> dg.tensor([2.0, 3.0], requires_grad=True)
    tensor([2., 3.], requires_grad=True)
    """
    check_device(device, "tensor()")
    if not requires_grad and isinstance(data, TensorOps) and modes.current_trace() is not None:
        # Traced, a copy of the value the tensor has when the call runs (a captured tensor
        # is read on every call), not when it was traced.
        to = data.dtype if dtype is None else as_dtype(dtype)
        _check_dtype("tensor()", np.dtype(to))
        return S.astype(S.stop_gradient(data), to)
    if _complex_data(data, dtype):
        return _complex_tensor(data, dtype, requires_grad)
    if isinstance(data, Tensor):
        arr = data._data.copy()
    elif isinstance(data, (np.ndarray, np.generic)):
        arr = np.array(data, copy=True)
        trace = modes.current_trace()
        if trace is not None and isinstance(data, np.ndarray):
            trace.note_copied_array(data)
    else:
        arr = _from_python(data, dtype)
    _check_dtype("tensor()", arr.dtype)
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype))
        _check_dtype("tensor()", arr.dtype)
    return _filled(arr, requires_grad)


def _complex_data(data: Any, dtype: Any) -> bool:
    """Whether `tensor` builds a complex tensor: a complex dtype, complex data."""
    from ..ops.complex import ComplexTensor, is_complex_dtype

    if dtype is not None:
        return is_complex_dtype(dtype)
    if isinstance(data, (ComplexTensor, complex, np.complexfloating)):
        return True
    if isinstance(data, np.ndarray):
        return data.dtype.kind == "c"
    return isinstance(data, (list, tuple)) and _has_complex(data)


def _has_complex(data: Any) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_has_complex(d) for d in data)
    return isinstance(data, (complex, np.complexfloating))


def _complex_tensor(data: Any, dtype: Any, requires_grad: bool) -> Any:
    """`tensor` of complex data or dtype: a `ComplexTensor` holding a copy. Python complex
    numbers give the default complex dtype (complex64), as PyTorch."""
    from ..ops.complex import ComplexTensor, real_dtype

    if isinstance(data, ComplexTensor):
        data = data.numpy()
    elif isinstance(data, Tensor):
        data = data._data
    arr = np.array(data)
    if dtype is None:
        from_numpy = isinstance(data, (np.ndarray, np.generic)) and arr.dtype.kind == "c"
        dtype = arr.dtype if from_numpy else (
            np.complex128 if default_float() == np.float64 else np.complex64)
    part = real_dtype(dtype)
    ri = np.stack([arr.real, arr.imag], -1).astype(part)
    return ComplexTensor(_filled(ri, requires_grad))


def _complex_from_numpy(a: np.ndarray, requires_grad: bool) -> Any:
    """A complex tensor whose storage is ``a`` seen as float pairs (shared memory; a copy
    when ``a`` is not C-contiguous)."""
    from ..ops.complex import ComplexTensor, real_dtype

    if a.dtype not in (np.complex64, np.complex128):
        raise TypeError(f"from_numpy(): dtype {a.dtype} is not supported (complex64 and "
                        "complex128)")
    a = np.ascontiguousarray(a)
    t = _make(a.view(real_dtype(a.dtype)).reshape(*a.shape, 2), False, None)
    return ComplexTensor(t.requires_grad_(True) if requires_grad else t)


def from_numpy(a: np.ndarray, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor sharing memory with NumPy array ``a`` (the dtypes `tensor` refuses raise;
    a complex array gives a complex tensor sharing its memory)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy expects a NumPy array, got {type(a).__name__}")
    if a.dtype.kind == "c" and dtype is None:
        return _complex_from_numpy(a, requires_grad)
    _check_dtype("from_numpy()", a.dtype)
    if dtype is not None:
        a = a.astype(as_dtype(dtype), copy=False)
        _check_dtype("from_numpy()", a.dtype)
    t = _make(a, False, None)
    return t.requires_grad_(True) if requires_grad else t


def _filled(arr: np.ndarray, requires_grad: bool) -> Tensor:
    t = _make(arr, False, None)
    if requires_grad:
        return t.requires_grad_(True)
    trace = modes.current_trace()
    if trace is not None:  # a buffer made inside a traced function: not outside state
        trace.note_made(t)
    return t


class _RNG:
    gen = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed ``randn``/``rand``, dropout, ``nn`` initialisation and compiled random ops for
    reproducible runs."""
    _RNG.gen = np.random.default_rng(seed)


def rng() -> np.random.Generator:
    return _RNG.gen


def set_rng(gen: np.random.Generator) -> None:
    """Replace dualgraph's default generator (`dg.default_generator.set_state`)."""
    _RNG.gen = gen


def numpy_generator(generator: Any) -> np.random.Generator:
    """The NumPy generator behind a `dg.Generator` (None: dualgraph's default one)."""
    if generator is None:
        return _RNG.gen
    gen = getattr(generator, "_np", None)
    if not isinstance(gen, np.random.Generator):
        raise TypeError(f"generator must be a dg.Generator, got {type(generator).__name__}")
    return gen


# Random ops in a trace read this 0-d int64 tensor as their key: the trace lifts it like
# any captured tensor (a compiled graph input), and the compiled call gives it a fresh value
# drawn from the generator before every call (`dualgraph.compile.random_state`). Each op in
# one trace gets its own ``stream``, numbered in trace order.
TRACE_KEY = _make(np.zeros((), np.int64), False, None)
_STREAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def draw_key() -> np.ndarray:
    """A fresh 0-d int64 key from dualgraph's generator (advances it by one draw)."""
    return np.array(_RNG.gen.integers(0, 2 ** 63 - 1, dtype=np.int64))


def random_key() -> tuple[Any, int]:
    """``(key, stream)`` for the next random op: in a trace, the trace key and the next
    stream number; in eager mode, a fresh key tensor drawn from the generator, stream 0."""
    ctx = modes.current_trace()
    if ctx is None:
        return _make(draw_key(), False, None), 0
    count = _STREAMS.get(ctx, 0)
    _STREAMS[ctx] = count + 1
    return TRACE_KEY, count


# ------------------------------------------------------------------------------ repr


def _format_tensor(t: Tensor) -> str:
    data = t._data
    body = _format_data(data)
    extras = []
    if data.dtype not in (default_float(), np.dtype(np.int64), np.dtype(np.bool_)):
        extras.append(f"dtype=dg.{data.dtype.name}")
    if data.size == 0 and data.ndim != 1:
        extras.insert(0, f"size={tuple(data.shape)}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._rg:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


# `dg.set_printoptions` (dualgraph/settings.py) writes these.
PRINT_OPTIONS: dict = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
                       "sci_mode": None}


def _format_data(data: np.ndarray) -> str:
    """PyTorch's float formatting: integral values as ``2.``, scientific notation when the
    nonzero finite values span more than 1000x (or exceed 1e8, or go below 1e-4), else
    `PRINT_OPTIONS`' precision (four decimals); the column width comes from the nonzero
    finite values only."""
    opts = PRINT_OPTIONS
    layout = {"threshold": opts["threshold"], "edgeitems": opts["edgeitems"],
              "max_line_width": opts["linewidth"]}
    if data.dtype.kind != "f":
        return np.array2string(data, separator=", ", prefix="tensor(", **layout)
    vals = np.abs(data[np.isfinite(data) & (data != 0)]).astype(np.float64)
    if vals.size:
        lo, hi = float(vals.min()), float(vals.max())
        integral = bool(np.all(vals == np.ceil(vals)))
        sci = hi / lo > 1000.0 or hi > 1e8 or (not integral and lo < 1e-4)
    else:
        integral, sci = True, False
    if opts["sci_mode"] is not None:
        sci = bool(opts["sci_mode"])
    digits = opts["precision"]

    def fmt(v: float) -> str:
        if not np.isfinite(v):
            return str(v)
        if sci:
            return f"{v:.{digits}e}"
        return f"{v:.0f}." if integral else f"{v:.{digits}f}"

    if data.ndim == 0:
        return fmt(float(data))
    width = max((len(fmt(float(v))) for v in vals), default=0)
    signed = max((len(fmt(float(v))) for v in data.flat if v < 0 and np.isfinite(v)),
                 default=0)
    width = max(width, signed)
    return np.array2string(
        data, separator=", ", prefix="tensor(",
        formatter={"float_kind": lambda v: fmt(float(v)).rjust(width)}, **layout,
    )


# Complex tensors are `dg.Tensor` instances to user code, as PyTorch's complex tensors are.
_ComplexTensor.public_class = Tensor
