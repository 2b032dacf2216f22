# In the manner of torchvision's DeepLabV3 (``models/segmentation``) and its reference
# training script (``references/segmentation``): a backbone wrapped to return an
# ``OrderedDict`` of named feature maps (``out`` and ``aux``), ``ASPP`` with dilated 3x3
# branches (``ASPPConv``), an image-pooling branch (``nn.AdaptiveAvgPool2d(1)`` then
# ``F.interpolate(x, size=size, mode="bilinear", align_corners=False)``), ``torch.cat(res,
# dim=1)`` and a projection with ``nn.Dropout(0.5)`` (eval-free training kept deterministic by
# ``p=0.0``), the classifier's output upsampled to the input by ``F.interpolate(...,
# mode="bilinear", align_corners=False)``, ``criterion`` summing ``nn.functional.
# cross_entropy(x, target, ignore_index=255)`` over the ``out`` and ``aux`` heads with
# ``losses["out"] + 0.5 * losses["aux"]``, parameter groups for backbone, classifier and aux
# head (``lr * 10`` on the aux head), a polynomial ``LambdaLR`` (``(1 - x / total) ** 0.9``)
# stepped per iteration, and ``ConfusionMatrix`` by ``torch.bincount(n * a[k].to(torch.
# int64) + b[k], minlength=n ** 2).reshape(n, n)`` with global accuracy and per-class IoU
# from ``torch.diag(h)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from collections import OrderedDict

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


class ASPPConv(nn.Sequential):
    def __init__(self, in_channels, out_channels, dilation):
        modules = [
            nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        ]
        super().__init__(*modules)


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels, out_channels):
        super().__init__(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.ReLU(),
        )

    def forward(self, x):
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels, atrous_rates, out_channels=8):
        super().__init__()
        modules = []
        modules.append(nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU()))
        rates = tuple(atrous_rates)
        for rate in rates:
            modules.append(ASPPConv(in_channels, out_channels, rate))
        modules.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(modules)
        self.project = nn.Sequential(
            nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Dropout(0.0),
        )

    def forward(self, x):
        _res = []
        for conv in self.convs:
            _res.append(conv(x))
        res = torch.cat(_res, dim=1)
        return self.project(res)


class DeepLabHead(nn.Sequential):
    def __init__(self, in_channels, num_classes, atrous_rates=(2, 3)):
        super().__init__(
            ASPP(in_channels, atrous_rates),
            nn.Conv2d(8, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, num_classes, 1),
        )


class FCNHead(nn.Sequential):
    def __init__(self, in_channels, channels):
        inter_channels = in_channels // 2
        layers = [
            nn.Conv2d(in_channels, inter_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(inter_channels),
            nn.ReLU(),
            nn.Conv2d(inter_channels, channels, 1),
        ]
        super().__init__(*layers)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.layer2 = nn.Sequential(nn.Conv2d(8, 12, 3, padding=2, dilation=2, bias=False), nn.BatchNorm2d(12), nn.ReLU(inplace=True))

    def forward(self, x):
        out = OrderedDict()
        x = self.layer1(x)
        out["aux"] = x
        out["out"] = self.layer2(x)
        return out


class DeepLabV3(nn.Module):
    def __init__(self, backbone, classifier, aux_classifier=None):
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x):
        input_shape = x.shape[-2:]
        features = self.backbone(x)
        result = OrderedDict()
        x = features["out"]
        x = self.classifier(x)
        x = F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)
        result["out"] = x
        if self.aux_classifier is not None:
            x = features["aux"]
            x = self.aux_classifier(x)
            x = F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)
            result["aux"] = x
        return result


def criterion(inputs, target):
    losses = {}
    for name, x in inputs.items():
        losses[name] = nn.functional.cross_entropy(x, target, ignore_index=255)
    if len(losses) == 1:
        return losses["out"]
    return losses["out"] + 0.5 * losses["aux"]


class ConfusionMatrix:
    def __init__(self, num_classes):
        self.num_classes = num_classes
        self.mat = None

    def update(self, a, b):
        n = self.num_classes
        if self.mat is None:
            self.mat = torch.zeros((n, n), dtype=torch.int64)
        with torch.inference_mode():
            k = (a >= 0) & (a < n)
            inds = n * a[k].to(torch.int64) + b[k]
            self.mat += torch.bincount(inds, minlength=n ** 2).reshape(n, n)

    def compute(self):
        h = self.mat.float()
        acc_global = torch.diag(h).sum() / h.sum()
        acc = torch.diag(h) / h.sum(1)
        iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
        return acc_global, acc, iu


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1305)
    num_classes = 4
    model = DeepLabV3(Backbone(), DeepLabHead(12, num_classes), FCNHead(8, num_classes))
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    params_to_optimize = [
        {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
    ]
    lr = 0.02
    params = [p for p in model.aux_classifier.parameters() if p.requires_grad]
    params_to_optimize.append({"params": params, "lr": lr * 10})
    optimizer = torch.optim.SGD(params_to_optimize, lr=lr, momentum=0.9, weight_decay=1e-4)
    iters = 6
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda x: (1 - x / (iters + 1)) ** 0.9)
    data = []
    for _ in range(3):
        image = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
        target = (image[:, 0] > 0.3).astype(np.int64) + (image[:, 1] > 0.5).astype(np.int64) * 2
        target[:, :2, :] = 255
        data.append((torch.from_numpy(image), torch.from_numpy(target)))

    def train_one_step(image, target):
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        return loss

    step = torch.compile(train_one_step) if compiled else train_one_step
    losses = []
    model.train()
    for epoch in range(2):
        for image, target in data:
            loss = step(image, target)
            losses += [loss.item(), optimizer.param_groups[0]["lr"]]
    model.eval()
    confmat = ConfusionMatrix(num_classes)
    with torch.inference_mode():
        for image, target in data:
            output = model(image)["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
    acc_global, acc, iu = confmat.compute()
    losses += [acc_global.item()] + [float(v) for v in torch.nan_to_num(iu)] + [int(confmat.mat.sum())]
    return {"losses": losses, "weights": w, "fn": step}
