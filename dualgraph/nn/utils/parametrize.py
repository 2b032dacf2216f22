"""Parametrizations, as ``torch.nn.utils.parametrize``: a module's tensor computed from
others on every read.

``register_parametrization(module, "weight", P)`` moves the parameter to
``module.parametrizations.weight.original`` (``original0``, ``original1``, ... when ``P``'s
``right_inverse`` returns several tensors) and makes ``module.weight`` a property that
returns ``P(original)``. Reading it inside ``dg.compile`` traces ``P``, so the compiled
step recomputes the weight from the parameter it updates; buffers ``P`` changes in place
(spectral norm's power-iteration vectors) are written back like any buffer.

>>> m = dg.nn.Linear(3, 3)
>>> class Symmetric(dg.nn.Module):
...     def forward(self, x):
...         return x.triu() + x.triu(1).transpose(0, 1)
>>> _ = register_parametrization(m, "weight", Symmetric())
>>> bool((m.weight == m.weight.T).all())
True
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

from ...eager.grad_mode import no_grad
from ...eager.tensor import Tensor
from ...modes import current_trace
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module, Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "transfer_parametrizations_and_params",
           "type_before_parametrizations"]

_cache_enabled = 0
_cache: dict = {}


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Inside this block each parametrized tensor is computed once, on its first read, and
    reused by later reads (a weight read at every step of a recurrent loop)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_parameter_or_buffer(module: Module, name: str, x: Tensor) -> None:
    if isinstance(x, Parameter):
        module.register_parameter(name, x)
    else:
        module.register_buffer(name, x)


def _set_data(dest: Tensor, src: Tensor) -> None:
    """``dest`` takes ``src``'s value, keeping its identity (PyTorch's ``set_``)."""
    dest.data = src.detach() if isinstance(src, Tensor) else Tensor(src)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the tensor(s) they start
    from: ``original`` (or ``original0``, ``original1``, ...)."""

    def __init__(self, modules: Sequence[Module], original: Tensor,
                 unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = tuple(original.shape), original.dtype
        new: Any = original
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if new is not original:
                with no_grad():
                    _set_data(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(t).__name__}.")
                t = t.detach()
                if isinstance(original, Parameter):
                    t = Parameter(t, original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", t)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {dtype}\nparametrized dtype: "
                                 f"{z.dtype}")
            if tuple(z.shape) != shape:
                raise ValueError("Registering a parametrization may not change the shape of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {shape}\nparametrized shape: "
                                 f"{tuple(z.shape)}")

    def right_inverse(self, value: Tensor) -> None:
        """Set the original tensor(s) so that the parametrized tensor is ``value``: each
        parametrization's ``right_inverse``, last first."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set_data(self.original, value)
                return
            if not isinstance(value, Sequence) or len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of "
                                 f"length {self.ntensors}.")
            for i, t in enumerate(value):
                _set_data(getattr(self, f"original{i}"), t)

    def forward(self) -> Tensor:
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _inject_new_class(module: Module) -> None:
    """Give ``module`` a class of its own (``ParametrizedLinear``), to hold the properties."""
    cls = module.__class__

    def getstate(self: Module) -> Any:
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict().")

    def setattr_(self: Module, name: str, value: Any) -> None:
        # ``m.weight = t`` on a parametrized tensor goes to the property (right_inverse),
        # not to Module's parameter table.
        if isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)
        else:
            cls.__setattr__(self, name, value)

    def deepcopy(self: Module, memo: dict) -> Module:
        # A copy of the instance dict, class kept (``__getstate__`` refuses pickling).
        if id(self) in memo:
            return memo[id(self)]
        replica = object.__new__(type(self))
        memo[id(self)] = replica
        object.__setattr__(replica, "__dict__", copy.deepcopy(self.__dict__, memo))
        return replica

    dct = {"__getstate__": getstate, "__setattr__": setattr_}
    if not hasattr(cls, "__deepcopy__"):
        dct["__deepcopy__"] = deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), dct)


def _inject_property(module: Module, tensor_name: str) -> None:
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        if current_trace() is not None:
            raise RuntimeError("Cannot trace a model while caching parametrizations: call "
                               "parametrize.cached() outside the compiled function's body")
        key = (id(self), tensor_name)
        t = _cache.get(key)
        if t is None:
            t = _cache[key] = parametrization()
        return t

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the result of ``parametrization`` on the original
    parameter or buffer, which moves to ``module.parametrizations.<tensor_name>.original``.
    A second registration on the same name chains after the first."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
                raise ValueError("Registering a parametrization may not change the dtype or "
                                 "shape of the tensor, unless the `unsafe` flag is enabled.\n"
                                 f"module.{tensor_name}: {tuple(y.shape)} {y.dtype}\n"
                                 f"parametrization(module.{tensor_name}): "
                                 f"{tuple(x.shape)} {x.dtype}")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, if given)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo `register_parametrization`: ``module.<tensor_name>`` becomes a parameter (or
    buffer) again, holding the parametrized value (``leave_parametrized``) or the
    original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _set_data(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a "
                             "tensor that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before parametrizations gave it one of its own."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register on ``to_module`` the parametrizations ``from_module`` has (on
    ``tensor_name``, or all), sharing them, with copies of the original tensors."""
    if not is_parametrized(from_module):
        return to_module
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    for name in names:
        src = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        for p in src:
            register_parametrization(to_module, name, p)
        dst = to_module.parametrizations[name]
        with no_grad():
            if src.is_tensor:
                _set_data(dst.original, src.original.detach().clone())
            else:
                for i in range(src.ntensors):
                    _set_data(getattr(dst, f"original{i}"),
                              getattr(src, f"original{i}").detach().clone())
    return to_module
