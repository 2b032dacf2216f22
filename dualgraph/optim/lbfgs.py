"""`LBFGS`: limited-memory BFGS over all parameters as one vector, as
``torch.optim.LBFGS``: fixed steps of ``lr``, or a strong-Wolfe line search."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..eager.grad_mode import no_grad
from ..eager.tensor import Tensor
from ..ops.shape import concatenate
from . import _tracing as T
from .optimizer import Optimizer, run_closure


class LBFGS(Optimizer):
    """Each ``step(closure)`` runs up to ``max_iter`` quasi-Newton iterations, calling
    ``closure`` (which recomputes the loss and its gradients) once per iteration; the
    inverse Hessian is approximated from the last ``history_size`` updates. Stops early
    when the gradient, the step or the loss change falls below the tolerances. Runs
    eagerly only: its loop branches on values each iteration.

    >>> opt = LBFGS(model.parameters(), lr=1)  # doctest: +SKIP
    >>> opt.step(closure)  # doctest: +SKIP
    """

    def __init__(self, params: Iterable[Any], lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        super().__init__(params, {
            "lr": lr, "max_iter": max_iter, "max_eval": max_eval,
            "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
            "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = list(dict.__getitem__(self.param_groups[0], "params"))

    def _flat_grad(self) -> Tensor:
        parts = [p.grad.reshape(-1) if p.grad is not None else
                 Tensor(np.zeros(int(np.prod(p.shape)), p.dtype)) for p in self._params]
        return concatenate(parts, 0)

    def _add_grad(self, t: Any, d: Tensor) -> None:
        offset = 0
        with no_grad():
            for p in self._params:
                n = int(np.prod(p.shape))
                p.add_(d[offset:offset + n].reshape(tuple(p.shape)) * t)
                offset += n

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Up to ``max_iter`` iterations; returns the loss ``closure()`` gave first."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that reevaluates the model and "
                               "returns the loss")
        if T.tracing():
            raise T.eager_only("LBFGS.step (its iterations branch on the loss)")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = run_closure(closure)
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat = self._flat_grad()
        if flat.abs().max().item() <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        with no_grad():
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d, old_dirs, old_stps, ro, h_diag = -flat, [], [], [], 1
                else:
                    d, h_diag = self._direction(flat, prev_flat, d, t, old_dirs, old_stps, ro,
                                                h_diag, history, state)
                prev_flat = flat.clone()
                prev_loss = loss
                # The first step is scaled down by the gradient's size, as PyTorch's.
                if state["n_iter"] == 1:
                    inv = 1.0 / flat.abs().sum()  # in the parameters' dtype, as PyTorch's
                    t = (inv if inv.item() < 1.0 else 1.0) * lr
                else:
                    t = lr
                if (flat * d).sum().item() > -tol_change:
                    break
                ls_evals = 0
                if group["line_search_fn"] is not None:
                    start = [p.clone() for p in self._params]
                    loss, flat, t, ls_evals = _strong_wolfe(
                        lambda t_, d_, x=start: self._directional_evaluate(closure, x, t_, d_),
                        t, d, loss, flat, (flat * d).sum())
                    self._add_grad(t, d)
                else:
                    self._add_grad(t, d)
                    if n_iter != max_iter:
                        loss = float(run_closure(closure))
                        flat = self._flat_grad()
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval:
                    break
                if flat.abs().max().item() <= tol_grad:
                    break
                if (d * t).abs().max().item() <= tol_change or abs(loss - prev_loss) < tol_change:
                    break
        state.update({"d": d, "t": t, "old_dirs": old_dirs, "old_stps": old_stps, "ro": ro,
                      "H_diag": h_diag, "prev_flat_grad": prev_flat, "prev_loss": prev_loss})
        return orig_loss

    def _directional_evaluate(self, closure: Callable[[], Any], start: list, t: Any,
                              d: Tensor) -> tuple[float, Tensor]:
        """The loss and flat gradient at ``start + t * d``; the parameters are put back."""
        self._add_grad(t, d)
        loss = float(run_closure(closure))
        flat = self._flat_grad()
        with no_grad():
            for p, x in zip(self._params, start):
                p.copy_(x)
        return loss, flat

    @staticmethod
    def _direction(flat: Tensor, prev_flat: Tensor, d: Tensor, t: Any, old_dirs: list,
                   old_stps: list, ro: list, h_diag: Any, history: int,
                   state: dict) -> tuple[Tensor, Any]:
        """The two-loop recursion: ``-H @ flat`` with ``H`` the L-BFGS inverse Hessian
        after taking the last step's curvature pair into the history (when it is
        positive)."""
        y = flat - prev_flat
        s = d * t
        ys = (y * s).sum()
        if ys.item() > 1e-10:
            if len(old_dirs) == history:
                old_dirs.pop(0)
                old_stps.pop(0)
                ro.pop(0)
            old_dirs.append(y)
            old_stps.append(s)
            ro.append(1.0 / ys)
            h_diag = ys / (y * y).sum()
        al = state.setdefault("al", [None] * history)
        q = -flat
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = (old_stps[i] * q).sum() * ro[i]
            q = q - old_dirs[i] * al[i]
        r = q * h_diag
        for i in range(len(old_dirs)):
            be_i = (old_dirs[i] * r).sum() * ro[i]
            r = r + old_stps[i] * (al[i] - be_i)
        return r, h_diag


def _cubic_min(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
               bounds: tuple | None = None) -> Any:
    """The minimiser of the cubic through two points with their values and slopes, kept in
    ``bounds`` (default: between the points); their midpoint when the cubic has none."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square.sqrt() if hasattr(d2_square, "sqrt") else d2_square ** 0.5
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


def _strong_wolfe(evaluate: Callable, t: Any, d: Tensor, f: float, g: Tensor, gtd: Any,
                  c1: float = 1e-4, c2: float = 0.9, tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple:
    """A step length ``t`` along ``d`` meeting the strong Wolfe conditions (sufficient
    decrease, ``c1``; curvature, ``c2``): grow the step until a bracket holds one, then
    shrink the bracket by cubic interpolation. Returns the loss and gradient there, ``t``
    and the number of evaluations."""
    d_norm = d.abs().max()
    f_new, g_new = evaluate(t, d)
    evals, ls_iter = 1, 0
    gtd_new = (g_new * d).sum()
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, b_f, b_g, b_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, b_f, b_g, b_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        # Extrapolate: the cubic's minimiser, at least 1% past t and at most 10 t.
        grown = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                           bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = grown
        f_new, g_new = evaluate(t, d)
        evals += 1
        gtd_new = (g_new * d).sum()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, b_f, b_g, b_gtd = [0, t], [f, f_new], [g, g_new], [gtd, gtd_new]
    # Zoom: shrink the bracket, keeping the low end the point with the smaller loss.
    insufficient = False
    low, high = (0, 1) if b_f[0] <= b_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], b_f[0], b_gtd[0], bracket[1], b_f[1], b_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            # Too close to an end: after a second time in a row (or outside), move the
            # trial point eps inside the bracket.
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t, d)
        evals += 1
        gtd_new = (g_new * d).sum()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= b_f[low]:
            bracket[high], b_f[high], b_g[high], b_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if b_f[0] <= b_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], b_f[high], b_g[high], b_gtd[high] = \
                    bracket[low], b_f[low], b_g[low], b_gtd[low]
            bracket[low], b_f[low], b_g[low], b_gtd[low] = t, f_new, g_new, gtd_new
    return b_f[low], b_g[low], bracket[low], evals
