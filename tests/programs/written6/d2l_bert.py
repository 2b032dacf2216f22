# In the manner of d2l.ai's BERT chapter: ``get_tokens_and_segments``, a BERTEncoder with
# token and segment ``nn.Embedding``s plus a learnable ``nn.Parameter(torch.randn(1, max_len,
# num_hiddens))`` position embedding sliced by ``[:, :X.shape[1], :]``, encoder blocks built
# with ``add_module(f"{i}", ...)`` (AddNorm, PositionWiseFFN, multi-head attention with
# ``valid_lens``), MaskLM gathering the masked positions with ``torch.arange`` +
# ``torch.repeat_interleave`` and ``X[batch_idx, pred_positions]``, NextSentencePred on the
# ``<cls>`` output through a ``nn.Tanh`` hidden layer, and ``_get_batch_loss_bert`` weighting
# the per-token MLM loss by ``mlm_weights_X.reshape(-1, 1)`` and dividing by
# ``mlm_weights_X.sum() + 1e-8``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
from torch import nn


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], dtype=torch.float32, device=X.device)[None, :] < valid_lens[:, None]
    X = X.masked_fill(~mask, -1e6)
    return nn.functional.softmax(X.reshape(shape), dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, dropout, bias=False):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = nn.Dropout(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def transpose_qkv(self, X):
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])

    def transpose_output(self, X):
        X = X.reshape(-1, self.num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)

    def forward(self, queries, keys, values, valid_lens):
        queries = self.transpose_qkv(self.W_q(queries))
        keys = self.transpose_qkv(self.W_k(keys))
        values = self.transpose_qkv(self.W_v(values))
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        output = torch.bmm(self.dropout(self.attention_weights), values)
        return self.W_o(self.transpose_output(output))


class PositionWiseFFN(nn.Module):
    def __init__(self, ffn_num_input, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Linear(ffn_num_input, ffn_num_hiddens)
        self.relu = nn.ReLU()
        self.dense2 = nn.Linear(ffn_num_hiddens, ffn_num_outputs)

    def forward(self, X):
        return self.dense2(self.relu(self.dense1(X)))


class AddNorm(nn.Module):
    def __init__(self, normalized_shape, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, X, Y):
        return self.ln(self.dropout(Y) + X)


class EncoderBlock(nn.Module):
    def __init__(self, num_hiddens, norm_shape, ffn_num_hiddens, num_heads, dropout):
        super().__init__()
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout)
        self.addnorm1 = AddNorm(norm_shape, dropout)
        self.ffn = PositionWiseFFN(num_hiddens, ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(norm_shape, dropout)

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


def get_tokens_and_segments(tokens_a, tokens_b=None):
    tokens = ['<cls>'] + tokens_a + ['<sep>']
    segments = [0] * (len(tokens_a) + 2)
    if tokens_b is not None:
        tokens += tokens_b + ['<sep>']
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments


class BERTEncoder(nn.Module):
    def __init__(self, vocab_size, num_hiddens, norm_shape, ffn_num_hiddens, num_heads,
                 num_layers, dropout, max_len=1000):
        super(BERTEncoder, self).__init__()
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.Sequential()
        for i in range(num_layers):
            self.blks.add_module(f"{i}", EncoderBlock(num_hiddens, norm_shape, ffn_num_hiddens,
                                                      num_heads, dropout))
        self.pos_embedding = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, tokens, segments, valid_lens):
        X = self.token_embedding(tokens) + self.segment_embedding(segments)
        X = X + self.pos_embedding.data[:, :X.shape[1], :]
        for blk in self.blks:
            X = blk(X, valid_lens)
        return X


class MaskLM(nn.Module):
    def __init__(self, vocab_size, num_hiddens, num_inputs=768, **kwargs):
        super(MaskLM, self).__init__(**kwargs)
        self.mlp = nn.Sequential(nn.Linear(num_inputs, num_hiddens), nn.ReLU(),
                                 nn.LayerNorm(num_hiddens), nn.Linear(num_hiddens, vocab_size))

    def forward(self, X, pred_positions):
        num_pred_positions = pred_positions.shape[1]
        pred_positions = pred_positions.reshape(-1)
        batch_size = X.shape[0]
        batch_idx = torch.arange(0, batch_size)
        batch_idx = torch.repeat_interleave(batch_idx, num_pred_positions)
        masked_X = X[batch_idx, pred_positions]
        masked_X = masked_X.reshape((batch_size, num_pred_positions, -1))
        mlm_Y_hat = self.mlp(masked_X)
        return mlm_Y_hat


class NextSentencePred(nn.Module):
    def __init__(self, num_inputs, **kwargs):
        super(NextSentencePred, self).__init__(**kwargs)
        self.output = nn.Linear(num_inputs, 2)

    def forward(self, X):
        return self.output(X)


class BERTModel(nn.Module):
    def __init__(self, vocab_size, num_hiddens, norm_shape, ffn_num_hiddens, num_heads,
                 num_layers, dropout, max_len=1000, hid_in_features=768,
                 mlm_in_features=768, nsp_in_features=768):
        super(BERTModel, self).__init__()
        self.encoder = BERTEncoder(vocab_size, num_hiddens, norm_shape, ffn_num_hiddens,
                                   num_heads, num_layers, dropout, max_len=max_len)
        self.hidden = nn.Sequential(nn.Linear(hid_in_features, num_hiddens), nn.Tanh())
        self.mlm = MaskLM(vocab_size, num_hiddens, mlm_in_features)
        self.nsp = NextSentencePred(nsp_in_features)

    def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
        encoded_X = self.encoder(tokens, segments, valid_lens)
        if pred_positions is not None:
            mlm_Y_hat = self.mlm(encoded_X, pred_positions)
        else:
            mlm_Y_hat = None
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))
        return encoded_X, mlm_Y_hat, nsp_Y_hat


def _get_batch_loss_bert(net, loss, vocab_size, tokens_X, segments_X, valid_lens_x,
                         pred_positions_X, mlm_weights_X, mlm_Y, nsp_y):
    _, mlm_Y_hat, nsp_Y_hat = net(tokens_X, segments_X, valid_lens_x.reshape(-1), pred_positions_X)
    mlm_l = loss(mlm_Y_hat.reshape(-1, vocab_size), mlm_Y.reshape(-1)) * mlm_weights_X.reshape(-1, 1)
    mlm_l = mlm_l.sum() / (mlm_weights_X.sum() + 1e-8)
    nsp_l = loss(nsp_Y_hat, nsp_y)
    l = mlm_l + nsp_l
    return mlm_l, nsp_l, l


def make_batch(rng, batch, vocab, max_len, num_preds):
    tokens, segments, valid, positions, weights, labels, nsp = [], [], [], [], [], [], []
    for _ in range(batch):
        la, lb = rng.integers(2, 5), rng.integers(2, 5)
        a = [f"w{t}" for t in rng.integers(5, vocab, la)]
        b = [f"w{t}" for t in rng.integers(5, vocab, lb)]
        toks, segs = get_tokens_and_segments(a, b)
        ids = [{"<cls>": 1, "<sep>": 2}.get(t) or int(t[1:]) for t in toks]
        n = len(ids)
        pos = sorted(rng.choice(np.arange(1, n - 1), size=min(num_preds, n - 2), replace=False).tolist())
        lab = [ids[p] for p in pos]
        for p in pos:
            ids[p] = 3  # <mask>
        w = [1.0] * len(pos)
        pos += [0] * (num_preds - len(pos))
        lab += [0] * (num_preds - len(lab))
        w += [0.0] * (num_preds - len(w))
        tokens.append(ids + [0] * (max_len - n))
        segments.append(segs + [0] * (max_len - n))
        valid.append(float(n))
        positions.append(pos)
        weights.append(w)
        labels.append(lab)
        nsp.append(int(rng.integers(0, 2)))
    return (torch.tensor(tokens), torch.tensor(segments), torch.tensor(valid), torch.tensor(positions),
            torch.tensor(weights, dtype=torch.float32), torch.tensor(labels), torch.tensor(nsp))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(65)
    vocab_size, num_hiddens, max_len = 20, 16, 12
    net = BERTModel(vocab_size, num_hiddens=num_hiddens, norm_shape=[num_hiddens], ffn_num_hiddens=32,
                    num_heads=2, num_layers=2, dropout=0.0, max_len=max_len,
                    hid_in_features=num_hiddens, mlm_in_features=num_hiddens, nsp_in_features=num_hiddens)
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    loss = nn.CrossEntropyLoss()
    trainer = torch.optim.Adam(net.parameters(), lr=0.01)

    def train_step(tokens_X, segments_X, valid_lens_x, pred_positions_X, mlm_weights_X, mlm_Y, nsp_y):
        trainer.zero_grad()
        mlm_l, nsp_l, l = _get_batch_loss_bert(net, loss, vocab_size, tokens_X, segments_X, valid_lens_x,
                                               pred_positions_X, mlm_weights_X, mlm_Y, nsp_y)
        l.backward()
        trainer.step()
        return mlm_l, nsp_l

    step = torch.compile(train_step) if compiled else train_step
    batches = [make_batch(rng, 4, vocab_size, max_len, 2) for _ in range(3)]
    losses = []
    net.train()
    for epoch in range(2):
        for batch in batches:
            mlm_l, nsp_l = step(*batch)
            losses += [mlm_l.item(), nsp_l.item()]
    tokens, segments = get_tokens_and_segments(["w5", "w6"], ["w7"])
    ids = torch.tensor([[{"<cls>": 1, "<sep>": 2}.get(t) or int(t[1:]) for t in tokens]])
    net.eval()
    with torch.no_grad():
        encoded, _, nsp = net(ids, torch.tensor([segments]), torch.tensor([len(tokens)]))
    losses += encoded[:, 0, :3].flatten().tolist() + nsp.flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
