"""`dg.nn` modules: Module, Parameter, layers and losses, with PyTorch's behaviour."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..dtypes import as_dtype
from ..eager.grad_mode import no_grad
from ..eager.internal import array_of, bump_version, init_tensor, set_array, set_grad
from ..eager.tensor import Tensor, rng
from ..modes import current_trace
from ..ops.mixin import TensorOps
from . import functional as F
from .hooks import ModuleHooks, RemovableHandle


class Parameter(Tensor):
    """A tensor that a `Module` registers as a parameter; requires grad by default."""

    __slots__ = ()

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            arr = np.zeros((0,), np.float32)
        elif isinstance(data, Tensor):
            arr = array_of(data)
        else:
            arr = np.asarray(data)
        init_tensor(self, arr, False, None)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _note_table(m: "Module") -> None:
    """A container's submodules are listed or indexed: while `dg.compile` traces, its
    table (which module sits where) is guarded, so ``net[2] = Linear(...)`` retraces."""
    trace = current_trace()
    if trace is not None:
        trace.note_module(m)


class Module:
    """Base class of layers and models: parameters and submodules are found by attribute."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # `training` is a property so that a compiled call can guard the flags its trace read:
    # while `dg.compile` traces, each read is reported to the trace (its `note_training`),
    # and a changed flag retraces instead of running the other mode's graph.
    @property
    def training(self) -> bool:
        value = self.__dict__.get("_training", True)
        trace = current_trace()
        if trace is not None:
            trace.note_training(self, value)
        return value

    @training.setter
    def training(self, mode: bool) -> None:
        self.__dict__["_training"] = bool(mode)

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                "cannot assign attributes before Module.__init__() call "
                "(call super().__init__() first)"
            )
        params, modules = self.__dict__["_parameters"], self.__dict__["_modules"]
        buffers = self.__dict__["_buffers"]
        if name in buffers:
            if value is not None and not isinstance(value, TensorOps):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(dg.Tensor or None expected)")
            old = buffers[name]
            # While `dg.compile` traces, `self.buf = new` (a traced value) is written into the
            # existing buffer instead: the compiled call writes it back after each call, as
            # it does for in-place updates, and the guard on the buffer's identity holds.
            if (isinstance(value, TensorOps) and not isinstance(value, Tensor)
                    and isinstance(old, Tensor) and tuple(value.shape) == old.shape):
                with no_grad():
                    old.copy_(value)
                return
            buffers[name] = value
            return
        # PyTorch's rule: a registered parameter or submodule name takes only its own kind
        # (or None); `lin.weight = 5` would otherwise be accepted and fail much later.
        if name in params and value is not None and not isinstance(value, Parameter):
            raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                            "(dg.nn.Parameter or None expected)")
        if name in modules and value is not None and not isinstance(value, Module):
            raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                            "(dg.nn.Module or None expected)")
        # A parameter or submodule assigned again keeps its place in the order (PyTorch's
        # dict assignment), which `parameters()` and `state_dict()` follow.
        self.__dict__.pop(name, None)
        if isinstance(value, Parameter):
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None)
            modules[name] = value
        else:
            params.pop(name, None)
            modules.pop(name, None)
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in d.get("_parameters", {}):
            value = d["_parameters"][name]
        elif name in d.get("_buffers", {}):
            value = d["_buffers"][name]
        elif name in d.get("_modules", {}):
            value = d["_modules"][name]
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        # While `dg.compile` traces: the trace guards the identity of what it read here, so
        # rebinding `m.weight = Parameter(...)` (or a submodule) retraces.
        trace = current_trace()
        if trace is not None:
            trace.note_attr(self, name, value)
        return value

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._parameters.pop(name, None)
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register ``tensor`` as buffer ``name``: module state that is not a parameter
        (BatchNorm's running statistics). Buffers are read by attribute, listed by
        `buffers`, saved by `state_dict` when ``persistent``, and a compiled module reads
        their current values and writes back changes made to them in ``forward``.

        >>> m.register_buffer("running_mean", dg.zeros(3))
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if name not in self._buffers and (
                name in self.__dict__ or name in self._parameters or name in self._modules
                or hasattr(type(self), name)):
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(dg.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Register ``module`` as the child ``name`` (``setattr`` for names that are not
        identifiers, as `Sequential` and `ModuleList` use)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        if name not in self._modules and (hasattr(type(self), name) or name in self.__dict__):
            raise KeyError(f"attribute '{name}' already exists")
        if module is None:
            self._parameters.pop(name, None)
            self._buffers.pop(name, None)
            self._modules[name] = None
        else:
            setattr(self, name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The submodule at the dotted path ``target`` (``""`` is the module itself)."""
        if target == "":
            return self
        mod: Module = self
        for item in target.split("."):
            if not isinstance(mod, Module) or item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def _owner_of(self, target: str, table: str, what: str) -> tuple["Module", str]:
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in getattr(mod, table):
            raise AttributeError(f"{type(mod).__name__} has no {what} `{name}`")
        return mod, name

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target``."""
        mod, name = self._owner_of(target, "_parameters", "parameter")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target``."""
        mod, name = self._owner_of(target, "_buffers", "buffer")
        return mod._buffers[name]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # While `dg.compile` traces: the trace guards the Python numbers this module holds
        # (``Dropout.p``, ``BatchNorm.momentum``) and its submodule table.
        trace = current_trace()
        if trace is not None:
            trace.note_module(self)
        hooks = self.__dict__.get("_hooks")
        if hooks:
            return hooks.call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ hooks
    def _hook_table(self) -> ModuleHooks:
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = self.__dict__["_hooks"] = ModuleHooks()
        return hooks

    def register_forward_pre_hook(self, hook: Any, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """``hook(module, args)`` (``with_kwargs``: ``hook(module, args, kwargs)``) runs
        before ``forward``; a value it returns replaces the arguments (``(args, kwargs)``
        with ``with_kwargs``)."""
        flags = ("pre_with_kwargs",) if with_kwargs else ()
        return self._hook_table().add("forward_pre", hook, prepend, *flags)

    def register_forward_hook(self, hook: Any, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """``hook(module, args, output)`` (``with_kwargs``: ``hook(module, args, kwargs,
        output)``) runs after ``forward``; a value it returns replaces the output."""
        flags = (("with_kwargs",) if with_kwargs else ()) + (
            ("always_call",) if always_call else ())
        return self._hook_table().add("forward", hook, prepend, *flags)

    def register_full_backward_hook(self, hook: Any, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients of the module's
        positional tensor inputs are computed; a tuple it returns replaces them."""
        return self._hook_table().add("backward", hook, prepend)

    def register_full_backward_pre_hook(self, hook: Any,
                                        prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients of the module's outputs are
        known; a tuple it returns replaces them."""
        return self._hook_table().add("backward_pre", hook, prepend)

    # ----------------------------------------------------------------- traversal
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen: set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_buffers(self, prefix: str = "", recurse: bool = True
                      ) -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is None or id(b) in seen:
                    continue
                seen.add(id(b))
                yield (f"{mp}.{name}" if mp else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Any) -> "Module":
        """Call ``fn`` on every submodule (children first) and then on this module, as
        PyTorch does for custom initialisation: ``model.apply(init_weights)``."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> "Module":
        """PyTorch's ``Module.to``: cast the floating-point parameters and buffers to a
        dtype (``model.to(dg.float64)``), in place: each parameter stays the same object, so
        optimizers and compiled functions that hold it see the new data (and its
        ``.grad``, cast too). ``"cpu"`` is accepted, the only device."""
        from ..dtypes import to_target

        dtype = to_target(args, kwargs)
        if dtype is not None:
            self._cast(dtype)
        return self

    def float(self) -> "Module":
        """Floating-point parameters and buffers to float32 (PyTorch's ``Module.float``)."""
        return self._cast(np.dtype(np.float32))

    def double(self) -> "Module":
        """Floating-point parameters and buffers to float64 (PyTorch's ``Module.double``)."""
        return self._cast(np.dtype(np.float64))

    def half(self) -> "Module":
        """Floating-point parameters and buffers to float16 (PyTorch's ``Module.half``)."""
        return self._cast(np.dtype(np.float16))

    def cpu(self) -> "Module":
        """The module itself: dualgraph keeps everything on the CPU."""
        return self

    def cuda(self, device: Any = None) -> "Module":
        """Raises `RuntimeError`: there is no CUDA device (dualgraph runs on the CPU)."""
        from ..dtypes import check_device

        check_device(f"cuda:{device}" if isinstance(device, int) else device or "cuda",
                     "Module.cuda()")
        return self

    def _cast(self, dtype: np.dtype) -> "Module":
        if dtype.kind != "f":
            raise TypeError(f"Module.to() only casts to floating-point dtypes, got {dtype} "
                            "(as PyTorch: integer parameters would lose their gradients)")
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None and p.dtype.kind == "f" and p.dtype != dtype:
                    set_array(p, array_of(p).astype(dtype))
                    bump_version(p)
                    if p.grad is not None:
                        set_grad(p, Tensor(array_of(p.grad).astype(dtype)))
            for b in m._buffers.values():
                if b is not None and b.dtype.kind == "f" and b.dtype != dtype:
                    set_array(b, array_of(b).astype(dtype))
                    bump_version(b)
        return self

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set ``requires_grad`` on every parameter (freezing a layer: ``False``)."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def named_parameters(self, prefix: str = "", recurse: bool = True
                         ) -> Iterator[tuple[str, Parameter]]:
        seen: set[int] = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = p.grad.detach() * 0

    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    # ----------------------------------------------------------------- state dict
    def _state_items(self) -> Iterator[tuple[str, Tensor]]:
        """PyTorch's order: per module, its parameters then its persistent buffers. A
        tensor held by two modules (tied weights) appears under both names, as in
        PyTorch, so a checkpoint of a tied model loads with ``strict=True``."""
        for mp, m in self.named_modules():
            items = list(m._parameters.items()) + [
                (k, b) for k, b in m._buffers.items() if k not in m._non_persistent_buffers]
            for name, t in items:
                if t is not None:
                    yield (f"{mp}.{name}" if mp else name), t

    def state_dict(self, keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Name -> tensor sharing the data of each parameter and persistent buffer
        (detached unless ``keep_vars``)."""
        return OrderedDict((name, t if keep_vars else t.detach())
                           for name, t in self._state_items())

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> tuple:
        """Copy parameters and persistent buffers in; every key and shape is checked before
        anything is written."""
        own = dict(self._state_items())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            keys = ", ".join(f'"{k}"' for k in unexpected)
            errors.append(f"Unexpected key(s) in state_dict: {keys}")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing))
        values = {}
        for k, p in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            arr = array_of(v) if isinstance(v, Tensor) else np.asarray(v)
            if arr.shape != p.shape:
                errors.append(
                    f"size mismatch for {k}: copying a param with shape {arr.shape} from "
                    f"checkpoint, the shape in current model is {p.shape}."
                )
            values[k] = arr
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for k, arr in values.items():
                own[k].copy_(Tensor(arr))
        return missing, unexpected

    # ---------------------------------------------------------------------- repr
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()
                 if m is not None]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


def _uniform(shape: tuple, bound: float) -> np.ndarray:
    return rng().uniform(-bound, bound, size=shape).astype(np.float32)


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight ``(out_features, in_features)``.

    Initialised like PyTorch: uniform in ``±1/sqrt(in_features)`` for weight and bias.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"Linear: {name} must be a non-negative int, got {n!r}")
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(_uniform((out_features, in_features), bound))
        if bias:
            self.bias = Parameter(_uniform((out_features,), bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    """``max(x, 0)``; ``ReLU(True)`` (``inplace``) writes the result into ``x``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return x.relu_() if self.inplace else F.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    def forward(self, x: Any) -> Any:
        return F.sigmoid(x)


class Tanh(Module):
    def forward(self, x: Any) -> Any:
        return F.tanh(x)


class Sequential(Module):
    """Modules applied in order; indexable, sliceable and appendable like PyTorch's.

    ``Sequential(m0, m1)`` names them ``"0"``, ``"1"``; ``Sequential(OrderedDict(...))``
    keeps the given names.
    """

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
            return
        for i, m in enumerate(modules):
            if not isinstance(m, Module):
                raise TypeError(f"Sequential: argument {i} is not a Module: {type(m).__name__}")
            self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        for m in self._modules.values():
            x = m(x)
        return x

    def _key(self, i: int) -> str:
        n = len(self._modules)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{type(self).__name__} indices must be integers or slices, "
                            f"not {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return list(self._modules)[i % n]

    def __getitem__(self, i: Any) -> Any:
        _note_table(self)
        if isinstance(i, slice):
            return type(self)(OrderedDict(list(self._modules.items())[i]))
        return self._modules[self._key(i)]

    def __setitem__(self, i: int, module: Module) -> None:
        setattr(self, self._key(i), module)

    def __delitem__(self, i: Any) -> None:
        keys = list(self._modules)[i] if isinstance(i, slice) else [self._key(i)]
        for k in keys:
            del self._modules[k]

    def __len__(self) -> int:
        _note_table(self)
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        _note_table(self)
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Any) -> "Sequential":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        index %= n + 1
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)
        return self


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(_Loss):
    """``F.cross_entropy`` with PyTorch's arguments: class ``weight``, ``ignore_index``,
    ``reduction`` and ``label_smoothing`` (``size_average``/``reduce`` are the deprecated
    spellings of ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.cross_entropy(input, target, self.weight, None, self.ignore_index, None,
                               self.reduction, self.label_smoothing)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.pos_weight = pos_weight

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class Dropout(Module):
    """``F.dropout`` with probability ``p`` in training mode; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p = float(p)
        self.inplace = inplace

    def forward(self, x: Any) -> Any:
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


# =====================================================================================
# Activation modules: each holds its hyperparameters and calls `functional`.


class _Activation(Module):
    """A module calling ``F.<fn>(x, **hyperparameters)``; ``extra_repr`` lists them."""

    _fn: str = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self._kwargs = kwargs
        for k, v in kwargs.items():
            setattr(self, k, v)

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, **{k: getattr(self, k) for k in self._kwargs})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)!r}" for k in self._kwargs)


class GELU(_Activation):
    _fn = "gelu"

    def __init__(self, approximate: str = "none") -> None:
        super().__init__(approximate=approximate)


class SiLU(_Activation):
    _fn = "silu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class ELU(_Activation):
    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class CELU(_Activation):
    _fn = "celu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(alpha=alpha, inplace=inplace)


class SELU(_Activation):
    _fn = "selu"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Softplus(_Activation):
    _fn = "softplus"

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__(beta=beta, threshold=threshold)


class Softsign(_Activation):
    _fn = "softsign"


class Hardtanh(_Activation):
    _fn = "hardtanh"

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__(min_val=min_val, max_val=max_val, inplace=inplace)


class ReLU6(_Activation):
    _fn = "relu6"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardsigmoid(_Activation):
    _fn = "hardsigmoid"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class Hardswish(_Activation):
    _fn = "hardswish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LeakyReLU(_Activation):
    _fn = "leaky_relu"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__(negative_slope=negative_slope, inplace=inplace)


class Mish(_Activation):
    _fn = "mish"

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(inplace=inplace)


class LogSigmoid(_Activation):
    _fn = "logsigmoid"


class Softmax(_Activation):
    _fn = "softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class LogSoftmax(_Activation):
    _fn = "log_softmax"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


class Softmin(_Activation):
    _fn = "softmin"

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim=dim)


# ---- normalisation and modules
# Containers, `Identity`, and the normalisation layers (their functions are in
# `functional`; BatchNorm's running statistics are buffers, see `Module.register_buffer`).


class Identity(Module):
    """Returns its input; takes and ignores any constructor arguments (PyTorch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class ModuleList(Module):
    """A list of submodules, registered so their parameters are found; has no forward.

    >>> layers = dg.nn.ModuleList([dg.nn.Linear(4, 4) for _ in range(3)])
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _key(self, i: Any) -> str:
        n = len(self._modules)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"ModuleList indices must be integers or slices, "
                            f"not {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return str(i % n)

    def __getitem__(self, i: Any) -> Any:
        _note_table(self)
        if isinstance(i, slice):
            return ModuleList(list(self._modules.values())[i])
        return self._modules[self._key(i)]

    def __setitem__(self, i: int, module: Module) -> None:
        setattr(self, self._key(i), module)

    def __delitem__(self, i: Any) -> None:
        items = list(self._modules.values())
        del items[i if isinstance(i, slice) else int(self._key(i))]
        self._modules.clear()
        for k, m in enumerate(items):  # keys stay "0".."n-1", as PyTorch renumbers them
            self.add_module(str(k), m)

    def __len__(self) -> int:
        _note_table(self)
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        _note_table(self)
        return iter(self._modules.values())

    def __iadd__(self, modules: Any) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: "ModuleList") -> "ModuleList":
        return ModuleList([*self, *other])

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Any) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for k, m in enumerate(items):
            self.add_module(str(k), m)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(); iterate over it instead")


class ModuleDict(Module):
    """An ordered dict of submodules, registered so their parameters are found.

    >>> heads = dg.nn.ModuleDict({"cls": dg.nn.Linear(8, 3), "reg": dg.nn.Linear(8, 1)})
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        _note_table(self)
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        _note_table(self)
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        _note_table(self)
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        _note_table(self)
        return key in self._modules

    def keys(self) -> Any:
        _note_table(self)
        return self._modules.keys()

    def items(self) -> Any:
        _note_table(self)
        return self._modules.items()

    def values(self) -> Any:
        _note_table(self)
        return self._modules.values()

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        m = self[key]
        del self[key]
        return m

    def update(self, modules: Any) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for j, kv in enumerate(items):
            if len(kv) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                 f"{len(kv)}; 2 is required")
            self[kv[0]] = kv[1]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(); index it instead")


def _norm_shape(normalized_shape: Any) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(d) for d in normalized_shape)


class LayerNorm(Module):
    """`F.layer_norm` over the last dims ``normalized_shape``, with a learnt elementwise
    ``weight`` (ones) and ``bias`` (zeros) when ``elementwise_affine``.

    >>> ln = dg.nn.LayerNorm(128)
    """

    def __init__(self, normalized_shape: Any, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True) -> None:
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, np.float32))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, np.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """`F.group_norm` with ``num_groups`` groups of ``num_channels`` channels and a learnt
    per-channel affine when ``affine``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(np.ones(num_channels, np.float32))
            if bias:
                self.bias = Parameter(np.zeros(num_channels, np.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Any) -> Any:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class _NormBase(Module):
    """Batch and instance norm: per-channel ``weight``/``bias`` when ``affine``, and the
    buffers ``running_mean``, ``running_var``, ``num_batches_tracked`` when
    ``track_running_stats``."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(np.ones(num_features, np.float32))
            if bias:
                self.bias = Parameter(np.zeros(num_features, np.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(num_features, np.float32)))
            self.register_buffer("running_var", Tensor(np.ones(num_features, np.float32)))
            self.register_buffer("num_batches_tracked", Tensor(np.zeros((), np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            with no_grad():
                self.weight.fill_(1.0)
                if self.bias is not None:
                    self.bias.zero_()

    def _check_input_dim(self, x: Any) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims: tuple = ()

    def _check_input_dim(self, x: Any) -> None:
        if x.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {x.ndim}D input)")

    def forward(self, x: Any) -> Any:
        self._check_input_dim(x)
        factor: Any = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # A cumulative average: a tensor, so a compiled step reads the count at run
                # time instead of baking it into the trace.
                factor = 1.0 / self.num_batches_tracked.to(np.float64)
        training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if use_stats else None,
                            self.running_var if use_stats else None, self.weight, self.bias,
                            training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm of ``(N, C)`` or ``(N, C, L)`` input (`F.batch_norm`): batch statistics
    in training, which also update the running ones; the running ones in eval.

    >>> bn = dg.nn.BatchNorm1d(16)
    """

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm of ``(N, C, H, W)`` input; see `BatchNorm1d`."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm of ``(N, C, D, H, W)`` input; see `BatchNorm1d`."""

    _dims = (5,)


class _InstanceNorm(_NormBase):
    _spatial: int = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, bias=bias)

    def forward(self, x: Any) -> Any:
        if x.ndim not in (self._spatial + 1, self._spatial + 2):
            raise ValueError(f"expected {self._spatial + 1}D or {self._spatial + 2}D input "
                             f"(got {x.ndim}D input)")
        unbatched = x.ndim == self._spatial + 1
        if unbatched:
            x = x.reshape((1,) + tuple(x.shape))
        out = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats, self.momentum or 0.0, self.eps)
        return out.reshape(tuple(out.shape)[1:]) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of ``(N, C, L)`` (or unbatched ``(C, L)``) input: each channel of each
    sample over its length (`F.instance_norm`)."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of ``(N, C, H, W)`` (or unbatched ``(C, H, W)``) input."""

    _spatial = 2
# ============================================================== convolution
from ..ops.shape import concatenate as _concatenate  # noqa: E402

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _pad_last(x: Any, before: int, after: int, mode: str, axis: int) -> Any:
    """``x`` padded along ``axis`` (-1 or -2) by the non-zero ``padding_mode``s of PyTorch's
    conv modules, from slices and a concatenation (differentiable, and they compile)."""
    if not before and not after:
        return x
    n = x.shape[axis]
    if mode == "reflect" and max(before, after) >= n:
        raise RuntimeError(f"Padding size should be less than the corresponding input "
                           f"dimension, but got: padding ({before}, {after}) at dimension "
                           f"{x.ndim + axis} of input {list(x.shape)}")
    if mode == "circular" and max(before, after) > n:
        raise RuntimeError(f"Padding value causes wrapping around more than once: padding "
                           f"({before}, {after}) at dimension {x.ndim + axis} of input "
                           f"{list(x.shape)}")

    def take(sl: slice) -> Any:
        return x[(Ellipsis, sl) + (slice(None),) * (-axis - 1)]

    def edge(i: int, k: int) -> Any:  # replicate: the edge element k times
        e = take(slice(i, i + 1 if i != -1 else None))
        shape = list(e.shape)
        shape[axis] = k
        return e.expand(*shape)

    if mode == "circular":
        parts = [take(slice(n - before, n)), x, take(slice(0, after))]
    elif mode == "replicate":
        parts = [edge(0, before), x, edge(-1, after)]
    else:  # reflect: the edge itself is not repeated
        parts = [take(slice(before, 0, -1)), x,
                 take(slice(n - 2, n - 2 - after if n - 2 - after >= 0 else None, -1))]
    return _concatenate([p for p in parts if p.shape[axis]], axis=axis)


def _check_conv_args(name: str, in_channels: int, out_channels: int, groups: int,
                     padding: Any, stride: tuple, padding_mode: str) -> None:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise ValueError("groups must be a positive integer")
    if in_channels % groups:
        raise ValueError("in_channels must be divisible by groups")
    if out_channels % groups:
        raise ValueError("out_channels must be divisible by groups")
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                             f"{{'same', 'valid'}}")
        if padding == "same" and any(s != 1 for s in stride):
            raise ValueError("padding='same' is not supported for strided convolutions")
    if padding_mode not in _PADDING_MODES:
        raise ValueError(f"padding_mode must be one of {set(_PADDING_MODES)}, but got "
                         f"padding_mode={padding_mode!r}")


class _ConvNd(Module):
    """Shared by `Conv1d` and `Conv2d`: PyTorch's parameters, init and repr."""

    _n = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", output_padding: Any = 0) -> None:
        super().__init__()
        n = self._n
        name = type(self).__name__
        self.kernel_size = F._ints("kernel_size", kernel_size, n)
        self.stride = F._ints("stride", stride, n)
        self.dilation = F._ints("dilation", dilation, n)
        self.output_padding = F._ints("output_padding", output_padding, n)
        _check_conv_args(name, in_channels, out_channels, groups, padding, self.stride,
                         padding_mode)
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.padding = padding if isinstance(padding, str) else F._ints("padding", padding, n)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.groups, self.padding_mode = groups, padding_mode
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        # PyTorch's kaiming_uniform_(a=sqrt(5)): uniform(+-1/sqrt(fan_in)), fan_in from
        # dimension 1 of the weight (in/groups, or out/groups when transposed).
        fan_in = shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        self.weight = Parameter(_uniform(shape, bound))
        if bias:
            self.bias = Parameter(_uniform((out_channels,), bound))
        else:
            self.register_parameter("bias", None)

    def _padded(self, x: Any) -> tuple[Any, Any]:
        """``(input, padding)`` for the functional call: a non-zero padding mode pads the
        input here and convolves without padding (as PyTorch's modules do)."""
        if self.padding_mode == "zeros":
            return x, self.padding
        pads = F._conv_padding(self.padding, self.kernel_size, self.stride, self.dilation)
        for k, (before, after) in enumerate(pads):
            x = _pad_last(x, before, after, self.padding_mode, k - len(pads))
        return x, 0

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        n = self._n
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv2d(_ConvNd):
    """2-D convolution layer: weight ``(out_channels, in_channels/groups, kH, kW)``, bias
    ``(out_channels,)``, both uniform in ``±1/sqrt(fan_in)`` as in PyTorch.

    >>> conv = dg.nn.Conv2d(3, 8, 3, padding=1)   # (N, 3, H, W) -> (N, 8, H, W)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode)

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class Conv1d(_ConvNd):
    """1-D convolution layer: weight ``(out_channels, in_channels/groups, k)``."""

    _n = 1

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode)

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution layer: weight ``(in_channels, out_channels/groups, kH,
    kW)``; only ``padding_mode='zeros'`` (as PyTorch)."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding)

    def forward(self, x: Any, output_size: Any = None) -> Any:
        opad = self.output_padding
        if output_size is not None:
            opad = self._output_padding(tuple(x.shape[-2:]), tuple(output_size)[-2:])
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, opad,
                                  self.groups, self.dilation)

    def _output_padding(self, size: tuple, wanted: tuple) -> tuple:
        """The output_padding giving ``wanted`` spatial size (PyTorch's ``output_size=``):
        any size from the smallest output up to ``stride - 1`` more."""
        out = []
        for i in range(2):
            low = ((size[i] - 1) * self.stride[i] - 2 * self.padding[i]
                   + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not low <= wanted[i] < low + self.stride[i]:
                raise ValueError(f"requested an output size of {list(wanted)}, but valid sizes "
                                 f"range from {low} to {low + self.stride[i] - 1} (for an "
                                 f"input of {list(size)})")
            out.append(wanted[i] - low)
        return tuple(out)


class Unfold(Module):
    """`F.unfold` as a module (im2col)."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, x: Any) -> Any:
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """`F.fold` as a module (col2im)."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, x: Any) -> Any:
        return F.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
# ---- indexing
class Embedding(Module):
    """A lookup table: ``Embedding(num_embeddings, embedding_dim)(idx)`` is
    ``weight[idx]``. Initialised like PyTorch: N(0, 1), row ``padding_idx`` zero (and it
    gets no gradient)."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse "
                                      "gradients are not supported")
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            w = rng().standard_normal((num_embeddings, embedding_dim)).astype(np.float32)
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = array_of(_weight) if isinstance(_weight, Tensor) else np.asarray(_weight)
        if dtype is not None:
            w = w.astype(as_dtype(dtype))
        self.weight = Parameter(w, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An embedding holding the 2-D ``embeddings`` (a copy), frozen unless told."""
        if len(tuple(embeddings.shape)) != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        w = np.array(array_of(embeddings) if isinstance(embeddings, Tensor) else embeddings)
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=w, _freeze=freeze)

    def forward(self, x: Any) -> Any:
        return F.embedding(x, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
# ============================================================ pooling and padding
# Pooling, resampling and reshaping modules: each holds PyTorch's constructor arguments
# (printed as PyTorch prints them) and calls `functional`.


class _MaxPoolNd(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """`F.max_pool2d` as a module. ``nn.MaxPool2d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class MaxPool1d(_MaxPoolNd):
    """`F.max_pool1d` as a module. ``nn.MaxPool1d(3, stride=2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class _AvgPoolNd(Module):
    """The hyperparameters that `AvgPool2d` and `AvgPool3d` share (PyTorch's
    ``_AvgPoolNd``); subclasses give ``forward``."""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """`F.avg_pool2d` as a module. ``nn.AvgPool2d(3, stride=1, padding=1)``"""

    def forward(self, x: Any) -> Any:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool1d(Module):
    """`F.avg_pool1d` as a module. ``nn.AvgPool1d(3)``"""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        one = (lambda v: (v,) if isinstance(v, int) else tuple(v))  # noqa: E731
        self.kernel_size = one(kernel_size)
        self.stride = one(stride if stride is not None else kernel_size)
        self.padding = one(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, x: Any) -> Any:
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    _fn = ""

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, x: Any) -> Any:
        if self._fn.startswith("adaptive_max"):
            return getattr(F, self._fn)(x, self.output_size, self.return_indices)
        return getattr(F, self._fn)(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(_AdaptivePool):
    """`F.adaptive_avg_pool2d` as a module. ``nn.AdaptiveAvgPool2d((1, 1))``"""

    _fn = "adaptive_avg_pool2d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool1d(_AdaptivePool):
    """`F.adaptive_avg_pool1d` as a module."""

    _fn = "adaptive_avg_pool1d"

    def __init__(self, output_size: Any) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool2d(_AdaptivePool):
    """`F.adaptive_max_pool2d` as a module. ``nn.AdaptiveMaxPool2d(2)``"""

    _fn = "adaptive_max_pool2d"


class AdaptiveMaxPool1d(_AdaptivePool):
    """`F.adaptive_max_pool1d` as a module."""

    _fn = "adaptive_max_pool1d"


class Upsample(Module):
    """`F.interpolate` as a module. ``nn.Upsample(scale_factor=2, mode="bilinear")``"""

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = (float(scale_factor) if isinstance(scale_factor, (int, float))
                             else scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Any) -> Any:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self) -> str:
        head = (f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None
                else f"size={self.size!r}")
        return f"{head}, mode={self.mode!r}"


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` into one (a reshape). ``nn.Flatten()``"""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Any) -> Any:
        from ..ops.broadcast import normalize_dim

        shape = tuple(x.shape)
        n = max(len(shape), 1)
        s = normalize_dim("flatten", self.start_dim, n)
        e = normalize_dim("flatten", self.end_dim, n)
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after "
                               "end_dim")
        if not shape:
            return x.reshape(1)
        return x.reshape(shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1).
    ``nn.Unflatten(1, (2, 3))``"""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, x: Any) -> Any:
        from ..ops.broadcast import normalize_dim

        shape = tuple(x.shape)
        d = normalize_dim("unflatten", self.dim, len(shape))
        sizes = list(self.unflattened_size)
        if sizes.count(-1) > 1:
            raise RuntimeError("unflatten: only one dimension can be inferred")
        known = math.prod(s for s in sizes if s != -1)
        if -1 in sizes and known and shape[d] % known == 0:
            sizes[sizes.index(-1)] = shape[d] // known
        if -1 in sizes or math.prod(sizes) != shape[d]:
            raise RuntimeError(f"unflatten: Provided sizes {list(self.unflattened_size)} don't "
                               f"multiply up to the size of dim {self.dim} ({shape[d]}) in the "
                               f"input tensor")
        return x.reshape(shape[:d] + tuple(sizes) + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
# =====================================================================================
# Losses and attention.


class NLLLoss(_Loss):
    """``F.nll_loss`` with PyTorch's arguments (``weight``, ``ignore_index``, ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.nll_loss(input, target, self.weight, None, self.ignore_index, None,
                          self.reduction)


class MultiheadAttention(Module):
    """PyTorch's ``nn.MultiheadAttention``: one packed input projection (``in_proj_weight``
    (3E, E), ``in_proj_bias``), ``num_heads`` heads of scaled dot-product attention and
    ``out_proj``; PyTorch's initialisation (Xavier-uniform input projection, zero biases).
    ``forward`` returns ``(attn_output, attn_weights)``, the weights averaged over heads by
    default (``None`` when ``need_weights=False``). A bool ``attn_mask`` or
    ``key_padding_mask`` marks the pairs that may NOT attend (PyTorch's convention here,
    the opposite of ``scaled_dot_product_attention``'s).

    >>> mha = dg.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> out, weights = mha(x, x, x)
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: Any = None,
                 vdim: Any = None, batch_first: bool = False) -> None:
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or \
                vdim not in (None, embed_dim):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim other than embed_dim are not supported")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        # Xavier uniform over the packed (3E, E) matrix, as PyTorch's _reset_parameters.
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))
        self.in_proj_weight = Parameter(_uniform((3 * embed_dim, embed_dim), bound))
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * embed_dim, np.float32))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(embed_dim, np.float32))

    def forward(self, query: Any, key: Any, value: Any, key_padding_mask: Any = None,
                need_weights: bool = True, attn_mask: Any = None,
                average_attn_weights: bool = True, is_causal: bool = False) -> tuple:
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask`"
                               " to create this mask.")
        batched = query.ndim == 3
        if not batched:  # (L, E): one sequence
            query, key, value = (t.reshape(t.shape[0], 1, t.shape[1])
                                 for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape(1, -1)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        # Now (L, N, E), PyTorch's own layout.
        e, h, d = self.embed_dim, self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        parts = [F.linear(t, w[i * e:(i + 1) * e], None if b is None else b[i * e:(i + 1) * e])
                 for i, t in enumerate((query, key, value))]
        n_l, n = query.shape[0], query.shape[1]
        n_s = key.shape[0]
        # (T, N, E) -> (N, H, T, D)
        q, k, v = (p.reshape(p.shape[0], n, h, d).permute(1, 2, 0, 3) for p in parts)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        mask = _additive_mask(attn_mask, scores.dtype)
        if mask is not None:
            if mask.ndim == 3:  # (N * H, L, S)
                mask = mask.reshape(n, h, n_l, n_s)
            scores = scores + mask
        if key_padding_mask is not None:
            pad = _additive_mask(key_padding_mask, scores.dtype)
            scores = scores + pad.reshape(n, 1, 1, n_s)
        attn = F.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            attn = F.dropout(attn, self.dropout)
        out = (attn @ v).permute(2, 0, 1, 3).reshape(n_l, n, e)
        out = self.out_proj(out)
        if not batched:
            out = out.reshape(n_l, e)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = attn.mean(1) if average_attn_weights else attn
        if not batched:
            weights = weights.reshape(weights.shape[1:])
        return out, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _additive_mask(mask: Any, dtype: Any) -> Any:
    """A bool mask (True: may not attend) as 0 / -inf; a float mask as it is."""
    if mask is None:
        return None
    from ..ops import elementwise as E

    if mask.dtype == np.bool_:
        return E.where(mask, -math.inf, np.zeros((), dtype))
    return mask


class L1Loss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class KLDivLoss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Any, x2: Any) -> Any:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# ============================================================================
# Volumetric convolution and pooling, unpooling, gated and pixel-rearranging layers
# (functional compositions in `dualgraph.nn.functional`).


class Conv3d(_ConvNd):
    """3-D convolution layer: weight ``(out_channels, in_channels/groups, kD, kH, kW)``,
    PyTorch's init. ``nn.Conv3d(1, 4, 3, padding=1)``"""

    _n = 3

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode)

    def forward(self, x: Any) -> Any:
        x, padding = self._padded(x)
        return F.conv3d(x, self.weight, self.bias, self.stride, padding, self.dilation,
                        self.groups)


class ConvTranspose3d(_ConvNd):
    """Transposed 3-D convolution layer: weight ``(in_channels, out_channels/groups, kD, kH,
    kW)``; only ``padding_mode='zeros'`` (as PyTorch)."""

    _n = 3
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True,
                 dilation: Any = 1, padding_mode: str = "zeros") -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding)

    def forward(self, x: Any) -> Any:
        return F.conv_transpose3d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class MaxPool3d(_MaxPoolNd):
    """`F.max_pool3d` as a module. ``nn.MaxPool3d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool3d(_AvgPoolNd):
    """`F.avg_pool3d` as a module. ``nn.AvgPool3d(2)``"""

    def forward(self, x: Any) -> Any:
        return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _MaxUnpoolNd(Module):
    """What the unpooling modules share: ``unpool(*pool(x))`` with ``pool =
    nn.MaxPool2d(2, return_indices=True)`` and ``unpool = nn.MaxUnpool2d(2)``."""

    _fn = ""

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, x: Any, indices: Any, output_size: Any = None) -> Any:
        return getattr(F, self._fn)(x, indices, self.kernel_size, self.stride, self.padding,
                                    output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """`F.max_unpool1d` as a module. ``nn.MaxUnpool1d(2)``"""

    _fn = "max_unpool1d"


class MaxUnpool2d(_MaxUnpoolNd):
    """`F.max_unpool2d` as a module. ``nn.MaxUnpool2d(2)``"""

    _fn = "max_unpool2d"


class MaxUnpool3d(_MaxUnpoolNd):
    """`F.max_unpool3d` as a module. ``nn.MaxUnpool3d(2)``"""

    _fn = "max_unpool3d"


class GLU(Module):
    """`F.glu` as a module. ``nn.GLU(dim=-1)``"""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Any) -> Any:
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PixelShuffle(Module):
    """`F.pixel_shuffle` as a module. ``nn.PixelShuffle(2)``"""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Any) -> Any:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """`F.pixel_unshuffle` as a module. ``nn.PixelUnshuffle(2)``"""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Any) -> Any:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
