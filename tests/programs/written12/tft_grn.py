# In the manner of the Temporal Fusion Transformer's PyTorch building blocks (Lim et al.
# 2021; pytorch-forecasting's ``GatedLinearUnit``/``GatedResidualNetwork``/
# ``VariableSelectionNetwork`` and the standalone TFT ports): a gated linear unit by
# ``F.glu(x, dim=-1)`` and ``nn.GLU()``, a ``GateAddNorm`` (``nn.LayerNorm``), gated
# residual networks with ``nn.ELU`` and an optional context added through a bias-free
# ``nn.Linear``, a variable selection network whose per-variable GRNs run over
# ``x[..., i:i+1]`` and are weighted by ``torch.stack(var_outputs, dim=-1)`` times
# ``softmax(...).unsqueeze(-2)``, ``InterpretableMultiHeadAttention`` (value projection
# shared by the heads, ``torch.stack(heads, dim=2).mean(dim=2)``, a causal mask from
# ``torch.triu(torch.ones(n, n), diagonal=1).bool()`` and ``masked_fill(mask, -1e9)``), a
# quantile loss ``torch.max((q - 1) * errors, q * errors)`` against a
# ``torch.tensor(quantiles)``, Adam with ``clip_grad_norm_`` and ``ReduceLROnPlateau`` on
# the validation loss.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GatedLinearUnit(nn.Module):
    def __init__(self, input_size, hidden_size=None, dropout=None, use_module=False):
        super().__init__()
        self.dropout = nn.Dropout(dropout) if dropout is not None else dropout
        self.hidden_size = hidden_size or input_size
        self.fc = nn.Linear(input_size, self.hidden_size * 2)
        self.glu = nn.GLU() if use_module else None
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)

    def forward(self, x):
        if self.dropout is not None:
            x = self.dropout(x)
        x = self.fc(x)
        return self.glu(x) if self.glu is not None else F.glu(x, dim=-1)


class GateAddNorm(nn.Module):
    def __init__(self, input_size, hidden_size=None, use_module=False):
        super().__init__()
        self.hidden_size = hidden_size or input_size
        self.glu = GatedLinearUnit(input_size, self.hidden_size, use_module=use_module)
        self.norm = nn.LayerNorm(self.hidden_size)

    def forward(self, x, skip):
        return self.norm(self.glu(x) + skip)


class GatedResidualNetwork(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, context_size=None, residual=False):
        super().__init__()
        self.input_size, self.output_size, self.residual = input_size, output_size, residual
        if self.input_size != self.output_size and not self.residual:
            self.resample_norm = nn.Linear(input_size, output_size)
        else:
            self.resample_norm = None
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.elu = nn.ELU()
        if context_size is not None:
            self.context = nn.Linear(context_size, hidden_size, bias=False)
        self.fc2 = nn.Linear(hidden_size, hidden_size)
        self.gate_norm = GateAddNorm(hidden_size, output_size, use_module=context_size is None)

    def forward(self, x, context=None, residual=None):
        if residual is None:
            residual = x
        if self.resample_norm is not None:
            residual = self.resample_norm(residual)
        x = self.fc1(x)
        if context is not None:
            x = x + self.context(context)
        x = self.elu(x)
        x = self.fc2(x)
        return self.gate_norm(x, residual)


class VariableSelectionNetwork(nn.Module):
    def __init__(self, num_inputs, hidden_size, context_size=None):
        super().__init__()
        self.num_inputs = num_inputs
        self.flattened_grn = GatedResidualNetwork(num_inputs, hidden_size, num_inputs, context_size)
        self.single_variable_grns = nn.ModuleList(
            [GatedResidualNetwork(1, hidden_size, hidden_size) for _ in range(num_inputs)])
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x, context=None):
        sparse_weights = self.flattened_grn(x, context)
        sparse_weights = self.softmax(sparse_weights).unsqueeze(-2)
        var_outputs = []
        for i, grn in enumerate(self.single_variable_grns):
            var_outputs.append(grn(x[..., i:i + 1]))
        var_outputs = torch.stack(var_outputs, dim=-1)
        outputs = var_outputs * sparse_weights
        return outputs.sum(dim=-1), sparse_weights


class InterpretableMultiHeadAttention(nn.Module):
    def __init__(self, n_head, d_model):
        super().__init__()
        self.n_head = n_head
        self.d_k = self.d_v = d_model // n_head
        self.v_layer = nn.Linear(d_model, self.d_v)
        self.q_layers = nn.ModuleList([nn.Linear(d_model, self.d_k) for _ in range(n_head)])
        self.k_layers = nn.ModuleList([nn.Linear(d_model, self.d_k) for _ in range(n_head)])
        self.w_h = nn.Linear(self.d_v, d_model, bias=False)

    def forward(self, q, k, v, mask=None):
        heads, attns = [], []
        vs = self.v_layer(v)
        for i in range(self.n_head):
            qs = self.q_layers[i](q)
            ks = self.k_layers[i](k)
            attn = torch.bmm(qs, ks.permute(0, 2, 1)) / np.sqrt(self.d_k)
            if mask is not None:
                attn = attn.masked_fill(mask, -1e9)
            attn = F.softmax(attn, dim=2)
            heads.append(torch.bmm(attn, vs))
            attns.append(attn)
        head = torch.stack(heads, dim=2) if self.n_head > 1 else heads[0]
        attn = torch.stack(attns, dim=2)
        outputs = torch.mean(head, dim=2) if self.n_head > 1 else head
        return self.w_h(outputs), attn


class MiniTFT(nn.Module):
    def __init__(self, num_inputs=3, num_static=2, hidden=8, quantiles=(0.1, 0.5, 0.9)):
        super().__init__()
        self.static_encoder = GatedResidualNetwork(num_static, hidden, hidden)
        self.vsn = VariableSelectionNetwork(num_inputs, hidden, context_size=hidden)
        self.attention = InterpretableMultiHeadAttention(2, hidden)
        self.post_attn = GateAddNorm(hidden)
        self.pos_wise_ff = GatedResidualNetwork(hidden, hidden, hidden)
        self.output_layer = nn.Linear(hidden, len(quantiles))

    def forward(self, x, static):
        context = self.static_encoder(static).unsqueeze(1).expand(-1, x.size(1), -1)
        h, weights = self.vsn(x, context)
        n = x.size(1)
        mask = torch.triu(torch.ones(n, n), diagonal=1).bool()
        attn_out, attn = self.attention(h, h, h, mask=mask)
        h = self.post_attn(attn_out, h)
        return self.output_layer(self.pos_wise_ff(h)), weights


class QuantileLoss(nn.Module):
    def __init__(self, quantiles):
        super().__init__()
        self.quantiles = quantiles

    def forward(self, preds, target):
        losses = []
        for i, q in enumerate(self.quantiles):
            errors = target - preds[..., i]
            losses.append(torch.max((q - 1) * errors, q * errors).unsqueeze(-1))
        return torch.mean(torch.sum(torch.cat(losses, dim=-1), dim=-1))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1204)
    model = MiniTFT()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = QuantileLoss([0.1, 0.5, 0.9])
    q_tensor = torch.tensor([0.1, 0.5, 0.9])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)

    def make(n):
        x = rng.standard_normal((n, 6, 3)).astype(np.float32)
        s = rng.standard_normal((n, 2)).astype(np.float32)
        y = (x[..., 0] * 0.5 + np.cumsum(x[..., 1], 1) * 0.2 + s[:, :1]).astype(np.float32)
        return torch.from_numpy(x), torch.from_numpy(s), torch.from_numpy(y)

    batches = [make(4) for _ in range(3)]
    val = make(6)

    def train_step(x, s, y):
        optimizer.zero_grad()
        preds, weights = model(x, s)
        loss = criterion(preds, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        coverage = ((y > preds[..., 0]) & (y < preds[..., 2])).float().mean()
        return loss, coverage

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        model.train()
        for x, s, y in batches:
            loss, coverage = step(x, s, y)
            losses += [loss.item(), coverage.item()]
        model.eval()
        with torch.no_grad():
            preds, weights = model(val[0], val[1])
            val_loss = criterion(preds, val[2])
            errors = val[2].unsqueeze(-1) - preds
            qloss = torch.max(q_tensor * errors, (q_tensor - 1) * errors).mean()
        scheduler.step(val_loss)
        losses += [val_loss.item(), qloss.item(), float(weights.mean(dim=(0, 1, 2))[0]),
                   optimizer.param_groups[0]["lr"]]
    return {"losses": losses, "weights": w, "fn": step}
