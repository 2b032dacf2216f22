# In the manner of orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch (MIT
# licence): a ``PrototypicalBatchSampler`` yielding episodes of ``classes_per_it`` classes
# with ``num_samples`` each, handed to ``DataLoader(dataset, batch_sampler=sampler)``; the
# ``ProtoNet`` encoder of ``conv_block``s (conv, ``BatchNorm2d``, ReLU, ``MaxPool2d(2)``)
# flattened by ``x.view(x.size(0), -1)``; ``euclidean_dist`` by ``unsqueeze``/``expand``;
# ``prototypical_loss`` as the repository writes it: ``target.to('cpu')``,
# ``torch.unique``, support indices by ``target_cpu.eq(c).nonzero()[:n_support]``, the
# query count by ``.sum().item()``, prototypes by ``torch.stack`` of means, the
# ``log_softmax`` of negative distances viewed ``(n_classes, n_query, -1)``,
# ``gather(2, target_inds)`` and accuracy by ``y_hat.eq(...).float().mean()``; Adam with a
# ``StepLR``; the best model's ``state_dict`` kept by ``copy.deepcopy`` and reloaded for the
# test episodes. The episodes' class and sample choices come from NumPy; the convolutions
# have no bias (a bias before a batch norm has a gradient of zero up to rounding, which Adam
# turns into steps of the learning rate's size in either direction).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class PrototypicalBatchSampler(object):
    def __init__(self, labels, classes_per_it, num_samples, iterations, seed):
        super(PrototypicalBatchSampler, self).__init__()
        self.labels = labels
        self.classes_per_it = classes_per_it
        self.sample_per_class = num_samples
        self.iterations = iterations
        self.classes, self.counts = np.unique(self.labels, return_counts=True)
        self.idxs = range(len(self.labels))
        self.indexes = np.empty((len(self.classes), max(self.counts)), dtype=int) * np.nan
        self.numel_per_class = torch.zeros_like(torch.tensor(self.counts))
        for idx, label in enumerate(self.labels):
            label_idx = np.argwhere(self.classes == label).item()
            self.indexes[label_idx, np.where(np.isnan(self.indexes[label_idx]))[0][0]] = idx
            self.numel_per_class[label_idx] += 1
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        spc = self.sample_per_class
        cpi = self.classes_per_it
        for it in range(self.iterations):
            batch_size = spc * cpi
            batch = torch.LongTensor(batch_size)
            c_idxs = torch.from_numpy(self.rng.permutation(len(self.classes))[:cpi])
            for i, c in enumerate(self.classes[c_idxs.numpy()]):
                s = slice(i * spc, (i + 1) * spc)
                label_idx = torch.arange(len(self.classes)).long()[self.classes == c].item()
                sample_idxs = torch.from_numpy(self.rng.permutation(int(self.numel_per_class[label_idx]))[:spc])
                batch[s] = torch.from_numpy(self.indexes[label_idx].astype(np.int64))[sample_idxs]
            batch = batch[torch.from_numpy(self.rng.permutation(len(batch)))]
            yield batch

    def __len__(self):
        return self.iterations


class FewShotDataset(Dataset):
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __getitem__(self, idx):
        return torch.from_numpy(self.x[idx]), int(self.y[idx])

    def __len__(self):
        return len(self.y)


def conv_block(in_channels, out_channels):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.MaxPool2d(2)
    )


class ProtoNet(nn.Module):
    def __init__(self, x_dim=1, hid_dim=8, z_dim=8):
        super(ProtoNet, self).__init__()
        self.encoder = nn.Sequential(
            conv_block(x_dim, hid_dim),
            conv_block(hid_dim, z_dim),
        )

    def forward(self, x):
        x = self.encoder(x)
        return x.view(x.size(0), -1)


def euclidean_dist(x, y):
    n = x.size(0)
    m = y.size(0)
    d = x.size(1)
    if d != y.size(1):
        raise Exception
    x = x.unsqueeze(1).expand(n, m, d)
    y = y.unsqueeze(0).expand(n, m, d)
    return torch.pow(x - y, 2).sum(2)


def prototypical_loss(input, target, n_support):
    target_cpu = target.to('cpu')
    input_cpu = input.to('cpu')

    def supp_idxs(c):
        return target_cpu.eq(c).nonzero()[:n_support].squeeze(1)

    classes = torch.unique(target_cpu)
    n_classes = len(classes)
    n_query = target_cpu.eq(classes[0].item()).sum().item() - n_support
    support_idxs = list(map(supp_idxs, classes))
    prototypes = torch.stack([input_cpu[idx_list].mean(0) for idx_list in support_idxs])
    query_idxs = torch.stack(list(map(lambda c: target_cpu.eq(c).nonzero()[n_support:], classes))).view(-1)
    query_samples = input.to('cpu')[query_idxs]
    dists = euclidean_dist(query_samples, prototypes)
    log_p_y = F.log_softmax(-dists, dim=1).view(n_classes, n_query, -1)
    target_inds = torch.arange(0, n_classes)
    target_inds = target_inds.view(n_classes, 1, 1)
    target_inds = target_inds.expand(n_classes, n_query, 1).long()
    loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
    _, y_hat = log_p_y.max(2)
    acc_val = y_hat.eq(target_inds.squeeze(2)).float().mean()
    return loss_val, acc_val


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1007)
    n_cls, per_cls = 6, 6
    protos = rng.normal(size=(n_cls, 1, 8, 8)).astype(np.float32)
    labels = np.repeat(np.arange(n_cls), per_cls)
    xs = (protos[labels] + 1.5 * rng.normal(size=(len(labels), 1, 8, 8))).astype(np.float32)
    dataset = FewShotDataset(xs, labels)
    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'
    model = ProtoNet().to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optim = torch.optim.Adam(params=model.parameters(), lr=1e-2)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer=optim, gamma=0.5, step_size=1)
    num_support = 2
    tr_sampler = PrototypicalBatchSampler(labels, 3, num_support + 2, iterations=3, seed=1)
    tr_dataloader = DataLoader(dataset, batch_sampler=tr_sampler)
    val_sampler = PrototypicalBatchSampler(labels, 3, num_support + 2, iterations=2, seed=2)
    val_dataloader = DataLoader(dataset, batch_sampler=val_sampler)

    def train_step(x, y):
        optim.zero_grad()
        model_output = model(x)
        loss, acc = prototypical_loss(model_output, target=y, n_support=num_support)
        loss.backward()
        optim.step()
        return loss, acc

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    best_acc, best_state = 0, None
    for epoch in range(2):
        model.train()
        for batch in iter(tr_dataloader):
            x, y = batch
            x, y = x.to(device), y.to(device)
            loss, acc = step(x, y)
            losses += [loss.item(), acc.item()]
        lr_scheduler.step()
        model.eval()
        val_acc = []
        with torch.no_grad():
            for batch in iter(val_dataloader):
                x, y = batch
                model_output = model(x.to(device))
                loss, acc = prototypical_loss(model_output, target=y.to(device), n_support=num_support)
                losses.append(loss.item())
                val_acc.append(acc.item())
        avg_acc = np.mean(val_acc)
        if avg_acc >= best_acc:
            best_acc = avg_acc
            best_state = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    losses.append(float(best_acc))
    losses.append(float(model.encoder[0][0].weight.abs().sum()))
    return {"losses": losses, "weights": w, "fn": step}
