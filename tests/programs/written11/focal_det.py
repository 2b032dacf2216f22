# In the manner of the focal-loss code people copy into detectors and segmenters
# (clcarwin/focal_loss_pytorch's ``FocalLoss``, MIT licence: ``torch.Tensor([alpha,
# 1-alpha])``, N,C,H,W logits flattened by ``view``/``transpose``/``contiguous().view``,
# ``logpt.gather(1, target)``, ``pt = Variable(logpt.data.exp())``, ``self.alpha.type() !=
# input.data.type()`` then ``type_as``, ``(1-pt)**self.gamma``) and torchvision's detection
# losses (BSD licence: ``sigmoid_focal_loss`` with ``alpha_t``, ``generalized_box_iou_loss``
# by ``unbind(dim=-1)``, ``torch.max``/``torch.min`` corners and ``intsctk[mask] = ...``),
# in a tiny FCOS-style dense detector: per-location class logits, ``F.relu`` box distances
# decoded against a ``meshgrid`` of locations, a centerness map; foreground by
# ``gt_classes >= 0``, ``num_foreground = foregroud_mask.sum().item()``,
# ``bbox_regression[foregroud_mask]``, SGD with momentum and weight decay, ``MultiStepLR``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class FocalLoss(nn.Module):
    def __init__(self, gamma=0, alpha=None, size_average=True):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.alpha = alpha
        if isinstance(alpha, (float, int)):
            self.alpha = torch.Tensor([alpha, 1 - alpha])
        if isinstance(alpha, list):
            self.alpha = torch.Tensor(alpha)
        self.size_average = size_average

    def forward(self, input, target):
        if input.dim() > 2:
            input = input.view(input.size(0), input.size(1), -1)
            input = input.transpose(1, 2)
            input = input.contiguous().view(-1, input.size(2))
        target = target.view(-1, 1)
        logpt = F.log_softmax(input, dim=1)
        logpt = logpt.gather(1, target)
        logpt = logpt.view(-1)
        pt = Variable(logpt.data.exp())
        if self.alpha is not None:
            if self.alpha.type() != input.data.type():
                self.alpha = self.alpha.type_as(input.data)
            at = self.alpha.gather(0, target.data.view(-1))
            logpt = logpt * Variable(at)
        loss = -1 * (1 - pt) ** self.gamma * logpt
        if self.size_average:
            return loss.mean()
        return loss.sum()


def sigmoid_focal_loss(inputs, targets, alpha: float = 0.25, gamma: float = 2, reduction: str = "none"):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    if reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


def _loss_inter_union(boxes1, boxes2):
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)
    intsctk = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk
    return intsctk, unionk


def generalized_box_iou_loss(boxes1, boxes2, reduction="none", eps=1e-7):
    intsctk, unionk = _loss_inter_union(boxes1, boxes2)
    iouk = intsctk / (unionk + eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)
    area_c = (xc2 - xc1) * (yc2 - yc1)
    miouk = iouk - ((area_c - unionk) / (area_c + eps))
    loss = 1 - miouk
    if reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


class TinyFCOS(nn.Module):
    def __init__(self, num_classes=3, width=8, stride=4):
        super().__init__()
        self.num_classes = num_classes
        self.stride = stride
        self.backbone = nn.Sequential(
            nn.Conv2d(3, width, 3, 2, 1), nn.GroupNorm(2, width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, 2, 1), nn.GroupNorm(2, width), nn.ReLU(inplace=True))
        self.cls_logits = nn.Conv2d(width, num_classes + 1, 3, padding=1)
        self.bbox_reg = nn.Conv2d(width, 4, 3, padding=1)
        self.bbox_ctrness = nn.Conv2d(width, 1, 3, padding=1)
        for layer in [self.cls_logits, self.bbox_reg, self.bbox_ctrness]:
            torch.nn.init.normal_(layer.weight, std=0.01)
            torch.nn.init.constant_(layer.bias, 0)

    def forward(self, images):
        f = self.backbone(images)
        return self.cls_logits(f), F.relu(self.bbox_reg(f)) * self.stride, self.bbox_ctrness(f)

    def locations(self, h, w):
        ys, xs = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                indexing="ij")
        return torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1) * self.stride + self.stride // 2


def make_targets(rng, n, size, stride, num_classes):
    """Per image: one box; each location inside it is foreground of its class."""
    hw = size // stride
    ys, xs = np.meshgrid(np.arange(hw), np.arange(hw), indexing="ij")
    cx = (xs.reshape(-1) * stride + stride // 2).astype(np.float32)
    cy = (ys.reshape(-1) * stride + stride // 2).astype(np.float32)
    classes = np.full((n, hw * hw), -1, np.int64)
    boxes = np.zeros((n, hw * hw, 4), np.float32)
    ctr = np.zeros((n, hw * hw), np.float32)
    for i in range(n):
        x1, y1 = rng.uniform(0, size / 2, 2)
        bw, bh = rng.uniform(size / 3, size / 2, 2)
        box = np.array([x1, y1, x1 + bw, y1 + bh], np.float32)
        inside = (cx > box[0]) & (cx < box[2]) & (cy > box[1]) & (cy < box[3])
        classes[i, inside] = rng.integers(0, num_classes)
        boxes[i] = box
        l, t, r, b = cx - box[0], cy - box[1], box[2] - cx, box[3] - cy
        lr = np.clip(np.minimum(l, r) / np.maximum(np.maximum(l, r), 1e-6), 0, None)
        tb = np.clip(np.minimum(t, b) / np.maximum(np.maximum(t, b), 1e-6), 0, None)
        ctr[i] = np.where(inside, np.sqrt(lr * tb), 0.0)
    return classes, boxes, ctr


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1103)
    num_classes, size = 3, 16
    model = TinyFCOS(num_classes)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = FocalLoss(gamma=2, alpha=[0.25, 0.25, 0.25, 0.1])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3, 5], gamma=0.5)
    locations = model.locations(size // model.stride, size // model.stride)
    data = []
    for _ in range(3):
        images = torch.from_numpy(rng.standard_normal((2, 3, size, size)).astype(np.float32))
        classes, boxes, ctr = make_targets(rng, 2, size, model.stride, num_classes)
        data.append((images, torch.from_numpy(classes), torch.from_numpy(boxes), torch.from_numpy(ctr)))

    def train_step(images, gt_classes, gt_boxes, gt_ctrness):
        cls_logits, bbox_regression, bbox_ctrness = model(images)
        n = images.shape[0]
        foregroud_mask = gt_classes >= 0
        num_foreground = foregroud_mask.sum().item()
        # background is the last class of the softmax focal loss
        targets = torch.where(foregroud_mask, gt_classes, torch.full_like(gt_classes, num_classes))
        loss_cls = criterion(cls_logits, targets)
        bbox_regression = bbox_regression.flatten(2).permute(0, 2, 1)
        pred_boxes = torch.cat([locations - bbox_regression[..., :2], locations + bbox_regression[..., 2:]], dim=-1)
        loss_bbox_reg = generalized_box_iou_loss(pred_boxes[foregroud_mask], gt_boxes[foregroud_mask],
                                                 reduction="sum")
        ctr_logits = bbox_ctrness.flatten(1)
        loss_ctr = sigmoid_focal_loss(ctr_logits, gt_ctrness, reduction="sum")
        loss = loss_cls + (loss_bbox_reg + loss_ctr) / max(1, num_foreground)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, loss_cls, loss_bbox_reg

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(3):
        for images, gt_classes, gt_boxes, gt_ctrness in data:
            loss, loss_cls, loss_bbox_reg = step(images, gt_classes, gt_boxes, gt_ctrness)
            losses += [loss.item(), loss_cls.item(), loss_bbox_reg.item()]
        scheduler.step()
    model.eval()
    with torch.no_grad():
        cls_logits, bbox_regression, bbox_ctrness = model(data[0][0])
        scores = torch.sqrt(torch.softmax(cls_logits, dim=1)[:, :num_classes] * torch.sigmoid(bbox_ctrness))
        top = scores.flatten(1).topk(3, dim=1)
        losses += top.values.flatten().tolist()
        alone = sigmoid_focal_loss(torch.tensor([[-1.0, 0.5, 2.0]]), torch.tensor([[0.0, 1.0, 1.0]]), reduction="mean")
        losses.append(alone.item())
    return {"losses": losses, "weights": w, "fn": step}
