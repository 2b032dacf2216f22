# In the manner of facebookresearch/swav's main_swav.py and its ResNet wrapper (CC BY-NC
# licence; the idioms, not the code): multi-crop inputs grouped by resolution with
# ``torch.cumsum(torch.unique_consecutive(torch.tensor([inp.shape[-1] for inp in inputs]),
# return_counts=True)[1], 0)`` and ``torch.cat(inputs[start_idx:end_idx])``, a projection
# head ending in ``nn.functional.normalize(x, dim=1, p=2)`` and an ``nn.Linear`` of
# prototypes without bias, the prototypes renormalised under ``torch.no_grad()`` through
# ``weight.data.clone()`` and ``copy_``, the ``@torch.no_grad()`` Sinkhorn-Knopp
# ``distributed_sinkhorn`` (``torch.exp(out / epsilon).t()``, in-place ``Q /=`` row and
# column sums, an ``all_reduce`` only when ``dist.is_available() and
# dist.is_initialized()``), the swapped-prediction loss over ``np.delete(np.arange(
# np.sum(nmb_crops)), crop_id)``, the prototypes' gradients cancelled by ``p.grad = None``
# during the first iterations, SGD with a hand-set warm-up then cosine ``lr_schedule``
# array written into ``param_group["lr"]``, and a queue of past outputs in the later epochs.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

epsilon = 0.05
sinkhorn_iterations = 3
temperature = 0.1
nmb_crops = [2, 2]
crops_for_assign = [0, 1]
freeze_prototypes_niters = 2


class Backbone(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(width, 2 * width, 3, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(2 * width)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(self.bn2(self.conv2(x)))
        return torch.flatten(self.avgpool(x), 1)


class SwAVModel(nn.Module):
    def __init__(self, output_dim=6, hidden_mlp=12, nmb_prototypes=5, normalize=True):
        super().__init__()
        self.backbone = Backbone()
        self.l2norm = normalize
        self.projection_head = nn.Sequential(
            nn.Linear(16, hidden_mlp), nn.BatchNorm1d(hidden_mlp), nn.ReLU(inplace=True),
            nn.Linear(hidden_mlp, output_dim))
        self.prototypes = nn.Linear(output_dim, nmb_prototypes, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward_head(self, x):
        x = self.projection_head(x)
        if self.l2norm:
            x = nn.functional.normalize(x, dim=1, p=2)
        return x, self.prototypes(x)

    def forward(self, inputs):
        if not isinstance(inputs, list):
            inputs = [inputs]
        idx_crops = torch.cumsum(torch.unique_consecutive(
            torch.tensor([inp.shape[-1] for inp in inputs]),
            return_counts=True,
        )[1], 0)
        start_idx = 0
        for end_idx in idx_crops:
            _out = self.backbone(torch.cat(inputs[start_idx: end_idx]))
            if start_idx == 0:
                output = _out
            else:
                output = torch.cat((output, _out))
            start_idx = end_idx
        return self.forward_head(output)


@torch.no_grad()
def distributed_sinkhorn(out):
    Q = torch.exp(out / epsilon).t()
    world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    B = Q.shape[1] * world_size
    K = Q.shape[0]
    sum_Q = torch.sum(Q)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(sum_Q)
    Q /= sum_Q
    for it in range(sinkhorn_iterations):
        sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sum_of_rows)
        Q /= sum_of_rows
        Q /= K
        Q /= torch.sum(Q, dim=0, keepdim=True)
        Q /= B
    Q *= B
    return Q.t()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1105)
    model = SwAVModel()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-6)
    epochs, iters, warmup_epochs = 3, 2, 1
    base_lr, final_lr, start_warmup = 0.1, 0.001, 0.0
    warmup_lr_schedule = np.linspace(start_warmup, base_lr, iters * warmup_epochs)
    it_ = np.arange(iters * (epochs - warmup_epochs))
    cosine_lr_schedule = np.array([final_lr + 0.5 * (base_lr - final_lr) * (1 + math.cos(math.pi * t / (iters * (epochs - warmup_epochs))))
                                   for t in it_])
    lr_schedule = np.concatenate((warmup_lr_schedule, cosine_lr_schedule))
    bs = 4
    loader = [[torch.from_numpy(rng.standard_normal((bs, 3, s, s)).astype(np.float32)) for s in (8, 8, 4, 4)]
              for _ in range(iters)]
    queue_length = 8

    def train_step(inputs, iteration, queue, use_the_queue):
        with torch.no_grad():
            w = model.prototypes.weight.data.clone()
            w = nn.functional.normalize(w, dim=1, p=2)
            model.prototypes.weight.copy_(w)
        embedding, output = model(inputs)
        embedding = embedding.detach()
        bs = inputs[0].size(0)
        loss = 0
        for i, crop_id in enumerate(crops_for_assign):
            with torch.no_grad():
                out = output[bs * crop_id: bs * (crop_id + 1)].detach()
                if queue is not None:
                    if use_the_queue or not torch.all(queue[i, -1, :] == 0):
                        use_the_queue = True
                        out = torch.cat((torch.mm(queue[i], model.prototypes.weight.t()), out))
                    queue[i, bs:] = queue[i, :-bs].clone()
                    queue[i, :bs] = embedding[crop_id * bs: (crop_id + 1) * bs]
                q = distributed_sinkhorn(out)[-bs:]
            subloss = 0
            for v in np.delete(np.arange(np.sum(nmb_crops)), crop_id):
                x = output[bs * v: bs * (v + 1)] / temperature
                subloss -= torch.mean(torch.sum(q * nn.functional.log_softmax(x, dim=1), dim=1))
            loss += subloss / (np.sum(nmb_crops) - 1)
        loss /= len(crops_for_assign)
        optimizer.zero_grad()
        loss.backward()
        if iteration < freeze_prototypes_niters:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    queue = None
    for epoch in range(epochs):
        if epoch == 2 and queue is None:
            queue = torch.zeros(len(crops_for_assign), queue_length, 6)
        use_the_queue = False
        model.train()
        for it, inputs in enumerate(loader):
            iteration = epoch * len(loader) + it
            for param_group in optimizer.param_groups:
                param_group["lr"] = lr_schedule[iteration]
            loss = step(inputs, iteration, queue, use_the_queue)
            losses.append(loss.item())
        losses.append(float(model.prototypes.weight.norm(dim=1).mean()))
    model.eval()
    with torch.no_grad():
        emb, out = model(loader[0][0])
        losses += distributed_sinkhorn(out).sum(0).tolist() + out[0].tolist()
    return {"losses": losses, "weights": w, "fn": step}
