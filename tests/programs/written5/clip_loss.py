# In the manner of CLIP-style contrastive training (open_clip / tutorials): an image
# encoder and a text encoder (embedding bag of tokens via mean over nn.Embedding),
# projections to a shared space, F.normalize(dim=-1), a learnable logit_scale initialised
# to log(1/0.07) and used through .exp() clamped by torch.clamp(max=100), logits
# image @ text.t(), symmetric F.cross_entropy against torch.arange labels, top-1
# retrieval accuracy, and `logit_scale.data.clamp_(0, 4.6052)` after the step.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ImageEncoder(nn.Module):
    def __init__(self, in_dim=12, hidden=32, embed_dim=8):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.proj = nn.Parameter(torch.randn(hidden, embed_dim) * hidden ** -0.5)

    def forward(self, x):
        return self.mlp(x) @ self.proj


class TextEncoder(nn.Module):
    def __init__(self, vocab=20, width=16, embed_dim=8):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab, width)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Linear(width, embed_dim, bias=False)

    def forward(self, text):
        x = self.token_embedding(text)
        x = self.ln_final(x.mean(dim=1))
        return self.text_projection(x)


class CLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = ImageEncoder()
        self.text = TextEncoder()
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


class ClipLoss(nn.Module):
    def forward(self, image_features, text_features, logit_scale):
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logits_per_image.t()
        labels = torch.arange(logits_per_image.shape[0], device=image_features.device, dtype=torch.long)
        total_loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
        return total_loss, logits_per_image


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(12)
    model = CLIP()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    loss_fn = ClipLoss()
    exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n
    include = lambda n, p: not exclude(n, p)
    named_parameters = list(model.named_parameters())
    gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
    rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": gain_or_bias_params, "weight_decay": 0.0}, {"params": rest_params, "weight_decay": 0.2}],
        lr=5e-3, betas=(0.9, 0.98), eps=1e-6)

    def train_step(images, texts):
        optimizer.zero_grad()
        image_features, text_features, logit_scale = model(images, texts)
        total_loss, logits = loss_fn(image_features, text_features, torch.clamp(logit_scale, max=100))
        total_loss.backward()
        optimizer.step()
        with torch.no_grad():
            model.logit_scale.clamp_(0, np.log(100))
        return total_loss, logits

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    proto = rng.normal(size=(20, 12)).astype(np.float32)
    for i in range(12):
        texts = rng.integers(0, 20, (16, 5))
        images = proto[texts].mean(1) + 0.1 * rng.normal(size=(16, 12)).astype(np.float32)
        loss, logits = step(torch.from_numpy(images.astype(np.float32)), torch.from_numpy(texts))
        acc = (logits.argmax(dim=-1) == torch.arange(16)).float().mean()
        losses += [loss.item(), acc.item(), model.logit_scale.item()]
    return {"losses": losses, "weights": w, "fn": step}
