# In the manner of FNet implementations (google-research/f_net ported to PyTorch, Hugging
# Face's ``FNetModel``): token, position and token-type embeddings with a
# ``register_buffer("position_ids", torch.arange(n).expand((1, -1)), persistent=False)``
# and ``padding_idx``, a Fourier mixing sublayer ``torch.fft.fftn(x, dim=(1, 2)).real``
# (and the two-step ``torch.fft.fft(torch.fft.fft(x, dim=-1), dim=-2).real`` variant),
# post-norm residual blocks with ``nn.GELU(approximate="tanh")``, a pooler on the first
# token with ``nn.Tanh``, ``nn.Unflatten`` to split the classifier's output, AdamW with a
# ``CosineAnnealingWarmRestarts`` stepped by fractional epochs, and an evaluation under
# ``torch.inference_mode()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class FNetEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position_embeddings, type_vocab_size, pad_token_id=0):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)
        self.position_embeddings = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.projection = nn.Linear(hidden_size, hidden_size)
        self.register_buffer("position_ids", torch.arange(max_position_embeddings).expand((1, -1)), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long), persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        seq_length = input_ids.size()[1]
        position_ids = self.position_ids[:, :seq_length]
        if token_type_ids is None:
            buffered = self.token_type_ids[:, :seq_length]
            token_type_ids = buffered.expand(input_ids.shape[0], seq_length)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings += self.position_embeddings(position_ids)
        embeddings = self.LayerNorm(embeddings)
        return self.projection(embeddings)


class FNetBasicFourierTransform(nn.Module):
    def __init__(self, two_step=False):
        super().__init__()
        self.two_step = two_step

    def forward(self, hidden_states):
        if self.two_step:
            return torch.fft.fft(torch.fft.fft(hidden_states, dim=-1), dim=-2).real
        return torch.fft.fftn(hidden_states, dim=(1, 2)).real


class FNetLayer(nn.Module):
    def __init__(self, hidden_size, intermediate_size, two_step):
        super().__init__()
        self.fourier = FNetBasicFourierTransform(two_step)
        self.mixing_norm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.intermediate = nn.Linear(hidden_size, intermediate_size)
        self.act = nn.GELU(approximate="tanh")
        self.output = nn.Linear(intermediate_size, hidden_size)
        self.output_norm = nn.LayerNorm(hidden_size, eps=1e-12)

    def forward(self, hidden_states):
        fourier_output = self.mixing_norm(self.fourier(hidden_states) + hidden_states)
        intermediate_output = self.act(self.intermediate(fourier_output))
        return self.output_norm(self.output(intermediate_output) + fourier_output)


class FNetForSequenceClassification(nn.Module):
    def __init__(self, vocab_size=20, hidden_size=16, layers=2, max_len=12, num_labels=3, heads=2):
        super().__init__()
        self.embeddings = FNetEmbeddings(vocab_size, hidden_size, max_len, 2)
        self.layer = nn.ModuleList([FNetLayer(hidden_size, 32, two_step=bool(i % 2)) for i in range(layers)])
        self.pooler = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.Tanh())
        self.classifier = nn.Linear(hidden_size, num_labels * heads)
        self.unflatten = nn.Unflatten(1, (heads, num_labels))
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.1)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.1)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, input_ids, token_type_ids=None):
        h = self.embeddings(input_ids, token_type_ids)
        for layer in self.layer:
            h = layer(h)
        pooled = self.pooler(h[:, 0])
        return self.unflatten(self.classifier(pooled))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1201)
    model = FNetForSequenceClassification()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2, eta_min=1e-4)
    batches = []
    for _ in range(3):
        ids = rng.integers(1, 20, (4, 10))
        ids[:, -2:] = 0
        batches.append((torch.from_numpy(ids), torch.from_numpy(rng.integers(0, 2, (4, 10))),
                        torch.from_numpy(rng.integers(0, 3, (4, 2)))))

    def train_step(input_ids, token_type_ids, labels):
        model.train()
        logits = model(input_ids, token_type_ids)
        loss = F.cross_entropy(logits.reshape(-1, 3), labels.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    iters = len(batches)
    for epoch in range(2):
        for i, (ids, tt, labels) in enumerate(batches):
            loss = step(ids, tt, labels)
            scheduler.step(epoch + i / iters)
            losses += [loss.item(), optimizer.param_groups[0]["lr"]]
    model.eval()
    with torch.inference_mode():
        logits = model(batches[0][0])
        losses += [float(logits.softmax(-1).max(-1).values.mean()), float(logits.abs().sum())]
    return {"losses": losses, "weights": w, "fn": step}
