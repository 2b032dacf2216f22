"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

from .module import Module, Parameter, _note_table

__all__ = ["ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]


class _ModuleSequence(Module):
    """What `Sequential` and `ModuleList` share, as PyTorch's do: submodules in order,
    indexed by position (negative too) or slice, counted, iterated and appended to."""

    def _key(self, i: Any) -> str:
        n = len(self._modules)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{type(self).__name__} indices must be integers or slices, "
                            f"not {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range")
        return list(self._modules)[i % n]

    def _sliced(self, items: list) -> Module:
        """A new container of ``items``, ``(name, module)`` pairs, for ``self[a:b]``."""
        raise NotImplementedError

    def _renumber(self, modules: list) -> None:
        """Hold ``modules`` under the keys ``"0"``, ``"1"``, ... (PyTorch renumbers)."""
        self._modules.clear()
        for k, m in enumerate(modules):
            self.add_module(str(k), m)

    def __getitem__(self, i: Any) -> Any:
        _note_table(self)
        if isinstance(i, slice):
            return self._sliced(list(self._modules.items())[i])
        return self._modules[self._key(i)]

    def __setitem__(self, i: int, module: Module) -> None:
        setattr(self, self._key(i), module)

    def __len__(self) -> int:
        _note_table(self)
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        _note_table(self)
        return iter(self._modules.values())

    def append(self, module: Module) -> Any:
        # Not len(self): a list built while a trace runs (``self.convs[:-1]``) must not have
        # its table guarded half built.
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Any) -> Any:
        for m in modules:
            self.append(m)
        return self


class Sequential(_ModuleSequence):
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

    def _sliced(self, items: list) -> Module:
        return type(self)(OrderedDict(items))  # keeps the names

    def __delitem__(self, i: Any) -> None:
        keys = list(self._modules)[i] if isinstance(i, slice) else [self._key(i)]
        for k in keys:
            del self._modules[k]

    def insert(self, index: int, module: Module) -> "Sequential":
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        items = list(self._modules.values())
        items.insert(index % (n + 1), module)
        self._renumber(items)
        return self


class ModuleList(_ModuleSequence):
    """A list of submodules, registered so their parameters are found; has no forward.

    >>> layers = dg.nn.ModuleList([dg.nn.Linear(4, 4) for _ in range(3)])
    """

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _sliced(self, items: list) -> Module:
        return ModuleList([m for _, m in items])

    def __delitem__(self, i: Any) -> None:
        items = list(self._modules.values())
        del items[i if isinstance(i, slice) else int(self._key(i))]
        self._renumber(items)

    def __iadd__(self, modules: Any) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: "ModuleList") -> "ModuleList":
        return ModuleList([*self, *other])

    def extend(self, modules: Any) -> "ModuleList":
        if isinstance(modules, Module) and not isinstance(modules, _ModuleSequence):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        return super().extend(modules)

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)

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


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... so that
    ``parameters()`` and ``state_dict()`` find them. Tensors are wrapped as parameters.

    >>> ps = dg.nn.ParameterList([dg.nn.Parameter(dg.ones(2)) for _ in range(3)])
    """

    def __init__(self, values: Any = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _key(self, i: Any) -> str:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"ParameterList indices must be integers or slices, not "
                            f"{type(i).__name__}")
        if not -self._size <= i < self._size:
            raise IndexError(f"index {i} is out of range")
        return str(i % self._size)

    def __getitem__(self, i: Any) -> Any:
        _note_table(self)
        if isinstance(i, slice):
            return ParameterList([self[k] for k in range(self._size)[i]])
        return getattr(self, self._key(i))

    def __setitem__(self, i: int, value: Any) -> None:
        setattr(self, self._key(i), _as_parameter(value))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        _note_table(self)
        return iter([getattr(self, str(k)) for k in range(self._size)])

    def __iadd__(self, values: Any) -> ParameterList:
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        self._size += 1
        setattr(self, str(self._size - 1), _as_parameter(value))
        return self

    def extend(self, values: Any) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{v.dtype} of size {tuple(v.shape)}]"
                         for k, v in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters, registered under their keys.

    >>> ps = dg.nn.ParameterDict({"scale": dg.nn.Parameter(dg.ones(2))})
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: list[str] = []
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Any:
        _note_table(self)
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._keys:
            self._keys.append(key)
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        self._keys.remove(key)
        delattr(self, key)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        _note_table(self)
        return iter(list(self._keys))

    def keys(self) -> list[str]:
        return list(self._keys)

    def values(self) -> list:
        return [self[k] for k in self._keys]

    def items(self) -> list:
        return [(k, self[k]) for k in self._keys]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._keys else default

    def pop(self, key: str) -> Any:
        value = self[key]
        del self[key]
        return value

    def update(self, parameters: Any) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): Parameter containing: [{v.dtype} of size {tuple(v.shape)}]"
                         for k, v in self.items())


def _as_parameter(value: Any) -> Any:
    """PyTorch wraps a plain tensor put into a parameter container as a parameter."""
    if value is None or isinstance(value, Parameter):
        return value
    return Parameter(value)
