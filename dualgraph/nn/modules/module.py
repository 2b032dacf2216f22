"""`Module`, the base class of layers and models, and `Parameter`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ...dtypes import default_float
from ...eager.grad_mode import no_grad
from ...eager.internal import array_of, bump_version, init_tensor, set_array, set_grad
from ...eager.tensor import Tensor, rng
from ...modes import current_trace
from ...ops.complex import ComplexTensor
from ...ops.mixin import TensorOps
from ..changes import CountedTable, changed
from ..hooks import (
    GLOBAL,
    REGISTRATION,
    ModuleHooks,
    RemovableHandle,
    add_registration_hook,
    registered,
    with_global,
)

__all__ = ["Buffer", "Module", "Parameter"]


class Parameter(Tensor):
    """A tensor that a `Module` registers as a parameter; requires grad by default."""

    __slots__ = ()

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Any:
        if isinstance(data, ComplexTensor):
            storage = Parameter(array_of(data.detach()._storage()).copy(), requires_grad)
            return ComplexParameter(storage)
        return super().__new__(cls)

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            arr = np.zeros((0,), default_float())
        elif isinstance(data, Tensor):
            arr = array_of(data)
        else:
            arr = np.asarray(data)
        init_tensor(self, arr, False, None)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


class ComplexParameter(ComplexTensor):
    """A complex parameter (``nn.Parameter`` of a complex tensor). A module registers its
    real ``(*shape, 2)`` storage, a `Parameter`: optimizers step it and ``state_dict``
    holds it, as PyTorch's optimizers step complex parameters through ``view_as_real``;
    reading the attribute gives the complex tensor around it. User code sees an
    `nn.Parameter` (``isinstance(p, nn.Parameter)``), as in PyTorch."""

    __slots__ = ()
    public_class = Parameter


class Buffer(Tensor):
    """A tensor that a `Module` registers as a buffer when assigned as an attribute
    (``self.mask = nn.Buffer(dg.ones(3))``), ``persistent`` as in `register_buffer`."""

    __slots__ = ("persistent",)

    def __init__(self, data: Any = None, *, persistent: bool = True) -> None:
        if data is None:
            arr = np.zeros((0,), default_float())
        elif isinstance(data, Tensor):
            arr = array_of(data)
        else:
            arr = np.asarray(data)
        init_tensor(self, arr, False, None)
        self.persistent = persistent


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _note_table(m: "Module") -> None:
    """A container's submodules are listed or indexed: while `dg.compile` traces, its
    table (which module sits where) is guarded, so ``net[2] = Linear(...)`` retraces."""
    trace = current_trace()
    if trace is not None:
        trace.note_module(m)


def _persistent_buffers(m: "Module") -> list:
    """``m``'s buffers that a state dict holds. Read while a call is traced, which they
    are is guarded: ``register_buffer(name, t, persistent=False)`` with the same tensor
    changes no table a compiled call otherwise checks."""
    trace = current_trace()
    if trace is not None:
        trace.guard_value(lambda: frozenset(m._non_persistent_buffers),
                          frozenset(m._non_persistent_buffers),
                          f"the non-persistent buffers of a {type(m).__name__} changed", m)
    return [(k, b) for k, b in m._buffers.items() if k not in m._non_persistent_buffers]


class Module:
    """Base class of layers and models: parameters and submodules are found by attribute."""

    def __init__(self) -> None:
        # Counted tables: a compiled call checks its guards on them only when a write
        # moved the change counter (`nn.changes`).
        object.__setattr__(self, "_parameters", CountedTable())
        object.__setattr__(self, "_buffers", CountedTable())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_modules", CountedTable())
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
        changed()

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            _set_attr(self, name, value)
        finally:
            # Counted even when the write raised part way (a table may have changed).
            changed()

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if name in d.get("_parameters", {}):
            value = d["_parameters"][name]
            if name in d.get("_complex_parameters", ()):
                trace = current_trace()
                if trace is not None:  # the storage's identity is what is guarded
                    trace.note_attr(self, name, value)
                return ComplexParameter(value)
        elif name in d.get("_buffers", {}):
            value = d["_buffers"][name]
        elif name in d.get("_modules", {}):
            value = d["_modules"][name]
        else:
            trace = current_trace()
            if trace is not None:  # its absence is read (hasattr): the trace guards it
                trace.note_missing(self, name)
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
            changed()

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
        if REGISTRATION["buffer"]:
            tensor = registered("buffer", self, name, tensor)
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

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile this module's ``forward`` in place, as ``torch.nn.Module.compile``:
        later calls run it through `dg.compile` (whose keywords are accepted, ``mode=`` and
        ``fullgraph=`` included); hooks still run around it, and parameter updates are
        seen without a retrace. ``model.compile()``"""
        compiler = COMPILE[0]
        if compiler is None:
            raise RuntimeError("Module.compile: the compiler is not loaded (import dualgraph)")
        forward = type(self).forward.__get__(self)
        self.__dict__["forward"] = compiler(forward, *args, **kwargs)

    def set_submodule(self, target: str, module: "Module", strict: bool = False) -> None:
        """Put ``module`` at the dotted path ``target``, whose parent must exist (and, with
        ``strict``, the name too)."""
        path, _, name = target.rpartition(".")
        parent = self.get_submodule(path)
        if strict and name not in parent._modules:
            raise AttributeError(f"{type(parent).__name__} has no attribute `{name}`")
        if not isinstance(module, Module):
            raise TypeError(f"`module` is not an nn.Module, found {type(module).__name__}")
        setattr(parent, name, module)

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
        if hooks or GLOBAL.any:
            return with_global(hooks).call(self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ hooks
    def _hook_table(self) -> ModuleHooks:
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = self.__dict__["_hooks"] = ModuleHooks()
            changed()
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

    def register_backward_hook(self, hook: Any) -> RemovableHandle:
        """PyTorch's older module backward hook, ``hook(module, grad_input, grad_output)``:
        run as `register_full_backward_hook` (the gradients of the module's tensor inputs,
        which is what the older hook was meant to give)."""
        return self.register_full_backward_hook(hook)

    def register_full_backward_pre_hook(self, hook: Any,
                                        prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients of the module's outputs are
        known; a tuple it returns replaces them."""
        return self._hook_table().add("backward_pre", hook, prepend)

    # ----------------------------------------------------------------- traversal
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """This module and every submodule, with its dotted name; a module held in two
        places comes once (under its first name) unless ``remove_duplicate=False``."""
        if remove_duplicate:
            if memo is None:
                memo = set()
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

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

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """Each buffer with its dotted name (a buffer held in two places comes once unless
        ``remove_duplicate=False``)."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

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
        from ...dtypes import to_target

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

    def type(self, dst_type: Any) -> "Module":
        """Cast the floating-point parameters and buffers to ``dst_type``."""
        from ...dtypes import as_dtype

        return self._cast(as_dtype(dst_type))

    def to_empty(self, *, device: Any = None, recurse: bool = True) -> "Module":
        """The module itself: its parameters already have storage on the CPU."""
        from ...dtypes import check_device

        check_device(device, "Module.to_empty()")
        return self

    def share_memory(self) -> "Module":
        """Move every parameter and buffer into shared memory (``Tensor.share_memory_``):
        processes forked afterwards (Hogwild training) update the same weights."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.share_memory_()
        return self

    def cpu(self) -> "Module":
        """The module itself: dualgraph keeps everything on the CPU."""
        return self

    def cuda(self, device: Any = None) -> "Module":
        """Raises `RuntimeError`: there is no CUDA device (dualgraph runs on the CPU)."""
        from ...dtypes import check_device

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

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Each parameter with its dotted name; a parameter held in two places (tied
        weights) comes once unless ``remove_duplicate=False``."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def _named_members(self, table: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        """The tensors of each module's ``table`` (``_parameters`` or ``_buffers``) with
        their dotted names, a tensor held in two places once unless not
        ``remove_duplicate``."""
        seen: set[int] = set()
        mods = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                if recurse else [(prefix, self)])
        for mp, m in mods:
            for name, t in getattr(m, table).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{mp}.{name}" if mp else name), t

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
        for mp, m in self.named_modules(remove_duplicate=False):
            items = list(m._parameters.items()) + _persistent_buffers(m)
            for name, t in items:
                if t is not None:
                    yield (f"{mp}.{name}" if mp else name), t

    def state_dict(self, *args: Any, destination: Any = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Name -> tensor sharing the data of each parameter and persistent buffer
        (detached unless ``keep_vars``), each name after ``prefix``; a module that defines
        ``get_extra_state`` adds its ``_extra_state`` entry. State-dict hooks run as
        PyTorch's: pre hooks ``hook(module, prefix, keep_vars)`` before, post hooks
        ``hook(module, state_dict, prefix, local_metadata)`` after."""
        if args:  # PyTorch's old positional form: state_dict(destination, prefix, keep_vars)
            destination, prefix, keep_vars = (list(args) + [destination, prefix, keep_vars][
                len(args):])[:3]
        out = OrderedDict() if destination is None else destination
        if not hasattr(out, "_metadata"):
            try:
                out._metadata = OrderedDict()  # type: ignore[attr-defined]
            except AttributeError:  # a plain dict given as destination
                pass
        mods = list(self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False))
        for mp, m in mods:
            for hook in _state_hooks(m, "state_dict_pre"):
                hook(m, f"{mp}." if mp else "", keep_vars)
        # PyTorch's order: per module, its parameters, persistent buffers, extra state.
        for mp, m in mods:
            at = f"{mp}." if mp else ""
            items = list(m._parameters.items()) + _persistent_buffers(m)
            complex_names = m.__dict__.get("_complex_parameters", ())
            for name, t in items:
                if t is None:
                    continue
                if name in complex_names:  # the complex tensor, as PyTorch's entry is
                    out[at + name] = ComplexParameter(t) if keep_vars else ComplexTensor(
                        t.detach())
                else:
                    out[at + name] = t if keep_vars else t.detach()
            if type(m).get_extra_state is not Module.get_extra_state:
                out[at + "_extra_state"] = m.get_extra_state()
        for mp, m in mods:
            for hook, legacy in _state_hooks(m, "state_dict_post"):
                r = hook(m, out, f"{mp}." if mp else "", {})
                if legacy and r is not None:
                    out = r
        return out

    def get_extra_state(self) -> Any:
        """Extra state for `state_dict`: override (with `set_extra_state`) to save
        something that is not a parameter or buffer."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should "
                           "never be called.")

    def set_extra_state(self, state: Any) -> None:
        """Restore what `get_extra_state` returned (called by `load_state_dict`)."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should "
                           "never be called.")

    def register_state_dict_pre_hook(self, hook: Any) -> RemovableHandle:
        """``hook(module, prefix, keep_vars)`` runs before `state_dict` collects."""
        return _add_state_hook(self, "state_dict_pre", hook)

    def register_state_dict_post_hook(self, hook: Any) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata)`` runs after `state_dict`
        collected; it may change the dict in place."""
        return _add_state_hook(self, "state_dict_post", (hook, False))

    def _register_state_dict_hook(self, hook: Any) -> RemovableHandle:
        # PyTorch's older post hook: a dict it returns replaces the state dict.
        return _add_state_hook(self, "state_dict_post", (hook, True))

    def register_load_state_dict_pre_hook(self, hook: Any) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs before `load_state_dict` reads this module's
        entries; it may rename or drop keys of ``state_dict`` in place."""
        return _add_state_hook(self, "load_pre", (hook, True))

    def _register_load_state_dict_pre_hook(self, hook: Any,
                                           with_module: bool = False) -> RemovableHandle:
        # PyTorch's older form: ``hook(state_dict, prefix, ...)`` unless ``with_module``.
        return _add_state_hook(self, "load_pre", (hook, with_module))

    def register_load_state_dict_post_hook(self, hook: Any) -> RemovableHandle:
        """``hook(module, incompatible_keys)`` runs after `load_state_dict` wrote the
        values; it may remove entries from ``incompatible_keys.missing_keys`` and
        ``.unexpected_keys`` before ``strict`` judges them."""
        return _add_state_hook(self, "load_post", hook)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        """PyTorch's per-module step of `load_state_dict`, which a subclass may override to
        rewrite its entries of ``state_dict`` (old key names, other layouts) before they
        load, or to add to ``error_msgs``. It runs for each module after its load pre-hooks;
        the tensors of every module are then loaded together from the state dict as
        these calls left it, so this base version has nothing to do."""

    def load_state_dict(self, state_dict: Any, strict: bool = True,
                        assign: bool = False) -> "IncompatibleKeys":
        """Copy parameters and persistent buffers in (with ``assign``, take the given
        tensors' data, dtype included, instead). Every shape is checked before anything
        is written; then load-state-dict post hooks run, and with ``strict`` any missing
        or unexpected key left raises, and the module keeps its old values. Returns
        ``(missing_keys, unexpected_keys)``."""
        state_dict = OrderedDict(state_dict)
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []
        mods = list(self.named_modules(remove_duplicate=False))
        extra = {}
        for mp, m in mods:
            prefix = f"{mp}." if mp else ""
            args = (state_dict, prefix, {}, strict, missing, unexpected, errors)
            for hook, with_module in _state_hooks(m, "load_pre"):
                hook(m, *args) if with_module else hook(*args)
            if type(m)._load_from_state_dict is not Module._load_from_state_dict:
                m._load_from_state_dict(*args)
            if type(m).set_extra_state is not Module.set_extra_state:
                key = prefix + "_extra_state"
                if key in state_dict:
                    extra[key] = m
                elif strict:
                    missing.append(key)
        own = dict(self._state_items())
        missing += [k for k in own if k not in state_dict]
        unexpected += [k for k in state_dict if k not in own and k not in extra]
        values = {}
        for k, p in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            if isinstance(v, ComplexTensor):  # into the parameter's real storage
                v = v.detach()._storage()
            arr = array_of(v) if isinstance(v, Tensor) else np.asarray(v)
            if arr.shape != p.shape:
                errors.append(
                    f"size mismatch for {k}: copying a param with shape {tuple(arr.shape)} from "
                    f"checkpoint, the shape in current model is {tuple(p.shape)}."
                )
            values[k] = arr
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        # A strict load that fails changes nothing: when keys are off, the old values are
        # kept until the post hooks have had their say.
        undo = ({k: (array_of(own[k]) if assign else array_of(own[k]).copy()) for k in values}
                if strict and (missing or unexpected) else None)
        with no_grad():
            for k, arr in values.items():
                if assign:
                    set_array(own[k], arr)
                    bump_version(own[k])
                else:
                    own[k].copy_(Tensor(arr))
        for key, m in extra.items():
            m.set_extra_state(state_dict[key])
        result = IncompatibleKeys(missing, unexpected)
        for _, m in mods:
            for hook in _state_hooks(m, "load_post"):
                if hook(m, result) is not None:
                    raise RuntimeError("Hooks registered with "
                                       "``register_load_state_dict_post_hook`` are not "
                                       "expected to return new values.")
        if strict and (result.unexpected_keys or result.missing_keys):
            with no_grad():
                for k, arr in (undo or {}).items():
                    if assign:
                        set_array(own[k], arr)
                        bump_version(own[k])
                    else:
                        own[k].copy_(Tensor(arr))
            msgs = []
            if result.missing_keys:
                keys = ", ".join(f'"{k}"' for k in result.missing_keys)
                msgs.append(f"Missing key(s) in state_dict: {keys}. ")
            if result.unexpected_keys:
                keys = ", ".join(f'"{k}"' for k in result.unexpected_keys)
                msgs.append(f"Unexpected key(s) in state_dict: {keys}. ")
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:"
                               "\n\t" + "\n\t".join(msgs))
        return result

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


def _set_attr(self: Module, name: str, value: Any) -> None:
    """`Module.__setattr__`'s write: a parameter, buffer or submodule into its table,
    anything else into the instance."""
    if "_parameters" not in self.__dict__:
        # PyTorch's rule: plain attributes may be set before ``Module.__init__`` (a
        # ``self.dim = dim`` first line); parameters, buffers and submodules may not.
        if not isinstance(value, (Parameter, Module, Buffer)):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(
            "cannot assign attributes before Module.__init__() call "
            "(call super().__init__() first)"
        )
    params, modules = self.__dict__["_parameters"], self.__dict__["_modules"]
    buffers = self.__dict__["_buffers"]
    if isinstance(value, Buffer):
        self.__dict__.pop(name, None)
        params.pop(name, None)
        modules.pop(name, None)
        self.register_buffer(name, value, value.persistent)
        return
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
        buffers[name] = (registered("buffer", self, name, value)
                         if REGISTRATION["buffer"] else value)
        return
    # PyTorch's rule: a registered parameter or submodule name takes only its own kind
    # (or None); `lin.weight = 5` would otherwise be accepted and fail much later.
    if (name in params and value is not None
            and not isinstance(value, (Parameter, ComplexParameter))):
        raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                        "(dg.nn.Parameter or None expected)")
    if name in modules and value is not None and not isinstance(value, Module):
        raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                        "(dg.nn.Module or None expected)")
    # A parameter or submodule assigned again keeps its place in the order (PyTorch's
    # dict assignment), which `parameters()` and `state_dict()` follow.
    self.__dict__.pop(name, None)
    # The complex-parameter table exists only once a complex parameter is set, so a plain
    # attribute write (also one inside a compiled call) adds no attribute to the module.
    complex_names = self.__dict__.get("_complex_parameters")
    if complex_names:
        complex_names.discard(name)
    if isinstance(value, ComplexParameter):
        self.__dict__.setdefault("_complex_parameters", set()).add(name)
        value = value._ri
    if isinstance(value, Parameter):
        if REGISTRATION["parameter"]:
            value = registered("parameter", self, name, value)
        modules.pop(name, None)
        params[name] = value
    elif isinstance(value, Module):
        if REGISTRATION["module"]:
            value = registered("module", self, name, value)
        params.pop(name, None)
        modules[name] = value
    else:
        params.pop(name, None)
        modules.pop(name, None)
        object.__setattr__(self, name, value)


# `dg.compile`, put here when the compiler is imported: nn sits below it and cannot import
# it (`Module.compile` reads this).
COMPILE: list[Callable[..., Any] | None] = [None]


class IncompatibleKeys(NamedTuple):
    """What `Module.load_state_dict` returns: the keys it did not find, and the keys it
    did not use."""

    missing_keys: list
    unexpected_keys: list

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")

    __str__ = __repr__


def _state_hooks(module: Module, kind: str) -> list:
    return list(module.__dict__.get("_state_dict_hooks", {}).get(kind, {}).values())


def _add_state_hook(module: Module, kind: str, entry: Any) -> RemovableHandle:
    # Kept apart from the forward hooks: a compiled call guards those, never these.
    table = module.__dict__.setdefault("_state_dict_hooks", {})
    hooks = table.setdefault(kind, {})
    handle = RemovableHandle(hooks)
    hooks[handle.id] = entry
    return handle


def _uniform(shape: tuple, bound: float) -> np.ndarray:
    return rng().uniform(-bound, bound, size=shape).astype(default_float())


def accepts_device_dtype(cls: type) -> type:
    """Give layer class ``cls`` PyTorch's ``device=`` and ``dtype=`` constructor keywords
    (``nn.Conv2d(3, 8, 3, device=device, dtype=torch.float64)``): the device must be the
    CPU, and the floating-point parameters and buffers are made in ``dtype``."""
    init = cls.__init__

    def init_on(self: Module, *args: Any, device: Any = None, dtype: Any = None,
                **kwargs: Any) -> None:
        from ...dtypes import as_dtype, check_device

        check_device(device, f"{cls.__name__}()")
        init(self, *args, **kwargs)
        if dtype is not None:
            self._cast(as_dtype(dtype))

    init_on.__doc__ = init.__doc__
    init_on.__wrapped__ = init  # type: ignore[attr-defined]
    cls.__init__ = init_on
    return cls


# ------------------------------------------------------------------ global hooks
def register_module_forward_pre_hook(hook: Any) -> RemovableHandle:
    """``hook(module, args)`` runs before every module's ``forward``, before the module's
    own pre-hooks; it may return new arguments."""
    return GLOBAL.add("forward_pre", hook, False)


def register_module_forward_hook(hook: Any, *, with_kwargs: bool = False,
                                 always_call: bool = False) -> RemovableHandle:
    """``hook(module, args, output)`` runs after every module's ``forward``, before the
    module's own forward hooks; it may return a new output."""
    flags = [f for f, on in (("with_kwargs", with_kwargs), ("always_call", always_call)) if on]
    return GLOBAL.add("forward", hook, False, *flags)


def register_module_full_backward_hook(hook: Any) -> RemovableHandle:
    """``hook(module, grad_input, grad_output)`` runs for every module's backward, before
    the module's own backward hooks."""
    return GLOBAL.add("backward", hook, False)


def register_module_backward_hook(hook: Any) -> RemovableHandle:
    """PyTorch's older global backward hook: run as `register_module_full_backward_hook`."""
    return register_module_full_backward_hook(hook)


def register_module_full_backward_pre_hook(hook: Any) -> RemovableHandle:
    """``hook(module, grad_output)`` runs for every module when its output gradients are
    known, before the module's own backward pre-hooks."""
    return GLOBAL.add("backward_pre", hook, False)


def register_module_module_registration_hook(hook: Any) -> RemovableHandle:
    """``hook(module, name, submodule)`` runs whenever a module registers a submodule; a
    result that is not None is registered instead."""
    return add_registration_hook("module", hook)


def register_module_parameter_registration_hook(hook: Any) -> RemovableHandle:
    """``hook(module, name, param)`` runs whenever a module registers a parameter; a
    result that is not None is registered instead."""
    return add_registration_hook("parameter", hook)


def register_module_buffer_registration_hook(hook: Any) -> RemovableHandle:
    """``hook(module, name, buffer)`` runs whenever a module registers or assigns a
    buffer; a result that is not None is registered instead."""
    return add_registration_hook("buffer", hook)
