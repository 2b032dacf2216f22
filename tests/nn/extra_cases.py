"""The cases of tests/nn/test_layers_extra.py, recorded from torch by
record_extra_goldens.py: (name, module constructor, input shape)."""

from __future__ import annotations

import numpy as np

CASES = [
    ("ZeroPad2d", lambda nn: nn.ZeroPad2d((1, 2, 0, 1)), (2, 3, 4, 5)),
    ("ZeroPad1d", lambda nn: nn.ZeroPad1d(2), (2, 3, 4)),
    ("ConstantPad3d", lambda nn: nn.ConstantPad3d(1, 3.5), (1, 2, 2, 3, 3)),
    ("ReflectionPad2d", lambda nn: nn.ReflectionPad2d(2), (2, 3, 4, 5)),
    ("ReflectionPad1d", lambda nn: nn.ReflectionPad1d((1, 2)), (2, 3, 4)),
    ("ReplicationPad2d", lambda nn: nn.ReplicationPad2d((1, 0, 2, 1)), (2, 3, 4, 5)),
    ("ReplicationPad3d", lambda nn: nn.ReplicationPad3d(1), (1, 2, 2, 3, 3)),
    ("CircularPad1d", lambda nn: nn.CircularPad1d(2), (2, 3, 4)),
    ("PReLU", lambda nn: nn.PReLU(), (2, 3, 4)),
    ("PReLU-channels", lambda nn: nn.PReLU(3, init=0.1), (2, 3, 4, 4)),
    ("Threshold", lambda nn: nn.Threshold(0.1, 20.0), (3, 4)),
    ("Hardshrink", lambda nn: nn.Hardshrink(0.3), (3, 4)),
    ("Softshrink", lambda nn: nn.Softshrink(0.3), (3, 4)),
    ("Tanhshrink", lambda nn: nn.Tanhshrink(), (3, 4)),
    ("ConvTranspose1d", lambda nn: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1,
                                                      output_padding=1), (2, 3, 5)),
    ("ConvTranspose1d-groups", lambda nn: nn.ConvTranspose1d(4, 2, 2, groups=2, bias=False,
                                                             dilation=2), (4, 6)),
    ("Dropout2d-eval", lambda nn: nn.Dropout2d(0.5).eval(), (2, 3, 4, 4)),
]


def inputs(i: int) -> tuple[np.ndarray, np.ndarray]:
    """Case ``i``'s float64 input and the output cotangent's seed."""
    rng = np.random.default_rng(100 + i)
    return rng.standard_normal(CASES[i][2]), rng


def run(torch, i: int, weights: dict | None = None) -> dict:
    _, make, _ = CASES[i]
    torch.manual_seed(i)
    module = make(torch.nn).double()
    if weights is not None:
        module.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    x_np, rng = inputs(i)
    x = torch.tensor(x_np, requires_grad=True)
    y = module(x)
    cot = rng.standard_normal(tuple(y.shape))
    (y * torch.tensor(cot)).sum().backward()
    out = {"y": y.detach().numpy(), "x_grad": x.grad.numpy()}
    for k, p in module.named_parameters():
        out[f"grad.{k}"] = p.grad.numpy()
    out.update({f"param.{k}": v.detach().numpy() for k, v in module.state_dict().items()})
    return out


# (name, EmbeddingBag keywords, input, offsets, per_sample_weights?)
BAGS = [
    ("mean-offsets", {"mode": "mean"}, [1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 2, 5], False),
    ("sum-offsets-weights", {"mode": "sum"}, [1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 4], True),
    ("max-offsets", {"mode": "max"}, [1, 2, 4, 5, 4, 3, 2, 9], [0, 1, 1, 6], False),
    ("mean-2d-padding", {"mode": "mean", "padding_idx": 0}, [[1, 0, 3], [0, 0, 0], [4, 4, 2]],
     None, False),
    ("sum-last-offset", {"mode": "sum", "include_last_offset": True},
     [1, 2, 4, 5, 4, 3, 2, 9], [0, 2, 5, 8], False),
]


def run_bag(torch, i: int, weight: np.ndarray | None = None) -> dict:
    _, kwargs, idx, offsets, weighted = BAGS[i]
    torch.manual_seed(i)
    bag = torch.nn.EmbeddingBag(10, 3, **kwargs).double()
    if weight is not None:
        bag.load_state_dict({"weight": torch.tensor(weight)})
    rng = np.random.default_rng(200 + i)
    psw = torch.tensor(rng.standard_normal(len(idx)), requires_grad=True) if weighted else None
    off = None if offsets is None else torch.tensor(offsets)
    y = bag(torch.tensor(idx), off, per_sample_weights=psw)
    cot = rng.standard_normal(tuple(y.shape))
    (y * torch.tensor(cot)).sum().backward()
    out = {"y": y.detach().numpy(), "grad.weight": bag.weight.grad.numpy(),
           "weight": bag.weight.detach().numpy()}
    if weighted:
        out["grad.psw"] = psw.grad.numpy()
    return out
