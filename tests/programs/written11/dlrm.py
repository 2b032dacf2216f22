# In the manner of facebookresearch/dlrm's dlrm_s_pytorch.py (MIT licence): ``create_mlp``
# from a NumPy array of layer sizes with weights drawn by ``np.random.normal`` and set by
# ``LL.weight.data = torch.tensor(W, requires_grad=True)``, a sigmoid on the chosen top
# layer; ``create_emb`` of ``nn.EmbeddingBag(n, m, mode="sum", sparse=True)`` tables in an
# ``nn.ModuleList`` with uniform NumPy weights; ``apply_emb`` over index/offset lists
# (``E(sparse_index_group_batch, sparse_offset_group_batch,
# per_sample_weights=per_sample_weights)``); the dot interaction (``torch.cat([x] + ly,
# dim=1).view((batch_size, -1, d))``, ``torch.bmm(T, torch.transpose(T, 1, 2))``, the
# lower triangle by index lists ``Z[:, li, lj]``); ``BCELoss`` on outputs clamped to
# ``[eps, 1 - eps]``; SGD over sparse embedding gradients; an ``LRPolicyScheduler``
# subclassing ``_LRScheduler`` with warm-up and polynomial decay from ``self._step_count``;
# and accuracy from ``np.round`` of ``Z.detach().cpu().numpy()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import _LRScheduler


class LRPolicyScheduler(_LRScheduler):
    def __init__(self, optimizer, num_warmup_steps, decay_start_step, num_decay_steps):
        self.num_warmup_steps = num_warmup_steps
        self.decay_start_step = decay_start_step
        self.decay_end_step = decay_start_step + num_decay_steps
        self.num_decay_steps = num_decay_steps
        if self.decay_start_step < self.num_warmup_steps:
            raise ValueError("Learning rate warmup must finish before the decay starts")
        super(LRPolicyScheduler, self).__init__(optimizer)

    def get_lr(self):
        step_count = self._step_count
        if step_count < self.num_warmup_steps:
            scale = 1.0 - (self.num_warmup_steps - step_count) / self.num_warmup_steps
            lr = [base_lr * scale for base_lr in self.base_lrs]
            self.last_lr = lr
        elif self.decay_start_step <= step_count and step_count < self.decay_end_step:
            decayed_steps = step_count - self.decay_start_step
            scale = ((self.num_decay_steps - decayed_steps) / self.num_decay_steps) ** 2
            min_lr = 0.0000001
            lr = [max(min_lr, base_lr * scale) for base_lr in self.base_lrs]
            self.last_lr = lr
        else:
            if self.num_decay_steps > 0:
                lr = self.last_lr
            else:
                lr = self.base_lrs
        return lr


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1):
            n = ln[i]
            m = ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            mean = 0.0
            std_dev = np.sqrt(2 / (m + n))
            W = np.random.normal(mean, std_dev, size=(m, n)).astype(np.float32)
            std_dev = np.sqrt(1 / m)
            bt = np.random.normal(mean, std_dev, size=m).astype(np.float32)
            LL.weight.data = torch.tensor(W, requires_grad=True)
            LL.bias.data = torch.tensor(bt, requires_grad=True)
            layers.append(LL)
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, ln.size):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=True)
            W = np.random.uniform(low=-np.sqrt(1 / n), high=np.sqrt(1 / n), size=(n, m)).astype(np.float32)
            EE.weight.data = torch.tensor(W, requires_grad=True)
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op="dot",
                 arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=-1, loss_threshold=0.0):
        super(DLRM_Net, self).__init__()
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)
        self.loss_fn = torch.nn.BCELoss(reduction="mean")

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            per_sample_weights = None
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch, per_sample_weights=per_sample_weights)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            R = torch.cat([x] + ly, dim=1)
        else:
            raise RuntimeError("ERROR: --arch-interaction-op=" + self.arch_interaction_op + " is not supported")
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p
        return z


def generate_random_input_batch(rng, m_den, ln_emb, n, num_indices_per_lookup):
    Xt = torch.tensor(rng.random((n, m_den)).astype(np.float32))
    lS_emb_offsets, lS_emb_indices = [], []
    for size in ln_emb:
        lS_batch_offsets, lS_batch_indices = [], []
        offset = 0
        for _ in range(n):
            sparse_group_size = np.int64(max(1, np.round(rng.random() * min(size, num_indices_per_lookup))))
            r = rng.random(sparse_group_size)
            sparse_group = np.unique(np.round(r * (size - 1)).astype(np.int64))
            lS_batch_offsets += [offset]
            lS_batch_indices += sparse_group.tolist()
            offset += sparse_group.size
        lS_emb_offsets.append(torch.tensor(lS_batch_offsets))
        lS_emb_indices.append(torch.tensor(lS_batch_indices))
    return Xt, lS_emb_offsets, lS_emb_indices


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    np.random.seed(1108)
    rng = np.random.default_rng(1108)
    m_spa, m_den = 4, 3
    ln_emb = np.array([6, 9, 5])
    ln_bot = np.array([m_den, 8, m_spa])
    num_fea = ln_emb.size + 1
    num_int = (num_fea * (num_fea - 1)) // 2 + ln_bot[-1]
    ln_top = np.array([num_int, 8, 1])
    dlrm = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top, arch_interaction_op="dot", sigmoid_bot=-1,
                    sigmoid_top=ln_top.size - 2, loss_threshold=1e-6)
    if weights is not None:
        dlrm.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in dlrm.state_dict().items()}
    optimizer = torch.optim.SGD(dlrm.parameters(), lr=0.5)
    lr_scheduler = LRPolicyScheduler(optimizer, 2, 4, 3)
    batches = []
    for _ in range(3):
        X, lS_o, lS_i = generate_random_input_batch(rng, m_den, ln_emb, 6, 3)
        T = torch.tensor(rng.integers(0, 2, (6, 1)).astype(np.float32))
        batches.append((X, lS_o, lS_i, T))

    def train_step(X, lS_o, lS_i, T):
        Z = dlrm(X, lS_o, lS_i)
        E = dlrm.loss_fn(Z, T)
        optimizer.zero_grad()
        E.backward()
        optimizer.step()
        return Z, E

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for k in range(3):
        total_accu = 0
        for X, lS_o, lS_i, T in batches:
            Z, E = step(X, lS_o, lS_i, T)
            lr_scheduler.step()
            S = Z.detach().cpu().numpy()
            T_np = T.detach().cpu().numpy()
            total_accu += int(np.sum((np.round(S, 0) == T_np).astype(np.uint8)))
            losses += [E.detach().cpu().item(), optimizer.param_groups[0]["lr"]]
        losses.append(total_accu)
    losses.append(float(dlrm.emb_l[1].weight.abs().sum()))
    return {"losses": losses, "weights": w, "fn": step}
