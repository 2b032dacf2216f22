"""`dg.nn.init`: PyTorch's parameter initialisations, with its formulas.

Each function fills a tensor in place (under `no_grad`, so parameters can be passed) and
returns it. Draws come from ``generator`` (a `dg.Generator`) or dualgraph's default
generator: the distributions and bounds are PyTorch's, the individual numbers are not
(the generators differ).

>>> w = dg.nn.init.kaiming_uniform_(dg.empty(4, 8), a=5 ** 0.5)
>>> bool((w.abs() <= 8 ** -0.5).all())
True
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor, numpy_generator, tensor

__all__ = [
    "calculate_gain", "constant_", "dirac_", "eye_", "kaiming_normal_", "kaiming_uniform_",
    "normal_", "ones_", "orthogonal_", "sparse_", "trunc_normal_", "uniform_",
    "xavier_normal_", "xavier_uniform_", "zeros_",
]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity: 1 for linear layers and sigmoid, 5/3 for
    tanh, sqrt(2) for relu, sqrt(2 / (1 + slope ** 2)) for leaky_relu (slope ``param``,
    0.01 by default), 3/4 for selu.

    >>> dg.nn.init.calculate_gain("tanh")
    1.6666666666666667
    """
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(t: Any) -> tuple[int, int]:
    shape = tuple(t.shape)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _calculate_fan_in_and_fan_out(tensor: Any) -> tuple[int, int]:  # noqa: A002
    """``(fan_in, fan_out)`` of a weight, as PyTorch's helper of that name (custom layers'
    ``reset_parameters`` call it)."""
    return _fans(tensor)


def _calculate_correct_fan(tensor: Any, mode: str) -> int:  # noqa: A002
    """The fan ``mode`` (``"fan_in"`` or ``"fan_out"``) names."""
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _fill(t: Tensor, values: np.ndarray) -> Tensor:
    with no_grad():
        t.copy_(tensor(np.asarray(values).astype(t.dtype)))
    return t


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0,  # noqa: A002
             generator: Any = None) -> Tensor:
    """Samples from U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,  # noqa: A002
            generator: Any = None) -> Tensor:
    """Samples from N(mean, std ** 2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0,  # noqa: A002
                  a: float = -2.0, b: float = 2.0, generator: Any = None) -> Tensor:
    """Samples from N(mean, std ** 2) restricted to ``[a, b]`` (draws outside are drawn
    again, which gives exactly the truncated distribution)."""
    if b < a:
        raise ValueError(f"trunc_normal_: a ({a}) must not exceed b ({b})")
    gen = numpy_generator(generator)
    n = math.prod(tensor.shape)
    out = np.empty(n)
    todo = np.arange(n)
    for _ in range(1000):
        if not todo.size:
            break
        draw = gen.normal(mean, std, todo.size)
        ok = (draw >= a) & (draw <= b)
        out[todo[ok]] = draw[ok]
        todo = todo[~ok]
    else:
        raise ValueError(f"trunc_normal_: [{a}, {b}] holds almost none of N({mean}, {std}**2)")
    return _fill(tensor, out.reshape(tensor.shape))


def constant_(tensor: Tensor, val: float) -> Tensor:  # noqa: A002
    """Every element ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:  # noqa: A002
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:  # noqa: A002
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:  # noqa: A002
    """The identity matrix (2-D tensors only)."""
    if len(tensor.shape) != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:  # noqa: A002
    """The Dirac delta for 3-, 4- and 5-D (convolution) weights: the convolution keeps
    its input's channels (per group)."""
    shape = tuple(tensor.shape)
    if len(shape) not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = shape[0] // groups
    w = np.zeros(shape)
    centre = tuple(k // 2 for k in shape[2:])
    for g in range(groups):
        for d in range(min(out_per_group, shape[1])):
            w[(g * out_per_group + d, d) + centre] = 1.0
    return _fill(tensor, w)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0,  # noqa: A002
                    generator: Any = None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot and Bengio)."""
    fan_in, fan_out = _fans(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0,  # noqa: A002
                   generator: Any = None) -> Tensor:
    """N(0, std ** 2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",  # noqa: A002
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)`` (He et al.); ``a`` is the
    leaky_relu slope, ``mode`` picks fan_in or fan_out."""
    if 0 in tuple(tensor.shape):
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",  # noqa: A002
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Tensor:
    """N(0, std ** 2) with ``std = gain / sqrt(fan)`` (see `kaiming_uniform_`)."""
    if 0 in tuple(tensor.shape):
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:  # noqa: A002
    """A (semi-)orthogonal matrix times ``gain``, from the QR decomposition of a normal
    matrix (Saxe et al.); dims after the first are flattened."""
    shape = tuple(tensor.shape)
    if len(shape) < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if 0 in shape:
        return tensor
    rows, cols = shape[0], math.prod(shape[1:])
    flat = numpy_generator(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))  # the sign fix makes the distribution uniform (Haar)
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(shape))


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01,  # noqa: A002
            generator: Any = None) -> Tensor:
    """A sparse 2-D matrix (Martens, 2010): every column has ``ceil(sparsity * rows)``
    zeros at random rows, the other entries drawn from N(0, std ** 2)."""
    shape = tuple(tensor.shape)
    if len(shape) != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = shape
    gen = numpy_generator(generator)
    values = gen.normal(0.0, std, shape)
    zeros = int(math.ceil(sparsity * rows))
    for c in range(cols):
        values[gen.permutation(rows)[:zeros], c] = 0.0
    return _fill(tensor, values)


def _deprecated(fn: Any) -> Any:
    """PyTorch's old spelling without the trailing underscore (``init.normal``), which
    warns and then initialises in place as the new one."""
    new = fn.__name__

    def old(*args: Any, **kwargs: Any) -> Any:
        warnings.warn(f"nn.init.{new[:-1]} is now deprecated in favor of nn.init.{new}.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)

    old.__name__ = new[:-1]
    old.__doc__ = f"Deprecated: `{new}`."
    return old


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
