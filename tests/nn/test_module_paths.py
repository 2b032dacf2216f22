"""The module paths PyTorch programs import names from (``from torch.nn.parameter import
Parameter``, ``from torch.nn.modules.utils import _pair``, custom losses on ``_Loss`` and
``_WeightedLoss``, schedulers on ``_LRScheduler``, ``reset_parameters`` with
``init._calculate_fan_in_and_fan_out``), imported under the name ``torch``."""

from __future__ import annotations

import importlib
import math

import pytest

import dualgraph as dg
from tests.programs.harness import bound_torch

PATHS = [
    ("torch.nn.parameter", "Parameter", dg.nn.Parameter),
    ("torch.nn.parameter", "Buffer", dg.nn.Buffer),
    ("torch.nn.modules.batchnorm", "BatchNorm2d", dg.nn.BatchNorm2d),
    ("torch.nn.modules.batchnorm", "_BatchNorm", dg.nn.modules.normalization._BatchNorm),
    ("torch.nn.modules.instancenorm", "InstanceNorm2d", dg.nn.InstanceNorm2d),
    ("torch.nn.modules.transformer", "TransformerEncoderLayer", dg.nn.TransformerEncoderLayer),
    ("torch.nn.modules.rnn", "LSTM", dg.nn.LSTM),
    ("torch.nn.modules.activation", "MultiheadAttention", dg.nn.MultiheadAttention),
    ("torch.nn.modules.loss", "_Loss", dg.nn.modules.loss._Loss),
    ("torch.nn.modules.module", "Module", dg.nn.Module),
    ("torch.optim.lr_scheduler", "LRScheduler", dg.optim.lr_scheduler.LRScheduler),
    ("torch.autograd.variable", "Variable", dg.autograd.Variable),
    ("torch.utils.hooks", "RemovableHandle", dg.nn.hooks.RemovableHandle),
]


@pytest.mark.parametrize(("path", "name", "want"), PATHS)
def test_a_torch_module_path_names_the_same_object(path: str, name: str, want: object) -> None:
    with bound_torch(dg):
        assert getattr(importlib.import_module(path), name) is want


def test_size_helpers_repeat_a_value_and_keep_a_tuple() -> None:
    from dualgraph.nn.modules.utils import _ntuple, _pair, _quadruple, _single, _triple

    assert _single(2) == (2,)
    assert _pair(3) == (3, 3)
    assert _pair((1, 2)) == (1, 2)
    assert _pair([4, 5]) == (4, 5)
    assert _triple(1) == (1, 1, 1)
    assert _quadruple(0) == (0, 0, 0, 0)
    assert _ntuple(5)(7) == (7,) * 5


def test_fan_helpers_answer_as_torch_does() -> None:
    w = dg.zeros(4, 3, 2, 5)
    assert dg.nn.init._calculate_fan_in_and_fan_out(w) == (30, 40)
    assert dg.nn.init._calculate_correct_fan(w, "FAN_OUT") == 40
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        dg.nn.init._calculate_fan_in_and_fan_out(dg.zeros(3))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        dg.nn.init._calculate_correct_fan(w, "fan_avg")


def test_a_custom_layer_written_against_torch_paths_trains_eagerly_and_compiled() -> None:
    """A pygcn-style layer: ``Parameter`` from ``torch.nn.parameter``, ``Module`` from
    ``torch.nn.modules.module``, ``reset_parameters`` from the weight's fan."""
    with bound_torch(dg):
        from torch.nn.init import _calculate_fan_in_and_fan_out
        from torch.nn.modules.module import Module
        from torch.nn.parameter import Parameter

        class GraphConvolution(Module):
            def __init__(self, n_in: int, n_out: int) -> None:
                super().__init__()
                self.weight = Parameter(dg.empty(n_in, n_out))
                self.bias = Parameter(dg.empty(n_out))
                self.reset_parameters()

            def reset_parameters(self) -> None:
                fan_in, _ = _calculate_fan_in_and_fan_out(self.weight.t())
                bound = 1 / math.sqrt(fan_in)
                self.weight.data.uniform_(-bound, bound)
                self.bias.data.uniform_(-bound, bound)

            def forward(self, x, adj):
                return adj @ (x @ self.weight) + self.bias

    dg.manual_seed(0)
    x, adj = dg.randn(5, 3), dg.eye(5) * 0.5 + 0.1
    losses = {}
    for compiled in (False, True):
        dg.manual_seed(1)
        layer = GraphConvolution(3, 2)
        opt = dg.optim.SGD(layer.parameters(), lr=0.1)

        def step(layer=layer, opt=opt):
            opt.zero_grad()
            loss = (layer(x, adj) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        losses[compiled] = [float(f()) for _ in range(3)]
    dg.testing.assert_close(losses[True], losses[False], rtol=1e-6, atol=1e-7)


def test_custom_losses_and_schedulers_subclass_the_private_bases() -> None:
    from dualgraph.nn.modules.loss import _Loss, _WeightedLoss
    from dualgraph.optim.lr_scheduler import _LRScheduler

    class Weighted(_WeightedLoss):
        def forward(self, a, b):
            per = self.weight * (a - b) ** 2
            return per.sum() if self.reduction == "sum" else per.mean()

    class Plain(_Loss):
        def __init__(self) -> None:
            # torch's positional (size_average, reduce, reduction)
            super().__init__(None, None, "sum")

        def forward(self, a, b):
            return (a - b).abs().sum()

    w = dg.tensor([1.0, 2.0, 3.0])
    loss = Weighted(w, reduction="sum")
    assert "weight" in dict(loss.named_buffers())
    assert float(loss(dg.ones(3), dg.zeros(3))) == 6.0
    assert Plain().reduction == "sum"
    assert dg.nn.MSELoss(size_average=False).reduction == "sum"
    assert dg.nn.L1Loss(None, False).reduction == "none"

    class Halving(_LRScheduler):
        def get_lr(self):
            return [g["initial_lr"] * 0.5 ** self.last_epoch for g in self.optimizer.param_groups]

    p = dg.nn.Parameter(dg.ones(1))
    opt = dg.optim.SGD([p], lr=1.0)
    sched = Halving(opt)
    lrs = []
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [0.5, 0.25, 0.125]
