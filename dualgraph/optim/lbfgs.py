"""`LBFGS`: limited-memory BFGS over all parameters as one vector, as
``torch.optim.LBFGS`` (without a line search: fixed steps of ``lr``)."""

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
        if line_search_fn is not None:
            raise NotImplementedError("LBFGS: line_search_fn='strong_wolfe' is not "
                                      "supported; use line_search_fn=None")
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
                self._add_grad(t, d)
                ls_evals = 0
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
