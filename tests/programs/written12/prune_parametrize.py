# In the manner of the PyTorch pruning and parametrizations tutorials (LeNet with
# ``torch.nn.utils.prune``; ``torch.nn.utils.parametrize``): ``prune.l1_unstructured(module,
# name="weight", amount=0.3)``, ``prune.ln_structured(..., n=2, dim=0)`` iterated on the
# same tensor, ``prune.global_unstructured`` over ``(module, "weight")`` pairs with
# ``pruning_method=prune.L1Unstructured``, sparsity reported by ``torch.sum(module.weight
# == 0)`` over ``nelement()``, the ``weight_orig``/``weight_mask`` entries of
# ``named_parameters``/``named_buffers``, fine-tuning the pruned network (the mask
# re-applied by the forward pre-hook), then ``prune.remove`` to make it permanent; and
# ``parametrize.register_parametrization(layer, "weight", Symmetric())`` on a Linear with
# its ``parametrizations.weight.original`` trained, evaluated under
# ``parametrize.cached()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune
import torch.nn.utils.parametrize as parametrize


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 8, 3)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, int(x.nelement() / x.shape[0]))
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1207)
    model = LeNet()
    sym = nn.Linear(16, 16)
    if weights is not None:
        model.load_state_dict({k[6:]: torch.tensor(v) for k, v in weights.items() if k.startswith("lenet.")})
        sym.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("sym.")})
    w = {**{"lenet." + k: v.detach().numpy().copy() for k, v in model.state_dict().items()},
         **{"sym." + k: v.detach().numpy().copy() for k, v in sym.state_dict().items()}}
    losses = []
    module = model.conv1
    prune.l1_unstructured(module, name="weight", amount=0.3)
    prune.l1_unstructured(module, name="bias", amount=2)
    prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
    losses += [float(torch.sum(module.weight == 0)), float(module.bias.abs().sum()),
               len(list(module.named_parameters())), len(list(module.named_buffers()))]
    parameters_to_prune = ((model.conv2, "weight"), (model.fc1, "weight"), (model.fc2, "weight"),
                           (model.fc3, "weight"))
    prune.global_unstructured(parameters_to_prune, pruning_method=prune.L1Unstructured, amount=0.2)
    for m, _ in parameters_to_prune:
        losses.append(100. * float(torch.sum(m.weight == 0)) / float(m.weight.nelement()))
    parametrize.register_parametrization(sym, "weight", Symmetric())
    losses.append(float((sym.weight - sym.weight.T).abs().max()))

    optimizer = torch.optim.SGD(list(model.parameters()) + list(sym.parameters()), lr=0.05, momentum=0.9)
    batches = [(torch.from_numpy(rng.standard_normal((6, 1, 14, 14)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, 4, 6))) for _ in range(3)]

    def train_step(data, target):
        optimizer.zero_grad()
        feats = model(data)
        h = sym(torch.cat([feats, feats], 1).repeat(1, 2))
        loss = F.cross_entropy(feats, target) + 0.01 * h.pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    for epoch in range(2):
        for data, target in batches:
            losses.append(step(data, target).item())
    losses += [float(torch.sum(model.fc1.weight == 0)), float(model.conv1.weight_orig.abs().sum()),
               float(sym.parametrizations.weight.original.abs().sum())]
    for m, name in parameters_to_prune + ((model.conv1, "weight"), (model.conv1, "bias")):
        prune.remove(m, name)
    losses += [len(list(model.named_parameters())), len(list(model.named_buffers())),
               float(torch.sum(model.conv1.weight == 0))]
    with torch.no_grad(), parametrize.cached():
        out = model(batches[0][0])
        losses += [float(out.abs().sum()), float(sym(torch.ones(1, 16)).sum())]
    return {"losses": losses, "weights": w, "fn": step}
