# In the manner of Diego999/pyGAT's layers.py/models.py and tkipf/pygcn's layers.py/train.py
# (MIT licences): a GraphAttentionLayer with ``nn.Parameter(torch.empty(size=(in, out)))``
# and ``nn.init.xavier_uniform_(gain=1.414)``, ``torch.mm(h, self.W)``, the attention
# input ``Wh1 + Wh2.T`` from ``torch.matmul(Wh, self.a[:out, :])``, ``nn.LeakyReLU``,
# ``zero_vec = -9e15 * torch.ones_like(e)`` and ``torch.where(adj > 0, e, zero_vec)``,
# ``F.softmax(dim=1)``, ``F.dropout(training=self.training)``, ``F.elu``, heads kept as
# ``add_module('attention_{}'.format(i), ...)`` and concatenated with ``torch.cat``; a GCN
# layer with ``reset_parameters`` drawing ``uniform_(-stdv, stdv)`` from
# ``1. / math.sqrt(self.weight.size(1))``, ``torch.spmm(adj, support)`` over a
# row-normalised adjacency built from ``torch.sparse_coo_tensor`` (``to_dense``), an
# ``__repr__``, ``accuracy`` through ``output.max(1)[1].type_as(labels)``, masked
# ``F.nll_loss(output[idx_train], labels[idx_train])``, Adam with weight decay, and an
# evaluation under ``model.eval()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import Parameter
from torch.nn.modules.module import Module


class GraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, dropout, alpha, concat=True):
        super(GraphAttentionLayer, self).__init__()
        self.dropout = dropout
        self.in_features = in_features
        self.out_features = out_features
        self.alpha = alpha
        self.concat = concat
        self.W = nn.Parameter(torch.empty(size=(in_features, out_features)))
        nn.init.xavier_uniform_(self.W.data, gain=1.414)
        self.a = nn.Parameter(torch.empty(size=(2 * out_features, 1)))
        nn.init.xavier_uniform_(self.a.data, gain=1.414)
        self.leakyrelu = nn.LeakyReLU(self.alpha)

    def forward(self, h, adj):
        Wh = torch.mm(h, self.W)
        e = self._prepare_attentional_mechanism_input(Wh)
        zero_vec = -9e15 * torch.ones_like(e)
        attention = torch.where(adj > 0, e, zero_vec)
        attention = F.softmax(attention, dim=1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, Wh)
        if self.concat:
            return F.elu(h_prime)
        else:
            return h_prime

    def _prepare_attentional_mechanism_input(self, Wh):
        Wh1 = torch.matmul(Wh, self.a[:self.out_features, :])
        Wh2 = torch.matmul(Wh, self.a[self.out_features:, :])
        e = Wh1 + Wh2.T
        return self.leakyrelu(e)

    def __repr__(self):
        return self.__class__.__name__ + ' (' + str(self.in_features) + ' -> ' + str(self.out_features) + ')'


class GAT(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout, alpha, nheads):
        super(GAT, self).__init__()
        self.dropout = dropout
        self.attentions = [GraphAttentionLayer(nfeat, nhid, dropout=dropout, alpha=alpha, concat=True) for _ in range(nheads)]
        for i, attention in enumerate(self.attentions):
            self.add_module('attention_{}'.format(i), attention)
        self.out_att = GraphAttentionLayer(nhid * nheads, nclass, dropout=dropout, alpha=alpha, concat=False)

    def forward(self, x, adj):
        x = F.dropout(x, self.dropout, training=self.training)
        x = torch.cat([att(x, adj) for att in self.attentions], dim=1)
        x = F.dropout(x, self.dropout, training=self.training)
        x = F.elu(self.out_att(x, adj))
        return F.log_softmax(x, dim=1)


class GraphConvolution(Module):
    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        else:
            return output

    def __repr__(self):
        return self.__class__.__name__ + ' (' + str(self.in_features) + ' -> ' + str(self.out_features) + ')'


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def normalize(mx):
    rowsum = np.array(mx.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    return np.diag(r_inv).dot(mx)


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def load_data(rng, n=12, nfeat=6, nclass=3):
    labels = np.arange(n) % nclass
    features = rng.normal(size=(n, nfeat)).astype(np.float32) + labels[:, None] * 0.5
    edges = np.array([(i, j) for i in range(n) for j in range(n)
                      if i != j and (labels[i] == labels[j] or (i + j) % 5 == 0)])
    values = np.ones(len(edges), dtype=np.float32)
    adj = torch.sparse_coo_tensor(torch.from_numpy(edges.T.copy()), torch.from_numpy(values), (n, n))
    adj = adj.to_dense().numpy()
    adj = normalize(adj + np.eye(n, dtype=np.float32)).astype(np.float32)
    features = normalize(features - features.min()).astype(np.float32)
    idx_train = torch.LongTensor(range(8))
    idx_val = torch.LongTensor(range(8, 12))
    return (torch.FloatTensor(adj), torch.FloatTensor(features), torch.LongTensor(labels),
            idx_train, idx_val)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(85)
    adj, features, labels, idx_train, idx_val = load_data(rng)
    gat = GAT(nfeat=features.shape[1], nhid=4, nclass=3, dropout=0.0, alpha=0.2, nheads=2)
    gcn = GCN(nfeat=features.shape[1], nhid=8, nclass=3, dropout=0.0)
    models = {"gat": gat, "gcn": gcn}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    steps = []
    for model in models.values():
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

        def train(features, adj, model=model, optimizer=optimizer):
            model.train()
            optimizer.zero_grad()
            output = model(features, adj)
            loss_train = F.nll_loss(output[idx_train], labels[idx_train])
            acc_train = accuracy(output[idx_train], labels[idx_train])
            loss_train.backward()
            optimizer.step()
            return loss_train, acc_train

        steps.append(torch.compile(train) if compiled else train)
    losses = [str(gat.attentions[0]) == "GraphAttentionLayer (6 -> 4)", len(list(gat.parameters()))]
    for step, model in zip(steps, models.values()):
        for epoch in range(6):
            loss_train, acc_train = step(features, adj)
            losses += [loss_train.item(), acc_train.item()]
        model.eval()
        with torch.no_grad():
            output = model(features, adj)
            losses.append(F.nll_loss(output[idx_val], labels[idx_val]).item())
            losses.append(accuracy(output[idx_val], labels[idx_val]).item())
    return {"losses": losses, "weights": w, "fn": steps}
