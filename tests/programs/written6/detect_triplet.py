# In the manner of object-detection heads written without torchvision and of metric-learning
# tutorials: a small backbone with classification and box-regression heads over a grid of
# anchors, ``box_iou`` by broadcasting (``torch.max(boxes1[:, None, :2], boxes2[:, :2])``,
# ``(rb - lt).clamp(min=0)``), anchors matched by ``iou.max(dim=1)`` with a threshold,
# offsets encoded with ``torch.log`` of width/height ratios, ``F.smooth_l1_loss(...,
# reduction='sum')`` over the positive anchors (a float mask) plus ``F.cross_entropy``
# normalised by ``num_pos.clamp(min=1)``; then an embedding network trained with
# ``nn.TripletMarginLoss(margin=1.0, p=2)`` on anchor/positive/negative batches, its
# ``state_dict`` round-tripped through ``torch.save``/``torch.load(weights_only=True)`` in an
# ``io.BytesIO`` into a fresh model, which is evaluated under ``model.eval()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import io

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1[:, None] + area2 - inter)


def make_anchors(grid, size):
    cs = (torch.arange(grid, dtype=torch.float32) + 0.5) / grid
    cy, cx = torch.meshgrid(cs, cs, indexing="ij")
    cx, cy = cx.reshape(-1), cy.reshape(-1)
    half = size / 2
    return torch.stack([cx - half, cy - half, cx + half, cy + half], dim=1)


def encode(anchors, gt):
    aw, ah = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    gw, gh = gt[:, 2] - gt[:, 0], gt[:, 3] - gt[:, 1]
    gx, gy = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return torch.stack([(gx - ax) / aw, (gy - ay) / ah, torch.log(gw / aw), torch.log(gh / ah)], dim=1)


class Detector(nn.Module):
    def __init__(self, num_classes, num_anchors):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.cls_head = nn.Conv2d(16, num_anchors * (num_classes + 1), 1)
        self.box_head = nn.Conv2d(16, num_anchors * 4, 1)
        self.num_classes = num_classes

    def forward(self, x):
        f = self.backbone(x)
        n = x.shape[0]
        cls = self.cls_head(f).permute(0, 2, 3, 1).reshape(n, -1, self.num_classes + 1)
        box = self.box_head(f).permute(0, 2, 3, 1).reshape(n, -1, 4)
        return cls, box


class EmbeddingNet(nn.Module):
    def __init__(self):
        super(EmbeddingNet, self).__init__()
        self.fc = nn.Sequential(nn.Linear(12, 32), nn.PReLU(), nn.Linear(32, 32), nn.PReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.fc(x)

    def get_embedding(self, x):
        return self.forward(x)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(71)
    det = Detector(num_classes=2, num_anchors=1)
    emb = EmbeddingNet()
    if weights is not None:
        det.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("det.")})
        emb.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("emb.")})
    w = {"det." + k: v.detach().numpy().copy() for k, v in det.state_dict().items()}
    w.update({"emb." + k: v.detach().numpy().copy() for k, v in emb.state_dict().items()})
    anchors = make_anchors(4, 0.3)
    images = torch.tensor(rng.random((6, 3, 16, 16)).astype(np.float32))
    gts, labels = [], []
    for i in range(6):
        xy = rng.uniform(0.05, 0.55, 2)
        wh = rng.uniform(0.2, 0.4, 2)
        gts.append(np.concatenate([xy, xy + wh]).astype(np.float32))
        labels.append(int(rng.integers(1, 3)))
    gt_boxes = torch.tensor(np.stack(gts))
    gt_labels = torch.tensor(labels)

    # Matching happens outside the step, on the data loader's side, as in most repositories.
    cls_targets, box_targets, pos_masks = [], [], []
    for i in range(6):
        iou = box_iou(anchors, gt_boxes[i:i + 1])
        best, idx = iou.max(dim=1)
        pos = best >= 0.2
        pos[iou[:, 0].argmax()] = True
        cls_targets.append(torch.where(pos, gt_labels[i], torch.zeros_like(gt_labels[i])))
        box_targets.append(encode(anchors, gt_boxes[i:i + 1].expand(anchors.shape[0], 4)))
        pos_masks.append(pos.float())
    cls_t, box_t, pos_m = torch.stack(cls_targets), torch.stack(box_targets), torch.stack(pos_masks)

    optimizer = torch.optim.SGD(det.parameters(), lr=0.05, momentum=0.9)

    def det_step(images, cls_t, box_t, pos_m):
        optimizer.zero_grad()
        cls_pred, box_pred = det(images)
        num_pos = pos_m.sum()
        loc = F.smooth_l1_loss(box_pred * pos_m.unsqueeze(-1), box_t * pos_m.unsqueeze(-1), reduction='sum')
        conf = F.cross_entropy(cls_pred.reshape(-1, 3), cls_t.reshape(-1), reduction='sum')
        loss = (loc + conf) / num_pos.clamp(min=1)
        loss.backward()
        optimizer.step()
        return loss, loc

    step = torch.compile(det_step) if compiled else det_step
    losses = [float(box_iou(anchors[:3], gt_boxes[:2]).sum())]
    for epoch in range(3):
        for i in range(0, 6, 3):
            loss, loc = step(images[i:i + 3], cls_t[i:i + 3], box_t[i:i + 3], pos_m[i:i + 3])
            losses += [loss.item(), loc.item()]

    protos = rng.normal(size=(3, 12)).astype(np.float32)
    def triplets(n):
        a = rng.integers(0, 3, n)
        b = (a + rng.integers(1, 3, n)) % 3
        jitter = lambda: 0.4 * rng.normal(size=(n, 12)).astype(np.float32)
        return (torch.tensor(protos[a] + jitter()), torch.tensor(protos[a] + jitter()),
                torch.tensor(protos[b] + jitter()))

    criterion = nn.TripletMarginLoss(margin=1.0, p=2)
    opt2 = torch.optim.SGD(emb.parameters(), lr=0.05, momentum=0.9)

    def triplet_step(anchor, positive, negative):
        opt2.zero_grad()
        loss = criterion(emb(anchor), emb(positive), emb(negative))
        loss.backward()
        opt2.step()
        return loss

    step2 = torch.compile(triplet_step) if compiled else triplet_step
    batches = [triplets(16) for _ in range(3)]
    for epoch in range(2):
        emb.train()
        for a, p, n in batches:
            losses.append(step2(a, p, n).item())
    buffer = io.BytesIO()
    torch.save(emb.state_dict(), buffer)
    buffer.seek(0)
    fresh = EmbeddingNet()
    fresh.load_state_dict(torch.load(buffer, weights_only=True))
    fresh.eval()
    with torch.no_grad():
        a, p, n = batches[0]
        d_ap = F.pairwise_distance(fresh.get_embedding(a), fresh.get_embedding(p))
        d_an = F.pairwise_distance(fresh.get_embedding(a), fresh.get_embedding(n))
        losses += [(d_ap < d_an).float().mean().item(), d_ap.mean().item()]
    return {"losses": losses, "weights": w, "fn": [step, step2]}
