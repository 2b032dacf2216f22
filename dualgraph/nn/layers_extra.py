"""More of `torch.nn`'s layers, each a composition of `functional` calls: the padding
modules (`ZeroPad2d`, `ReflectionPad2d`, ... in 1, 2 and 3 dims), channel dropout
(`Dropout1d/2d/3d`), `PReLU`, the shrinking activations (`Threshold`, `Hardshrink`,
`Softshrink`, `Tanhshrink`), `ConvTranspose1d`, and the parameter containers
(`ParameterList`, `ParameterDict`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from . import functional as F
from .modules import ConvTranspose2d, Module, Parameter, _note_table

# ------------------------------------------------------------------------ padding


def _pairs(padding: Any, dims: int, name: str) -> tuple:
    """PyTorch's padding argument: one int for every side, or ``2 * dims`` ints."""
    if isinstance(padding, (int, np.integer)):
        return (int(padding),) * (2 * dims)
    pads = tuple(int(p) for p in padding)
    if len(pads) != 2 * dims:
        raise ValueError(f"{name}: padding must be an int or a {2 * dims}-tuple, got {padding}")
    return pads


class _PadNd(Module):
    _mode = "constant"
    _dims = 1

    def __init__(self, padding: Any, value: float = 0.0) -> None:
        super().__init__()
        self.padding = _pairs(padding, self._dims, type(self).__name__)
        self.value = value

    def forward(self, x: Any) -> Any:
        if self._mode == "constant":
            return F.pad(x, self.padding, "constant", self.value)
        return F.pad(x, self.padding, self._mode)

    def extra_repr(self) -> str:
        if self._mode == "constant" and type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"


def _pad_class(name: str, mode: str, dims: int, zero: bool = False) -> type:
    doc = f"`F.pad` of the last {dims} dim(s), mode ``{mode}``. ``nn.{name}(1)``"
    if zero:
        def __init__(self: Any, padding: Any) -> None:  # noqa: N807 - a method
            _PadNd.__init__(self, padding, 0.0)
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc, "__init__": __init__}
    elif mode == "constant":
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc}
    else:
        def __init__(self: Any, padding: Any) -> None:  # noqa: N807 - a method
            _PadNd.__init__(self, padding)
        attrs = {"_mode": mode, "_dims": dims, "__doc__": doc, "__init__": __init__}
    return type(name, (_PadNd,), {"__module__": __name__, **attrs})


ZeroPad1d = _pad_class("ZeroPad1d", "constant", 1, zero=True)
ZeroPad2d = _pad_class("ZeroPad2d", "constant", 2, zero=True)
ZeroPad3d = _pad_class("ZeroPad3d", "constant", 3, zero=True)
ConstantPad1d = _pad_class("ConstantPad1d", "constant", 1)
ConstantPad2d = _pad_class("ConstantPad2d", "constant", 2)
ConstantPad3d = _pad_class("ConstantPad3d", "constant", 3)
ReflectionPad1d = _pad_class("ReflectionPad1d", "reflect", 1)
ReflectionPad2d = _pad_class("ReflectionPad2d", "reflect", 2)
ReflectionPad3d = _pad_class("ReflectionPad3d", "reflect", 3)
ReplicationPad1d = _pad_class("ReplicationPad1d", "replicate", 1)
ReplicationPad2d = _pad_class("ReplicationPad2d", "replicate", 2)
ReplicationPad3d = _pad_class("ReplicationPad3d", "replicate", 3)
CircularPad1d = _pad_class("CircularPad1d", "circular", 1)
CircularPad2d = _pad_class("CircularPad2d", "circular", 2)
CircularPad3d = _pad_class("CircularPad3d", "circular", 3)


# --------------------------------------------------------------- channel dropout


class _DropoutNd(Module):
    _fn = ""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = float(p), inplace

    def forward(self, x: Any) -> Any:
        return getattr(F, self._fn)(x, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """`dropout1d` in training mode, the identity in eval mode. ``nn.Dropout1d(0.2)``"""

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """`dropout2d` in training mode, the identity in eval mode. ``nn.Dropout2d(0.25)``"""

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """`dropout3d` in training mode, the identity in eval mode."""

    _fn = "dropout3d"


# -------------------------------------------------------------------- activations


class PReLU(Module):
    """``PReLU(num_parameters=1, init=0.25)``: a learned negative slope, one or one per
    channel."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        dt = np.float32 if dtype is None else np.dtype(dtype)
        self.weight = Parameter(np.full((num_parameters,), init, dt))

    def forward(self, x: Any) -> Any:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Threshold(Module):
    """`threshold` as a module. ``nn.Threshold(0.1, 20.0)``"""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, x: Any) -> Any:
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}"


class Hardshrink(Module):
    """`hardshrink` as a module."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, x: Any) -> Any:
        return F.hardshrink(x, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """`softshrink` as a module."""

    def forward(self, x: Any) -> Any:
        return F.softshrink(x, self.lambd)


class Tanhshrink(Module):
    """`tanhshrink` as a module."""

    def forward(self, x: Any) -> Any:
        return F.tanhshrink(x)


# ------------------------------------------------------------ transposed 1-D conv


class ConvTranspose1d(ConvTranspose2d):
    """``ConvTranspose1d(in_channels, out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1)``: weight (in, out/groups, k)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any,
                 stride: Any = 1, padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                 bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None) -> None:
        def one(v: Any) -> int:
            return int(v[0] if isinstance(v, (tuple, list)) else v)

        super().__init__(in_channels, out_channels, (1, one(kernel_size)), (1, one(stride)),
                         (0, one(padding)), (0, one(output_padding)), groups, bias,
                         (1, one(dilation)), padding_mode)
        w = self.weight.numpy()
        dt = w.dtype if dtype is None else np.dtype(dtype)
        self.weight = Parameter(w.reshape(w.shape[:2] + (w.shape[3],)).astype(dt))
        if self.bias is not None:
            self.bias = Parameter(self.bias.numpy().astype(dt))
        self.kernel_size, self.stride = (one(kernel_size),), (one(stride),)
        self.padding, self.output_padding = (one(padding),), (one(output_padding),)
        self.dilation = (one(dilation),)

    def forward(self, x: Any, output_size: Any = None) -> Any:
        opad = self.output_padding
        if output_size is not None:
            low = ((x.shape[-1] - 1) * self.stride[0] - 2 * self.padding[0]
                   + self.dilation[0] * (self.kernel_size[0] - 1) + 1)
            wanted = int(tuple(output_size)[-1])
            if not low <= wanted < low + self.stride[0]:
                raise ValueError(f"requested an output size of {[wanted]}, but valid sizes "
                                 f"range from {low} to {low + self.stride[0] - 1} (for an "
                                 f"input of {[x.shape[-1]]})")
            opad = (wanted - low,)
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding, opad,
                                  self.groups, self.dilation)


# -------------------------------------------------------------- parameter containers


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


__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d",
    "ConstantPad3d", "ConvTranspose1d", "Dropout1d", "Dropout2d", "Dropout3d", "Hardshrink",
    "PReLU", "ParameterDict", "ParameterList", "ReflectionPad1d", "ReflectionPad2d",
    "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
    "Softshrink", "Tanhshrink", "Threshold", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


class EmbeddingBag(Module):
    """``EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
    include_last_offset=False, padding_idx=None)``: `F.embedding_bag` over a weight
    initialised N(0, 1); ``forward(input, offsets=None, per_sample_weights=None)``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Any = None, include_last_offset: bool = False,
                 padding_idx: int | None = None, device: Any = None, dtype: Any = None) -> None:
        from ..eager.tensor import rng

        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("EmbeddingBag: max_norm, scale_grad_by_freq and sparse "
                                      "gradients are not supported")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode, self.include_last_offset = mode, include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        dt = np.dtype(np.float32) if dtype is None else np.dtype(dtype)
        if _weight is None:
            w = rng().standard_normal((num_embeddings, embedding_dim)).astype(dt)
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = np.array(_weight.numpy() if hasattr(_weight, "numpy") else _weight)
        self.weight = Parameter(w)

    def forward(self, input: Any, offsets: Any = None,  # noqa: A002
                per_sample_weights: Any = None) -> Any:
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'{pad}"


__all__ += ["EmbeddingBag"]
