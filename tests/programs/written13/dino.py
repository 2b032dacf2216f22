# In the manner of facebookresearch/dino's ``main_dino.py`` and ``utils.py``: a
# ``DINOHead`` (an MLP to a bottleneck, ``F.normalize(x, dim=-1, p=2)``, a last layer
# ``nn.utils.weight_norm(nn.Linear(..., bias=False))`` with ``weight_g.data.fill_(1)`` and
# ``weight_g.requires_grad = False``, ``_init_weights`` by ``trunc_normal_`` and
# ``nn.init.constant_``), a ``MultiCropWrapper`` running crops of each resolution together
# (``torch.cumsum(torch.unique_consecutive(torch.tensor([inp.shape[-1] for inp in x]),
# return_counts=True)[1], 0)``), the teacher a copy loaded by ``load_state_dict`` with
# ``p.requires_grad = False``, ``DINOLoss`` (a ``center`` buffer, a teacher temperature
# schedule by ``np.concatenate((np.linspace(...), np.ones(...)))`` indexed by epoch,
# ``chunk`` over crops, ``torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)``,
# ``update_center`` under ``@torch.no_grad()``), parameter groups with no weight decay for
# biases and norms (``name.endswith(".bias") or len(param.shape) == 1``), per-iteration
# learning rate and weight decay set from ``cosine_scheduler`` arrays into
# ``param_groups``, ``cancel_gradients_last_layer`` (``p.grad = None`` in the first epoch),
# ``clip_gradients`` by each ``p.grad.data.norm(2)`` and ``p.grad.data.mul_(clip_coef)``,
# and the teacher's momentum update ``param_k.data.mul_(m).add_((1 - m) *
# param_q.detach().data)`` under ``torch.no_grad()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, use_bn=False, norm_last_layer=True, nlayers=3,
                 hidden_dim=24, bottleneck_dim=8):
        super().__init__()
        nlayers = max(nlayers, 1)
        layers = [nn.Linear(in_dim, hidden_dim)]
        if use_bn:
            layers.append(nn.BatchNorm1d(hidden_dim))
        layers.append(nn.GELU())
        for _ in range(nlayers - 2):
            layers.append(nn.Linear(hidden_dim, hidden_dim))
            layers.append(nn.GELU())
        layers.append(nn.Linear(hidden_dim, bottleneck_dim))
        self.mlp = nn.Sequential(*layers)
        self.apply(self._init_weights)
        self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        if norm_last_layer:
            self.last_layer.weight_g.requires_grad = False

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.mlp(x)
        x = F.normalize(x, dim=-1, p=2)
        x = self.last_layer(x)
        return x


class Backbone(nn.Module):
    """A small convnet standing in for the ViT: global pooling makes it size-agnostic."""

    def __init__(self, embed_dim=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, embed_dim)
        self.head = nn.Identity()

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = x.mean(dim=(2, 3))
        return self.head(self.fc(self.norm(x)))


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        backbone.fc, backbone.head = backbone.fc, nn.Identity()
        self.backbone = backbone
        self.head = head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        idx_crops = torch.cumsum(torch.unique_consecutive(
            torch.tensor([inp.shape[-1] for inp in x]),
            return_counts=True,
        )[1], 0)
        start_idx, output = 0, torch.empty(0)
        for end_idx in idx_crops:
            _out = self.backbone(torch.cat(x[start_idx: end_idx]))
            output = torch.cat((output, _out))
            start_idx = end_idx
        return self.head(output)


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp,
                 warmup_teacher_temp_epochs, nepochs, student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp = student_temp
        self.center_momentum = center_momentum
        self.ncrops = ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp
        ))

    def forward(self, student_output, teacher_output, epoch):
        student_out = student_output / self.student_temp
        student_out = student_out.chunk(self.ncrops)
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
        teacher_out = teacher_out.detach().chunk(2)
        total_loss = 0
        n_loss_terms = 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True)
        batch_center = batch_center / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def get_params_groups(model):
    regularized = []
    not_regularized = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if name.endswith(".bias") or len(param.shape) == 1:
            not_regularized.append(param)
        else:
            regularized.append(param)
    return [{'params': regularized}, {'params': not_regularized, 'weight_decay': 0.}]


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_schedule = np.array([])
    warmup_iters = warmup_epochs * niter_per_ep
    if warmup_epochs > 0:
        warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters)
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    schedule = np.concatenate((warmup_schedule, schedule))
    assert len(schedule) == epochs * niter_per_ep
    return schedule


def clip_gradients(model, clip):
    norms = []
    for name, p in model.named_parameters():
        if p.grad is not None:
            param_norm = p.grad.data.norm(2)
            norms.append(param_norm.item())
            clip_coef = clip / (param_norm + 1e-6)
            if clip_coef < 1:
                p.grad.data.mul_(clip_coef)
    return norms


def cancel_gradients_last_layer(epoch, model, freeze_last_layer):
    if epoch >= freeze_last_layer:
        return
    for n, p in model.named_parameters():
        if "last_layer" in n:
            p.grad = None


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1303)
    out_dim = 12
    student = MultiCropWrapper(Backbone(), DINOHead(16, out_dim, norm_last_layer=True))
    teacher = MultiCropWrapper(Backbone(), DINOHead(16, out_dim))
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False
    if weights is not None:
        student.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith('s.')})
        teacher.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith('t.')})
    w = {'s.' + k: v.detach().numpy().copy() for k, v in student.state_dict().items()}
    w.update({'t.' + k: v.detach().numpy().copy() for k, v in teacher.state_dict().items()})
    epochs, niter = 3, 2
    dino_loss = DINOLoss(out_dim, 4, warmup_teacher_temp=0.04, teacher_temp=0.07,
                         warmup_teacher_temp_epochs=2, nepochs=epochs)
    optimizer = torch.optim.AdamW(get_params_groups(student))
    lr_schedule = cosine_scheduler(0.005, 1e-4, epochs, niter, warmup_epochs=1)
    wd_schedule = cosine_scheduler(0.04, 0.4, epochs, niter)
    momentum_schedule = cosine_scheduler(0.9, 1, epochs, niter)
    data = [[torch.from_numpy(rng.standard_normal((2, 3, s, s)).astype(np.float32)) for s in (8, 8, 4, 4)]
            for _ in range(niter)]

    def train_step(images, epoch, m):
        teacher_output = teacher(images[:2])
        student_output = student(images)
        loss = dino_loss(student_output, teacher_output, epoch)
        optimizer.zero_grad()
        loss.backward()
        norms = clip_gradients(student, 3.0)
        cancel_gradients_last_layer(epoch, student, 1)
        optimizer.step()
        with torch.no_grad():
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
        return loss, norms

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(epochs):
        for i, images in enumerate(data):
            it = niter * epoch + i
            for j, param_group in enumerate(optimizer.param_groups):
                param_group["lr"] = lr_schedule[it]
                if j == 0:
                    param_group["weight_decay"] = wd_schedule[it]
            loss, norms = step(images, epoch, momentum_schedule[it])
            losses += [loss.item(), sum(norms)]
    losses.append(float(dino_loss.center.abs().sum()))
    losses.append(float(teacher.head.last_layer.weight_v.abs().sum()))
    return {"losses": losses, "weights": w, "fn": step}
