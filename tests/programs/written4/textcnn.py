# In the manner of CNN sentence classifiers (Kim's TextCNN as commonly re-implemented):
# Embedding, an nn.ModuleList of Conv1d over embeddings permuted to (batch, channels,
# length) with several kernel sizes, relu, max-over-time pooling by
# F.max_pool1d(x, x.size(2)).squeeze(2) or nn.AdaptiveMaxPool1d(1), torch.cat of the
# pooled features, Dropout, and a 1-D CNN regressor over a time series (Conv1d stacks with
# BatchNorm1d, AdaptiveAvgPool1d, nn.Flatten) trained with Adam and weight decay.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, n_filters, filter_sizes, output_dim, dropout=0.0, pad_idx=0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_idx)
        self.convs = nn.ModuleList([
            nn.Conv1d(in_channels=embed_dim, out_channels=n_filters, kernel_size=fs)
            for fs in filter_sizes
        ])
        self.pool = nn.AdaptiveMaxPool1d(1)
        self.fc = nn.Linear(len(filter_sizes) * n_filters, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, text):
        embedded = self.embedding(text)
        embedded = embedded.permute(0, 2, 1)
        conved = [F.relu(conv(embedded)) for conv in self.convs]
        pooled = [F.max_pool1d(conv, conv.shape[2]).squeeze(2) for conv in conved[:-1]]
        pooled.append(self.pool(conved[-1]).squeeze(-1))
        cat = self.dropout(torch.cat(pooled, dim=1))
        return self.fc(cat)


class SeriesCNN(nn.Module):
    def __init__(self, in_channels=2, hidden=8):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(in_channels, hidden, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm1d(hidden),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(hidden, hidden * 2, kernel_size=3, padding='same'),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(hidden * 2, 1)

    def forward(self, x):
        return self.head(self.features(x)).squeeze(-1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(10)
    vocab = 20
    text = rng.integers(1, vocab, (48, 9))
    text[::3, 7:] = 0
    label = (text[:, 0] > 10).astype(np.float32)
    series = rng.standard_normal((48, 2, 12)).astype(np.float32)
    target = series[:, 0, :6].mean(1) - series[:, 1, 6:].mean(1)
    models = [TextCNN(vocab, 8, 4, [2, 3, 4], 1), SeriesCNN()]
    w = {}
    for j, model in enumerate(models):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    text_model, series_model = models
    optimizer = torch.optim.Adam(text_model.parameters(), lr=5e-3)
    criterion = nn.BCEWithLogitsLoss()

    def binary_accuracy(preds, y):
        rounded_preds = torch.round(torch.sigmoid(preds))
        correct = (rounded_preds == y).float()
        return correct.sum() / len(correct)

    def text_step(batch_text, batch_label):
        optimizer.zero_grad()
        predictions = text_model(batch_text).squeeze(1)
        loss = criterion(predictions, batch_label)
        acc = binary_accuracy(predictions, batch_label)
        loss.backward()
        optimizer.step()
        return loss, acc

    opt2 = torch.optim.Adam(series_model.parameters(), lr=1e-2, weight_decay=1e-4)

    def series_step(x, y):
        opt2.zero_grad()
        loss = F.mse_loss(series_model(x), y)
        loss.backward()
        opt2.step()
        return loss

    step1 = torch.compile(text_step) if compiled else text_step
    step2 = torch.compile(series_step) if compiled else series_step
    losses = []
    for epoch in range(2):
        for i in range(0, 48, 12):
            loss, acc = step1(torch.tensor(text[i:i + 12]), torch.tensor(label[i:i + 12]))
            losses += [loss.item(), acc.item()]
            losses.append(step2(torch.tensor(series[i:i + 12]), torch.tensor(target[i:i + 12])).item())
    text_model.eval()
    series_model.eval()
    with torch.no_grad():
        losses += text_model(torch.tensor(text[:4])).flatten().tolist()
        losses += series_model(torch.tensor(series[:4])).tolist()
    return {"losses": losses, "weights": w, "fn": [step1, step2]}
