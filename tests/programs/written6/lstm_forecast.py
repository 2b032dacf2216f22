# In the manner of time-series forecasting tutorials and a small speech-command model: a
# min-max scaler by hand, sliding windows (``create_sequences`` appending ``data[i:i + seq_length]``),
# an ``nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)`` started from
# ``h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).requires_grad_()`` and
# ``c0``, passed as ``(h0.detach(), c0.detach())``, predicting from ``out[:, -1, :]``, an
# autoregressive forecast under ``torch.no_grad()`` rolling the window with ``torch.cat``;
# then Conv1d feature extraction over a (batch, channels, time) signal, ``transpose(1, 2)``
# into an ``nn.GRU(bidirectional=True, batch_first=True)``, framewise ``F.log_softmax`` with
# ``F.nll_loss`` over ``output.reshape(-1, n_class)`` and a mean over time for the clip label.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTMModel(nn.Module):
    def __init__(self, input_dim, hidden_dim, layer_dim, output_dim):
        super(LSTMModel, self).__init__()
        self.hidden_dim = hidden_dim
        self.layer_dim = layer_dim
        self.lstm = nn.LSTM(input_dim, hidden_dim, layer_dim, batch_first=True)
        self.fc = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        h0 = torch.zeros(self.layer_dim, x.size(0), self.hidden_dim).requires_grad_()
        c0 = torch.zeros(self.layer_dim, x.size(0), self.hidden_dim).requires_grad_()
        out, (hn, cn) = self.lstm(x, (h0.detach(), c0.detach()))
        out = self.fc(out[:, -1, :])
        return out


class SpeechModel(nn.Module):
    def __init__(self, n_feats, n_class, hidden=12):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv1d(n_feats, 16, kernel_size=5, padding=2), nn.BatchNorm1d(16), nn.GELU(),
            nn.Conv1d(16, 16, kernel_size=3, stride=1, padding=1), nn.GELU())
        self.rnn = nn.GRU(16, hidden, num_layers=1, bidirectional=True, batch_first=True)
        self.classifier = nn.Sequential(nn.Linear(hidden * 2, hidden), nn.GELU(), nn.Dropout(0.0),
                                        nn.Linear(hidden, n_class))

    def forward(self, x):
        x = self.cnn(x)
        x = x.transpose(1, 2)
        x, _ = self.rnn(x)
        x = self.classifier(x)
        return F.log_softmax(x, dim=2)


def create_sequences(data, seq_length):
    xs, ys = [], []
    for i in range(len(data) - seq_length - 1):
        xs.append(data[i:(i + seq_length)])
        ys.append(data[i + seq_length])
    return np.array(xs), np.array(ys)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(70)
    model = LSTMModel(input_dim=1, hidden_dim=16, layer_dim=2, output_dim=1)
    speech = SpeechModel(n_feats=6, n_class=4)
    if weights is not None:
        model.load_state_dict({k[6:]: torch.tensor(v) for k, v in weights.items() if k.startswith("model.")})
        speech.load_state_dict({k[7:]: torch.tensor(v) for k, v in weights.items() if k.startswith("speech.")})
    w = {"model." + k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    w.update({"speech." + k: v.detach().numpy().copy() for k, v in speech.state_dict().items()})

    t = np.arange(120)
    series = (np.sin(t * 0.2) + 0.1 * rng.normal(size=120)).astype(np.float32).reshape(-1, 1)
    lo, hi = series.min(), series.max()
    scaled = (series - lo) / (hi - lo)
    X, y = create_sequences(scaled, 10)
    X_train, y_train = torch.from_numpy(X[:96]).float(), torch.from_numpy(y[:96]).float()
    criterion = torch.nn.MSELoss(reduction='mean')
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step(xb, yb):
        optimizer.zero_grad()
        y_pred = model(xb)
        loss = criterion(y_pred, yb)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        model.train()
        for i in range(0, 96, 32):
            losses.append(step(X_train[i:i + 32], y_train[i:i + 32]).item())
    model.eval()
    with torch.no_grad():
        test_seq = X_train[-1:]
        preds = []
        for _ in range(4):
            y_test_pred = model(test_seq)
            pred = torch.flatten(y_test_pred).item()
            preds.append(pred)
            new_seq = test_seq.numpy().flatten()
            new_seq = np.append(new_seq, [pred])
            new_seq = new_seq[1:]
            test_seq = torch.as_tensor(new_seq).view(1, 10, 1).float()
    losses += [p * (hi - lo) + lo for p in preds]

    n_class = 4
    feats = torch.tensor(rng.normal(size=(8, 6, 20)).astype(np.float32))
    frame_labels = torch.tensor(rng.integers(0, n_class, (8, 20)))
    opt2 = torch.optim.AdamW(speech.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(opt2, max_lr=5e-3, steps_per_epoch=2, epochs=2,
                                                    anneal_strategy='linear')

    def speech_step(spectrograms, labels):
        opt2.zero_grad()
        output = speech(spectrograms)
        loss = F.nll_loss(output.reshape(-1, n_class), labels.reshape(-1))
        loss.backward()
        opt2.step()
        scheduler.step()
        return loss, output.mean(dim=1)

    step2 = torch.compile(speech_step) if compiled else speech_step
    for epoch in range(2):
        speech.train()
        for i in range(0, 8, 4):
            loss, clip = step2(feats[i:i + 4], frame_labels[i:i + 4])
            losses += [loss.item(), clip.argmax(-1).sum().item()]
    return {"losses": losses, "weights": w, "fn": [step, step2]}
