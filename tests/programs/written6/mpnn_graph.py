# In the manner of graph networks written without PyTorch Geometric: an ``edge_index`` of
# shape (2, E), ``add_self_loops`` by ``torch.cat`` with ``torch.arange(num_nodes)``, degrees
# by ``torch.zeros(num_nodes).scatter_add_(0, row, torch.ones(E))``, symmetric
# normalisation ``deg.pow(-0.5)`` with ``deg_inv_sqrt[deg_inv_sqrt == float('inf')] = 0``,
# messages gathered by ``x[col]`` and summed with ``out.index_add_(0, row, msg)``, a
# GraphSAGE-style mean aggregation dividing by ``counts.clamp(min=1).unsqueeze(-1)``, a GIN
# layer with a learnable ``eps``, edge features through an edge MLP, ``global_mean_pool``
# over a ``batch`` vector with ``index_add_`` and ``torch.bincount``-free counts, and graph
# classification with ``F.log_softmax`` and ``F.nll_loss``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def add_self_loops(edge_index, num_nodes):
    loop = torch.arange(num_nodes, dtype=edge_index.dtype).unsqueeze(0).repeat(2, 1)
    return torch.cat([edge_index, loop], dim=1)


class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index):
        num_nodes = x.size(0)
        edge_index = add_self_loops(edge_index, num_nodes)
        row, col = edge_index[0], edge_index[1]
        deg = torch.zeros(num_nodes, dtype=x.dtype).scatter_add_(0, row, torch.ones(row.size(0), dtype=x.dtype))
        deg_inv_sqrt = deg.pow(-0.5)
        deg_inv_sqrt[deg_inv_sqrt == float('inf')] = 0
        norm = deg_inv_sqrt[row] * deg_inv_sqrt[col]
        x = self.lin(x)
        msg = norm.view(-1, 1) * x[col]
        out = torch.zeros_like(x)
        out.index_add_(0, row, msg)
        return out + self.bias


class SAGEConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros(x.size(0), x.size(1), dtype=x.dtype)
        agg = agg.index_add(0, dst, x[src])
        counts = torch.zeros(x.size(0), dtype=x.dtype).scatter_add(0, dst, torch.ones_like(dst, dtype=x.dtype))
        agg = agg / counts.clamp(min=1).unsqueeze(-1)
        out = self.lin_l(agg) + self.lin_r(x)
        return F.normalize(out, p=2., dim=-1)


class GINConv(nn.Module):
    def __init__(self, nn_module, eps=0.0):
        super().__init__()
        self.nn = nn_module
        self.eps = nn.Parameter(torch.Tensor([eps]))

    def forward(self, x, edge_index, edge_attr=None):
        src, dst = edge_index
        msg = x[src] if edge_attr is None else F.relu(x[src] + edge_attr)
        out = torch.zeros_like(x).scatter_add_(0, dst.unsqueeze(-1).expand(-1, x.size(1)), msg)
        return self.nn((1 + self.eps) * x + out)


def global_mean_pool(x, batch, num_graphs):
    out = torch.zeros(num_graphs, x.size(1), dtype=x.dtype).index_add_(0, batch, x)
    count = torch.zeros(num_graphs, dtype=x.dtype).index_add_(0, batch, torch.ones(x.size(0), dtype=x.dtype))
    return out / count.unsqueeze(1)


class Net(nn.Module):
    def __init__(self, in_dim, hidden, edge_dim, num_classes):
        super().__init__()
        self.conv1 = GCNConv(in_dim, hidden)
        self.conv2 = SAGEConv(hidden, hidden)
        self.edge_mlp = nn.Sequential(nn.Linear(edge_dim, hidden), nn.ReLU())
        self.conv3 = GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                           nn.Linear(hidden, hidden)), eps=0.1)
        self.lin = nn.Linear(hidden, num_classes)

    def forward(self, x, edge_index, edge_attr, batch, num_graphs):
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.0, training=self.training)
        x = F.relu(self.conv2(x, edge_index))
        x = self.conv3(x, edge_index, self.edge_mlp(edge_attr))
        x = global_mean_pool(x, batch, num_graphs)
        return F.log_softmax(self.lin(x), dim=1)


def make_graphs(rng, num_graphs, in_dim, edge_dim):
    xs, edges, attrs, batch, ys = [], [], [], [], []
    offset = 0
    for g in range(num_graphs):
        n = 5
        label = g % 2
        x = rng.normal(size=(n, in_dim)).astype(np.float32) + label
        pairs = [(i, (i + 1) % n) for i in range(n)] + ([(0, 2), (1, 3)] if label else [(0, 3)])
        e = np.array(pairs + [(b, a) for a, b in pairs]).T + offset
        xs.append(x)
        edges.append(e)
        attrs.append(rng.normal(size=(e.shape[1], edge_dim)).astype(np.float32))
        batch += [g] * n
        ys.append(label)
        offset += n
    return (torch.tensor(np.concatenate(xs)), torch.tensor(np.concatenate(edges, 1)),
            torch.tensor(np.concatenate(attrs)), torch.tensor(batch), torch.tensor(ys))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(68)
    model = Net(in_dim=6, hidden=16, edge_dim=3, num_classes=2)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    batches = [make_graphs(rng, 4, 6, 3) for _ in range(3)]

    def train_step(x, edge_index, edge_attr, batch, y):
        model.train()
        optimizer.zero_grad()
        out = model(x, edge_index, edge_attr, batch, 4)
        loss = F.nll_loss(out, y)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for data in batches:
            losses.append(step(*data).item())
    model.eval()
    with torch.no_grad():
        x, edge_index, edge_attr, batch, y = batches[0]
        pred = model(x, edge_index, edge_attr, batch, 4).argmax(dim=1)
        losses.append(int((pred == y).sum()))
        losses += model.conv1(x, edge_index)[:2].flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
