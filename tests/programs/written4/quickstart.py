# In the manner of the PyTorch "Learn the Basics" series: a custom Dataset subclass with
# transform and target_transform (a one-hot target through scatter_), DataLoader,
# a NeuralNetwork with nn.Flatten and nn.Sequential, a device from torch.accelerator,
# train(dataloader, model, loss_fn, optimizer) and test(...) loops with model.train() /
# model.eval() and torch.no_grad(), `(pred.argmax(1) == y).type(torch.float).sum().item()`,
# torch.save(model.state_dict()) and load_state_dict(torch.load(weights_only=True)),
# nn.Softmax(dim=1) on the logits, and the autograd tour (requires_grad, grad_fn,
# binary_cross_entropy_with_logits, detach, backward with retain_graph).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import os
import tempfile

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset, DataLoader

device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"


class CustomImageDataset(Dataset):
    def __init__(self, images, labels, transform=None, target_transform=None):
        self.images = images
        self.img_labels = labels
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        image = self.images[idx]
        label = int(self.img_labels[idx])
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


def to_tensor(image):
    return torch.from_numpy(image).unsqueeze(0)


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(8 * 8, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(6)
    images = rng.random((96, 8, 8)).astype(np.float32)
    labels = images.reshape(96, -1)[:, ::7][:, :10].argmax(1)
    training_data = CustomImageDataset(images[:64], labels[:64], transform=to_tensor)
    test_data = CustomImageDataset(images[64:], labels[64:], transform=to_tensor)
    train_dataloader = DataLoader(training_data, batch_size=16)
    test_dataloader = DataLoader(test_data, batch_size=16)

    model = NeuralNetwork().to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items() if not k.startswith('tour.')})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    losses = []

    learning_rate = 1e-2
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.9)

    def train_step(X, y):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    step = torch.compile(train_step) if compiled else train_step

    def train(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            X, y = X.to(device), y.to(device)
            loss = step(X, y)
            loss, current = loss.item(), (batch + 1) * len(X)
            losses.append(loss)

    def test(dataloader, model, loss_fn):
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                X, y = X.to(device), y.to(device)
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        test_loss /= num_batches
        correct /= size
        losses.extend([test_loss, correct])

    epochs = 3
    for t in range(epochs):
        train(train_dataloader, model, loss_fn, optimizer)
        test(test_dataloader, model, loss_fn)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pth")
        torch.save(model.state_dict(), path)
        model = NeuralNetwork().to(device)
        model.load_state_dict(torch.load(path, weights_only=True))
    model.eval()
    x, y = test_data[0][0], test_data[0][1]
    with torch.no_grad():
        logits = model(x)
        pred_probab = nn.Softmax(dim=1)(logits)
        y_pred = pred_probab.argmax(1)
    losses += [pred_probab.max().item(), y_pred.item(), int(y)]

    # one-hot targets through a target_transform
    onehot = CustomImageDataset(images[:4], labels[:4], transform=to_tensor,
                                target_transform=lambda y: torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(y), value=1))
    losses += onehot[3][1].tolist()

    # the autograd tour
    x = torch.ones(5)
    y = torch.zeros(3)
    wt = torch.tensor(rng.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
    b = torch.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    z = torch.matmul(x, wt) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    assert z.grad_fn is not None and z.requires_grad
    loss.backward()
    losses += [loss.item()] + wt.grad.flatten().tolist() + b.grad.tolist()
    with torch.no_grad():
        z = torch.matmul(x, wt) + b
    losses.append(float(z.requires_grad))
    z_det = (torch.matmul(x, wt) + b).detach()
    losses.append(float(z_det.requires_grad))
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    first = inp.grad.clone()
    out.backward(torch.ones_like(out), retain_graph=True)
    second = inp.grad.clone()
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    losses += first.flatten().tolist() + second.flatten().tolist() + inp.grad.flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
