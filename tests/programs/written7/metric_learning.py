# In the manner of the common metric-learning losses written in plain PyTorch (HobbitLong's
# SupContrast losses.py, BSD-2-Clause; the ArcFace/ArcMarginProduct heads of the
# insightface-style repositories, MIT; KaiyangZhou's CenterLoss, MIT; batch-hard triplet
# mining as in the person re-id code): ``torch.cdist`` for pairwise distances, batch-hard
# mining with ``dist * mask`` and ``masked_fill``/``max(1)``/``min(1)``, ``F.normalize``
# of features and of the class weights, ``F.linear`` cosines with ``torch.sqrt((1.0 -
# torch.pow(cosine, 2)).clamp(0, 1))``, ``torch.where(cosine > th, phi, cosine - mm)``, a
# one-hot by ``scatter_(1, label.view(-1, 1).long(), 1)``, SupCon's ``torch.div(torch.matmul
# (anchor, contrast.T), temperature)`` with ``logits_max.detach()``, ``torch.scatter(
# torch.ones_like(mask), 1, torch.arange(n).view(-1, 1), 0)`` and ``mask.repeat``,
# ``torch.cat(torch.unbind(features, dim=1), dim=0)``, the center loss's
# ``distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)``, ``labels.unsqueeze(1).expand``
# and ``clamp(min=1e-12, max=1e+12)``, and a second SGD optimizer for the centers whose
# gradients are rescaled by ``param.grad.data *= (1. / weight)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.07, contrast_mode='all', base_temperature=0.07):
        super(SupConLoss, self).__init__()
        self.temperature = temperature
        self.contrast_mode = contrast_mode
        self.base_temperature = base_temperature

    def forward(self, features, labels=None, mask=None):
        device = (torch.device('cuda') if features.is_cuda else torch.device('cpu'))
        if len(features.shape) < 3:
            raise ValueError('`features` needs to be [bsz, n_views, ...],'
                             'at least 3 dimensions are required')
        if len(features.shape) > 3:
            features = features.view(features.shape[0], features.shape[1], -1)
        batch_size = features.shape[0]
        if labels is not None and mask is not None:
            raise ValueError('Cannot define both `labels` and `mask`')
        elif labels is None and mask is None:
            mask = torch.eye(batch_size, dtype=torch.float32).to(device)
        elif labels is not None:
            labels = labels.contiguous().view(-1, 1)
            if labels.shape[0] != batch_size:
                raise ValueError('Num of labels does not match num of features')
            mask = torch.eq(labels, labels.T).float().to(device)
        else:
            mask = mask.float().to(device)
        contrast_count = features.shape[1]
        contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
        if self.contrast_mode == 'one':
            anchor_feature = features[:, 0]
            anchor_count = 1
        elif self.contrast_mode == 'all':
            anchor_feature = contrast_feature
            anchor_count = contrast_count
        else:
            raise ValueError('Unknown mode: {}'.format(self.contrast_mode))
        anchor_dot_contrast = torch.div(torch.matmul(anchor_feature, contrast_feature.T), self.temperature)
        logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
        logits = anchor_dot_contrast - logits_max.detach()
        mask = mask.repeat(anchor_count, contrast_count)
        logits_mask = torch.scatter(
            torch.ones_like(mask), 1,
            torch.arange(batch_size * anchor_count).view(-1, 1).to(device), 0)
        mask = mask * logits_mask
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
        mask_pos_pairs = mask.sum(1)
        mask_pos_pairs = torch.where(mask_pos_pairs < 1e-6, 1, mask_pos_pairs)
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask_pos_pairs
        loss = - (self.temperature / self.base_temperature) * mean_log_prob_pos
        loss = loss.view(anchor_count, batch_size).mean()
        return loss


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super(ArcMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.s = s
        self.m = m
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)
        self.easy_margin = easy_margin
        self.cos_m = math.cos(m)
        self.sin_m = math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        one_hot = torch.zeros(cosine.size(), device=input.device)
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)
        output *= self.s
        return output


class CenterLoss(nn.Module):
    def __init__(self, num_classes=4, feat_dim=8, use_gpu=False):
        super(CenterLoss, self).__init__()
        self.num_classes = num_classes
        self.feat_dim = feat_dim
        self.use_gpu = use_gpu
        self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim))

    def forward(self, x, labels):
        batch_size = x.size(0)
        distmat = torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) + \
            torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes, batch_size).t()
        distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)
        classes = torch.arange(self.num_classes).long()
        if self.use_gpu:
            classes = classes.cuda()
        labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
        mask = labels.eq(classes.expand(batch_size, self.num_classes))
        dist = distmat * mask.float()
        loss = dist.clamp(min=1e-12, max=1e+12).sum() / batch_size
        return loss


def batch_hard_triplet_loss(embeddings, labels, margin=0.3):
    dist = torch.cdist(embeddings, embeddings, p=2)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    hardest_pos = (dist * same.float()).max(1)[0]
    hardest_neg = dist.masked_fill(same, float('inf')).min(1)[0]
    return F.relu(hardest_pos - hardest_neg + margin).mean()


class Embedder(nn.Module):
    def __init__(self, in_dim=10, feat_dim=8):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, feat_dim))
        self.head = nn.Sequential(nn.Linear(feat_dim, 16), nn.ReLU(), nn.Linear(16, 6))

    def forward(self, x):
        feat = self.backbone(x)
        return feat, F.normalize(self.head(feat), dim=1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(107)
    model = Embedder()
    arc = ArcMarginProduct(8, 4, s=8.0, m=0.3)
    center_loss = CenterLoss()
    parts = {"model": model, "arc": arc, "center": center_loss}
    if weights is not None:
        for name, part in parts.items():
            part.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                  if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, part in parts.items()
         for k, v in part.state_dict().items()}
    supcon = SupConLoss(temperature=0.5, base_temperature=0.5)
    optimizer = torch.optim.SGD(list(model.parameters()) + list(arc.parameters()), lr=0.05, momentum=0.9)
    optimizer_centloss = torch.optim.SGD(center_loss.parameters(), lr=0.5)
    weight_cent = 0.1
    data = []
    for _ in range(3):
        labels = np.repeat(np.arange(4), 2)
        base = rng.normal(size=(4, 10))[labels]
        views = np.stack([base + 0.3 * rng.normal(size=base.shape) for _ in range(2)], 1)
        data.append((torch.tensor(views.astype(np.float32)), torch.tensor(labels)))

    def train_step(views, labels):
        bsz = labels.shape[0]
        images = torch.cat([views[:, 0], views[:, 1]], dim=0)
        feats, projections = model(images)
        f1, f2 = torch.split(projections, [bsz, bsz], dim=0)
        features = torch.cat([f1.unsqueeze(1), f2.unsqueeze(1)], dim=1)
        loss_supcon = supcon(features, labels)
        loss_simclr = supcon(features)
        all_labels = labels.repeat(2)
        loss_arc = F.cross_entropy(arc(feats, all_labels), all_labels)
        loss_trip = batch_hard_triplet_loss(feats, all_labels)
        loss_cent = center_loss(feats, all_labels)
        loss = loss_supcon + 0.5 * loss_simclr + loss_arc + loss_trip + loss_cent * weight_cent
        optimizer.zero_grad()
        optimizer_centloss.zero_grad()
        loss.backward()
        optimizer.step()
        for param in center_loss.parameters():
            param.grad.data *= (1. / weight_cent)
        optimizer_centloss.step()
        return loss, loss_supcon, loss_arc, loss_trip, loss_cent

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for views, labels in data:
            losses += [t.item() for t in step(views, labels)]
    with torch.no_grad():
        feats, proj = model(data[0][0][:, 0])
        losses += torch.cdist(feats, feats).flatten()[:8].tolist()
        losses += torch.cdist(feats[:3], feats[3:], p=1).flatten().tolist()
        losses += SupConLoss(contrast_mode='one')(torch.stack([proj, proj], 1), data[0][1]).reshape(1).tolist()
    return {"losses": losses, "weights": w, "fn": step}
