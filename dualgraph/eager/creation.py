"""PyTorch's constructors beside ``tensor`` and ``from_numpy``: ``zeros``, ``ones``,
``full``, ``arange``, ``*_like``, ``empty``, ``eye``, ``linspace``, and the random ones with
their `Generator` (``randn``, ``rand``, ``randint``, ``randperm``, ``multinomial``,
``randn_like``, ...). Inside a traced function the deterministic ones give constants of the
graph, and the random ones are random ops drawing fresh numbers on every compiled call."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import CPU, as_dtype, check_device, default_float
from ..errors import TraceError
from ..modes import current_trace
from ..ops import elementwise as E
from ..ops import random as R
from ..ops.broadcast import check_python_int
from ..ops.complex import ComplexTensor, is_complex_dtype, real_dtype
from ..ops.scan import argsort, cumsum, searchsorted, topk
from ..ops.shape import stop_gradient
from .tensor import (
    Tensor,
    _filled,
    numpy_generator,
    random_key,
    rng,
    set_rng,
    tensor,
)


def _shape_arg(shape: tuple) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    dims = []
    for d in shape:
        if isinstance(d, (bool, np.bool_)):
            raise TypeError(f"invalid shape {shape}: dimensions must be non-negative ints, "
                            f"got {type(d).__name__} {d!r}")
        if not isinstance(d, (int, np.integer)):
            # Anything with __index__ is a dimension, as in PyTorch: an integer 0-d tensor,
            # a number read with .item() inside a compiled call.
            try:
                d = operator.index(d)
            except TypeError:
                raise TypeError(f"invalid shape {shape}: dimensions must be non-negative "
                                f"ints, got {type(d).__name__} {d!r}") from None
        if d < 0:
            raise ValueError(f"invalid shape {shape}: dimensions must be non-negative ints")
        dims.append(int(d))
    return tuple(dims)


def zeros(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          **kwargs: Any) -> Tensor:
    """A tensor of zeros: ``dg.zeros(2, 3)`` or ``dg.zeros((2, 3))``."""
    shape = _size_keyword(shape, kwargs, "zeros()")
    factory_options("zeros()", device, kwargs)
    if is_complex_dtype(dtype):
        return _complex_filled(np.zeros, _shape_arg(shape), dtype, requires_grad)
    return _filled(np.zeros(_shape_arg(shape), as_dtype(dtype or default_float())), requires_grad)


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
         **kwargs: Any) -> Tensor:
    """A tensor of ones: ``dg.ones(2, 3)`` or ``dg.ones((2, 3))``."""
    shape = _size_keyword(shape, kwargs, "ones()")
    factory_options("ones()", device, kwargs)
    if is_complex_dtype(dtype):
        return _complex_filled(np.ones, _shape_arg(shape), dtype, requires_grad)
    return _filled(np.ones(_shape_arg(shape), as_dtype(dtype or default_float())), requires_grad)


def full(shape: Any, value: Any, dtype: Any = None, requires_grad: bool = False, *,
         device: Any = None, **kwargs: Any) -> Tensor:
    """A tensor of ``shape`` filled with ``value`` (a number or bool; a complex number
    gives a complex tensor; a string or ``None`` is a `TypeError`)."""
    factory_options("full()", device, kwargs)
    if isinstance(value, (Tensor, np.ndarray)) and value.shape == ():
        value = value.item()  # a 0-d tensor is a number, as in PyTorch
    if is_complex_dtype(dtype) or isinstance(value, (complex, np.complexfloating)):
        shape = _shape_arg((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))
        return _complex_filled(lambda s, d: np.full(s, value, d), shape, dtype, requires_grad)
    if not isinstance(value, (bool, int, float, np.bool_, np.number)):
        raise TypeError(f"full(): fill_value must be a real number or bool, got "
                        f"{type(value).__name__} {value!r}")
    if type(value) is int:
        check_python_int(value)
        if dtype is None and value >= 2 ** 63:
            raise RuntimeError("full(): value cannot be converted to type int64_t without "
                               "overflow")
    shape = _shape_arg((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))
    if dtype is None:
        dtype = np.array(value).dtype
        dtype = default_float() if dtype == np.float64 else dtype
    return _filled(np.full(shape, value, as_dtype(dtype)), requires_grad)


def arange(start: Any = None, end: Any = None, step: Any = 1, dtype: Any = None,
           requires_grad: bool = False, *, device: Any = None, **kwargs: Any) -> Tensor:
    """Evenly spaced values in ``[start, end)``; ints give int64, floats the default dtype
    (float32 unless ``dg.set_default_dtype`` says otherwise). ``arange(n)`` and
    ``arange(end=n)`` both start at 0."""
    factory_options("arange()", device, kwargs)
    if start is None and end is None:
        raise TypeError("arange() missing 1 required argument: 'end'")
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise TypeError(f"arange: {name} must be a number, got {type(v).__name__} {v!r}")
        if not np.isfinite(v):
            raise RuntimeError(f"arange: unsupported range: {start} -> {end} (step {step})")
    # PyTorch's checks, where NumPy raises ZeroDivisionError or returns an empty array.
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError(f"arange: upper bound and larger bound inconsistent with step sign "
                           f"(start {start}, end {end}, step {step})")
    arr = np.arange(start, end, step)
    if dtype is None and arr.dtype == np.float64:
        dtype = default_float()
    if dtype is not None:
        arr = arr.astype(as_dtype(dtype))
    return _filled(arr, requires_grad)


# PyTorch's factory keywords with nothing to do on a CPU-only, strided-only library.
_FACTORY_KEYWORDS = frozenset({"layout", "pin_memory", "memory_format", "out"})


def _size_keyword(shape: tuple, kwargs: dict, fn: str) -> tuple:
    """The shape of a ``*size`` factory, given as PyTorch's ``size=`` keyword too
    (``torch.empty(size=(3, 4))``, as pytorch/examples gat writes it)."""
    if "size" not in kwargs:
        return shape
    if shape:
        raise TypeError(f"{fn} got multiple values for argument 'size'")
    return (kwargs.pop("size"),)


def factory_options(fn: str, device: Any, kwargs: dict) -> None:
    """Check a factory's ``device=`` (the CPU only) and its other PyTorch keywords:
    ``layout`` (strided only), ``pin_memory`` and ``memory_format`` (accepted: there is no
    pinned or channels-last memory), ``out`` (refused: results are always new tensors)."""
    check_device(device, fn)
    unknown = set(kwargs) - _FACTORY_KEYWORDS
    if unknown:
        raise TypeError(f"{fn} got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if kwargs.get("out") is not None:
        raise TypeError(f"{fn}: out= is not supported; assign the result instead")
    layout = kwargs.get("layout")
    if layout is not None and str(layout).rpartition(".")[2] != "strided":
        raise RuntimeError(f"{fn}: layout {layout!r} is not supported (strided only)")


def randn(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          generator: Any = None, **kwargs: Any) -> Tensor:
    """Standard normal samples (float32 unless ``dtype`` says otherwise), from
    ``generator`` (a `dg.Generator`) or dualgraph's default one."""
    return _sampled("randn()", R.randn, lambda gen, size: gen.standard_normal(size), shape,
                    dtype, requires_grad, device, generator, kwargs)


def rand(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
         generator: Any = None, **kwargs: Any) -> Tensor:
    """Uniform samples in ``[0, 1)`` (float32 unless ``dtype`` says otherwise), from
    ``generator`` (a `dg.Generator`) or dualgraph's default one."""
    return _sampled("rand()", R.rand, lambda gen, size: gen.random(size), shape, dtype,
                    requires_grad, device, generator, kwargs)


def _sampled(fn: str, op: Callable, sample: Callable, shape: tuple, dtype: Any,
             requires_grad: bool, device: Any, generator: Any, kwargs: dict) -> Tensor:
    """``randn``/``rand``: NumPy's stream eagerly; in a trace, the random op ``op``."""
    shape = _size_keyword(shape, kwargs, fn)
    factory_options(fn, device, kwargs)
    shape = _shape_arg(shape)
    if is_complex_dtype(dtype):
        return _complex_sampled(op, sample, shape, dtype, requires_grad, generator)
    dtype = as_dtype(dtype or default_float())
    if current_trace() is not None:
        return _traced_draw(op, shape, dtype, requires_grad, generator)
    return _filled(sample(numpy_generator(generator), shape).astype(dtype), requires_grad)


def _complex_filled(fill: Callable, shape: tuple, dtype: Any, requires_grad: bool) -> Any:
    """A complex tensor of ``fill(shape, complex dtype)`` (``np.zeros``, ``np.ones``)."""
    if dtype is None:
        dtype = np.complex128 if default_float() == np.float64 else np.complex64
    dtype = np.dtype(dtype)
    values = fill(shape, dtype)
    ri = np.stack([values.real, values.imag], -1).astype(real_dtype(dtype))
    return ComplexTensor(_filled(ri, requires_grad))


def _complex_sampled(op: Callable, sample: Callable, shape: tuple, dtype: Any,
                     requires_grad: bool, generator: Any) -> Any:
    """Complex ``randn``/``rand``: both parts drawn as the real sampler draws; ``randn``'s
    parts are scaled by ``sqrt(1/2)`` so the complex variance is 1, as PyTorch's."""
    part = real_dtype(dtype)
    scale = float(np.sqrt(0.5)) if op is R.randn else 1.0
    if current_trace() is not None:
        ri = _traced_draw(op, shape + (2,), part, False, generator)
        return ComplexTensor(ri * scale if scale != 1.0 else ri)
    ri = sample(numpy_generator(generator), shape + (2,)) * scale
    return ComplexTensor(_filled(ri.astype(part), requires_grad))


def _traced_draw(draw: Callable, shape: tuple, dtype: np.dtype, requires_grad: bool,
                 generator: Any = None) -> Any:
    if generator is not None:
        raise TraceError("generator= inside a compiled function: its random ops draw from "
                         "dualgraph's default generator (seed it with dg.manual_seed), or "
                         "draw the numbers outside and pass them in")
    if requires_grad:
        raise TraceError("a random tensor with requires_grad=True inside a compiled function "
                         "would be a new leaf on every call; create it outside and pass it in")
    key, stream = random_key()
    return draw(key, shape, dtype, stream)


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
    shape = _size_keyword(shape, kwargs, "empty()")
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
    a = np.eye(n, n if m is None else m, dtype=as_dtype(dtype or default_float()))
    return _filled(a, requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None,
             requires_grad: bool = False,
             device: Any = None, **kwargs: Any) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, float32 by default.

    Computed in float64 then cast, so float32 values are the correctly rounded ones."""
    factory_options("linspace()", device, kwargs)
    if not isinstance(steps, (int, np.integer)) or steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps!r}")
    a = np.linspace(start, end, int(steps)).astype(as_dtype(dtype or default_float()))
    return _filled(a, requires_grad)


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
    elif high is None:  # randint(high, size=(n,))
        low, high = 0, low
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
        noise = E.neg(E.log1p(E.neg(u)))  # exponential(1); 0 only when u is exactly 0
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


def legacy_construct(dtype: np.dtype, name: str, args: tuple) -> Tensor:
    """The legacy constructors' rule: no arguments give an empty tensor, ints or a
    `dg.Size` a zero-filled one of that shape, a tensor is cast, anything else is data."""
    from ..ops.size import Size

    if not args:
        return zeros(0, dtype=dtype)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0].astype(dtype)
    if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return zeros(*args, dtype=dtype)
    if len(args) == 1 and isinstance(args[0], Size):
        return zeros(*args[0], dtype=dtype)
    if len(args) != 1:
        raise TypeError(f"{name}(): expected data or sizes, got {args!r}")
    return tensor(args[0], dtype=dtype)
