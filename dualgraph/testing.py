"""Testing helpers: `gradcheck` (analytic gradients against central finite differences in
float64) and `assert_close` (PyTorch's ``torch.testing.assert_close`` for dualgraph)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .eager.internal import array_of, make_tensor
from .eager.tensor import Tensor
from .eager.tensor import grad as _grad


class GradcheckError(AssertionError):
    """Analytic and numerical gradients disagree; the message names the worst element."""


def gradcheck(
    fn: Callable[..., Any],
    *inputs: Any,
    eps: float = 1e-6,
    atol: float = 1e-6,
    rtol: float = 1e-4,
    seed: int = 0,
) -> bool:
    """Check ``fn``'s gradients w.r.t. every floating input, in float64.

    Inputs (tensors or arrays) are copied to float64 leaves. A non-scalar output is reduced
    with fixed random weights so every output element is checked. Raises `GradcheckError`
    naming the input, the element and both values at the worst mismatch.

    >>> gradcheck(lambda x: (x * x).sum(), dg.randn(3))
    True
    """
    leaves = []
    for x in inputs:
        arr = array_of(x) if isinstance(x, Tensor) else np.asarray(x)
        if arr.dtype.kind == "f":
            leaves.append(make_tensor(arr.astype(np.float64), False, None).requires_grad_(True))
        else:
            leaves.append(make_tensor(np.array(arr), False, None))
    diff = [i for i, t in enumerate(leaves) if t.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no floating-point input to differentiate")
    rng = np.random.default_rng(seed)
    out = fn(*leaves)
    if not isinstance(out, Tensor):
        raise TypeError(f"gradcheck: fn must return a Tensor, got {type(out).__name__}")
    weights = rng.standard_normal(out.shape) if out.shape else np.float64(1.0)

    def scalar(*xs: Any) -> Tensor:
        y = fn(*xs)
        return (y * np.asarray(weights, dtype=y.dtype)).sum() if y.shape else y * 1.0

    analytic = _grad(scalar(*leaves), [leaves[i] for i in diff], allow_unused=True)
    for k, i in enumerate(diff):
        x = leaves[i]
        num = np.zeros(x.shape)
        flat = array_of(x).reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            hi = scalar(*[_detached(t) for t in leaves]).item()
            flat[j] = orig - eps
            lo = scalar(*[_detached(t) for t in leaves]).item()
            flat[j] = orig
            num.reshape(-1)[j] = (hi - lo) / (2 * eps)
        a = np.zeros(x.shape) if analytic[k] is None else array_of(analytic[k]).astype(np.float64)
        err = np.abs(a - num) - (atol + rtol * np.abs(num))
        if err.size and err.max() > 0:
            w = np.unravel_index(int(np.argmax(err)), err.shape) if err.shape else ()
            raise GradcheckError(
                f"gradcheck: gradient of input {i} (shape {tuple(x.shape)}) mismatches at element "
                f"{tuple(int(v) for v in w)}: analytic {a[w]!r}, numerical {num[w]!r} "
                f"(atol={atol}, rtol={rtol})"
            )
    return True


def _detached(t: Tensor) -> Tensor:
    return make_tensor(array_of(t), False, None)


# ---------------------------------------------------------------------------- assert_close

# Default (rtol, atol) by dtype, as torch.testing.assert_close documents them; any dtype not
# listed (integers, bool) compares exactly.
_TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (1e-3, 1e-5),
    np.dtype(np.float32): (1.3e-6, 1e-5),
    np.dtype(np.float64): (1e-7, 1e-7),
    np.dtype(np.complex64): (1.3e-6, 1e-5),
    np.dtype(np.complex128): (1e-7, 1e-7),
}


def assert_close(
    actual: Any,
    expected: Any,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_dtype: bool = True,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    """Assert that ``actual`` and ``expected`` are close, with the semantics of PyTorch's
    ``torch.testing.assert_close``.

    Inputs are Tensors, NumPy arrays or scalars, Python numbers, ``None``, or (nested)
    lists, tuples and dicts of them, compared item by item. Shapes must be equal, and the
    dtypes too unless ``check_dtype=False``. Two elements are close when they are equal
    (infinities included; NaNs too with ``equal_nan``) or when
    ``|actual - expected| <= atol + rtol * |expected|``. ``rtol`` and ``atol`` go together;
    omitted, they default by dtype (the larger of the two inputs' defaults): float16
    1e-3/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, integers and bool exact.

    A failure raises ``AssertionError`` saying how many elements mismatch and the greatest
    absolute and relative difference and where. ``msg`` as a callable replaces that
    message with ``msg(message)`` (as in PyTorch); as a string it is put in front of the
    message (PyTorch replaces it: the figures are too useful to lose).

    >>> assert_close(dg.tensor([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7], np.float32))
    """
    if (rtol is None) != (atol is None):
        raise ValueError(
            "assert_close: rtol and atol must both be given or both omitted, got "
            f"rtol={rtol}, atol={atol}"
        )
    try:
        _compare(actual, expected, rtol, atol, equal_nan, check_dtype)
    except _MismatchError as e:
        text = str(e)
        if e.path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in e.path)
        if callable(msg):
            text = msg(text)
        elif msg:
            text = f"{msg}\n\n{text}"
        raise AssertionError(text) from None


class _MismatchError(Exception):
    def __init__(self, text: str, path: tuple = ()) -> None:
        super().__init__(text)
        self.path = path


def _compare(actual: Any, expected: Any, rtol: float | None, atol: float | None,
             equal_nan: bool, check_dtype: bool) -> None:
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        missing, extra = expected.keys() - actual.keys(), actual.keys() - expected.keys()
        if missing or extra:
            raise _MismatchError(
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {', '.join(sorted(map(repr, missing)))}\n"
                f"Extra keys in the actual mapping: {', '.join(sorted(map(repr, extra)))}"
            )
        items: Any = ((k, actual[k], expected[k]) for k in expected)
    elif _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _MismatchError(
                f"The length of the sequences mismatch: {len(actual)} != {len(expected)}"
            )
        items = ((i, a, e) for i, (a, e) in enumerate(zip(actual, expected)))
    else:
        _compare_leaf(actual, expected, rtol, atol, equal_nan, check_dtype)
        return
    for key, a, e in items:
        try:
            _compare(a, e, rtol, atol, equal_nan, check_dtype)
        except _MismatchError as m:
            raise _MismatchError(str(m), (key, *m.path)) from None


def _is_sequence(x: Any) -> bool:
    return isinstance(x, (list, tuple))


def _as_array(x: Any) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, (np.ndarray, np.generic, int, float, complex, bool, list, tuple)):
        return np.asarray(x)
    raise TypeError(f"assert_close: cannot compare an object of type {type(x).__name__}")


def _compare_leaf(actual: Any, expected: Any, rtol: float | None, atol: float | None,
                  equal_nan: bool, check_dtype: bool) -> None:
    if actual is None or expected is None:
        if actual is not expected:
            raise _MismatchError(f"None mismatch: {_short(actual)} is not {_short(expected)}")
        return
    scalars = all(isinstance(x, (int, float, complex)) for x in (actual, expected))
    a, e = _as_array(actual), _as_array(expected)
    if a.shape != e.shape:
        raise _MismatchError(
            f"The values for attribute 'shape' do not match: {tuple(a.shape)} != {tuple(e.shape)}."
        )
    if check_dtype and a.dtype != e.dtype:
        raise _MismatchError(
            f"The values for attribute 'dtype' do not match: {a.dtype} != {e.dtype}."
        )
    if rtol is None or atol is None:
        rtol, atol = (max(t) for t in zip(_TOLERANCES.get(a.dtype, (0.0, 0.0)),
                                          _TOLERANCES.get(e.dtype, (0.0, 0.0))))
    inexact = a.dtype.kind in "fc" or e.dtype.kind in "fc"
    # Differences in a wide type, so that an int8 difference cannot wrap and a float16 one
    # cannot round to zero.
    wide = np.complex128 if "c" in (a.dtype.kind, e.dtype.kind) else (
        np.float64 if inexact or rtol or atol else np.int64)
    aw, ew = a.astype(wide), e.astype(wide)
    with np.errstate(all="ignore"):
        matches = np.asarray(a == e)
        if equal_nan and inexact:
            matches = matches | (np.isnan(aw) & np.isnan(ew))
        diff = np.abs(aw - ew)
        if rtol or atol:
            matches = matches | (np.isfinite(diff) & (diff <= atol + rtol * np.abs(ew)))
        if matches.all():
            return
        rel = diff / np.abs(ew)
    exact = not (rtol or atol)
    kind = "Scalars" if scalars or a.size == 1 else "Tensor-likes"
    header = f"{kind} are not {'equal' if exact else 'close'}!\n\n"
    allowed = ("", "") if exact else (f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    if kind == "Scalars":
        got, want = aw.reshape(-1)[0], ew.reshape(-1)[0]
        raise _MismatchError(
            f"{header}Expected {_num(want)} but got {_num(got)}.\n"
            f"Absolute difference: {_num(diff.reshape(-1)[0])}{allowed[0]}\n"
            f"Relative difference: {_num(rel.reshape(-1)[0])}{allowed[1]}"
        )
    bad = ~matches
    n_bad, n = int(bad.sum()), matches.size
    # Only mismatched elements compete for "greatest"; argmax picks a NaN first, as
    # PyTorch's max does.
    abs_at = _where_max(np.where(bad, diff, 0), bad)
    rel_at = _where_max(np.where(bad, rel, 0), bad)
    raise _MismatchError(
        f"{header}Mismatched elements: {n_bad} / {n} ({n_bad / n:.1%})\n"
        f"Greatest absolute difference: {_num(diff[abs_at])} at index {abs_at}{allowed[0]}\n"
        f"Greatest relative difference: {_num(rel[rel_at])} at index {rel_at}{allowed[1]}"
    )


def _where_max(values: np.ndarray, bad: np.ndarray) -> tuple[int, ...]:
    flat = values.reshape(-1)
    k = int(np.argmax(flat)) if flat.size else 0
    if not np.isnan(flat[k]) and flat[k] == 0:
        k = int(np.argmax(bad.reshape(-1)))  # all differences 0 (nan vs nan): first mismatch
    return tuple(int(i) for i in np.unravel_index(k, values.shape))


def _num(x: Any) -> Any:
    """A NumPy scalar as a plain Python number, for the message."""
    return x.item() if hasattr(x, "item") else x


def _short(x: Any) -> str:
    return "None" if x is None else type(x).__name__
