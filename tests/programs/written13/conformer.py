# In the manner of the PyTorch Conformer implementations (sooftware/conformer, lucidrains'
# conformer): macaron feed-forward modules added at half weight (``x + 0.5 * ff(x)``) with
# ``nn.SiLU``, a convolution module (``LayerNorm``, ``x.transpose(1, 2)``, a pointwise
# ``Conv1d`` doubling channels, ``nn.GLU(dim=1)``, a depthwise ``Conv1d(groups=channels,
# padding=(kernel_size - 1) // 2)``, ``BatchNorm1d``, ``Swish``, pointwise back), multi-head
# self-attention through ``nn.MultiheadAttention(batch_first=True)`` with a
# ``key_padding_mask`` from sequence lengths (``torch.arange(T).expand(B, T) >=
# lengths.unsqueeze(1)``), a final ``LayerNorm`` per block, ``Conv2dSubampling`` (two stride-2
# ``Conv2d`` over ``inputs.unsqueeze(1)``, then ``permute(0, 2, 1, 3)`` and ``view(B, T,
# C * F)``), output lengths by ``(lengths >> 2) - 1``, SpecAugment-style time masks applied by
# ``masked_fill`` from a mask input, frame-wise ``F.log_softmax`` with ``nn.CTCLoss(
# zero_infinity=True)`` on ``(T, B, C)``, and a Noam warm-up written as ``LambdaLR``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Swish(nn.Module):
    def forward(self, inputs):
        return inputs * inputs.sigmoid()


class FeedForwardModule(nn.Module):
    def __init__(self, encoder_dim, expansion_factor=2, dropout_p=0.0):
        super().__init__()
        self.sequential = nn.Sequential(
            nn.LayerNorm(encoder_dim),
            nn.Linear(encoder_dim, encoder_dim * expansion_factor, bias=True),
            nn.SiLU(),
            nn.Dropout(p=dropout_p),
            nn.Linear(encoder_dim * expansion_factor, encoder_dim, bias=True),
            nn.Dropout(p=dropout_p),
        )

    def forward(self, inputs):
        return self.sequential(inputs)


class ConformerConvModule(nn.Module):
    def __init__(self, in_channels, kernel_size=3, expansion_factor=2):
        super().__init__()
        assert (kernel_size - 1) % 2 == 0, "kernel_size should be a odd number for 'SAME' padding"
        self.layer_norm = nn.LayerNorm(in_channels)
        self.sequential = nn.Sequential(
            nn.Conv1d(in_channels, in_channels * expansion_factor, 1),
            nn.GLU(dim=1),
            nn.Conv1d(in_channels, in_channels, kernel_size, groups=in_channels, padding=(kernel_size - 1) // 2, bias=False),
            nn.BatchNorm1d(in_channels),
            Swish(),
            nn.Conv1d(in_channels, in_channels, 1),
        )

    def forward(self, inputs):
        return self.sequential(self.layer_norm(inputs).transpose(1, 2)).transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(self, encoder_dim=8, num_attention_heads=2):
        super().__init__()
        self.ff1 = FeedForwardModule(encoder_dim)
        self.attn_norm = nn.LayerNorm(encoder_dim)
        self.attn = nn.MultiheadAttention(encoder_dim, num_attention_heads, batch_first=True)
        self.conv = ConformerConvModule(encoder_dim)
        self.ff2 = FeedForwardModule(encoder_dim)
        self.norm = nn.LayerNorm(encoder_dim)

    def forward(self, x, key_padding_mask):
        x = x + 0.5 * self.ff1(x)
        h = self.attn_norm(x)
        h, _ = self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False)
        x = x + h
        x = x + self.conv(x)
        x = x + 0.5 * self.ff2(x)
        return self.norm(x)


class Conv2dSubampling(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.sequential = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=2),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=2),
            nn.ReLU(),
        )

    def forward(self, inputs, input_lengths):
        outputs = self.sequential(inputs.unsqueeze(1))
        batch_size, channels, subsampled_lengths, sumsampled_dim = outputs.size()
        outputs = outputs.permute(0, 2, 1, 3)
        outputs = outputs.contiguous().view(batch_size, subsampled_lengths, channels * sumsampled_dim)
        output_lengths = (input_lengths >> 2) - 1
        return outputs, output_lengths


class Conformer(nn.Module):
    def __init__(self, num_classes=6, input_dim=12, encoder_dim=8, num_layers=2):
        super().__init__()
        self.conv_subsample = Conv2dSubampling(1, 4)
        self.input_projection = nn.Linear(4 * (((input_dim - 1) // 2 - 1) // 2), encoder_dim)
        self.layers = nn.ModuleList([ConformerBlock(encoder_dim) for _ in range(num_layers)])
        self.fc = nn.Linear(encoder_dim, num_classes, bias=False)

    def forward(self, inputs, input_lengths):
        outputs, output_lengths = self.conv_subsample(inputs, input_lengths)
        outputs = self.input_projection(outputs)
        T = outputs.size(1)
        key_padding_mask = torch.arange(T).expand(outputs.size(0), T) >= output_lengths.unsqueeze(1)
        for layer in self.layers:
            outputs = layer(outputs, key_padding_mask)
        outputs = F.log_softmax(self.fc(outputs), dim=-1)
        return outputs, output_lengths


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1310)
    model = Conformer()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CTCLoss(blank=0, zero_infinity=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    d_model, warmup = 8, 4
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: d_model ** -0.5 * min((s + 1) ** -0.5, (s + 1) * warmup ** -1.5) / 0.2)
    B, T_in, Fdim = 2, 28, 12
    data = []
    for _ in range(3):
        feats = rng.standard_normal((B, T_in, Fdim)).astype(np.float32)
        lengths = np.array([28, 24], dtype=np.int64)
        time_mask = np.zeros((B, T_in, 1), dtype=bool)
        start = rng.integers(0, T_in - 4, B)
        for b in range(B):
            time_mask[b, start[b]:start[b] + 3] = True
        targets = rng.integers(1, 6, (B, 3))
        target_lengths = np.array([3, 2], dtype=np.int64)
        data.append(tuple(torch.from_numpy(a) for a in (feats, lengths, time_mask, targets, target_lengths)))

    def train_step(feats, lengths, time_mask, targets, target_lengths):
        feats = feats.masked_fill(time_mask, 0.0)
        log_probs, out_lengths = model(feats, lengths)
        loss = criterion(log_probs.transpose(0, 1), targets, out_lengths, target_lengths)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(2):
        for batch in data:
            loss = step(*batch)
            scheduler.step()
            losses += [loss.item(), scheduler.get_last_lr()[0]]
    model.eval()
    with torch.no_grad():
        log_probs, out_lengths = model(data[0][0], data[0][1])
        best = log_probs.argmax(-1)
        losses += [float(v) for v in best[0, :int(out_lengths[0])]]
    return {"losses": losses, "weights": w, "fn": step}
