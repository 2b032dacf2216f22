"""PyTorch's remaining constructors: ``*_like``, ``empty``, ``eye``, ``linspace``, and the
random ones with their `Generator` (``randint``, ``randperm``, ``multinomial``,
``randn_like``, ...). Built on the eager constructors; inside a traced function the
deterministic ones give constants of the graph, as ``dg.zeros`` does, and the random ones
are random ops drawing fresh numbers on every compiled call."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..dtypes import CPU, as_dtype, check_device
from ..errors import TraceError
from ..modes import current_trace
from ..ops import elementwise as E
from ..ops import math as M
from ..ops import random as R
from ..ops.scan import argsort, cumsum, searchsorted, topk
from ..ops.shape import stop_gradient
from .tensor import (
    Tensor,
    factory_options,
    full,
    numpy_generator,
    ones,
    rand,
    randn,
    random_key,
    rng,
    set_rng,
    tensor,
    zeros,
)


def _like_dtype(x: Any, dtype: Any) -> np.dtype:
    return as_dtype(dtype) if dtype is not None else np.dtype(x.dtype)


def zeros_like(x: Any, *, dtype: Any = None, requires_grad: bool = False,
               device: Any = None, **kwargs: Any) -> Tensor:
    """Zeros of ``x``'s shape and (by default) dtype."""
    factory_options("zeros_like()", device, kwargs)
    return zeros(tuple(x.shape), dtype=_like_dtype(x, dtype), requires_grad=requires_grad)


def ones_like(x: Any, *, dtype: Any = None, requires_grad: bool = False,
              device: Any = None, **kwargs: Any) -> Tensor:
    """Ones of ``x``'s shape and (by default) dtype."""
    factory_options("ones_like()", device, kwargs)
    return ones(tuple(x.shape), dtype=_like_dtype(x, dtype), requires_grad=requires_grad)


def full_like(x: Any, fill_value: Any, *, dtype: Any = None,
              requires_grad: bool = False,
              device: Any = None, **kwargs: Any) -> Tensor:
    """``fill_value`` in ``x``'s shape and (by default) dtype."""
    factory_options("full_like()", device, kwargs)
    return full(tuple(x.shape), fill_value, dtype=_like_dtype(x, dtype),
                requires_grad=requires_grad)


def empty(*shape: Any, dtype: Any = None, requires_grad: bool = False,
          device: Any = None, **kwargs: Any) -> Tensor:
    """An uninitialised tensor in PyTorch; zeros here, so results never depend on garbage."""
    factory_options("empty()", device, kwargs)
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad)


def empty_like(x: Any, *, dtype: Any = None, requires_grad: bool = False,
               device: Any = None, **kwargs: Any) -> Tensor:
    """`empty` in ``x``'s shape and (by default) dtype."""
    factory_options("empty_like()", device, kwargs)
    return zeros_like(x, dtype=dtype, requires_grad=requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None,
        requires_grad: bool = False,
        device: Any = None, **kwargs: Any) -> Tensor:
    """The ``n x m`` identity matrix (``m`` defaults to ``n``), float32 by default."""
    factory_options("eye()", device, kwargs)
    a = np.eye(n, n if m is None else m, dtype=as_dtype(dtype or np.float32))
    return tensor(a, requires_grad=requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None,
             requires_grad: bool = False,
             device: Any = None, **kwargs: Any) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, float32 by default.

    Computed in float64 then cast, so float32 values are the correctly rounded ones."""
    factory_options("linspace()", device, kwargs)
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps!r}")
    a = np.linspace(start, end, int(steps)).astype(as_dtype(dtype or np.float32))
    return tensor(a, requires_grad=requires_grad)


# ------------------------------------------------------------------ random generators


class Generator:
    """A random number generator, as ``torch.Generator``: ``g = dg.Generator();
    g.manual_seed(0)``, then ``generator=g`` to `randn`, `rand`, `randint`, `randperm`,
    `multinomial`, a `DataLoader` or `random_split`. Its numbers are NumPy's (PCG64), not
    PyTorch's: the same seed gives a reproducible stream, not torch's values.

    >>> g = dg.Generator().manual_seed(0)
    >>> dg.randperm(4, generator=g).shape
    (4,)
    """

    def __init__(self, device: Any = "cpu") -> None:
        check_device(device, "Generator()")
        self._seed = int(np.random.SeedSequence().entropy % 2 ** 63)
        self._np = np.random.default_rng(self._seed)

    @property
    def device(self) -> Any:
        return CPU

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from ``seed``; returns the generator."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"manual_seed expected an int, got {type(seed).__name__}")
        self._seed = int(seed)
        self._np = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the new seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy % 2 ** 63))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's state as a uint8 tensor (for `set_state`)."""
        text = json.dumps(self._np.bit_generator.state).encode()
        return tensor(np.frombuffer(text, np.uint8).copy())

    def set_state(self, state: Any) -> "Generator":
        try:
            value = json.loads(bytes(np.asarray(state, np.uint8)).decode())
            gen = np.random.default_rng()
            gen.bit_generator.state = value
        except (ValueError, TypeError, KeyError) as e:
            raise RuntimeError(f"set_state: not a generator state ({e})") from None
        self._np = gen
        return self


class _DefaultGenerator(Generator):
    """dualgraph's global generator (``dg.default_generator``): the one `dg.manual_seed`
    seeds and that ``randn``, ``nn`` initialisation and compiled random ops draw from."""

    def __init__(self) -> None:
        self._seed = 0

    @property
    def _np(self) -> np.random.Generator:  # type: ignore[override]
        return rng()

    @_np.setter
    def _np(self, gen: np.random.Generator) -> None:
        set_rng(gen)

    def manual_seed(self, seed: int) -> "Generator":
        super().manual_seed(seed)
        return self


default_generator = _DefaultGenerator()


def manual_seed(seed: int) -> None:
    """Seed dualgraph's default generator (``randn``/``rand``, dropout, ``nn``
    initialisation, compiled random ops) for reproducible runs. PyTorch returns the
    generator; this returns None, so ``>>> dg.manual_seed(0)`` prints nothing (the
    generator is ``dg.default_generator``)."""
    default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the operating system; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(state: Any) -> None:
    default_generator.set_state(state)


def _key(generator: Any) -> tuple[Any, int]:
    """``(key, stream)`` for a composed random op: eagerly a fresh key drawn from
    ``generator``; in a trace, the trace key (a ``generator`` there is refused)."""
    if generator is None:
        return random_key()
    if current_trace() is None:
        return tensor(np.array(numpy_generator(generator).integers(0, 2 ** 63 - 1))), 0
    raise TraceError("generator= inside a compiled function: its random ops draw from "
                     "dualgraph's default generator (seed it with dg.manual_seed), or draw "
                     "the numbers outside and pass them in")


def _size_arg(size: Any, fn: str) -> tuple:
    if isinstance(size, (int, np.integer)):
        size = (size,)
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"{fn}: size must be a tuple of ints, got {type(size).__name__}")
    return tuple(size)


def randint(low: int, high: Any = None, size: Any = None, *, generator: Any = None,
            dtype: Any = None, device: Any = None, requires_grad: bool = False,
            **kwargs: Any) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``: ``dg.randint(10, (3,))`` or
    ``dg.randint(2, 10, (3,))``; int64 unless ``dtype`` says otherwise."""
    factory_options("randint()", device, kwargs)
    if size is None:  # randint(high, size)
        if high is None:
            raise TypeError("randint() missing the size argument")
        low, high, size = 0, low, high
    shape = _size_arg(size, "randint()")
    if high <= low:
        raise RuntimeError(f"randint(): random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    dtype = as_dtype(dtype or np.int64)
    if requires_grad:
        raise TypeError("randint(): only tensors of floating point dtype can require gradients")
    if current_trace() is not None:
        key, stream = _key(generator)
        u = R.rand(key, shape, np.float64, stream)
        return E.add(E.mul(u, float(high - low)), float(low)).floor().astype(dtype)
    return tensor(numpy_generator(generator).integers(low, high, size=shape).astype(dtype))


def randperm(n: int, *, generator: Any = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise)."""
    factory_options("randperm()", device, kwargs)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError(f"randperm(): n must be a non-negative int, got {n!r}")
    dtype = as_dtype(dtype or np.int64)
    if current_trace() is not None:
        key, stream = _key(generator)
        return argsort(R.rand(key, (int(n),), np.float64, stream)).astype(dtype)
    return tensor(numpy_generator(generator).permutation(int(n)).astype(dtype),
                  requires_grad=requires_grad)


def randn_like(x: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
               **kwargs: Any) -> Tensor:
    """`randn` in ``x``'s shape and (by default) dtype."""
    return randn(tuple(x.shape), dtype=_like_dtype(x, dtype), device=device,
                 requires_grad=requires_grad, **kwargs)


def rand_like(x: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False,
              **kwargs: Any) -> Tensor:
    """`rand` in ``x``'s shape and (by default) dtype."""
    return rand(tuple(x.shape), dtype=_like_dtype(x, dtype), device=device,
                requires_grad=requires_grad, **kwargs)


def randint_like(x: Any, low: int, high: Any = None, *, dtype: Any = None,
                 device: Any = None, requires_grad: bool = False, **kwargs: Any) -> Tensor:
    """`randint` in ``x``'s shape and (by default) dtype: ``randint_like(x, high)`` or
    ``randint_like(x, low, high)``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(x.shape), dtype=_like_dtype(x, dtype), device=device,
                   requires_grad=requires_grad, **kwargs)


def multinomial(input: Any, num_samples: int, replacement: bool = False, *,  # noqa: A002
                generator: Any = None, out: Any = None) -> Any:
    """Indices drawn from the categories of each row of ``input`` (1-D or 2-D, weights
    that need not sum to one), as ``torch.multinomial``: int64 of shape
    ``(num_samples,)`` or ``(rows, num_samples)``.

    With replacement, each draw inverts the row's cumulative sum at a uniform number;
    without, the ``num_samples`` largest of ``w / e`` (``e`` exponential noise) are taken,
    which draws categories one by one in proportion to their remaining weight. Both are
    compositions of ops, so ``multinomial`` also runs inside a compiled function (with
    fresh numbers each call). Eagerly, weights that are negative, not finite, or sum to
    zero raise `RuntimeError`, as does asking for more distinct samples than a row has
    nonzero weights; a compiled function cannot check values and returns some indices.

    >>> dg.multinomial(dg.tensor([0.0, 1.0, 3.0]), 4, replacement=True).shape
    (4,)
    """
    if out is not None:
        raise TypeError("multinomial(): out= is not supported; assign the result instead")
    shape = tuple(input.shape)
    if len(shape) not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {shape}")
    if np.dtype(input.dtype).kind != "f":
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got "
                           f"{input.dtype}")
    k = shape[-1]
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) \
            or num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples, got "
                           f"{num_samples!r}")
    if not replacement and num_samples > k:
        raise RuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                           f"without replacement ({num_samples} > {k})")
    if k == 0:
        raise RuntimeError("multinomial: the number of categories cannot be zero")
    w = input.detach() if isinstance(input, Tensor) else stop_gradient(input)
    if current_trace() is None:
        _check_weights(np.asarray(w), int(num_samples), replacement)
    rows = shape[0] if len(shape) == 2 else 1
    w = w.reshape(rows, k).astype(np.float64)
    key, stream = _key(generator)
    u = R.rand(key, (rows, int(num_samples) if replacement else k), np.float64, stream)
    if replacement:
        cdf = cumsum(w, 1)
        target = E.mul(u, cdf[:, k - 1:k])
        idx = E.minimum(searchsorted(cdf, target, right=True), k - 1)
    else:
        noise = E.neg(M.log1p(E.neg(u)))  # exponential(1); 0 only when u is exactly 0
        idx = topk(E.div(w, noise), int(num_samples), dim=1).indices
    idx = idx.astype(np.int64)
    return idx.reshape(int(num_samples)) if len(shape) == 1 else idx


def _check_weights(w: np.ndarray, num_samples: int, replacement: bool) -> None:
    """PyTorch's checks on multinomial weights (eager only: they read values)."""
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or "
                           "element < 0")
    w2 = w.reshape(-1, w.shape[-1])
    if np.any(w2.sum(axis=1) <= 0):
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of "
                           "probabilities <= 0)")
    if not replacement and np.any((w2 > 0).sum(axis=1) < num_samples):
        raise RuntimeError("multinomial: invalid multinomial distribution (with "
                           "replacement=False, not enough non-negative category to sample)")
