"""Optimizer and scheduler runs written once, for ``torch`` or ``dualgraph`` as ``lib``.

`tests/goldens/optim_record.py` runs them with PyTorch and stores the results in
``tests/goldens/optim.json``; `test_goldens.py` runs them with dualgraph and compares. The
same source text running under both libraries is part of the check: it is PyTorch code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STEPS = 6
SHAPES = [(2, 3), (4,)]

# (optimizer, keyword arguments). Group 1 gets its own lr (and, for some, weight decay).
OPTIMIZERS: list[tuple[str, dict]] = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "dampening": 0.3}),
    ("SGD", {"lr": 0.1, "maximize": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.1, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "centered": True, "momentum": 0.5, "alpha": 0.9}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.1}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "weight_decay": 0.1}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("RAdam", {}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "betas": (0.8, 0.9)}),
    ("RAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True,
               "maximize": True}),
    ("Rprop", {}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.06), "maximize": True}),
    ("ASGD", {}),
    ("ASGD", {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 2, "weight_decay": 0.1}),
]


def opt_name(name: str, kw: dict, dtype: str) -> str:
    args = ",".join(f"{k}={v}" for k, v in sorted(kw.items()))
    return f"{name}({args})/{dtype}"


def initial(dtype: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def gradients(dtype: str) -> list[list[np.ndarray | None]]:
    """One gradient per parameter per step; parameter 1 has none at step 3 (skipped)."""
    rng = np.random.default_rng(11)
    out = []
    for k in range(STEPS):
        gs = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        out.append([gs[0], None if k == 3 else gs[1]])
    return out


def to_json(v: Any) -> Any:
    if hasattr(v, "detach"):
        v = v.detach()
    if hasattr(v, "numpy"):
        return np.asarray(v.numpy(), np.float64).tolist()
    if isinstance(v, (tuple, list)):
        return [to_json(x) for x in v]
    if isinstance(v, dict):
        return {str(k): to_json(x) for k, x in v.items()}
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


def run_optimizer(lib: Any, name: str, kw: dict, dtype: str) -> dict:
    """Parameters after every step, and the final ``state_dict()``."""
    params = [lib.nn.Parameter(lib.tensor(a)) for a in initial(dtype)]
    groups = [{"params": [params[0]]}, {"params": [params[1]], "lr": 0.003}]
    if name in ("SGD", "AdamW"):
        groups[1]["weight_decay"] = 0.0
    opt = getattr(lib.optim, name)(groups, **kw)
    steps = []
    for gs in gradients(dtype):
        opt.zero_grad()
        for p, g in zip(params, gs):
            p.grad = None if g is None else lib.tensor(g)
        opt.step()
        steps.append([to_json(p) for p in params])
    sd = opt.state_dict()
    state = {str(k): {n: to_json(v) for n, v in s.items()} for k, s in sd["state"].items()}
    dtypes = {str(k): {n: str(v.dtype).replace("torch.", "") for n, v in s.items()}
              for k, s in sd["state"].items()}
    return {"steps": steps, "state": state, "state_dtypes": dtypes,
            "param_groups": [to_json(g) for g in sd["param_groups"]]}


def _metric(k: int) -> float:
    return [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.91, 0.92][k]


# (name, optimizer, its kwargs, scheduler kwargs as a function of lib, epochs)
def schedulers(lib: Any) -> dict:
    S = lib.optim.lr_scheduler
    return {
        "StepLR": ("SGD", {"lr": 0.1}, lambda o: S.StepLR(o, step_size=3, gamma=0.5), 12),
        "MultiStepLR": ("SGD", {"lr": 0.1},
                        lambda o: S.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.1), 8),
        "ExponentialLR": ("SGD", {"lr": 0.1}, lambda o: S.ExponentialLR(o, gamma=0.9), 8),
        "CosineAnnealingLR": ("SGD", {"lr": 0.1},
                              lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.01), 14),
        "LambdaLR": ("SGD", {"lr": 0.1}, lambda o: S.LambdaLR(o, lambda e: 0.95 ** e), 8),
        "MultiplicativeLR": ("SGD", {"lr": 0.1},
                             lambda o: S.MultiplicativeLR(o, lambda e: 0.9), 6),
        "LinearLR": ("SGD", {"lr": 0.1},
                     lambda o: S.LinearLR(o, start_factor=0.25, total_iters=4), 8),
        "ConstantLR": ("SGD", {"lr": 0.1},
                       lambda o: S.ConstantLR(o, factor=0.5, total_iters=3), 6),
        "SequentialLR": ("SGD", {"lr": 0.1}, lambda o: S.SequentialLR(
            o, [S.LinearLR(o, start_factor=0.5, total_iters=3), S.ExponentialLR(o, 0.8)],
            milestones=[3]), 8),
        "OneCycleLR/sgd": ("SGD", {"lr": 0.1, "momentum": 0.9},
                           lambda o: S.OneCycleLR(o, max_lr=0.5, total_steps=12), 11),
        "OneCycleLR/adam_linear_three_phase": (
            "Adam", {"lr": 0.1}, lambda o: S.OneCycleLR(
                o, max_lr=0.5, total_steps=12, anneal_strategy="linear", three_phase=True), 11),
        "ReduceLROnPlateau": ("SGD", {"lr": 0.1}, lambda o: S.ReduceLROnPlateau(
            o, patience=2, cooldown=1, factor=0.5), 13),
        "CosineAnnealingWarmRestarts": ("SGD", {"lr": 0.1}, lambda o: S.CosineAnnealingWarmRestarts(
            o, T_0=3, T_mult=2, eta_min=0.01), 14),
        "CosineAnnealingWarmRestarts/T_mult1": ("SGD", {"lr": 0.1}, lambda o:
                                                S.CosineAnnealingWarmRestarts(o, T_0=4), 10),
        "CyclicLR/triangular": ("SGD", {"lr": 0.1, "momentum": 0.9}, lambda o: S.CyclicLR(
            o, base_lr=0.01, max_lr=0.1, step_size_up=3), 13),
        "CyclicLR/triangular2": ("SGD", {"lr": 0.1, "momentum": 0.9}, lambda o: S.CyclicLR(
            o, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=2, step_size_down=3,
            mode="triangular2", cycle_momentum=False), 13),
        "CyclicLR/exp_range_adam": ("Adam", {"lr": 0.1}, lambda o: S.CyclicLR(
            o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9), 11),
        "CyclicLR/scale_fn": ("SGD", {"lr": 0.1, "momentum": 0.9}, lambda o: S.CyclicLR(
            o, base_lr=0.01, max_lr=0.1, step_size_up=2, scale_fn=lambda x: 0.5 ** x,
            scale_mode="iterations"), 9),
        "PolynomialLR": ("SGD", {"lr": 0.1}, lambda o: S.PolynomialLR(o, total_iters=5,
                                                                     power=2.0), 8),
        "ChainedScheduler": ("SGD", {"lr": 0.1}, lambda o: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)]), 6),
        "ReduceLROnPlateau/max_abs": ("SGD", {"lr": 0.1}, lambda o: S.ReduceLROnPlateau(
            o, mode="max", threshold_mode="abs", threshold=0.01, patience=1, min_lr=0.03), 13),
    }


def run_scheduler(lib: Any, name: str) -> dict:
    """Per epoch: ``get_last_lr()``, and the groups' momentum or beta1."""
    opt_name_, kw, make, epochs = schedulers(lib)[name]
    a, b = (lib.nn.Parameter(lib.tensor(x)) for x in initial("float64"))
    opt = getattr(lib.optim, opt_name_)([{"params": [a]}, {"params": [b], "lr": 0.05}], **kw)
    sched = make(opt)
    out = {"lr": [list(map(float, sched.get_last_lr()))], "momentum": []}
    for k in range(epochs):
        opt.step()
        if "Plateau" in name:
            sched.step(_metric(k))
        else:
            sched.step()
        out["lr"].append(list(map(float, sched.get_last_lr())))
        out["momentum"].append([float(g["betas"][0]) if "betas" in g else
                                float(g.get("momentum", 0.0)) for g in opt.param_groups])
    out["group_lr"] = [float(g["lr"]) for g in opt.param_groups]
    return out


# (name, LBFGS keyword arguments): each run takes STEPS steps of a closure over a
# Rosenbrock valley and a quadratic bowl.
LBFGS_RUNS: list[tuple[str, dict]] = [
    ("default", {}),
    ("short-history", {"lr": 0.5, "max_iter": 4, "history_size": 2}),
    ("one-iter", {"max_iter": 1, "tolerance_change": 1e-12}),
    ("strong-wolfe", {"line_search_fn": "strong_wolfe"}),
    ("strong-wolfe-short", {"lr": 0.3, "max_iter": 5, "history_size": 3,
                            "line_search_fn": "strong_wolfe"}),
]


def run_lbfgs(lib: Any, kw: dict, dtype: str) -> dict:
    """Parameters and the returned loss after every ``step(closure)``, and the number of
    function evaluations."""
    xy = lib.nn.Parameter(lib.tensor(np.array([-1.2, 1.0], dtype)))
    w = lib.nn.Parameter(lib.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3).astype(dtype)))
    target = lib.tensor(np.arange(6.0).reshape(2, 3).astype(dtype))
    opt = lib.optim.LBFGS([xy, w], **kw)

    def closure():
        opt.zero_grad()
        rosen = (1 - xy[0]) ** 2 + 10 * (xy[1] - xy[0] ** 2) ** 2
        loss = rosen + ((w - target) ** 2 * (w + 2)).sum() * 0.1
        loss.backward()
        return loss

    steps, losses = [], []
    for _ in range(STEPS):
        losses.append(float(opt.step(closure)))
        steps.append([to_json(p) for p in (xy, w)])
    return {"steps": steps, "losses": losses,
            "func_evals": int(opt.state[xy]["func_evals"]),
            "n_iter": int(opt.state[xy]["n_iter"])}
