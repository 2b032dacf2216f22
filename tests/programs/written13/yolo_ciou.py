# In the manner of YOLOv5's training loss (``utils/loss.py`` ``ComputeLoss`` and
# ``utils/metrics.py`` ``bbox_iou``): a small detection head whose output is
# ``x.view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()`` per level, anchors
# kept as a buffer, targets matched to anchors inside the loss by the width/height ratio
# (``torch.max(r, 1 / r).max(2)[0] < anchor_t`` and boolean indexing ``t[j]``), boxes
# decoded by ``pxy.sigmoid() * 2 - 0.5`` and ``(pwh.sigmoid() * 2) ** 2 * anchors``, the
# complete IoU (``torch.atan`` aspect term, ``alpha`` under ``torch.no_grad()``, areas by
# ``clamp(0)``), objectness targets written by index ``tobj[b, a, gj, gi] = iou.detach()
# .clamp(0).type(tobj.dtype)``, class targets by ``torch.full_like(pcls, cn)`` with
# ``t[range(n), tcls[i]] = cp`` from ``smooth_BCE``, ``BCEWithLogitsLoss(pos_weight=)``, the
# per-level ``balance`` and ``loss * bs``, ``torch.cat((lbox, lobj, lcls)).detach()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn


def smooth_BCE(eps=0.1):
    return 1.0 - 0.5 * eps, 0.5 * eps


def bbox_iou(box1, box2, xywh=True, CIoU=False, eps=1e-7):
    if xywh:
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * \
            (torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    if CIoU:
        cw = torch.max(b1_x2, b2_x2) - torch.min(b1_x1, b2_x1)
        ch = torch.max(b1_y2, b2_y2) - torch.min(b1_y1, b2_y1)
        c2 = cw ** 2 + ch ** 2 + eps
        rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
        v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
        with torch.no_grad():
            alpha = v / (v - iou + (1 + eps))
        return iou - (rho2 / c2 + v * alpha)
    return iou


class Detect(nn.Module):
    def __init__(self, nc=3, anchors=(), ch=()):
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.register_buffer('anchors', torch.tensor(anchors).float().view(self.nl, -1, 2))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)

    def forward(self, x):
        for i in range(self.nl):
            x[i] = self.m[i](x[i])
            bs, _, ny, nx = x[i].shape
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        return x


class TinyYOLO(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.p3 = nn.Sequential(nn.Conv2d(8, 12, 3, 2, 1, bias=False), nn.BatchNorm2d(12), nn.SiLU())
        self.p4 = nn.Sequential(nn.Conv2d(12, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.SiLU())
        # anchors in grid units of each level
        self.detect = Detect(nc, anchors=((1, 1.5, 2, 1, 2.5, 2.5), (1, 1, 1.5, 2, 2, 1.2)), ch=(12, 16))
        self.stride = torch.tensor([4., 8.])

    def forward(self, x):
        x = self.stem(x)
        a = self.p3(x)
        b = self.p4(a)
        return self.detect([a, b])


class ComputeLoss:
    def __init__(self, model, hyp):
        self.hyp = hyp
        self.BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([hyp['cls_pw']]))
        self.BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([hyp['obj_pw']]))
        self.cp, self.cn = smooth_BCE(eps=hyp.get('label_smoothing', 0.0))
        m = model.detect
        self.balance = [4.0, 1.0]
        self.na, self.nc, self.nl, self.anchors = m.na, m.nc, m.nl, m.anchors

    def __call__(self, p, targets):
        lcls = torch.zeros(1)
        lbox = torch.zeros(1)
        lobj = torch.zeros(1)
        tcls, tbox, indices, anchors = self.build_targets(p, targets)
        for i, pi in enumerate(p):
            b, a, gj, gi = indices[i]
            tobj = torch.zeros(pi.shape[:4], dtype=pi.dtype)
            n = b.shape[0]
            if n:
                pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self.nc), 1)
                pxy = pxy.sigmoid() * 2 - 0.5
                pwh = (pwh.sigmoid() * 2) ** 2 * anchors[i]
                pbox = torch.cat((pxy, pwh), 1)
                iou = bbox_iou(pbox, tbox[i], CIoU=True).squeeze()
                lbox += (1.0 - iou).mean()
                iou = iou.detach().clamp(0).type(tobj.dtype)
                tobj[b, a, gj, gi] = iou
                t = torch.full_like(pcls, self.cn)
                t[range(n), tcls[i]] = self.cp
                lcls += self.BCEcls(pcls, t)
            obji = self.BCEobj(pi[..., 4], tobj)
            lobj += obji * self.balance[i]
        lbox *= self.hyp['box']
        lobj *= self.hyp['obj']
        lcls *= self.hyp['cls']
        bs = tobj.shape[0]
        return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()

    def build_targets(self, p, targets):
        # targets: (image, class, x, y, w, h), normalised
        na, nt = self.na, targets.shape[0]
        tcls, tbox, indices, anch = [], [], [], []
        gain = torch.ones(7)
        ai = torch.arange(na).float().view(na, 1).repeat(1, nt)
        targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)
        for i in range(self.nl):
            anchors, shape = self.anchors[i], p[i].shape
            gain[2:6] = torch.tensor(shape)[[3, 2, 3, 2]]
            t = targets * gain
            r = t[..., 4:6] / anchors[:, None]
            j = torch.max(r, 1 / r).max(2)[0] < self.hyp['anchor_t']
            t = t[j]
            bc, gxy, gwh, a = t.split((2, 2, 2, 1), 1)
            a, (b, c) = a.long().view(-1), bc.long().T
            gij = gxy.long()
            gi, gj = gij.T
            indices.append((b, a, gj.clamp_(0, shape[2] - 1), gi.clamp_(0, shape[3] - 1)))
            tbox.append(torch.cat((gxy - gij, gwh), 1))
            anch.append(anchors[a])
            tcls.append(c)
        return tcls, tbox, indices, anch


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1301)
    model = TinyYOLO(nc=3)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    hyp = {'box': 0.05, 'obj': 1.0, 'cls': 0.5, 'cls_pw': 1.2, 'obj_pw': 0.8,
           'anchor_t': 4.0, 'label_smoothing': 0.1}
    compute_loss = ComputeLoss(model, hyp)
    g0, g1 = [], []
    for v in model.modules():
        if hasattr(v, 'bias') and isinstance(v.bias, nn.Parameter):
            g1.append(v.bias)
        if isinstance(v, nn.BatchNorm2d):
            g0.append(v.weight)
        elif hasattr(v, 'weight') and isinstance(v.weight, nn.Parameter):
            g0.append(v.weight)
    optimizer = torch.optim.SGD(g0, lr=0.01, momentum=0.937, nesterov=True)
    optimizer.add_param_group({'params': g1, 'weight_decay': 0.0})
    batches = []
    for _ in range(5):
        imgs = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
        nt = 5
        tg = np.concatenate([rng.integers(0, 2, (nt, 1)), rng.integers(0, 3, (nt, 1)),
                             rng.uniform(0.1, 0.9, (nt, 2)), rng.uniform(0.1, 0.6, (nt, 2))], 1)
        batches.append((torch.from_numpy(imgs), torch.from_numpy(tg.astype(np.float32))))

    def train_step(imgs, targets):
        pred = model(imgs)
        loss, loss_items = compute_loss(pred, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, loss_items

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(2):
        for imgs, targets in batches[:3]:
            loss, items = step(imgs, targets)
            losses.append(loss.item())
            losses += items.tolist()
    return {"losses": losses, "weights": w, "fn": step}
