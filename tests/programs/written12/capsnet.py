# In the manner of the PyTorch CapsNet implementations (Sabour et al. 2017; e.g.
# higgsfield/Capsule-Network-Tutorial, gram-ai/capsule-networks): a conv stem, primary
# capsules from a conv reshaped by ``.view(x.size(0), -1, dim)``, ``squash`` with
# ``(squared_norm / (1 + squared_norm)) * x / torch.sqrt(squared_norm)``, a 5-D routing
# weight ``W`` of shape (1, routes, caps, out, in) multiplied by ``torch.matmul`` against
# ``x.unsqueeze(4)`` broadcast with ``torch.stack([x] * n, dim=2)``, dynamic routing with
# ``F.softmax(b_ij, dim=2)``, ``u_hat.detach()`` in the inner iterations and the agreement
# ``torch.matmul(u_hat.transpose(3, 4), v_j)``; one-hot targets by
# ``torch.sparse.torch.eye(n).index_select(dim=0, index=target)``; a decoder masked by
# ``torch.eye(10).index_select(dim=0, index=max_length_indices)``, the margin loss
# ``F.relu(0.9 - v_c).view(b, -1) ** 2`` plus a scaled reconstruction loss, Adam and
# ``ExponentialLR``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 4


def squash(input_tensor, dim=-1):
    squared_norm = (input_tensor ** 2).sum(dim, keepdim=True)
    output_tensor = squared_norm * input_tensor / ((1. + squared_norm) * torch.sqrt(squared_norm + 1e-9))
    return output_tensor


class PrimaryCaps(nn.Module):
    def __init__(self, num_capsules=4, in_channels=8, out_channels=4, kernel_size=3):
        super(PrimaryCaps, self).__init__()
        self.capsules = nn.ModuleList([
            nn.Conv2d(in_channels, out_channels, kernel_size=kernel_size, stride=2, padding=0)
            for _ in range(num_capsules)])

    def forward(self, x):
        u = [capsule(x) for capsule in self.capsules]
        u = torch.stack(u, dim=1)
        u = u.view(x.size(0), -1, len(self.capsules))
        return squash(u)


class DigitCaps(nn.Module):
    def __init__(self, num_capsules=NUM_CLASSES, num_routes=16, in_channels=4, out_channels=6, routing_iters=3):
        super(DigitCaps, self).__init__()
        self.in_channels = in_channels
        self.num_routes = num_routes
        self.num_capsules = num_capsules
        self.routing_iters = routing_iters
        self.W = nn.Parameter(0.1 * torch.randn(1, num_routes, num_capsules, out_channels, in_channels))

    def forward(self, x):
        batch_size = x.size(0)
        x = torch.stack([x] * self.num_capsules, dim=2).unsqueeze(4)
        W = torch.cat([self.W] * batch_size, dim=0)
        u_hat = torch.matmul(W, x)
        b_ij = torch.zeros(1, self.num_routes, self.num_capsules, 1)
        u_hat_detached = u_hat.detach()
        for iteration in range(self.routing_iters):
            c_ij = F.softmax(b_ij, dim=2)
            c_ij = torch.cat([c_ij] * batch_size, dim=0).unsqueeze(4)
            if iteration == self.routing_iters - 1:
                s_j = (c_ij * u_hat).sum(dim=1, keepdim=True)
                v_j = squash(s_j, dim=3)
            else:
                s_j = (c_ij * u_hat_detached).sum(dim=1, keepdim=True)
                v_j = squash(s_j, dim=3)
                a_ij = torch.matmul(u_hat_detached.transpose(3, 4), torch.cat([v_j] * self.num_routes, dim=1))
                b_ij = b_ij + a_ij.squeeze(4).mean(dim=0, keepdim=True)
        return v_j.squeeze(1)


class Decoder(nn.Module):
    def __init__(self, caps_dim=6, out=64):
        super(Decoder, self).__init__()
        self.reconstraction_layers = nn.Sequential(
            nn.Linear(caps_dim * NUM_CLASSES, 32), nn.ReLU(inplace=True),
            nn.Linear(32, out), nn.Sigmoid())

    def forward(self, x, data):
        classes = torch.sqrt((x ** 2).sum(2))
        classes = F.softmax(classes, dim=1)
        _, max_length_indices = classes.max(dim=1)
        masked = torch.eye(NUM_CLASSES)
        masked = masked.index_select(dim=0, index=max_length_indices.squeeze(1).data)
        t = (x * masked[:, :, None, None]).view(x.size(0), -1)
        reconstructions = self.reconstraction_layers(t)
        reconstructions = reconstructions.view(-1, 1, 8, 8)
        return reconstructions, masked


class CapsNet(nn.Module):
    def __init__(self):
        super(CapsNet, self).__init__()
        self.conv_layer = nn.Sequential(nn.Conv2d(1, 8, kernel_size=3, stride=1), nn.ReLU())
        self.primary_capsules = PrimaryCaps()
        self.digit_capsules = DigitCaps()
        self.decoder = Decoder()
        self.mse_loss = nn.MSELoss()

    def forward(self, data):
        output = self.digit_capsules(self.primary_capsules(self.conv_layer(data)))
        reconstructions, masked = self.decoder(output, data)
        return output, reconstructions, masked

    def loss(self, data, x, target, reconstructions):
        return self.margin_loss(x, target) + self.reconstruction_loss(data, reconstructions)

    def margin_loss(self, x, labels, size_average=True):
        batch_size = x.size(0)
        v_c = torch.sqrt((x ** 2).sum(dim=2, keepdim=True))
        left = F.relu(0.9 - v_c).view(batch_size, -1) ** 2
        right = F.relu(v_c - 0.1).view(batch_size, -1) ** 2
        loss = labels * left + 0.5 * (1.0 - labels) * right
        loss = loss.sum(dim=1).mean()
        return loss

    def reconstruction_loss(self, data, reconstructions):
        loss = self.mse_loss(reconstructions.view(reconstructions.size(0), -1), data.view(reconstructions.size(0), -1))
        return loss * 0.0005 * 64


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1202)
    capsule_net = CapsNet()
    if weights is not None:
        capsule_net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in capsule_net.state_dict().items()}
    optimizer = torch.optim.Adam(capsule_net.parameters(), lr=5e-3)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
    batches = [(torch.from_numpy(rng.random((5, 1, 8, 8)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, NUM_CLASSES, 5))) for _ in range(3)]

    def train_step(data, target):
        target = torch.sparse.torch.eye(NUM_CLASSES).index_select(dim=0, index=target)
        optimizer.zero_grad()
        output, reconstructions, masked = capsule_net(data)
        loss = capsule_net.loss(data, output, target, reconstructions)
        loss.backward()
        optimizer.step()
        correct = (masked.argmax(1) == target.argmax(1)).sum()
        return loss, correct

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        capsule_net.train()
        train_loss = 0
        for batch_id, (data, target) in enumerate(batches):
            loss, correct = step(data, target)
            train_loss += loss.item()
            losses += [loss.item(), correct.item()]
        scheduler.step()
        losses.append(train_loss / len(batches))
    capsule_net.eval()
    with torch.no_grad():
        output, reconstructions, masked = capsule_net(batches[0][0])
        losses += [float(output.norm(dim=2).sum()), float(reconstructions.mean())]
    return {"losses": losses, "weights": w, "fn": step}
