# In the manner of PyTorch Geometric's GraphSAGE/GCN examples and the plain-PyTorch graph
# layers written after them (MIT licence): ``add_self_loops`` by ``torch.cat`` of an
# ``arange``, degrees by ``scatter_add_``/``torch.bincount``, ``deg.pow(-0.5)`` with
# ``masked_fill_(deg_inv_sqrt == float('inf'), 0)``, a normalised adjacency as
# ``torch.sparse_coo_tensor(...).coalesce()`` multiplied by ``torch.sparse.mm``, SAGE
# layers aggregating by ``Tensor.scatter_reduce(0, index, src, reduce='mean' | 'amax',
# include_self=False)`` into ``new_zeros``, ``index.unsqueeze(-1).expand_as(src)``,
# ``F.normalize(out, p=2., dim=-1)``, ``reset_parameters`` loops, ``F.dropout(training=
# self.training)``, ``out[train_idx]`` with ``F.nll_loss``, Adam with weight decay, and
# ``@torch.no_grad()`` evaluation by ``argmax`` and boolean masks.
# No linear bias feeds a batch norm (its gradient is zero up to rounding, which Adam
# scales to steps of ~lr).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def add_self_loops(edge_index, num_nodes):
    loop_index = torch.arange(0, num_nodes, dtype=torch.long, device=edge_index.device)
    loop_index = loop_index.unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loop_index], dim=1)


def gcn_norm_adj(edge_index, num_nodes):
    edge_index = add_self_loops(edge_index, num_nodes)
    row, col = edge_index[0], edge_index[1]
    edge_weight = torch.ones(edge_index.size(1), device=edge_index.device)
    deg = torch.zeros(num_nodes, dtype=edge_weight.dtype).scatter_add_(0, col, edge_weight)
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    values = deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]
    return torch.sparse_coo_tensor(torch.stack([col, row]), values, (num_nodes, num_nodes)).coalesce()


class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels, bias=True):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x, adj):
        x = self.lin(x)
        out = torch.sparse.mm(adj, x)
        if self.bias is not None:
            out = out + self.bias
        return out


class SAGEConv(nn.Module):
    def __init__(self, in_channels, out_channels, aggr='mean', normalize=False, root_weight=True, bias=True):
        super().__init__()
        self.aggr = aggr
        self.normalize = normalize
        self.root_weight = root_weight
        self.lin_l = nn.Linear(in_channels, out_channels, bias=bias)
        if self.root_weight:
            self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def reset_parameters(self):
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    def propagate(self, edge_index, x):
        src, dst = edge_index
        msg = x.index_select(0, src)
        index = dst.unsqueeze(-1).expand_as(msg)
        out = x.new_zeros(x.size(0), x.size(1))
        reduce = {'mean': 'mean', 'max': 'amax', 'sum': 'sum'}[self.aggr]
        return out.scatter_reduce(0, index, msg, reduce=reduce, include_self=False)

    def forward(self, x, edge_index):
        out = self.propagate(edge_index, x)
        out = self.lin_l(out)
        if self.root_weight:
            out = out + self.lin_r(x)
        if self.normalize:
            out = F.normalize(out, p=2., dim=-1)
        return out

    def __repr__(self):
        return f'{self.__class__.__name__}({self.lin_l.in_features}, {self.lin_l.out_features}, aggr={self.aggr})'


class SAGE(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, dropout, aggrs=('mean', 'max')):
        super(SAGE, self).__init__()
        self.convs = torch.nn.ModuleList()
        self.convs.append(SAGEConv(in_channels, hidden_channels, aggr=aggrs[0], bias=False))
        self.bns = torch.nn.ModuleList()
        self.bns.append(torch.nn.BatchNorm1d(hidden_channels))
        for i in range(num_layers - 2):
            self.convs.append(SAGEConv(hidden_channels, hidden_channels, aggr=aggrs[(i + 1) % len(aggrs)], bias=False))
            self.bns.append(torch.nn.BatchNorm1d(hidden_channels))
        self.convs.append(SAGEConv(hidden_channels, out_channels, aggr=aggrs[-1], normalize=False))
        self.dropout = dropout

    def reset_parameters(self):
        for conv in self.convs:
            conv.reset_parameters()
        for bn in self.bns:
            bn.reset_parameters()

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs[:-1]):
            x = conv(x, edge_index)
            x = self.bns[i](x)
            x = F.relu(x)
            x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.convs[-1](x, edge_index)
        return x.log_softmax(dim=-1)


class GCN(nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, dropout):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels)
        self.conv2 = GCNConv(hidden_channels, out_channels)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.conv1(x, adj).relu()
        x = F.dropout(x, p=self.dropout, training=self.training)
        x = self.conv2(x, adj)
        return F.log_softmax(x, dim=1)


@torch.no_grad()
def test(model, x, graph, y, masks):
    model.eval()
    out = model(x, graph)
    pred = out.argmax(dim=-1)
    accs = []
    for mask in masks:
        accs.append(int((pred[mask] == y[mask]).sum()) / int(mask.sum()))
    return accs


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(904)
    device = torch.device('cpu')
    num_nodes, num_features, num_classes = 24, 6, 3
    src = rng.integers(0, num_nodes, 60)
    dst = (src + rng.integers(1, 5, 60)) % num_nodes
    edge_index = torch.tensor(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]), dtype=torch.long)
    x = torch.tensor(rng.normal(size=(num_nodes, num_features)), dtype=torch.float).to(device)
    y = torch.tensor(rng.integers(0, num_classes, num_nodes)).to(device)
    perm = rng.permutation(num_nodes)
    train_idx = torch.from_numpy(perm[:14]).to(device)
    val_mask = torch.zeros(num_nodes, dtype=torch.bool)
    val_mask[torch.from_numpy(perm[14:19])] = True
    test_mask = torch.zeros(num_nodes, dtype=torch.bool)
    test_mask[perm[19:]] = True
    adj = gcn_norm_adj(edge_index, num_nodes)
    deg = torch.bincount(edge_index[1], minlength=num_nodes)

    sage = SAGE(num_features, 8, num_classes, num_layers=3, dropout=0.0).to(device)
    gcn = GCN(num_features, 8, num_classes, dropout=0.0).to(device)
    models = {"sage": sage, "gcn": gcn}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    opt_sage = torch.optim.Adam(sage.parameters(), lr=0.01)
    opt_gcn = torch.optim.Adam([dict(params=gcn.conv1.parameters(), weight_decay=5e-4),
                                dict(params=gcn.conv2.parameters(), weight_decay=0)], lr=0.01)

    def train_sage(x, edge_index, y, train_idx):
        sage.train()
        opt_sage.zero_grad()
        out = sage(x, edge_index)[train_idx]
        loss = F.nll_loss(out, y[train_idx])
        loss.backward()
        opt_sage.step()
        return loss

    def train_gcn(x, y, train_idx):
        gcn.train()
        opt_gcn.zero_grad()
        out = gcn(x, adj)
        loss = F.nll_loss(out[train_idx], y[train_idx])
        loss.backward()
        opt_gcn.step()
        return loss

    steps = [torch.compile(train_sage), torch.compile(train_gcn)] if compiled else [train_sage, train_gcn]
    losses = [float(adj.to_dense().sum()), int(deg.max()), int(adj.is_coalesced())]
    for epoch in range(1, 6):
        losses.append(float(steps[0](x, edge_index, y, train_idx)))
        losses.append(steps[1](x, y, train_idx).item())
        if epoch % 5 == 0:
            losses += test(sage, x, edge_index, y, [val_mask, test_mask])
            losses += test(gcn, x, adj, y, [val_mask, test_mask])
    with torch.no_grad():
        losses += sage(x, edge_index)[:2].flatten().tolist()
    return {"losses": losses, "weights": w, "fn": steps}
