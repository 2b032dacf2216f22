# In the manner of facebookresearch/poincare-embeddings (CC BY-NC 4.0), written as its
# early ``model.py``/``rsgd.py`` were: ``PoincareDistance`` as a ``torch.autograd.Function``
# with a hand-written ``backward`` (``ctx.save_for_backward``, ``ctx.eps``, a static
# ``grad`` helper, ``None`` for the ``eps`` argument); an ``nn.Embedding`` initialised by
# ``self.lt.weight.data.uniform_(-initrange, initrange)``; ``forward`` splitting each row
# of ``[u, v, negatives...]`` embeddings by ``e.narrow(1, 1, e.size(1) - 1)`` and
# ``e.narrow(1, 0, 1).expand_as(o)``; the loss ``F.cross_entropy`` of negative distances
# against zeros; a ``RiemannianSGD`` ``Optimizer`` subclass whose param group carries the
# ``rgrad`` and ``expm`` callables (``d_p.mul_(-lr)``, ``p.data.add_(d_p)``), stepped with
# a burn-in learning rate ``optimizer.step(lr=lr)``; the projection back into the ball by
# ``renorm_(2, 0, 1 - eps)``; and the mean rank of each edge's target among all nodes.
# The negatives are drawn by NumPy.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch as th
from torch import nn
from torch.autograd import Function
from torch.nn import functional as F
from torch.optim.optimizer import Optimizer, required

eps = 1e-5


class PoincareDistance(Function):
    @staticmethod
    def grad(x, v, sqnormx, sqnormv, sqdist, eps):
        alpha = (1 - sqnormx)
        beta = (1 - sqnormv)
        z = 1 + 2 * sqdist / (alpha * beta)
        a = ((sqnormv - 2 * th.sum(x * v, dim=-1) + 1) / th.pow(alpha, 2)).unsqueeze(-1).expand_as(x)
        a = a * x - v / alpha.unsqueeze(-1).expand_as(v)
        z = th.sqrt(th.pow(z, 2) - 1)
        z = th.clamp(z * beta, min=eps).unsqueeze(-1)
        return 4 * a / z.expand_as(x)

    @staticmethod
    def forward(ctx, u, v, eps=1e-5):
        squnorm = th.clamp(th.sum(u * u, dim=-1), 0, 1 - eps)
        sqvnorm = th.clamp(th.sum(v * v, dim=-1), 0, 1 - eps)
        sqdist = th.sum(th.pow(u - v, 2), dim=-1)
        ctx.eps = eps
        ctx.save_for_backward(u, v, squnorm, sqvnorm, sqdist)
        x = sqdist / ((1 - squnorm) * (1 - sqvnorm)) * 2 + 1
        z = th.sqrt(th.pow(x, 2) - 1)
        return th.log(x + z)

    @staticmethod
    def backward(ctx, g):
        u, v, squnorm, sqvnorm, sqdist = ctx.saved_tensors
        g = g.unsqueeze(-1)
        gu = PoincareDistance.grad(u, v, squnorm, sqvnorm, sqdist, ctx.eps)
        gv = PoincareDistance.grad(v, u, sqvnorm, squnorm, sqdist, ctx.eps)
        return g.expand_as(gu) * gu, g.expand_as(gv) * gv, None


class Embedding(nn.Module):
    def __init__(self, size, dim, dist=PoincareDistance):
        super(Embedding, self).__init__()
        self.dim = dim
        self.lt = nn.Embedding(size, dim)
        self.dist = dist
        self.init_weights()

    def init_weights(self, scale=1e-4):
        self.lt.weight.data.uniform_(-scale, scale)

    def forward(self, inputs):
        e = self.lt(inputs)
        o = e.narrow(1, 1, e.size(1) - 1)
        s = e.narrow(1, 0, 1).expand_as(o)
        dists = self.dist.apply(s, o).squeeze(-1)
        return -dists

    def loss(self, preds, targets, size_average=True):
        return F.cross_entropy(preds, targets)


def poincare_grad(p, d_p):
    p_sqnorm = th.clamp(th.sum(p * p, dim=-1, keepdim=True), 0, 1 - eps)
    d_p = d_p * ((1 - p_sqnorm) ** 2 / 4).expand_as(d_p)
    return d_p


def euclidean_retraction(p, d_p):
    p.add_(d_p)


class RiemannianSGD(Optimizer):
    def __init__(self, params, lr=required, rgrad=required, retraction=required):
        defaults = dict(lr=lr, rgrad=rgrad, retraction=retraction)
        super(RiemannianSGD, self).__init__(params, defaults)

    def step(self, lr=None, **kwargs):
        loss = None
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if lr is None:
                    lr = group['lr']
                d_p = group['rgrad'](p.data, d_p)
                d_p.mul_(-lr)
                group['retraction'](p.data, d_p)
        return loss


def run(weights=None, compiled=False):
    th.manual_seed(0)
    rng = np.random.default_rng(1009)
    # a small tree: node 0 the root, 1-3 its children, 4-12 grandchildren; edges to ancestors
    parent = [-1, 0, 0, 0] + [1 + (i // 3) for i in range(9)]
    n = len(parent)
    edges = []
    for v in range(1, n):
        u = parent[v]
        while u >= 0:
            edges.append((v, u))
            u = parent[u]
    edges = np.array(edges, dtype=np.int64)
    model = Embedding(n, 2)
    if weights is not None:
        model.load_state_dict({k: th.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = RiemannianSGD(model.parameters(), lr=1.0, rgrad=poincare_grad,
                              retraction=euclidean_retraction)
    nnegs, burnin, lr_mult = 4, 1, 0.1

    def train_step(inputs, targets, lr):
        optimizer.zero_grad()
        preds = model(inputs)
        loss = model.loss(preds, targets, size_average=True)
        loss.backward()
        optimizer.step(lr=lr)
        model.lt.weight.data.renorm_(2, 0, 1 - eps)
        return loss

    step = th.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        lr = 1.0 * lr_mult if epoch < burnin else 1.0
        perm = rng.permutation(len(edges))
        for b in range(2):
            batch = edges[perm[b * 8:(b + 1) * 8]]
            negs = rng.integers(0, n, size=(len(batch), nnegs))
            inputs = th.from_numpy(np.concatenate([batch, negs], 1))
            targets = th.zeros(inputs.size(0)).long()
            loss = step(inputs, targets, lr)
            losses.append(loss.item())
    with th.no_grad():
        emb = model.lt.weight
        ranks = []
        for v, u in edges[:10]:
            s = emb[v].unsqueeze(0).expand(n, 2)
            d = PoincareDistance.apply(s, emb)
            ranks.append(int((d < d[u]).sum()) + 1)
        losses.append(float(np.mean(ranks)))
        losses.append(float(emb.norm(dim=1).max()))
    return {"losses": losses, "weights": w, "fn": step}
