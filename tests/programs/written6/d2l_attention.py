# In the manner of d2l.ai's attention chapters: ``sequence_mask`` by comparing
# ``torch.arange(maxlen)[None, :] < valid_len[:, None]`` and assigning ``X[~mask] = value``,
# ``masked_softmax`` with ``torch.repeat_interleave(valid_lens, shape[1])``, additive
# attention (``queries.unsqueeze(2) + keys.unsqueeze(1)``, ``torch.tanh``, ``w_v``, ``squeeze(-1)``)
# and scaled dot-product attention with ``torch.bmm`` and ``keys.transpose(1, 2)``, a
# Bahdanau-attention GRU decoder over an encoder's ``nn.GRU`` outputs (``permute(1, 0, 2)``,
# ``torch.unsqueeze(hidden_state[-1], dim=1)``, ``torch.cat((context, torch.unsqueeze(x, dim=1)),
# dim=-1)``), multi-head attention with ``transpose_qkv``/``transpose_output``, and
# ``MaskedSoftmaxCELoss`` (a CrossEntropyLoss subclass with ``reduction='none'`` weighted by a
# ``sequence_mask`` of ones), with teacher forcing by prepending ``<bos>`` and ``grad_clipping``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
from torch import nn


def sequence_mask(X, valid_len, value=0):
    """Mask irrelevant entries in sequences."""
    maxlen = X.size(1)
    mask = torch.arange((maxlen), dtype=torch.float32, device=X.device)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


def masked_softmax(X, valid_lens):
    """Perform softmax operation by masking elements on the last axis."""
    if valid_lens is None:
        return nn.functional.softmax(X, dim=-1)
    else:
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        X = sequence_mask(X.reshape(-1, shape[-1]), valid_lens, value=-1e6)
        return nn.functional.softmax(X.reshape(shape), dim=-1)


class AdditiveAttention(nn.Module):
    def __init__(self, key_size, query_size, num_hiddens, dropout, **kwargs):
        super(AdditiveAttention, self).__init__(**kwargs)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=False)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=False)
        self.w_v = nn.Linear(num_hiddens, 1, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens):
        queries, keys = self.W_q(queries), self.W_k(keys)
        features = queries.unsqueeze(2) + keys.unsqueeze(1)
        features = torch.tanh(features)
        scores = self.w_v(features).squeeze(-1)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


class DotProductAttention(nn.Module):
    def __init__(self, dropout, **kwargs):
        super(DotProductAttention, self).__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)


def transpose_qkv(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    def __init__(self, key_size, query_size, value_size, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super(MultiHeadAttention, self).__init__(**kwargs)
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(query_size, num_hiddens, bias=bias)
        self.W_k = nn.Linear(key_size, num_hiddens, bias=bias)
        self.W_v = nn.Linear(value_size, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens):
        queries = transpose_qkv(self.W_q(queries), self.num_heads)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)
        values = transpose_qkv(self.W_v(values), self.num_heads)
        if valid_lens is not None:
            valid_lens = torch.repeat_interleave(valid_lens, repeats=self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)


class Seq2SeqEncoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
        super(Seq2SeqEncoder, self).__init__(**kwargs)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X, *args):
        X = self.embedding(X)
        X = X.permute(1, 0, 2)
        output, state = self.rnn(X)
        return output, state


class Seq2SeqAttentionDecoder(nn.Module):
    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0, **kwargs):
        super(Seq2SeqAttentionDecoder, self).__init__(**kwargs)
        self.attention = AdditiveAttention(num_hiddens, num_hiddens, num_hiddens, dropout)
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs, enc_valid_lens, *args):
        outputs, hidden_state = enc_outputs
        return (outputs.permute(1, 0, 2), hidden_state, enc_valid_lens)

    def forward(self, X, state):
        enc_outputs, hidden_state, enc_valid_lens = state
        X = self.embedding(X).permute(1, 0, 2)
        outputs, self._attention_weights = [], []
        for x in X:
            query = torch.unsqueeze(hidden_state[-1], dim=1)
            context = self.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
            x = torch.cat((context, torch.unsqueeze(x, dim=1)), dim=-1)
            out, hidden_state = self.rnn(x.permute(1, 0, 2), hidden_state)
            outputs.append(out)
            self._attention_weights.append(self.attention.attention_weights)
        outputs = self.dense(torch.cat(outputs, dim=0))
        return outputs.permute(1, 0, 2), [enc_outputs, hidden_state, enc_valid_lens]


class EncoderDecoder(nn.Module):
    def __init__(self, encoder, decoder, **kwargs):
        super(EncoderDecoder, self).__init__(**kwargs)
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, enc_X, dec_X, *args):
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state)


class MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    def forward(self, pred, label, valid_len):
        weights = torch.ones_like(label)
        weights = sequence_mask(weights, valid_len)
        self.reduction = 'none'
        unweighted_loss = super(MaskedSoftmaxCELoss, self).forward(pred.permute(0, 2, 1), label)
        weighted_loss = (unweighted_loss * weights).mean(dim=1)
        return weighted_loss


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def xavier_init_weights(m):
    if type(m) == nn.Linear:
        nn.init.xavier_uniform_(m.weight)
    if type(m) == nn.GRU:
        for param in m._flat_weights_names:
            if "weight" in param:
                nn.init.xavier_uniform_(m._parameters[param])


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(64)
    vocab, embed, hidden, layers, steps, bos = 12, 8, 16, 2, 5, 1
    encoder = Seq2SeqEncoder(vocab, embed, hidden, layers)
    decoder = Seq2SeqAttentionDecoder(vocab, embed, hidden, layers)
    net = EncoderDecoder(encoder, decoder)
    net.apply(xavier_init_weights)
    mha = MultiHeadAttention(hidden, hidden, hidden, hidden, 4, 0.0)
    if weights is not None:
        net.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("net.")})
        mha.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("mha.")})
    w = {"net." + k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    w.update({"mha." + k: v.detach().numpy().copy() for k, v in mha.state_dict().items()})
    losses = []
    losses += masked_softmax(torch.tensor(rng.random((2, 2, 4)).astype(np.float32)),
                             torch.tensor([2, 3])).flatten().tolist()
    losses += masked_softmax(torch.tensor(rng.random((2, 2, 4)).astype(np.float32)),
                             torch.tensor([[1, 3], [2, 4]])).flatten().tolist()

    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)
    loss = MaskedSoftmaxCELoss()
    net.train()

    def train_step(X, X_valid_len, Y, Y_valid_len):
        optimizer.zero_grad()
        bos_col = torch.tensor([bos] * Y.shape[0]).reshape(-1, 1)
        dec_input = torch.cat([bos_col, Y[:, :-1]], 1)
        Y_hat, _ = net(X, dec_input, X_valid_len)
        l = loss(Y_hat, Y, Y_valid_len)
        l.sum().backward()
        grad_clipping(net, 1)
        optimizer.step()
        return l.sum()

    step = torch.compile(train_step) if compiled else train_step
    X = torch.tensor(rng.integers(3, vocab, (12, steps)))
    Y = torch.flip(X, dims=[1])
    X_valid_len = torch.tensor(rng.integers(2, steps + 1, 12))
    for epoch in range(2):
        for i in range(0, 12, 4):
            l = step(X[i:i + 4], X_valid_len[i:i + 4], Y[i:i + 4], X_valid_len[i:i + 4])
            losses.append(l.item() / X_valid_len[i:i + 4].sum().item())
    opt2 = torch.optim.SGD(mha.parameters(), lr=0.1)

    def mha_step(queries, keys, valid_lens, target):
        opt2.zero_grad()
        out = mha(queries, keys, keys, valid_lens)
        l = ((out - target) ** 2).mean()
        l.backward()
        opt2.step()
        return l

    step2 = torch.compile(mha_step) if compiled else mha_step
    q = torch.tensor(rng.normal(size=(2, 4, hidden)).astype(np.float32))
    k = torch.tensor(rng.normal(size=(2, 6, hidden)).astype(np.float32))
    for i in range(3):
        losses.append(step2(q, k, torch.tensor([3, 2 + i]), q * 0.5).item())
    return {"losses": losses, "weights": w, "fn": [step, step2]}
