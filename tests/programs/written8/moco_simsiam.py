# In the manner of facebookresearch/moco's moco/builder.py and facebookresearch/simsiam's
# simsiam/builder.py and main_simsiam.py (CC-BY-NC 4.0 licences): MoCo v2 with a key
# encoder copied from the query encoder (``param_k.data.copy_(param_q.data)``,
# ``param_k.requires_grad = False``), a momentum update under ``@torch.no_grad()``
# (``param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)``), a queue
# registered as a buffer (``nn.functional.normalize(torch.randn(dim, K), dim=0)``) with a
# ``queue_ptr`` buffer read by ``int(self.queue_ptr)`` and advanced in place
# (``self.queue[:, ptr:ptr + batch_size] = keys.T``), logits from ``torch.einsum("nc,nc->n",
# [q, k]).unsqueeze(-1)`` and ``torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])``,
# ``torch.zeros(logits.shape[0], dtype=torch.long)`` labels and a temperature; SimSiam with a
# projector whose last BatchNorm1d has ``affine=False`` (``self.encoder.fc[6].bias.requires_grad
# = False``), a predictor, ``nn.CosineSimilarity(dim=1)`` against ``z.detach()``, and SGD
# parameter groups with a ``fix_lr`` key read by a cosine ``adjust_learning_rate``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn


def encoder(num_classes=8, in_dim=12):
    model = nn.Sequential()
    model.add_module("body", nn.Sequential(nn.Linear(in_dim, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU()))
    model.fc = nn.Linear(16, num_classes)
    return model


class MoCo(nn.Module):
    def __init__(self, base_encoder, dim=8, K=24, m=0.9, T=0.2, mlp=True):
        super(MoCo, self).__init__()
        self.K = K
        self.m = m
        self.T = T
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)
        if mlp:
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        q = self.encoder_q(im_q)
        q = nn.functional.normalize(q, dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = self.encoder_k(im_k)
            k = nn.functional.normalize(k, dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1)
        logits /= self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels


class SimSiam(nn.Module):
    def __init__(self, base_encoder, dim=8, pred_dim=4):
        super(SimSiam, self).__init__()
        self.encoder = base_encoder(num_classes=dim)
        prev_dim = self.encoder.fc.weight.shape[1]
        self.encoder.fc = nn.Sequential(nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True),
                                        nn.Linear(prev_dim, prev_dim, bias=False),
                                        nn.BatchNorm1d(prev_dim),
                                        nn.ReLU(inplace=True),
                                        self.encoder.fc,
                                        nn.BatchNorm1d(dim, affine=False))
        self.encoder.fc[6].bias.requires_grad = False
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False),
                                       nn.BatchNorm1d(pred_dim),
                                       nn.ReLU(inplace=True),
                                       nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        z1 = self.encoder(x1)
        z2 = self.encoder(x2)
        p1 = self.predictor(z1)
        p2 = self.predictor(z2)
        return p1, p2, z1.detach(), z2.detach()


def adjust_learning_rate(optimizer, init_lr, epoch, epochs):
    cur_lr = init_lr * 0.5 * (1. + math.cos(math.pi * epoch / epochs))
    for param_group in optimizer.param_groups:
        if 'fix_lr' in param_group and param_group['fix_lr']:
            param_group['lr'] = init_lr
        else:
            param_group['lr'] = cur_lr


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(804)
    moco = MoCo(encoder)
    simsiam = SimSiam(encoder)
    models = {"moco": moco, "simsiam": simsiam}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss()
    opt_moco = torch.optim.SGD(filter(lambda p: p.requires_grad, moco.parameters()), 0.05,
                               momentum=0.9, weight_decay=1e-4)
    init_lr = 0.05
    optim_params = [{'params': simsiam.encoder.parameters(), 'fix_lr': False},
                    {'params': simsiam.predictor.parameters(), 'fix_lr': True}]
    opt_sim = torch.optim.SGD(optim_params, init_lr, momentum=0.9, weight_decay=1e-4)
    cos = nn.CosineSimilarity(dim=1)

    def moco_step(im_q, im_k):
        output, target = moco(im_q=im_q, im_k=im_k)
        loss = criterion(output, target)
        acc = (output.argmax(1) == target).float().mean()
        opt_moco.zero_grad()
        loss.backward()
        opt_moco.step()
        return loss, acc

    def simsiam_step(x1, x2):
        p1, p2, z1, z2 = simsiam(x1=x1, x2=x2)
        loss = -(cos(p1, z2).mean() + cos(p2, z1).mean()) * 0.5
        opt_sim.zero_grad()
        loss.backward()
        opt_sim.step()
        return loss

    steps = [torch.compile(moco_step), torch.compile(simsiam_step)] if compiled else [moco_step, simsiam_step]
    base = [rng.normal(size=(8, 12)).astype(np.float32) for _ in range(3)]
    views = [(torch.tensor(b + 0.1 * rng.normal(size=b.shape).astype(np.float32)),
              torch.tensor(b + 0.1 * rng.normal(size=b.shape).astype(np.float32))) for b in base]
    losses = [float(sum(p.requires_grad for p in moco.parameters())),
              float(sum(p.requires_grad for p in simsiam.parameters())),
              float(moco.queue.norm(dim=0).sum())]
    moco.train()
    simsiam.train()
    for epoch in range(3):
        adjust_learning_rate(opt_sim, init_lr, epoch, 3)
        for x1, x2 in views:
            loss, acc = steps[0](x1, x2)
            losses += [loss.item(), acc.item(), float(moco.queue_ptr.item())]
            losses.append(steps[1](x1, x2).item())
        losses += [g['lr'] for g in opt_sim.param_groups]
    losses.append(float(moco.queue.norm(dim=0).sum()))
    losses.append(float(sum((pk - pq).abs().sum() for pk, pq in zip(moco.encoder_k.parameters(),
                                                                      moco.encoder_q.parameters()))))
    return {"losses": losses, "weights": w, "fn": steps}
