"""`dg.optim`: SGD and Adam with PyTorch's update rules.

Updates are written with tensor ops applied in place under ``no_grad`` (not raw NumPy), so
a traced training step sees them as ops too. Hyperparameters are read through `hparam`:
eagerly a Python number; in a compiled step a 0-d input read from ``param_groups`` on every
call, so a learning-rate schedule runs one kernel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .eager.grad_mode import no_grad
from .eager.internal import array_of, sub_scaled_
from .eager.tensor import Tensor
from .modes import current_trace

# Every hyperparameter expression the updates use, as a function of the group. Derived
# values (``1 - beta1``) are computed in Python double precision, as eager mode does, and
# only then rounded to the parameter's dtype.
_HPARAMS = {
    "lr": lambda g: g["lr"],
    "momentum": lambda g: g["momentum"],
    "weight_decay": lambda g: g["weight_decay"],
    "eps": lambda g: g["eps"],
    "beta1": lambda g: g["betas"][0],
    "beta2": lambda g: g["betas"][1],
    "1-beta1": lambda g: 1 - g["betas"][0],
    "1-beta2": lambda g: 1 - g["betas"][1],
}


def hparam(group: dict, name: str, dtype: Any) -> Any:
    """Hyperparameter ``name`` of ``group`` (see ``_HPARAMS``): a Python number eagerly;
    while a compiled call traces, a 0-d ``dtype`` input that the call reads from the group
    each time (so changing ``group["lr"]`` takes effect without a retrace)."""
    rule = _HPARAMS[name]
    lift = getattr(current_trace(), "runtime_scalar", None)
    if lift is None:
        return rule(group)
    return lift((id(group), name, np.dtype(dtype)), lambda: rule(group), dtype, group)


def hflag(group: dict, key: str) -> bool:
    """Whether ``group[key]`` is non-zero: a Python branch (weight decay on or off), so a
    compiled call guards it and retraces when it flips."""
    value = bool(group[key])
    guard = getattr(current_trace(), "guard_value", None)
    if guard is not None:
        guard(lambda: bool(group[key]), value,
              f"param_groups[...][{key!r}] became {'non-' if not value else ''}zero", group)
    return value


class Optimizer:
    """Base class: parameter groups, per-parameter state, ``zero_grad``."""

    def __init__(self, params: Iterable[Any], defaults: dict) -> None:
        if isinstance(params, Tensor):
            raise TypeError("params must be an iterable of tensors (e.g. model.parameters())")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = defaults
        self.param_groups: list[dict] = []
        self.state: dict = {}
        seen: dict[int, int] = {}  # id(param) -> index of its group
        for k, g in enumerate(groups):
            if not isinstance(g, dict) or "params" not in g:
                raise TypeError("optimizer: a parameter group must be a dict with a 'params' "
                                f"entry, got {type(g).__name__}")
            if isinstance(g["params"], Tensor):
                g = {**g, "params": [g["params"]]}
            group = {**defaults, **g, "params": list(g["params"])}
            for i, p in enumerate(group["params"]):
                if not isinstance(p, Tensor):
                    raise TypeError(f"optimizer can only optimize Tensors, got {type(p).__name__}")
                if not p.is_leaf:
                    raise ValueError("can't optimize a non-leaf Tensor")
                # A parameter listed twice would be stepped twice per step(). PyTorch raises
                # across groups and warns within one ("in future, this will cause an
                # error"); both are refused here.
                if id(p) in seen:
                    what = ("some parameters appear in more than one parameter group"
                            if seen[id(p)] != k else
                            "optimizer contains a parameter group with duplicate parameters")
                    raise ValueError(f"{what}: parameter {i} of group {k} (shape "
                                     f"{tuple(p.shape)}) is listed before")
                seen[id(p)] = k
            self.param_groups.append(group)
        self._check_hparams()

    def _check_hparams(self) -> None:
        for group in self.param_groups:
            for k, v in group.items():
                if k == "params" or isinstance(self.defaults.get(k), bool):
                    continue
                for x in v if isinstance(v, tuple) else (v,):
                    if isinstance(x, bool) or not isinstance(x, (int, float, np.number)):
                        raise TypeError(f"{type(self).__name__}: {k} must be a number, "
                                        f"got {x!r}")
            if group["lr"] < 0:
                raise ValueError(f"Invalid learning rate: {group['lr']}")

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad = p.grad.detach() * 0

    def step(self) -> None:
        # Every gradient is checked before anything changes: an error must leave all
        # parameters and optimizer state as they were, not a step applied to some of them.
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None and tuple(g.shape) != tuple(p.shape):
                    raise RuntimeError(
                        f"{type(self).__name__}.step(): the gradient of a parameter of shape "
                        f"{tuple(p.shape)} has shape {tuple(g.shape)}; nothing was updated"
                    )
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is not None:
                        self._update(p, g, group, self.state.setdefault(p, {}))

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum and weight decay (PyTorch's rule:
    ``buf = momentum * buf + g``; ``p -= lr * buf``)."""

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        if momentum < 0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        # Plain SGD outside a trace (nothing to guard or lift: `hflag` and `hparam` would
        # return these very values): the in-place update, without their per-call plumbing.
        if (not group["weight_decay"] and not group["momentum"] and current_trace() is None
                and sub_scaled_(p, g, group["lr"])):
            return
        if hflag(group, "weight_decay"):
            g = g + p * hparam(group, "weight_decay", p.dtype)
        if hflag(group, "momentum"):
            # PyTorch starts the buffer at g; starting at 0 and always running
            # buf = momentum * buf + g gives the same values, and keeps the state an eager
            # tensor even when the step is traced (then the update is a graph output).
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = Tensor(np.zeros_like(array_of(p)))
            buf.mul_(hparam(group, "momentum", p.dtype)).add_(g)
            g = buf
        lr = hparam(group, "lr", p.dtype)
        if not sub_scaled_(p, g, lr):  # eagerly: one in-place update, no temporary tensor
            p.sub_(g * lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction, as ``torch.optim.Adam``."""

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        if (not isinstance(betas, (tuple, list)) or len(betas) != 2
                or not all(isinstance(b, (int, float, np.number)) for b in betas)):
            raise TypeError(f"Adam: betas must be a pair of numbers, got {betas!r}")
        if not 0.0 <= betas[0] < 1.0 or not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameters: {betas}")
        if eps < 0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay})

    def _update(self, p: Tensor, g: Tensor, group: dict, state: dict) -> None:
        if hflag(group, "weight_decay"):
            g = g + p * hparam(group, "weight_decay", p.dtype)
        if not state:
            # The step count is a tensor, not a Python int: a traced step then reads it as
            # an input instead of baking in the count of the step it was traced at.
            state["step"] = Tensor(np.zeros((), p.dtype))
            state["exp_avg"] = Tensor(np.zeros_like(array_of(p)))
            state["exp_avg_sq"] = Tensor(np.zeros_like(array_of(p)))
        step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
        step += 1
        m.mul_(hparam(group, "beta1", p.dtype)).add_(g * hparam(group, "1-beta1", p.dtype))
        v.mul_(hparam(group, "beta2", p.dtype)).add_(g * g * hparam(group, "1-beta2", p.dtype))
        # Bias corrections in float64, then cast to the parameter's dtype: in float32,
        # 1 - 0.999 ** 1 loses ~1e-5 of its value to cancellation (0.999 is not exact),
        # which made float32 Adam drift 40x further from the exact rule than torch's
        # (torch computes the corrections from a Python-float step).
        step64 = step.astype(np.float64)
        bc1 = (1 - hparam(group, "beta1", np.float64) ** step64).astype(p.dtype)
        bc2_sqrt = (1 - hparam(group, "beta2", np.float64) ** step64).sqrt().astype(p.dtype)
        denom = v.sqrt() / bc2_sqrt + hparam(group, "eps", p.dtype)
        p.sub_(m / denom * (hparam(group, "lr", p.dtype) / bc1))
