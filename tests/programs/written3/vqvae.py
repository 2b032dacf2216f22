# In the manner of public VQ-VAE implementations: a VectorQuantizer module with an
# nn.Embedding codebook (uniform_ init of weight.data), distances through
# torch.sum(x**2) + torch.sum(w**2) - 2 * torch.matmul, argmin, one-hot encodings built with
# scatter_, codebook and commitment losses with detach(), the straight-through estimator
# inputs + (quantized - inputs).detach(), and the codebook perplexity; Conv1d encoder and
# decoder around it, permute(...).contiguous() between channels-first and channels-last.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class VectorQuantizer(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super(VectorQuantizer, self).__init__()
        self._embedding_dim = embedding_dim
        self._num_embeddings = num_embeddings
        self._embedding = nn.Embedding(self._num_embeddings, self._embedding_dim)
        self._embedding.weight.data.uniform_(-1/self._num_embeddings, 1/self._num_embeddings)
        self._commitment_cost = commitment_cost

    def forward(self, inputs):
        # convert inputs from BCL -> BLC
        inputs = inputs.permute(0, 2, 1).contiguous()
        input_shape = inputs.shape
        flat_input = inputs.view(-1, self._embedding_dim)
        distances = (torch.sum(flat_input**2, dim=1, keepdim=True)
                     + torch.sum(self._embedding.weight**2, dim=1)
                     - 2 * torch.matmul(flat_input, self._embedding.weight.t()))
        encoding_indices = torch.argmin(distances, dim=1).unsqueeze(1)
        encodings = torch.zeros(encoding_indices.shape[0], self._num_embeddings, device=inputs.device)
        encodings.scatter_(1, encoding_indices, 1)
        quantized = torch.matmul(encodings, self._embedding.weight).view(input_shape)
        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        q_latent_loss = F.mse_loss(quantized, inputs.detach())
        loss = q_latent_loss + self._commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        avg_probs = torch.mean(encodings, dim=0)
        perplexity = torch.exp(-torch.sum(avg_probs * torch.log(avg_probs + 1e-10)))
        # convert quantized from BLC -> BCL
        return loss, quantized.permute(0, 2, 1).contiguous(), perplexity, encodings


class Model(nn.Module):
    def __init__(self, num_hiddens=16, num_embeddings=8, embedding_dim=4, commitment_cost=0.25):
        super(Model, self).__init__()
        self._encoder = nn.Sequential(
            nn.Conv1d(2, num_hiddens, kernel_size=4, stride=2, padding=1), nn.ReLU(True),
            nn.Conv1d(num_hiddens, num_hiddens, kernel_size=3, padding=1))
        self._pre_vq_conv = nn.Conv1d(num_hiddens, embedding_dim, kernel_size=1, stride=1)
        self._vq_vae = VectorQuantizer(num_embeddings, embedding_dim, commitment_cost)
        self._decoder = nn.Sequential(
            nn.Conv1d(embedding_dim, num_hiddens, kernel_size=3, padding=1), nn.ReLU(True),
            nn.ConvTranspose1d(num_hiddens, 2, kernel_size=4, stride=2, padding=1))

    def forward(self, x):
        z = self._encoder(x)
        z = self._pre_vq_conv(z)
        loss, quantized, perplexity, _ = self._vq_vae(z)
        x_recon = self._decoder(quantized)
        return loss, x_recon, perplexity


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = Model()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 16, dtype=np.float32)
    data = np.stack([np.stack([np.sin(2 * np.pi * (t * f + p)), np.cos(2 * np.pi * t * f)])
                     for f, p in rng.uniform(0.5, 2, (32, 2))]).astype(np.float32)
    data_variance = float(np.var(data))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, amsgrad=False)

    def train_step(data):
        optimizer.zero_grad()
        vq_loss, data_recon, perplexity = model(data)
        recon_error = F.mse_loss(data_recon, data) / data_variance
        loss = recon_error + vq_loss
        loss.backward()
        optimizer.step()
        return recon_error, perplexity

    step = torch.compile(train_step) if compiled else train_step
    model.train()
    train_res_recon_error = []
    train_res_perplexity = []
    for i in range(12):
        batch = torch.from_numpy(data[(i % 4) * 8:(i % 4) * 8 + 8])
        recon_error, perplexity = step(batch)
        train_res_recon_error.append(recon_error.item())
        train_res_perplexity.append(perplexity.item())
    model.eval()
    with torch.no_grad():
        _, recon, _ = model(torch.from_numpy(data[:8]))
    return {"losses": train_res_recon_error + train_res_perplexity + [float(recon.abs().sum())],
            "weights": w, "fn": step}
