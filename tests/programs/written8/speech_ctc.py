# In the manner of AssemblyAI's "Building an end-to-end Speech Recognition model in
# PyTorch" (DeepSpeech2-like, MIT licence) and the CTC idioms of speech recipes: a
# ``CNNLayerNorm`` normalising the feature axis by ``x.transpose(2, 3).contiguous()``
# around ``nn.LayerNorm``, residual CNN blocks with ``F.gelu`` and ``nn.Dropout``, a
# ``view(sizes[0], sizes[1] * sizes[2], sizes[3])`` then ``transpose(1, 2)`` into a
# fully connected layer, bidirectional ``nn.GRU(batch_first=True)`` layers, a classifier,
# ``F.log_softmax(output, dim=2)`` transposed to (time, batch, class) for
# ``nn.CTCLoss(blank=0, zero_infinity=True)`` with input and label lengths, AdamW under
# ``OneCycleLR(anneal_strategy='linear')`` stepped per batch, and a greedy decoder
# collapsing repeats and blanks from ``torch.argmax(output, dim=2)``; also the
# functional ``F.ctc_loss`` with ``reduction='sum'`` and concatenated 1-D targets.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CNNLayerNorm(nn.Module):
    def __init__(self, n_feats):
        super(CNNLayerNorm, self).__init__()
        self.layer_norm = nn.LayerNorm(n_feats)

    def forward(self, x):
        x = x.transpose(2, 3).contiguous()
        x = self.layer_norm(x)
        return x.transpose(2, 3).contiguous()


class ResidualCNN(nn.Module):
    def __init__(self, in_channels, out_channels, kernel, stride, dropout, n_feats):
        super(ResidualCNN, self).__init__()
        self.cnn1 = nn.Conv2d(in_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.cnn2 = nn.Conv2d(out_channels, out_channels, kernel, stride, padding=kernel // 2)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.layer_norm1 = CNNLayerNorm(n_feats)
        self.layer_norm2 = CNNLayerNorm(n_feats)

    def forward(self, x):
        residual = x
        x = self.layer_norm1(x)
        x = F.gelu(x)
        x = self.dropout1(x)
        x = self.cnn1(x)
        x = self.layer_norm2(x)
        x = F.gelu(x)
        x = self.dropout2(x)
        x = self.cnn2(x)
        x += residual
        return x


class BidirectionalGRU(nn.Module):
    def __init__(self, rnn_dim, hidden_size, dropout, batch_first):
        super(BidirectionalGRU, self).__init__()
        self.BiGRU = nn.GRU(input_size=rnn_dim, hidden_size=hidden_size,
                            num_layers=1, batch_first=batch_first, bidirectional=True)
        self.layer_norm = nn.LayerNorm(rnn_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.layer_norm(x)
        x = F.gelu(x)
        x, _ = self.BiGRU(x)
        x = self.dropout(x)
        return x


class SpeechRecognitionModel(nn.Module):
    def __init__(self, n_cnn_layers, n_rnn_layers, rnn_dim, n_class, n_feats, stride=2, dropout=0.1):
        super(SpeechRecognitionModel, self).__init__()
        n_feats = n_feats // 2
        self.cnn = nn.Conv2d(1, 4, 3, stride=stride, padding=3 // 2)
        self.rescnn_layers = nn.Sequential(*[
            ResidualCNN(4, 4, kernel=3, stride=1, dropout=dropout, n_feats=n_feats)
            for _ in range(n_cnn_layers)
        ])
        self.fully_connected = nn.Linear(n_feats * 4, rnn_dim)
        self.birnn_layers = nn.Sequential(*[
            BidirectionalGRU(rnn_dim=rnn_dim if i == 0 else rnn_dim * 2,
                             hidden_size=rnn_dim, dropout=dropout, batch_first=i == 0)
            for i in range(n_rnn_layers)
        ])
        self.classifier = nn.Sequential(
            nn.Linear(rnn_dim * 2, rnn_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(rnn_dim, n_class)
        )

    def forward(self, x):
        x = self.cnn(x)
        x = self.rescnn_layers(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])
        x = x.transpose(1, 2)
        x = self.fully_connected(x)
        x = self.birnn_layers(x)
        x = self.classifier(x)
        return x


def GreedyDecoder(output, labels, label_lengths, blank_label=0, collapse_repeated=True):
    arg_maxes = torch.argmax(output, dim=2)
    decodes = []
    targets = []
    for i, args in enumerate(arg_maxes):
        decode = []
        targets.append(labels[i][:label_lengths[i]].tolist())
        for j, index in enumerate(args):
            if index != blank_label:
                if collapse_repeated and j != 0 and index == args[j - 1]:
                    continue
                decode.append(index.item())
        decodes.append(decode)
    return decodes, targets


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(808)
    hparams = {"n_cnn_layers": 1, "n_rnn_layers": 2, "rnn_dim": 8, "n_class": 6, "n_feats": 8,
               "stride": 2, "dropout": 0.0, "learning_rate": 5e-3, "batch_size": 3, "epochs": 3}
    model = SpeechRecognitionModel(hparams['n_cnn_layers'], hparams['n_rnn_layers'], hparams['rnn_dim'],
                                   hparams['n_class'], hparams['n_feats'], hparams['stride'], hparams['dropout'])
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    data = []
    for _ in range(3):
        spectrograms = torch.tensor(rng.normal(size=(3, 1, 8, 12)).astype(np.float32))
        label_lengths = [3, 2, 3]
        labels = torch.tensor(rng.integers(1, 6, size=(3, 3)))
        input_lengths = [6, 6, 5]
        data.append((spectrograms, labels, input_lengths, label_lengths))
    optimizer = torch.optim.AdamW(model.parameters(), hparams['learning_rate'])
    criterion = nn.CTCLoss(blank=0, zero_infinity=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=hparams['learning_rate'],
                                                    steps_per_epoch=len(data), epochs=hparams['epochs'],
                                                    anneal_strategy='linear')

    def train_step(spectrograms, labels, input_lengths, label_lengths):
        optimizer.zero_grad()
        output = model(spectrograms)
        output = F.log_softmax(output, dim=2)
        output = output.transpose(0, 1)
        loss = criterion(output, labels, input_lengths, label_lengths)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = [float(sum(p.numel() for p in model.parameters()))]
    model.train()
    for epoch in range(hparams['epochs']):
        for spectrograms, labels, input_lengths, label_lengths in data:
            loss = step(spectrograms, labels, input_lengths, label_lengths)
            scheduler.step()
            losses.append(loss.item())
            losses.append(scheduler.get_last_lr()[0])
    model.eval()
    with torch.no_grad():
        spectrograms, labels, input_lengths, label_lengths = data[0]
        output = F.log_softmax(model(spectrograms), dim=2)
        decoded_preds, decoded_targets = GreedyDecoder(output, labels, label_lengths)
        losses += [len(d) for d in decoded_preds] + sum(decoded_targets, [])
        log_probs = output.transpose(0, 1)
        flat = torch.cat([labels[i][:label_lengths[i]] for i in range(3)])
        losses.append(F.ctc_loss(log_probs, flat, torch.tensor(input_lengths), torch.tensor(label_lengths),
                                 reduction='sum').item())
        losses.append(F.ctc_loss(log_probs, labels, input_lengths, label_lengths, reduction='none').sum().item())
    return {"losses": losses, "weights": w, "fn": step}
