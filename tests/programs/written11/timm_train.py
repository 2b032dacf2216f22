# In the manner of timm's train.py around a small ResMLP/ViT-style model (Apache-2.0
# licence): ``model.apply(self._init_weights)`` with ``trunc_normal_(m.weight, std=.02)``
# and ``nn.init.constant_``, ``DropPath``/``Mlp`` blocks with ``nn.GELU``,
# ``param_groups_weight_decay`` (no decay for 1-D parameters and ``no_weight_decay()``
# names), ``ModelEmaV2`` (``deepcopy(model)``, ``.eval()``, an update under
# ``torch.no_grad()`` zipping ``state_dict().values()`` with ``ema_v.copy_(...)``),
# ``CrossEntropyLoss(label_smoothing=0.1)``, a ``LinearLR`` warm-up chained to
# ``CosineAnnealingLR`` by ``SequentialLR`` stepped per update, ``clip_grad_norm_`` whose
# returned norm is logged with ``.item()``, ``AverageMeter``s, an ``accuracy`` by
# ``topk(maxk, 1, True, True)`` and ``pred.t().eq(target.reshape(1, -1).expand_as(pred))``,
# and validation of both the model and its EMA under ``model.eval()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import trunc_normal_

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def drop_path(x, drop_prob: float = 0., training: bool = False, scale_by_keep: bool = True):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, drop_prob: float = 0., scale_by_keep: bool = True):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob
        self.scale_by_keep = scale_by_keep

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)

    def extra_repr(self):
        return f'drop_prob={round(self.drop_prob, 3):0.3f}'


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Affine(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones((1, 1, dim)))
        self.beta = nn.Parameter(torch.zeros((1, 1, dim)))

    def forward(self, x):
        return torch.addcmul(self.beta, self.alpha, x)


class ResBlock(nn.Module):
    def __init__(self, dim, seq_len, mlp_ratio=4, drop_path=0., init_values=1e-4):
        super().__init__()
        self.norm1 = Affine(dim)
        self.linear_tokens = nn.Linear(seq_len, seq_len)
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = Affine(dim)
        self.mlp_channels = Mlp(dim, int(dim * mlp_ratio))
        self.ls1 = nn.Parameter(init_values * torch.ones(dim))
        self.ls2 = nn.Parameter(init_values * torch.ones(dim))

    def forward(self, x):
        x = x + self.drop_path(self.ls1 * self.linear_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2))
        x = x + self.drop_path(self.ls2 * self.mlp_channels(self.norm2(x)))
        return x


class ResMLP(nn.Module):
    def __init__(self, num_classes=5, img_size=8, patch_size=4, in_chans=1, embed_dim=16, depth=2,
                 drop_path_rate=0.1):
        super().__init__()
        self.num_classes = num_classes
        num_patches = (img_size // patch_size) ** 2
        self.stem = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]
        self.blocks = nn.Sequential(*[ResBlock(embed_dim, num_patches, drop_path=dpr[i], init_values=0.1)
                                      for i in range(depth)])
        self.norm = Affine(embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        trunc_normal_(self.cls_token, std=.02)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode='fan_out')
            nn.init.zeros_(m.bias)

    @torch.jit.ignore
    def no_weight_decay(self):
        return {'cls_token'}

    def forward_features(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.blocks(x)
        return self.norm(x)

    def forward_head(self, x, pre_logits: bool = False):
        x = x.mean(dim=1) + self.cls_token[:, 0]
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))


def param_groups_weight_decay(model: nn.Module, weight_decay=1e-5, no_weight_decay_list=()):
    no_weight_decay_list = set(no_weight_decay_list)
    decay = []
    no_decay = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [
        {'params': no_decay, 'weight_decay': 0.},
        {'params': decay, 'weight_decay': weight_decay}]


class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999, device=None):
        super(ModelEmaV2, self).__init__()
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device
        if self.device is not None:
            self.module.to(device=device)

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if self.device is not None:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1. - self.decay) * m)

    def set(self, model):
        self._update(model, update_fn=lambda e, m: m)


class AverageMeter:
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1101)
    model = ResMLP(drop_path_rate=0.0)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    model.to(device)
    model_ema = ModelEmaV2(model, decay=0.9)
    params = param_groups_weight_decay(model, 0.05, model.no_weight_decay())
    optimizer = torch.optim.AdamW(params, lr=2e-3, betas=(0.9, 0.999))
    updates = 8
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=3)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=updates - 3, eta_min=1e-5)
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[3])
    train_loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1).to(device)
    validate_loss_fn = nn.CrossEntropyLoss().to(device)
    batches = [(torch.from_numpy(rng.standard_normal((6, 1, 8, 8)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, 5, 6))) for _ in range(4)]
    val = (torch.from_numpy(rng.standard_normal((10, 1, 8, 8)).astype(np.float32)),
           torch.from_numpy(rng.integers(0, 5, 10)))

    def train_step(input, target):
        output = model(input)
        loss = train_loss_fn(output, target)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, norm_type=2.0)
        optimizer.step()
        model_ema.update(model)
        return loss, grad_norm

    step = torch.compile(train_step) if compiled else train_step
    losses = []

    def validate(m):
        losses_m, top1_m = AverageMeter(), AverageMeter()
        m.eval()
        with torch.no_grad():
            input, target = val[0].to(device), val[1].to(device)
            output = m(input)
            loss = validate_loss_fn(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses_m.update(loss.item(), input.size(0))
            top1_m.update(acc1.item(), output.size(0))
        return [losses_m.avg, top1_m.avg, acc5.item()]

    num_updates = 0
    for epoch in range(2):
        model.train()
        losses_m = AverageMeter()
        for input, target in batches:
            input, target = input.to(device), target.to(device)
            loss, grad_norm = step(input, target)
            losses_m.update(loss.item(), input.size(0))
            num_updates += 1
            lr_scheduler.step()
            losses += [loss.item(), grad_norm.item(), optimizer.param_groups[0]['lr']]
        losses.append(losses_m.avg)
        losses += validate(model) + validate(model_ema.module)
    return {"losses": losses, "weights": w, "fn": step}
