# In the manner of d2l.ai's recurrent chapters written from scratch: ``get_params`` with
# ``normal(shape)`` (``torch.randn(size=shape, device=device) * 0.01``) and ``three()``,
# ``param.requires_grad_(True)`` over a list, ``F.one_hot(X.T, vocab_size).type(torch.float32)``,
# a GRU and an LSTM step by step with ``torch.sigmoid``/``torch.tanh`` and ``@`` collecting
# ``outputs.append(Y)`` and returning ``torch.cat(outputs, dim=0)``, a ``RNNModelScratch``
# class holding ``forward_fn`` and ``init_state``, ``grad_clipping`` by hand
# (``torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))`` then
# ``param.grad[:] *= theta / norm``), ``loss(y_hat, y.long()).mean()``, perplexity by
# ``math.exp``, ``state.detach_()`` between minibatches (sequential partitioning), and
# ``predict`` by ``argmax(dim=1).reshape(1)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def get_gru_params(vocab_size, num_hiddens, device):
    num_inputs = num_outputs = vocab_size

    def normal(shape):
        return torch.randn(size=shape, device=device) * 0.01

    def three():
        return (normal((num_inputs, num_hiddens)), normal((num_hiddens, num_hiddens)),
                torch.zeros(num_hiddens, device=device))

    W_xz, W_hz, b_z = three()
    W_xr, W_hr, b_r = three()
    W_xh, W_hh, b_h = three()
    W_hq = normal((num_hiddens, num_outputs))
    b_q = torch.zeros(num_outputs, device=device)
    params = [W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q]
    for param in params:
        param.requires_grad_(True)
    return params


def get_lstm_params(vocab_size, num_hiddens, device):
    num_inputs = num_outputs = vocab_size

    def normal(shape):
        return torch.randn(size=shape, device=device) * 0.01

    def three():
        return (normal((num_inputs, num_hiddens)), normal((num_hiddens, num_hiddens)),
                torch.zeros(num_hiddens, device=device))

    W_xi, W_hi, b_i = three()
    W_xf, W_hf, b_f = three()
    W_xo, W_ho, b_o = three()
    W_xc, W_hc, b_c = three()
    W_hq = normal((num_hiddens, num_outputs))
    b_q = torch.zeros(num_outputs, device=device)
    params = [W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c, W_hq, b_q]
    for param in params:
        param.requires_grad_(True)
    return params


def init_gru_state(batch_size, num_hiddens, device):
    return (torch.zeros((batch_size, num_hiddens), device=device), )


def init_lstm_state(batch_size, num_hiddens, device):
    return (torch.zeros((batch_size, num_hiddens), device=device),
            torch.zeros((batch_size, num_hiddens), device=device))


def gru(inputs, state, params):
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h, W_hq, b_q = params
    H, = state
    outputs = []
    for X in inputs:
        Z = torch.sigmoid((X @ W_xz) + (H @ W_hz) + b_z)
        R = torch.sigmoid((X @ W_xr) + (H @ W_hr) + b_r)
        H_tilda = torch.tanh((X @ W_xh) + ((R * H) @ W_hh) + b_h)
        H = Z * H + (1 - Z) * H_tilda
        Y = H @ W_hq + b_q
        outputs.append(Y)
    return torch.cat(outputs, dim=0), (H,)


def lstm(inputs, state, params):
    [W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c,
     W_hq, b_q] = params
    (H, C) = state
    outputs = []
    for X in inputs:
        I = torch.sigmoid((X @ W_xi) + (H @ W_hi) + b_i)
        F_ = torch.sigmoid((X @ W_xf) + (H @ W_hf) + b_f)
        O = torch.sigmoid((X @ W_xo) + (H @ W_ho) + b_o)
        C_tilda = torch.tanh((X @ W_xc) + (H @ W_hc) + b_c)
        C = F_ * C + I * C_tilda
        H = O * torch.tanh(C)
        Y = (H @ W_hq) + b_q
        outputs.append(Y)
    return torch.cat(outputs, dim=0), (H, C)


class RNNModelScratch:
    """A RNN Model implemented from scratch."""
    def __init__(self, vocab_size, num_hiddens, device, get_params, init_state, forward_fn):
        self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
        self.params = get_params(vocab_size, num_hiddens, device)
        self.init_state, self.forward_fn = init_state, forward_fn

    def __call__(self, X, state):
        X = F.one_hot(X.T, self.vocab_size).type(torch.float32)
        return self.forward_fn(X, state, self.params)

    def begin_state(self, batch_size, device):
        return self.init_state(batch_size, self.num_hiddens, device)


def grad_clipping(net, theta):
    """Clip the gradient."""
    if isinstance(net, nn.Module):
        params = [p for p in net.parameters() if p.requires_grad]
    else:
        params = net.params
    norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def predict_ch8(prefix, num_preds, net, device):
    state = net.begin_state(batch_size=1, device=device)
    outputs = [prefix[0]]
    get_input = lambda: torch.tensor([outputs[-1]], device=device).reshape((1, 1))
    for y in prefix[1:]:
        _, state = net(get_input(), state)
        outputs.append(y)
    for _ in range(num_preds):
        y, state = net(get_input(), state)
        outputs.append(int(y.argmax(dim=1).reshape(1)))
    return outputs


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    device = torch.device('cpu')
    rng = np.random.default_rng(63)
    vocab_size, num_hiddens, batch_size, num_steps, lr = 10, 16, 4, 6, 1.0
    nets = {"gru": RNNModelScratch(vocab_size, num_hiddens, device, get_gru_params, init_gru_state, gru),
            "lstm": RNNModelScratch(vocab_size, num_hiddens, device, get_lstm_params, init_lstm_state, lstm)}
    if weights is not None:
        for name, net in nets.items():
            with torch.no_grad():
                for i, p in enumerate(net.params):
                    p.copy_(torch.tensor(weights[f"{name}.{i}"]))
    w = {f"{name}.{i}": p.detach().numpy().copy() for name, net in nets.items()
         for i, p in enumerate(net.params)}
    corpus = (np.arange(200) * 7 + rng.integers(0, 2, 200)) % vocab_size
    loss = nn.CrossEntropyLoss()
    losses, fns = [], []
    for name, net in nets.items():
        def train_step(X, Y, state):
            y = Y.T.reshape(-1)
            y_hat, state = net(X, state)
            l = loss(y_hat, y.long()).mean()
            l.backward()
            grad_clipping(net, 1)
            sgd(net.params, lr, batch_size=1)
            return l, state

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        state = None
        total, n = 0.0, 0
        offset = 0
        num_tokens = ((len(corpus) - offset - 1) // batch_size) * batch_size
        Xs = torch.tensor(corpus[offset: offset + num_tokens]).reshape(batch_size, -1)
        Ys = torch.tensor(corpus[offset + 1: offset + 1 + num_tokens]).reshape(batch_size, -1)
        for i in range(0, 6 * num_steps, num_steps):
            X, Y = Xs[:, i: i + num_steps], Ys[:, i: i + num_steps]
            if state is None:
                state = net.begin_state(batch_size=X.shape[0], device=device)
            else:
                for s in state:
                    s.detach_()
            l, state = step(X, Y, state)
            total += l.item() * Y.numel()
            n += Y.numel()
            losses.append(l.item())
        losses.append(math.exp(total / n))
        losses += predict_ch8([1, 8], 4, net, device)
    return {"losses": losses, "weights": w, "fn": fns}
