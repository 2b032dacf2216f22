# In the manner of lucidrains/performer-pytorch (MIT licence) and idiap's
# fast-transformers linear attention (MIT licence): FAVOR+ random features from
# ``gaussian_orthogonal_random_matrix`` (blocks of ``torch.linalg.qr(..., mode='reduced')``
# transposed, rows scaled by the norms of Gaussian rows), a ``projection_matrix`` buffer
# redrawn under ``torch.no_grad()`` with ``copy_`` and ``del``, ``softmax_kernel`` with
# ``torch.einsum('...id,...jd->...ij', ...)``, ``data.shape[-1] ** -0.25``, ``torch.amax(...,
# dim=-1, keepdim=True).detach()`` stabilisers, causal linear attention by ``cumsum`` of
# ``einsum('...nd,...ne->...nde')`` and the three-operand ``einsum('...nde,...nd,...n->
# ...ne')``, the ``elu(x) + 1`` feature map of "Transformers are RNNs" with ``1. /
# torch.einsum('...nd,...d->...n', ...)``, heads split by ``view``/``transpose``, pre-norm
# blocks with GELU feed-forward, ``nn.Embedding`` positions from ``torch.arange(n, device=)``,
# ``F.cross_entropy`` over ``logits.view(-1, logits.size(-1))``, Adam with
# ``clip_grad_norm_`` and greedy ``@torch.no_grad()`` generation by ``torch.cat``.
# Gaussian draws come from NumPy (torch's and dualgraph's random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

_RNG = np.random.default_rng(905)


def randn(*shape):
    return torch.from_numpy(_RNG.standard_normal(shape).astype(np.float32))


def orthogonal_matrix_chunk(cols, device=None):
    unstructured_block = randn(cols, cols)
    q, r = torch.linalg.qr(unstructured_block.cpu(), mode='reduced')
    q, r = map(lambda t: t.to(device), (q, r))
    return q.t()


def gaussian_orthogonal_random_matrix(nb_rows, nb_columns, scaling=0, device=None):
    nb_full_blocks = int(nb_rows / nb_columns)
    block_list = []
    for _ in range(nb_full_blocks):
        q = orthogonal_matrix_chunk(nb_columns, device=device)
        block_list.append(q)
    remaining_rows = nb_rows - nb_full_blocks * nb_columns
    if remaining_rows > 0:
        q = orthogonal_matrix_chunk(nb_columns, device=device)
        block_list.append(q[:remaining_rows])
    final_matrix = torch.cat(block_list)
    if scaling == 0:
        multiplier = randn(nb_rows, nb_columns).norm(dim=1)
    elif scaling == 1:
        multiplier = math.sqrt((float(nb_columns))) * torch.ones((nb_rows,), device=device)
    else:
        raise ValueError(f'Invalid scaling {scaling}')
    return torch.diag(multiplier) @ final_matrix


def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4, device=None):
    b, h, *_ = data.shape
    data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.
    ratio = (projection_matrix.shape[0] ** -0.5)
    projection = projection_matrix.unsqueeze(0).unsqueeze(0).expand(b, h, *projection_matrix.shape)
    projection = projection.type_as(data)
    data_dash = torch.einsum('...id,...jd->...ij', (data_normalizer * data), projection)
    diag_data = data ** 2
    diag_data = torch.sum(diag_data, dim=-1)
    diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
    diag_data = diag_data.unsqueeze(dim=-1)
    if is_query:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data -
                      torch.amax(data_dash, dim=-1, keepdim=True).detach()) + eps)
    else:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data - torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()) + eps)
    return data_dash.type_as(data)


def causal_linear_attention_noncuda(q, k, v, eps=1e-6):
    k_cumsum = k.cumsum(dim=-2) + eps
    D_inv = 1. / torch.einsum('...nd,...nd->...n', q, k_cumsum.type_as(q))
    context = torch.einsum('...nd,...ne->...nde', k, v)
    context = context.cumsum(dim=-3)
    out = torch.einsum('...nde,...nd,...n->...ne', context, q, D_inv)
    return out


def elu_feature_map(x):
    return F.elu(x) + 1


def linear_attention(q, k, v, eps=1e-6):
    k_cumsum = k.sum(dim=-2)
    D_inv = 1. / (torch.einsum('...nd,...d->...n', q, k_cumsum.type_as(q)) + eps)
    context = torch.einsum('...nd,...ne->...de', k, v)
    out = torch.einsum('...de,...nd,...n->...ne', context, q, D_inv)
    return out


class FastAttention(nn.Module):
    def __init__(self, dim_heads, nb_features=None, ortho_scaling=0, causal=False, kernel='favor'):
        super().__init__()
        nb_features = nb_features if nb_features is not None else int(dim_heads * math.log(dim_heads))
        self.dim_heads = dim_heads
        self.nb_features = nb_features
        self.ortho_scaling = ortho_scaling
        self.kernel = kernel
        self.create_projection = partial(gaussian_orthogonal_random_matrix, nb_rows=self.nb_features,
                                         nb_columns=dim_heads, scaling=ortho_scaling)
        projection_matrix = self.create_projection()
        self.register_buffer('projection_matrix', projection_matrix)
        self.causal = causal

    @torch.no_grad()
    def redraw_projection_matrix(self, device):
        projections = self.create_projection(device=device)
        self.projection_matrix.copy_(projections)
        del projections

    def forward(self, q, k, v):
        device = q.device
        if self.kernel == 'favor':
            create_kernel = partial(softmax_kernel, projection_matrix=self.projection_matrix, device=device)
            q = create_kernel(q, is_query=True)
            k = create_kernel(k, is_query=False)
        else:
            q, k = elu_feature_map(q), elu_feature_map(k)
        attn_fn = linear_attention if not self.causal else causal_linear_attention_noncuda
        out = attn_fn(q, k, v)
        return out


class SelfAttention(nn.Module):
    def __init__(self, dim, heads=2, causal=True, nb_features=None, kernel='favor'):
        super().__init__()
        assert dim % heads == 0, 'dimension must be divisible by number of heads'
        dim_head = dim // heads
        self.fast_attention = FastAttention(dim_head, nb_features, causal=causal, kernel=kernel)
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, _, h = *x.shape, self.heads
        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = map(lambda t: t.view(b, n, h, -1).transpose(1, 2), (q, k, v))
        out = self.fast_attention(q, k, v)
        out = out.transpose(1, 2).contiguous().view(b, n, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=2):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, dim * mult), nn.GELU(), nn.Linear(dim * mult, dim))

    def forward(self, x):
        return self.net(x)


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


class PerformerLM(nn.Module):
    def __init__(self, *, num_tokens, max_seq_len, dim, depth, heads, nb_features, kernels=('favor', 'elu')):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        self.layers = nn.ModuleList([])
        for i in range(depth):
            self.layers.append(nn.ModuleList([
                PreNorm(dim, SelfAttention(dim, heads=heads, causal=True, nb_features=nb_features,
                                           kernel=kernels[i % len(kernels)])),
                PreNorm(dim, FeedForward(dim)),
            ]))
        self.norm = nn.LayerNorm(dim)
        self.to_out = nn.Linear(dim, num_tokens)

    def fix_projection_matrices_(self):
        for module in self.modules():
            if isinstance(module, FastAttention):
                module.redraw_projection_matrix(module.projection_matrix.device)

    def forward(self, x):
        b, n, device = *x.shape, x.device
        assert n <= self.max_seq_len, f'sequence length {n} must be less than the max sequence length {self.max_seq_len}'
        x = self.token_emb(x)
        x = x + self.pos_emb(torch.arange(n, device=device))
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        x = self.norm(x)
        return self.to_out(x)


@torch.no_grad()
def generate(model, start_tokens, seq_len):
    was_training = model.training
    model.eval()
    out = start_tokens
    for _ in range(seq_len):
        x = out[:, -model.max_seq_len:]
        logits = model(x)[:, -1, :]
        sample = torch.argmax(logits, dim=-1, keepdim=True)
        out = torch.cat((out, sample), dim=-1)
    model.train(was_training)
    return out[:, start_tokens.shape[1]:]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(9050)
    model = PerformerLM(num_tokens=11, max_seq_len=8, dim=16, depth=2, heads=2, nb_features=6)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optim = torch.optim.Adam(model.parameters(), lr=3e-3)
    data = torch.from_numpy(rng.integers(0, 11, (6, 4, 9)))

    def train_step(inp, target):
        model.train()
        logits = model(inp)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), target.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optim.step()
        optim.zero_grad()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for i in range(6):
        seq = data[i]
        losses.append(step(seq[:, :-1], seq[:, 1:]).item())
    projection_before = model.layers[0][0].fn.fast_attention.projection_matrix.clone()
    model.fix_projection_matrices_()
    losses.append((model.layers[0][0].fn.fast_attention.projection_matrix - projection_before).abs().sum().item())
    losses.append(step(data[0, :, :-1], data[0, :, 1:]).item())
    losses += generate(model, data[0, :2, :3], 4).flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
