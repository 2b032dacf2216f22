# In the manner of yunjey/pytorch-tutorial's recurrent and bidirectional recurrent
# networks: images read row by row as sequences (reshape(-1, sequence_length,
# input_size)), nn.LSTM(batch_first=True) with two layers (bidirectional in the second
# model), zero initial states built with torch.zeros(...).to(device) inside forward, the
# last time step's output out[:, -1, :] into a Linear.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

sequence_length = 6
input_size = 6
hidden_size = 12
num_layers = 2
num_classes = 4
batch_size = 8
learning_rate = 0.003


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
        out, _ = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return out


class BiRNN(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super(BiRNN, self).__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(hidden_size * 2, num_classes)  # 2 for bidirection

    def forward(self, x):
        h0 = torch.zeros(self.num_layers * 2, x.size(0), self.hidden_size).to(device)
        c0 = torch.zeros(self.num_layers * 2, x.size(0), self.hidden_size).to(device)
        out, _ = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return out


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    images = rng.random((32, 1, 6, 6)).astype(np.float32)
    labels = (images[:, 0, :, 0].argmax(1) % num_classes).astype(np.int64)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(images), torch.tensor(labels)),
        batch_size=batch_size, shuffle=False)
    models = [RNN(input_size, hidden_size, num_layers, num_classes).to(device),
              BiRNN(input_size, hidden_size, num_layers, num_classes).to(device)]
    w = {}
    for j, model in enumerate(models):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    losses = []
    fns = []
    for model in models:
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

        def train_step(images, labels):
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        for epoch in range(2):
            for i, (images, labels) in enumerate(loader):
                images = images.reshape(-1, sequence_length, input_size).to(device)
                labels = labels.to(device)
                loss = step(images, labels)
                losses.append(loss.item())
        with torch.no_grad():
            correct = 0
            total = 0
            for images, labels in loader:
                images = images.reshape(-1, sequence_length, input_size).to(device)
                outputs = model(images)
                _, predicted = torch.max(outputs.data, 1)
                total += labels.size(0)
                correct += (predicted == labels).sum().item()
            losses.append(100 * correct / total)
    return {"losses": losses, "weights": w, "fn": fns}
