# In the manner of yunjey/pytorch-tutorial's "basics": logistic regression (one nn.Linear,
# CrossEntropyLoss, SGD) and a feedforward network (fc1/ReLU/fc2, Adam) on MNIST-like
# data, images reshaped with reshape(-1, input_size), a device picked from
# torch.cuda.is_available(), a test loop that counts correct predictions from
# torch.max(outputs.data, 1) and torch.save of the state dict.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

input_size = 64
hidden_size = 32
num_classes = 10
num_epochs = 2
batch_size = 16
learning_rate = 0.01


class NeuralNet(nn.Module):
    def __init__(self, input_size, hidden_size, num_classes):
        super(NeuralNet, self).__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        return out


def make_loaders():
    rng = np.random.default_rng(1)
    images = rng.random((96, 1, 8, 8)).astype(np.float32)
    labels = (images.reshape(96, -1)[:, :10].argmax(1)).astype(np.int64)
    train_dataset = torch.utils.data.TensorDataset(torch.from_numpy(images[:64]), torch.from_numpy(labels[:64]))
    test_dataset = torch.utils.data.TensorDataset(torch.from_numpy(images[64:]), torch.from_numpy(labels[64:]))
    train_loader = torch.utils.data.DataLoader(dataset=train_dataset, batch_size=batch_size, shuffle=False)
    test_loader = torch.utils.data.DataLoader(dataset=test_dataset, batch_size=batch_size, shuffle=False)
    return train_loader, test_loader


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    train_loader, test_loader = make_loaders()
    logreg = nn.Linear(input_size, num_classes)
    model = NeuralNet(input_size, hidden_size, num_classes).to(device)
    if weights is not None:
        logreg.load_state_dict({k[7:]: torch.tensor(v) for k, v in weights.items() if k.startswith('logreg.')})
        model.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith('ffn.')})
    w = {'logreg.' + k: v.detach().numpy().copy() for k, v in logreg.state_dict().items()}
    w.update({'ffn.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    losses = []

    # Logistic regression
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(logreg.parameters(), lr=learning_rate * 10)

    def logreg_step(images, labels):
        outputs = logreg(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step1 = torch.compile(logreg_step) if compiled else logreg_step
    total_step = len(train_loader)
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.reshape(-1, input_size)
            loss = step1(images, labels)
            if (i + 1) % 2 == 0:
                losses.append(loss.item())
    with torch.no_grad():
        correct = 0
        total = 0
        for images, labels in test_loader:
            images = images.reshape(-1, input_size)
            outputs = logreg(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum()
        losses.append(float(100 * correct / total))

    # Feedforward neural network
    criterion = nn.CrossEntropyLoss()
    optimizer2 = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def ffn_step(images, labels):
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer2.zero_grad()
        loss.backward()
        optimizer2.step()
        return loss

    step2 = torch.compile(ffn_step) if compiled else ffn_step
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.reshape(-1, input_size).to(device)
            labels = labels.to(device)
            loss = step2(images, labels)
            losses.append(loss.item())
    with torch.no_grad():
        correct = 0
        total = 0
        for images, labels in test_loader:
            images = images.reshape(-1, input_size).to(device)
            labels = labels.to(device)
            outputs = model(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
        losses.append(100 * correct / total)
    with tempfile.TemporaryDirectory() as d:
        torch.save(model.state_dict(), os.path.join(d, 'model.ckpt'))
        state = torch.load(os.path.join(d, 'model.ckpt'))
        losses.append(float(state['fc2.bias'].sum()))
    return {"losses": losses, "weights": w, "fn": [step1, step2]}
