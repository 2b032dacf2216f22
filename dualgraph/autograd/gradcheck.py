"""``gradcheck`` and ``gradgradcheck``: PyTorch's finite-difference checks of gradients.

The analytical Jacobian comes from the autograd engine, one row per output element
(``dg.autograd.grad`` with a one-hot ``grad_outputs``); the numerical one from central
differences on each input element. Use float64 inputs: float32 differences are too coarse
for the default tolerances.

>>> x = dg.randn(3, dtype=dg.float64, requires_grad=True)
>>> dg.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..eager.tensor import Tensor, grad


class GradcheckError(RuntimeError):
    """Raised by `gradcheck` when the analytical and numerical Jacobians differ."""


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(func: Callable, inputs: tuple) -> tuple[Tensor, ...]:
    outs = _as_tuple(func(*inputs))
    return tuple(o for o in outs if isinstance(o, Tensor) and o.dtype.kind in "fc")


def _checked_inputs(inputs: tuple) -> list[int]:
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor with requires_grad=True")
    for i in diff:
        if inputs[i].dtype != np.float64:
            raise GradcheckError(
                f"gradcheck input {i} is {inputs[i].dtype}: use float64 inputs, float32 "
                "finite differences are too coarse for the tolerances")
    return diff


def _numerical(func: Callable, inputs: tuple, diff: list[int], eps: float) -> list[np.ndarray]:
    """Per differentiable input, a (n_in, n_out) Jacobian from central differences."""
    jacs = []
    for i in diff:
        base = inputs[i].detach().numpy().copy()
        cols = []
        for k in range(base.size):
            vals = []
            for sign in (1.0, -1.0):
                pert = base.copy().reshape(-1)
                pert[k] += sign * eps
                args = list(inputs)
                # The perturbed copy keeps requires_grad: ``func`` may differentiate
                # internally (gradgradcheck checks a gradient function).
                args[i] = Tensor(pert.reshape(base.shape)).requires_grad_(True)
                outs = _outputs(func, tuple(args))
                vals.append(np.concatenate([o.numpy().reshape(-1) for o in outs])
                            if outs else np.zeros(0))
            cols.append((vals[0] - vals[1]) / (2 * eps))
        jacs.append(np.array(cols).reshape(base.size, -1))
    return jacs


def _analytical(func: Callable, inputs: tuple, diff: list[int]) -> list[np.ndarray]:
    outs = _outputs(func, inputs)
    n_out = sum(o.numel() for o in outs)
    jacs = [np.zeros((inputs[i].numel(), n_out)) for i in diff]
    row = 0
    for o in outs:
        for k in range(o.numel()):
            if not o.requires_grad:
                row += 1
                continue
            onehot = np.zeros(o.numel(), dtype=o.dtype)
            onehot[k] = 1.0
            gs = grad([o], [inputs[i] for i in diff], [Tensor(onehot.reshape(o.shape))],
                      retain_graph=True, allow_unused=True)
            for j, g in enumerate(gs):
                if g is not None:
                    jacs[j][:, row] = g.numpy().reshape(-1)
            row += 1
    return jacs


def gradcheck(func: Callable, inputs: Any, *, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, **_: Any) -> bool:
    """True when ``func``'s gradients at ``inputs`` match central finite differences.

    PyTorch's signature; options PyTorch has for sparse, batched or fast-mode checks are
    accepted and do not change the (full, exact) check.

    >>> dg.autograd.gradcheck(dg.exp, (dg.randn(2, dtype=dg.float64, requires_grad=True),))
    True
    """
    inputs = _as_tuple(inputs)
    diff = _checked_inputs(inputs)
    numerical = _numerical(func, inputs, diff, eps)
    analytical = _analytical(func, inputs, diff)
    for i, num, ana in zip(diff, numerical, analytical):
        if num.shape != ana.shape or not np.allclose(ana, num, rtol=rtol, atol=atol):
            if not raise_exception:
                return False
            raise GradcheckError(
                f"Jacobian mismatch for output 0 with respect to input {i},\n"
                f"numerical:{num}\nanalytical:{ana}")
    return True


def gradgradcheck(func: Callable, inputs: Any, grad_outputs: Sequence[Any] | None = None, *,
                  eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                  raise_exception: bool = True, **_: Any) -> bool:
    """`gradcheck` of the gradient of ``func``: checks second derivatives.

    ``grad_outputs`` default to fixed random float64 tensors that require grad, as PyTorch
    draws them, so the check covers the gradient's dependence on them too.

    >>> x = dg.randn(3, dtype=dg.float64, requires_grad=True)
    >>> dg.autograd.gradgradcheck(lambda t: t ** 3, (x,))
    True
    """
    inputs = _as_tuple(inputs)
    diff = _checked_inputs(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [Tensor(rng.standard_normal(o.shape)).requires_grad_(True)
                        for o in outs]
    grad_outputs = list(_as_tuple(grad_outputs))
    n_in = len(inputs)

    def first_grad(*args: Any) -> tuple:
        xs, gos = args[:n_in], args[n_in:]
        ys = _outputs(func, xs)
        pairs = [(y, g) for y, g in zip(ys, gos) if y.requires_grad]
        gs = grad([y for y, _ in pairs], [xs[i] for i in diff], [g for _, g in pairs],
                  create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grad, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
