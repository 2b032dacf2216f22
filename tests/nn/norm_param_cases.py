"""Weight and spectral normalisation (old-style hooks and parametrizations) and orthogonal
parametrizations, written the same way for torch and dualgraph: ``run(t)`` with ``t``
either module gives a dict of float64 arrays (outputs, gradients, power-iteration buffers,
state dict keys as a joined string). Recorded from torch by record_norm_param_goldens.py."""

from __future__ import annotations

import numpy as np

_R = np.random.default_rng(7)
W = _R.standard_normal((3, 4))
B = _R.standard_normal(3)
X = _R.standard_normal((5, 4))
CW = _R.standard_normal((3, 2, 3))  # Conv1d(2, 3, 3)
CX = _R.standard_normal((2, 2, 6))
U3 = _R.standard_normal(3)
V4 = _R.standard_normal(4)
V6 = _R.standard_normal(6)


def _unit(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a)


def _linear(t):
    m = t.nn.Linear(4, 3).double()
    with t.no_grad():
        m.weight.copy_(t.tensor(W))
        m.bias.copy_(t.tensor(B))
    return m


def _conv(t):
    m = t.nn.Conv1d(2, 3, 3).double()
    with t.no_grad():
        m.weight.copy_(t.tensor(CW))
        m.bias.zero_()
    return m


def _set(t, buf, value) -> None:
    with t.no_grad():
        buf.copy_(t.tensor(value))


def _record(out: dict, name: str, m, y) -> None:
    y.pow(2).sum().backward()
    out[f"{name}/y"] = y.detach().numpy()
    for k, p in m.named_parameters():
        out[f"{name}/grad/{k}"] = p.grad.numpy()
    for k, v in m.state_dict().items():
        out[f"{name}/state/{k}"] = v.numpy()
    out[f"{name}/keys"] = np.array(" ".join(m.state_dict()))


def run(t) -> dict:
    out: dict = {}
    x = t.tensor(X)
    P = t.nn.utils.parametrizations
    for dim in (0, 1, None):
        m = P.weight_norm(_linear(t), dim=dim)
        _record(out, f"param_weight_norm_{dim}", m, m(x))
        m = t.nn.utils.weight_norm(_linear(t), dim=dim)
        _record(out, f"hook_weight_norm_{dim}", m, m(x))
    m = P.weight_norm(_conv(t), dim=1)
    _record(out, "param_weight_norm_conv", m, m(t.tensor(CX)))

    # Spectral norm: the random start vectors are replaced by fixed ones, then three
    # training-mode forwards (one power-iteration step each) and one in eval mode.
    m = P.spectral_norm(_linear(t))
    sn = m.parametrizations.weight[0]
    _set(t, sn._u, _unit(U3))
    _set(t, sn._v, _unit(V4))
    ys = [m(x) for _ in range(3)]
    m.eval()
    ys.append(m(x))
    _record(out, "param_spectral_norm", m, sum(y * (k + 1) for k, y in enumerate(ys)))

    m = t.nn.utils.spectral_norm(_linear(t))
    _set(t, m.weight_u, _unit(U3))
    _set(t, m.weight_v, _unit(V4))
    ys = [m(x) for _ in range(3)]
    m.eval()
    ys.append(m(x))
    _record(out, "hook_spectral_norm", m, sum(y * (k + 1) for k, y in enumerate(ys)))

    m = P.spectral_norm(_conv(t), n_power_iterations=2)
    sn = m.parametrizations.weight[0]
    _set(t, sn._u, _unit(U3))
    _set(t, sn._v, _unit(V6))
    _record(out, "param_spectral_norm_conv", m, m(t.tensor(CX)))

    # Removing keeps the normalised weight as a plain parameter.
    m = P.weight_norm(_linear(t))
    t.nn.utils.parametrize.remove_parametrizations(m, "weight")
    out["removed_param/keys"] = np.array(" ".join(m.state_dict()))
    out["removed_param/weight"] = m.weight.detach().numpy()
    m = t.nn.utils.spectral_norm(_linear(t))
    _set(t, m.weight_u, _unit(U3))
    _set(t, m.weight_v, _unit(V4))
    t.nn.utils.remove_spectral_norm(m)
    out["removed_hook/keys"] = np.array(" ".join(m.state_dict()))
    out["removed_hook/weight"] = m.weight.detach().numpy()
    return out


EW = _R.standard_normal((6, 4)) * 0.8
IDX = np.array([[0, 2, 2], [5, 1, 0]])
COEF = _R.standard_normal((2, 3, 4))


def run_embedding(t) -> dict:
    """``Embedding(max_norm=)`` and ``F.embedding(max_norm=)``: the looked-up rows are
    renormalised in place before the lookup; the gradient goes to the weight."""
    out: dict = {}
    idx = t.tensor(IDX)
    for p in (2.0, 1.0, 3.0, float("inf")):
        e = t.nn.Embedding(6, 4, max_norm=1.0, norm_type=p).double()
        with t.no_grad():
            e.weight.copy_(t.tensor(EW))
        y = e(idx)
        (y * t.tensor(COEF)).sum().backward()
        out[f"emb_{p}/y"] = y.detach().numpy()
        out[f"emb_{p}/weight"] = e.weight.detach().numpy()
        out[f"emb_{p}/grad"] = e.weight.grad.numpy()
        out[f"emb_{p}/repr"] = np.array(repr(e))
    w = t.tensor(EW, requires_grad=True)
    with t.no_grad():
        w2 = w * 1.0
    w2.requires_grad_()
    y = t.nn.functional.embedding(idx, w2, padding_idx=2, max_norm=0.5)
    (y * t.tensor(COEF)).sum().backward()
    out["emb_functional/y"] = y.detach().numpy()
    out["emb_functional/weight"] = w2.detach().numpy()
    out["emb_functional/grad"] = w2.grad.numpy()
    return out


_RO = np.random.default_rng(11)
OW = _RO.standard_normal((4, 4))
OW2 = _RO.standard_normal((4, 4))
OT = _RO.standard_normal((5, 3))  # a tall weight: Linear(3, 5)
OX = _RO.standard_normal((2, 4))
OX3 = _RO.standard_normal((2, 3))


def _linear_from(t, w):
    m = t.nn.Linear(w.shape[1], w.shape[0]).double()
    with t.no_grad():
        m.weight.copy_(t.tensor(w))
        m.bias.zero_()
    return m


def run_orthogonal(t) -> dict:
    """``parametrizations.orthogonal``: each map, with and without the trivialization;
    assigning a weight; removing the parametrization. Where the trivialization completes a
    non-square weight with random columns, only the weight (which does not depend on them)
    is recorded."""
    out: dict = {}
    P = t.nn.utils.parametrizations
    x, x3 = t.tensor(OX), t.tensor(OX3)
    for mp in ("matrix_exp", "cayley", "householder"):
        for triv in (True, False):
            name = f"orth_{mp}_{'triv' if triv else 'direct'}"
            m = P.orthogonal(_linear_from(t, OW), orthogonal_map=mp, use_trivialization=triv)
            _record(out, name, m, m(x))
            m = P.orthogonal(_linear_from(t, OT), orthogonal_map=mp, use_trivialization=triv)
            if triv:
                out[f"{name}_tall/weight"] = m.weight.detach().numpy()
            else:
                _record(out, f"{name}_tall", m, m(x3))
    m = P.orthogonal(_linear_from(t, OW))
    m.weight = t.tensor(OW2)
    out["orth_assigned/weight"] = m.weight.detach().numpy()
    out["orth_assigned/original"] = m.parametrizations.weight.original.detach().numpy()
    t.nn.utils.parametrize.remove_parametrizations(m, "weight")
    out["orth_removed/keys"] = np.array(" ".join(m.state_dict()))
    out["orth_removed/weight"] = m.weight.detach().numpy()
    return out
